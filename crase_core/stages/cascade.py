"""Stage 2b with a paid model: the budgeted cascade (offline everywhere, the model where it changes the answer).

The offline extractor and scorer decide every paper and edge first. Then, in rounds, the undecided
edges are put in order by an injected :data:`Priority` (the pipeline's: prune and rank with the current
decisions, then :func:`edge_priority`), and the model is asked about the first ones the remaining budget
affords — an edge costs one call, plus one per end whose model claims are not known yet; with a grouped
scorer an edge joining a call of its citing paper in the same round costs none. An edge the model
scored is decided by the model; every other edge by the offline scorer on the paper's final claims.
Cached model answers are free and always used. A model failure (claims or matrix) falls back to the
offline decision and is recorded.

:class:`Cascade` holds one run's round state (:class:`CascadeState`) and reads as its steps:
:meth:`~Cascade.select` the round's edges, :meth:`~Cascade.ask` the model about them,
:meth:`~Cascade.attribute` every edge to the scorer that decided it, :meth:`~Cascade.warn` what the run
should say. :func:`cascade` runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from crase_core.cache import result_key
from crase_core.component_cache import CACHED_FAILURE_NOTE, ComponentCache, Edge, key_identity
from crase_core.errors import ModelError
from crase_core.llm.spend import SpendMeter, is_budget_failure
from crase_core.records import MODEL, OFFLINE, Budget, ClaimSet, EdgeMatrix, RankedPaper, SearchHit, Seed
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.budget import CachedWork, describe_budget, item_tokens
from crase_core.stages.expansion import Expansion
from crase_core.stages.progress import ProgressFn, emit
from crase_core.stages.scoring import BATCH, MOSTLY_FAILED_WARNING, OFFLINE_BATCH, Scored

ROUND_MIN = 16  # model items per cascade round at least (re-ranking between rounds costs milliseconds)
#: cited papers per grouped call when the scorer does not say (:data:`crase_core.llm.components.MAX_GROUP_EDGES`)
DEFAULT_GROUP_SIZE = 8

#: the order the model should decide the open edges in, each with why: called with the open edges, the
#: current matrix of every edge and who decides each edge now (``MODEL`` or ``OFFLINE``).
Priority = Callable[[Sequence[Edge], Mapping[Edge, EdgeMatrix], Mapping[Edge, str]], list[tuple[Edge, str]]]


# ---- pure helpers -------------------------------------------------------------------------------------

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


# ---- the round state and the steps ----------------------------------------------------------------------

@dataclass
class CascadeState:
    """What the cascade knows between rounds: the decided claims and matrices, the failures, the record."""

    offline_claims: dict[str, ClaimSet]
    model_claims: dict[str, ClaimSet]
    claim_failed: dict[str, ClaimSet]
    model_mats: dict[Edge, EdgeMatrix]
    mat_failed: dict[Edge, EdgeMatrix]
    why: dict[Edge, str]  # why a model matrix is known without asking (cached)
    offline_mats: dict[Edge, EdgeMatrix] = field(default_factory=dict)
    offline_for: dict[Edge, tuple[int, int]] = field(default_factory=dict)  # claim sets an offline matrix used
    priority_of: dict[Edge, tuple[int, str]] = field(default_factory=dict)  # (order asked, why) per chosen edge
    asked: int = 0
    failed: int = 0
    failures: list[str] = field(default_factory=list)
    endpoint_failure: str | None = None
    recorded: set[Edge] | None = None  # what an earlier run with this record asked (a rerun asks only these)


@dataclass
class RoundPick:
    """One round's choice: the edges to decide and the papers whose model claims they need first.

    ``calls`` = the round's planned calls (claims + matrix calls)."""

    edges: list[Edge]
    papers: list[str]
    calls: int


class Cascade:
    """One run's cascade over ``graph`` (the expansion) with ``components`` (a backend with a fallback)."""

    def __init__(self, graph: Expansion, cached: CachedWork, components: ComponentCache, settings: PipelineSettings,
                 priority: Priority, *, record_key: str | None = None, progress: ProgressFn | None = None):
        fallback = components.fallback
        assert fallback is not None, "the cascade needs a backend with an offline fallback"
        self.graph, self.components, self.settings, self.priority = graph, components, settings, priority
        self.fallback, self.meter, self.progress = fallback, components.meter, progress
        self.nodes, self.edges = graph.graph.nodes, graph.graph.edges
        self.size = group_size(components)
        self.record_key = record_key if self.meter.limited and components.cache is not None else None
        self.state = CascadeState(
            offline_claims={cs.paper_id: cs for cs in fallback.extractor.extract_many(
                [graph.papers[n] for n in self.nodes])},
            model_claims={n: cs for n, cs in cached.claims.items() if cs.claims and not cs.error},
            claim_failed={n: cs for n, cs in cached.claims.items() if not cs.claims or cs.error},
            model_mats={e: em for e, em in cached.matrices.items() if not em.error},
            mat_failed={e: em for e, em in cached.matrices.items() if em.error},
            why={e: "cached model answer (free)" for e, em in cached.matrices.items() if not em.error},
            recorded=self._read_record())

    # -- the run ----------------------------------------------------------------------------------------
    def run(self, budget: Budget | None = None) -> Scored:
        """Every round, then the attribution and the warnings (the stage's output)."""
        st = self.state
        if budget is not None:  # shown before any model call (the CLI prints events with done == total)
            emit(self.progress, "claims", 0, 0, describe_budget(budget), budget)
        emit(self.progress, "claims", 0, len(self.nodes),
             f"{len(st.model_claims)} model claim sets cached; offline claims for all", budget)
        while True:
            self.refresh_offline()
            pick = self.select()
            if pick is None:
                break
            calls_at_start = self.meter.calls
            if not self.ask(pick) or self.meter.calls == calls_at_start:
                break  # the endpoint died, or the meter refused every call of this round: the budget is spent
        self.refresh_offline()
        self._write_record()
        scorers = self.attribute()
        n_model = sum(1 for s, _ in scorers.values() if s == MODEL)
        emit(self.progress, "entailment", len(self.edges), len(self.edges),
             f"{n_model} edges by the model, {len(self.edges) - n_model} offline")
        return Scored(self.final_claims(), self.matrices(), scorers, st.asked, st.failed, st.failures,
                      self.warn(scorers))

    # -- decisions so far ------------------------------------------------------------------------------------
    def claims_of(self, n: str) -> ClaimSet:
        return self.state.model_claims.get(n) or self.state.offline_claims[n]

    def matrices(self) -> dict[Edge, EdgeMatrix]:
        st = self.state
        return {e: st.model_mats.get(e) or st.offline_mats[e] for e in self.edges}

    def refresh_offline(self) -> None:
        """Offline matrices for every edge the model has not decided, on its papers' current claims."""
        st = self.state
        todo = [e for e in self.edges if e not in st.model_mats
                and st.offline_for.get(e) != (id(self.claims_of(e[0])), id(self.claims_of(e[1])))]
        scorable = [e for e in todo if self.claims_of(e[0]).claims and self.claims_of(e[1]).claims]
        for e in todo:
            if e not in scorable:
                st.offline_mats[e] = EdgeMatrix([], self.fallback.scorer.identity,
                                                error="a paper of this edge has no claims")
                st.offline_for[e] = (id(self.claims_of(e[0])), id(self.claims_of(e[1])))
        for start in range(0, len(scorable), OFFLINE_BATCH):
            batch = scorable[start: start + OFFLINE_BATCH]
            pairs = [(self.claims_of(u).claims, self.claims_of(v).claims) for u, v in batch]
            for e, em in zip(batch, self.fallback.scorer.score_many(pairs), strict=True):
                st.offline_mats[e] = em
                st.offline_for[e] = (id(self.claims_of(e[0])), id(self.claims_of(e[1])))

    # -- step 1: select -----------------------------------------------------------------------------------
    def open_edges(self) -> list[Edge]:
        st = self.state
        return [e for e in self.edges if e not in st.model_mats and e not in st.mat_failed
                and e[0] not in st.claim_failed and e[1] not in st.claim_failed
                and (st.recorded is None or e in st.recorded)]

    def select(self) -> RoundPick | None:
        """The round's edges, in priority order, while their calls fit the round and their tokens the budget;
        None when nothing is open or the budget has no room."""
        open_edges = self.open_edges()
        if not open_edges or self.meter.admit([0]) == 0:
            return None
        if self.meter.limited:
            current = {e: MODEL if e in self.state.model_mats else OFFLINE for e in self.edges}
            order = self.priority(open_edges, self.matrices(), current)
            remaining = self.meter.remaining_calls()
            round_calls = (remaining if remaining is None or remaining <= 2 * ROUND_MIN
                           else max(ROUND_MIN, remaining // 2))
        else:
            order, round_calls = [(e, "no budget limit") for e in open_edges], None
        pick = self._fill(order, round_calls)
        return pick if pick.edges else None

    def _fill(self, order: Sequence[tuple[Edge, str]], round_calls: int | None) -> RoundPick:
        st, grouped = self.state, self.size > 1
        pick = RoundPick([], [], 0)
        need: set[str] = set()
        tokens = 0
        fill: dict[str, int] = {}  # edges chosen per citing paper in this round (grouped calls)
        for e, reason in order:
            new = list(dict.fromkeys(n for n in e if n not in st.model_claims and n not in need))
            joins = grouped and fill.get(e[0], 0) % self.size != 0
            cost = (0 if joins else 1) + len(new)
            if round_calls is not None and pick.calls + cost > round_calls:
                if pick.calls:
                    break
                continue  # an edge that alone does not fit: try a cheaper one
            item_cost = len(new) * item_tokens("claims") + (
                item_tokens("group_edge", 16) if joins else matrix_tokens(1, grouped))
            if not _tokens_fit(self.meter, tokens + item_cost):
                break
            tokens += item_cost
            pick.calls += cost
            fill[e[0]] = fill.get(e[0], 0) + 1
            pick.edges.append(e)
            st.priority_of.setdefault(e, (len(st.priority_of) + 1, reason))
            need.update(new)
            pick.papers += new
        return pick

    # -- step 2: ask ------------------------------------------------------------------------------------
    def ask(self, pick: RoundPick) -> bool:
        """Ask the model for the round's missing claims, then its matrices; False when the endpoint died
        (what was answered is kept, the rest is decided offline; transport failures are not cached)."""
        try:
            if pick.papers:
                self._ask_claims(pick.papers, matrix_calls=pick.calls - len(pick.papers))
            self._ask_matrices(pick.edges)
        except ModelError as err:
            self.state.endpoint_failure = str(err)
            self.state.failures.append(f"the model endpoint failed mid-run: {err}")
            return False
        return True

    def _ask_claims(self, need: Sequence[str], matrix_calls: int) -> None:
        # the round's matrix calls are kept for the matrices: claims that need retries (a small model often
        # does) may spend later rounds' calls, never these (else no edge of the round would be decided)
        st = self.state
        for start in range(0, len(need), BATCH):
            todo = [self.graph.papers[n] for n in need[start: start + BATCH]]
            with self.meter.keeping_back(matrix_calls):
                extracted = self.components.extract(todo)
            for paper, cs in zip(todo, extracted, strict=True):
                if is_budget_failure(cs.error):
                    continue
                st.asked += 1
                if cs.claims and not cs.error:
                    st.model_claims[paper.id] = cs
                else:
                    st.failed += 1
                    st.claim_failed[paper.id] = cs
                    st.failures.append(f"claims of {paper.id}: {cs.error or 'no claims'}")
        emit(self.progress, "claims", len(st.model_claims), len(self.nodes), "model claims")

    def _ask_matrices(self, chosen: Sequence[Edge]) -> None:
        st = self.state
        ready = [e for e in chosen if e[0] in st.model_claims and e[1] in st.model_claims and e not in st.model_mats]
        # the cache may already hold matrices for new claim pairs (another query asked them)
        for e, em in self.components.cached_matrices(st.model_claims, ready).items():
            (st.mat_failed if em.error else st.model_mats)[e] = em
            st.why.setdefault(e, "cached model answer (free)")
        ready = [e for e in ready if e not in st.model_mats and e not in st.mat_failed]
        units = edge_groups(ready, self.size)  # whole calls only: the groups the budget admits
        n_ok = self.meter.admit([matrix_tokens(len(g), self.size > 1) for g in units])
        ready = [e for g in units[:n_ok] for e in g]
        for start in range(0, len(ready), BATCH):
            batch = ready[start: start + BATCH]
            for e, em in zip(batch, self.components.score(st.model_claims, batch), strict=True):
                if is_budget_failure(em.error):
                    continue
                st.asked += 1
                if em.error:
                    st.failed += 1
                    st.mat_failed[e] = em
                    st.failures.append(f"matrix {e[0]}→{e[1]}: {em.error}")
                else:
                    st.model_mats[e] = em
            emit(self.progress, "entailment", len(st.model_mats), len(self.edges), "model matrices")

    # -- the record of what a limited run asked ----------------------------------------------------------
    def _read_record(self) -> set[Edge] | None:
        # a limited run records the edges it asked about; the same query with the same settings asks only them
        # again (their cached answers are free; what failed in transit is asked again), so a rerun costs no call
        # for what was answered and never buys new decisions
        cache = self.components.cache
        if self.record_key is None or cache is None:
            return None
        raw = cache.get_many([self.record_key]).get(self.record_key)
        if not (isinstance(raw, dict) and isinstance(raw.get("edges"), list)):
            return None
        return {(str(x[0]), str(x[1])) for x in raw["edges"] if isinstance(x, list) and len(x) == 2} & set(self.edges)

    def _write_record(self) -> None:
        st, cache = self.state, self.components.cache
        if self.record_key is None or cache is None:
            return
        # asked (answered, unusable, failed in transit) or lost to a dying endpoint: not what the budget refused
        asked = {e for e in st.priority_of if e in st.model_mats or e in st.mat_failed or e[0] in st.claim_failed
                 or e[1] in st.claim_failed or st.endpoint_failure is not None} | (st.recorded or set())
        asked |= {e for e in self.edges if e in st.model_mats and st.why.get(e, "").startswith("cached")}
        cache.set_many({self.record_key: {"edges": sorted([list(e) for e in asked])}})

    # -- step 3: attribute -------------------------------------------------------------------------------
    def attribute(self) -> dict[Edge, tuple[str, str]]:
        """Who decided each edge (``MODEL`` | ``OFFLINE``) and why, in words."""
        return {e: self._attribution(e) for e in self.edges}

    def _attribution(self, e: Edge) -> tuple[str, str]:
        st, limited = self.state, self.meter.limited
        rank_reason = st.priority_of.get(e)
        picked = "" if not rank_reason else (f"priority #{rank_reason[0]}: {rank_reason[1]}" if limited
                                             else rank_reason[1])
        if e in st.model_mats:
            return MODEL, st.why.get(e) or picked or "asked"
        if e in st.mat_failed:
            em = st.mat_failed[e]
            return OFFLINE, (f"the model's answer was unusable ({em.error}); offline decision"
                             + (f"; {CACHED_FAILURE_NOTE}" if em.cached else "") + (f" [{picked}]" if picked else ""))
        if e[0] in st.claim_failed or e[1] in st.claim_failed:
            bad = e[0] if e[0] in st.claim_failed else e[1]
            cs = st.claim_failed[bad]
            return OFFLINE, (f"the model gave no usable claims for {bad} ({cs.error or 'no claims'}); offline "
                             "decision" + (f"; {CACHED_FAILURE_NOTE}" if cs.cached else ""))
        if st.endpoint_failure is not None and picked:
            return OFFLINE, (f"the model endpoint failed mid-run before answering ({st.endpoint_failure}); "
                             f"offline decision [{picked}]")
        if limited:
            return OFFLINE, "outside the model budget" + (f" (was {picked}; the budget ran out)" if picked else
                                                          ": lower priority than the edges the model decided")
        return OFFLINE, "not asked"

    def final_claims(self) -> dict[str, ClaimSet]:
        """Each node's claims: the model's where usable, else the offline ones (noted when the model's failed)."""
        st = self.state
        out: dict[str, ClaimSet] = {}
        for n in self.nodes:
            if n in st.model_claims:
                out[n] = st.model_claims[n]
                continue
            cs = st.offline_claims[n]
            if n in st.claim_failed:
                cs.notes.append(f"the model's claims failed ({st.claim_failed[n].error or 'no claims'}): "
                                "offline claims used")
            out[n] = cs
        return out

    # -- step 4: warn --------------------------------------------------------------------------------------
    def warn(self, scorers: Mapping[Edge, tuple[str, str]]) -> list[str]:
        """What the run says about its model spend: who decided how much, a dying endpoint, failures."""
        st, meter = self.state, self.meter
        warnings: list[str] = []
        n_model = sum(1 for s, _ in scorers.values() if s == MODEL)
        limit = " and ".join(x for x in (f"{meter.max_calls:,} calls" if meter.max_calls is not None else "",
                                         f"{meter.max_tokens:,} tokens" if meter.max_tokens is not None else "") if x)
        if n_model < len(self.edges):
            warnings.append(f"the model decided {n_model:,} of {len(self.edges):,} edges"
                            + (f" (budget {limit}; {meter.calls:,} calls spent)" if limit else "")
                            + "; the offline scorer decided the rest (each edge's 'scorer' says which)")
        if st.endpoint_failure is not None:
            lost = sum(1 for _, r in scorers.values() if r.startswith("the model endpoint failed mid-run"))
            warnings.append(f"the model endpoint failed mid-run, so the model was asked nothing more: "
                            f"{st.endpoint_failure}. {lost:,} edge(s) it was about to decide were decided offline "
                            "(each edge's 'scorer' says so); a rerun asks only what has no answer")
        item_failures = [f for f in st.failures if not f.startswith("the model endpoint failed mid-run")]
        if st.failed and item_failures:
            warnings.append(f"{st.failed} of {st.asked} model items were unusable and were decided offline; first: "
                            f"{item_failures[0]}")
        reused = (sum(1 for cs in st.claim_failed.values() if cs.cached)
                  + sum(1 for em in st.mat_failed.values() if em.cached))
        if reused:
            warnings.append(f"{reused} model item(s) reuse a {CACHED_FAILURE_NOTE}")
        if st.asked and st.failed * 2 > st.asked:
            warnings.append(MOSTLY_FAILED_WARNING.format(failed=st.failed, asked=st.asked))
        return warnings


def cascade(graph: Expansion, cached: CachedWork, components: ComponentCache, settings: PipelineSettings,
            priority: Priority, *, seeds: Sequence[Seed], query_hits: Sequence[SearchHit],
            progress: ProgressFn | None = None, budget: Budget | None = None) -> Scored:
    """Stage 2b with a paid model and its offline fallback, inside the run's budget (see the module).

    ``priority`` orders the open edges of a limited run (the pipeline's prunes and ranks with the current
    decisions); ``seeds`` and ``query_hits`` name the run in the record of what it asked."""
    key = spend_record_key(components, graph, settings, seeds, query_hits)
    return Cascade(graph, cached, components, settings, priority, record_key=key, progress=progress).run(budget)
