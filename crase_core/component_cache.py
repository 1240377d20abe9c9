"""The model-backed components (planner, claim extractor, entailment scorer) behind the result cache.

:class:`ComponentCache` is the one place that (de)serialises plans, claim sets
and edge matrices for :class:`~crase_core.cache.ResultCache`, validates what it
reads back (a corrupt entry is a miss, recomputed and overwritten), decides
what is cached, and adds every call, token, hit, miss, failure and repair to
one :class:`~crase_core.records.Counters`.

Caching rule: a result is cached when the model answered usably, and also when
it answered *unusably after its retries* (an error starting with
:data:`OUTPUT_FAILURE_PREFIX`): asking again usually gets the same answer from
the same model and prompt, so a repeated query costs no new call. A cached
failure is stored with the time it happened and is told apart from an answer
(``cached`` and the ``"model output:"`` error; the cascade says so in the edge's reason): it expires after
:data:`FAILURE_TTL_S`, and ``retry_failures=True`` (``--retry-failures``) asks
again regardless, so a fixed server is used at once. Transport failures
(timeouts, 5xx, refused connections) and items the budget did not reach
(``"budget: …"``) are never cached.

Budget: every model call goes through the run's :class:`~crase_core.llm.spend.SpendMeter`
(components that declare ``metered`` check each HTTP attempt themselves; for the
others each item's reported calls are charged after the fact).

Keys are ``kind|identity|…`` (see :mod:`crase_core.cache`); the key's identity is the component's
:func:`key_identity`: its ``identity`` (the component and its prompt/algorithm version) and, for a
model-backed one, a digest of everything else that shapes its answers (the endpoint's URL, the model,
the temperature, how JSON is asked: ``LLMSettings.answer_settings``, what the eval pins), so changing
any of them misses — two endpoints that report the same model name never share an answer.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import math
import sys
import time
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any

from crase_core.backends import ModelBackend
from crase_core.cache import ResultCache, result_key, stable_hash
from crase_core.errors import ModelError
from crase_core.llm.spend import SpendMeter, is_budget_failure
from crase_core.records import CLAIM_TYPES, Claim, ClaimSet, Counters, EdgeMatrix, Paper, PlanResult, Usage

log = logging.getLogger(__name__)

Edge = tuple[str, str]

#: Errors that mean "the model answered, unusably, after its retries". They are results like any
#: other (asking again gets the same answer from the same model and prompt), so they are cached and a
#: repeated query costs no new call. Transport errors (timeouts, 5xx, refused) are not cached.
OUTPUT_FAILURE_PREFIX = "model output:"


#: a cached unusable answer is asked again after this many seconds (a server may have been fixed).
FAILURE_TTL_S = 24 * 3600.0
#: how a reused cached failure is described (the trace marks it with ``cached`` and its ``model output:`` error)
CACHED_FAILURE_NOTE = ("cached unusable answer from an earlier run (asked again after 24 h, or at once with "
                       "--retry-failures)")


def is_output_failure(error: object) -> bool:
    """True for a model-output failure (cached), False for no error or a transport failure (not cached)."""
    return isinstance(error, str) and error.startswith(OUTPUT_FAILURE_PREFIX)


def failure_is_fresh(value: object, now: float, retry_failures: bool) -> bool:
    """Whether a cached failure may be reused: stamped, younger than :data:`FAILURE_TTL_S`, no retry asked."""
    if retry_failures or not isinstance(value, dict):
        return False
    at = value.get("failed_at")
    return isinstance(at, int | float) and not isinstance(at, bool) and 0 <= now - at < FAILURE_TTL_S




# ---- keys ------------------------------------------------------------------------------------------------
def key_identity(component: Any) -> str:
    """The identity a component's results are cached under: ``cache_identity`` when it has one (the
    model-backed components: identity + endpoint/model/settings digest), else its ``identity``."""
    return str(getattr(component, "cache_identity", None) or component.identity)


def plan_key(identity: str, query: str, L: int) -> str:
    """Cache key of the plan of ``query`` with at most ``L`` sub-queries by planner ``identity``."""
    return result_key("plan", identity, [query, L])


def claims_key(identity: str, paper: Paper) -> str:
    """Cache key of ``paper``'s claims by extractor ``identity`` (title and abstract are the input)."""
    return result_key("claims", identity, [paper.title, paper.abstract])


def claims_digest(claims: Sequence[Claim]) -> str:
    """Hash of a paper's claim texts in order (a matrix's rows/columns follow that order)."""
    return stable_hash([c.text for c in claims])


def matrix_key(identity: str, citing: Sequence[Claim], cited: Sequence[Claim], *,
               digests: tuple[str, str] | None = None) -> str:
    """Cache key of edge matrix ``citing × cited`` for scorer ``identity`` (digests may be precomputed)."""
    du, dv = digests or (claims_digest(citing), claims_digest(cited))
    return f"matrix|{identity}|{du}|{dv}"


def graph_matrices_key(identity: str, digests: Sequence[tuple[str, str]]) -> str:
    """Cache key of the matrices of a graph's edges, in order, each named by its ends' claim digests (the inputs
    of each edge's :func:`matrix_key`), for scorer ``identity``."""
    return result_key("matrices", identity, [f"{du}|{dv}" for du, dv in digests])


# ---- (de)serialisation -----------------------------------------------------------------------------------
def plan_to_cache(plan: PlanResult, now: float | None = None) -> dict[str, Any] | None:
    """The cache value of a fresh plan; None when it must not be cached (transport failure, empty plan)."""
    if plan.error:
        if is_output_failure(plan.error):
            return {"subqueries": [], "error": plan.error, "notes": list(plan.notes),
                    "failed_at": time.time() if now is None else now}
        return None
    if not plan.subqueries:
        return None
    return {"subqueries": list(plan.subqueries), "notes": list(plan.notes)}


def plan_from_cache(query: str, L: int, identity: str, value: object) -> PlanResult | None:
    """A cached plan (sub-queries cut to ``L``), or None when the entry is absent or corrupt."""
    if not isinstance(value, dict):
        return None
    subqueries, error, notes = value.get("subqueries"), value.get("error"), value.get("notes", [])
    if not isinstance(subqueries, list) or not all(isinstance(x, str) for x in subqueries):
        return None
    if error is not None and not isinstance(error, str):
        return None
    if not (subqueries or is_output_failure(error)) or not isinstance(notes, list):
        return None
    return PlanResult(query, subqueries[:L], identity, error=error, notes=list(notes), cached=True)


def claimset_to_cache(cs: ClaimSet, now: float | None = None) -> dict[str, Any]:
    """The cache value of a claim set (claims as 5-item lists; a failure with its time)."""
    return {
        "claims": [[c.id, c.type, c.text, c.source_phrase, c.verbatim] for c in cs.claims],
        "title_only": cs.title_only,
        "notes": list(cs.notes),
        **({"error": cs.error, "failed_at": time.time() if now is None else now} if cs.error else {}),
    }


def claimset_from_cache(paper_id: str, identity: str, value: object) -> ClaimSet | None:
    """A cached claim set, or None when the entry is corrupt (a miss)."""
    if not isinstance(value, dict):
        return None
    try:
        if is_output_failure(value.get("error")) and value.get("claims") == []:
            return ClaimSet(paper_id, [], identity, error=value["error"],
                            notes=list(value.get("notes", [])), cached=True)
        claims = [Claim(i, t, x, s, bool(v)) for i, t, x, s, v in value["claims"]]
        if not claims or any(c.type not in CLAIM_TYPES or not isinstance(c.text, str) for c in claims):
            return None
        return ClaimSet(paper_id, claims, identity, bool(value.get("title_only")), None,
                        list(value.get("notes", [])), cached=True)
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


def matrix_to_cache(em: EdgeMatrix, now: float | None = None) -> object | None:
    """The cache value of a fresh matrix: the rows, ``{"error", "failed_at"}`` for an output failure, else None."""
    if em.error:
        if is_output_failure(em.error):
            return {"error": em.error, "failed_at": time.time() if now is None else now}
        return None
    return em.matrix


def matrix_from_cache(value: object, n_u: int, n_v: int, identity: str) -> EdgeMatrix | None:
    """A cached n_u × n_v matrix with values in [0, 1] (or a cached output failure); None if corrupt."""
    if isinstance(value, dict) and is_output_failure(value.get("error")):
        return EdgeMatrix([], identity, error=value["error"], cached=True)
    if not isinstance(value, list) or len(value) != n_u:
        return None
    # a few calls in C per matrix (a cached run checks thousands of small ones; issue 31): every row a list of
    # n_v, then over all values min ≥ 0, max ≤ 1 and a finite sum (a value that is not a number fails to
    # compare: TypeError; NaN makes the sum NaN; ±inf falls outside [0, 1])
    try:
        if n_u and (set(map(type, value)) != {list} or set(map(len, value)) != {n_v}):
            return None
        flat = list(chain.from_iterable(value))
        if flat and not (min(flat) >= 0 and max(flat) <= 1 and not math.isnan(sum(flat))):
            return None
    except TypeError:
        return None
    return EdgeMatrix(value, identity, cached=True)


def graph_matrices_to_cache(matrices: Sequence[Sequence[Sequence[float]]]) -> dict[str, Any]:
    """The cache value of a graph's matrices, in edge order: every value, row by row, as little-endian float64
    bytes in base64 (read back in one go: a cached run of thousands of edges; issue 31)."""
    values = array("d", chain.from_iterable(chain.from_iterable(matrices)))
    if sys.byteorder == "big":
        values.byteswap()
    return {"float64": base64.b64encode(values.tobytes()).decode("ascii")}


def graph_matrices_from_cache(value: object, shapes: Sequence[tuple[int, int]]) -> list[list[list[float]]] | None:
    """The matrices of :func:`graph_matrices_to_cache`, cut into ``shapes`` (n_u × n_v per edge); None when the
    value is corrupt: not that value, another number of values, or one outside [0, 1] (NaN included)."""
    try:
        raw = base64.b64decode(value["float64"], validate=True)  # type: ignore[index]
        if len(raw) % 8:
            return None
        values = array("d")
        values.frombytes(raw)
    except (KeyError, TypeError, ValueError):
        return None
    if sys.byteorder == "big":
        values.byteswap()
    if len(values) != sum(n_u * n_v for n_u, n_v in shapes):
        return None
    flat = values.tolist()
    if flat and not (min(flat) >= 0.0 and max(flat) <= 1.0 and not math.isnan(sum(flat))):
        return None
    out, at = [], 0
    for n_u, n_v in shapes:
        out.append([flat[at + i * n_v:at + (i + 1) * n_v] for i in range(n_u)])
        at += n_u * n_v
    return out


class ComponentCache:
    """Plan per query, claims per paper, matrix per edge: from the cache when it holds them, else from
    the backend (and then into the cache), with every cost added to ``counters`` and ``meter``.

    ``cache`` may be None (nothing is read or written; every item counts as a miss). ``meter`` is the
    run's budget (default: no limit); ``retry_failures`` treats every cached failure as a miss;
    ``clock`` gives the time failures are stamped with and expire by.
    """

    def __init__(self, backend: ModelBackend, cache: ResultCache | None, counters: Counters | None = None, *,
                 meter: SpendMeter | None = None, retry_failures: bool = False,
                 clock: Callable[[], float] = time.time):
        self.backend = backend
        self.cache = cache
        self.counters = counters if counters is not None else Counters()
        self.meter = meter if meter is not None else SpendMeter()
        self.retry_failures = retry_failures
        self.clock = clock
        self._digests: dict[str, tuple[ClaimSet, str]] = {}

    @property
    def scorer_identity(self) -> str:
        return self.backend.scorer.identity

    @property
    def fallback(self) -> ModelBackend | None:
        return self.backend.fallback

    def _reusable(self, value: object, failed: bool) -> bool:
        return not failed or failure_is_fresh(value, self.clock(), self.retry_failures)

    # ---- plan -------------------------------------------------------------------------------------------
    def plan(self, query: str, L: int) -> PlanResult:
        """The plan of ``query`` (at most ``L`` sub-queries; possibly none, with ``error`` set).

        With a fallback backend: when the budget has no call left, or the model's plan failed, the
        fallback's plan is used (its ``error`` keeps what went wrong, its notes say so).
        """
        identity = self.backend.planner.identity
        key = plan_key(key_identity(self.backend.planner), query, L)
        raw = self._get([key]).get(key)
        plan = plan_from_cache(query, L, identity, raw)
        if plan is not None and self._reusable(raw, bool(plan.error)):
            self.counters.cache_hits += 1
            self.counters.failures += 1 if plan.error else 0
            return self._plan_fallback(plan, query, L)
        if self.fallback is not None and self.meter.admit([0]) == 0:
            plan = self.fallback.planner.plan(query, L)
            plan.subqueries = plan.subqueries[:L]
            plan.notes.append("the model budget allows no call: the offline planner made the plan")
            return plan
        planner: Any = self.backend.planner
        plan = planner.plan(query, L, meter=self.meter) if getattr(planner, "metered", False) else planner.plan(query, L)
        plan.subqueries = plan.subqueries[:L]
        self.counters.cache_misses += 1
        self._charge(plan.usage, plan.error, (), metered=getattr(planner, "metered", False))
        value = plan_to_cache(plan, self.clock())
        if value is not None:
            self._set({key: value})
        return self._plan_fallback(plan, query, L)

    def _plan_fallback(self, plan: PlanResult, query: str, L: int) -> PlanResult:
        if not plan.error or self.fallback is None:
            return plan
        offline = self.fallback.planner.plan(query, L)
        offline.subqueries = offline.subqueries[:L]
        offline.error, offline.cached = plan.error, plan.cached
        offline.notes = [*plan.notes, f"the model's plan failed: the offline planner ({offline.planner}) made it"]
        offline.usage = plan.usage
        return offline

    # ---- claims -----------------------------------------------------------------------------------------
    def cached_claims(self, papers: Sequence[Paper]) -> dict[str, ClaimSet]:
        """The claim sets the cache holds for ``papers`` (by paper id); corrupt entries and expired (or
        to-be-retried) failures are left out."""
        identity = self.backend.extractor.identity
        keys = {p.id: claims_key(key_identity(self.backend.extractor), p) for p in papers}
        raw = self._get(keys.values())
        found: dict[str, ClaimSet] = {}
        for pid, key in keys.items():
            if key not in raw:
                continue
            cs = claimset_from_cache(pid, identity, raw[key])
            if cs is None:
                log.warning("corrupt cached claims for %s; recomputing", pid)
                continue
            if not self._reusable(raw[key], bool(cs.error)):
                continue
            found[pid] = cs
        self.counters.cache_hits += len(found)
        self.counters.failures += sum(1 for cs in found.values() if cs.error)
        return found

    def extract(self, papers: Sequence[Paper]) -> list[ClaimSet]:
        """Extract the claims of ``papers`` (one backend batch), cache them, count the cost."""
        extractor: Any = self.backend.extractor
        metered = getattr(extractor, "metered", False)
        papers = list(papers)
        with self._lost_batch(metered):
            results = extractor.extract_many(papers, meter=self.meter) if metered else extractor.extract_many(papers)
        self.counters.cache_misses += len(papers)
        fresh: dict[str, Any] = {}
        for paper, cs in zip(papers, results, strict=True):
            self._charge(cs.usage, cs.error, cs.notes, metered=metered)
            if not cs.error or is_output_failure(cs.error):
                fresh[claims_key(key_identity(extractor), paper)] = claimset_to_cache(cs, self.clock())
        self._set(fresh)
        return results

    # ---- matrices ---------------------------------------------------------------------------------------
    def cached_matrices(self, claims: Mapping[str, ClaimSet], edges: Sequence[Edge]) -> dict[Edge, EdgeMatrix]:
        """The matrices the cache holds for ``edges`` (both ends in ``claims``); corrupt ones and expired
        (or to-be-retried) failures left out.

        All of them in one read when an earlier read found every one (then they are kept together too:
        :func:`graph_matrices_key`), else edge by edge."""
        identity = self.scorer_identity
        kid = key_identity(self.backend.scorer)
        of = {n: self._digest(claims[n]) for n in {n for e in edges for n in e}}
        digests = [(of[u], of[v]) for u, v in edges]
        together = graph_matrices_key(kid, digests)
        value = self._get([together]).get(together) if edges else None
        if value is not None:
            cache = self.cache
            rows = cache.checked_reading(together, value) if cache is not None else None  # read in this process
            if rows is None:
                rows = graph_matrices_from_cache(value, [(len(claims[u].claims), len(claims[v].claims))
                                                         for u, v in edges])
                if rows is not None and cache is not None:
                    cache.mark_checked(together, value, rows)
            if rows is not None:
                self.counters.cache_hits += len(edges)
                return {e: EdgeMatrix(m, identity, cached=True) for e, m in zip(edges, rows, strict=True)}
            log.warning("corrupt cached matrices of this graph; reading them edge by edge")
        found = self._cached_edges(claims, edges, digests)
        if edges and len(found) == len(edges) and not any(em.error for em in found.values()):
            rows = [found[e].matrix for e in edges]
            value = graph_matrices_to_cache(rows)
            self._set({together: value})
            if self.cache is not None:  # this process has its rows: the next run here need not decode them
                self.cache.mark_checked(together, value, rows)
        return found

    def _cached_edges(self, claims: Mapping[str, ClaimSet], edges: Sequence[Edge],
                      digests: Sequence[tuple[str, str]]) -> dict[Edge, EdgeMatrix]:
        """:meth:`cached_matrices` edge by edge (each edge's claim digests given)."""
        identity, kid = self.scorer_identity, key_identity(self.backend.scorer)
        keys = {e: matrix_key(kid, (), (), digests=d) for e, d in zip(edges, digests, strict=True)}
        raw = self._get(keys.values())
        found: dict[Edge, EdgeMatrix] = {}
        cache = self.cache
        for e, key in keys.items():
            if key not in raw:
                continue
            value = raw[key]
            if cache is not None and cache.is_checked(key, value):  # checked by an earlier run of this process
                found[e] = EdgeMatrix(value, identity, cached=True)
                continue
            em = matrix_from_cache(value, len(claims[e[0]].claims), len(claims[e[1]].claims), identity)
            if em is not None and not em.error and cache is not None:
                cache.mark_checked(key, value)
            if em is None:
                log.warning("corrupt cached matrix for %s→%s; recomputing", *e)
                continue
            if not self._reusable(raw[key], bool(em.error)):
                continue
            found[e] = em
        self.counters.cache_hits += len(found)
        self.counters.failures += sum(1 for em in found.values() if em.error)
        return found

    def score(self, claims: Mapping[str, ClaimSet], edges: Sequence[Edge]) -> list[EdgeMatrix]:
        """Score ``edges`` (one backend batch; both ends must have claims), cache, count the cost."""
        scorer: Any = self.backend.scorer
        metered = getattr(scorer, "metered", False)
        pairs = [(claims[u].claims, claims[v].claims) for u, v in edges]
        with self._lost_batch(metered):
            results = scorer.score_many(pairs, meter=self.meter) if metered else scorer.score_many(pairs)
        self.counters.cache_misses += len(edges)
        fresh: dict[str, Any] = {}
        for e, em in zip(edges, results, strict=True):
            self._charge(em.usage, em.error, em.notes, metered=metered)
            value = matrix_to_cache(em, self.clock())
            if value is not None:
                fresh[self._matrix_key(claims, e)] = value
        self._set(fresh)
        return results

    # ---- internals --------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _lost_batch(self, metered: bool) -> Iterator[None]:
        """Count the calls of a batch the endpoint's failure cut short (:class:`ModelError`): the meter saw
        them, its results are lost. Their settled tokens count as prompt tokens (their split is unknown)."""
        calls, tokens = self.meter.calls, self.meter.tokens
        try:
            yield
        except ModelError:
            if metered:
                self.counters.model_calls += self.meter.calls - calls
                self.counters.prompt_tokens += self.meter.tokens - tokens
            raise

    def _charge(self, usage: Usage, error: str | None, notes: Sequence[str], *, metered: bool = False) -> None:
        """Add one backend result's cost: its calls (at least one unless metered), tokens, a failure, a repair.

        A metered component charged the meter attempt by attempt already; for the others the meter is
        charged here. An item the budget did not reach is not a failure of the model.
        """
        calls = usage.calls if metered else max(1, usage.calls)
        self.counters.model_calls += calls
        self.counters.prompt_tokens += usage.prompt_tokens
        self.counters.completion_tokens += usage.completion_tokens
        if not metered:
            self.meter.calls += calls
            self.meter.tokens += usage.prompt_tokens + usage.completion_tokens
        if error and not is_budget_failure(error):
            self.counters.failures += 1
        if any("repair" in note for note in notes):
            self.counters.repairs += 1

    def _digest(self, cs: ClaimSet) -> str:
        memo = self._digests.get(cs.paper_id)
        if memo is not None and memo[0] is cs:
            return memo[1]
        digest = claims_digest(cs.claims)
        self._digests[cs.paper_id] = (cs, digest)
        return digest

    def _matrix_key(self, claims: Mapping[str, ClaimSet], e: Edge) -> str:
        return matrix_key(key_identity(self.backend.scorer), (), (), digests=(self._digest(claims[e[0]]), self._digest(claims[e[1]])))

    def _get(self, keys: Any) -> dict[str, Any]:
        return self.cache.get_many(keys) if self.cache is not None else {}

    def _set(self, items: dict[str, Any]) -> None:
        if self.cache is not None:
            self.cache.set_many(items)
