"""How a run's cost reads: model calls and tokens when a model ran, scoring operations when it did not.

The offline backend (keyword planner, extractive claims, lexical support scorer) runs no model, so its
1 + |V| + |E| units of work are *scoring operations*, not model calls, and it has no tokens or price.
Which backend ran is in the trace's ``backend`` description (``{"backend": "offline", …}``). Pure
functions returning plain text (no markup): the CLI prints it, the app escapes it.
"""

from __future__ import annotations

from collections.abc import Mapping

from crase_core.records import Budget, Counters

OFFLINE_BACKENDS = frozenset({"offline"})


def uses_model(backend: Mapping[str, str]) -> bool:
    """Whether the backend described by ``backend`` (``ModelBackend.describe()``) calls a model."""
    return str(backend.get("backend", "")) not in OFFLINE_BACKENDS


def unit(model: bool, n: int | None = None) -> str:
    """``model calls`` / ``scoring operations`` (singular when ``n == 1``)."""
    if model:
        return "model call" if n == 1 else "model calls"
    return "scoring operation" if n == 1 else "scoring operations"


def similarity_ran(backend: Mapping[str, str] | None) -> bool:
    """Whether the offline backend described by ``backend`` scored claims by claim similarity (the on-device
    MiniLM, ``support_scorer`` similarity) rather than word overlap."""
    return str((backend or {}).get("scorer", "")).startswith("claim-similarity")


def budget_parts(budget: Budget, model: bool, backend: Mapping[str, str] | None = None) -> str:
    """``1 plan + 58 claim extractions (|V|) + 120 entailment matrices (|E|)`` (offline: word-overlap support or,
    when ``backend`` says so, claim-similarity matrices)."""
    matrices = ("entailment matrices" if model else
                "claim-similarity matrices" if similarity_ran(backend) else "word-overlap support matrices")
    return (f"{budget.plan_calls:,} plan + {budget.claim_calls:,} claim extractions (|V|) + "
            f"{budget.entailment_calls:,} {matrices} (|E|)")


def budget_summary(budget: Budget, model: bool, backend: Mapping[str, str] | None = None) -> str:
    """One sentence: the total 1 + |V| + |E| in the right unit, what is cached and what is left to do
    (``backend``: the run's description, which names its offline scorer)."""
    left = "new calls" if model else "to compute"
    who = ("" if model else "; offline backend: the on-device MiniLM, no model endpoint" if similarity_ran(backend)
           else "; offline backend: no model runs")
    return (f"{budget.total:,} {unit(model, budget.total)} = {budget_parts(budget, model, backend)}; "
            f"{budget.cached:,} already cached → {budget.to_call:,} {left}{who}")


def cost_summary(counters: Counters, model: bool) -> str:
    """What the run did: model calls and tokens when a model ran, else scoring operations (no tokens)."""
    if model:
        return (f"{counters.model_calls:,} {unit(True, counters.model_calls)}, {counters.prompt_tokens:,} + "
                f"{counters.completion_tokens:,} tokens")
    return f"{counters.model_calls:,} {unit(False, counters.model_calls)} (offline backend: no model calls, no tokens)"
