"""Progress events of a run: one :class:`StageEvent` per step of a stage (re-exported by ``pipeline``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from crase_core.records import Budget

STAGES = ("plan", "seeds", "expansion", "claims", "entailment", "pruning", "ranking")


@dataclass
class StageEvent:
    """Progress of one stage: ``done`` of ``total`` items (total 0 = indeterminate)."""

    stage: str
    done: int
    total: int
    message: str = ""
    budget: Budget | None = None  # set on the first "claims" event: known before any claim/matrix call


ProgressFn = Callable[[StageEvent], None]


def emit(progress: ProgressFn | None, stage: str, done: int, total: int, message: str = "",
         budget: Budget | None = None) -> None:
    """Report one event to ``progress`` (nothing when it is None)."""
    if progress is not None:
        progress(StageEvent(stage, done, total, message, budget))
