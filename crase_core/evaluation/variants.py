"""Evaluation-only stage replacements for the controlled ablations that no settings knob expresses.

* ``relevance-seeds`` — seed selection without recency: the top m hits of each sub-query by relevance
  alone (the default takes the papers in the top t of *both* relevance and recency rank; see
  :mod:`crase_core.retrieval.seeds`). Everything else is unchanged.
* ``phrase-planner`` — the corpus-aware :class:`~crase_core.retrieval.planner.PhrasePlanner` instead of the offline
  backend's keyword planner. Its statistics are aggregate (document frequencies, title bigrams) over
  the whole local corpus, like the BM25 index's IDF; they hold no paper id.

:func:`apply_variant` returns the engine and seeding stage a query runs with.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

from crase_core.errors import InputError
from crase_core.paper_source import PaperSource, ScoredPaper
from crase_core.pipeline import Engine
from crase_core.records import PlanResult, Seed, SeedOrigin, SubQueryResult
from crase_core.retrieval.planner import FieldVocabulary, PhrasePlanner
from crase_core.retrieval.seeds import rank_hits
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.progress import ProgressFn
from crase_core.stages.seeding import Seeding, SeedingStage, search, search_seeds

VARIANTS: dict[str, str] = {
    "relevance-seeds": "seeds = top m of each sub-query by relevance alone (no recency)",
    "phrase-planner": "the corpus-aware phrase planner instead of the keyword planner",
}


def relevance_seeds(plan: PlanResult, source: PaperSource, settings: PipelineSettings,
                    progress: ProgressFn | None = None) -> Seeding:
    """A :class:`SeedingStage`: one search per sub-query, the top m hits by relevance are its seeds."""
    searched: list[tuple[str, list[ScoredPaper]]] = [
        (sq, search(source, sq, settings)) for sq in plan.subqueries]
    seeds: dict[str, Seed] = {}
    records: list[SubQueryResult] = []
    for index, (sq, results) in enumerate(searched):
        hits = rank_hits(results)
        chosen = hits[: settings.m]
        for h in chosen:
            seeds.setdefault(h.paper_id, Seed(h.paper_id, [])).origins.append(
                SeedOrigin(index, sq, h.relevance_rank, h.recency_rank, len(chosen)))
        records.append(SubQueryResult(index, sq, hits, [h.paper_id for h in chosen], len(chosen)))
    return Seeding(list(seeds.values()), records, searched, search_calls=len(searched))


@lru_cache(maxsize=2)
def _vocabulary(source: Any) -> FieldVocabulary:
    return FieldVocabulary.from_source(source)


def apply_variant(name: str | None, engine: Engine, corpus_source: Any) -> tuple[Engine, SeedingStage]:
    """(engine, seeding stage) for variant ``name`` (None: unchanged). ``corpus_source``: the unfiltered
    local source whose statistics the phrase planner reads."""
    if name is None:
        return engine, search_seeds
    if name == "relevance-seeds":
        return engine, relevance_seeds
    if name == "phrase-planner":
        if getattr(corpus_source, "text_index", None) is None:
            raise InputError("the phrase planner needs a local corpus (its index and titles)")
        backend = replace(engine.backend, planner=PhrasePlanner(_vocabulary(corpus_source)))
        return Engine(engine.source, backend, engine.cache), search_seeds
    raise InputError(f"unknown evaluation variant {name!r}; choose one of {', '.join(VARIANTS)}")
