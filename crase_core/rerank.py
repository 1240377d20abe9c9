"""Re-rank a saved run's pruned graph with any registered ranker, without recomputing anything else.

The kept nodes, kept edges with their weights, the restart distribution
(kept seeds, the run's ``personalization`` mode) and the fusion with the
full-query text score (the run's ``fusion`` settings) are read from the trace,
so ``rerank(trace, trace.settings.ranker)`` reproduces the run's own order,
text floor (``text_floor``), anchor text in the restart (the trace's
``restart_hits``) and μ(q) (from the trace's query) included. Pure function of
the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

from .rankers import get_ranker, ranker_names
from .records import RankingResult
from .stages.ranking import rank_graph
from .trace import RunTrace


@dataclass
class Reranked:
    """Scores of every kept node under one ranker (before fusion), and the final order (1-based ranks)."""

    ranker: str
    result: RankingResult
    ranks: dict[str, int]


def rerank(trace: RunTrace, ranker: str) -> Reranked:
    """Rank ``trace``'s kept graph with ``ranker`` (a name in :data:`crase_core.rankers.REGISTRY`)."""
    get_ranker(ranker)  # an unknown name fails here, before anything else
    alive = {n.paper.id for n in trace.nodes if n.kept}
    if not alive:
        return Reranked(ranker, RankingResult(ranker, {}), {})
    result, _, order = rank_graph(ranker, [n.paper.id for n in trace.nodes], alive,
                                  [n.paper.id for n in trace.nodes if n.role == "text"],
                                  ((e.citing, e.cited, e.weight) for e in trace.edges if e.kept), trace.seeds,
                                  trace.query_hits, trace.settings, trace.restart_hits, query=trace.query)
    return Reranked(ranker, result, {n: i for i, (n, _) in enumerate(order, 1)})


def rerank_all(trace: RunTrace) -> dict[str, Reranked]:
    """Every registered ranker on the same kept graph, keyed by ranker name."""
    return {name: rerank(trace, name) for name in ranker_names()}
