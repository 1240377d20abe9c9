"""Pseudo-relevance feedback (crase_core.retrieval.feedback): exact term weights and score blend on hand-checked
inputs, and no text of a hidden paper ever reaches the expansion terms or the full-query search."""

from __future__ import annotations

import math

import pytest

from crase_core.evaluation.benchmark import BenchQuery, query_filter
from crase_core.paper_source import ScoredPaper
from crase_core.records import Paper
from crase_core.retrieval.feedback import FeedbackTerm, feedback_terms, interpolate
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.seeding import Seeding, search_full_query
from crase_core.store.termstats import index_idf
from crase_core.text import content_words, stem


def _paper(pid: str, title: str, abstract: str = "") -> Paper:
    return Paper(id=pid, title=title, abstract=abstract, year=2000)


# P1 reads "alpha beta alpha beta gamma" (title twice), P2 "beta delta beta delta"; P(d|q) = 3/4, 1/4.
P1, P2 = _paper("1", "alpha beta", "gamma"), _paper("2", "beta delta")
DOCS = [(P1, 3.0), (P2, 1.0)]


def test_relevance_model_weights_by_hand():
    # beta: 3/4·2/5 + 1/4·2/4 = 0.425; gamma: 3/4·1/5 = 0.15; delta: 1/4·2/4 = 0.125; alpha is the query
    terms = feedback_terms("alpha", DOCS, 10, lambda t: 1.0, min_docs=1)
    assert [t.stem for t in terms] == ["beta", "gamma", "delta"]
    assert [t.weight for t in terms] == pytest.approx([0.425, 0.15, 0.125])
    # idf multiplies: delta's 0.125·2 = 0.25 now beats gamma's 0.15; n_terms cuts the list
    idf = {"delta": 2.0}
    terms = feedback_terms("alpha", DOCS, 2, lambda t: idf.get(t, 1.0), min_docs=1)
    assert terms == [FeedbackTerm("beta", "beta", 0.425), FeedbackTerm("delta", "delta", 0.25)]


def test_a_term_of_one_feedback_paper_only_is_skipped_by_default():
    assert [t.stem for t in feedback_terms("alpha", DOCS, 10, lambda t: 1.0)] == ["beta"]
    assert feedback_terms("alpha", [(P1, 0.0)], 10, lambda t: 1.0) == []  # no positive score: no feedback


def test_interpolate_blends_max_normalised_scores():
    a, b, c = _paper("A", "a"), _paper("B", "b"), _paper("C", "c")
    first = [ScoredPaper(a, 2.0), ScoredPaper(b, 1.0)]
    second = [ScoredPaper(b, 4.0), ScoredPaper(c, 2.0)]
    # A = 3/4·1 = 0.75; B = 3/4·1/2 + 1/4·1 = 0.625; C = 1/4·1/2 = 0.125
    out = interpolate(first, second, 0.25, 10)
    assert [(r.paper.id, r.score) for r in out] == [("A", 0.75), ("B", 0.625), ("C", 0.125)]
    assert [r.paper.id for r in interpolate(first, second, 0.25, 2)] == ["A", "B"]
    assert [r.paper.id for r in interpolate(first, second, 0.0, 10)] == ["A", "B"]  # w 0: the first search


def test_index_idf_is_bm25s_idf(tiny_source):
    idf = index_idf(tiny_source.text_index)
    n = tiny_source.text_index.postings.n_docs
    glueball = stem("glueballs")
    df = tiny_source.text_index.postings_of(glueball).size  # 9902001 and 0002001
    assert df == 2 and idf(glueball) == pytest.approx(math.log(1 + (n - 2 + 0.5) / 2.5))
    assert idf("nosuchstem") == pytest.approx(math.log(1 + (n - 1 + 0.5) / 1.5))


# the query comes from 9901001 (1999-01): it and every later paper are hidden (as in test_leakage.py)
Q = BenchQuery("cit", "black hole microstates anti-de Sitter holography entropy counting",
               ("9801001", "9802001"), paper_id="9901001", year=1999)
HIDDEN = {"9901001", "9902001", "0001001", "0002001"}


def test_no_hidden_paper_reaches_the_feedback_or_the_full_query_search(tiny_source):
    settings = PipelineSettings(feedback_docs=10, feedback_terms=10)
    visible = tiny_source.restricted(query_filter(Q, tiny_source))
    seeding = search_full_query(Q.query, Seeding([], []), visible, settings)
    assert seeding.feedback and seeding.query_hits
    assert not HIDDEN & {h.paper_id for h in seeding.query_hits}
    visible_words = {w for p in visible.get(["9801001", "9802001"]).values()
                     for w in content_words(f"{p.title} {p.abstract}")}
    assert set(seeding.feedback) <= visible_words  # every expansion word is read from a visible paper
    # unfiltered, the hidden papers lead the search and lend their words ("derive": only 9901001, 0001001)
    open_seeding = search_full_query(Q.query, Seeding([], []), tiny_source, settings)
    assert "derive" in open_seeding.feedback and "derive" not in visible_words
    assert HIDDEN & {h.paper_id for h in open_seeding.query_hits}


def test_feedback_off_leaves_the_search_unchanged(tiny_source):
    plain = search_full_query(Q.query, Seeding([], []), tiny_source, PipelineSettings())
    assert plain.feedback == [] and plain.search_calls == 1
    fed = search_full_query(Q.query, Seeding([], []), tiny_source, PipelineSettings(feedback_docs=5))
    assert fed.search_calls == 2
