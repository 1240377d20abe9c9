"""Recall-estimate faults: a calibration file that is missing, damaged or for another corpus, and
``crase bench calibrate`` given what it cannot fit on. Each checks the exact message and exit status, that
nothing is written where nothing may be, and what the run says instead of guessing."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from cli_tools import QUERY, crase, one_error
from tiny_corpus import write_corpus

from crase_core.evaluation.run_file import write_run
from crase_core.recall.calibration import CORPUS_FILE
from crase_core.settings.pipeline import PipelineSettings


@pytest.mark.fault_kind("recall-calibration-missing-file")
def test_a_named_calibration_that_does_not_exist_is_refused_before_the_run(tmp_path, capsys):
    missing = tmp_path / "nope.json"
    msg = one_error(crase(capsys, "query", QUERY, "--recall-calibration", missing, "--quiet"))
    assert msg == f"{missing}: no such recall calibration file"


@pytest.mark.fault_kind("recall-calibration-damaged-file")
def test_a_named_damaged_calibration_is_refused_with_its_problem(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}', encoding="utf-8")
    msg = one_error(crase(capsys, "query", QUERY, "--recall-calibration", bad, "--quiet"))
    assert msg == f"recall calibration {bad} is unusable: not a crase-recall-calibration file"
    bad.write_bytes(b"\xff\xfe not json")
    assert "is unusable" in one_error(crase(capsys, "query", QUERY, "--recall-calibration", bad, "--quiet"))


@pytest.mark.fault_kind("recall-calibration-damaged-in-corpus-folder")
def test_a_damaged_calibration_in_the_corpus_folder_leaves_the_run_unestimated_and_says_why(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "tiny")
    (corpus / CORPUS_FILE).write_text("[1, 2", encoding="utf-8")
    r = crase(capsys, "query", "black hole entropy", "--corpus", corpus, "--quiet")
    assert r.code == 0, r.err
    recall = r.out.split("\nRecall: ", 1)[1].split("\nStages:", 1)[0]
    assert recall.startswith("not estimated — recall calibration")
    assert f"{corpus / CORPUS_FILE} is unusable" in " ".join(recall.split())


@pytest.mark.fault_kind("recall-calibration-other-corpus")
def test_a_calibration_of_another_corpus_gives_no_number(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "tiny")
    shipped = Path(__file__).resolve().parents[2] / "crase_core" / "recall" / "calibrations" / "hepth.json"
    (corpus / CORPUS_FILE).write_bytes(shipped.read_bytes())  # hep-th's calibration in another corpus's folder
    r = crase(capsys, "query", "black hole entropy", "--corpus", corpus, "--quiet")
    assert r.code == 0, r.err
    words = " ".join(r.out.split("\nRecall: ", 1)[1].split("\nStages:", 1)[0].split())
    assert "is for the corpus local:hepth@" in words and "This list likely holds" not in words


def _run(folder: Path, method: str = "crase", rows: int = 30) -> Path:
    out = [{"qid": f"q{i}", "method": method, "n_relevant": 4, "hits@50": i % 5,
            "recall_features": {"title_form": 1.0, "text_gap_50": i / rows}, "recall_group": "title",
            "recall_source": "local:tiny@00000000"} for i in range(rows)]
    write_run(folder, {"method": method, "bench": "b.jsonl", "settings": asdict(PipelineSettings())}, {}, out)
    return folder


@pytest.mark.fault_kind("calibrate-unusable-source")
def test_calibrate_refuses_what_it_cannot_fit_on(tmp_path, capsys):
    out = tmp_path / "cal.json"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert one_error(crase(capsys, "bench", "calibrate", empty, "--out", out)) == (
        f"{empty} holds no evaluation run (run.json.gz); give a crase eval --out folder or a benchmark file")
    bm25 = _run(tmp_path / "bm25", method="bm25")
    assert one_error(crase(capsys, "bench", "calibrate", bm25, "--out", out)) == (
        f"{bm25} is a run of the bm25 method; the recall estimator is fitted on runs of the default method (crase)")
    small = _run(tmp_path / "small", rows=8)
    assert one_error(crase(capsys, "bench", "calibrate", small, "--out", out)).startswith(
        "8 usable queries; the recall estimator needs at least 20")
    assert one_error(crase(capsys, "bench", "calibrate", tmp_path / "nowhere", "--out", out)) == (
        f"{tmp_path / 'nowhere'}: no such run folder or benchmark file")
    assert not out.exists()


@pytest.mark.fault_kind("calibrate-output-is-a-folder")
def test_calibrate_into_a_folder_is_refused_and_nothing_is_lost(tmp_path, capsys):
    run = _run(tmp_path / "run")
    target = tmp_path / "taken"
    target.mkdir()
    (target / "keep.txt").write_text("mine", encoding="utf-8")
    msg = one_error(crase(capsys, "bench", "calibrate", run, "--out", target))
    assert str(target) in msg
    assert (target / "keep.txt").read_text(encoding="utf-8") == "mine"
    good = tmp_path / "cal.json"
    assert crase(capsys, "bench", "calibrate", run, "--out", good, "--resamples", "0").code == 0
    assert json.loads(good.read_text(encoding="utf-8"))["corpus"]["source"] == "local:tiny@00000000"
