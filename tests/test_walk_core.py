"""The one walk core (crase_core.ranking.walks): numpy CSR products as scipy's, PPR as networkx's, one
convergence rule for the scores and their attribution."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from crase_core.ranking import walks
from crase_core.ranking.walks import (
    PersonalizedPageRank,
    PersonalizedSALSA,
    SparseRows,
    WeightedGraph,
    iterate,
    stable_order,
)


def _random_graph(seed: int, n: int = 60, density: float = 0.08) -> tuple[list[str], list[tuple[str, str, float]]]:
    rng = np.random.default_rng(seed)
    names = [f"p{i}" for i in range(n)]
    edges = [(names[i], names[j], float(rng.uniform(0.05, 3.0))) for i in range(n) for j in range(n)
             if i != j and i < n - 5 and rng.random() < density]  # the last five cite nothing (dangling)
    return names, edges


def test_sparse_rows_product_is_scipys_to_the_last_bit(monkeypatch):
    """numpy's products (a one-shot run, scipy not loaded) against scipy's."""
    monkeypatch.setattr(walks, "scipy_loaded", lambda: False)
    rng = np.random.default_rng(3)
    rows, cols = rng.integers(0, 200, 3000), rng.integers(0, 150, 3000)
    data = rng.uniform(0.0, 1.0, 3000)
    ours = SparseRows.from_entries((200, 150), rows, cols, data)
    theirs = sp.csr_matrix((data, (rows, cols)), shape=(200, 150))
    theirs.sum_duplicates()
    x = rng.uniform(size=150)
    assert np.allclose(ours.toscipy().toarray(), theirs.toarray(), rtol=0, atol=1e-15)
    cells = np.unique(rows * 150 + cols)  # without parallel entries: the same sums in the same order
    once = SparseRows.from_entries((200, 150), cells // 150, cells % 150, data[: cells.size])
    assert np.array_equal(once.dot(x), sp.csr_matrix((data[: cells.size], (cells // 150, cells % 150)),
                                                     shape=(200, 150)) @ x)
    assert np.allclose(ours.dot(x), theirs @ x, rtol=1e-14, atol=0)
    block = rng.uniform(size=(150, 4))
    assert np.allclose(ours.dot(block), theirs @ block, rtol=1e-13, atol=0)  # numpy (small)
    monkeypatch.setattr(walks, "SCIPY_BLOCK_NNZ", 0)
    large = SparseRows.from_entries((200, 150), rows, cols, data)
    assert np.allclose(large.dot(block), theirs @ block, rtol=1e-13, atol=0)  # scipy (large)
    assert np.allclose(ours.transpose().toscipy().toarray(), theirs.T.toarray(), rtol=1e-15, atol=0)
    assert ours.get(int(rows[0]), int(cols[0])) == pytest.approx(theirs[int(rows[0]), int(cols[0])], rel=1e-15)
    assert np.allclose(ours.columns([3, 7]), theirs[:, [3, 7]].toarray(), rtol=1e-15, atol=0)


def test_stable_order_is_lexsorts_permutation():
    """The radix order (keys under 2^16) and the fallback (larger keys) sort by (primary, secondary) with ties
    kept in place, exactly as np.lexsort: the matrices, hence every walk's bits, do not depend on which ran."""
    rng = np.random.default_rng(11)
    for high in (5, 300, 70_000):
        primary, secondary = rng.integers(0, high, 5000), rng.integers(0, high, 5000)
        assert np.array_equal(stable_order(primary, secondary), np.lexsort((secondary, primary)))
    empty = np.array([], dtype=np.int64)
    assert stable_order(empty, empty).size == 0
    for n in (400, 70_000):  # a transpose by one stable sort of the columns equals scipy's, entry for entry
        rows, cols = rng.integers(0, n, 3000), rng.integers(0, n, 3000)
        m = SparseRows.from_entries((n, n), rows, cols, rng.uniform(0.1, 1.0, 3000))
        t, theirs = m.transpose(), m.toscipy().T.tocsr()
        theirs.sort_indices()
        assert np.array_equal(t.indptr, theirs.indptr) and np.array_equal(t.indices, theirs.indices)
        assert np.array_equal(t.data, theirs.data)


def test_products_with_scipy_loaded_are_numpys(monkeypatch):
    """Once scipy is loaded (the explorer: load_block_kernel) vectors and blocks go to its kernel: a vector's
    product has the same bits as numpy's, so a walk ranks alike in every process; a block's agrees to 1e-13."""
    rng = np.random.default_rng(5)
    cells = np.unique(rng.integers(0, 300 * 300, 4000))
    m = SparseRows.from_entries((300, 300), cells // 300, cells % 300, rng.uniform(0.0, 1.0, cells.size))
    x, block = rng.uniform(size=300), rng.uniform(size=(300, 50))
    monkeypatch.setattr(walks, "scipy_loaded", lambda: False)
    plain, plain_block = m.dot(x), m.dot(block)
    monkeypatch.setattr(walks, "scipy_loaded", lambda: True)
    fresh = SparseRows.from_entries((300, 300), cells // 300, cells % 300, m.data)
    assert np.array_equal(fresh.dot(x), plain)
    assert np.allclose(fresh.dot(block), plain_block, rtol=1e-13, atol=0)
    names, edges = _random_graph(4, n=80)
    p = {names[0]: 0.5, names[7]: 0.5}
    monkeypatch.setattr(walks, "scipy_loaded", lambda: False)
    a = PersonalizedPageRank().rank(WeightedGraph(names, edges), p).scores
    monkeypatch.setattr(walks, "scipy_loaded", lambda: True)
    assert PersonalizedPageRank().rank(WeightedGraph(names, edges), p).scores == a


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ppr_is_networkx_pagerank(seed):
    names, edges = _random_graph(seed)
    p = {names[i]: 1.0 for i in (0, 4, 9)}
    ours = PersonalizedPageRank().rank(WeightedGraph(names, edges), p, alpha=0.15, tol=1e-12).scores
    g = nx.DiGraph()
    g.add_nodes_from(names)
    g.add_weighted_edges_from(edges)
    pn = {n: p.get(n, 0.0) / 3 for n in names}
    theirs = nx.pagerank(g, alpha=0.85, personalization=pn, dangling=pn, tol=1e-14, max_iter=1000)
    assert max(abs(ours[n] - theirs[n]) for n in names) <= 1e-9


def test_one_convergence_rule_for_vectors_and_blocks():
    """x ← rhs + (1 − α)·Px stops when every column's L1 change is below tol times its L1 norm; a column is the
    same fixed point whether solved alone or in a block (the attribution's solve is the walk's)."""
    names, edges = _random_graph(5, n=30, density=0.15)
    w = WeightedGraph(names, edges).weights()
    out = w.row_sums()
    stochastic = w.scale_rows(np.divide(1.0, out, out=np.zeros_like(out), where=out > 0))
    rhs = np.zeros((30, 2))
    rhs[0, 0], rhs[7, 1] = 1.0, 1.0
    block = iterate(rhs, stochastic.dot, 0.3, 1e-12, 1000)
    alone = iterate(rhs[:, 1], stochastic.dot, 0.3, 1e-12, 1000)
    assert block.converged and alone.converged and block.residual < 1e-12
    exact = np.linalg.solve(np.eye(30) - 0.7 * stochastic.toscipy().toarray(), rhs)
    assert np.allclose(block.x, exact, rtol=1e-10, atol=1e-14)
    assert np.allclose(alone.x, exact[:, 1], rtol=1e-10, atol=1e-14)
    capped = iterate(rhs, stochastic.dot, 0.3, 1e-12, 3)
    assert not capped.converged and capped.iterations == 3


def test_salsa_ranking_reports_the_shared_iteration():
    names, edges = _random_graph(8)
    result = PersonalizedSALSA().rank(WeightedGraph(names, edges), {names[0]: 1.0}, alpha=0.5, tol=1e-10)
    assert result.converged and 0 < result.iterations < 100 and result.residual < 1e-10
    assert sum(result.scores.values()) == pytest.approx(1.0, abs=1e-12)


def test_a_graph_without_edges_walks_to_the_restart():
    """No citation at all (a corpus without citations): the products are float zeros, not integers, and
    PPR's answer is the restart distribution itself."""
    from crase_core.ranking.walks import SparseRows

    empty = SparseRows.from_entries((3, 3), np.array([], dtype=np.int64), np.array([], dtype=np.int64),
                                    np.array([], dtype=np.float64))
    out = empty.dot(empty.dot(np.array([0.2, 0.3, 0.5])))
    assert out.dtype == np.float64 and out.tolist() == [0.0, 0.0, 0.0]


def test_a_dense_block_product_is_the_sparse_one(monkeypatch):
    """A small, well-filled matrix multiplies blocks dense (BLAS); the same products as the sparse path to
    1e-13, and a sparse matrix stays sparse."""
    rng = np.random.default_rng(8)
    cells = np.unique(rng.integers(0, 120 * 120, 2000))
    m = SparseRows.from_entries((120, 120), cells // 120, cells % 120, rng.uniform(0.0, 1.0, cells.size))
    assert m.dense_is_faster()
    block = rng.uniform(size=(120, 30))
    dense = m.dot(block)
    monkeypatch.setattr(walks, "DENSE_CELLS", 0)
    sparse = SparseRows.from_entries((120, 120), cells // 120, cells % 120, m.data)
    assert not sparse.dense_is_faster()
    assert np.allclose(dense, sparse.dot(block), rtol=1e-13, atol=0)
    thin = SparseRows.from_entries((3000, 3000), np.arange(3000), (np.arange(3000) + 1) % 3000, np.ones(3000))
    monkeypatch.setattr(walks, "DENSE_CELLS", 1 << 20)
    assert not thin.dense_is_faster()  # 9M cells, 3,000 entries


def _pointers_every_column(forward, backward, alpha, direct):
    """The path search of ``walks._salsa_pointers`` recomputing every column every round (the reference)."""
    best = direct.copy()
    via_a = np.full(best.shape, -1, dtype=np.int64)
    via_h = np.full(best.shape, -1, dtype=np.int64)
    cols = np.arange(best.shape[1])
    for _ in range(walks.PATH_STEPS // 2):
        back, back_arg = walks._row_best(backward, best)
        cand, arg = walks._row_best(forward, (1.0 - alpha) * back)
        better = cand > best * (1.0 + 1e-12)
        if not better.any():
            break
        best[better] = cand[better]
        via_a[better] = arg[better]
        via_h[better] = back_arg[arg, cols[None, :]][better]
    return via_a, via_h


def _walk_pointers_every_column(step, targets):
    n, width = step.shape[0], len(targets)
    cols = np.arange(width)
    best = np.zeros((n, width))
    best[list(targets), cols] = 1.0
    nxt = np.full((n, width), -1, dtype=np.int64)
    for _ in range(walks.PATH_STEPS):
        cand, arg = walks._row_best(step, best)
        better = cand > best * (1.0 + 1e-12)
        better[list(targets), cols] = False
        if not better.any():
            break
        best[better] = cand[better]
        nxt[better] = arg[better]
    return nxt


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_path_search_skips_only_settled_columns(seed):
    """The strongest-path pointers recompute only the columns that improved in the last round: the same
    pointers as recomputing every column (a settled column cannot improve)."""
    names, edges = _random_graph(seed, n=90, density=0.05)
    m = walks.walk_matrices(WeightedGraph(names, edges))
    targets = list(range(0, 90, 4))
    direct = m.forward.columns(targets)
    ours = walks._salsa_pointers(m.forward, m.backward, 0.15, direct)
    theirs = _pointers_every_column(m.forward, m.backward, 0.15, direct)
    assert np.array_equal(ours[0], theirs[0]) and np.array_equal(ours[1], theirs[1])
    step = m.forward.scale_rows(np.full(90, 0.85))
    assert np.array_equal(walks._walk_pointers(step, targets), _walk_pointers_every_column(step, targets))
