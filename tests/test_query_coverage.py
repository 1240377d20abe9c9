"""The weak-match notice (crase_core.retrieval.query_coverage): exact numbers on a hand-made index, and the
measurement on the embedded hep-th corpus (off-topic query flagged; dev questions not)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from crase_core.paper_source import SourceFilter
from crase_core.retrieval.query_coverage import assess, coverage_for_source, idf, query_terms

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks" / "data"
OFF_TOPIC = "protein folding with deep learning"


def test_assess_exact_numbers_on_a_hand_made_index():
    # 1000 papers; "alpha" in 500 (common), "beta" in 2 and "gamma" in none (both rare: < 5 = 0.5 %)
    terms = [("alpha", "alpha"), ("beta", "beta"), ("gamma", "gamma")]
    postings = {"alpha": list(range(500)), "beta": [7, 900]}
    cov = assess(terms, postings, 1000)
    assert [(t.term, t.papers) for t in cov.terms] == [("alpha", 500), ("beta", 2), ("gamma", 0)]
    assert cov.rare_below == 5 and cov.rare_terms == ["beta", "gamma"]
    w = {"alpha": idf(500, 1000), "beta": idf(2, 1000), "gamma": idf(0, 1000)}
    assert w["alpha"] == pytest.approx(math.log(1 + 500.5 / 500.5))
    # paper 7 has alpha and beta: the best share of the query's IDF weight
    assert cov.best_match_share == pytest.approx(round((w["alpha"] + w["beta"]) / sum(w.values()), 4))
    assert cov.best_match_share < 0.6 and cov.weak
    assert "2 of its 3 terms occur in fewer than 5 of its 1,000 papers" in cov.notice
    assert "beta 2, gamma 0" in cov.notice
    # one paper holding all three terms: a match, however rare the terms
    postings["gamma"] = [7]
    cov = assess(terms, postings, 1000)
    assert cov.best_match_share == 1.0 and not cov.weak and cov.notice == ""
    # fewer than half rare: no notice even if no paper holds most of the query
    cov = assess([("alpha", "alpha"), ("delta", "delta"), ("beta", "beta")],
                 {"alpha": [1], "delta": list(range(10, 400)), "beta": [2]}, 1000)
    assert cov.rare_terms == ["alpha", "beta"] and cov.weak  # 2 of 3 rare, best paper 1 term
    cov = assess([("alpha", "alpha"), ("delta", "delta"), ("eps", "eps")],
                 {"alpha": [1], "delta": list(range(10, 400)), "eps": list(range(500))}, 1000)
    assert cov.rare_terms == ["alpha"] and not cov.weak


def test_assess_nothing_known_and_no_content_words():
    cov = assess([("zzz", "zzz")], {}, 50)
    assert cov.weak and cov.best_match_share == 0.0 and "none of the query's terms (zzz 0)" in cov.notice
    cov = assess([], {}, 50)
    assert cov.weak and "no content word" in cov.notice
    assert query_terms("What is the work on Folding and folded proteins?") == [
        ("fold", "folding"), ("protein", "proteins")]


@pytest.fixture(scope="module")
def litsearch() -> list[dict]:
    path = BENCH / "hepth_litsearch_dev.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def refs() -> list[dict]:
    path = BENCH / "hepth_refs_dev.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_off_topic_query_gets_the_notice(hepth_source):
    cov = coverage_for_source(OFF_TOPIC, hepth_source)
    assert cov is not None and cov.weak
    assert {t.term: t.papers for t in cov.terms} == {"protein": 1, "fold": 255, "deep": 58, "learn": 35}
    assert cov.rare_terms == ["protein", "deep", "learn"] and cov.rare_below == 148
    assert cov.best_match_share == pytest.approx(0.531, abs=0.001)
    assert cov.notice.startswith("Weak match: the corpus has little on this query. 3 of its 4 terms")


def test_no_dev_question_gets_the_notice(hepth_source, litsearch, refs):
    assert len(litsearch) == 70
    flagged = [q["query"] for q in litsearch if coverage_for_source(q["query"], hepth_source).weak]
    assert flagged == []
    # the citation-recovery queries, as the benchmark runs them: papers after the query paper hidden
    corpus = hepth_source.corpus
    flagged = []
    for q in refs[:50]:
        month = int(corpus.months[corpus.index[q["paper_id"]]])
        source = hepth_source.restricted(SourceFilter(max_month=month, exclude=frozenset({q["paper_id"]})))
        cov = coverage_for_source(q["query"], source)
        assert cov is not None and cov.n_papers == int(source.visible.sum())
        if cov.weak:
            flagged.append(q["query"])
    assert flagged == []


def test_the_run_records_the_notice(hepth_engine):
    from crase_core.pipeline import build_graph

    build = build_graph(OFF_TOPIC, hepth_engine)
    assert build.seeding.coverage is not None and build.seeding.coverage.weak
    assert build.warnings[0] == build.seeding.coverage.notice
