"""The evaluation harness on the tiny corpus: the run file, leakage filter, resume, config pinning, CLI."""

from __future__ import annotations

import json

import pytest

from crase_core.errors import InputError
from crase_core.evaluation.harness import JOURNAL, EvalJob, run_eval
from crase_core.evaluation.run_file import read_run, run_rows
from crase_core.runtime import RuntimeConfig
from crase_core.settings.pipeline import PipelineSettings

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
    assert sorted(p.name for p in out.iterdir()) == ["run.json.gz"]  # the run is one file
    run = read_run(out)
    saved = run.summary
    assert all(isinstance(saved[k], float) for k in KEYS) and saved["queries"] == 2
    assert summary == saved and run.config["method"] == method and run.rankings
    rows = {r["qid"]: r for r in run.rows}
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
    done = read_run(out)
    # simulate a crash in the middle of writing the second row: the journal holds the pin, the first row and
    # half of the second; no run file was written yet
    (out / "run.json.gz").unlink()
    lines = [json.dumps({"pin": done.config}), json.dumps(done.rows[0]), json.dumps(done.rows[1])[:20]]
    (out / JOURNAL).write_text("\n".join(lines))
    messages: list[str] = []
    again = run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, "bm25"), progress=messages.append)
    assert "1 already done, 1 to run" in messages[0]
    assert {k: again[k] for k in KEYS} == {k: first[k] for k in KEYS} and again["queries"] == 2

    def timeless(rows):
        return [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]
    assert timeless(read_run(out).rows) == timeless(done.rows)  # the same rows, in the benchmark's order
    assert read_run(out).rows[0] == done.rows[0]  # the one that was done is kept, not rerun
    assert not (out / JOURNAL).exists()  # folded into the run file
    # a third run has nothing to do, and writes the same bytes
    before = (out / "run.json.gz").read_bytes()
    messages.clear()
    run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, "bm25"), progress=messages.append)
    assert "2 already done, 0 to run" in messages[0]
    assert (out / "run.json.gz").read_bytes() == before


def test_an_interrupted_run_saves_what_it_has_and_resumes(bench, tiny_corpus_dir, tmp_path, monkeypatch):
    from crase_core.evaluation import harness

    out = tmp_path / "run"
    real = harness.evaluate_query
    calls = []

    def second_is_interrupted(job, q, dense=None):  # Ctrl-C while the second query runs
        calls.append(q.qid)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(job, q, dense)

    monkeypatch.setattr(harness, "evaluate_query", second_is_interrupted)
    messages: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, "bm25"), progress=messages.append)
    assert "interrupted: 1 of 2 queries saved in" in messages[-1]
    part = read_run(out)
    assert [r["qid"] for r in part.rows] == ["cit"] and part.summary["job"]["complete"] is False
    assert not (out / JOURNAL).exists()
    monkeypatch.setattr(harness, "evaluate_query", real)
    messages.clear()
    whole = run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, "bm25"), progress=messages.append)
    assert "1 already done, 1 to run" in messages[0]
    assert whole["queries"] == 2 and whole["job"]["complete"] is True


def test_a_folder_of_the_older_form_resumes_into_the_run_file(bench, tiny_corpus_dir, tmp_path):
    """config.json + summary.json + per_query.jsonl (what an older Crase wrote) resume as they were, and end
    as the one file."""
    out = tmp_path / "run"
    first = run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, "bm25"), progress=lambda s: None)
    done = read_run(out)
    (out / "run.json.gz").unlink()
    (out / "config.json").write_text(json.dumps(done.config, indent=2, sort_keys=True))
    (out / "summary.json").write_text(json.dumps(done.summary, indent=2))
    (out / "per_query.jsonl").write_text(json.dumps(done.rows[0]) + "\n")
    (out / ".lock").touch()
    messages: list[str] = []
    again = run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, "bm25"), progress=messages.append)
    assert "1 already done, 1 to run" in messages[0] and {k: again[k] for k in KEYS} == {k: first[k] for k in KEYS}
    assert sorted(p.name for p in out.iterdir()) == ["run.json.gz"] and read_run(out).rows[0] == done.rows[0]


def test_a_run_without_rankings_keeps_what_the_paired_tests_compare(bench, tiny_corpus_dir, tmp_path):
    full = run_eval(_job(bench, tmp_path / "full", tiny_corpus_dir, tmp_path, "bm25"), progress=lambda s: None)
    lean = run_eval(_job(bench, tmp_path / "lean", tiny_corpus_dir, tmp_path, "bm25", rankings=False),
                    progress=lambda s: None)
    assert {k: full[k] for k in KEYS} == {k: lean[k] for k in KEYS}
    rows, lean_rows = run_rows(tmp_path / "full"), read_run(tmp_path / "lean")
    assert not lean_rows.rankings and all("ranked" not in r for r in lean_rows.rows)
    assert [{k: v for k, v in r.items() if k != "wall_s"} for r in lean_rows.rows] == [
        {k: v for k, v in r.items() if k not in ("ranked", "source_ids", "wall_s")} for r in rows]


def test_a_different_configuration_is_refused_not_mixed(bench, tiny_corpus_dir, tmp_path):
    out = tmp_path / "run"
    run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, "bm25"), progress=lambda s: None)
    with pytest.raises(InputError, match="different configuration.*method"):
        run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, "recency"), progress=lambda s: None)
    run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, "recency"), fresh=True, progress=lambda s: None)
    assert {r["method"] for r in run_rows(out)} == {"recency"}


def test_parallel_workers_give_the_same_numbers(bench, tiny_corpus_dir, tmp_path):
    one = run_eval(_job(bench, tmp_path / "w1", tiny_corpus_dir, tmp_path), progress=lambda s: None)
    two = run_eval(_job(bench, tmp_path / "w2", tiny_corpus_dir, tmp_path, workers=2), progress=lambda s: None)
    assert {k: one[k] for k in KEYS} == {k: two[k] for k in KEYS}


def test_seed_corruption_replaces_the_seeds(bench, tiny_corpus_dir, tmp_path):
    out = tmp_path / "lex"
    run_eval(_job(bench, out, tiny_corpus_dir, tmp_path, corrupt_seeds="random"), progress=lambda s: None)
    rows = run_rows(out)
    assert all(r["corruption"] == "random" and r["n_injected"] <= r["n_clean_seeds"] for r in rows)
    assert all(any("seeds injected" in w for w in r["warnings"]) for r in rows)


def test_cli_writes_the_run_file_report_and_plots(bench, tiny_corpus_dir, tmp_path, capsys):
    from crase_core.cli.main import main

    out = tmp_path / "cli"
    rc = main(["eval", str(bench), "--out", str(out), "--method", "bm25", "--corpus", str(tiny_corpus_dir)])
    assert rc == 0
    assert "R@50" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["hub_degree.png", "map_at_k.png", "recall_at_k.png",
                                                     "report.md", "run.json.gz"]
    assert "| bm25 |" in (out / "report.md").read_text()
    assert main(["eval", str(tmp_path / "nope.jsonl"), "--out", str(out)]) == 2
