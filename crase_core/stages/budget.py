"""The run's model-call budget 1 + |V| + |E| (paper App. A), less what the cache already holds,
and what the per-query limit (``llm_budget`` / ``llm_token_budget``) lets the model do of it.

Known after expansion and before any claim or matrix is computed: the claims of
every node and the matrices of the edges whose two claim sets are cached are
read (not just probed) here, and the scoring stage reuses them. The estimate of
tokens and time uses :data:`ITEM_TOKENS` (measured means of the shipped prompts,
docs/llm_backend.md) and :data:`TOKENS_PER_SECOND` (a rough single-GPU server);
what a run really spent is recorded in the same :class:`Budget` afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crase_core.component_cache import ComponentCache, Edge
from crase_core.errors import BudgetExceeded
from crase_core.records import Budget, ClaimSet, EdgeMatrix, PlanResult
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.expansion import Expansion

#: estimated tokens (prompt + completion) of one model item: (fixed, per matrix cell). Measured on the
#: embedded corpus with the shipped prompts (docs/llm_backend.md, "Tokens per item").
#: ``group``: a grouped call's first edge (instructions + citing claims + one block); ``group_edge``: each
#: further cited paper in the same call (its block and its scores).
ITEM_TOKENS: dict[str, tuple[int, int]] = {"plan": (280, 0), "claims": (950, 0), "matrix": (340, 8),
                                           "group": (340, 8), "group_edge": (110, 8)}
#: share of a limited budget the cascade spends on claims (the rest on matrices), measured.
CLAIM_SHARE = 0.4
#: (prompt, completion) tokens per second of one request slot, for the time estimate (a 7–8B model on
#: one GPU; a 135M model on 1 CPU thread is ≈ (300, 70)).
TOKENS_PER_SECOND = (2000.0, 40.0)
COMPLETION_SHARE = {"plan": 0.08, "claims": 0.3, "matrix": 0.1}


def item_tokens(kind: str, cells: int = 0) -> int:
    """Estimated tokens of one model item of ``kind`` (plan, claims, matrix with ``cells`` scores)."""
    base, per = ITEM_TOKENS[kind]
    return base + per * cells


def estimate_spend(budget: Budget, todo: dict[str, int], limit_calls: int | None, limit_tokens: int | None) -> None:
    """Fill ``budget``'s limit, planned calls and estimated tokens/seconds (before the run).

    ``todo``: uncached model items by kind (plan, claims, matrix). Without a limit every item is
    planned; with one, the plan first, then claims and matrices in the measured ratio
    :data:`CLAIM_SHARE`, capped by the token limit.
    """
    budget.limit_calls, budget.limit_tokens = limit_calls, limit_tokens
    items = dict(todo)
    if limit_calls is not None:
        rest = max(0, limit_calls - items["plan"])
        if rest < items["claims"] + items["matrix"]:
            items["claims"] = min(items["claims"], round(rest * CLAIM_SHARE))
            items["matrix"] = min(items["matrix"], rest - items["claims"])
    tokens = {k: n * item_tokens(k, 16 if k == "matrix" else 0) for k, n in items.items()}
    planned = sum(items.values())
    total = sum(tokens.values())
    if limit_tokens is not None and total > limit_tokens:
        scale = limit_tokens / total
        tokens = {k: int(v * scale) for k, v in tokens.items()}
        planned = int(planned * scale)
    completion = sum(int(v * COMPLETION_SHARE[k]) for k, v in tokens.items())
    budget.planned_calls = planned
    budget.est_completion_tokens = completion
    budget.est_prompt_tokens = sum(tokens.values()) - completion
    budget.est_seconds = round(budget.est_prompt_tokens / TOKENS_PER_SECOND[0]
                               + completion / TOKENS_PER_SECOND[1], 1)


def describe_budget(b: Budget) -> str:
    """One line for a person deciding whether to run: the limit, what it allows, estimated tokens and time."""
    exact = f"1 + |V| + |E| = {b.total:,} model items, {b.cached:,} cached, {b.to_call:,} to ask"
    if b.limit_calls is None and b.limit_tokens is None:
        head = f"model budget: no limit; {exact}"
    else:
        limits = " and ".join(x for x in (f"{b.limit_calls:,} calls" if b.limit_calls is not None else "",
                                          f"{b.limit_tokens:,} tokens" if b.limit_tokens is not None else "") if x)
        head = f"model budget: {limits}; {exact}; the model is asked ≤ {b.planned_calls:,}, the offline " \
               "components decide the rest"
    return (f"{head}; estimated {b.est_prompt_tokens + b.est_completion_tokens:,} tokens, "
            f"≈ {b.est_seconds:,.0f} s at {TOKENS_PER_SECOND[0]:,.0f}/{TOKENS_PER_SECOND[1]:,.0f} "
            "prompt/completion tokens per second")


@dataclass
class CachedWork:
    """What the cache holds for this graph before scoring: claim sets by paper, matrices by edge."""

    claims: dict[str, ClaimSet] = field(default_factory=dict)
    matrices: dict[Edge, EdgeMatrix] = field(default_factory=dict)


def count_budget(plan: PlanResult, expansion: Expansion, components: ComponentCache) -> tuple[Budget, CachedWork]:
    """The exact budget of the run (one plan call, |V| claim calls, |E| matrix calls, less cached), with the
    run's limit and its estimate (:func:`estimate_spend`) when the backend has an offline fallback."""
    graph = expansion.graph
    claims = components.cached_claims([expansion.papers[n] for n in graph.nodes])
    matrices = components.cached_matrices(claims, [(u, v) for u, v in graph.edges if u in claims and v in claims])
    n_cached = (1 if plan.cached else 0) + len(claims) + len(matrices)
    total = 1 + len(graph.nodes) + len(graph.edges)
    budget = Budget(total, 1, len(graph.nodes), len(graph.edges), n_cached, total - n_cached)
    meter = components.meter
    limited = components.fallback is not None and meter.limited
    todo = {"plan": 0 if plan.cached else 1, "claims": len(graph.nodes) - len(claims),
            "matrix": len(graph.edges) - len(matrices)}
    estimate_spend(budget, todo, meter.max_calls if limited else None, meter.max_tokens if limited else None)
    return budget, CachedWork(claims, matrices)


def check_budget(budget: Budget, settings: PipelineSettings) -> None:
    """Raise :class:`BudgetExceeded` when the calls the run will make exceed ``settings.max_model_calls``
    (the uncached calls, or with a per-query model budget the calls it allows)."""
    limited = budget.limit_calls is not None or budget.limit_tokens is not None
    needed = budget.planned_calls if limited else budget.to_call
    if settings.max_model_calls is not None and needed > settings.max_model_calls:
        raise BudgetExceeded(
            f"this query needs {budget.to_call:,} model calls (1 + |V| {budget.claim_calls:,} + |E| "
            f"{budget.entailment_calls:,}, less {budget.cached:,} cached) but the cap is {settings.max_model_calls:,}. "
            "Lower m, L or hops, or raise the cap."
        )
