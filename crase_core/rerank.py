"""Re-rank a saved run's pruned graph with any registered ranker, without recomputing anything else.

The kept nodes, kept edges with their weights, the restart distribution
(kept seeds, the run's ``personalization`` mode) and the fusion with the
full-query text score (the run's ``fusion`` settings) are read from the trace,
so ``rerank(trace, trace.settings.ranker)`` reproduces the run's own order,
text floor (``text_floor``) included. A run with anchor text in the restart
(``anchor_restart_weight``) is re-ranked with the plain search's restart: the
trace does not keep the blended list. Pure function of the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

from .rankers import get_ranker, ranker_names
from .ranking import WeightedGraph
from .records import RankingResult
from .stages.ranking import (
    final_scores,
    floor_only_ids,
    rank_order,
    restart_distribution,
    run_ranker,
    text_floor,
)
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
    settings = trace.settings
    alive = {n.paper.id for n in trace.nodes if n.kept}
    # text candidates that joined V only for the floor stay out of the walk and the fusion (as in stage 3)
    floor_only = floor_only_ids([n.paper.id for n in trace.nodes if n.role == "text"], trace.query_hits, settings)
    held_out = set(floor_only)
    kept = [n.paper.id for n in trace.nodes if n.kept and n.paper.id not in held_out]
    if not alive:
        return Reranked(ranker, RankingResult(ranker, {}), {})
    p = restart_distribution(settings, trace.seeds, alive, kept, trace.query_hits)
    graph = WeightedGraph(kept, [(e.citing, e.cited, e.weight) for e in trace.edges
                                 if e.kept and e.citing not in held_out and e.cited not in held_out])
    result = run_ranker(ranker, graph, p, settings) if kept else RankingResult(ranker, {})
    scores = final_scores(settings, result.scores, trace.seeds, kept, trace.query_hits)
    tail = [(n, 0.0) for n in floor_only if n in alive]
    order = text_floor(rank_order(scores, trace.seeds, kept) + tail, trace.query_hits, settings.text_floor, settings.k)
    return Reranked(ranker, result, {n: i for i, (n, _) in enumerate(order, 1)})


def rerank_all(trace: RunTrace) -> dict[str, Reranked]:
    """Every registered ranker on the same kept graph, keyed by ranker name."""
    return {name: rerank(trace, name) for name in ranker_names()}
