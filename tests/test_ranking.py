"""PPR and SALSA against hand computations and the closed form (paper Eq. 7)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from crase_core.errors import InputError
from crase_core.ranking.walks import PersonalizedPageRank, PersonalizedSALSA, WeightedGraph, top_k

PPR = PersonalizedPageRank()
SALSA = PersonalizedSALSA()


def closed_form(nodes, edges, p, alpha):
    """Eq. 7 with dangling rows replaced by p, solved densely."""
    n = len(nodes)
    pos = {v: i for i, v in enumerate(nodes)}
    w = np.zeros((n, n))
    for u, v, x in edges:
        w[pos[u], pos[v]] += x
    pv = np.array([p.get(v, 0.0) for v in nodes])
    pv = pv / pv.sum()
    for i in range(n):
        s = w[i].sum()
        w[i] = w[i] / s if s > 0 else pv
    return alpha * np.linalg.solve(np.eye(n) - (1 - alpha) * w.T, pv)


def test_ppr_two_nodes_by_hand():
    # s → v, v dangling (its row becomes p = δ_s): π_s = α / (1 − (1−α)²) = 20/37, π_v = 17/37
    r = PPR.rank(WeightedGraph(["s", "v"], [("s", "v", 1.0)]), {"s": 1.0}, alpha=0.15, tol=1e-14, max_iter=10_000)
    assert r.scores["s"] == pytest.approx(20 / 37, abs=1e-12)
    assert r.scores["v"] == pytest.approx(17 / 37, abs=1e-12)
    assert r.converged


@pytest.mark.parametrize("alpha", [0.15, 0.5, 0.85])
def test_ppr_matches_closed_form_with_dangling_and_disconnected_parts(alpha):
    nodes = ["a", "b", "c", "d", "e", "f"]
    edges = [("a", "b", 1.0), ("a", "c", 3.0), ("b", "c", 0.5), ("c", "a", 0.2), ("e", "f", 2.0), ("b", "d", 1.0)]
    # d and f are dangling; {e, f} is a part no seed reaches; e is a second restart point
    p = {"a": 0.75, "e": 0.25}
    r = PPR.rank(WeightedGraph(nodes, edges), p, alpha=alpha, tol=1e-13, max_iter=10_000)
    expected = closed_form(nodes, edges, p, alpha)
    got = np.array([r.scores[v] for v in nodes])
    assert np.allclose(got, expected, atol=1e-10)
    assert got.sum() == pytest.approx(1.0, abs=1e-12)


def test_ppr_unreached_part_scores_zero():
    nodes = ["s", "t", "x", "y"]
    r = PPR.rank(WeightedGraph(nodes, [("s", "t", 1.0), ("x", "y", 1.0)]), {"s": 1.0}, alpha=0.15, tol=1e-12,
                 max_iter=1000)
    assert r.scores["x"] == 0.0 and r.scores["y"] == 0.0
    assert r.scores["s"] + r.scores["t"] == pytest.approx(1.0)


def test_ppr_agrees_with_networkx_on_weighted_graph():
    rng = np.random.default_rng(7)
    nodes = [f"n{i}" for i in range(40)]
    edges = [(nodes[i], nodes[j], float(rng.uniform(0.1, 2))) for i in range(40) for j in range(40)
             if i != j and rng.random() < 0.08]
    p = {"n0": 0.5, "n3": 0.3, "n9": 0.2}
    ours = PPR.rank(WeightedGraph(nodes, edges), p, alpha=0.15, tol=1e-13, max_iter=10_000).scores
    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    g.add_weighted_edges_from(edges)
    theirs = nx.pagerank(g, alpha=0.85, personalization=p, dangling=p, weight="weight", tol=1e-14, max_iter=10_000)
    for v in nodes:
        assert ours[v] == pytest.approx(theirs[v], abs=1e-9)


def test_salsa_by_hand():
    # s→a, s→b, t→a; restart at s. Hub chain gives h_s = 46/63, h_t = 17/63;
    # authorities a = h_s/2 + h_t = 40/63, b = h_s/2 = 23/63; hubs s, t (nobody cites them) score 0.
    g = WeightedGraph(["s", "t", "a", "b"], [("s", "a", 1.0), ("s", "b", 1.0), ("t", "a", 1.0)])
    r = SALSA.rank(g, {"s": 1.0}, alpha=0.15, tol=1e-14, max_iter=10_000)
    assert r.scores["a"] == pytest.approx(40 / 63, abs=1e-10)
    assert r.scores["b"] == pytest.approx(23 / 63, abs=1e-10)
    assert r.scores["s"] == 0.0 and r.scores["t"] == 0.0
    assert sum(r.scores.values()) == pytest.approx(1.0)


def test_salsa_weights_matter():
    # s→a weight 3, s→b weight 1: one forward step from s splits 3:1, and b's only citer is s
    g = WeightedGraph(["s", "a", "b"], [("s", "a", 3.0), ("s", "b", 1.0)])
    r = SALSA.rank(g, {"s": 1.0}, alpha=0.15, tol=1e-14, max_iter=10_000)
    assert r.scores["a"] == pytest.approx(0.75, abs=1e-10)
    assert r.scores["b"] == pytest.approx(0.25, abs=1e-10)


def test_rankers_reject_bad_input():
    g = WeightedGraph(["a", "b"], [("a", "b", 1.0)])
    with pytest.raises(InputError):
        PPR.rank(g, {"zzz": 1.0}, alpha=0.15, tol=1e-10, max_iter=100)
    with pytest.raises(InputError):
        WeightedGraph(["a", "a"], [])
    with pytest.raises(InputError):
        PPR.rank(WeightedGraph(["a", "b"], [("a", "b", -1.0)]), {"a": 1.0}, alpha=0.15, tol=1e-10, max_iter=100)


def test_empty_graph_ranks_nothing():
    assert PPR.rank(WeightedGraph([], []), {}, alpha=0.15, tol=1e-10, max_iter=10).scores == {}


def test_top_k_breaks_ties_by_given_order():
    assert top_k({"x": 0.2, "y": 0.5, "z": 0.2}, 2, ["z", "x", "y"]) == [("y", 0.5), ("z", 0.2)]
