"""The run's model-call budget 1 + |V| + |E| (paper App. A), less what the cache already holds.

Known after expansion and before any claim or matrix is computed: the claims of
every node and the matrices of the edges whose two claim sets are cached are
read (not just probed) here, and the scoring stage reuses them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..component_cache import ComponentCache, Edge
from ..errors import BudgetExceeded
from ..records import Budget, ClaimSet, EdgeMatrix, PlanResult
from ..settings import PipelineSettings
from .expansion import Expansion


@dataclass
class CachedWork:
    """What the cache holds for this graph before scoring: claim sets by paper, matrices by edge."""

    claims: dict[str, ClaimSet] = field(default_factory=dict)
    matrices: dict[Edge, EdgeMatrix] = field(default_factory=dict)


def count_budget(plan: PlanResult, expansion: Expansion, components: ComponentCache) -> tuple[Budget, CachedWork]:
    """The exact budget of the run (one plan call, |V| claim calls, |E| matrix calls, less cached)."""
    graph = expansion.graph
    claims = components.cached_claims([expansion.papers[n] for n in graph.nodes])
    matrices = components.cached_matrices(claims, [(u, v) for u, v in graph.edges if u in claims and v in claims])
    n_cached = (1 if plan.cached else 0) + len(claims) + len(matrices)
    total = 1 + len(graph.nodes) + len(graph.edges)
    budget = Budget(total, 1, len(graph.nodes), len(graph.edges), n_cached, total - n_cached)
    return budget, CachedWork(claims, matrices)


def check_budget(budget: Budget, settings: PipelineSettings) -> None:
    """Raise :class:`BudgetExceeded` when the uncached calls exceed ``settings.max_model_calls``."""
    if settings.max_model_calls is not None and budget.to_call > settings.max_model_calls:
        raise BudgetExceeded(
            f"this query needs {budget.to_call:,} model calls (1 + |V| {budget.claim_calls:,} + |E| "
            f"{budget.entailment_calls:,}, less {budget.cached:,} cached) but the cap is {settings.max_model_calls:,}. "
            "Lower m, L or hops, or raise the cap."
        )
