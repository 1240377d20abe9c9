"""The offline KeywordPlanner: exact sub-queries, it never adds words, L is respected, no duplicates.

With the default idf (length of the Snowball stem) the expected plans are worked out by hand:
stems used below: black→black (5), hole(s)→hole (4), entropy→entropi (7), brane→brane (5),
counting→count (5), holographic→holograph (9), entanglement→entangl (7).
Ties in weight are broken alphabetically by the word; a sub-query keeps the query's word order.
"""

from __future__ import annotations

import pytest

from crase_core.retrieval.planner import KeywordPlanner
from crase_core.text import stem, words

Q1 = "black hole entropy via D-brane counting"
# ρ1: all content words ("via" is a stop word, the one-letter "D" is dropped);
# clauses split at " via ": "black hole entropy" (weight 16), "D-brane counting" (10);
# rarest 4: entropy 7, then the 5s black, brane, counting (alphabetical); rarest 3: entropy, black, brane;
# rarest 2: entropy, black.
Q1_PLAN = ["black hole entropy brane counting", "black hole entropy", "brane counting",
           "black entropy brane counting", "black entropy brane", "black entropy"]


def plan(query: str, L: int, **kw) -> list[str]:
    return KeywordPlanner(**kw).plan(query, L).subqueries


def test_exact_plan_in_order():
    assert plan(Q1, 6) == Q1_PLAN
    assert plan(Q1, 20) == Q1_PLAN  # only six distinct candidates exist


@pytest.mark.parametrize("L", [1, 2, 3, 4, 5])
def test_L_caps_the_plan_keeping_the_order(L):
    assert plan(Q1, L) == Q1_PLAN[:L]


def test_question_framing_is_dropped():
    # "Is there work on the … ?": is, there, work, on, the are stop words (framing included)
    # rarest 2: holographic 9, then entanglement/entropy tie at 7 → entanglement (alphabetical)
    assert plan("Is there work on the holographic entanglement entropy?", 5) == [
        "holographic entanglement entropy", "holographic entanglement"]


def test_same_stems_are_one_sub_query():
    # words deduplicated by stem: black, holes (hole), entropy. The clause "black hole entropy" has ρ1's
    # stems and is dropped; the clause "black holes" stays; rarest 2: entropy, black.
    assert plan("Black holes and black hole entropy", 5) == ["black holes entropy", "black holes", "black entropy"]


def test_max_terms_caps_the_first_sub_query():
    # ρ1 = the 3 rarest (entropy, black, brane) in query order; its stems equal the rarest-3 candidate's,
    # which is then dropped as a duplicate
    assert plan(Q1, 6, max_terms=3) == ["black entropy brane", "black hole entropy", "brane counting",
                                        "black entropy brane counting", "black entropy"]


def test_idf_decides_the_rarest_words():
    idf = {"gaug": 3.0, "theori": 1.0, "lattic": 5.0}
    # one clause (no connective), identical to ρ1; rarest 2 by this idf: lattice, gauge
    assert plan("gauge theory on the lattice", 5, idf=lambda s: idf.get(s, 0.0)) == [
        "gauge theory lattice", "gauge lattice"]
    # with the opposite idf the pair is theory + gauge
    idf2 = {"gaug": 3.0, "theori": 5.0, "lattic": 1.0}
    assert plan("gauge theory on the lattice", 5, idf=lambda s: idf2.get(s, 0.0)) == [
        "gauge theory lattice", "gauge theory"]


def test_a_single_word_query_is_one_sub_query():
    assert plan("supergravity", 5) == ["supergravity"]


def test_a_query_of_stop_words_has_no_sub_query_and_says_why():
    r = KeywordPlanner().plan("what is the", 5)
    assert r.subqueries == []
    assert r.notes == ["the query has no content words to search for"]


QUERIES = [
    Q1,
    "Is there work on the moduli-space quantum mechanics of BPS black holes with superconformal symmetry?",
    "Holographic entanglement entropy of BTZ black holes using the Cardy formula, and Virasoro symmetry",
    "lattice gauge theory glueball spectrum; finite volume effects (Monte Carlo) versus string models",
    "Black holes and black hole entropy",
]


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("L", [1, 3, 5, 20])
def test_never_adds_words_respects_L_and_is_distinct(query, L):
    r = KeywordPlanner().plan(query, L)
    assert 1 <= len(r.subqueries) <= L
    allowed = set(words(query))
    for sq in r.subqueries:
        assert set(sq.split()) <= allowed, sq  # only the query's own words (lower-cased)
    stem_sets = [frozenset(stem(w) for w in sq.split()) for sq in r.subqueries]
    assert len(set(stem_sets)) == len(stem_sets)  # no two sub-queries search for the same stems
    assert r.planner == "keyword-planner/v2"


def test_how_a_question_is_asked_is_not_searched_for():
    # "Looking for an analysis of …, … is proven": looking, analysis and proven are QUESTION_WORDS; the rest are
    # the question's content words, all kept (7 of them, under max_terms), in query order
    q = "Looking for an analysis of the bosonic string spectrum on AdS3 where unitarity is proven"
    assert plan(q, 1) == ["bosonic string spectrum ads3 unitarity"]
    # every inflection goes (matched by stem) — and only those: "relativity" is not "related"
    assert plan("an explanation explaining explained relativity", 5) == ["relativity"]
    assert plan("looking for an analysis", 5) == []


def test_a_word_the_corpus_never_uses_comes_last():
    known = {"gaug", "theori", "lattic"}.__contains__
    idf = {"gaug": 3.0, "theori": 1.0, "lattic": 5.0}
    # "qwzx" is unknown: without ``known`` it would be the rarest (length idf 4 > theory's 1) and take a place
    assert plan("gauge theory qwzx lattice", 1, idf=lambda s: idf.get(s, 4.0), max_terms=3) == ["gauge qwzx lattice"]
    assert plan("gauge theory qwzx lattice", 1, idf=lambda s: idf.get(s, 4.0), max_terms=3, known=known) == [
        "gauge theory lattice"]
