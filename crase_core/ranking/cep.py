"""Contrastive Evidence Paths (CEP) ranker, as defined in the Structured Corpus Interaction (SCI) paper.

CEP scores a candidate by its *strongest individual path* from the seeds
rather than by the sum over all paths (which lets well-connected hubs crowd
the top), and calibrates that support against how often the same graph's
walk visits the candidate anyway (its background visitation):

* transitions P(u→v) = w(u→v) / Σ_v' w(u→v') along citations (as PPR walks);
* path support  M(v) = max over paths s = v₀ → v₁ → … → v_L = v from a seed s of
  p(s) · Π_{i=1..L} λ · P(v_{i−1} → v_i)   (hop discount λ; M(s) ≥ p(s) for a seed);
* background b = the walk with restart probability α_b to the uniform
  distribution u over the graph's nodes, run T_b steps from u:
  b_{t+1} = (1 − α_b) (Pᵀ b_t + d(b_t) u) + α_b u, d(b_t) the dangling mass;
* calibrated score c(v) = M(v) / b(v), normalised to sum to 1; a node no seed
  reaches scores 0.

Defaults are the paper's (Table 8): λ = 0.5, α_b = 0.5, T_b = 24; they are the
pipeline settings ``cep_hop_discount``, ``cep_background_restart`` and
``cep_background_iterations`` (see :mod:`crase_core.ranking.rankers`). The path
that realises M(v) is kept in ``RankingResult.paths`` (seed first). M is found
exactly by Dijkstra on costs −log(λ P) ≥ 0 from sources with cost −log p(s).
The walk's teleport α, ``tol`` and ``max_iter`` do not apply (CEP is not a
stationary distribution; the settings refuse them for this ranker);
``iterations`` reports T_b.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence

import numpy as np

from crase_core.errors import InputError
from crase_core.ranking.walks import Attribution, WeightedGraph, restart_vector, row_normalize
from crase_core.records import RankingResult
from crase_core.settings.ranker_knobs import (
    CEP_BACKGROUND_ITERATIONS,
    CEP_BACKGROUND_RESTART,
    CEP_HOP_DISCOUNT,
)

HOP_DISCOUNT = CEP_HOP_DISCOUNT
BACKGROUND_RESTART = CEP_BACKGROUND_RESTART
BACKGROUND_ITERATIONS = CEP_BACKGROUND_ITERATIONS


def background_visitation(graph: WeightedGraph, restart: float = BACKGROUND_RESTART,
                          iterations: int = BACKGROUND_ITERATIONS) -> np.ndarray:
    """b after ``iterations`` steps of the uniform-restart walk (see the module docstring); sums to 1."""
    n = len(graph.nodes)
    if n == 0:
        return np.zeros(0)
    w, dangling = row_normalize(graph.matrix())
    wt = w.T.tocsr()
    u = np.full(n, 1.0 / n)
    b = u.copy()
    for _ in range(iterations):
        b = (1.0 - restart) * (wt @ b + b[dangling].sum() * u) + restart * u
    return b / b.sum()


def strongest_paths(
    graph: WeightedGraph, p: np.ndarray, hop_discount: float = HOP_DISCOUNT
) -> tuple[np.ndarray, dict[int, list[int]]]:
    """(M, path of each reached node as node positions, seed first) — see the module docstring."""
    n = len(graph.nodes)
    w, _ = row_normalize(graph.matrix())
    w = w.tocsr()
    log_l = math.log(hop_discount)
    cost = np.full(n, np.inf)
    prev = np.full(n, -1, dtype=np.int64)
    heap: list[tuple[float, int]] = []
    for seed in np.flatnonzero(p > 0):
        cost[seed] = -math.log(p[seed])
        heapq.heappush(heap, (cost[seed], int(seed)))
    done = np.zeros(n, dtype=bool)
    while heap:
        c, i = heapq.heappop(heap)
        if done[i] or c > cost[i]:
            continue
        done[i] = True
        start, end = w.indptr[i], w.indptr[i + 1]
        for j, pij in zip(w.indices[start:end], w.data[start:end], strict=True):
            if pij <= 0:
                continue
            nc = c - log_l - math.log(pij)
            if nc < cost[j] - 1e-12:
                cost[j] = nc
                prev[j] = i
                heapq.heappush(heap, (nc, int(j)))
    m = np.where(np.isfinite(cost), np.exp(-cost), 0.0)
    paths: dict[int, list[int]] = {}
    for j in np.flatnonzero(done):
        path = [int(j)]
        while prev[path[-1]] >= 0:
            path.append(int(prev[path[-1]]))
        paths[int(j)] = path[::-1]
    return m, paths


class ContrastiveEvidencePaths:
    """CEP: strongest-path support from the seeds ÷ background visitation (module docstring)."""

    name = "cep"

    def rank(
        self, graph: WeightedGraph, personalization: Mapping[str, float], *,
        hop_discount: float = HOP_DISCOUNT, background_restart: float = BACKGROUND_RESTART,
        background_iterations: int = BACKGROUND_ITERATIONS,
    ) -> RankingResult:
        """CEP scores with hop discount λ, background restart α_b and T_b background steps."""
        if not 0.0 < hop_discount <= 1.0:
            raise InputError(f"CEP hop discount λ must be in (0, 1] (got {hop_discount})")
        if not 0.0 < background_restart <= 1.0:
            raise InputError(f"CEP background restart must be in (0, 1] (got {background_restart})")
        if background_iterations < 0:
            raise InputError(f"CEP background iterations must be ≥ 0 (got {background_iterations})")
        n = len(graph.nodes)
        if n == 0:
            return RankingResult(self.name, {}, 0, True, 0.0)
        p = restart_vector(graph, personalization)
        m, paths = strongest_paths(graph, p, hop_discount)
        b = background_visitation(graph, background_restart, background_iterations)
        c = np.divide(m, b, out=np.zeros(n), where=b > 0)
        total = c.sum()
        c = c / total if total > 0 else c
        result = RankingResult(self.name, dict(zip(graph.nodes, c.tolist(), strict=True)),
                               background_iterations, True, 0.0)
        result.paths = {graph.nodes[j]: [graph.nodes[i] for i in path] for j, path in paths.items()}
        return result

    def attribute(self, graph: WeightedGraph, personalization: Mapping[str, float], targets: Sequence[str], *,
                  hop_discount: float = HOP_DISCOUNT, paths: int = 3, **_params: object) -> dict[str, Attribution]:
        """Each target's score comes whole from one restart source: the seed of its strongest path (M is a
        maximum over paths, and the background b only divides it), which carries all of it. A target no
        seed reaches has no source. ``paths`` is accepted for the common interface (CEP has one path)."""
        if not graph.nodes:
            return {}
        p = restart_vector(graph, personalization)
        _, found = strongest_paths(graph, p, hop_discount)
        out: dict[str, Attribution] = {}
        for t in targets:
            path = found.get(graph.position(t))
            if path is None:
                out[t] = Attribution({})
                continue
            nodes = [graph.nodes[i] for i in path]
            out[t] = Attribution({nodes[0]: 1.0}, {nodes[0]: (nodes, [True] * (len(nodes) - 1), 1.0)})
        return out
