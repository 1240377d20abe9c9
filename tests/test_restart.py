"""Stage 3's restart distribution p: every mode of ``restart_distribution`` and its two building blocks.

Expected values are worked out by hand in the comments (no call to the code under test computes them).
"""

from __future__ import annotations

import pytest

from crase_core.records import SearchHit, Seed, SeedOrigin
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.ranking import personalization_vector, query_restart_vector, restart_distribution

FALLBACK_TO_SEEDS = "no ranked paper matched the full-query search; the walk restarts at the kept seeds"
ALL_SEEDS_PRUNED = "every seed was pruned; the walk restarts uniformly over the surviving papers"


def hit(pid: str, score: float, rank: int = 1) -> SearchHit:
    return SearchHit(paper_id=pid, relevance_rank=rank, recency_rank=rank, score=score)


def seed(pid: str, *relevance_ranks: int) -> Seed:
    """A seed brought by one sub-query per relevance rank given (sub-query i ranked it relevance_ranks[i])."""
    return Seed(pid, [SeedOrigin(i, f"sq{i}", r, r, 10) for i, r in enumerate(relevance_ranks)])


# Three seeds: s1 best ranked #3 (sub-query 0) and #1 (sub-query 1) -> best rank 1; s2 best rank 4; s3 rank 2.
SEEDS = [seed("s1", 3, 1), seed("s2", 4), seed("s3", 2)]


# ---- query_restart_vector: p(v) ∝ score(v)^γ over the ranked nodes the full-query search found ---------------

def test_query_restart_is_score_to_the_power_gamma():
    hits = [hit("a", 2.0, 1), hit("b", 1.0, 2), hit("outside", 5.0, 3)]
    # γ = 3: a: 2³ = 8, b: 1³ = 1, c: no hit (0); "outside" is not a ranked node -> 8/9, 1/9
    p = query_restart_vector(["a", "b", "c"], hits, 3.0)
    assert p == pytest.approx({"a": 8 / 9, "b": 1 / 9})
    assert "c" not in p and "outside" not in p
    # γ = 1: 2/3, 1/3
    assert query_restart_vector(["a", "b", "c"], hits, 1.0) == pytest.approx({"a": 2 / 3, "b": 1 / 3})
    # γ = 0.5: √2 / (√2 + 1), 1 / (√2 + 1)
    r2 = 2 ** 0.5
    assert query_restart_vector(["a", "b"], hits, 0.5) == pytest.approx({"a": r2 / (r2 + 1), "b": 1 / (r2 + 1)})


def test_query_restart_ignores_zero_scores_and_is_empty_without_a_positive_score():
    assert query_restart_vector(["a", "b"], [hit("a", 0.0), hit("b", 4.0)], 3.0) == {"b": 1.0}
    assert query_restart_vector(["a", "b"], [hit("a", 0.0)], 3.0) == {}
    assert query_restart_vector(["a"], [], 3.0) == {}
    assert query_restart_vector([], [hit("a", 1.0)], 3.0) == {}


# ---- personalization_vector: restart over the kept seeds -------------------------------------------------------

def test_uniform_personalization_is_uniform_over_kept_seeds_only():
    # s2 pruned: s1 and s3 get 1/2 each
    assert personalization_vector(SEEDS, {"s1", "s3", "x"}, "uniform") == pytest.approx({"s1": 0.5, "s3": 0.5})
    assert personalization_vector(SEEDS, {"s1", "s2", "s3"}, "uniform") == pytest.approx(
        {"s1": 1 / 3, "s2": 1 / 3, "s3": 1 / 3})


def test_relevance_personalization_is_inverse_best_rank():
    # weights 1/1, 1/4, 1/2 (s1's best rank is 1 of its two sub-queries); total 7/4 -> 4/7, 1/7, 2/7
    assert personalization_vector(SEEDS, {"s1", "s2", "s3"}, "relevance") == pytest.approx(
        {"s1": 4 / 7, "s2": 1 / 7, "s3": 2 / 7})
    # s1 pruned: 1/4 and 1/2 -> 1/3, 2/3
    assert personalization_vector(SEEDS, {"s2", "s3"}, "relevance") == pytest.approx({"s2": 1 / 3, "s3": 2 / 3})


def test_personalization_is_empty_when_every_seed_was_pruned():
    assert personalization_vector(SEEDS, {"x", "y"}, "uniform") == {}
    assert personalization_vector(SEEDS, set(), "relevance") == {}
    assert personalization_vector([], {"x"}, "uniform") == {}


# ---- restart_distribution: the mode switch and its fallbacks ------------------------------------------------------

RANK_IDS = ["s1", "s2", "s3", "e1", "t1"]  # kept seeds, an expanded paper, a text candidate
ALIVE = {"s1", "s2", "s3", "e1", "t1"}


def test_query_mode_uses_the_full_query_scores_over_every_ranked_paper():
    warnings: list[str] = []
    hits = [hit("t1", 3.0, 1), hit("e1", 1.0, 2), hit("unranked", 9.0, 3)]
    s = PipelineSettings(personalization="query", query_power=2.0)
    # γ = 2: t1 9, e1 1 -> 0.9, 0.1 (seeds the search did not return get nothing)
    p = restart_distribution(s, SEEDS, ALIVE, RANK_IDS, hits, warnings)
    assert p == pytest.approx({"t1": 0.9, "e1": 0.1})
    assert warnings == []


def test_query_mode_default_gamma_is_sixteen():
    hits = [hit("s1", 2.0, 1), hit("e1", 1.0, 2)]
    # γ = 16 (the default with SALSA and restart-rrf, docs/benchmarks.md): 2¹⁶ = 65536 vs 1 → 65536/65537, 1/65537
    p = restart_distribution(PipelineSettings(), SEEDS, ALIVE, RANK_IDS, hits, [])
    assert p == pytest.approx({"s1": 65536 / 65537, "e1": 1 / 65537})
    # γ = 12 (the previous default): 2¹² = 4096 vs 1 → 4096/4097, 1/4097
    p = restart_distribution(PipelineSettings(query_power=12.0), SEEDS, ALIVE, RANK_IDS, hits, [])
    assert p == pytest.approx({"s1": 4096 / 4097, "e1": 1 / 4097})
    # γ = 3 (the earlier default): 8/9, 1/9
    p = restart_distribution(PipelineSettings(query_power=3.0), SEEDS, ALIVE, RANK_IDS, hits, [])
    assert p == pytest.approx({"s1": 8 / 9, "e1": 1 / 9})


def test_query_mode_falls_back_to_the_kept_seeds_with_a_warning():
    warnings: list[str] = []
    s = PipelineSettings(personalization="query")
    # no hit is a ranked paper -> uniform over kept seeds s1, s3 (s2 pruned), not relevance-weighted
    p = restart_distribution(s, SEEDS, {"s1", "s3", "e1"}, ["s1", "s3", "e1"], [hit("elsewhere", 1.0)], warnings)
    assert p == pytest.approx({"s1": 0.5, "s3": 0.5})
    assert warnings == [FALLBACK_TO_SEEDS]


def test_uniform_mode_ignores_the_query_scores():
    warnings: list[str] = []
    s = PipelineSettings(personalization="uniform")
    p = restart_distribution(s, SEEDS, ALIVE, RANK_IDS, [hit("t1", 100.0)], warnings)
    assert p == pytest.approx({"s1": 1 / 3, "s2": 1 / 3, "s3": 1 / 3})
    assert warnings == []


def test_relevance_mode_is_inverse_best_rank_over_kept_seeds():
    warnings: list[str] = []
    s = PipelineSettings(personalization="relevance")
    # s3 pruned: 1/1 and 1/4 -> 0.8, 0.2
    p = restart_distribution(s, SEEDS, {"s1", "s2", "e1"}, ["s1", "s2", "e1"], [], warnings)
    assert p == pytest.approx({"s1": 0.8, "s2": 0.2})
    assert warnings == []


@pytest.mark.parametrize("mode", ["uniform", "relevance"])
def test_every_seed_pruned_restarts_uniformly_over_the_ranked_papers(mode):
    warnings: list[str] = []
    p = restart_distribution(PipelineSettings(personalization=mode), SEEDS, {"e1", "t1"}, ["e1", "t1"], [], warnings)
    assert p == {"e1": 0.5, "t1": 0.5}
    assert warnings == [ALL_SEEDS_PRUNED]


def test_query_mode_with_no_match_and_every_seed_pruned_explains_both_fallbacks():
    warnings: list[str] = []
    s = PipelineSettings(personalization="query")
    p = restart_distribution(s, SEEDS, {"e1", "e2", "t1"}, ["e1", "e2", "t1"], [], warnings)
    assert p == pytest.approx({"e1": 1 / 3, "e2": 1 / 3, "t1": 1 / 3})
    assert warnings == [FALLBACK_TO_SEEDS, ALL_SEEDS_PRUNED]


@pytest.mark.parametrize("mode", ["query", "uniform", "relevance"])
def test_nothing_to_rank_gives_an_empty_distribution_and_no_warning(mode):
    warnings: list[str] = []
    assert restart_distribution(PipelineSettings(personalization=mode), SEEDS, set(), [], [hit("s1", 1.0)],
                                warnings) == {}
    assert warnings == []


def test_restart_distribution_works_without_a_warnings_list():
    p = restart_distribution(PipelineSettings(personalization="uniform"), SEEDS, {"e1"}, ["e1"], [])
    assert p == {"e1": 1.0}
