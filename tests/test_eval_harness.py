"""The evaluation harness on the tiny corpus: contract files, leakage filter, resume, config pinning, CLI."""

from __future__ import annotations

import json

import pytest

from crase_core.errors import InputError
from crase_core.evaluation.harness import EvalJob, read_rows, run_eval
from crase_core.settings.pipeline import PipelineSettings
from crase_core.settings.runtime import RuntimeConfig

KEYS = [f"recall@{k}" for k in (5, 10, 20, 30, 40, 50)] + [f"map@{k}" for k in (5, 10, 20, 30, 40, 50)]


@pytest.fixture()
def bench(tmp_path):
    path = tmp_path / "bench.jsonl"
    rows = [
        # from paper 9901001 (1999-01): it, and 9902001 / 0001001 / 0002001 (later months) must stay invisible
        {"qid": "cit", "query": "black hole microstates entropy", "relevant": ["9801001", "9802001"],
         "paper_id": "9901001", "year": 1999},
        {"qid": "nl", "query": "lattice glueball spectrum", "relevant": ["9902001"]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _job(bench, out, tiny_corpus_dir, tmp_path, method="crase", **kw):
    return EvalJob(bench=str(bench), out=str(out), method=method, settings=PipelineSettings(m=2, k=10),
                   runtime=RuntimeConfig(corpus_dir=str(tiny_corpus_dir), cache_dir=str(tmp_path / "cache")), **kw)


@pytest.mark.parametrize("method", ["crase", "bm25", "seeds", "ppr-unpruned", "citations", "recency"])
def test_every_method_obeys_the_leakage_filter_and_the_contract(bench, tiny_corpus_dir, tmp_path, method):
    out = tmp_path / method
    summary = run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, method), progress=lambda s: None)
    saved = json.loads((out / "summary.json").read_text())
    assert all(isinstance(saved[k], float) for k in KEYS) and saved["queries"] == 2
    assert summary["recall@50"] == saved["recall@50"]
    rows = {r["qid"]: r for r in read_rows(out / "per_query.jsonl")}
    assert set(rows) == {"cit", "nl"}
    hidden = {"9901001", "9902001", "0001001", "0002001"}
    assert not hidden & set(rows["cit"]["ranked"])
    # the natural-language query has no paper: the whole corpus is visible and its target is found
    assert "9902001" in rows["nl"]["ranked"] and rows["nl"]["hits@50"] == 1
    # pooled recall from the rows
    assert saved["recall@50"] == pytest.approx((rows["cit"]["hits@50"] + rows["nl"]["hits@50"]) / 3)


def test_resume_skips_done_queries_and_survives_a_torn_line(bench, tiny_corpus_dir, tmp_path):
    out = tmp_path / "run"
    first = run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, "bm25"), progress=lambda s: None)
    path = out / "per_query.jsonl"
    lines = path.read_text().splitlines()
    # simulate a crash in the middle of writing the second row
    path.write_text(lines[0] + "\n" + lines[1][:20])
    messages: list[str] = []
    again = run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, "bm25"), progress=messages.append)
    assert "1 already done, 1 to run" in messages[0]
    assert again["recall@50"] == first["recall@50"] and again["queries"] == 2
    # a third run has nothing to do
    messages.clear()
    run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, "bm25"), progress=messages.append)
    assert "2 already done, 0 to run" in messages[0]


def test_a_different_configuration_is_refused_not_mixed(bench, tiny_corpus_dir, tmp_path):
    out = tmp_path / "run"
    run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, "bm25"), progress=lambda s: None)
    with pytest.raises(InputError, match="different configuration.*method"):
        run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, "recency"), progress=lambda s: None)
    run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, "recency"), fresh=True, progress=lambda s: None)
    assert {r["method"] for r in read_rows(out / "per_query.jsonl")} == {"recency"}


def test_parallel_workers_give_the_same_numbers(bench, tiny_corpus_dir, tmp_path):
    one = run_eval(_job(bench, tmp_path / "w1", tiny_corpus_dir, tmp_path), progress=lambda s: None)
    two = run_eval(_job(bench, tmp_path / "w2", tiny_corpus_dir, tmp_path, workers=2), progress=lambda s: None)
    assert {k: one[k] for k in KEYS} == {k: two[k] for k in KEYS}


def test_seed_corruption_replaces_the_seeds(bench, tiny_corpus_dir, tmp_path):
    out = tmp_path / "lex"
    run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, corrupt_seeds="random"), progress=lambda s: None)
    rows = read_rows(out / "per_query.jsonl")
    assert all(r["corruption"] == "random" and r["n_injected"] <= r["n_clean_seeds"] for r in rows)
    assert all(any("seeds injected" in w for w in r["warnings"]) for r in rows)


def test_cli_writes_summary_report_and_plots(bench, tiny_corpus_dir, tmp_path, capsys):
    from crase_core.cli.main import main

    out = tmp_path / "cli"
    rc = main(["eval", str(bench), "--out", str(out), "--method", "bm25", "--corpus", str(tiny_corpus_dir)])
    assert rc == 0
    assert "R@50" in capsys.readouterr().out
    for name in ("summary.json", "per_query.jsonl", "report.md", "recall_at_k.png"):
        assert (out / name).is_file()
    assert "| bm25 |" in (out / "report.md").read_text()
    assert main(["eval", str(tmp_path / "nope.jsonl"), "--out", str(out)]) == 2
