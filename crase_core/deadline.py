"""A run's overall deadline: a monotonic clock every stage and every external call checks.

:func:`running` makes a :class:`Deadline` the current one for the calling
context (a :class:`contextvars.ContextVar`, so it follows ``asyncio`` tasks
created inside it; code that hands work to another thread should run it in
``contextvars.copy_context()``). The pipeline checks it before every stage
and at every progress event (between batches); an external client caps its
own per-call deadline with :func:`call_budget`, so no single call outlives
the run. A run past its deadline raises :class:`DeadlineExceeded`, naming
the stage it reached; work already finished stays in the caches, so a
rerun resumes from it.
"""

from __future__ import annotations

import contextvars
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from crase_core.errors import CraseError


class DeadlineExceeded(CraseError):
    """The run went past its overall deadline (``--deadline``)."""


@dataclass
class Deadline:
    """``seconds`` from creation on the monotonic clock (None: no deadline); ``stage`` is where the run is."""

    seconds: float | None
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)
    stage: str = "start"
    started: float = field(init=False)

    def __post_init__(self) -> None:
        if self.seconds is not None and not (math.isfinite(self.seconds) and self.seconds > 0):
            raise ValueError(f"a deadline must be a positive finite number of seconds (got {self.seconds!r})")
        self.started = self.clock()

    @property
    def ends_at(self) -> float | None:
        """The monotonic time it expires (None: never)."""
        return None if self.seconds is None else self.started + self.seconds

    def remaining(self) -> float | None:
        """Seconds left (never negative); None when there is no deadline."""
        if self.seconds is None:
            return None
        return max(0.0, self.started + self.seconds - self.clock())

    def expired(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0.0

    def error(self, stage: str | None = None) -> DeadlineExceeded:
        """The one-line error for a run stopped at this deadline in ``stage`` (default: the current stage)."""
        return DeadlineExceeded(
            f"the run stopped at its deadline of {self.seconds:g} s (--deadline) in stage '{stage or self.stage}'; "
            "work finished so far is kept in the cache, so rerunning (with a longer --deadline) resumes from it")

    def check(self, stage: str | None = None) -> None:
        """Record ``stage`` as where the run is, then raise :class:`DeadlineExceeded` if time is up."""
        if stage is not None:
            self.stage = stage
        if self.expired():
            raise self.error()

    def cap(self, seconds: float) -> float:
        """``seconds`` limited to what is left; raises :class:`DeadlineExceeded` when nothing is left."""
        left = self.remaining()
        if left is None:
            return seconds
        if left <= 0.0:
            raise self.error()
        return min(seconds, left)


_CURRENT: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("crase_deadline", default=None)


def current() -> Deadline | None:
    """The deadline of the run in progress in this context, if any."""
    return _CURRENT.get()


def remaining() -> float | None:
    """Seconds left to the current run (None: no deadline, or no run in progress)."""
    d = _CURRENT.get()
    return None if d is None else d.remaining()


def call_budget(seconds: float) -> float:
    """The time one external call may take: ``seconds``, capped by the current run's deadline.

    Raises :class:`DeadlineExceeded` when the run has no time left. This is the hook for clients
    (Semantic Scholar, the model endpoint): ``total = deadline.call_budget(settings.timeout)``.
    """
    d = _CURRENT.get()
    return seconds if d is None else d.cap(seconds)


def check(stage: str | None = None) -> None:
    """:meth:`Deadline.check` on the current deadline (nothing when there is none)."""
    d = _CURRENT.get()
    if d is not None:
        d.check(stage)


@contextmanager
def running(seconds: float | None) -> Iterator[Deadline | None]:
    """Make a deadline of ``seconds`` current for the block (an enclosing earlier one is kept).

    ``None`` adds no deadline (an enclosing one still applies). Yields the deadline in force.
    """
    outer = _CURRENT.get()
    if seconds is None or (outer is not None and outer.ends_at is not None
                           and outer.ends_at <= time.monotonic() + seconds):
        yield outer
        return
    token = _CURRENT.set(Deadline(seconds))
    try:
        yield _CURRENT.get()
    finally:
        _CURRENT.reset(token)
