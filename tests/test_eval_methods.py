"""Every baseline of ``crase eval`` (paper Table 1) on the tiny corpus, with hand-computed answers.

The plan is fixed to two sub-queries, "entanglement" (only 0001001's title holds it) and
"supergravity" (only 9802001's abstract), so the seeds are S = [0001001, 9802001] (both relevance #1).
The 1.5-hop pool V = S ∪ refs(S) ∪ citers(S) = {0001001, 9802001, 9801001, 9901001, 9902001} and its
citations E (citing → cited): 0001001→9901001, 0001001→9802001, 0001001→9902001, 9802001→9801001,
9901001→9801001, 9901001→9802001. (0002001 cites 9902001 but is not a neighbour of a seed.)
In-degree inside E: 9801001 2, 9802001 2, 9901001 1, 9902001 1, 0001001 0.
"""

from __future__ import annotations

import numpy as np
import pytest
from stub_backend import scripted_backend

from crase_core.errors import InputError
from crase_core.evaluation.benchmark import BenchQuery
from crase_core.evaluation.methods import run_method
from crase_core.pipeline import Engine
from crase_core.settings.pipeline import PipelineSettings

Q = BenchQuery("q1", "entanglement supergravity", ("9801001",))
SETTINGS = PipelineSettings(alpha=0.15, k=50)


@pytest.fixture()
def engine(tiny_source):
    return Engine(tiny_source, scripted_backend(["entanglement", "supergravity"]), None)


def test_bm25_is_the_full_query_search_alone(engine):
    # Both hits match one term of document frequency 1 (same idf) and have the same length (37 content
    # terms, title counted twice); 0001001 holds its term twice (title), 9802001 once (abstract) → 0001001 first.
    out = run_method("bm25", Q, engine, SETTINGS)
    assert out.ranked == ["0001001", "9802001"]
    assert out.trace is None and out.stats["search_calls"] == 1 and out.stats["model_calls"] == 0
    # mean in-corpus citation count of the list: 0001001 has 0 citers, 9802001 has 2 → 1.0
    assert out.stats["hub_degree@10"] == 1.0
    assert run_method("bm25", Q, engine, SETTINGS.replace(k=1)).ranked == ["0001001"]


def test_seeds_baseline_ranks_the_seed_set_by_best_search_rank(engine):
    out = run_method("seeds", Q, engine, SETTINGS)
    assert out.ranked == ["0001001", "9802001"]  # both relevance #1: first seen first
    assert out.stats["n_seeds"] == 2 and out.stats["n_nodes"] == 5 and out.stats["n_edges"] == 6


def test_citations_baseline_is_in_degree_inside_the_unpruned_graph(engine):
    out = run_method("citations", Q, engine, SETTINGS)
    # in-degree 2, 2, 1, 1, 0; ties by id
    assert out.ranked == ["9801001", "9802001", "9901001", "9902001", "0001001"]
    # hub degree counts the whole corpus's citers: 9902001 has 2 there (0001001, 0002001) though 1 in E:
    # (2 + 2 + 1 + 2 + 0) / 5 = 1.4
    assert out.stats["hub_degree@10"] == 1.4
    assert run_method("citations", Q, engine, SETTINGS.replace(k=2)).ranked == ["9801001", "9802001"]


def test_recency_baseline_is_newest_month_first(engine):
    out = run_method("recency", Q, engine, SETTINGS)
    # months from the ids: 200001, 199902, 199901, 199802, 199801
    assert out.ranked == ["0001001", "9902001", "9901001", "9802001", "9801001"]


def test_ppr_unpruned_is_pagerank_on_every_edge_at_weight_one(engine):
    # Uniform weights, restart 1/2 on each seed, α = 0.15, dangling rows (9801001, 9902001) restart at p.
    # By hand (π = 0.85 (Wᵀπ + d·p) + 0.15 p, d = dangling mass):
    #   a = π(0001001) = 0.425 d + 0.075;  c = π(9901001) = π(9902001) = 0.85 a / 3;
    #   b = π(9802001) = 0.85 (a/3 + c/2 + d/2) + 0.075;  f = π(9801001) = 0.85 (b + c/2);  d = c + f
    #   → b ≈ 0.3277, f ≈ 0.3066, a ≈ 0.2334, c ≈ 0.0661: the non-seed 9801001 outranks the seed 0001001.
    out = run_method("ppr-unpruned", Q, engine, SETTINGS)
    assert out.ranked == ["9802001", "9801001", "0001001", "9901001", "9902001"]
    # the same numbers by a dense solve of Eq. 7, (I − 0.85 (Wᵀ + p dᵀ)) π = 0.15 p, with its own matrix
    nodes = ["0001001", "9802001", "9801001", "9901001", "9902001"]
    rows = {"0001001": ["9901001", "9802001", "9902001"], "9802001": ["9801001"], "9901001": ["9801001", "9802001"]}
    W = np.zeros((5, 5))
    for u, vs in rows.items():
        for v in vs:
            W[nodes.index(u), nodes.index(v)] = 1 / len(vs)
    p = np.array([0.5, 0.5, 0, 0, 0])
    dangling = np.array([u not in rows for u in nodes], dtype=float)
    pi = np.linalg.solve(np.eye(5) - 0.85 * (W.T + np.outer(p, dangling)), 0.15 * p)
    assert pi == pytest.approx([0.23343, 0.32767, 0.30663, 0.06614, 0.06614], abs=1e-5)
    assert sorted(nodes, key=lambda n: -pi[nodes.index(n)])[:3] == out.ranked[:3]


def test_graph_baselines_use_the_papers_pool_but_crase_keeps_its_settings(engine):
    base = run_method("citations", Q, engine, SETTINGS)
    assert base.trace is not None
    assert base.trace.settings.text_candidates == 0 and base.trace.settings.personalization == "uniform"
    full = run_method("crase", Q, engine, SETTINGS)
    assert full.trace is not None and full.trace.settings == SETTINGS
    assert full.ranked == [r.paper_id for r in full.trace.results]
    assert full.stats["n_seeds"] == 2 and full.stats["search_calls"] == 3  # two sub-queries + the full query


def test_unknown_method_and_dense_without_its_index_are_refused(engine):
    with pytest.raises(InputError, match="unknown method"):
        run_method("magic", Q, engine, SETTINGS)
    with pytest.raises(InputError, match="dense baseline"):
        run_method("dense", Q, engine, SETTINGS, dense=None)


def test_dense_baseline_ranks_the_visible_corpus(engine):
    from crase_core.evaluation.dense import DenseIndex

    index = DenseIndex(engine.source, progress=False)
    out = run_method("dense", BenchQuery("q2", "lattice gauge theory glueball spectrum", ("9902001",)), engine,
                     SETTINGS.replace(k=3), dense=index)
    assert len(out.ranked) == 3 and out.ranked[0] == "9902001"  # the glueball lattice paper is the closest
