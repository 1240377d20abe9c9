"""The Search page's "Estimate budget" button: the exact model-call budget of a query, before running it."""

from __future__ import annotations

from typing import Any

from crase_core.errors import InputError
from crase_core.records import Budget


class _BudgetKnown(Exception):
    def __init__(self, budget: Budget):
        self.budget = budget


def probe_budget(query: str, engine: Any, settings: Any) -> Budget:
    """The run's exact model-call budget (1 + |V| + |E|, less cached), without extracting or scoring.

    Runs the pipeline's plan, seed and expansion stages (the plan is cached, so
    the real run does not pay for it twice) and stops at the first ``claims``
    progress event, which carries the budget.
    """
    from crase_core.pipeline import run_query  # local: pipeline imports are heavy

    def stop(event: Any) -> None:
        budget = getattr(event, "budget", None)
        if budget is not None:
            raise _BudgetKnown(budget)

    try:
        run_query(query, engine, settings.replace(max_model_calls=None), progress=stop)
    except _BudgetKnown as known:
        return known.budget
    raise InputError("the pipeline finished without reporting a budget")  # pragma: no cover
