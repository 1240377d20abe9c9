"""Re-rank a saved run's pruned graph with any registered ranker, without recomputing anything else.

The kept nodes, kept edges with their weights, and the restart distribution
(kept seeds, the run's ``personalization`` mode) are read from the trace, so
``rerank(trace, trace.settings.ranker)`` reproduces the run's own scores.
Pure function of the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

from .pipeline import restart_distribution
from .rankers import get_ranker, rank, ranker_names
from .ranking import WeightedGraph, top_k
from .records import RankingResult
from .trace import RunTrace


@dataclass
class Reranked:
    """Scores of every kept node under one ranker, and the resulting order (1-based ranks)."""

    ranker: str
    result: RankingResult
    ranks: dict[str, int]


def rerank(trace: RunTrace, ranker: str) -> Reranked:
    """Rank ``trace``'s kept graph with ``ranker`` (a name in :data:`crase_core.rankers.REGISTRY`)."""
    get_ranker(ranker)  # an unknown name fails here, before any work
    kept = [n.paper.id for n in trace.nodes if n.kept]
    if not kept:
        return Reranked(ranker, RankingResult(ranker, {}), {})
    alive = set(kept)
    p = restart_distribution(trace.settings, trace.seeds, alive, kept, trace.query_hits)
    graph = WeightedGraph(kept, [(e.citing, e.cited, e.weight) for e in trace.edges if e.kept])
    result = rank(trace.settings.replace(ranker=ranker), graph, p)
    seed_ids = {x.paper_id for x in trace.seeds}
    hint = [x.paper_id for x in trace.seeds] + [n for n in kept if n not in seed_ids]
    order = top_k(result.scores, len(result.scores), hint)
    return Reranked(ranker, result, {n: i for i, (n, _) in enumerate(order, 1)})


def rerank_all(trace: RunTrace) -> dict[str, Reranked]:
    """Every registered ranker on the same kept graph, keyed by ranker name."""
    return {name: rerank(trace, name) for name in ranker_names()}
