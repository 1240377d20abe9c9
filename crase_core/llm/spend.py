"""The per-query model budget: calls and tokens a run may spend, enforced per HTTP attempt.

:class:`SpendMeter` holds one run's limits (``llm_budget`` calls, ``llm_token_budget`` tokens; None =
no limit) and what has been spent. Two layers keep a run inside its limits:

* **items** — the cascade (:mod:`crase_core.stages.scoring`) starts only as many model items as
  :meth:`SpendMeter.admit` allows (each needs at least one call and its estimated tokens);
* **attempts** — every HTTP attempt of the ``openai`` components goes through a
  :class:`MeteredUsage`: the client increments ``usage.calls`` before each attempt, retries
  included, and the meter refuses (raises :class:`BudgetSpent`) the attempt that would exceed a
  limit. The refused item fails with an error starting ``"budget:"`` and the offline component
  decides it.

Token limits are kept with reservations: an attempt reserves an upper bound of its cost (UTF-8
bytes of the prompt + a per-message margin + the completion cap); the answer's reported usage
replaces the reservation. A server that reports no usage is charged the reservation.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from crase_core.records import Usage

BUDGET_PREFIX = "budget:"
MESSAGE_MARGIN = 16  # tokens a chat template adds per message, at most (role markers, separators)


class BudgetSpent(Exception):
    """The run's model budget has no room for this attempt."""


def is_budget_failure(error: object) -> bool:
    """True when ``error`` says the item was not (fully) asked because the budget ran out."""
    return isinstance(error, str) and error.startswith(BUDGET_PREFIX)


def token_bound(messages: list[dict[str, str]], max_tokens: int) -> int:
    """An upper bound of one attempt's tokens: a BPE token covers ≥ 1 byte, plus template margins."""
    return sum(len(m.get("content", "").encode("utf-8")) + MESSAGE_MARGIN for m in messages) + max_tokens


@dataclass
class SpendMeter:
    """Calls and tokens one run may spend and has spent (thread-safe)."""

    max_calls: int | None = None
    max_tokens: int | None = None
    calls: int = 0
    tokens: int = 0
    reserved: int = 0
    refused: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _ceiling: int | None = field(default=None, repr=False, compare=False)  # see keeping_back()

    @property
    def limited(self) -> bool:
        return self.max_calls is not None or self.max_tokens is not None

    def _cap(self) -> int | None:
        """The calls that may be spent now: ``max_calls``, lower inside :meth:`keeping_back`."""
        return self._ceiling if self._ceiling is not None else self.max_calls

    def remaining_calls(self) -> int | None:
        cap = self._cap()
        return None if cap is None else max(0, cap - self.calls)

    @contextmanager
    def keeping_back(self, calls: int) -> Iterator[None]:
        """Within the block, ``calls`` of the remaining calls are kept for later (the cascade keeps a round's
        matrix calls while it asks for that round's claims): at most max(spent, max_calls − calls) are spent."""
        if self.max_calls is None:
            yield
            return
        with self._lock:
            self._ceiling = max(self.calls, self.max_calls - calls)
        try:
            yield
        finally:
            with self._lock:
                self._ceiling = None

    def remaining_tokens(self) -> int | None:
        return None if self.max_tokens is None else max(0, self.max_tokens - self.tokens - self.reserved)

    def admit(self, costs: list[int]) -> int:
        """How many of the next items (estimated tokens each, in order) fit: ≥ 1 call and their tokens each."""
        calls, tokens = self.remaining_calls(), self.remaining_tokens()
        n = 0
        for cost in costs:
            if calls is not None and n >= calls:
                break
            if tokens is not None:
                if cost > tokens:
                    break
                tokens -= cost
            n += 1
        return n

    def usage(self) -> MeteredUsage:
        """A :class:`Usage` whose call increments are checked against this meter."""
        return MeteredUsage(self)

    # -- used by MeteredUsage -----------------------------------------------------------------------
    def _take(self, bound: int) -> None:
        with self._lock:
            cap = self._cap()
            if cap is not None and self.calls >= cap:
                self.refused += 1
                raise BudgetSpent(f"{BUDGET_PREFIX} the model-call budget ({cap:,} calls) is spent")
            if self.max_tokens is not None and self.tokens + self.reserved + bound > self.max_tokens:
                self.refused += 1
                raise BudgetSpent(f"{BUDGET_PREFIX} the token budget ({self.max_tokens:,} tokens) has no room for "
                                  f"another call of up to {bound:,} tokens")
            self.calls += 1
            self.reserved += bound

    def _settle(self, bound: int, reported: int | None) -> None:
        with self._lock:
            self.reserved -= bound
            self.tokens += bound if reported is None else reported


class MeteredUsage(Usage):
    """A :class:`Usage` that asks its meter before each call is counted (the client counts per attempt).

    Set :attr:`bound` (see :func:`token_bound`) before each request; call :meth:`settle` when the item
    is done. :meth:`plain` gives the plain :class:`Usage` to store in results and traces.
    """

    def __init__(self, meter: SpendMeter):
        self._meter = meter
        self._calls = 0
        self._prompt = 0
        self._completion = 0
        self._open: int | None = None  # the reservation of the attempt in flight
        self._reported: int | None = None
        self.bound = 0

    def _close(self) -> None:
        if self._open is not None:
            self._meter._settle(self._open, self._reported)
            self._open, self._reported = None, None

    @property
    def calls(self) -> int:
        return self._calls

    @calls.setter
    def calls(self, value: int) -> None:
        for _ in range(value - self._calls):
            self._close()
            self._meter._take(self.bound)
            self._open, self._reported = self.bound, None
            self._calls += 1

    @property
    def prompt_tokens(self) -> int:
        return self._prompt

    @prompt_tokens.setter
    def prompt_tokens(self, value: int) -> None:
        self._reported = (self._reported or 0) + value - self._prompt
        self._prompt = value

    @property
    def completion_tokens(self) -> int:
        return self._completion

    @completion_tokens.setter
    def completion_tokens(self, value: int) -> None:
        self._reported = (self._reported or 0) + value - self._completion
        self._completion = value

    def precheck(self) -> None:
        """Raise :class:`BudgetSpent` now when the next attempt would be refused (before any slot is taken)."""
        m = self._meter
        cap = m._cap()
        if (cap is not None and m.calls >= cap) or (
                m.max_tokens is not None and m.tokens + m.reserved + self.bound > m.max_tokens):
            self._close()
            m._take(self.bound)  # raises, and counts the refusal

    def settle(self) -> None:
        """Replace the last attempt's reservation by its reported tokens (or keep it when none came)."""
        self._close()

    def plain(self) -> Usage:
        self.settle()
        return Usage(self._calls, self._prompt, self._completion)
