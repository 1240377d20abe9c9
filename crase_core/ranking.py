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

The registry of rankers (names, the settings each one reads, the one
``rank(settings, graph, p)`` call) is :mod:`crase_core.rankers`; the helpers
shared with other rankers (:class:`WeightedGraph`, :func:`row_normalize`,
:func:`restart_vector`) are public here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from .errors import InputError
from .records import RankingResult


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
    them is declared in :mod:`crase_core.rankers`.
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


def top_k(scores: Mapping[str, float], k: int, tiebreak: Sequence[str] | None = None) -> list[tuple[str, float]]:
    """The k highest-scoring nodes, ties broken by ``tiebreak`` order (else by id)."""
    order = {n: i for i, n in enumerate(tiebreak)} if tiebreak else {}
    items = sorted(scores.items(), key=lambda kv: (-kv[1], order.get(kv[0], len(order)), kv[0]))
    return items[:k]
