"""Evidence trails: the best path from a kept seed to each ranked paper.

"Best" = the path the walk most likely takes: along citations (u→v, the
walk's direction), maximising the product of transition probabilities
P(u→v) = w(u→v)/Σ w(u→·). A paper the walk cannot reach from any seed (for
example one that only *cites* a seed) gets the best path that goes against
citations where it must; each such step costs P(v→u) times a penalty of 1/4,
and the step is marked ``along_citation=False``. Pure function.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence

from .records import EdgeRecord, TrailStep

BACKWARD_PENALTY = math.log(4.0)


def best_trails(seeds: Sequence[str], edges: Iterable[EdgeRecord]) -> dict[str, list[TrailStep]]:
    """Trail (list of steps, [] for a seed itself) for every node reachable from a kept seed."""
    kept = [e for e in edges if e.kept and e.weight > 0]
    out_w: dict[str, float] = defaultdict(float)
    for e in kept:
        out_w[e.citing] += e.weight
    adj: dict[str, list[tuple[str, float, TrailStep]]] = defaultdict(list)
    for e in kept:
        p = e.weight / out_w[e.citing]
        adj[e.citing].append((e.cited, -math.log(p), TrailStep(e.citing, e.cited, e.delta, True)))
        adj[e.cited].append((e.citing, -math.log(p) + BACKWARD_PENALTY, TrailStep(e.cited, e.citing, e.delta, False)))
    dist: dict[str, float] = {}
    prev: dict[str, tuple[str, TrailStep] | None] = {}
    heap: list[tuple[float, int, str]] = []
    for order, s in enumerate(seeds):
        if s not in dist:
            dist[s] = 0.0
            prev[s] = None
            heapq.heappush(heap, (0.0, order, s))
    counter = len(seeds)
    done: set[str] = set()
    while heap:
        d, _, u = heapq.heappop(heap)
        if u in done:
            continue
        done.add(u)
        for v, cost, step in adj.get(u, ()):
            nd = d + cost
            if nd < dist.get(v, math.inf) - 1e-15:
                dist[v] = nd
                prev[v] = (u, step)
                counter += 1
                heapq.heappush(heap, (nd, counter, v))
    trails: dict[str, list[TrailStep]] = {}
    for node in done:
        steps: list[TrailStep] = []
        cur = node
        while prev[cur] is not None:
            parent, step = prev[cur]  # type: ignore[misc]
            steps.append(step)
            cur = parent
        trails[node] = list(reversed(steps))
    return trails
