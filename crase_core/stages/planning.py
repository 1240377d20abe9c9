"""Stage 1a: the research plan — up to L keyword sub-queries for the query (DESIGN.md, paper §3.1)."""

from __future__ import annotations

from dataclasses import dataclass, field

from crase_core.component_cache import ComponentCache
from crase_core.records import PlanResult
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.progress import ProgressFn, emit


@dataclass
class Planning:
    """The plan (never without a sub-query) and what went wrong making it."""

    plan: PlanResult
    warnings: list[str] = field(default_factory=list)


def subquery_limit(planner: object, settings: PipelineSettings) -> int:
    """How many sub-queries ``planner`` may plan: ``settings.L_offline`` for an offline planner (one whose
    ``offline`` attribute is true: the keyword and phrase planners), ``settings.L`` for a model's."""
    return settings.L_offline if getattr(planner, "offline", False) else settings.L


def plan_query(query: str, components: ComponentCache, settings: PipelineSettings,
               progress: ProgressFn | None = None) -> Planning:
    """Plan ``query`` (cached per query and L) with at most :func:`subquery_limit` sub-queries. A failed or
    empty plan falls back to the query itself."""
    emit(progress, "plan", 0, 1, "planning sub-queries")
    plan = components.plan(query, subquery_limit(components.backend.planner, settings))
    warnings: list[str] = []
    if plan.error:
        warnings.append(f"planner failed{' (cached answer)' if plan.cached else ''}: {plan.error}")
    if not plan.subqueries:
        # A planner that produced nothing still leaves the query itself to search for.
        plan.subqueries = [query]
        plan.notes.append("no sub-queries were planned; the query itself is the only sub-query")
    emit(progress, "plan", 1, 1, f"{len(plan.subqueries)} sub-queries")
    return Planning(plan, warnings)
