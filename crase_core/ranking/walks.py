"""Stage 3 rankers over the pruned, weighted evidence graph. Pure functions of (graph, p).

All rankers share one interface, :class:`Ranker`, and return a distribution
over the graph's nodes (scores sum to 1).

* :class:`PersonalizedPageRank` — paper Eq. 6: π = (1−α) Wᵀπ + α p, W the
  row-normalised weights, dangling rows replaced by p; closed form Eq. 7
  π = α (I − (1−α) Wᵀ)⁻¹ p. Solved by sparse power iteration until the L1
  change is below ``tol`` (contraction rate 1−α, so about log(tol)/log(1−α)
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

Both walks are linear in their restart vector up to normalisation, so a score splits exactly over
the restart sources (:func:`ppr_attribution`, :func:`salsa_attribution`: each ranker's ``attribute``).

The registry of rankers (names, the settings each one reads, the one
``rank(settings, graph, p)`` call) is :mod:`crase_core.ranking.rankers`; the helpers
shared with other rankers (:class:`WeightedGraph`, :func:`row_normalize`,
:func:`restart_vector`) are public here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from crase_core.errors import InputError
from crase_core.records import RankingResult


@dataclass
class WeightedGraph:
    """Directed graph u→v (u cites v) with positive weights, nodes in a fixed order."""

    nodes: list[str]
    edges: list[tuple[str, str, float]]
    _pos: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._pos = {n: i for i, n in enumerate(self.nodes)}
        if len(self._pos) != len(self.nodes):
            raise InputError("duplicate node ids in the ranking graph")

    def position(self, node: str) -> int:
        return self._pos[node]

    def matrix(self) -> sp.csr_matrix:
        """n × n weight matrix, entry (u, v) = w(u→v); parallel edges are summed."""
        n = len(self.nodes)
        if not self.edges:
            return sp.csr_matrix((n, n))
        rows = [self._pos[u] for u, _, _ in self.edges]
        cols = [self._pos[v] for _, v, _ in self.edges]
        data = [float(w) for _, _, w in self.edges]
        if any(w < 0 for w in data):
            raise InputError("edge weights must be non-negative")
        m = sp.csr_matrix((data, (rows, cols)), shape=(n, n))
        m.sum_duplicates()
        m.eliminate_zeros()
        return m

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
    """(row-stochastic W, dangling mask): rows with no out-weight stay zero and are flagged."""
    out = np.asarray(w.sum(axis=1)).ravel()
    dangling = out <= 0
    inv = np.divide(1.0, out, out=np.zeros_like(out), where=~dangling)
    return sp.diags(inv) @ w, dangling


class PersonalizedPageRank:
    """Recency-aware Personalized PageRank (paper Eq. 6–7) by sparse power iteration."""

    name = "ppr"

    def rank(
        self, graph: WeightedGraph, personalization: Mapping[str, float], *, alpha: float = 0.15,
        tol: float = 1e-10, max_iter: int = 1000,
    ) -> RankingResult:
        n = len(graph.nodes)
        if n == 0:
            return RankingResult(self.name, {}, 0, True, 0.0)
        p = restart_vector(graph, personalization)
        w, dangling = row_normalize(graph.matrix())
        wt = w.T.tocsr()
        pi = p.copy()
        residual = np.inf
        it = 0
        for it in range(1, max_iter + 1):  # noqa: B007
            nxt = (1.0 - alpha) * (wt @ pi + pi[dangling].sum() * p) + alpha * p
            residual = float(np.abs(nxt - pi).sum())
            pi = nxt
            if residual < tol:
                break
        pi = pi / pi.sum()
        return RankingResult(self.name, dict(zip(graph.nodes, pi.tolist(), strict=True)), it, residual < tol, residual)

    def attribute(self, graph: WeightedGraph, personalization: Mapping[str, float], targets: Sequence[str], *,
                  alpha: float = 0.15, tol: float = 1e-10, max_iter: int = 1000,
                  paths: int = 3) -> dict[str, Attribution]:
        """Each target's score split by restart source, with its strongest paths (:func:`ppr_attribution`)."""
        return ppr_attribution(graph, personalization, targets, alpha=alpha, tol=tol, max_iter=max_iter, paths=paths)


class PersonalizedSALSA:
    """Personalised SALSA authority scores (see the module docstring for the chain)."""

    name = "salsa"

    def rank(
        self, graph: WeightedGraph, personalization: Mapping[str, float], *, alpha: float = 0.15,
        tol: float = 1e-10, max_iter: int = 1000,
    ) -> RankingResult:
        n = len(graph.nodes)
        if n == 0:
            return RankingResult(self.name, {}, 0, True, 0.0)
        p = restart_vector(graph, personalization)
        w = graph.matrix()
        forward, dangling = row_normalize(w)  # hub u → authority v
        backward, _ = row_normalize(w.T.tocsr())  # authority v → hub u
        ft, bt = forward.T.tocsr(), backward.T.tocsr()
        h = p.copy()
        residual = np.inf
        it = 0
        for it in range(1, max_iter + 1):  # noqa: B007
            nxt = alpha * p + (1.0 - alpha) * (bt @ (ft @ h) + h[dangling].sum() * p)
            residual = float(np.abs(nxt - h).sum())
            h = nxt
            if residual < tol:
                break
        a = ft @ h
        total = a.sum()
        a = a / total if total > 0 else np.full(n, 1.0 / n)
        return RankingResult(self.name, dict(zip(graph.nodes, a.tolist(), strict=True)), it, residual < tol, residual)

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


def _solve(rhs: np.ndarray, step: Any, alpha: float, tol: float, max_iter: int) -> np.ndarray:
    """X = rhs + (1 − α)·step(X) by fixed-point iteration (``step`` a sub-stochastic linear map, so the
    iteration contracts by 1 − α), until the largest change is below ``tol`` times the largest entry."""
    x = rhs.copy()
    for _ in range(max(1, max_iter)):
        nxt = rhs + (1.0 - alpha) * step(x)
        change = float(np.abs(nxt - x).max()) if x.size else 0.0
        x = nxt
        if change <= tol * max(float(np.abs(x).max()) if x.size else 0.0, 1e-300):
            break
    return x


def _row_best(m: sp.csr_matrix, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For every row i and column t of ``values`` (n × T): (max_j m[i, j]·values[j, t], the first j that
    attains it); 0 and −1 for a row with no entry."""
    n, width = m.shape[0], values.shape[1]
    best = np.zeros((n, width))
    arg = np.full((n, width), -1, dtype=np.int64)
    rows = np.flatnonzero(np.diff(m.indptr))
    if rows.size == 0:
        return best, arg
    cand = m.data[:, None] * values[m.indices]
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
    w, _ = row_normalize(graph.matrix())
    w = w.tocsr()
    rhs = np.zeros((n, len(pos)))
    rhs[pos, np.arange(len(pos))] = 1.0
    reach = _solve(rhs, lambda x: w @ x, alpha, tol, max_iter)
    step = ((1.0 - alpha) * w).tocsr()
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


def _walk_pointers(step: sp.csr_matrix, targets: Sequence[int]) -> np.ndarray:
    """Max-product Bellman–Ford towards each target (column t) under the per-step weights ``step``, at most
    :data:`PATH_STEPS` rounds: the next node of each node's strongest path to the target (−1: none/itself)."""
    n, width = step.shape[0], len(targets)
    cols = np.arange(width)
    best = np.zeros((n, width))
    best[list(targets), cols] = 1.0
    nxt = np.full((n, width), -1, dtype=np.int64)
    for _ in range(PATH_STEPS):
        cand, arg = _row_best(step, best)
        better = cand > best * (1.0 + 1e-12)
        better[list(targets), cols] = False
        if not better.any():
            break
        best[better] = cand[better]
        nxt[better] = arg[better]
    return nxt


def _follow(step: sp.csr_matrix, nxt: np.ndarray, source: int, target: int) -> tuple[list[int], float] | None:
    """The path source → … → target that ``nxt`` points along, with its product of ``step``; None if none."""
    nodes, value = [source], 1.0
    while nodes[-1] != target and len(nodes) <= PATH_STEPS + 1:
        j = int(nxt[nodes[-1]])
        if j < 0:
            return None
        value *= float(step[nodes[-1], j])
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
    w = graph.matrix()
    forward, _ = row_normalize(w)
    backward, _ = row_normalize(w.T.tocsr())
    forward, backward = forward.tocsr(), backward.tocsr()
    rhs = forward[:, pos].toarray()
    reach = _solve(rhs, lambda y: forward @ (backward @ y), alpha, tol, max_iter)
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


def _salsa_pointers(forward: sp.csr_matrix, backward: sp.csr_matrix, alpha: float,
                    direct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Max-product search of SALSA paths from each hub to each target authority (columns of ``direct``, the
    one-step values F[u, t]): for each hub, the authority it steps to and the hub it steps back to on its
    strongest path (−1: it cites the target directly), at most :data:`PATH_STEPS` steps."""
    best = direct.copy()
    via_a = np.full(best.shape, -1, dtype=np.int64)
    via_h = np.full(best.shape, -1, dtype=np.int64)
    cols = np.arange(best.shape[1])
    for _ in range(PATH_STEPS // 2):
        back, back_arg = _row_best(backward, best)  # authority a: its best citer h to go on from
        cand, arg = _row_best(forward, (1.0 - alpha) * back)
        better = cand > best * (1.0 + 1e-12)
        if not better.any():
            break
        best[better] = cand[better]
        via_a[better] = arg[better]
        via_h[better] = back_arg[arg, cols[None, :]][better]
    return via_a, via_h


def _salsa_follow(forward: sp.csr_matrix, backward: sp.csr_matrix, alpha: float, via_a: np.ndarray,
                  via_h: np.ndarray, source: int, target: int) -> tuple[list[int], list[bool], float] | None:
    """The SALSA path from hub ``source`` to authority ``target`` that the pointers give: (nodes, along
    flags, product), or None when none reaches it."""
    nodes, value, u = [source], 1.0, source
    along: list[bool] = []
    while len(nodes) <= PATH_STEPS + 1:
        a = int(via_a[u])
        if a < 0:
            f = float(forward[u, target])
            if f <= 0.0:
                return None
            return nodes + [target], along + [True], value * f
        h = int(via_h[u])
        value *= float(forward[u, a]) * (1.0 - alpha) * float(backward[a, h])
        nodes += [a, h]
        along += [True, False]
        u = h
    return None
