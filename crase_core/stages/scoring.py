"""Stage 2b: claims per paper (paper Eq. 1) and the entailment matrix of each citation edge (Eq. 2).

Everything goes through :class:`~crase_core.component_cache.ComponentCache` (cached, counted) in
batches of :data:`BATCH`; progress is reported between batches.
"""

from __future__ import annotations

from ..component_cache import ComponentCache, Edge
from ..records import Budget, ClaimSet, EdgeMatrix
from .budget import CachedWork
from .expansion import Expansion
from .progress import ProgressFn, emit

BATCH = 256  # items per model batch; progress is reported between batches


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
    for start in range(0, len(scorable), BATCH):
        batch = scorable[start : start + BATCH]
        for e, em in zip(batch, components.score(claims, batch), strict=True):
            matrices[e] = em
        emit(progress, "entailment", len(edges) - len(scorable) + start + len(batch), len(edges),
             "scoring citation edges")
    return matrices
