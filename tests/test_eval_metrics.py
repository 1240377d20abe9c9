"""Recall@K (pooled) and MAP@K (AP ÷ |relevant|) on hand-computed examples; benchmark parsing and leakage filter."""

from __future__ import annotations

import json

import pytest

from crase_core.errors import InputError
from crase_core.evaluation.benchmark import BenchQuery, leakage_filter, load_benchmark
from crase_core.evaluation.metrics import (
    aggregate_rows,
    average_precision,
    evaluate_rankings,
    per_query_metrics,
    recall_hits,
)


def test_average_precision_divides_by_all_relevant():
    ranked = ["a", "x", "b", "y", "c"]
    rel = {"a", "b", "c", "d"}
    # hits at ranks 1, 3, 5: (1/1 + 2/3 + 3/5) / 4
    assert average_precision(ranked, rel, 5) == pytest.approx((1 + 2 / 3 + 3 / 5) / 4)
    assert average_precision(ranked, rel, 2) == pytest.approx(1 / 4)
    assert recall_hits(ranked, rel, 5) == 3 and recall_hits(ranked, rel, 2) == 1
    assert average_precision([], rel, 5) == 0.0
    assert average_precision(["a", "a", "b"], {"a", "b"}, 2) == 1.0  # a repeated id counts once


def test_recall_is_pooled_and_map_is_averaged():
    rankings = {"q1": ["a", "x", "b", "y", "c"], "q2": ["z", "e"]}
    rel = {"q1": ["a", "b", "c", "d"], "q2": ["e"]}
    m = evaluate_rankings(rankings, rel, ks=(2, 5))
    assert m["recall@5"] == pytest.approx(4 / 5)  # (3 + 1) / (4 + 1), not the mean of 3/4 and 1
    assert m["recall@2"] == pytest.approx(2 / 5)
    assert m["map@5"] == pytest.approx(((1 + 2 / 3 + 3 / 5) / 4 + 1 / 2) / 2)
    assert m["map@2"] == pytest.approx((1 / 4 + 1 / 2) / 2)
    # the per-query rows aggregate to the same numbers
    rows = [dict(per_query_metrics(rankings[q], rel[q], (2, 5)), n_relevant=len(rel[q])) for q in rankings]
    assert aggregate_rows(rows, (2, 5)) == pytest.approx(m)
    # a query without a ranking scores zero but still counts
    m3 = evaluate_rankings({"q1": rankings["q1"]}, rel, ks=(5,))
    assert m3["recall@5"] == pytest.approx(3 / 5) and m3["map@5"] == pytest.approx((1 + 2 / 3 + 3 / 5) / 8)


def test_leakage_filter_needs_a_month():
    f = leakage_filter(BenchQuery("q", "x", ("1",), paper_id="0201018"), 200201)
    assert f is not None and f.max_month == 200201 and f.exclude == frozenset({"0201018"})
    assert leakage_filter(BenchQuery("q", "x", ("1",)), None) is None
    with pytest.raises(InputError):  # no month: refused, never guessed from the id
        leakage_filter(BenchQuery("q", "x", ("1",), paper_id="0201018"), None)


def test_load_benchmark_reads_the_dev_format_and_rejects_bad_lines(tmp_path):
    good = tmp_path / "b.jsonl"
    good.write_text(json.dumps({"qid": "a", "query": "q one", "relevant": ["1", "2", "1"], "paper_id": "0201018",
                                "year": 2002, "title": "t"}) + "\n\n"
                    + json.dumps({"qid": "b", "query": "q two", "relevant": [3]}) + "\n")
    qs = load_benchmark(good)
    assert [q.qid for q in qs] == ["a", "b"]
    assert qs[0].relevant == ("1", "2") and qs[0].paper_id == "0201018" and qs[0].year == 2002
    assert qs[0].extra == {"title": "t"} and qs[1].relevant == ("3",)
    assert len(load_benchmark(good, limit=1)) == 1
    cases = {
        "not json": "line 1: not valid JSON",
        json.dumps({"qid": "a", "query": "", "relevant": ["1"]}): "missing or empty 'query'",
        json.dumps({"qid": "a", "query": "x", "relevant": []}): "non-empty list",
        json.dumps({"query": "x", "relevant": ["1"]}): "missing 'qid'",
        json.dumps({"qid": "a", "query": "x", "relevant": ["1"]}) + "\n" + json.dumps({"qid": "a", "query": "y", "relevant": ["1"]}): "duplicate qid",
    }
    for text, message in cases.items():
        bad = tmp_path / "bad.jsonl"
        bad.write_text(text + "\n")
        with pytest.raises(InputError, match=message):
            load_benchmark(bad)
    with pytest.raises(InputError, match="not found"):
        load_benchmark(tmp_path / "missing.jsonl")


def test_the_dev_benchmarks_in_the_repository_parse():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "benchmarks" / "data"
    refs = load_benchmark(root / "hepth_refs_dev.jsonl")
    assert len(refs) == 150 and all(q.paper_id for q in refs)
    ls = load_benchmark(root / "hepth_litsearch_dev.jsonl")
    assert len(ls) == 70 and all(1 <= len(q.relevant) <= 4 for q in ls)
    assert {q.extra.get('kind') for q in ls} == {'specific', 'broad', 'paraphrase', 'short'}
