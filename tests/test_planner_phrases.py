"""The corpus-aware PhrasePlanner on a 20-document vocabulary whose every statistic is worked out by hand."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from crase_core.retrieval.planner import FieldVocabulary, PhrasePlanner
from crase_core.text import stem

# documents as word sets (stemmed below, as the index stems them)
DOCS = (
    [{"tachyon", "condensation", "brane"}] * 6                # docs 0-5
    + [{"tachyon", "string"}] * 4                              # docs 6-9
    + [{"bps", "brane", "supersymmetric", "dyon"}] * 3         # docs 10-12
    + [{"bps", "brane", "supersymmetric"}]                     # doc 13
    + [{"gauge", "theory"}] * 6                                # docs 14-19
)
# title statistics: "tachyon condensation" stands in 4 titles, "bps branes" in 3
BIGRAMS = {("tachyon", "condensation"): 4, ("bps", "branes"): 3}
TITLE_TERMS = {"tachyon": 8, "condensation": 4, "bps": 3, "brane": 10, "string": 5, "supersymmetric": 4,
               "dyon": 3, "gauge": 6, "theory": 6}


def vocabulary() -> FieldVocabulary:
    words = sorted({w for d in DOCS for w in d})
    vocab = {stem(w): i for i, w in enumerate(words)}
    postings = [[j for j, d in enumerate(DOCS) if w in d] for w in words]
    indptr = np.cumsum([0] + [len(p) for p in postings])
    indices = np.array([j for p in postings for j in p])
    bigrams = Counter({(stem(a), stem(b)): n for (a, b), n in BIGRAMS.items()})
    terms = Counter({stem(w): n for w, n in TITLE_TERMS.items()})
    surface = {stem(w): w for w in words}
    return FieldVocabulary(len(DOCS), vocab, indptr, indices, bigrams, terms, surface)


def idf(df: int, n: int = 20) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def test_statistics():
    v = vocabulary()
    assert v.df(stem("brane")) == 10 and v.df(stem("bps")) == 4
    assert v.idf(stem("bps")) == pytest.approx(math.log(1 + 16.5 / 4.5))
    assert list(v.docs_with_all([stem("bps"), stem("dyon")])) == [10, 11, 12]
    # NPMI of bps and dyon: p(ab) = 3/20, p(a) = 4/20, p(b) = 3/20 → ln(0.15 / (0.2·0.15)) / −ln 0.15
    assert v.npmi(stem("bps"), stem("dyon")) == pytest.approx(math.log(5) / -math.log(0.15))
    assert v.npmi(stem("bps"), stem("tachyon")) == -1.0  # never together
    # in docs 10-13 (bps ∧ brane): supersymmetric 4 times (lift 4·20/(4·4) = 5), dyon 3 times (lift 5):
    # scores 4 ln 5 > 3 ln 5; the query's own stems are excluded
    assert v.associated_terms([stem("bps"), stem("brane")], 5, {stem("bps"), stem("brane")}) == [
        stem("supersymmetric"), stem("dyon")]


def test_aspects_are_field_phrases_weighed_by_idf():
    planner = PhrasePlanner(vocabulary())
    aspects = planner.aspects("tachyon condensation of BPS branes")
    # tachyon+condensation: 4 titles ≥ 3 and ≥ 5% of min(8, 4); condensation+bps: no title, NPMI −1;
    # bps+branes: 3 titles. Weights (every title share ≥ 0.15): bps+brane = idf(4) + idf(10) = 2.234 >
    # tachyon+condensation = idf(10) + idf(6) = 1.866
    assert [a.text for a in aspects] == ["bps branes", "tachyon condensation"]
    assert aspects[0].weight == pytest.approx(idf(4) + idf(10))
    assert aspects[1].weight == pytest.approx(idf(10) + idf(6))


def test_exact_plan_with_purposes():
    r = PhrasePlanner(vocabulary()).plan("tachyon condensation of BPS branes", 5)
    # 1: the whole question; the pair of both aspects has the same stems (dropped); each aspect alone;
    # the strongest aspect with the two terms the corpus associates with it
    assert r.subqueries == ["tachyon condensation bps branes", "bps branes", "tachyon condensation",
                            "bps branes supersymmetric dyon"]
    assert r.planner == "phrase-planner/v1"
    assert r.notes == [
        "aspects: “bps branes”; “tachyon condensation”",
        "sub-query 1 “tachyon condensation bps branes”: the whole question (its rarest content words)",
        "sub-query 2 “bps branes”: the aspect “bps branes” alone",
        "sub-query 3 “tachyon condensation”: the aspect “tachyon condensation” alone",
        "sub-query 4 “bps branes supersymmetric dyon”: “bps branes” with the field's terms the corpus "
        "associates with it: supersymmetric, dyon",
    ]


@pytest.mark.parametrize("L", [1, 2, 3])
def test_L_caps_the_plan(L):
    r = PhrasePlanner(vocabulary()).plan("tachyon condensation of BPS branes", L)
    assert r.subqueries == ["tachyon condensation bps branes", "bps branes", "tachyon condensation"][:L]


def test_a_one_phrase_question_without_associated_terms_is_one_sub_query():
    # "gauge theory": one phrase by NPMI (docs 14-19 hold both: NPMI 1); its only sub-query is the whole
    # question; no term co-occurs with it, so nothing else is planned
    r = PhrasePlanner(vocabulary()).plan("gauge theory", 5)
    assert r.subqueries == ["gauge theory"]


def test_words_the_corpus_does_not_know_are_not_aspects_and_no_words_means_no_plan():
    planner = PhrasePlanner(vocabulary())
    assert [a.text for a in planner.aspects("zorblax tachyon condensation")] == ["tachyon condensation"]
    r = planner.plan("what is the", 5)
    assert r.subqueries == [] and r.notes == ["the query has no content words to search for"]
