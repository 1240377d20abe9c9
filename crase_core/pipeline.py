"""The three-stage Crase pipeline: query → plan → seeds → graph → claims → matrices → prune → rank.

:func:`run_query` is the one entry point. Side effects live behind the
:class:`Engine`'s parts (paper source, model backend, result cache); the
graph construction, Δ, pruning, weights and ranking are pure functions, so a
test can run the whole pipeline on a small in-memory graph in milliseconds.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .affinity import age_years, coverage_affinity, decide_edge, supported_claims, surviving_nodes
from .backends import ModelBackend
from .cache import ResultCache, result_key, stable_hash
from .errors import BudgetExceeded, InputError
from .expansion import expand
from .rankers import rank
from .ranking import WeightedGraph, top_k
from .records import (
    CLAIM_TYPES,
    Budget,
    Claim,
    ClaimSet,
    Counters,
    EdgeMatrix,
    EdgeRecord,
    NodeRecord,
    Paper,
    PlanResult,
    RankedPaper,
    RankingResult,
    SearchHit,
    Seed,
    SeedOrigin,
    TrailStep,
    Usage,
)
from .seeds import build_seed_set, rank_hits
from .settings import PipelineSettings
from .sources.base import PaperSource, ScoredPaper
from .trace import RunTrace
from .trails import best_trails

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 2000
STAGES = ("plan", "seeds", "expansion", "claims", "entailment", "pruning", "ranking")
BATCH = 256  # items per model batch; progress is reported between batches


@dataclass
class StageEvent:
    """Progress of one stage: ``done`` of ``total`` items (total 0 = indeterminate)."""

    stage: str
    done: int
    total: int
    message: str = ""
    budget: Budget | None = None  # set on the first "claims" event: known before any claim/matrix call


ProgressFn = Callable[[StageEvent], None]


@dataclass
class Engine:
    """What a run talks to: a paper source, a model backend, and (optionally) the result cache."""

    source: PaperSource
    backend: ModelBackend
    cache: ResultCache | None = None


@dataclass
class _Run:
    counters: Counters = field(default_factory=Counters)
    timings: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def source_stats(source: PaperSource) -> dict[str, float]:
    """The numeric counters a source keeps in its optional ``stats`` dataclass (retries, skipped ids…)."""
    stats = getattr(source, "stats", None)
    if stats is None or not dataclasses.is_dataclass(stats):
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


def claims_key(identity: str, paper: Paper) -> str:
    return result_key("claims", identity, [paper.title, paper.abstract])


def claims_digest(claims: Sequence[Claim]) -> str:
    """Hash of a paper's claim texts in order (a matrix's rows/columns follow that order)."""
    return stable_hash([c.text for c in claims])


def matrix_key(identity: str, citing: Sequence[Claim], cited: Sequence[Claim], *,
               digests: tuple[str, str] | None = None) -> str:
    """Cache key of edge matrix ``citing × cited`` for scorer ``identity`` (digests may be precomputed)."""
    du, dv = digests or (claims_digest(citing), claims_digest(cited))
    return f"matrix|{identity}|{du}|{dv}"


def _valid_cached_matrix(value: object, n_u: int, n_v: int) -> list[list[float]] | None:
    """A cached matrix if it has the right shape and values in [0, 1], else None (treated as a miss)."""
    if not isinstance(value, list) or len(value) != n_u or any(not isinstance(r, list) or len(r) != n_v for r in value):
        return None
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    if arr.shape != (n_u, n_v) or not np.isfinite(arr).all() or (arr < 0).any() or (arr > 1).any():
        return None
    return value


def plan_key(identity: str, query: str, L: int) -> str:
    return result_key("plan", identity, [query, L])


#: Errors that mean "the model answered, unusably, after its retries". They are results like any
#: other (asking again gets the same answer from the same model and prompt), so they are cached and a
#: repeated query costs no new call. Transport errors (timeouts, 5xx, refused) are not cached.
OUTPUT_FAILURE_PREFIX = "model output:"


def is_output_failure(error: str | None) -> bool:
    return bool(error) and error.startswith(OUTPUT_FAILURE_PREFIX)


def _claimset_to_cache(cs: ClaimSet) -> dict:
    return {
        "claims": [[c.id, c.type, c.text, c.source_phrase, c.verbatim] for c in cs.claims],
        "title_only": cs.title_only,
        "notes": cs.notes,
        **({"error": cs.error} if cs.error else {}),
    }


def _claimset_from_cache(paper_id: str, identity: str, value: dict) -> ClaimSet:
    """Rebuild a cached claim set; raise ValueError/KeyError/TypeError when the entry is corrupt."""
    if is_output_failure(value.get("error")) and value.get("claims") == []:
        return ClaimSet(paper_id, [], identity, error=value["error"], notes=list(value.get("notes", [])), cached=True)
    claims = [Claim(i, t, x, s, bool(v)) for i, t, x, s, v in value["claims"]]
    if not claims or any(c.type not in CLAIM_TYPES or not isinstance(c.text, str) for c in claims):
        raise ValueError("corrupt claims entry")
    return ClaimSet(paper_id, claims, identity, bool(value.get("title_only")), None,
                    list(value.get("notes", [])), cached=True)


def _emit(progress: ProgressFn | None, stage: str, done: int, total: int, message: str = "",
          budget: Budget | None = None) -> None:
    if progress is not None:
        progress(StageEvent(stage, done, total, message, budget))


def personalization_vector(seeds: Sequence[Seed], kept_nodes: set[str], mode: str) -> dict[str, float]:
    """Restart distribution p over kept seeds: uniform, or ∝ 1/best relevance rank ("relevance")."""
    weights: dict[str, float] = {}
    for s in seeds:
        if s.paper_id not in kept_nodes:
            continue
        if mode == "relevance":
            weights[s.paper_id] = 1.0 / min(o.relevance_rank for o in s.origins)
        else:
            weights[s.paper_id] = 1.0
    total = sum(weights.values())
    return {k: v / total for k, v in weights.items()} if total > 0 else {}


def query_restart_vector(node_ids: Sequence[str], query_hits: Sequence[SearchHit], power: float) -> dict[str, float]:
    """Query-conditioned restart: p(v) ∝ score(v)^γ over ``node_ids`` found by the full-query search.

    ``score`` is the source's relevance score of v for the whole query (0 for a paper the search did
    not return); {} when no node has a positive score (the caller falls back to the seeds).
    """
    score = {h.paper_id: h.score for h in query_hits}
    weights = {n: score[n] ** power for n in node_ids if score.get(n, 0.0) > 0.0}
    total = sum(weights.values())
    return {k: v / total for k, v in weights.items()} if total > 0 else {}


def restart_distribution(settings: PipelineSettings, seeds: Sequence[Seed], alive: set[str], rank_ids: Sequence[str],
                         query_hits: Sequence[SearchHit], warnings: list[str] | None = None) -> dict[str, float]:
    """Stage 3's restart distribution p over ``rank_ids`` (kept nodes + text candidates), per settings.

    ``query``: :func:`query_restart_vector`, falling back to the kept seeds; otherwise
    :func:`personalization_vector`; uniform over ``rank_ids`` when all of that is empty.
    Fallbacks are explained in ``warnings``. Pure; :mod:`crase_core.rerank` reuses it.
    """
    notes = warnings if warnings is not None else []
    if settings.personalization == "query":
        p = query_restart_vector(rank_ids, query_hits, settings.query_power)
        if rank_ids and not p:
            notes.append("no ranked paper matched the full-query search; the walk restarts at the kept seeds")
            p = personalization_vector(seeds, alive, "uniform")
    else:
        p = personalization_vector(seeds, alive, settings.personalization)
    if rank_ids and not p:
        notes.append("every seed was pruned; the walk restarts uniformly over the surviving papers")
        p = {n: 1.0 / len(rank_ids) for n in rank_ids}
    return p


def _seed_reason(seed: Seed) -> str:
    o = min(seed.origins, key=lambda o: o.relevance_rank)
    extra = f" (+{len(seed.origins) - 1} more sub-queries)" if len(seed.origins) > 1 else ""
    return f"seed from sub-query {o.subquery_index + 1} “{o.subquery}” (relevance #{o.relevance_rank}, recency #{o.recency_rank}){extra}"


def _trail_reason(trail: list[TrailStep], titles: dict[str, str]) -> str:
    def short(pid: str) -> str:
        t = titles.get(pid, pid)
        return t if len(t) <= 60 else t[:57] + "…"

    first = trail[0]
    if len(trail) == 1:
        verb = "cited by" if first.along_citation else "cites"
        return f"{verb} seed “{short(first.source)}” (Δ {first.delta:.2f})"
    parts = [f"seed “{short(first.source)}”"]
    for step in trail:
        arrow = "→" if step.along_citation else "←"
        parts.append(f"{arrow} (Δ {step.delta:.2f}) “{short(step.target)}”")
    return f"{len(trail)} steps: " + " ".join(parts)


def run_query(
    query: str,
    engine: Engine,
    settings: PipelineSettings | None = None,
    *,
    progress: ProgressFn | None = None,
    now: _dt.datetime | None = None,
    seeds_override: Sequence[str] | None = None,
) -> RunTrace:
    """Answer ``query`` with the full pipeline and return the run's trace.

    Raises :class:`InputError` for an unusable query and :class:`BudgetExceeded`
    when ``settings.max_model_calls`` would be exceeded (checked before any
    claim or matrix is computed). An empty result (no search hits, or every
    edge pruned) is not an error: the trace says why in ``warnings``.

    ``seeds_override`` (evaluation only, e.g. the seed-corruption stress test)
    replaces stage 1's seed search by the given paper ids (in that order;
    ids the source does not show are dropped): the plan is still made, no
    search call is made, and the trace records the injection in ``warnings``.
    """
    settings = settings or PipelineSettings()
    q = clean_query(query)
    now = now or _dt.datetime.now(_dt.UTC)
    reference_year = settings.age_reference_year or now.year
    run = _Run()
    source, backend, cache = engine.source, engine.backend, engine.cache
    external_before = source.external_calls
    stats_before = source_stats(source)

    # ---- Stage 1: plan -------------------------------------------------------------------
    t0 = time.perf_counter()
    _emit(progress, "plan", 0, 1, "planning sub-queries")
    pkey = plan_key(backend.planner.identity, q, settings.L)
    cached_plan = cache.get_many([pkey]).get(pkey) if cache is not None else None
    if not (isinstance(cached_plan, dict) and isinstance(cached_plan.get("subqueries"), list)
            and (cached_plan["subqueries"] or is_output_failure(cached_plan.get("error")))
            and all(isinstance(x, str) for x in cached_plan["subqueries"])):
        cached_plan = None  # absent or corrupt: plan again
    if cached_plan:
        plan = PlanResult(q, list(cached_plan["subqueries"])[: settings.L], backend.planner.identity,
                          error=cached_plan.get("error"), notes=list(cached_plan.get("notes", [])), cached=True)
        run.counters.cache_hits += 1
        if plan.error:
            run.counters.failures += 1
            run.warnings.append(f"planner failed (cached answer): {plan.error}")
    else:
        plan = backend.planner.plan(q, settings.L)
        plan.subqueries = plan.subqueries[: settings.L]
        run.counters.model_calls += max(1, plan.usage.calls)
        run.counters.prompt_tokens += plan.usage.prompt_tokens
        run.counters.completion_tokens += plan.usage.completion_tokens
        run.counters.cache_misses += 1
        if plan.error:
            run.counters.failures += 1
            run.warnings.append(f"planner failed: {plan.error}")
            if cache is not None and is_output_failure(plan.error):
                cache.set_many({pkey: {"subqueries": [], "error": plan.error, "notes": plan.notes}})
        elif cache is not None and plan.subqueries:
            cache.set_many({pkey: {"subqueries": plan.subqueries, "notes": plan.notes}})
    if not plan.subqueries:
        # A planner that produced nothing still leaves the query itself to search for.
        plan.subqueries = [q]
        plan.notes.append("no sub-queries were planned; the query itself is the only sub-query")
    run.timings["plan"] = time.perf_counter() - t0
    _emit(progress, "plan", 1, 1, f"{len(plan.subqueries)} sub-queries")

    # ---- Stage 1: seeds (one search per sub-query) ------------------------------------------
    t0 = time.perf_counter()
    result_lists: list[list[ScoredPaper]] = []
    if seeds_override is not None:
        wanted = list(dict.fromkeys(seeds_override))
        visible = source.get(wanted)
        injected = [pid for pid in wanted if pid in visible]
        seeds = [Seed(pid, [SeedOrigin(0, "(injected seed)", i, i, len(injected))]) for i, pid in enumerate(injected, 1)]
        subquery_results = []
        run.warnings.append(f"seeds injected by the caller ({len(injected)} of {len(seeds_override)} visible); "
                            "stage 1 search skipped")
    else:
        for i, sq in enumerate(plan.subqueries):
            _emit(progress, "seeds", i, len(plan.subqueries), f"searching “{sq}”")
            result_lists.append(source.search(sq, settings.search_limit))
            run.counters.search_calls += 1
        seeds, subquery_results = build_seed_set(plan.subqueries, result_lists, settings.m)
    # One more search, for the full query: its scores drive the query restart of stage 3 and its
    # top hits outside the graph become text-only candidates (settings.personalization / text_candidates).
    query_hits: list[SearchHit] = []
    query_papers: dict[str, Paper] = {}
    if settings.personalization == "query" or settings.text_candidates > 0:
        same = [r for sq, r in zip(plan.subqueries, result_lists, strict=False) if sq == q]
        if same:  # the full query was already a sub-query: reuse its one search
            query_results = same[0]
        else:
            query_results = source.search(q, settings.search_limit)
            run.counters.search_calls += 1
        query_hits = rank_hits(query_results)
        query_papers = {r.paper.id: r.paper for r in query_results}
    run.timings["seeds"] = time.perf_counter() - t0
    _emit(progress, "seeds", len(plan.subqueries), len(plan.subqueries), f"{len(seeds)} seeds")
    if not seeds:
        run.warnings.append("no paper matched any sub-query: nothing to expand. Try other words or a broader query.")

    # ---- Stage 2: expansion --------------------------------------------------------------------
    t0 = time.perf_counter()
    _emit(progress, "expansion", 0, len(seeds), "fetching references and citers")
    graph = expand(source, [s.paper_id for s in seeds], settings.hops, settings.neighbor_cap)
    papers = source.get(graph.nodes)
    missing = [n for n in graph.nodes if n not in papers]
    if missing:
        run.warnings.append(f"{len(missing)} neighbour id(s) had no record at the source and were dropped")
        gone = set(missing)
        graph.nodes = [n for n in graph.nodes if n not in gone]
        graph.edges = [(u, v) for u, v in graph.edges if u not in gone and v not in gone]
    seed_ids = {s.paper_id for s in seeds}
    # Text candidates: top hits of the full-query search that the expansion did not reach join V
    # (role "text"); their citation edges inside V are added and scored like any other, and they are
    # exempt from isolation pruning (their evidence is the text match, recorded in query_hits).
    in_graph = set(graph.nodes)
    text_ids = [h.paper_id for h in query_hits[: settings.text_candidates]
                if h.paper_id not in in_graph and h.paper_id in query_papers]
    if text_ids:
        text_set = set(text_ids)
        graph.nodes = graph.nodes + text_ids
        papers.update({n: query_papers[n] for n in text_ids})
        extra = [(u, v) for u, v in source.edges_among(graph.nodes) if u in text_set or v in text_set]
        if settings.hops < 1.5:
            extra = [(u, v) for u, v in extra if u in seed_ids or v in seed_ids]
        graph.edges = sorted(set(graph.edges) | set(extra))
    run.timings["expansion"] = time.perf_counter() - t0
    _emit(progress, "expansion", len(seeds), len(seeds), f"|V| = {len(graph.nodes)}, |E| = {len(graph.edges)}")

    # ---- Budget: 1 + |V| + |E|, less what the cache holds ----------------------------------------
    t0 = time.perf_counter()
    ext_id, sc_id = backend.extractor.identity, backend.scorer.identity
    ckeys = {n: claims_key(ext_id, papers[n]) for n in graph.nodes}
    cached_claims_raw = cache.get_many(ckeys.values()) if cache is not None else {}
    claimsets: dict[str, ClaimSet] = {}
    for n, key in ckeys.items():
        value = cached_claims_raw.get(key)
        if value is not None:
            try:
                claimsets[n] = _claimset_from_cache(n, ext_id, value)
            except (AttributeError, KeyError, TypeError, ValueError):
                log.warning("corrupt cached claims for %s; recomputing", n)
    run.counters.failures += sum(1 for cs in claimsets.values() if cs.error)  # cached model-output failures
    digests: dict[str, str] = {n: claims_digest(cs.claims) for n, cs in claimsets.items()}
    mkeys_known = {
        (u, v): matrix_key(sc_id, (), (), digests=(digests[u], digests[v]))
        for u, v in graph.edges
        if u in claimsets and v in claimsets
    }
    # read (not just probe) the cached matrices now: the entailment stage reuses them
    cached_m = cache.get_many(mkeys_known.values()) if cache is not None else {}
    n_cached = (1 if plan.cached else 0) + len(claimsets) + len(cached_m)
    total_calls = 1 + len(graph.nodes) + len(graph.edges)
    budget = Budget(total_calls, 1, len(graph.nodes), len(graph.edges), n_cached, total_calls - n_cached)
    if settings.max_model_calls is not None and budget.to_call > settings.max_model_calls:
        raise BudgetExceeded(
            f"this query needs {budget.to_call:,} model calls (1 + |V| {len(graph.nodes):,} + |E| "
            f"{len(graph.edges):,}, less {n_cached:,} cached) but the cap is {settings.max_model_calls:,}. "
            "Lower m, L or hops, or raise the cap."
        )
    run.timings["budget"] = time.perf_counter() - t0

    # ---- Stage 2: claims ---------------------------------------------------------------------------
    t0 = time.perf_counter()
    todo = [papers[n] for n in graph.nodes if n not in claimsets]
    run.counters.cache_hits += len(claimsets)
    run.counters.cache_misses += len(todo)
    _emit(progress, "claims", 0, len(graph.nodes), f"{len(claimsets)} cached, {len(todo)} to extract", budget)
    for start in range(0, len(todo), BATCH):
        batch = todo[start : start + BATCH]
        results = backend.extractor.extract_many(batch)
        fresh = {}
        for paper, cs in zip(batch, results, strict=True):
            claimsets[paper.id] = cs
            run.counters.model_calls += max(1, cs.usage.calls)
            run.counters.prompt_tokens += cs.usage.prompt_tokens
            run.counters.completion_tokens += cs.usage.completion_tokens
            if cs.error:
                run.counters.failures += 1
            if not cs.error or is_output_failure(cs.error):
                fresh[ckeys[paper.id]] = _claimset_to_cache(cs)
            if any("repair" in note for note in cs.notes):
                run.counters.repairs += 1
        if cache is not None:
            cache.set_many(fresh)
        _emit(progress, "claims", len(claimsets), len(graph.nodes), "extracting claims")
    run.timings["claims"] = time.perf_counter() - t0

    # ---- Stage 2: entailment matrices -----------------------------------------------------------------
    t0 = time.perf_counter()
    for n in graph.nodes:
        if n not in digests:
            digests[n] = claims_digest(claimsets[n].claims)
    mkeys = {e: mkeys_known.get(e) or matrix_key(sc_id, (), (), digests=(digests[e[0]], digests[e[1]]))
             for e in graph.edges}
    if cache is not None:
        cached_m.update(cache.get_many(k for e, k in mkeys.items() if e not in mkeys_known))
    matrices: dict[tuple[str, str], EdgeMatrix] = {}
    for e, key in mkeys.items():
        value = cached_m.get(key)
        if isinstance(value, dict) and is_output_failure(value.get("error")):
            matrices[e] = EdgeMatrix([], sc_id, error=value["error"], cached=True)
            run.counters.failures += 1
            continue
        if value is not None:
            value = _valid_cached_matrix(value, len(claimsets[e[0]].claims), len(claimsets[e[1]].claims))
            if value is None:
                log.warning("corrupt cached matrix for %s→%s; recomputing", *e)
                continue
            matrices[e] = EdgeMatrix(value, sc_id, cached=True)
    run.counters.cache_hits += len(matrices)
    todo_edges = [e for e in graph.edges if e not in matrices]
    # edges touching a paper with no claims cannot be scored: Δ = 0 without a model call
    scorable = [e for e in todo_edges if claimsets[e[0]].claims and claimsets[e[1]].claims]
    scorable_set = set(scorable)
    for e in todo_edges:
        if e not in scorable_set:
            bad = e[0] if not claimsets[e[0]].claims else e[1]
            why = claimsets[bad].error or "no claims"
            matrices[e] = EdgeMatrix([], sc_id, error=f"paper {bad} has no claims ({why})")
    run.counters.cache_misses += len(scorable)
    _emit(progress, "entailment", len(graph.edges) - len(scorable), len(graph.edges), f"{len(scorable)} edges to score")
    for start in range(0, len(scorable), BATCH):
        batch = scorable[start : start + BATCH]
        results = backend.scorer.score_many([(claimsets[u].claims, claimsets[v].claims) for u, v in batch])
        fresh = {}
        for e, em in zip(batch, results, strict=True):
            matrices[e] = em
            usage: Usage = em.usage
            run.counters.model_calls += max(1, usage.calls)
            run.counters.prompt_tokens += usage.prompt_tokens
            run.counters.completion_tokens += usage.completion_tokens
            if em.error:
                run.counters.failures += 1
                if is_output_failure(em.error):
                    fresh[mkeys[e]] = {"error": em.error}
            else:
                fresh[mkeys[e]] = em.matrix
            if any("repair" in note for note in em.notes):
                run.counters.repairs += 1
        if cache is not None:
            cache.set_many(fresh)
        _emit(progress, "entailment", len(graph.edges) - len(scorable) + start + len(batch), len(graph.edges),
              "scoring citation edges")
    run.timings["entailment"] = time.perf_counter() - t0

    # ---- Stage 2: Δ, pruning, weights (pure) ---------------------------------------------------------
    t0 = time.perf_counter()
    _emit(progress, "pruning", 0, len(graph.edges), "coverage affinity and pruning")
    edges: list[EdgeRecord] = []
    for u, v in graph.edges:
        em = matrices[(u, v)]
        age = age_years(papers[v].year, reference_year)
        rec = EdgeRecord(
            citing=u, cited=v, matrix=em.matrix, error=em.error, cached=em.cached,
            supported=supported_claims(em.matrix, settings.theta) if not em.error else [],
            delta=coverage_affinity(em.matrix, settings.theta) if not em.error else 0.0,
            age_years=age, age_factor=age ** (-settings.beta),
            contexts=graph.contexts.get((u, v), []), intents=graph.intents.get((u, v), []),
        )
        decide_edge(rec, settings.tau)
        if papers[v].year is None:
            rec.decision += "; cited paper has no year, age taken as 1"
        edges.append(rec)
    text_set_all = set(text_ids)
    alive = surviving_nodes(graph.nodes, edges) | text_set_all
    degree: dict[str, int] = {}
    kept_degree: dict[str, int] = {}
    for e in edges:
        for n in (e.citing, e.cited):
            degree[n] = degree.get(n, 0) + 1
            if e.kept:
                kept_degree[n] = kept_degree.get(n, 0) + 1
    nodes: list[NodeRecord] = []
    for n in graph.nodes:
        role = "seed" if n in seed_ids else "text" if n in text_set_all else "expanded"
        rec = NodeRecord(paper=papers[n], role=role, kept=n in alive)
        if not rec.kept:
            rec.prune_reason = (
                f"isolated: all {degree[n]} of its edges were pruned" if degree.get(n) else "no citation edge inside the graph"
            )
        nodes.append(rec)
    for s in seeds:
        if s.paper_id in alive:
            s.fate = "kept"
            s.fate_reason = f"kept: {kept_degree.get(s.paper_id, 0)} of {degree.get(s.paper_id, 0)} edges kept"
        else:
            s.fate = "pruned"
            s.fate_reason = (
                f"pruned: all {degree[s.paper_id]} of its edges have Δ ≤ τ = {settings.tau:g}"
                if degree.get(s.paper_id)
                else "pruned: no references or citers inside the graph"
            )
    run.timings["pruning"] = time.perf_counter() - t0
    _emit(progress, "pruning", len(graph.edges), len(graph.edges),
          f"{sum(e.kept for e in edges)} of {len(edges)} edges kept, {len(alive)} of {len(graph.nodes)} nodes")

    # ---- Stage 3: ranking ------------------------------------------------------------------------------
    t0 = time.perf_counter()
    _emit(progress, "ranking", 0, 1, f"ranking with {settings.ranker}")
    kept_ids = [n for n in graph.nodes if n in alive]
    text_rank = {h.paper_id: h.relevance_rank for h in query_hits}
    rank_ids = kept_ids
    p = restart_distribution(settings, seeds, alive, rank_ids, query_hits, run.warnings)
    if seeds and not kept_ids:
        run.warnings.append(
            "every citation edge was pruned (no cited claim supports a citing claim at θ); nothing left to rank. "
            "Lower θ, or raise nothing: this is the evidence graph's verdict."
        )
    wgraph = WeightedGraph(rank_ids, [(e.citing, e.cited, e.weight) for e in edges if e.kept])
    ranking = (
        rank(settings, wgraph, p)
        if rank_ids
        else RankingResult(settings.ranker, {})
    )
    if rank_ids and not ranking.converged:
        run.warnings.append(f"{settings.ranker} did not converge in {settings.max_iter} iterations "
                            f"(residual {ranking.residual:.2e})")
    seed_order = [s.paper_id for s in seeds]
    order_hint = seed_order + [n for n in rank_ids if n not in seed_ids]
    ranked = top_k(ranking.scores, len(ranking.scores), order_hint)
    rank_of = {n: i for i, (n, _) in enumerate(ranked, 1)}
    for node in nodes:
        if node.kept:
            node.score = ranking.scores.get(node.paper.id, 0.0)
            node.rank = rank_of.get(node.paper.id)
    trails = best_trails([s for s in seed_order if s in alive], edges)
    titles = {n: papers[n].title for n in graph.nodes}
    seed_by_id = {s.paper_id: s for s in seeds}
    results: list[RankedPaper] = []
    for n, score in ranked[: settings.k]:
        trail = trails.get(n)
        if n in seed_by_id:
            reason, origin = _seed_reason(seed_by_id[n]), n
            trail = []
        elif n in text_set_all and not trail:
            reason, origin, trail = (f"text match #{text_rank[n]} for the full query (a text candidate the "
                                     "expansion did not reach; scored by its query restart weight)"), None, []
        elif trail:
            reason, origin = _trail_reason(trail, titles), trail[0].source
        else:
            reason, origin, trail = "reached only through restarts (no path from a kept seed)", None, []
        results.append(RankedPaper(n, rank_of[n], score, origin, trail, reason))
    run.timings["ranking"] = time.perf_counter() - t0
    _emit(progress, "ranking", 1, 1, f"{len(results)} papers")

    run.counters.external_calls = source.external_calls - external_before
    stats_after = source_stats(source)
    run_source_stats = {k: round(v - stats_before.get(k, 0), 3) for k, v in stats_after.items()}
    claims_for_trace = {n: claimsets[n] for n in graph.nodes}
    trace = RunTrace(
        query=q,
        settings=settings,
        source=source.name,
        source_filter=source.filter.describe() if hasattr(source, "filter") else "none",
        backend=backend.describe(),
        reference_year=reference_year,
        plan=plan,
        subquery_results=subquery_results,
        query_hits=query_hits,
        seeds=seeds,
        nodes=nodes,
        claims=claims_for_trace,
        edges=edges,
        truncations=graph.truncations,
        budget=budget,
        ranking=ranking,
        results=results,
        timings={k: round(v, 6) for k, v in run.timings.items()},
        counters=run.counters,
        warnings=run.warnings,
        source_stats=run_source_stats,
        created_at=now.isoformat(timespec="seconds"),
    )
    trace.run_id = stable_hash([q, trace.settings.__dict__, trace.source, trace.source_filter, trace.backend,
                                reference_year])[:16]
    return trace
