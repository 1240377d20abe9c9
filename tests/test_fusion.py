"""Stage 3's fusion of the walk's score with the full-query text score (``fusion``), checked by hand."""

from __future__ import annotations

import pytest

from crase_core.errors import InputError
from crase_core.ranking.fusion import fuse_scores, text_relevance
from crase_core.records import SearchHit, Seed, SeedOrigin
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.ranking import final_scores

WALK = {"a": 0.5, "b": 0.3, "c": 0.2}
TEXT = {"b": 4.0, "c": 2.0}  # a: not a text hit
ORDER = ["a", "b", "c"]


def hit(pid: str, score: float, rank: int) -> SearchHit:
    return SearchHit(paper_id=pid, relevance_rank=rank, recency_rank=rank, score=score)


def test_none_keeps_the_walk():
    assert fuse_scores(WALK, TEXT, ORDER, "none", 0.7, 60.0) == WALK


def test_linear_interpolates_max_normalised_scores():
    # λ = 0.5: a = 0.5·0.5/0.5 + 0 = 0.5; b = 0.5·0.3/0.5 + 0.5·4/4 = 0.8; c = 0.5·0.2/0.5 + 0.5·2/4 = 0.45
    fused = fuse_scores(WALK, TEXT, ORDER, "linear", 0.5, 60.0)
    assert fused == pytest.approx({"a": 0.5, "b": 0.8, "c": 0.45})
    # λ = 0: the walk, rescaled to max 1 (order unchanged); λ = 1: the text score (a has none)
    assert fuse_scores(WALK, TEXT, ORDER, "linear", 0.0, 60.0) == pytest.approx({"a": 1.0, "b": 0.6, "c": 0.4})
    assert fuse_scores(WALK, TEXT, ORDER, "linear", 1.0, 60.0) == pytest.approx({"a": 0.0, "b": 1.0, "c": 0.5})


def test_rrf_adds_weighted_reciprocal_ranks():
    # walk ranks a 1, b 2, c 3; text ranks b 1, c 2; k = 1, λ = 0.5:
    # a = 0.5/2 = 0.25; b = 0.5/3 + 0.5/2 = 0.41667; c = 0.5/4 + 0.5/3 = 0.29167
    fused = fuse_scores(WALK, TEXT, ORDER, "rrf", 0.5, 1.0)
    assert fused == pytest.approx({"a": 0.25, "b": 0.5 / 3 + 0.25, "c": 0.125 + 0.5 / 3})
    assert sorted(fused, key=lambda n: -fused[n]) == ["b", "c", "a"]


def test_rrf_ties_in_the_walk_are_broken_by_the_given_order():
    # equal walk scores: "y" comes first in ORDER, so it takes walk rank 1; no text: 1/(0+1) vs 1/(0+2)
    fused = fuse_scores({"x": 0.5, "y": 0.5}, {}, ["y", "x"], "rrf", 0.0, 0.0)
    assert fused == {"y": 1.0, "x": 0.5}


def test_unknown_mode_is_an_error():
    with pytest.raises(ValueError):
        fuse_scores(WALK, TEXT, ORDER, "max", 0.5, 60.0)


def test_text_relevance_keeps_ranked_nodes_with_a_positive_score():
    hits = [hit("b", 4.0, 1), hit("outside", 3.0, 2), hit("c", 0.0, 3)]
    assert text_relevance(["a", "b", "c"], hits) == {"b": 4.0}


def test_final_scores_reads_the_settings():
    hits = [hit("b", 4.0, 1), hit("c", 2.0, 2)]
    seeds = [Seed("c", [SeedOrigin(0, "q", 1, 1, 1)])]
    s = PipelineSettings(fusion="linear", fusion_weight=0.5)
    assert final_scores(s, WALK, seeds, ORDER, hits) == pytest.approx({"a": 0.5, "b": 0.8, "c": 0.45})
    assert final_scores(PipelineSettings(fusion="none"), WALK, seeds, ORDER, hits) == WALK


def test_fusion_knobs_are_validated_and_apply_only_with_a_fusion():
    with pytest.raises(InputError):
        PipelineSettings(fusion="max")
    with pytest.raises(InputError):
        PipelineSettings(fusion_weight=1.5)
    assert "fusion_weight" in PipelineSettings(fusion="none").inapplicable()
    assert "rrf_k" in PipelineSettings(fusion="linear").inapplicable()
    assert "rrf_k" not in PipelineSettings(fusion="rrf").inapplicable()
    assert PipelineSettings.from_preset("paper").fusion == "none"


def test_restart_rrf_fuses_the_restart_order_with_the_search_engines_own_ranks():
    # γ = 1, λ = 0.5: restart scores a = 0.5·0.5/0.5 = 0.5, b = 0.5·0.3/0.5 + 0.5·4/4 = 0.8,
    # c = 0.5·0.2/0.5 + 0.5·2/4 = 0.45 → restart ranks b 1, a 2, c 3. The search ranked c 1 and b 3 (and a
    # paper outside the graph 2: its rank counts, the paper does not join). μ = 0.5, k = 1:
    # a = 0.5/3 = 0.16667; b = 0.5/2 + 0.5/4 = 0.375; c = 0.5/4 + 0.5/2 = 0.375 (tie: b is earlier in ORDER)
    hits = [hit("c", 2.0, 1), hit("outside", 3.0, 2), hit("b", 4.0, 3)]
    s = PipelineSettings(fusion="restart-rrf", fusion_weight=0.5, query_power=1.0, text_rank_weight=0.5,
                         text_rank_confidence=0.0, rrf_k=1.0)  # κ 0: μ fixed, whatever the search's confidence
    fused = final_scores(s, WALK, [], ORDER, hits)
    assert fused == pytest.approx({"a": 0.5 / 3, "b": 0.375, "c": 0.375})
    assert "outside" not in fused
    # μ = 0 keeps the restart fusion's order: 1/(k + restart rank) with weight 1
    s0 = s.replace(text_rank_weight=0.0)
    assert final_scores(s0, WALK, [], ORDER, hits) == pytest.approx({"b": 0.5, "a": 1 / 3, "c": 0.25})
    assert "text_rank_weight" in PipelineSettings(fusion="restart").inapplicable()
    assert "rrf_k" not in s.inapplicable()
