"""Stage 3 rankers over the pruned, weighted evidence graph. Pure functions of (graph, p).

All rankers share one interface, :class:`Ranker`, and return a distribution
over the graph's nodes (scores sum to 1).

* :class:`PersonalizedPageRank` — paper Eq. 6: π = (1−α) Wᵀπ + α p, W the
  row-normalised weights, dangling rows replaced by p; closed form Eq. 7
  π = α (I − (1−α) Wᵀ)⁻¹ p. Solved by sparse power iteration until the L1
  change is below ``tol`` times the L1 norm (contraction rate 1−α, so about log(tol)/log(1−α)
  iterations).
* :class:`PersonalizedSALSA` — SALSA's hub/authority alternation (Lempel &
  Moran 2001) with restarts: a walker on the hub side follows an out-edge
  u→v with probability w(u,v)/Σ_v' w(u,v') to authority v, then goes back
  along an in-edge of v to hub u' with probability w(u',v)/Σ_u'' w(u'',v);
  before each forward step it restarts at p with probability α, and a hub with
  no out-edge restarts at p. The hub chain is
  h = α p + (1−α) (Bᵀ Fᵀ h + d(h) p), d(h) the dangling hub mass;
  the score is the authority distribution a ∝ Fᵀ h. Papers nobody in the
  graph cites score 0.

Both walks, and the attributions that explain them, run one power iteration (:func:`iterate`: one
convergence rule) over numpy CSR matrices (:class:`SparseRows`, built once per graph: :func:`walk_matrices`).
Both walks are linear in their restart vector up to normalisation, so a score splits exactly over
the restart sources (:func:`ppr_attribution`, :func:`salsa_attribution`: each ranker's ``attribute``).

The registry of rankers (names, the settings each one reads, the one
``rank(settings, graph, p)`` call) is :mod:`crase_core.ranking.rankers`; the helpers
shared with other rankers (:class:`WeightedGraph`, :func:`row_normalize`,
:func:`restart_vector`) are public here.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from crase_core.errors import InputError
from crase_core.records import RankingResult

if TYPE_CHECKING:
    import scipy.sparse as sp


#: a matrix with at least this many entries multiplies blocks of vectors (an attribution's) with scipy, loaded
#: then: on a graph this large its import is a small part of the product's time; vectors always go the numpy way
SCIPY_BLOCK_NNZ = 20_000


#: a block product (an attribution's n × T) multiplies a dense copy of a matrix of at most this many cells
#: (8 MB) holding at least one entry in ``DENSE_FILL`` of them: BLAS then beats a sparse product
DENSE_CELLS = 1 << 20
DENSE_FILL = 32


def load_block_kernel() -> None:
    """Import ``scipy.sparse`` now, so that every block product (an attribution's, :meth:`SparseRows.dot`) uses
    its compiled CSR kernel, about 10× numpy's on the graphs a run ranks. A long-lived process (the explorer)
    calls it once at start; a one-shot ``crase query`` does not: there the import would cost more than the
    products it speeds up. Blocks go to scipy whenever it is loaded, whoever loaded it."""
    import scipy.sparse  # noqa: F401


def stable_order(primary: np.ndarray, secondary: np.ndarray) -> np.ndarray:
    """The permutation that sorts entries by (``primary``, ``secondary``), ties kept in their order: the same
    permutation as ``np.lexsort((secondary, primary))``, by two stable radix sorts when both keys fit in 16 bits
    (a graph of fewer than 65,536 papers; several times faster than lexsort there).

    >>> stable_order(np.array([1, 0, 1]), np.array([0, 5, 0])).tolist()
    [1, 0, 2]
    """
    if primary.size == 0 or max(int(primary.max()), int(secondary.max())) >= 1 << 16:
        return np.lexsort((secondary, primary))
    order = np.argsort(secondary.astype(np.uint16), kind="stable")
    return order[np.argsort(primary.astype(np.uint16)[order], kind="stable")]


def scipy_loaded() -> bool:
    """Whether ``scipy.sparse`` is imported in this process (then products use its kernel)."""
    return "scipy.sparse" in sys.modules


@functools.cache
def _csr_matvec() -> Callable[..., None]:
    """scipy's compiled y += A·x for a CSR matrix A (the kernel behind ``csr_matrix @ x``), or, where a scipy
    release no longer has it there, the same product through the public operator."""
    try:
        from scipy.sparse._sparsetools import csr_matvec
    except ImportError:  # pragma: no cover - every scipy this project installs has it
        import scipy.sparse as sp

        def csr_matvec(n_row, n_col, indptr, indices, data, x, y):
            y += sp.csr_matrix((data, indices, indptr), shape=(n_row, n_col)) @ x
    return csr_matvec


@dataclass
class SparseRows:
    """An n × m sparse matrix in CSR form over plain numpy arrays: entries sorted by (row, column), no
    duplicates, no zeros. ``rows[k]`` is entry k's row (the CSR form's ``indptr`` expanded).

    The walks' products are done here rather than with ``scipy.sparse`` so that ranking a run does not load
    scipy (a fresh process answering a cached question; issue 31). :meth:`dot` of a vector adds each row's
    products in column order, as scipy's CSR product does, so a walk's scores are the same to the last bit.
    """

    shape: tuple[int, int]
    rows: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    indptr: np.ndarray
    _scipy: Any = field(default=None, repr=False, compare=False)
    _starts: np.ndarray | None = field(default=None, repr=False, compare=False)
    _dense: np.ndarray | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_entries(cls, shape: tuple[int, int], rows: np.ndarray, cols: np.ndarray,
                     data: np.ndarray) -> SparseRows:
        """The matrix with ``data`` at (``rows``, ``cols``): sorted, parallel entries summed, zeros dropped."""
        order = stable_order(rows, cols)
        rows, cols, data = rows[order], cols[order], np.asarray(data, dtype=np.float64)[order]
        if rows.size > 1:
            new = np.ones(rows.size, dtype=bool)
            new[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
            if not new.all():
                starts = np.flatnonzero(new)
                data = np.add.reduceat(data, starts)
                rows, cols = rows[starts], cols[starts]
        keep = data != 0.0
        if not keep.all():
            rows, cols, data = rows[keep], cols[keep], data[keep]
        indptr = np.zeros(shape[0] + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
        return cls(shape, rows, cols, data, indptr)

    @property
    def nnz(self) -> int:
        return int(self.data.size)

    def dot(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The product with a vector (each row's products added in column order, as scipy does: with scipy's
        kernel once scipy is loaded, the same bits) or with an n × T block (with scipy's product from
        :data:`SCIPY_BLOCK_NNZ` entries, or once scipy is loaded: :func:`load_block_kernel`). With ``out`` (a
        C-contiguous float64 array of the result's shape, not ``x``) the product is written there and returned."""
        if x.ndim == 1 and scipy_loaded():
            # scipy's CSR kernel straight into the result (what ``csr_matrix @ x`` calls, without its checks)
            if out is None:
                out = np.zeros(self.shape[0])
            else:
                out.fill(0.0)
            _csr_matvec()(self.shape[0], self.shape[1], self.indptr, self.indices, self.data,
                          np.ascontiguousarray(x, dtype=np.float64), out)
            return out
        if x.ndim != 1 and self.dense_is_faster():
            if self._dense is None:
                self._dense = np.zeros(self.shape)
                self._dense[self.rows, self.indices] = self.data
            return np.matmul(self._dense, x, out=out)
        result = self._product(x)
        if out is None:
            return result
        np.copyto(out, result)
        return out

    def _product(self, x: np.ndarray) -> np.ndarray:
        """:meth:`dot` without scipy's vector kernel or a dense copy: numpy for a vector, scipy or numpy for a
        block."""
        if x.ndim == 1:
            products = np.take(x, self.indices).astype(np.float64, copy=False)
            products *= self.data
            # float64 even for a matrix without entries (bincount of nothing gives integers)
            return np.bincount(self.rows, weights=products, minlength=self.shape[0]).astype(np.float64, copy=False)
        if self.nnz >= SCIPY_BLOCK_NNZ or scipy_loaded():
            if self._scipy is None:
                self._scipy = self.toscipy()
            return np.asarray(self._scipy @ x)
        out = np.zeros((self.shape[0], x.shape[1]))
        if self.nnz:
            if self._starts is None:
                self._starts = np.flatnonzero(np.diff(self.indptr))
            products = np.take(x, self.indices, axis=0)
            products *= self.data[:, None]
            out[self._starts] = np.add.reduceat(products, self.indptr[self._starts], axis=0)
        return out

    def dense_is_faster(self) -> bool:
        """Whether a block product is faster with the matrix stored dense (BLAS): at most :data:`DENSE_CELLS`
        cells and at least one entry in :data:`DENSE_FILL` of them (a ranked graph of a few hundred papers)."""
        cells = self.shape[0] * self.shape[1]
        return 0 < cells <= DENSE_CELLS and self.nnz * DENSE_FILL >= cells

    def transpose(self) -> SparseRows:
        # entries are sorted by row already: a stable sort by column gives (column, row) order
        small = self.indices.size and int(self.indices.max()) < 1 << 16
        order = np.argsort(self.indices.astype(np.uint16) if small else self.indices, kind="stable")
        rows, cols = self.indices[order], self.rows[order]
        indptr = np.zeros(self.shape[1] + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=self.shape[1]), out=indptr[1:])
        return SparseRows((self.shape[1], self.shape[0]), rows, cols, self.data[order], indptr)

    def row_sums(self) -> np.ndarray:
        """Each row's sum (as scipy's ``sum(axis=1)`` adds them)."""
        out = np.zeros(self.shape[0])
        starts = np.flatnonzero(np.diff(self.indptr))
        if starts.size:
            out[starts] = np.add.reduceat(self.data, self.indptr[starts])
        return out

    def scale_rows(self, factor: np.ndarray) -> SparseRows:
        """diag(``factor``) times the matrix (entries that become 0 are kept: the pattern is unchanged)."""
        return SparseRows(self.shape, self.rows, self.indices, factor[self.rows] * self.data, self.indptr)

    def get(self, i: int, j: int) -> float:
        lo, hi = int(self.indptr[i]), int(self.indptr[i + 1])
        k = lo + int(np.searchsorted(self.indices[lo:hi], j))
        return float(self.data[k]) if k < hi and self.indices[k] == j else 0.0

    def columns(self, cols: Sequence[int]) -> np.ndarray:
        """The dense n × len(cols) block of the given columns."""
        out = np.zeros((self.shape[0], len(cols)))
        for t, c in enumerate(cols):
            hit = self.indices == c
            out[self.rows[hit], t] = self.data[hit]
        return out

    def toscipy(self) -> sp.csr_matrix:
        import scipy.sparse as sp

        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)


@dataclass
class WeightedGraph:
    """Directed graph u→v (u cites v) with positive weights, nodes in a fixed order."""

    nodes: list[str]
    edges: list[tuple[str, str, float]]
    _pos: dict[str, int] = field(default_factory=dict, repr=False)
    _weights: SparseRows | None = field(default=None, repr=False)
    _walk: WalkMatrices | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._pos = {n: i for i, n in enumerate(self.nodes)}
        if len(self._pos) != len(self.nodes):
            raise InputError("duplicate node ids in the ranking graph")

    def position(self, node: str) -> int:
        return self._pos[node]

    def weights(self) -> SparseRows:
        """n × n weight matrix, entry (u, v) = w(u→v); parallel edges are summed (built once)."""
        if self._weights is None:
            n, m, at = len(self.nodes), len(self.edges), self._pos.__getitem__
            rows = np.fromiter(map(at, map(itemgetter(0), self.edges)), dtype=np.int64, count=m)
            cols = np.fromiter(map(at, map(itemgetter(1), self.edges)), dtype=np.int64, count=m)
            data = np.fromiter(map(itemgetter(2), self.edges), dtype=np.float64, count=m)
            if (data < 0).any():
                raise InputError("edge weights must be non-negative")
            self._weights = SparseRows.from_entries((n, n), rows, cols, data)
        return self._weights

    def matrix(self) -> sp.csr_matrix:
        """:meth:`weights` as a scipy CSR matrix (for CEP and tools; the walks do not need scipy)."""
        return self.weights().toscipy()

    def vector(self, values: Mapping[str, float]) -> np.ndarray:
        v = np.zeros(len(self.nodes))
        for node, x in values.items():
            if node in self._pos:
                v[self._pos[node]] += x
        return v


class Ranker(Protocol):
    """Scores every node of a weighted graph given a restart distribution p.

    Each ranker takes its own keyword parameters (PPR/SALSA: ``alpha``, ``tol``,
    ``max_iter``; CEP: its path and background parameters); which settings feed
    them is declared in :mod:`crase_core.ranking.rankers`.
    """

    name: str

    def rank(self, graph: WeightedGraph, personalization: Mapping[str, float], *args: Any,
             **params: Any) -> RankingResult: ...


def restart_vector(graph: WeightedGraph, personalization: Mapping[str, float]) -> np.ndarray:
    """p as a vector over ``graph.nodes``, normalised to sum 1 (non-negative, some mass on the graph)."""
    p = graph.vector(personalization)
    if (p < 0).any():
        raise InputError("personalization weights must be non-negative")
    total = p.sum()
    if total <= 0:
        raise InputError("the personalization vector has no mass on the graph's nodes")
    return p / total


def row_normalize(w: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray]:
    """(row-stochastic W, dangling mask) of a scipy matrix: rows with no out-weight stay zero and are flagged
    (CEP's background walk; the walks use :func:`stochastic_rows`)."""
    import scipy.sparse as sp

    out = np.asarray(w.sum(axis=1)).ravel()
    dangling = out <= 0
    inv = np.divide(1.0, out, out=np.zeros_like(out), where=~dangling)
    return sp.diags(inv) @ w, dangling


def stochastic_rows(w: SparseRows) -> tuple[SparseRows, np.ndarray]:
    """(row-stochastic W, dangling mask): rows with no out-weight stay zero and are flagged."""
    out = w.row_sums()
    dangling = out <= 0
    inv = np.divide(1.0, out, out=np.zeros_like(out), where=~dangling)
    return w.scale_rows(inv), dangling


class WalkMatrices:
    """The row-stochastic matrices the walks step with, each built at first use and then kept (a ranking and
    its attribution share them): ``forward`` F (u → v with probability w(u,v)/out(u)), ``backward`` B (v → u
    with probability w(u,v)/in(v)), their transposes, and the dangling mask (papers citing nothing here)."""

    def __init__(self, weights: SparseRows):
        self.weights = weights
        self._forward: tuple[SparseRows, np.ndarray] | None = None

    def _stochastic(self) -> tuple[SparseRows, np.ndarray]:
        if self._forward is None:
            self._forward = stochastic_rows(self.weights)
        return self._forward

    @property
    def forward(self) -> SparseRows:
        return self._stochastic()[0]

    @property
    def dangling(self) -> np.ndarray:
        return self._stochastic()[1]

    @functools.cached_property
    def forward_t(self) -> SparseRows:
        return self.forward.transpose()

    @functools.cached_property
    def backward(self) -> SparseRows:
        return stochastic_rows(self.weights.transpose())[0]

    @functools.cached_property
    def backward_t(self) -> SparseRows:
        return self.backward.transpose()


def walk_matrices(graph: WeightedGraph) -> WalkMatrices:
    """:class:`WalkMatrices` of ``graph`` (kept on it: a ranking and its attribution share them)."""
    if graph._walk is None:
        graph._walk = WalkMatrices(graph.weights())
    return graph._walk


@dataclass(frozen=True)
class Iteration:
    """The result of :func:`iterate`: the fixed point, the steps taken, the last relative L1 change."""

    x: np.ndarray
    iterations: int
    residual: float
    converged: bool


def iterate(rhs: np.ndarray, step: Callable[[np.ndarray, np.ndarray], object], alpha: float, tol: float,
            max_iter: int, start: np.ndarray | None = None) -> Iteration:
    """The one power iteration every walk and its attribution use: x ← rhs + (1 − α)·step(x), from ``start``
    (default ``rhs``), with one convergence rule — stop when the L1 change of every column is below ``tol``
    times that column's L1 norm (a column of zeros has converged). ``step(x, out)`` writes a sub-stochastic,
    non-negative linear map of ``x`` into ``out`` (a walk's transition, its dangling mass sent back through
    the restart; ``rhs`` is non-negative too, so every iterate is and its L1 norm is its sum); the iteration
    contracts by 1 − α and takes about log(tol)/log(1 − α) steps. ``max_iter`` < 1 counts as 1.

    >>> m = np.array([[0.0, 1.0], [1.0, 0.0]])  # two papers citing each other
    >>> run = iterate(np.array([0.5, 0.0]), lambda x, out: np.matmul(m, x, out=out), 0.5, 1e-12, 100)
    >>> [round(v, 6) for v in run.x.tolist()], run.converged
    ([0.666667, 0.333333], True)
    """
    x = (rhs if start is None else start).astype(np.float64, copy=True)
    nxt, work = np.empty_like(x), np.empty_like(x)  # two buffers taking turns as x and its successor
    keep = 1.0 - alpha
    residual, it = np.inf, 0
    for it in range(1, max(1, max_iter) + 1):  # noqa: B007
        step(x, nxt)
        np.multiply(nxt, keep, out=nxt)
        np.add(rhs, nxt, out=nxt)
        np.subtract(nxt, x, out=work)
        change = np.add.reduce(np.abs(work, out=work), axis=0)
        size = np.add.reduce(nxt, axis=0)
        x, nxt = nxt, x
        if x.ndim == 1:
            residual = float(change / size) if size > 0 else 0.0
        else:
            ratios = np.divide(change, size, out=np.zeros_like(change), where=size > 0)
            residual = float(ratios.max()) if ratios.size else 0.0
        if residual < tol:
            return Iteration(x, it, residual, True)
    return Iteration(x, it, residual, False)


class PersonalizedPageRank:
    """Recency-aware Personalized PageRank (paper Eq. 6–7) by sparse power iteration (:func:`iterate`)."""

    name = "ppr"

    def rank(
        self, graph: WeightedGraph, personalization: Mapping[str, float], *, alpha: float = 0.15,
        tol: float = 1e-10, max_iter: int = 1000,
    ) -> RankingResult:
        n = len(graph.nodes)
        if n == 0:
            return RankingResult(self.name, {}, 0, True, 0.0)
        p = restart_vector(graph, personalization)
        m = walk_matrices(graph)
        wt, dangling = m.forward_t, np.flatnonzero(m.dangling)

        back = np.empty_like(p)

        def step(pi: np.ndarray, out: np.ndarray) -> None:  # Wᵀπ, the dangling mass back at p
            wt.dot(pi, out=out)
            out += np.multiply(p, pi[dangling].sum(), out=back)
        run = iterate(alpha * p, step, alpha, tol, max_iter, start=p)
        pi = run.x / run.x.sum()
        return RankingResult(self.name, dict(zip(graph.nodes, pi.tolist(), strict=True)), run.iterations,
                             run.converged, run.residual)

    def attribute(self, graph: WeightedGraph, personalization: Mapping[str, float], targets: Sequence[str], *,
                  alpha: float = 0.15, tol: float = 1e-10, max_iter: int = 1000,
                  paths: int = 3) -> dict[str, Attribution]:
        """Each target's score split by restart source, with its strongest paths (:func:`ppr_attribution`)."""
        return ppr_attribution(graph, personalization, targets, alpha=alpha, tol=tol, max_iter=max_iter, paths=paths)


class PersonalizedSALSA:
    """Personalised SALSA authority scores (see the module docstring for the chain), by :func:`iterate`."""

    name = "salsa"

    def rank(
        self, graph: WeightedGraph, personalization: Mapping[str, float], *, alpha: float = 0.15,
        tol: float = 1e-10, max_iter: int = 1000,
    ) -> RankingResult:
        n = len(graph.nodes)
        if n == 0:
            return RankingResult(self.name, {}, 0, True, 0.0)
        p = restart_vector(graph, personalization)
        m = walk_matrices(graph)
        ft, bt, dangling = m.forward_t, m.backward_t, np.flatnonzero(m.dangling)

        back, authority = np.empty_like(p), np.empty_like(p)

        def step(h: np.ndarray, out: np.ndarray) -> None:  # hub → authority → hub, dangling hubs back at p
            bt.dot(ft.dot(h, out=authority), out=out)
            out += np.multiply(p, h[dangling].sum(), out=back)
        run = iterate(alpha * p, step, alpha, tol, max_iter, start=p)
        a = ft.dot(run.x)
        total = a.sum()
        a = a / total if total > 0 else np.full(n, 1.0 / n)
        return RankingResult(self.name, dict(zip(graph.nodes, a.tolist(), strict=True)), run.iterations,
                             run.converged, run.residual)

    def attribute(self, graph: WeightedGraph, personalization: Mapping[str, float], targets: Sequence[str], *,
                  alpha: float = 0.15, tol: float = 1e-10, max_iter: int = 1000,
                  paths: int = 3) -> dict[str, Attribution]:
        """Each target's score split by restart source, with its strongest paths (:func:`salsa_attribution`)."""
        return salsa_attribution(graph, personalization, targets, alpha=alpha, tol=tol, max_iter=max_iter,
                                 paths=paths)


def top_k(scores: Mapping[str, float], k: int, tiebreak: Sequence[str] | None = None) -> list[tuple[str, float]]:
    """The k highest-scoring nodes, ties broken by ``tiebreak`` order (else by id)."""
    order = {n: i for i, n in enumerate(tiebreak)} if tiebreak else {}
    items = sorted(scores.items(), key=lambda kv: (-kv[1], order.get(kv[0], len(order)), kv[0]))
    return items[:k]


# ---- where a walk score comes from ----------------------------------------------------------------------
@dataclass
class Attribution:
    """Where one node's walk score comes from (:func:`attribute_walk` and the rankers' ``attribute``).

    ``shares[s]``: the fraction of the score that comes from restart source s (the fractions sum to 1;
    ``{}`` when no restart source reaches the node); ``paths[s]``: the strongest path from s to the node
    (nodes in walk order, whether each step follows a citation, and the fraction of the node's score
    that this one path carries).
    """

    shares: dict[str, float]
    paths: dict[str, tuple[list[str], list[bool], float]] = field(default_factory=dict)


#: the longest path :func:`strongest_path_to` looks for (in steps; SALSA counts a step back as one)
PATH_STEPS = 12


def _row_best(m: SparseRows, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For every row i and column t of ``values`` (n × T): (max_j m[i, j]·values[j, t], the first j that
    attains it); 0 and −1 for a row with no entry."""
    n, width = m.shape[0], values.shape[1]
    best = np.zeros((n, width))
    arg = np.full((n, width), -1, dtype=np.int64)
    rows = np.flatnonzero(np.diff(m.indptr))
    if rows.size == 0:
        return best, arg
    cand = values[m.indices]
    cand *= m.data[:, None]  # in place: the broadcast product into a new array takes several times as long
    starts = m.indptr[rows]
    top = np.maximum.reduceat(cand, starts, axis=0)
    counts = np.diff(np.append(starts, m.indptr[-1]))
    hit = cand >= np.repeat(top, counts, axis=0)
    where = np.where(hit, np.arange(cand.shape[0])[:, None], cand.shape[0])
    first = np.minimum.reduceat(where, starts, axis=0)
    best[rows] = top
    arg[rows] = m.indices[np.minimum(first, cand.shape[0] - 1)]
    return best, arg


def _shares(p: np.ndarray, reach: np.ndarray, nodes: Sequence[str]) -> tuple[dict[str, float], float]:
    """({source: p_s·reach_s / Σ}, Σ) over the sources with a positive term."""
    contrib = p * reach
    total = float(contrib.sum())
    if total <= 0.0:
        return {}, 0.0
    return {nodes[int(s)]: float(contrib[s]) / total for s in np.flatnonzero(contrib > 0)}, total


def ppr_attribution(graph: WeightedGraph, personalization: Mapping[str, float], targets: Sequence[str], *,
                    alpha: float = 0.15, tol: float = 1e-10, max_iter: int = 1000,
                    paths: int = 3) -> dict[str, Attribution]:
    """Exact restart-source split of PPR scores (Eq. 6 with dangling rows restarting at p).

    The fixed point is π = G p / 1ᵀG p with G = (I − (1−α)Wᵀ)⁻¹: the dangling and teleport mass returns
    through p, so π is p's linear image, normalised. Hence π(v) = Σ_s p_s G[v, s] / Σ_s' p_s' G[v, s'] · π(v):
    source s's share is p_s G[v, s] over the same sum — the share of v's walk time spent on walks whose last
    restart was at s. Row v of G solves x = e_v + (1−α) W x (one solve per target). A path s = v₀ → … → v_L = v
    carries p_s (1−α)^L Π W[v_{i−1}, v_i] of that sum (one exact term of the series); ``paths`` of them are
    returned per target: the strongest from each of its top sources."""
    n = len(graph.nodes)
    pos = [graph.position(t) for t in targets]
    if n == 0 or not pos:
        return {}
    p = restart_vector(graph, personalization)
    w = walk_matrices(graph).forward
    rhs = np.zeros((n, len(pos)))
    rhs[pos, np.arange(len(pos))] = 1.0
    reach = iterate(rhs, w.dot, alpha, tol, max_iter).x
    step = w.scale_rows(np.full(n, 1.0 - alpha))
    nxt = _walk_pointers(step, pos)
    out: dict[str, Attribution] = {}
    for i, t in enumerate(pos):
        shares, total = _shares(p, reach[:, i], graph.nodes)
        attribution = Attribution(shares)
        for s in sorted(shares, key=lambda k: -shares[k])[:paths]:
            path = _follow(step, nxt[:, i], graph.position(s), t)
            if path is not None:
                nodes, value = path
                attribution.paths[s] = ([graph.nodes[j] for j in nodes], [True] * (len(nodes) - 1),
                                        p[graph.position(s)] * value / total)
        out[graph.nodes[t]] = attribution
    return out


def _walk_pointers(step: SparseRows, targets: Sequence[int]) -> np.ndarray:
    """Max-product Bellman–Ford towards each target (column t) under the per-step weights ``step``, at most
    :data:`PATH_STEPS` rounds: the next node of each node's strongest path to the target (−1: none/itself)."""
    n, width = step.shape[0], len(targets)
    cols = np.arange(width)
    best = np.zeros((n, width))
    best[list(targets), cols] = 1.0
    nxt = np.full((n, width), -1, dtype=np.int64)
    target_rows = np.asarray(targets, dtype=np.int64)
    active = cols  # a column that did not improve in a round cannot improve in the next
    for _ in range(PATH_STEPS):
        now = best[:, active]
        cand, arg = _row_best(step, now)
        better = cand > now * (1.0 + 1e-12)
        better[target_rows[active], np.arange(active.size)] = False
        changed = better.any(axis=0)
        if not changed.any():
            break
        _put_where(best, active, better, cand)
        _put_where(nxt, active, better, arg)
        active = active[changed]
    return nxt


def _put_where(dest: np.ndarray, active: np.ndarray, better: np.ndarray, values: np.ndarray) -> None:
    """``dest[:, active]`` takes ``values`` where ``better`` (both over the active columns only), in place."""
    block = dest[:, active]
    block[better] = values[better]
    dest[:, active] = block


def _follow(step: SparseRows, nxt: np.ndarray, source: int, target: int) -> tuple[list[int], float] | None:
    """The path source → … → target that ``nxt`` points along, with its product of ``step``; None if none."""
    nodes, value = [source], 1.0
    while nodes[-1] != target and len(nodes) <= PATH_STEPS + 1:
        j = int(nxt[nodes[-1]])
        if j < 0:
            return None
        value *= step.get(nodes[-1], j)
        nodes.append(j)
    return (nodes, value) if nodes[-1] == target else None


def salsa_attribution(graph: WeightedGraph, personalization: Mapping[str, float], targets: Sequence[str], *,
                      alpha: float = 0.15, tol: float = 1e-10, max_iter: int = 1000,
                      paths: int = 3) -> dict[str, Attribution]:
    """Exact restart-source split of personalised SALSA authority scores (see the module docstring's chain).

    The hub chain's fixed point is h = G p / 1ᵀG p with G = (I − (1−α) BᵀFᵀ)⁻¹ (dangling hubs restart at p),
    and a ∝ Fᵀh, so a(v) splits over sources s as p_s (FᵀG)[v, s]; row v of FᵀG solves
    y = F e_v + (1−α) F B y. A path is s → a₁ ⇠ h₁ → a₂ ⇠ … → v (cite, back along a citation to another
    citer of the same paper, cite, …); it carries p_s F[s, a₁] Π (1−α) B[a_i, h_i] F[h_i, a_{i+1}] of the
    sum. A score given uniformly because the graph has no edge has no source (``shares`` {})."""
    n = len(graph.nodes)
    pos = [graph.position(t) for t in targets]
    if n == 0 or not pos:
        return {}
    p = restart_vector(graph, personalization)
    m = walk_matrices(graph)
    forward, backward = m.forward, m.backward
    rhs = forward.columns(pos)
    reach = iterate(rhs, lambda y, out: forward.dot(backward.dot(y), out=out), alpha, tol, max_iter).x
    via_a, via_h = _salsa_pointers(forward, backward, alpha, rhs)
    out: dict[str, Attribution] = {}
    for i, t in enumerate(pos):
        shares, total = _shares(p, reach[:, i], graph.nodes)
        attribution = Attribution(shares)
        for s in sorted(shares, key=lambda k: -shares[k])[:paths]:
            path = _salsa_follow(forward, backward, alpha, via_a[:, i], via_h[:, i], graph.position(s), t)
            if path is not None:
                nodes, along, value = path
                attribution.paths[s] = ([graph.nodes[j] for j in nodes], along, p[graph.position(s)] * value / total)
        out[graph.nodes[t]] = attribution
    return out


def _salsa_pointers(forward: SparseRows, backward: SparseRows, alpha: float,
                    direct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Max-product search of SALSA paths from each hub to each target authority (columns of ``direct``, the
    one-step values F[u, t]): for each hub, the authority it steps to and the hub it steps back to on its
    strongest path (−1: it cites the target directly), at most :data:`PATH_STEPS` steps."""
    best = direct.copy()
    via_a = np.full(best.shape, -1, dtype=np.int64)
    via_h = np.full(best.shape, -1, dtype=np.int64)
    active = np.arange(best.shape[1])  # a column that did not improve in a round cannot improve in the next
    for _ in range(PATH_STEPS // 2):
        now = best[:, active]
        back, back_arg = _row_best(backward, now)  # authority a: its best citer h to go on from
        cand, arg = _row_best(forward, (1.0 - alpha) * back)
        better = cand > now * (1.0 + 1e-12)
        changed = better.any(axis=0)
        if not changed.any():
            break
        _put_where(best, active, better, cand)
        _put_where(via_a, active, better, arg)
        _put_where(via_h, active, better, back_arg[arg, np.arange(active.size)[None, :]])
        active = active[changed]
    return via_a, via_h


def _salsa_follow(forward: SparseRows, backward: SparseRows, alpha: float, via_a: np.ndarray,
                  via_h: np.ndarray, source: int, target: int) -> tuple[list[int], list[bool], float] | None:
    """The SALSA path from hub ``source`` to authority ``target`` that the pointers give: (nodes, along
    flags, product), or None when none reaches it."""
    nodes, value, u = [source], 1.0, source
    along: list[bool] = []
    while len(nodes) <= PATH_STEPS + 1:
        a = int(via_a[u])
        if a < 0:
            f = forward.get(u, target)
            if f <= 0.0:
                return None
            return nodes + [target], along + [True], value * f
        h = int(via_h[u])
        value *= forward.get(u, a) * (1.0 - alpha) * backward.get(a, h)
        nodes += [a, h]
        along += [True, False]
        u = h
    return None
