"""The model-backed components (planner, claim extractor, entailment scorer) behind the result cache.

:class:`ComponentCache` is the one place that (de)serialises plans, claim sets
and edge matrices for :class:`~crase_core.cache.ResultCache`, validates what it
reads back (a corrupt entry is a miss, recomputed and overwritten), decides
what is cached, and adds every call, token, hit, miss, failure and repair to
one :class:`~crase_core.records.Counters`.

Caching rule: a result is cached when the model answered usably, and also when
it answered *unusably after its retries* (an error starting with
:data:`OUTPUT_FAILURE_PREFIX`): asking again gets the same answer from the same
model and prompt, so a repeated query costs no new call. Transport failures
(timeouts, 5xx, refused connections) are never cached.

Keys are ``kind|identity|…`` (see :mod:`crase_core.cache`); ``identity`` names
the component and its prompt/algorithm version, so changing either misses.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .backends import ModelBackend
from .cache import ResultCache, result_key, stable_hash
from .records import CLAIM_TYPES, Claim, ClaimSet, Counters, EdgeMatrix, Paper, PlanResult, Usage

log = logging.getLogger(__name__)

Edge = tuple[str, str]

#: Errors that mean "the model answered, unusably, after its retries". They are results like any
#: other (asking again gets the same answer from the same model and prompt), so they are cached and a
#: repeated query costs no new call. Transport errors (timeouts, 5xx, refused) are not cached.
OUTPUT_FAILURE_PREFIX = "model output:"


def is_output_failure(error: object) -> bool:
    """True for a model-output failure (cached), False for no error or a transport failure (not cached)."""
    return isinstance(error, str) and error.startswith(OUTPUT_FAILURE_PREFIX)


# ---- keys (byte-identical to the keys of earlier versions: existing caches stay valid) ---------------------
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


# ---- (de)serialisation -----------------------------------------------------------------------------------
def plan_to_cache(plan: PlanResult) -> dict[str, Any] | None:
    """The cache value of a fresh plan; None when it must not be cached (transport failure, empty plan)."""
    if plan.error:
        if is_output_failure(plan.error):
            return {"subqueries": [], "error": plan.error, "notes": list(plan.notes)}
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


def claimset_to_cache(cs: ClaimSet) -> dict[str, Any]:
    """The cache value of a claim set (claims as 5-item lists)."""
    return {
        "claims": [[c.id, c.type, c.text, c.source_phrase, c.verbatim] for c in cs.claims],
        "title_only": cs.title_only,
        "notes": list(cs.notes),
        **({"error": cs.error} if cs.error else {}),
    }


def claimset_from_cache(paper_id: str, identity: str, value: object) -> ClaimSet | None:
    """A cached claim set, or None when the entry is corrupt (a miss)."""
    if not isinstance(value, dict):
        return None
    try:
        if is_output_failure(value.get("error")) and value.get("claims") == []:
            return ClaimSet(paper_id, [], identity, error=value["error"], notes=list(value.get("notes", [])),
                            cached=True)
        claims = [Claim(i, t, x, s, bool(v)) for i, t, x, s, v in value["claims"]]
        if not claims or any(c.type not in CLAIM_TYPES or not isinstance(c.text, str) for c in claims):
            return None
        return ClaimSet(paper_id, claims, identity, bool(value.get("title_only")), None,
                        list(value.get("notes", [])), cached=True)
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


def matrix_to_cache(em: EdgeMatrix) -> object | None:
    """The cache value of a fresh matrix: the rows, ``{"error": …}`` for an output failure, else None."""
    if em.error:
        return {"error": em.error} if is_output_failure(em.error) else None
    return em.matrix


def matrix_from_cache(value: object, n_u: int, n_v: int, identity: str) -> EdgeMatrix | None:
    """A cached n_u × n_v matrix with values in [0, 1] (or a cached output failure); None if corrupt."""
    if isinstance(value, dict) and is_output_failure(value.get("error")):
        return EdgeMatrix([], identity, error=value["error"], cached=True)
    if not isinstance(value, list) or len(value) != n_u or any(not isinstance(r, list) or len(r) != n_v for r in value):
        return None
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    if arr.shape != (n_u, n_v) or not np.isfinite(arr).all() or (arr < 0).any() or (arr > 1).any():
        return None
    return EdgeMatrix(value, identity, cached=True)


class ComponentCache:
    """Plan per query, claims per paper, matrix per edge: from the cache when it holds them, else from
    the backend (and then into the cache), with every cost added to ``counters``.

    ``cache`` may be None (nothing is read or written; every item counts as a miss).
    """

    def __init__(self, backend: ModelBackend, cache: ResultCache | None, counters: Counters | None = None):
        self.backend = backend
        self.cache = cache
        self.counters = counters if counters is not None else Counters()
        self._digests: dict[str, tuple[ClaimSet, str]] = {}

    @property
    def scorer_identity(self) -> str:
        return self.backend.scorer.identity

    # ---- plan -------------------------------------------------------------------------------------------
    def plan(self, query: str, L: int) -> PlanResult:
        """The plan of ``query`` (at most ``L`` sub-queries; possibly none, with ``error`` set)."""
        identity = self.backend.planner.identity
        key = plan_key(identity, query, L)
        plan = plan_from_cache(query, L, identity, self._get([key]).get(key))
        if plan is not None:
            self.counters.cache_hits += 1
            self.counters.failures += 1 if plan.error else 0
            return plan
        plan = self.backend.planner.plan(query, L)
        plan.subqueries = plan.subqueries[:L]
        self.counters.cache_misses += 1
        self._charge(plan.usage, plan.error, ())  # (repairs of a plan are not counted, as before)
        value = plan_to_cache(plan)
        if value is not None:
            self._set({key: value})
        return plan

    # ---- claims -----------------------------------------------------------------------------------------
    def cached_claims(self, papers: Sequence[Paper]) -> dict[str, ClaimSet]:
        """The claim sets the cache holds for ``papers`` (by paper id); corrupt entries are left out."""
        identity = self.backend.extractor.identity
        keys = {p.id: claims_key(identity, p) for p in papers}
        raw = self._get(keys.values())
        found: dict[str, ClaimSet] = {}
        for pid, key in keys.items():
            if key not in raw:
                continue
            cs = claimset_from_cache(pid, identity, raw[key])
            if cs is None:
                log.warning("corrupt cached claims for %s; recomputing", pid)
                continue
            found[pid] = cs
        self.counters.cache_hits += len(found)
        self.counters.failures += sum(1 for cs in found.values() if cs.error)
        return found

    def extract(self, papers: Sequence[Paper]) -> list[ClaimSet]:
        """Extract the claims of ``papers`` (one backend batch), cache them, count the cost."""
        identity = self.backend.extractor.identity
        results = self.backend.extractor.extract_many(list(papers))
        self.counters.cache_misses += len(papers)
        fresh: dict[str, Any] = {}
        for paper, cs in zip(papers, results, strict=True):
            self._charge(cs.usage, cs.error, cs.notes)
            if not cs.error or is_output_failure(cs.error):
                fresh[claims_key(identity, paper)] = claimset_to_cache(cs)
        self._set(fresh)
        return results

    # ---- matrices ---------------------------------------------------------------------------------------
    def cached_matrices(self, claims: Mapping[str, ClaimSet], edges: Sequence[Edge]) -> dict[Edge, EdgeMatrix]:
        """The matrices the cache holds for ``edges`` (both ends in ``claims``); corrupt ones left out."""
        identity = self.scorer_identity
        keys = {e: self._matrix_key(claims, e) for e in edges}
        raw = self._get(keys.values())
        found: dict[Edge, EdgeMatrix] = {}
        for e, key in keys.items():
            if key not in raw:
                continue
            em = matrix_from_cache(raw[key], len(claims[e[0]].claims), len(claims[e[1]].claims), identity)
            if em is None:
                log.warning("corrupt cached matrix for %s→%s; recomputing", *e)
                continue
            found[e] = em
        self.counters.cache_hits += len(found)
        self.counters.failures += sum(1 for em in found.values() if em.error)
        return found

    def score(self, claims: Mapping[str, ClaimSet], edges: Sequence[Edge]) -> list[EdgeMatrix]:
        """Score ``edges`` (one backend batch; both ends must have claims), cache, count the cost."""
        results = self.backend.scorer.score_many([(claims[u].claims, claims[v].claims) for u, v in edges])
        self.counters.cache_misses += len(edges)
        fresh: dict[str, Any] = {}
        for e, em in zip(edges, results, strict=True):
            self._charge(em.usage, em.error, em.notes)
            value = matrix_to_cache(em)
            if value is not None:
                fresh[self._matrix_key(claims, e)] = value
        self._set(fresh)
        return results

    # ---- internals --------------------------------------------------------------------------------------
    def _charge(self, usage: Usage, error: str | None, notes: Sequence[str]) -> None:
        """Add one backend result's cost: at least one call, its tokens, a failure, a repair."""
        self.counters.model_calls += max(1, usage.calls)
        self.counters.prompt_tokens += usage.prompt_tokens
        self.counters.completion_tokens += usage.completion_tokens
        if error:
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
        return matrix_key(self.scorer_identity, (), (), digests=(self._digest(claims[e[0]]), self._digest(claims[e[1]])))

    def _get(self, keys: Any) -> dict[str, Any]:
        return self.cache.get_many(keys) if self.cache is not None else {}

    def _set(self, items: dict[str, Any]) -> None:
        if self.cache is not None:
            self.cache.set_many(items)
