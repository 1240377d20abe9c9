"""CEP ranker: exact numbers on a hand-solved graph, strongest path vs sum of paths, kept paths, registry."""

from __future__ import annotations

import pytest

from crase_core.errors import InputError
from crase_core.ranking.cep import ContrastiveEvidencePaths, background_visitation
from crase_core.ranking.rankers import REGISTRY, rank, ranker_parameters
from crase_core.ranking.walks import PersonalizedPageRank, WeightedGraph
from crase_core.settings.pipeline import PipelineSettings


def test_cep_exact_numbers():
    # s→a (1), s→b (3), a→b (1); b dangling. P(s→a) = 1/4, P(s→b) = 3/4, P(a→b) = 1.
    g = WeightedGraph(["s", "a", "b"], [("s", "a", 1.0), ("s", "b", 3.0), ("a", "b", 1.0)])
    # background fixed point (24 steps of restart 0.5 is within 1e-7 of it), solved by hand:
    # b_b = 1.9375 / 4.0625, b_s = (b_b + 1) / 6, b_a = 1.125 b_s
    bb = 1.9375 / 4.0625
    bs = (bb + 1) / 6
    ba = 1.125 * bs
    b = background_visitation(g, 0.5, 24)
    assert b.tolist() == pytest.approx([bs, ba, bb], abs=1e-7)
    # strongest paths with λ = 0.5: M(s) = 1, M(a) = 0.5·0.25, M(b) = max(0.5·0.75, 0.5²·0.25·1) = 0.375
    r = ContrastiveEvidencePaths().rank(g, {"s": 1.0})
    c = {"s": 1 / bs, "a": 0.125 / ba, "b": 0.375 / bb}
    total = sum(c.values())
    assert r.scores == pytest.approx({k: v / total for k, v in c.items()}, abs=1e-6)
    assert r.paths == {"s": ["s"], "a": ["s", "a"], "b": ["s", "b"]}  # the direct edge is the stronger path
    assert r.ranker == "cep" and r.iterations == 24


def test_cep_prefers_the_strongest_single_path_over_a_hub_reached_by_many():
    # s cites a1, a2, a3 and leaf l; a1..a3 all cite hub h. PPR sums the three paths into h; CEP does not.
    edges = [("s", "a1", 1.0), ("s", "a2", 1.0), ("s", "a3", 1.0), ("s", "l", 1.0),
             ("a1", "h", 1.0), ("a2", "h", 1.0), ("a3", "h", 1.0)]
    g = WeightedGraph(["s", "a1", "a2", "a3", "l", "h"], edges)
    ppr = PersonalizedPageRank().rank(g, {"s": 1.0}, alpha=0.15)
    cep = ContrastiveEvidencePaths().rank(g, {"s": 1.0})
    assert ppr.scores["h"] > ppr.scores["l"]
    assert cep.scores["l"] > cep.scores["h"]
    assert cep.paths["h"][0] == "s" and len(cep.paths["h"]) == 3
    assert sum(cep.scores.values()) == pytest.approx(1.0)


def test_unreachable_nodes_score_zero_and_registry_and_checks():
    g = WeightedGraph(["s", "x", "y"], [("s", "x", 1.0), ("y", "s", 1.0)])  # y only cites s: unreachable
    cep = PipelineSettings(ranker="cep")
    r = rank(cep, g, {"s": 1.0})
    assert r.scores["y"] == 0.0 and "y" not in r.paths and r.scores["x"] > 0
    assert rank(cep, WeightedGraph([], []), {}).scores == {}
    with pytest.raises(InputError):
        REGISTRY["cep"].ranker.rank(g, {"s": 1.0}, hop_discount=0.0)
    with pytest.raises(InputError):
        rank(cep, g, {"nobody": 1.0})
    with pytest.raises(TypeError):  # the walk's α is not a CEP parameter: nothing passes it silently
        REGISTRY["cep"].ranker.rank(g, {"s": 1.0}, alpha=0.15)


def test_cep_parameters_are_settings_and_reach_the_ranker():
    assert ranker_parameters("cep") == ("cep_hop_discount", "cep_background_restart", "cep_background_iterations")
    d = PipelineSettings()
    assert (d.cep_hop_discount, d.cep_background_restart, d.cep_background_iterations) == (0.5, 0.5, 24)
    g = WeightedGraph(["s", "a", "b"], [("s", "a", 1.0), ("s", "b", 3.0), ("a", "b", 1.0)])
    # λ = 0.25: M(a) = 0.25·0.25, M(b) = max(0.25·0.75, 0.25²·0.25) = 0.1875; same background as above
    bb = 1.9375 / 4.0625
    bs = (bb + 1) / 6
    ba = 1.125 * bs
    c = {"s": 1 / bs, "a": 0.0625 / ba, "b": 0.1875 / bb}
    total = sum(c.values())
    r = rank(PipelineSettings(ranker="cep", cep_hop_discount=0.25), g, {"s": 1.0})
    assert r.scores == pytest.approx({k: v / total for k, v in c.items()}, abs=1e-6)
    r = rank(PipelineSettings(ranker="cep", cep_background_iterations=3), g, {"s": 1.0})
    assert r.iterations == 3
    # α reaches the walks only: the same settings with another α rank CEP identically
    assert rank(PipelineSettings(ranker="cep", alpha=0.9), g, {"s": 1.0}).scores == \
        rank(PipelineSettings(ranker="cep", alpha=0.1), g, {"s": 1.0}).scores


def test_cep_runs_in_the_pipeline(tiny_source, tmp_path):
    from crase_core.backends import offline_backend
    from crase_core.cache import ResultCache
    from crase_core.pipeline import Engine, run_query
    from crase_core.settings.pipeline import PipelineSettings

    engine = Engine(tiny_source, offline_backend(), ResultCache(tmp_path / "rc"))
    t = run_query("black hole entropy", engine, PipelineSettings(ranker="cep", m=2))
    assert t.ranking.ranker == "cep" and t.results
    assert sum(t.ranking.scores.values()) == pytest.approx(1.0)
    for n, path in t.ranking.paths.items():
        assert path[-1] == n
