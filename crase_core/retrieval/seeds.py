"""Stage 1 seed construction (DESIGN.md): one result list per sub-query → up to m seeds.

From one ranked result list, rank by relevance (the source's order) and by
recency (newest month first, ties by relevance). Keep the papers that stand in
the top t of both rankings for the smallest t that yields m of them (all of
them if the list has fewer than m). Equivalently: order by
(max(relevance rank, recency rank), relevance rank) and keep the first m; t is
the largest max-rank kept. S is the union over sub-queries; a seed remembers
every sub-query that brought it, with its two ranks there.
"""

from __future__ import annotations

from collections.abc import Sequence

from crase_core.paper_source import ScoredPaper
from crase_core.records import SearchHit, Seed, SeedOrigin, SubQueryResult


def recency_key(paper) -> int:
    """``YYYYMM`` to sort by, newest first; an undated paper is 0 (the oldest), never the newest."""
    if paper.month is not None:
        return paper.month
    return paper.year * 100 + 12 if paper.year else 0


def rank_hits(results: Sequence[ScoredPaper], *, parts: bool = False) -> list[SearchHit]:
    """Relevance and recency ranks (1-based) of one result list, in relevance order; with ``parts`` each
    hit keeps its score's parts (:mod:`crase_core.retrieval.text_parts`; the full-query search's list)."""
    by_recency = sorted(range(len(results)), key=lambda i: (-recency_key(results[i].paper), i))
    recency_rank = {i: r for r, i in enumerate(by_recency, 1)}
    return [
        SearchHit(paper_id=r.paper.id, relevance_rank=i + 1, recency_rank=recency_rank[i], score=r.score,
                  parts=dict(r.parts) if parts else {})
        for i, r in enumerate(results)
    ]


def select_seeds(hits: Sequence[SearchHit], m: int) -> tuple[list[SearchHit], int]:
    """(up to m seeds in top-t-of-both order, t). t = 0 for an empty list."""
    if not hits or m <= 0:
        return [], 0
    ordered = sorted(hits, key=lambda h: (max(h.relevance_rank, h.recency_rank), h.relevance_rank))
    chosen = ordered[:m]
    t = max(max(h.relevance_rank, h.recency_rank) for h in chosen)
    # keep the relevance order inside the chosen set
    return sorted(chosen, key=lambda h: h.relevance_rank), t


def build_seed_set(
    subqueries: Sequence[str], result_lists: Sequence[Sequence[ScoredPaper]], m: int
) -> tuple[list[Seed], list[SubQueryResult]]:
    """Seeds (first-seen order) and the per-sub-query record of hits and chosen seeds."""
    seeds: dict[str, Seed] = {}
    records: list[SubQueryResult] = []
    for index, (sq, results) in enumerate(zip(subqueries, result_lists, strict=True)):
        hits = rank_hits(results)
        chosen, t = select_seeds(hits, m)
        for h in chosen:
            origin = SeedOrigin(index, sq, h.relevance_rank, h.recency_rank, t)
            seeds.setdefault(h.paper_id, Seed(h.paper_id, [])).origins.append(origin)
        records.append(SubQueryResult(index, sq, hits, [h.paper_id for h in chosen], t))
    return list(seeds.values()), records
