"""Term proximity (``proximity_weight``, :mod:`crase_core.retrieval.proximity`): the ordered word pairs of the
sequential dependence model, checked by hand, and its place in stage 1b's searches."""

from __future__ import annotations

import pytest

from crase_core.errors import InputError
from crase_core.paper_source import ScoredPaper
from crase_core.records import Paper, PlanResult
from crase_core.retrieval.proximity import pair_share, paper_pairs, rescore, word_pairs
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.seeding import Seeding, search_full_query, search_seeds


def paper(pid: str, title: str, abstract: str = "") -> Paper:
    return Paper(id=pid, title=title, abstract=abstract)


def test_word_pairs_are_adjacent_content_word_stems_in_order():
    # stop words between two words do not break a pair; the order of the words counts
    assert word_pairs("Solitons on the brane") == {("soliton", "brane")}
    assert word_pairs("noncommutative solitons on a brane") == {("noncommut", "soliton"), ("soliton", "brane")}
    assert word_pairs("brane solitons") == {("brane", "soliton")}
    assert word_pairs("solitons") == frozenset() and word_pairs("the of") == frozenset()


def test_a_pair_never_spans_the_title_and_the_abstract():
    p = paper("a", "Noncommutative", "Solitons on branes")
    assert paper_pairs(p) == {("soliton", "brane")}
    assert pair_share(word_pairs("noncommutative solitons"), p) == 0.0
    assert pair_share(word_pairs("noncommutative solitons on branes"), p) == 0.5
    assert pair_share(frozenset(), p) == 0.0


def test_rescore_adds_w_times_the_best_score_times_the_pair_share():
    # the query has 2 pairs, (noncommut, soliton) and (soliton, brane); s₁ = 10
    query = "noncommutative solitons on branes"
    a = ScoredPaper(paper("a", "Branes, solitons and noncommutative geometry"), 10.0)  # no pair: 10
    b = ScoredPaper(paper("b", "Noncommutative solitons", "We study tachyons."), 8.0)  # 1 of 2: 8 + 0.5·10·½
    c = ScoredPaper(paper("c", "Lumps", "Noncommutative solitons on branes."), 6.0)  # 2 of 2: 6 + 0.5·10·1
    out = rescore(query, [a, b, c], 0.5)
    assert [(r.paper.id, r.score) for r in out] == [("c", 11.0), ("b", 10.5), ("a", 10.0)]
    # w 0.2: a 10, b 8 + 1 = 9, c 6 + 2 = 8 — the search's order holds
    assert [(r.paper.id, r.score) for r in rescore(query, [a, b, c], 0.2)] == [("a", 10.0), ("b", 9.0), ("c", 8.0)]


def test_rescore_leaves_the_list_alone_when_there_is_nothing_to_do():
    a = ScoredPaper(paper("a", "x"), 2.0)
    b = ScoredPaper(paper("b", "noncommutative solitons"), 1.0)
    assert rescore("noncommutative solitons", [a, b], 0.0) == [a, b]  # w = 0
    assert rescore("solitons", [a, b], 1.0) == [a, b]  # a one-word query has no pair
    assert rescore("noncommutative solitons", [], 1.0) == []
    # ties keep the search's order: neither has a pair, equal scores
    c, d = ScoredPaper(paper("c", "x"), 1.0), ScoredPaper(paper("d", "y"), 1.0)
    assert [r.paper.id for r in rescore("noncommutative solitons", [c, d], 1.0)] == ["c", "d"]


def test_every_search_of_stage_1b_is_rescored(tiny_source):
    query = "black hole microstates anti-de Sitter holography entropy counting"
    plan = PlanResult(query, ["black hole entropy"], "test")
    settings = PipelineSettings(m=3, query_seeds=3, proximity_weight=1.0, proximity_window_weight=0.0)
    plain_sub = tiny_source.search("black hole entropy", settings.search_limit)
    plain_full = tiny_source.search(query, settings.search_limit)
    seeding = search_full_query(query, search_seeds(plan, tiny_source, settings), tiny_source, settings)
    sub_hits, full_hits = seeding.subquery_results[0].hits, seeding.query_hits
    assert [h.score for h in sub_hits] == [r.score for r in rescore("black hole entropy", plain_sub, 1.0)]
    assert [h.paper_id for h in full_hits] == [r.paper.id for r in rescore(query, plain_full, 1.0)]
    # the re-scoring changed something on this corpus (the test can fail), and w = 0 is the plain search
    assert [h.score for h in full_hits] != [r.score for r in plain_full]
    off = search_full_query(query, Seeding([], []), tiny_source, settings.replace(proximity_weight=0.0))
    with_window = search_full_query(query, Seeding([], []), tiny_source, settings.replace(proximity_window_weight=0.5))
    assert [h.score for h in with_window.query_hits] == [r.score for r in rescore(query, plain_full, 1.0, 0.5)]
    assert [(h.paper_id, h.score) for h in off.query_hits] == [(r.paper.id, r.score) for r in plain_full]
    with pytest.raises(InputError):
        PipelineSettings(proximity_weight=-0.1)


def test_a_remote_sources_ranking_is_not_rescored(tiny_source):
    class Remote:  # a source without a local BM25 index (what the Semantic Scholar source is)
        def search(self, query, limit):
            return list(reversed(tiny_source.search(query, limit)))

    from crase_core.stages.seeding import search

    query = "black hole microstates anti-de Sitter holography entropy counting"
    settings = PipelineSettings(proximity_weight=1.0, proximity_window_weight=1.0)
    remote = Remote().search(query, 100)
    assert [r.paper.id for r in search(Remote(), query, settings)] == [r.paper.id for r in remote]
    assert search(tiny_source, query, settings) != tiny_source.search(query, 100)  # the local one is


def test_window_share_counts_the_querys_pairs_found_within_eight_words_in_either_order():
    from crase_core.retrieval.proximity import WINDOW, window_share

    pairs = word_pairs("noncommutative solitons on branes")  # {noncommut, soliton}, {soliton, brane}
    # reversed and two words apart: both unordered pairs are in a window (and neither is in order)
    p = paper("a", "Branes carry solitons in noncommutative geometry")
    assert pair_share(pairs, p) == 0.0 and window_share(pairs, p) == 1.0
    # 8 content words apart is outside the window, 7 inside; the title/abstract boundary is not crossed
    far = "soliton alpha beta gamma delta epsilon zeta eta noncommutative"
    near = "soliton alpha beta gamma delta epsilon zeta noncommutative"
    assert WINDOW == 8
    assert window_share(pairs, paper("b", "", far)) == 0.0
    assert window_share(pairs, paper("c", "", near)) == 0.5
    assert window_share(pairs, paper("d", "Noncommutative", "Solitons")) == 0.0
    assert window_share(word_pairs("solitons solitons"), p) == 0.0  # a pair of one stem is not a window pair


def test_rescore_adds_the_window_term_with_its_own_weight():
    query = "noncommutative solitons on branes"
    a = ScoredPaper(paper("a", "Lumps"), 10.0)  # nothing: 10
    b = ScoredPaper(paper("b", "Branes carry solitons in noncommutative geometry"), 8.0)  # window 2 of 2: 8 + 0.3·10
    out = rescore(query, [a, b], 0.5, 0.3)
    assert [(r.paper.id, r.score) for r in out] == [("b", 11.0), ("a", 10.0)]
    assert rescore(query, [a, b], 0.0, 0.0) == [a, b]
