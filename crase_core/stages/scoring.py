"""Stage 2b: claims per paper (paper Eq. 1) and the entailment matrix of each citation edge (Eq. 2).

A backend with an offline fallback (a paid model) runs the budgeted cascade instead
(:mod:`crase_core.stages.cascade`). Everything goes through :class:`~crase_core.component_cache.ComponentCache` (cached, counted) in
batches of :data:`BATCH`; progress is reported between batches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from crase_core.component_cache import ComponentCache, Edge
from crase_core.llm.spend import is_budget_failure
from crase_core.records import MODEL, OFFLINE, SIMILARITY, Budget, ClaimSet, EdgeMatrix
from crase_core.stages.budget import CachedWork
from crase_core.stages.expansion import Expansion
from crase_core.stages.progress import ProgressFn, emit

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


# ---- what stage 2b hands on ------------------------------------------------------------------------

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


MOSTLY_FAILED_WARNING = ("most model answers failed ({failed} of {asked} items): this ranking rests on offline "
                         "decisions for them. Check the endpoint, then rerun with --retry-failures")


def legacy_scorers(edges: Sequence[Edge], matrices: Mapping[Edge, EdgeMatrix], backend_name: str,
                   support: str = OFFLINE) -> dict[Edge, tuple[str, str]]:
    """Who decided each edge when the backend has no offline fallback: all by the backend itself (the offline
    backend's: its ``support`` scorer, word overlap or claim similarity)."""
    if backend_name == "offline":
        return {e: (support, "offline backend" + (", claim similarity" if support == SIMILARITY else ""))
                for e in edges}
    return {e: (MODEL, "model backend without an offline cascade"
                + (f"; failed: {matrices[e].error}" if matrices[e].error else "")) for e in edges}


def legacy_scored(claims: dict[str, ClaimSet], matrices: dict[Edge, EdgeMatrix], edges: Sequence[Edge],
                  backend_name: str, support: str = OFFLINE) -> Scored:
    """:class:`Scored` for a backend without fallback, with its failure count and warning."""
    scored = Scored(claims, matrices, legacy_scorers(edges, matrices, backend_name, support))
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
