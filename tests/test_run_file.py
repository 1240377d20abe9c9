"""The run file (``DIR/run.json.gz``): what it holds, how it is read with bounds, the older form packed into
it, and the committed results in ``benchmarks/results`` (one file per run, enough for the paired tests)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from crase_core.evaluation.metrics import KS, aggregate_rows
from crase_core.evaluation.report import paired_table
from crase_core.evaluation.run_file import (
    RUN_FILE,
    RunFileError,
    is_run,
    pack_legacy,
    read_run,
    run_rows,
    write_run,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
ROWS = [{"qid": "q1", "method": "bm25", "n_relevant": 2, "hits@5": 1, "ap@5": 0.1 + 0.2, "ranked": ["a", "b"],
         "source_ids": ["x", "y"], "warnings": ["\ud800 lone"], "wall_s": float("nan")},
        {"qid": "q2", "method": "bm25", "n_relevant": 1, "hits@5": 0, "ap@5": 0.0, "ranked": [], "error": "boom"}]


def test_a_run_file_gives_back_what_was_written_and_the_same_bytes_each_time(tmp_path):
    path = write_run(tmp_path / "run", {"pin": 2, "method": "bm25"}, {"recall@5": 1 / 3}, ROWS)
    assert path == tmp_path / "run" / RUN_FILE and is_run(tmp_path / "run")
    run = read_run(tmp_path / "run")
    assert run.config == {"pin": 2, "method": "bm25"} and run.summary == {"recall@5": 1 / 3} and run.rankings
    assert json.dumps(run.rows) == json.dumps(ROWS)  # floats to the last bit, NaN and a lone surrogate too
    again = write_run(tmp_path / "again", {"pin": 2, "method": "bm25"}, {"recall@5": 1 / 3}, ROWS)
    assert again.read_bytes() == path.read_bytes()  # no time or name in the gzip header


def test_without_rankings_the_ranked_lists_are_left_out_and_nothing_else(tmp_path):
    write_run(tmp_path, {}, {}, ROWS, rankings=False)
    run = read_run(tmp_path)
    assert not run.rankings
    assert json.dumps(run.rows) == json.dumps([{k: v for k, v in r.items() if k not in ("ranked", "source_ids")}
                                               for r in ROWS])


def _doc(**doc: object) -> bytes:
    return gzip.compress(json.dumps({"format": "crase-eval-run", "version": 1, "config": {}, "summary": {},
                                     "rows": [], **doc}).encode())


@pytest.mark.parametrize("data, what", [
    (b'{"format": "crase-eval-run"}', "not gzip data"),
    (_doc()[:-10], "the gzip data is cut short"),
    (gzip.compress(b"{not json"), "not valid JSON"),
    (gzip.compress(b"\xff\xfe"), "not JSON text"),
    (gzip.compress(b"[" * 100_000), "not JSON text"),
    (gzip.compress(b'{"format": "other"}'), "not a crase-eval-run file"),
    (_doc(version=2), "version 2, this Crase reads version 1"),
    (_doc(summary=[1]), "its config or summary is not an object"),
    (_doc(rows=[{"no": "qid"}]), "its rows are not a list of per-query objects"),
], ids=["not-gzip", "cut-short", "bad-json", "not-utf8", "deep", "other-format", "newer", "summary-list", "rows"])
def test_an_unusable_run_file_is_one_error_naming_it(tmp_path, data, what):
    (tmp_path / RUN_FILE).write_bytes(data)
    with pytest.raises(RunFileError) as e:
        read_run(tmp_path)
    assert str(e.value).startswith(f"{tmp_path / RUN_FILE} is unreadable: {what}")


def test_reading_is_bounded_as_stored_and_once_decompressed(tmp_path):
    write_run(tmp_path, {}, {}, [{"qid": f"q{i}", "pad": "x" * 1000} for i in range(100)])
    stored = (tmp_path / RUN_FILE).stat().st_size
    with pytest.raises(RunFileError, match="allowed"):
        read_run(tmp_path, max_file_bytes=stored - 1)
    with pytest.raises(RunFileError, match="more than 50,000 bytes once decompressed"):
        read_run(tmp_path, max_json_bytes=50_000)  # a small file that decompresses to 100 KB
    assert len(read_run(tmp_path, max_file_bytes=stored, max_json_bytes=200_000).rows) == 100
    with pytest.raises(RunFileError, match="no such run file"):
        read_run(tmp_path / "missing")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / RUN_FILE)
    with pytest.raises(RunFileError, match="not a regular file"):
        read_run(tmp_path)


def test_a_folder_of_the_older_form_packs_into_one_file_with_the_same_numbers(tmp_path):
    old = tmp_path / "run"
    old.mkdir()
    config, summary = {"pin": 2, "method": "crase"}, {"recall@5": 0.1 + 0.2, "queries": 2}
    (old / "config.json").write_text(json.dumps(config, indent=2))
    (old / "summary.json").write_text(json.dumps(summary, indent=2))
    lines = [json.dumps(r) for r in ROWS]
    (old / "per_query.jsonl").write_text(lines[1] + "\n" + lines[0] + "\n" + lines[0][:15])  # a torn last line
    for name in (".lock", "report.md"):
        (old / name).touch()
    pack_legacy(old)
    assert sorted(p.name for p in old.iterdir()) == ["report.md", RUN_FILE]  # the report is not the run's data
    run = read_run(old)
    assert run.config == config and run.summary == summary
    assert json.dumps(run.rows) == json.dumps([ROWS[1], ROWS[0]])  # in the file's order


# --- the committed results ---------------------------------------------------------------------------------------
COMMITTED = sorted(p.parent for p in RESULTS.rglob(RUN_FILE))


def test_the_committed_results_are_one_file_per_run_and_small():
    assert len(COMMITTED) > 100
    for folder in COMMITTED:
        assert [p.name for p in folder.iterdir() if p.is_file()] == [RUN_FILE], folder
    leftovers = [p for p in RESULTS.rglob("*") if p.name in ("per_query.jsonl", "config.json", ".lock")
                 or p.suffix == ".png"]
    assert not leftovers
    total = sum(p.stat().st_size for p in RESULTS.rglob("*") if p.is_file())
    assert total <= 5 << 20, f"benchmarks/results holds {total:,} bytes"


@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: str(p.relative_to(RESULTS)))
def test_every_committed_run_holds_what_the_paired_tests_and_its_summary_need(folder):
    run = read_run(folder)
    assert run.rows and run.summary["queries"] == len(run.rows)
    assert run.config["bench"].endswith(".jsonl") and run.config["method"] in {r["method"] for r in run.rows}
    for row in run.rows:
        assert isinstance(row["n_relevant"], int)
        assert all(isinstance(row[f"hits@{k}"], int) and isinstance(row[f"ap@{k}"], float) for k in KS)
    again = aggregate_rows(run.rows)  # the same sums, up to the order the rows were added in
    assert again == pytest.approx({k: run.summary[k] for k in again}, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("bench", ["hepth_refs_dev", "hepth_litsearch_dev"])
def test_the_default_and_bm25_keep_their_rankings_for_the_comparisons(bench):
    crase, bm25 = read_run(RESULTS / bench / "crase"), read_run(RESULTS / bench / "bm25")
    assert crase.rankings and bm25.rankings
    assert all(len(r["ranked"]) == 50 or r.get("error") for r in crase.rows)
    # the paired permutation test runs on the committed rows, pairing queries by qid
    table = paired_table(("bm25", bm25.rows), [("crase", run_rows(RESULTS / bench / "crase"))], {})
    assert table.splitlines()[-1].startswith("| all | crase vs bm25 | +")
