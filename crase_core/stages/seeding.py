"""Stage 1b: seeds — one search per sub-query, seeds by top-t of relevance and recency (see
:mod:`crase_core.seeds`), plus one search for the full query (query restart and text candidates).

The per-sub-query part is a :class:`SeedingStage`: :func:`search_seeds` by default; an evaluation can
pass another with the same signature (``crase_core.evaluation.stress`` injects corrupted seeds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ..records import Paper, PlanResult, SearchHit, Seed, SubQueryResult
from ..seeds import build_seed_set, rank_hits
from ..settings import PipelineSettings
from ..sources.base import PaperSource, ScoredPaper
from .progress import ProgressFn, emit

NO_SEEDS_WARNING = "no paper matched any sub-query: nothing to expand. Try other words or a broader query."


@dataclass
class Seeding:
    """Seeds S, the record of each sub-query's search, and the full-query search (stage 3's restart)."""

    seeds: list[Seed]
    subquery_results: list[SubQueryResult]
    searched: list[tuple[str, list[ScoredPaper]]] = field(default_factory=list)  # (sub-query, its results)
    query_hits: list[SearchHit] = field(default_factory=list)  # the full-query search, ranked
    query_papers: dict[str, Paper] = field(default_factory=dict)  # its papers by id
    search_calls: int = 0
    warnings: list[str] = field(default_factory=list)


class SeedingStage(Protocol):
    """Seeds for a plan: what :func:`search_seeds` does, or a replacement with the same signature."""

    def __call__(self, plan: PlanResult, source: PaperSource, settings: PipelineSettings,
                 progress: ProgressFn | None) -> Seeding: ...


def search_seeds(plan: PlanResult, source: PaperSource, settings: PipelineSettings,
                 progress: ProgressFn | None = None) -> Seeding:
    """One search of ``settings.search_limit`` results per sub-query; up to m seeds from each."""
    searched: list[tuple[str, list[ScoredPaper]]] = []
    for i, sq in enumerate(plan.subqueries):
        emit(progress, "seeds", i, len(plan.subqueries), f"searching “{sq}”")
        searched.append((sq, list(source.search(sq, settings.search_limit))))
    seeds, subquery_results = build_seed_set(plan.subqueries, [r for _, r in searched], settings.m)
    return Seeding(seeds, subquery_results, searched, search_calls=len(searched))


def search_full_query(query: str, seeding: Seeding, source: PaperSource, settings: PipelineSettings) -> Seeding:
    """Fill in ``seeding``'s full-query search when the settings use it (query restart, text candidates).

    The full query's search is reused when it already was a sub-query.
    """
    if settings.personalization != "query" and settings.text_candidates <= 0:
        return seeding
    same = [results for sq, results in seeding.searched if sq == query]
    if same:
        results = same[0]
    else:
        results = list(source.search(query, settings.search_limit))
        seeding.search_calls += 1
    seeding.query_hits = rank_hits(results)
    seeding.query_papers = {r.paper.id: r.paper for r in results}
    return seeding


def find_seeds(query: str, plan: PlanResult, source: PaperSource, settings: PipelineSettings,
               progress: ProgressFn | None = None, stage: SeedingStage = search_seeds) -> Seeding:
    """Stage 1b: ``stage`` for the seeds, then the full-query search; warns when there is no seed."""
    seeding = search_full_query(query, stage(plan, source, settings, progress), source, settings)
    emit(progress, "seeds", len(plan.subqueries), len(plan.subqueries), f"{len(seeding.seeds)} seeds")
    if not seeding.seeds:
        seeding.warnings.append(NO_SEEDS_WARNING)
    return seeding
