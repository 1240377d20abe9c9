"""Score parts (crase_core.ranking.score_parts): exact numbers on small hand-checked graphs, per ranker and fusion mode.

The graphs:

* chain a → b → c, restart p = {a: ½, b: ½}, α = ½. PPR: π = (4, 6, 3)/13 (c dangling, its mass restarts at
  p). G = (I − ½Wᵀ)⁻¹: walks from a reach a 1, b ½, c ¼; from b: b 1, c ½. So c's score splits a : b =
  ½·¼ : ½·½ = 1 : 2, b's likewise 1 : 2, a's is all a's; the one path a → b → c carries all of a's share.
* fan a → c, b → c, b → d, p = {a: ½, b: ½}, α = ½. SALSA: hubs h = (3/7, 4/7) over (a, b), authorities
  a(c) = 5/7, a(d) = 2/7. FᵀG: from a: c 12/7, d 2/7; from b: c 8/7, d 6/7. c splits a : b = 3 : 2, d 1 : 3;
  d's path from a is a → c ⇠ b → d (cite, back to the other citer of c, cite): 1 · ½ · ½ · ½ = 1/8, 7/64
  of d's score; b's direct b → d is F[b, d] = ½: 7/16 of it.
"""

from __future__ import annotations

import numpy as np
import pytest

from crase_core.ranking.cep import ContrastiveEvidencePaths
from crase_core.ranking.score_parts import parts_total
from crase_core.ranking.walks import PersonalizedPageRank, PersonalizedSALSA, WeightedGraph
from crase_core.records import SearchHit, Seed, SeedOrigin
from crase_core.retrieval.text_parts import BM25, PAIRS
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.ranking import rank_graph, score_parts

CHAIN = WeightedGraph(["a", "b", "c"], [("a", "b", 1.0), ("b", "c", 1.0)])
FAN = WeightedGraph(["a", "b", "c", "d"], [("a", "c", 1.0), ("b", "c", 1.0), ("b", "d", 1.0)])
HALF = {"a": 0.5, "b": 0.5}
EXACT = {"rel": 1e-9, "abs": 1e-12}


def test_ppr_split_by_restart_source_is_exact_on_the_chain():
    scores = PersonalizedPageRank().rank(CHAIN, HALF, alpha=0.5, tol=1e-15).scores
    assert scores == pytest.approx({"a": 4 / 13, "b": 6 / 13, "c": 3 / 13}, **EXACT)
    at = PersonalizedPageRank().attribute(CHAIN, HALF, ["a", "b", "c"], alpha=0.5, tol=1e-15)
    assert at["a"].shares == pytest.approx({"a": 1.0}, **EXACT)
    assert at["b"].shares == pytest.approx({"a": 1 / 3, "b": 2 / 3}, **EXACT)
    assert at["c"].shares == pytest.approx({"a": 1 / 3, "b": 2 / 3}, **EXACT)
    nodes, along, fraction = at["c"].paths["a"]
    assert nodes == ["a", "b", "c"] and along == [True, True] and fraction == pytest.approx(1 / 3, **EXACT)
    assert at["c"].paths["b"][0] == ["b", "c"] and at["c"].paths["b"][2] == pytest.approx(2 / 3, **EXACT)
    assert at["a"].paths["a"][0] == ["a"]  # a restart at the paper itself: the walk of no step


def test_salsa_split_by_restart_source_is_exact_on_the_fan():
    scores = PersonalizedSALSA().rank(FAN, HALF, alpha=0.5, tol=1e-15).scores
    assert scores == pytest.approx({"a": 0.0, "b": 0.0, "c": 5 / 7, "d": 2 / 7}, **EXACT)
    at = PersonalizedSALSA().attribute(FAN, HALF, ["c", "d", "a"], alpha=0.5, tol=1e-15)
    assert at["c"].shares == pytest.approx({"a": 3 / 5, "b": 2 / 5}, **EXACT)
    assert at["d"].shares == pytest.approx({"a": 1 / 4, "b": 3 / 4}, **EXACT)
    assert at["a"].shares == {}  # nobody cites a: SALSA gives it nothing, from no source
    nodes, along, fraction = at["d"].paths["a"]
    assert nodes == ["a", "c", "b", "d"] and along == [True, False, True]
    assert fraction == pytest.approx(7 / 64, **EXACT)
    assert at["d"].paths["b"][0] == ["b", "d"] and at["d"].paths["b"][2] == pytest.approx(7 / 16, **EXACT)
    assert at["c"].paths["a"][2] == pytest.approx(7 / 20, **EXACT)  # a → c: ½·1 of the 10/7 that reaches c


@pytest.mark.parametrize("ranker", [PersonalizedPageRank(), PersonalizedSALSA()])
def test_walk_split_matches_the_dense_solution_on_a_random_graph(ranker):
    """On a random weighted graph with dangling nodes: each source's share is p_s·G[v, s] / Σ (PPR, G the
    dense inverse) or p_s·(FᵀG)[v, s] / Σ (SALSA), and the shares times the score sum to the score."""
    rng = np.random.default_rng(7)
    names = [f"n{i}" for i in range(12)]
    edges = [(names[i], names[j], float(rng.uniform(0.2, 2.0))) for i in range(12) for j in range(12)
             if i != j and i < 10 and rng.random() < 0.25]  # n10, n11 cite nothing (dangling)
    graph = WeightedGraph(names, edges)
    p = {names[i]: float(rng.uniform(0.1, 1.0)) for i in (0, 3, 5, 8, 10)}
    alpha = 0.3
    scores = ranker.rank(graph, p, alpha=alpha, tol=1e-15).scores
    at = ranker.attribute(graph, p, names, alpha=alpha, tol=1e-15)
    pv = graph.vector(p) / sum(p.values())
    m = graph.matrix().toarray()
    out = m.sum(1, keepdims=True)
    f = np.divide(m, out, out=np.zeros_like(m), where=out > 0)
    if ranker.name == "ppr":
        reach = np.linalg.inv(np.eye(12) - (1 - alpha) * f.T)  # reach[v, s] = G[v, s]
    else:
        inc = m.sum(0, keepdims=True)
        b = np.divide(m.T, inc.T, out=np.zeros_like(m.T), where=inc.T > 0)
        reach = f.T @ np.linalg.inv(np.eye(12) - (1 - alpha) * b.T @ f.T)
    for i, v in enumerate(names):
        contrib = pv * reach[i]
        want = {names[s]: contrib[s] / contrib.sum() for s in np.flatnonzero(contrib > 0)} if contrib.sum() else {}
        assert at[v].shares == pytest.approx(want, rel=1e-8, abs=1e-12)
        assert sum(scores[v] * x for x in at[v].shares.values()) == pytest.approx(scores[v] if want else 0.0, abs=1e-15)


def test_cep_score_comes_whole_from_its_strongest_path():
    """s1 → x and s2 → y → x, p uniform: M(x) = max(½·½·1, ½·½·1·½·1) from s1's one hop."""
    graph = WeightedGraph(["s1", "s2", "y", "x"], [("s1", "x", 1.0), ("s2", "y", 1.0), ("y", "x", 1.0)])
    at = ContrastiveEvidencePaths().attribute(graph, {"s1": 0.5, "s2": 0.5}, ["x", "y", "s2"])
    assert at["x"].shares == {"s1": 1.0} and at["x"].paths["s1"] == (["s1", "x"], [True], 1.0)
    assert at["y"].shares == {"s2": 1.0} and at["y"].paths["s2"][0] == ["s2", "y"]
    assert at["s2"].paths["s2"][0] == ["s2"]


# ---- every fusion mode on the chain ---------------------------------------------------------------------
SEEDS = [Seed("a", [SeedOrigin(0, "q", 1, 1, 1)]), Seed("b", [SeedOrigin(0, "q", 2, 2, 2)])]
#: the full-query search: a (score 2 = BM25 1.5 + word pairs 0.5) first, c (BM25 1) second; b not returned
HITS = [SearchHit("a", 1, 1, 2.0, {BM25: 1.5, PAIRS: 0.5}), SearchHit("c", 2, 2, 1.0, {BM25: 1.0})]


def _parts(fusion: str, ranker: str = "ppr", **extra) -> dict[str, dict[tuple[str, str], float]]:
    settings = PipelineSettings(ranker=ranker, alpha=0.5, tol=1e-15, personalization="uniform", fusion=fusion,
                                fusion_weight=0.5, rrf_k=1.0, query_power=2.0, text_rank_weight=0.5,
                                text_rank_confidence=0.0, text_rank_specificity=0.0, text_floor=0, k=3,
                                text_candidates=0, **extra)
    ranked = rank_graph(ranker, ["a", "b", "c"], {"a", "b", "c"}, [], CHAIN.edges, SEEDS, HITS, settings, query="q")
    parts = score_parts(ranked, ranker, settings, [n for n, _ in ranked.order], HITS)
    final = dict(ranked.order)
    out = {}
    for node, ps in parts.items():
        assert parts_total(ps) == pytest.approx(final[node], rel=1e-13, abs=1e-15)  # the parts sum to the score
        out[node] = {(p.part.split(" · ")[0], p.component): p.value for p in ps}
    return out


W = "walk (PPR) from restart at "


def test_fusion_none_is_the_walk_split_by_source():
    parts = _parts("none")
    assert parts["c"] == pytest.approx({("walk score", W + "a"): 1 / 13, ("walk score", W + "b"): 2 / 13}, **EXACT)
    assert parts["a"] == pytest.approx({("walk score", W + "a"): 4 / 13}, **EXACT)


def test_fusion_linear_scales_the_walk_and_the_text_exactly():
    """(1−λ)π/max π + λt/max t, λ = ½, max π = 6/13, max t = 2."""
    parts = _parts("linear")
    assert parts["a"] == pytest.approx({("walk term", W + "a"): 1 / 3, ("text term", BM25): 0.375,
                                        ("text term", PAIRS): 0.125}, **EXACT)
    assert parts["c"] == pytest.approx({("walk term", W + "a"): 1 / 12, ("walk term", W + "b"): 1 / 6,
                                        ("text term", BM25): 0.25}, **EXACT)
    assert parts["b"] == pytest.approx({("walk term", W + "a"): 1 / 6, ("walk term", W + "b"): 1 / 3,
                                        ("text term", "text (0)"): 0.0}, **EXACT)


def test_fusion_restart_reads_text_to_the_power_gamma():
    """λ·t^γ/max t^γ with γ = 2: a gets ½·4/4, split ¾ : ¼ like its t; c ½·1/4."""
    parts = _parts("restart")
    assert parts["a"] == pytest.approx({("walk term", W + "a"): 1 / 3, ("text term", BM25): 0.375,
                                        ("text term", PAIRS): 0.125}, **EXACT)
    assert parts["c"][("text term", BM25)] == pytest.approx(0.125, **EXACT)


def test_fusion_rrf_splits_the_walk_rank_term_like_the_walk_score():
    """Walk ranks b 1, a 2, c 3; text ranks a 1, c 2; λ = ½, k = 1."""
    parts = _parts("rrf")
    assert parts["a"] == pytest.approx({("walk-rank term", W + "a"): 1 / 6, ("text-rank term", BM25): 3 / 16,
                                        ("text-rank term", PAIRS): 1 / 16}, **EXACT)
    assert parts["b"] == pytest.approx({("walk-rank term", W + "a"): 1 / 12, ("walk-rank term", W + "b"): 1 / 6},
                                       **EXACT)
    assert parts["c"] == pytest.approx({("walk-rank term", W + "a"): 1 / 24, ("walk-rank term", W + "b"): 1 / 12,
                                        ("text-rank term", BM25): 1 / 6}, **EXACT)


def test_fusion_restart_rrf_splits_the_fused_rank_by_the_restart_fusion():
    """g = (5/6, ½, 3/8) → ranks a 1, b 2, c 3; search ranks a 1, c 2; μ = ½, k = 1."""
    parts = _parts("restart-rrf")
    assert parts["a"] == pytest.approx({("fused-rank term", W + "a"): 0.1, ("fused-rank term", BM25): 0.1125,
                                        ("fused-rank term", PAIRS): 0.0375, ("search-rank term", BM25): 0.1875,
                                        ("search-rank term", PAIRS): 0.0625}, **EXACT)
    assert parts["b"] == pytest.approx({("fused-rank term", W + "a"): 1 / 18, ("fused-rank term", W + "b"): 1 / 9},
                                       **EXACT)
    assert parts["c"] == pytest.approx({("fused-rank term", W + "a"): 1 / 36, ("fused-rank term", W + "b"): 1 / 18,
                                        ("fused-rank term", BM25): 1 / 24, ("search-rank term", BM25): 1 / 6}, **EXACT)


def test_the_text_floor_is_a_part_of_its_own():
    """Fusion none, floor 1, k 1: the search's first paper (a, walk 4/13) is lifted over b (6/13) and takes its
    score; the floor part is the difference."""
    assert all(p[1] != "text floor" for p in _parts("none")["a"])  # no floor, no floor part
    settings = PipelineSettings(ranker="ppr", alpha=0.5, tol=1e-15, personalization="uniform", fusion="none",
                                text_floor=1, k=1, text_candidates=0)
    ranked = rank_graph("ppr", ["a", "b", "c"], {"a", "b", "c"}, [], CHAIN.edges, SEEDS, HITS, settings, query="q")
    assert ranked.order[0][0] == "a"
    got = {p.component: p.value for p in score_parts(ranked, "ppr", settings, ["a"], HITS)["a"]}
    assert got == pytest.approx({W + "a": 4 / 13, "text floor": 2 / 13}, **EXACT)


def test_salsa_and_cep_parts_in_the_default_fusion():
    parts = _parts("restart-rrf", ranker="salsa")
    # SALSA on the chain: a is cited by nobody (0); b only by a; c only by b — each from the one source that cites it
    assert {k for k in parts["c"] if k[1].startswith("walk")} == {("fused-rank term", "walk (SALSA) from restart at b")}
    assert {k for k in parts["b"] if k[1].startswith("walk")} == {("fused-rank term", "walk (SALSA) from restart at a")}
    cep = _parts("restart-rrf", ranker="cep")
    assert {k for k in cep["c"] if k[1].startswith("walk")} == {("fused-rank term", "walk (CEP) from restart at b")}


def test_more_sources_than_shown_keep_the_sum_exact():
    """Five sources get parts of their own, the rest one part named for how many they are."""
    names = [f"s{i}" for i in range(8)] + ["t"]
    graph_edges = [(f"s{i}", "t", float(i + 1)) for i in range(8)]
    seeds = [Seed(f"s{i}", [SeedOrigin(0, "q", i + 1, i + 1, 1)]) for i in range(8)]
    settings = PipelineSettings(ranker="ppr", personalization="uniform", fusion="none", text_candidates=0, k=9,
                                tol=1e-15)
    ranked = rank_graph("ppr", names, set(names), [], graph_edges, seeds, [], settings, query="q")
    parts = score_parts(ranked, "ppr", settings, ["t"], [])["t"]
    assert len(parts) == 6 and parts[-1].component == "walk (PPR) from 3 other restart sources"
    assert parts_total(parts) == pytest.approx(ranked.ranking.scores["t"], rel=1e-14)
    # every seed restarts with ⅛ and sends all of it to t on one hop: t's share from s_i is ∝ 1 (uniform)
    assert [p.value for p in parts[:5]] == pytest.approx([ranked.ranking.scores["t"] / 8] * 5, rel=1e-9)
