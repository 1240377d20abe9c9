"""Stage 2b: claims per paper (paper Eq. 1) and the entailment matrix of each citation edge (Eq. 2).

Everything goes through :class:`~crase_core.component_cache.ComponentCache` (cached, counted) in
batches of :data:`BATCH`; progress is reported between batches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..cache import result_key
from ..component_cache import CACHED_FAILURE_NOTE, ComponentCache, Edge, key_identity
from ..errors import ModelError
from ..records import MODEL, OFFLINE, Budget, ClaimSet, EdgeMatrix, RankedPaper, SearchHit, Seed
from ..settings import PipelineSettings
from ..spend import SpendMeter, is_budget_failure
from .budget import CachedWork, describe_budget, item_tokens
from .expansion import Expansion
from .progress import ProgressFn, emit

BATCH = 256  # items per model batch; progress is reported between batches
#: edges per batch of an offline scorer: it vectorises a whole batch, so per-batch set-up (claim texts, term
#: matrices) is paid 16× less often than with model-sized batches (0.55 → ~0.2 s per default query)
OFFLINE_BATCH = BATCH * 16


def extract_claims(expansion: Expansion, cached: CachedWork, budget: Budget, components: ComponentCache,
                   progress: ProgressFn | None = None) -> dict[str, ClaimSet]:
    """The claim set of every node of V (in V's order): cached ones, the rest extracted."""
    nodes = expansion.graph.nodes
    claims = dict(cached.claims)
    todo = [expansion.papers[n] for n in nodes if n not in claims]
    emit(progress, "claims", 0, len(nodes), f"{len(claims)} cached, {len(todo)} to extract", budget)
    for start in range(0, len(todo), BATCH):
        batch = todo[start : start + BATCH]
        for paper, cs in zip(batch, components.extract(batch), strict=True):
            claims[paper.id] = cs
        emit(progress, "claims", len(claims), len(nodes), "extracting claims")
    return {n: claims[n] for n in nodes}


def score_edges(expansion: Expansion, claims: dict[str, ClaimSet], cached: CachedWork, components: ComponentCache,
                progress: ProgressFn | None = None) -> dict[Edge, EdgeMatrix]:
    """The matrix of every edge of E: cached ones, the rest scored.

    An edge touching a paper without claims cannot be scored: it gets an empty matrix with an error
    (Δ = 0) and costs no model call.
    """
    edges = expansion.graph.edges
    matrices = dict(cached.matrices)
    matrices.update(components.cached_matrices(
        claims, [(u, v) for u, v in edges if u not in cached.claims or v not in cached.claims]))
    todo = [e for e in edges if e not in matrices]
    scorable = [e for e in todo if claims[e[0]].claims and claims[e[1]].claims]
    for u, v in todo:
        if not (claims[u].claims and claims[v].claims):
            bad = u if not claims[u].claims else v
            why = claims[bad].error or "no claims"
            matrices[(u, v)] = EdgeMatrix([], components.scorer_identity, error=f"paper {bad} has no claims ({why})")
    emit(progress, "entailment", len(edges) - len(scorable), len(edges), f"{len(scorable)} edges to score")
    size = BATCH if getattr(components.backend.scorer, "metered", False) else OFFLINE_BATCH
    for start in range(0, len(scorable), size):
        batch = scorable[start : start + size]
        for e, em in zip(batch, components.score(claims, batch), strict=True):
            matrices[e] = em
        emit(progress, "entailment", len(edges) - len(scorable) + start + len(batch), len(edges),
             "scoring citation edges")
    return matrices


# ---- the cascade: offline everywhere, the model where it changes the answer --------------------------------

ROUND_MIN = 16  # model items per cascade round at least (re-ranking between rounds costs milliseconds)


@dataclass
class Scored:
    """Stage 2b's output: claims per node, a matrix per edge, and who decided each edge and why.

    ``scorers[e]`` = ("model" | "offline", reason). ``model_items`` = model items asked this run
    (claims + matrices, cached ones excluded); ``model_failed`` = of them unusable (decided offline).
    """

    claims: dict[str, ClaimSet]
    matrices: dict[Edge, EdgeMatrix]
    scorers: dict[Edge, tuple[str, str]]
    model_items: int = 0
    model_failed: int = 0
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def decision_margin(matrix: Sequence[Sequence[float]], theta: float, tau: float) -> float:
    """How close an edge's decision is to flipping: min over claims of |max_j M_ij − θ|, and |Δ − τ| when τ > 0.

    1.0 for an empty matrix (nothing the model could move).
    """
    if not matrix or not matrix[0]:
        return 1.0
    best = [max(row) for row in matrix]
    margin = min(abs(b - theta) for b in best)
    if tau > 0:
        delta = sum(b >= theta for b in best) / len(best)
        margin = min(margin, abs(delta - tau))
    return margin


def edge_priority(edges: Sequence[Edge], results: Sequence[RankedPaper], matrices: Mapping[Edge, EdgeMatrix],
                  settings: PipelineSettings) -> list[tuple[Edge, str]]:
    """``edges`` in the order the model should decide them, each with why (paper-facing text).

    1. the edges of the evidence trails of the current top-k results, in result order;
    2. the other edges touching a top-k result, by result rank, closest decision first;
    3. every other edge, closest decision to θ/τ first (:func:`decision_margin`).

    The margin is read at the model's θ (``settings.theta``), not at ``theta_lexical``: the question is
    which edges the model's answer, which is read at θ, might decide differently from the offline one.
    """
    wanted = set(edges)
    out: list[tuple[Edge, str]] = []
    seen: set[Edge] = set()
    margin = {e: decision_margin(matrices[e].matrix, settings.theta, settings.tau) if e in matrices else 1.0
              for e in edges}
    for r in results:
        for step in r.trail:
            e = (step.source, step.target) if step.along_citation else (step.target, step.source)
            if e in wanted and e not in seen:
                seen.add(e)
                out.append((e, f"on the evidence trail of result #{r.rank}"))
    rank = {r.paper_id: r.rank for r in results}
    touching = sorted((e for e in edges if e not in seen and (e[0] in rank or e[1] in rank)),
                      key=lambda e: (min(rank.get(e[0], 10**9), rank.get(e[1], 10**9)), margin[e]))
    for e in touching:
        seen.add(e)
        r_ = min(rank.get(e[0], 10**9), rank.get(e[1], 10**9))
        out.append((e, f"touches result #{r_} (decision margin {margin[e]:.2f})"))
    rest = sorted((e for e in edges if e not in seen), key=lambda e: margin[e])
    out += [(e, f"decision margin {margin[e]:.2f} from θ/τ") for e in rest]
    return out


def _estimate(components: ComponentCache, kind: str, size: int = 0) -> int:
    """Estimated tokens of one model item (for admission with a token budget): see :data:`ITEM_TOKENS`."""
    return item_tokens(kind, size)


#: cited papers per grouped call when the scorer does not say (:data:`crase_core.llm.components.MAX_GROUP_EDGES`)
DEFAULT_GROUP_SIZE = 8


def group_size(components: ComponentCache) -> int:
    """Edges one matrix call decides at most: 1 for a per-edge scorer, its ``group_size`` for a grouped one."""
    scorer = components.backend.scorer
    return int(getattr(scorer, "group_size", DEFAULT_GROUP_SIZE)) if getattr(scorer, "grouped", False) else 1


def edge_groups(edges: Sequence[Edge], size: int) -> list[list[Edge]]:
    """``edges`` in matrix-call units: by citing paper in first-seen order, chunks of at most ``size``
    (the grouping :func:`crase_core.llm.components.group_pairs` makes of the same list; ``size`` 1: one
    edge per call)."""
    groups: list[list[Edge]] = []
    open_group: dict[str, list[Edge]] = {}
    for e in edges:
        g = open_group.get(e[0])
        if g is None or len(g) >= size:
            g = []
            groups.append(g)
            open_group[e[0]] = g
        g.append(e)
    return groups


def matrix_tokens(n_edges: int, grouped: bool) -> int:
    """Estimated tokens of one matrix call deciding ``n_edges`` edges (see :data:`ITEM_TOKENS`)."""
    if not grouped:
        return n_edges * item_tokens("matrix", 16)
    return item_tokens("group", 16) + (n_edges - 1) * item_tokens("group_edge", 16)


def spend_record_key(components: ComponentCache, expansion: Expansion, settings: PipelineSettings,
                     seeds: Sequence[Seed], query_hits: Sequence[SearchHit]) -> str:
    """Cache key of the record of what a limited run asked the model (:func:`cascade`): the components'
    identities, the settings (``retry_failures`` aside), the graph, the seeds and the query's hits."""
    b = components.backend
    values = {k: v for k, v in vars(settings).items() if k != "retry_failures"}
    graph = expansion.graph
    ids = "|".join(key_identity(c) for c in (b.planner, b.extractor, b.scorer))
    return result_key("spend", ids, [
        values, sorted(graph.nodes), sorted(graph.edges), [s_.paper_id for s_ in seeds],
        [h.paper_id for h in query_hits]])


def _tokens_fit(meter: SpendMeter, tokens: int) -> bool:
    left = meter.remaining_tokens()
    return left is None or tokens <= left


def cascade(expansion: Expansion, cached: CachedWork, components: ComponentCache, settings: PipelineSettings,
            seeds: Sequence[Seed], query_hits: Sequence[SearchHit], reference_year: int,
            progress: ProgressFn | None = None, budget: Budget | None = None, *, query: str) -> Scored:
    """Stage 2b with a paid model and its offline fallback, inside the run's budget (``query``: the
    question, for the interim rankings).

    The offline extractor and scorer decide every paper and edge first. Then, in rounds, the graph
    is pruned and ranked with the current decisions, the undecided edges are ordered by
    :func:`edge_priority`, and the model is asked about the first ones the remaining budget affords
    (an edge costs one call, plus one per end whose model claims are not known yet). An edge the
    model scored is decided by the model; every other edge by the offline scorer on the paper's
    final claims. Cached model answers are free and always used. A model failure (claims or
    matrix) falls back to the offline decision and is recorded.
    """
    from .pruning import prune_graph  # local: pruning/ranking import nothing from here, but keep the
    from .ranking import rank_papers  # stage modules independent at import time

    fallback = components.fallback
    assert fallback is not None, "cascade() needs a backend with an offline fallback"
    meter = components.meter
    graph, papers = expansion.graph, expansion.papers
    nodes, edges = graph.nodes, graph.edges
    offline_claims = {cs.paper_id: cs for cs in fallback.extractor.extract_many([papers[n] for n in nodes])}
    model_claims = {n: cs for n, cs in cached.claims.items() if cs.claims and not cs.error}
    claim_failed = {n: cs for n, cs in cached.claims.items() if not cs.claims or cs.error}
    model_mats: dict[Edge, EdgeMatrix] = {e: em for e, em in cached.matrices.items() if not em.error}
    mat_failed: dict[Edge, EdgeMatrix] = {e: em for e, em in cached.matrices.items() if em.error}
    why: dict[Edge, str] = {e: "cached model answer (free)" for e in model_mats}
    asked = failed = 0
    failures: list[str] = []
    offline_mats: dict[Edge, EdgeMatrix] = {}
    offline_for: dict[Edge, tuple[int, int]] = {}  # the claim sets an offline matrix was computed on

    def current(n: str) -> ClaimSet:
        return model_claims.get(n) or offline_claims[n]

    def refresh_offline() -> None:
        todo = [e for e in edges if e not in model_mats
                and offline_for.get(e) != (id(current(e[0])), id(current(e[1])))]
        scorable = [e for e in todo if current(e[0]).claims and current(e[1]).claims]
        for e in todo:
            if e not in scorable:
                offline_mats[e] = EdgeMatrix([], fallback.scorer.identity, error="a paper of this edge has no claims")
                offline_for[e] = (id(current(e[0])), id(current(e[1])))
        for start in range(0, len(scorable), OFFLINE_BATCH):
            batch = scorable[start: start + OFFLINE_BATCH]
            pairs = [(current(u).claims, current(v).claims) for u, v in batch]
            for e, em in zip(batch, fallback.scorer.score_many(pairs), strict=True):
                offline_mats[e] = em
                offline_for[e] = (id(current(e[0])), id(current(e[1])))

    def matrices() -> dict[Edge, EdgeMatrix]:
        return {e: model_mats.get(e) or offline_mats[e] for e in edges}

    if budget is not None:  # shown before any model call (the CLI prints events with done == total)
        emit(progress, "claims", 0, 0, describe_budget(budget), budget)
    emit(progress, "claims", 0, len(nodes), f"{len(model_claims)} model claim sets cached; offline claims for all",
         budget)
    limited = meter.limited
    size = group_size(components)
    priority_of: dict[Edge, tuple[int, str]] = {}
    endpoint_failure: str | None = None
    # a limited run records the edges it asked about; the same query with the same settings asks only them
    # again (their cached answers are free; what failed in transit is asked again), so a rerun costs no call
    # for what was answered and never buys new decisions
    record_key = (spend_record_key(components, expansion, settings, seeds, query_hits)
                  if limited and components.cache is not None else None)
    recorded: set[Edge] | None = None
    if record_key is not None:
        raw = components.cache.get_many([record_key]).get(record_key) if components.cache is not None else None
        if isinstance(raw, dict) and isinstance(raw.get("edges"), list):
            wanted = set(edges)
            recorded = {(str(x[0]), str(x[1])) for x in raw["edges"]
                        if isinstance(x, list) and len(x) == 2} & wanted
    while True:
        refresh_offline()
        open_edges = [e for e in edges if e not in model_mats and e not in mat_failed
                      and e[0] not in claim_failed and e[1] not in claim_failed
                      and (recorded is None or e in recorded)]
        if not open_edges or meter.admit([0]) == 0:
            break
        if limited:
            pruning = prune_graph(expansion, matrices(), seeds, settings, reference_year,
                                  scorers={e: (MODEL if e in model_mats else OFFLINE, "") for e in edges})
            ranked = rank_papers(expansion, pruning, seeds, query_hits, settings, query=query)
            order = edge_priority(open_edges, ranked.results, matrices(), settings)
            remaining = meter.remaining_calls()
            round_calls = remaining if remaining is None or remaining <= 2 * ROUND_MIN else max(ROUND_MIN, remaining // 2)
        else:
            order = [(e, "no budget limit") for e in open_edges]
            round_calls = None
        # pick edges while their calls (1 + ends still without model claims; with a grouped scorer an edge
        # joining a call of its citing paper chosen in this round costs no call) fit this round
        chosen: list[Edge] = []
        need: list[str] = []
        need_set: set[str] = set()
        tokens = 0
        spent = 0
        fill: dict[str, int] = {}  # edges chosen per citing paper in this round (grouped calls)
        for e, reason in order:
            new = list(dict.fromkeys(n for n in e if n not in model_claims and n not in need_set))
            joins = size > 1 and fill.get(e[0], 0) % size != 0
            cost = (0 if joins else 1) + len(new)
            if round_calls is not None and spent + cost > round_calls:
                if spent:
                    break
                continue  # an edge that alone does not fit: try a cheaper one
            item_cost = len(new) * _estimate(components, "claims") + (
                _estimate(components, "group_edge", 16) if joins else matrix_tokens(1, size > 1))
            if not _tokens_fit(meter, tokens + item_cost):
                break
            tokens += item_cost
            spent += cost
            fill[e[0]] = fill.get(e[0], 0) + 1
            chosen.append(e)
            priority_of.setdefault(e, (len(priority_of) + 1, reason))
            for n in new:
                need_set.add(n)
                need.append(n)
        if not chosen:
            break
        calls_at_start = meter.calls
        # the round's matrix calls are kept for the matrices: claims that need retries (a small model often
        # does) may spend later rounds' calls, never these (else no edge of the round would be decided)
        cap, matrix_calls = meter.max_calls, spent - len(need)
        try:
            if need:
                for start in range(0, len(need), BATCH):
                    todo_papers = [papers[n] for n in need[start: start + BATCH]]
                    if cap is not None:
                        meter.max_calls = max(meter.calls, cap - matrix_calls)
                    try:
                        extracted = components.extract(todo_papers)
                    finally:
                        meter.max_calls = cap
                    for paper, cs in zip(todo_papers, extracted, strict=True):
                        if is_budget_failure(cs.error):
                            continue
                        asked += 1
                        if cs.claims and not cs.error:
                            model_claims[paper.id] = cs
                        else:
                            failed += 1
                            claim_failed[paper.id] = cs
                            failures.append(f"claims of {paper.id}: {cs.error or 'no claims'}")
                emit(progress, "claims", len(model_claims), len(nodes), "model claims")
            ready = [e for e in chosen if e[0] in model_claims and e[1] in model_claims and e not in model_mats]
            # the cache may already hold matrices for new claim pairs (another query asked them)
            for e, em in components.cached_matrices(model_claims, ready).items():
                (mat_failed if em.error else model_mats)[e] = em
                why.setdefault(e, "cached model answer (free)")
            ready = [e for e in ready if e not in model_mats and e not in mat_failed]
            # whole calls only: the groups of ready edges (one edge each per-edge) the budget admits
            units = edge_groups(ready, size)
            n_ok = meter.admit([matrix_tokens(len(g), size > 1) for g in units])
            ready = [e for g in units[:n_ok] for e in g]
            for start in range(0, len(ready), BATCH):
                edge_batch = ready[start: start + BATCH]
                for e, em in zip(edge_batch, components.score(model_claims, edge_batch), strict=True):
                    if is_budget_failure(em.error):
                        continue
                    asked += 1
                    if em.error:
                        failed += 1
                        mat_failed[e] = em
                        failures.append(f"matrix {e[0]}→{e[1]}: {em.error}")
                    else:
                        model_mats[e] = em
                emit(progress, "entailment", len(model_mats), len(edges), "model matrices")
        except ModelError as err:
            # the endpoint died (refused connections, or failures in a row): keep what was answered, decide
            # the rest offline, say so; a rerun asks only what has no answer (transport failures are not cached)
            endpoint_failure = str(err)
            failures.append(f"the model endpoint failed mid-run: {err}")
            break
        if meter.calls == calls_at_start:
            break  # the meter refused every call of this round: the budget is spent
    refresh_offline()
    if record_key is not None and components.cache is not None:
        # asked (answered, unusable, failed in transit) or lost to a dying endpoint: not what the budget refused
        asked_edges = {e for e in priority_of if e in model_mats or e in mat_failed or e[0] in claim_failed
                       or e[1] in claim_failed or endpoint_failure is not None} | (recorded or set())
        asked_edges |= {e for e in edges if e in model_mats and why.get(e, "").startswith("cached")}
        components.cache.set_many({record_key: {"edges": sorted([list(e) for e in asked_edges])}})

    scorers: dict[Edge, tuple[str, str]] = {}
    for e in edges:
        rank_reason = priority_of.get(e)
        picked = "" if not rank_reason else (f"priority #{rank_reason[0]}: {rank_reason[1]}" if limited
                                             else rank_reason[1])
        if e in model_mats:
            scorers[e] = (MODEL, why.get(e) or picked or "asked")
        elif e in mat_failed:
            em = mat_failed[e]
            scorers[e] = (OFFLINE, f"the model's answer was unusable ({em.error}); offline decision"
                          + (f"; {CACHED_FAILURE_NOTE}" if em.cached else "") + (f" [{picked}]" if picked else ""))
        elif e[0] in claim_failed or e[1] in claim_failed:
            bad = e[0] if e[0] in claim_failed else e[1]
            cs = claim_failed[bad]
            scorers[e] = (OFFLINE, f"the model gave no usable claims for {bad} "
                          f"({cs.error or 'no claims'}); offline decision"
                          + (f"; {CACHED_FAILURE_NOTE}" if cs.cached else ""))
        elif endpoint_failure is not None and picked:
            scorers[e] = (OFFLINE, f"the model endpoint failed mid-run before answering ({endpoint_failure}); "
                          f"offline decision [{picked}]")
        elif limited:
            scorers[e] = (OFFLINE, "outside the model budget" + (f" (was {picked}; the budget ran out)" if picked else
                                                                  ": lower priority than the edges the model decided"))
        else:
            scorers[e] = (OFFLINE, "not asked")
    final_claims: dict[str, ClaimSet] = {}
    for n in nodes:
        if n in model_claims:
            final_claims[n] = model_claims[n]
        else:
            cs = offline_claims[n]
            if n in claim_failed:
                cs.notes.append(f"the model's claims failed ({claim_failed[n].error or 'no claims'}): offline claims used")
            final_claims[n] = cs
    warnings: list[str] = []
    n_model = sum(1 for s, _ in scorers.values() if s == MODEL)
    limit = " and ".join(x for x in (f"{meter.max_calls:,} calls" if meter.max_calls is not None else "",
                                     f"{meter.max_tokens:,} tokens" if meter.max_tokens is not None else "") if x)
    if n_model < len(edges):
        warnings.append(f"the model decided {n_model:,} of {len(edges):,} edges"
                        + (f" (budget {limit}; {meter.calls:,} calls spent)" if limit else "")
                        + "; the offline scorer decided the rest (each edge's 'scorer' says which)")
    if endpoint_failure is not None:
        lost = sum(1 for s_, r in scorers.values() if r.startswith("the model endpoint failed mid-run"))
        warnings.append(f"the model endpoint failed mid-run, so the model was asked nothing more: {endpoint_failure}. "
                        f"{lost:,} edge(s) it was about to decide were decided offline (each edge's 'scorer' says "
                        "so); a rerun asks only what has no answer")
    item_failures = [f for f in failures if not f.startswith("the model endpoint failed mid-run")]
    if failed and item_failures:
        warnings.append(f"{failed} of {asked} model items were unusable and were decided offline; first: "
                        f"{item_failures[0]}")
    reused = sum(1 for cs in claim_failed.values() if cs.cached) + sum(1 for em in mat_failed.values() if em.cached)
    if reused:
        warnings.append(f"{reused} model item(s) reuse a {CACHED_FAILURE_NOTE}")
    if asked and failed * 2 > asked:
        warnings.append(MOSTLY_FAILED_WARNING.format(failed=failed, asked=asked))
    emit(progress, "entailment", len(edges), len(edges), f"{n_model} edges by the model, {len(edges) - n_model} offline")
    return Scored(final_claims, matrices(), scorers, asked, failed, failures, warnings)


MOSTLY_FAILED_WARNING = ("most model answers failed ({failed} of {asked} items): this ranking rests on offline "
                         "decisions for them. Check the endpoint, then rerun with --retry-failures")


def legacy_scorers(edges: Sequence[Edge], matrices: Mapping[Edge, EdgeMatrix], backend_name: str) -> dict[Edge, tuple[str, str]]:
    """Who decided each edge when the backend has no offline fallback: all by the backend itself."""
    if backend_name == "offline":
        return {e: (OFFLINE, "offline backend") for e in edges}
    return {e: (MODEL, "model backend without an offline cascade"
                + (f"; failed: {matrices[e].error}" if matrices[e].error else "")) for e in edges}


def legacy_scored(claims: dict[str, ClaimSet], matrices: dict[Edge, EdgeMatrix], edges: Sequence[Edge],
                  backend_name: str) -> Scored:
    """:class:`Scored` for a backend without fallback, with its failure count and warning."""
    scored = Scored(claims, matrices, legacy_scorers(edges, matrices, backend_name))
    if backend_name == "offline":
        return scored
    items: list[tuple[str, str | None]] = [(f"claims of {n}", cs.error) for n, cs in claims.items() if not cs.cached]
    items += [(f"matrix {u}→{v}", em.error) for (u, v), em in matrices.items()
              if not em.cached and not (em.error or "").startswith("paper ")]
    items = [(what, err) for what, err in items if not is_budget_failure(err)]
    bad = [f"{what}: {err}" for what, err in items if err]
    scored.model_items, scored.model_failed, scored.failures = len(items), len(bad), bad
    if bad and 2 * len(bad) > len(items):
        scored.warnings.append(MOSTLY_FAILED_WARNING.format(failed=len(bad), asked=len(items)))
    return scored
