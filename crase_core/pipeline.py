"""The three-stage Crase pipeline: query → plan → seeds → graph → claims → matrices → prune → rank.

:func:`run_query` is the one entry point; it reads as the method, one call per
stage (:mod:`crase_core.stages`). :func:`build_graph` runs stages 1–2a alone
(plan, seeds, expansion) and knows the exact model-call budget of the rest;
:func:`estimate_budget` is that budget. Side effects live behind the
:class:`Engine`'s parts (paper source, model backend, result cache); model work
is cached and counted by :class:`~crase_core.component_cache.ComponentCache`;
the graph construction, Δ, pruning, weights and ranking are pure functions, so
a test can run the whole pipeline on a small in-memory graph in milliseconds.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from crase_core import deadline
from crase_core.backends import ModelBackend, with_support_scorer
from crase_core.cache import ResultCache, stable_hash
from crase_core.component_cache import ComponentCache, Edge
from crase_core.errors import InputError
from crase_core.gc_pause import gc_deferred
from crase_core.llm.spend import SpendMeter
from crase_core.paper_source import PaperSource
from crase_core.records import Budget, EdgeMatrix, PlanResult, RecallEstimate
from crase_core.retrieval.dense import QuestionEmbedder
from crase_core.retrieval.library import mark_in_library
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.budget import CachedWork, check_budget, count_budget
from crase_core.stages.cascade import Priority, cascade, edge_priority
from crase_core.stages.expansion import Expansion, expand_seeds
from crase_core.stages.planning import plan_query
from crase_core.stages.progress import STAGES, ProgressFn, StageEvent
from crase_core.stages.pruning import Pruning, prune_graph, refill_after_pruning
from crase_core.stages.ranking import Ranked, expansion_settings, rank_papers
from crase_core.stages.scoring import Scored, extract_claims, legacy_scored, score_edges
from crase_core.stages.seeding import Seeding, SeedingStage, find_seeds, search_seeds
from crase_core.trace import RunTrace

__all__ = ["STAGES", "Engine", "GraphBuild", "ProgressFn", "StageEvent", "build_graph", "clean_query",
           "estimate_budget", "model_mostly_failed", "run_meter", "run_query", "source_stats"]

MAX_QUERY_CHARS = 2000


@dataclass
class Engine:
    """What a run talks to: a paper source, a model backend, (optionally) the result cache, the run's
    overall deadline in seconds (``deadline_s``; None: none, see :mod:`crase_core.deadline`), and what embeds
    the question (``embedder``; None: the on-device model through the result cache, loaded only when needed)."""

    source: PaperSource
    backend: ModelBackend
    cache: ResultCache | None = None
    deadline_s: float | None = None
    recall_calibration: str | None = None  # the recall calibration file the settings name (None: look it up)
    embedder: QuestionEmbedder | None = None

    def question_embedder(self) -> QuestionEmbedder:
        """``embedder``, or the on-device model's through this engine's result cache."""
        return self.embedder if self.embedder is not None else QuestionEmbedder(self.cache)


@dataclass
class GraphBuild:
    """Stages 1–2a of a run: the plan, the seeds, the evidence graph, and the exact budget of the rest.

    ``components`` is the cache-and-accounting wrapper the build used (its counters hold the cost so
    far); ``cached`` is what the cache already holds for the graph (the scoring stage reuses it).
    """

    query: str
    reference_year: int
    plan: PlanResult
    seeding: Seeding
    expansion: Expansion
    budget: Budget
    cached: CachedWork
    components: ComponentCache
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)


class _Clock:
    """Wall time per stage, in the order the stages ran."""

    def __init__(self, timings: dict[str, float] | None = None):
        self.timings = timings if timings is not None else {}

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        deadline.check(stage)  # no stage starts after the run's deadline
        t0 = time.perf_counter()
        yield
        self.timings[stage] = time.perf_counter() - t0


def source_stats(source: PaperSource) -> dict[str, float]:
    """The numeric counters a source keeps in its optional ``stats`` dataclass (retries, skipped ids…)."""
    stats = getattr(source, "stats", None)
    if stats is None or not dataclasses.is_dataclass(stats) or isinstance(stats, type):
        return {}
    return {k: float(v) for k, v in dataclasses.asdict(stats).items() if isinstance(v, int | float)}


def clean_query(query: str | None) -> str:
    """Strip and validate a query; raise :class:`InputError` with a message a user can act on."""
    if query is None:
        raise InputError("the query is empty: type a literature-search question")
    q = " ".join(str(query).split())
    if not q:
        raise InputError("the query is empty: type a literature-search question")
    if len(q) > MAX_QUERY_CHARS:
        raise InputError(
            f"the query is {len(q):,} characters long; the limit is {MAX_QUERY_CHARS:,}. "
            "Shorten it to the question itself (a title and a sentence or two work best)."
        )
    if "\x00" in q:
        raise InputError("the query contains a NUL character")
    return q


def run_meter(backend: ModelBackend, settings: PipelineSettings) -> SpendMeter:
    """The run's model budget: ``llm_budget`` calls / ``llm_token_budget`` tokens (0 or None: no limit).

    Only a backend with an offline fallback is limited (it is the one that costs money and has
    something to fall back on); the offline backend and test doubles run unlimited.
    """
    if backend.fallback is None:
        return SpendMeter()
    return SpendMeter(settings.llm_budget or None, settings.llm_token_budget or None)


def model_mostly_failed(trace: RunTrace) -> bool:
    """True when more than half of the model items this run asked were unusable (the CLI exits 3)."""
    c = trace.counters
    return c.model_items > 0 and 2 * c.model_failed > c.model_items


_Run = TypeVar("_Run", bound=Callable[..., Any])


def _with_deadline(run: _Run) -> _Run:
    """Run ``run(query, engine, …)`` under ``engine.deadline_s``, checked before every stage and at
    every progress event (between batches); past it, :class:`~crase_core.deadline.DeadlineExceeded`."""
    @functools.wraps(run)
    def bounded(query: str, engine: Engine, *args: Any, progress: ProgressFn | None = None, **kw: Any) -> Any:
        with deadline.running(engine.deadline_s) as current:
            if current is not None:
                progress = _watched(current, progress)
            return run(query, engine, *args, progress=progress, **kw)
    return cast(_Run, bounded)


def _watched(current: deadline.Deadline, progress: ProgressFn | None) -> ProgressFn:
    def watched(event: StageEvent) -> None:
        current.check(event.stage)
        if progress is not None:
            progress(event)
    return watched


@_with_deadline
def build_graph(query: str, engine: Engine, settings: PipelineSettings | None = None, *,
                progress: ProgressFn | None = None, now: _dt.datetime | None = None,
                seeding: SeedingStage = search_seeds) -> GraphBuild:
    """Stages 1–2a: plan, seeds, expansion, and the budget 1 + |V| + |E| less what the cache holds.

    Makes the plan call (cached, so a later run does not pay for it twice) and the searches; computes
    no claim and no matrix. ``seeding`` replaces the per-sub-query seed search (same signature as
    :func:`~crase_core.stages.seeding.search_seeds`; evaluation only). Does not check
    ``settings.max_model_calls`` (:func:`run_query` does). Raises :class:`InputError` for a bad query.
    """
    settings = settings or PipelineSettings()
    q = clean_query(query)
    now = now or _dt.datetime.now(_dt.UTC)
    backend, scorer_warning = with_support_scorer(engine.backend, settings.support_scorer)
    scorer_warnings = [scorer_warning] if scorer_warning else []
    components = ComponentCache(backend, engine.cache, meter=run_meter(backend, settings),
                                retry_failures=settings.retry_failures)
    clock = _Clock()
    with clock("plan"):
        planning = plan_query(q, components, settings, progress)
    with clock("seeds"):
        seeds = find_seeds(q, planning.plan, engine.source, settings, progress, seeding,
                           embedder=engine.question_embedder())
    components.counters.search_calls += seeds.search_calls
    with clock("expansion"):
        expansion = expand_seeds(seeds.seeds, seeds.query_hits, seeds.query_papers, engine.source,
                                 expansion_settings(settings), progress)  # text floor: its papers join V
    with clock("budget"):
        budget, cached = count_budget(planning.plan, expansion, components)
    return GraphBuild(q, settings.age_reference_year or now.year, planning.plan, seeds, expansion, budget, cached,
                      components, scorer_warnings + planning.warnings + seeds.warnings
                      + expansion.warnings, clock.timings)


def estimate_budget(query: str, engine: Engine, settings: PipelineSettings | None = None) -> Budget:
    """The exact model-call budget of ``run_query(query, engine, settings)``, without extracting or scoring,
    with the per-query limit, the calls it allows and their estimated tokens and seconds (makes the
    plan call: it is cached, so the run does not pay for it again)."""
    return build_graph(query, engine, settings).budget


def _record_spend(components: ComponentCache, scored: Scored) -> None:
    """How the model items went (the calls and tokens are counted as they happen)."""
    c = components.counters
    c.model_items, c.model_failed = scored.model_items, scored.model_failed
    c.model_edges = sum(1 for s, _ in scored.scorers.values() if s == "model")
    c.budget_refused = components.meter.refused


def interim_priority(build: GraphBuild, settings: PipelineSettings) -> Priority:
    """The cascade's priority: prune and rank with the current decisions, then :func:`edge_priority`
    (the edges that carry the current top k first)."""
    seeds, hits = build.seeding.seeds, build.seeding.query_hits

    def priority(open_edges: Sequence[Edge], matrices: Mapping[Edge, EdgeMatrix],
                 deciders: Mapping[Edge, str]) -> list[tuple[Edge, str]]:
        pruning = prune_graph(build.expansion, dict(matrices), seeds, settings, build.reference_year,
                              scorers={e: (deciders[e], "") for e in build.expansion.graph.edges}, query_hits=hits)
        ranked = rank_papers(build.expansion, pruning, seeds, hits, settings, query=build.query)
        return edge_priority(open_edges, ranked.results, matrices, settings)
    return priority


def score_graph(build: GraphBuild, settings: PipelineSettings, engine: Engine, clock: _Clock,
                progress: ProgressFn | None) -> Scored:
    """Stage 2b: claims and matrices — the budgeted cascade for a backend with an offline fallback, else
    every item by the backend itself."""
    components = build.components
    if components.fallback is not None:
        with clock("entailment"):
            return cascade(build.expansion, build.cached, components, settings, interim_priority(build, settings),
                           seeds=build.seeding.seeds, query_hits=build.seeding.query_hits, progress=progress,
                           budget=build.budget)
    with clock("claims"):
        claims = extract_claims(build.expansion, build.cached, build.budget, components, progress)
    with clock("entailment"):
        matrices = score_edges(build.expansion, claims, build.cached, components, progress)
    return legacy_scored(claims, matrices, build.expansion.graph.edges, components.backend.name,
                         components.backend.support)


@_with_deadline
@gc_deferred()
def run_query(
    query: str,
    engine: Engine,
    settings: PipelineSettings | None = None,
    *,
    progress: ProgressFn | None = None,
    now: _dt.datetime | None = None,
    seeding: SeedingStage = search_seeds,
) -> RunTrace:
    """Answer ``query`` with the full pipeline and return the run's trace.

    Raises :class:`InputError` for an unusable query and :class:`BudgetExceeded`
    when ``settings.max_model_calls`` would be exceeded (checked before any
    claim or matrix is computed). An empty result (no search hits, or every
    edge pruned) is not an error: the trace says why in ``warnings``.
    ``seeding``: see :func:`build_graph`.
    """
    settings = settings or PipelineSettings()
    now = now or _dt.datetime.now(_dt.UTC)
    source = engine.source
    external_before, stats_before = source.external_calls, source_stats(source)

    build = build_graph(query, engine, settings, progress=progress, now=now, seeding=seeding)
    check_budget(build.budget, settings)
    clock = _Clock(build.timings)
    scored = score_graph(build, settings, engine, clock, progress)
    _record_spend(build.components, scored)
    with clock("pruning"):
        pruning = prune_graph(build.expansion, scored.matrices, build.seeding.seeds, settings, build.reference_year,
                              progress, scorers=scored.scorers, query_hits=build.seeding.query_hits)
        refill = refill_after_pruning(build.expansion, pruning, build.seeding.query_hits, build.seeding.query_papers,
                                      settings)
        if refill:
            build.warnings.append(refill)
    with clock("ranking"):
        ranked = rank_papers(build.expansion, pruning, build.seeding.seeds, build.seeding.query_hits, settings,
                             progress, restart_hits=build.seeding.restart_hits, query=build.query)
    build.components.counters.external_calls = source.external_calls - external_before
    stats = {k: round(v - stats_before.get(k, 0), 3) for k, v in source_stats(source).items()}
    trace = assemble_trace(build, settings, engine, scored, pruning, ranked, clock, stats, now)
    trace.recall_estimate = recall_estimate(trace, engine)
    return trace


def recall_estimate(trace: RunTrace, engine: Engine) -> RecallEstimate:
    """The run's recall estimate, with the calibration the settings name, the corpus folder holds or Crase
    ships for the run's corpus (:mod:`crase_core.recall`)."""
    from crase_core.recall.calibration import find_calibration
    from crase_core.recall.estimate import estimate_recall

    folder = getattr(engine.source, "folder", None)
    return estimate_recall(trace, find_calibration(trace.source, engine.recall_calibration, folder))


def assemble_trace(build: GraphBuild, settings: PipelineSettings, engine: Engine, scored: Scored, pruning: Pruning,
                   ranked: Ranked, clock: _Clock, stats: dict[str, float], now: _dt.datetime) -> RunTrace:
    """The run's trace from its stages' outputs, with the user's library marked and the run's id."""
    source, seeding = engine.source, build.seeding
    trace = RunTrace(
        query=build.query,
        settings=settings,
        source=source.name,
        source_filter=source.filter.describe() if hasattr(source, "filter") else "none",
        backend=build.components.backend.describe(),  # the run's scorer (support_scorer), not only the engine's
        reference_year=build.reference_year,
        plan=build.plan,
        subquery_results=seeding.subquery_results,
        query_hits=seeding.query_hits,
        restart_hits=seeding.restart_hits,
        seeds=seeding.seeds,
        nodes=pruning.nodes,
        claims=scored.claims,
        edges=pruning.edges,
        truncations=build.expansion.graph.truncations,
        budget=build.budget,
        ranking=ranked.ranking,
        results=ranked.results,
        timings={k: round(v, 6) for k, v in clock.timings.items()},
        counters=build.components.counters,
        warnings=build.warnings + scored.warnings + ranked.warnings,
        source_stats=stats,
        created_at=now.isoformat(timespec="seconds"),
        coverage=seeding.coverage,
        library=seeding.library,
        semantic_feedback=seeding.semantic_feedback,
        semantic_note=seeding.semantic_note,
        dense_question=seeding.dense_question,
        dense_note=seeding.dense_note,
    )
    identity: list[object] = [trace.query, trace.settings.__dict__, trace.source, trace.source_filter,
                              trace.backend, trace.reference_year]
    if trace.library is not None:  # the user's papers are part of what the run is (ids unchanged without them)
        mark_in_library(trace.library.found_ids, trace.nodes, trace.results)
        identity.append(sorted(i.given for i in trace.library.items))
    trace.run_id = stable_hash(identity)[:16]
    return trace
