"""Evaluation on any corpus (issue 23): the leakage filter reads the corpus's dates, never an id pattern; a
query it cannot date is a counted error and `crase eval` says so with a non-zero exit; a refs-style query
without paper_id is refused; `crase bench make` builds a refs-style benchmark from any corpus."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from crase_core.cli.main import main
from crase_core.errors import InputError
from crase_core.evaluation.benchmark import BenchQuery, load_benchmark, query_filter
from crase_core.evaluation.make_bench import refs_benchmark, visible_reference_counts
from crase_core.evaluation.run_file import read_run
from crase_core.sources.local import LocalSource
from crase_core.store.corpus import UNDATED_MONTH

TOPICS = ["graph partitioning heuristics", "neural network pruning", "query expansion retrieval",
          "protein folding simulation", "citation recommendation", "sparse matrix factorization"]


def citeseer_like(folder: Path) -> Path:
    """A small CS corpus with ids that are no arXiv numbers (``cs0001`` …, and seven-digit ``1203000``-style
    ones), dated by year or month, each paper citing up to six older ones on its topic."""
    folder.mkdir(parents=True, exist_ok=True)
    papers, lines = [], []
    for i in range(60):
        topic = TOPICS[i % len(TOPICS)]
        pid = f"cs{i:04d}" if i % 2 else f"{1203000 + i * 3:07d}"
        rec = {"id": pid, "title": f"On {topic}, part {i}", "abstract": f"We study {topic} in setting {i}.",
               "year": 1990 + i // 6}
        if i % 3 == 0:
            rec["date"] = f"{1990 + i // 6}-{1 + i % 12:02d}"
        papers.append(rec)
    for i, p in enumerate(papers):
        older = [q for q in papers[:i] if q["title"].split(",")[0] == p["title"].split(",")[0]]
        lines += [f"{p['id']}\t{q['id']}" for q in older[-6:]]
    papers.append({"id": "undated1", "title": "On graph partitioning heuristics, undated", "abstract": "graph"})
    lines.append(f"undated1\t{papers[0]['id']}")
    (folder / "papers.jsonl").write_text("".join(json.dumps(p) + "\n" for p in papers), encoding="utf-8")
    (folder / "citations.tsv").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return folder


@pytest.fixture
def corpus_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    from crase_core import runtime

    runtime._local_source.cache_clear()
    return citeseer_like(tmp_path / "cs")


def test_bench_make_writes_a_deterministic_refs_benchmark(corpus_dir, tmp_path, capsys):
    out = tmp_path / "b.jsonl"
    assert main(["bench", "make", str(corpus_dir), "--kind", "refs", "--out", str(out), "--n", "8",
                 "--min-refs", "3"]) == 0
    assert "8 refs-style queries" in capsys.readouterr().out
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 8 and [d["qid"] for d in lines] == sorted(d["qid"] for d in lines)
    source = LocalSource.open(corpus_dir)
    c = source.corpus
    for d in lines:
        i = c.index[d["paper_id"]]
        assert d["kind"] == "refs" and d["query"] == c.papers[i].title and d["year"] == c.papers[i].year
        assert d["date"] == f"{int(c.months[i]) // 100}-{int(c.months[i]) % 100:02d}"
        refs = set(source.references(d["paper_id"]).ids)
        assert set(d["relevant"]) <= refs and len(d["relevant"]) >= 3
        assert all(int(c.months[c.index[r]]) <= int(c.months[i]) for r in d["relevant"])
    again = tmp_path / "again.jsonl"
    main(["bench", "make", str(corpus_dir), "--out", str(again), "--n", "8", "--min-refs", "3"])
    assert again.read_text() == out.read_text()  # deterministic
    other, _ = refs_benchmark(c, n=8, min_refs=3, seed=1)
    assert [d["qid"] for d in other] != [d["qid"] for d in lines]  # another seed, another sample


def test_visible_reference_counts_by_hand(corpus_dir):
    c = LocalSource.open(corpus_dir).corpus
    counts = visible_reference_counts(c)
    for i in range(len(c)):
        want = sum(1 for j in c.references_of(i) if c.months[j] <= c.months[i] and c.months[j] < UNDATED_MONTH)
        assert counts[i] == want
    assert counts[c.index["undated1"]] == 1 and int(c.months[c.index["undated1"]]) == UNDATED_MONTH


def test_eval_on_a_corpus_whose_ids_are_not_hep_th_runs_with_no_error(corpus_dir, tmp_path, capsys):
    bench, out = tmp_path / "b.jsonl", tmp_path / "out"
    main(["bench", "make", str(corpus_dir), "--out", str(bench), "--n", "6", "--min-refs", "3"])
    capsys.readouterr()
    assert main(["eval", str(bench), "--out", str(out), "--corpus", str(corpus_dir)]) == 0
    run = read_run(out)
    rows = run.rows
    assert len(rows) == 6 and not any(r.get("error") for r in rows)
    assert run.summary["errors"] == 0
    assert sum(r["hits@50"] for r in rows) > 0
    # the filter hid each query's paper and everything dated after it
    source = LocalSource.open(corpus_dir)
    for q, r in zip(load_benchmark(bench), rows, strict=True):
        month = int(source.corpus.months[source.corpus.index[q.paper_id]])
        assert q.paper_id not in r["ranked"]
        assert all(int(source.corpus.months[source.corpus.index[p]]) <= month for p in r["ranked"])


def test_the_filter_takes_dates_from_the_corpus_not_the_id(corpus_dir):
    source = LocalSource.open(corpus_dir)
    c = source.corpus
    pid = "1203000"  # seven digits: read as an old-style arXiv number it would be 2012-03; the corpus says 1990-01
    f = query_filter(BenchQuery("q", "x", ("cs0001",), paper_id=pid), source)
    assert f.max_month == int(c.months[c.index[pid]]) == 199001 and f.exclude == frozenset({pid})
    year_only = "cs0001"  # dated by year only: December of its year, so the same year stays visible
    assert query_filter(BenchQuery("q", "x", ("x",), paper_id=year_only), source).max_month == 199012
    # an undated corpus paper is hidden from every dated query
    visible = source.restricted(f).visible
    assert not visible[c.index["undated1"]] and np.all(~visible | (c.months <= 199001))


def test_a_query_the_filter_cannot_date_is_an_error_and_eval_exits_non_zero(corpus_dir, tmp_path, capsys):
    bench, out = tmp_path / "b.jsonl", tmp_path / "out"
    good = {"qid": "ok", "query": "graph partitioning heuristics", "relevant": ["1203000"], "paper_id": "cs0007"}
    undated = {"qid": "undated", "query": "graph partitioning", "relevant": ["1203000"], "paper_id": "undated1"}
    missing = {"qid": "missing", "query": "graph partitioning", "relevant": ["1203000"], "paper_id": "nope"}
    bench.write_text("".join(json.dumps(d) + "\n" for d in (good, undated, missing)))
    assert main(["eval", str(bench), "--out", str(out), "--corpus", str(corpus_dir)]) == 3
    err = capsys.readouterr().err
    assert "2 of 3 queries errored (first: undated: query undated: the date of paper 'undated1' is not known" in err
    rows = {r["qid"]: r for r in read_run(out).rows}
    assert not rows["ok"].get("error") and rows["undated"]["ranked"] == [] and "not known" in rows["missing"]["error"]
    assert read_run(out).summary["errors"] == 2


def test_dropping_paper_id_from_a_refs_query_does_not_turn_the_filter_off(corpus_dir, tmp_path, capsys):
    source = LocalSource.open(corpus_dir)
    bench = tmp_path / "b.jsonl"
    lines, _ = refs_benchmark(source.corpus, n=3, min_refs=3)
    stripped = [{k: v for k, v in d.items() if k not in ("paper_id", "kind")} for d in lines]
    for d in stripped:
        with pytest.raises(InputError, match=f"title of corpus paper '{d['qid'][5:]}'"):
            query_filter(BenchQuery(d["qid"], d["query"], tuple(d["relevant"])), source)
    with pytest.raises(InputError, match="'kind': 'refs'"):
        query_filter(BenchQuery("k", "any text", ("cs0001",), extra={"kind": "refs"}), source)
    bench.write_text("".join(json.dumps(d) + "\n" for d in stripped))
    assert main(["eval", str(bench), "--out", str(tmp_path / "out"), "--corpus", str(corpus_dir)]) == 3
    assert "3 of 3 queries errored" in capsys.readouterr().err
    # a question that is no paper's title runs without a filter, as before
    assert query_filter(BenchQuery("free", "how do I partition graphs", ("1203000",)), source) is None
