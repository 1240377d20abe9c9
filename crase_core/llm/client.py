"""Calls to an OpenAI-compatible chat endpoint: pooled connections, adaptive concurrency, deadlines, retries.

One :class:`Endpoint` per backend. :meth:`Endpoint.run_batch` runs a batch inside
``asyncio.run`` (in a worker thread when the caller already runs an event loop)
on one keep-alive :class:`~crase_core.llm.transport.ConnectionPool` (an ``aiohttp`` session) with a fixed
pool of ``concurrency`` workers pulling items in order (memory is bounded by the
workers, not by the batch: no task per item). Every HTTP request first takes a
slot of an :class:`AdaptiveLimit` (AIMD): HTTP 429 or 503 halves the limit
(at most once per round trip, never below ``min_concurrency``) and a
``Retry-After`` (seconds or an HTTP date) pauses every new request until then;
each success grows it back by 1/limit, up to ``concurrency``.

Deadlines: ``timeout`` is the **total** time of one HTTP request, connect to last
byte (a server trickling one byte a second fails at ``timeout``, not after the
whole body); ``deadline`` (``time.monotonic()`` seconds, per batch or set on the
endpoint for a whole run) caps everything: waiting for a slot, back-off and
requests. Items not asked when it passes fail at once, without a call, as
"endpoint: the run's deadline … passed" (transient: a rerun asks them).

Failures are sorted into three kinds:

- **fatal** (connection refused twice, unknown host, HTTP 401/403/404, a
  redirect): the endpoint or its configuration is wrong, so every call would
  fail → :class:`ModelError` with one message naming the endpoint (never the key)
  and what to check;
- **transient** (timeouts, dropped connections, HTTP 408/409/5xx, 429, an answer
  that is not a chat completion: an HTML page, a body that is not JSON, no
  choices): retried with back-off up to ``max_retries`` (429 and a 503 with
  ``Retry-After`` have their own allowance, ``overload_retries``, since the
  server did not process the request), then :class:`TransientError` on that
  item; after ``fail_fast_after`` consecutive items fail this way with no
  success between them, the batch stops with :class:`ModelError` instead of
  recording thousands of identical failures;
- **item** (HTTP 400 for this input, e.g. too long for the context): recorded
  on that item.

Every HTTP request counts one call in the item's :class:`~crase_core.records.Usage` and in
:attr:`Endpoint.calls_made`; :attr:`Endpoint.max_calls` caps them (retries included).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import email.utils
import json
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from crase_core import deadline as run_deadline
from crase_core.errors import ModelError
from crase_core.llm.transport import ConnectFailed, ConnectionPool, Dropped, InvalidHeader, Response
from crase_core.records import Usage
from crase_core.redaction import mask_secrets
from crase_core.settings.llm import LLMSettings, redact_url

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")


class TransientError(Exception):
    """A call that failed for a reason that may pass (timeout, 429, 5xx, garbage), after its retries."""


class DeadlineError(TransientError):
    """The caller's deadline passed before this item could be answered."""


class BudgetError(TransientError):
    """The endpoint's call budget (:attr:`Endpoint.max_calls`) was spent before this item could be answered."""


class ItemError(Exception):
    """The endpoint refused this one request (HTTP 400 and the like)."""


@dataclass
class Completion:
    """One chat answer: its text, why generation stopped, and its cost."""

    content: str
    finish_reason: str | None
    usage: Usage


# --- adaptive concurrency ----------------------------------------------------------------------------


@dataclass
class LimitStats:
    """What the adaptive limit did in one batch (tests, benchmarks, logs)."""

    requests: int = 0
    overloaded: int = 0  # HTTP 429 / 503 answers
    cuts: int = 0  # times the limit was halved
    lowest: float = 0.0
    final: float = 0.0
    paused_s: float = 0.0  # Retry-After pauses set (sum)


class AdaptiveLimit:
    """AIMD limit on requests in flight: halve on overload, +1/limit per success, in [floor, ceiling].

    A halving applies once per round trip: an overload answer to a request sent
    before the last cut does not cut again (the burst that caused it is already
    answered for). ``pause(s)`` holds every new request for ``s`` seconds (Retry-After).
    """

    def __init__(self, ceiling: int, floor: int = 1):
        self.ceiling = float(ceiling)
        self.floor = float(max(1, min(floor, ceiling)))
        self.limit = self.ceiling
        self.in_flight = 0
        self.paused_until = 0.0
        self._last_cut = -math.inf
        self._cond = asyncio.Condition()
        self.stats = LimitStats(lowest=self.limit, final=self.limit)

    async def acquire(self) -> float:
        """Wait for a slot (and any pause); returns the send time (monotonic)."""
        async with self._cond:
            while True:
                now = time.monotonic()
                if self.paused_until > now:
                    with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                        await asyncio.wait_for(self._cond.wait(), self.paused_until - now)
                    continue
                if self.in_flight < int(self.limit):
                    self.in_flight += 1
                    self.stats.requests += 1
                    return now
                await self._cond.wait()

    async def release(self, sent: float, *, overloaded: bool = False, ok: bool = False,
                      retry_after: float | None = None) -> None:
        async with self._cond:
            self.in_flight -= 1
            now = time.monotonic()
            if overloaded:
                self.stats.overloaded += 1
                if sent >= self._last_cut:
                    self.limit = max(self.floor, self.limit / 2)
                    self._last_cut = now
                    self.stats.cuts += 1
                    self.stats.lowest = min(self.stats.lowest, self.limit)
                if retry_after and now + retry_after > self.paused_until:
                    self.stats.paused_s += retry_after
                    self.paused_until = now + retry_after
            elif ok:
                self.limit = min(self.ceiling, self.limit + 1 / self.limit)
            self.stats.final = self.limit
            self._cond.notify_all()


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delay-seconds or an HTTP date); None if absent/invalid."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


# --- one batch's connection ----------------------------------------------------------------------------


@dataclass
class Session:
    """One batch's connection pool, adaptive limit and deadline; ``work`` passes it back to :meth:`Endpoint.complete`."""

    pool: ConnectionPool
    limit: AdaptiveLimit
    deadline: float | None = None
    notes: list[str] = field(default_factory=list)

    def remaining(self) -> float:
        return math.inf if self.deadline is None else self.deadline - time.monotonic()

    def expired(self) -> bool:
        return self.remaining() <= 0


@dataclass
class _Tries:
    """One item's attempts so far: failures (each uses up a retry), busy answers (their own allowance),
    requests sent, and why the last one failed (``{n}`` = attempts)."""

    failures: int = 0
    overloads: int = 0
    sent: int = 0
    last: str = ""


@dataclass
class _Outcome:
    """One HTTP attempt: a response, or why there is none (``kind``: timeout, deadline, connect, dropped)."""

    response: Response | None = None
    kind: str = ""
    detail: str = ""
    sent: bool = True


class Endpoint:
    """The configured endpoint; knows how to ask it for JSON and how to describe its failures.

    ``deadline``: a ``time.monotonic()`` time after which no call is made (the run's
    deadline; a batch's own ``deadline`` argument can only make it earlier).
    ``max_calls``: a hard cap on HTTP requests through this endpoint (retries
    included; ``calls_made`` counts them across batches): once spent, items fail at
    once with :class:`BudgetError`, without a call. ``last_stats``: what the
    adaptive limit did in the last batch.
    """

    def __init__(self, settings: LLMSettings, deadline: float | None = None, max_calls: int | None = None):
        self.settings = settings
        self.structured = settings.structured_output
        self.structured_fallback_note: str | None = None
        self.deadline = deadline
        self.max_calls = max_calls
        self.calls_made = 0
        self.last_stats = LimitStats()
        self.connections_opened = 0

    # -- messages -------------------------------------------------------------------------------
    @property
    def where(self) -> str:
        return redact_url(self.settings.base_url)

    def _msg(self, text: str) -> str:
        return self.settings.redact(text)

    def _fatal_status(self, r: Response, model: str | None) -> ModelError | None:
        """The :class:`ModelError` for an answer that means "every call will fail", else None."""
        s, where = self.settings, self.where
        if r.status == 404:
            return ModelError(self._msg(
                f"the model endpoint {where} answered 404 for model {model!r}: check --model against the "
                f"names the server lists at {where}/models, and that the base URL ends in /v1"))
        if r.status in (401, 403):
            env = s.api_key_env or " or ".join(("CRASE_API_KEY", "OPENAI_API_KEY"))
            return ModelError(self._msg(
                f"the model endpoint {where} rejected the API key (HTTP {r.status}): check the key in "
                f"{env}{' / the settings file' if s.settings_file else ''} and its access to model {model!r}"))
        if 300 <= r.status < 400:
            return ModelError(self._msg(
                f"the model endpoint {where} answered HTTP {r.status} (a redirect, which is not followed so that "
                "the key goes nowhere else): set --base-url to the API's final address"))
        return None

    def _unreachable(self, detail: str) -> ModelError:
        return ModelError(self._msg(
            f"cannot reach the model endpoint {self.where} ({detail}): check that the server is running and "
            "that --base-url (host, port and the /v1 path) is right"))

    # -- one request ----------------------------------------------------------------------------
    def _response_format(self, name: str, schema: dict) -> dict | None:
        mode = self.structured
        if mode == "schema":
            return {"type": "json_object", "schema": schema}
        if mode == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
        if mode == "json_object":
            return {"type": "json_object"}
        return None

    async def _send(self, session: Session, body: bytes, usage: Usage, path: str = "/chat/completions") -> _Outcome:
        """One HTTP POST of ``body`` to ``path`` under a slot of the limit and a total deadline; counts one call
        once sent."""
        s = self.settings
        limit = session.limit
        try:
            async with asyncio.timeout(None if session.deadline is None else max(0.0, session.remaining())):
                sent = await limit.acquire()
        except TimeoutError:
            return _Outcome(kind="deadline", sent=False)
        if self.budget_spent():
            await limit.release(sent)
            return _Outcome(kind="budget", sent=False)
        self.calls_made += 1
        usage.calls += 1
        call_end = sent + s.timeout
        run_end = session.deadline if session.deadline is not None else math.inf
        overloaded, retry_after, ok = False, None, False
        try:
            async with asyncio.timeout_at(min(call_end, run_end)):
                r = await session.pool.request("POST", path, body)
            if log.isEnabledFor(logging.DEBUG):
                log.debug('HTTP Request: POST %s "HTTP/1.1 %d"', mask_secrets(s.base_url + path), r.status)
            overloaded = r.status == 429 or r.status == 503
            retry_after = parse_retry_after(r.headers.get("retry-after")) if overloaded else None
            ok = r.status == 200
            return _Outcome(r)
        except TimeoutError:
            return _Outcome(kind="timeout" if call_end <= run_end else "deadline")
        except ConnectFailed as e:
            return _Outcome(kind="connect", detail=str(e))
        except Dropped as e:
            return _Outcome(kind="dropped", detail=str(e))
        finally:
            if retry_after is not None and retry_after > s.max_retry_wait:
                retry_after = None  # not honoured: that call fails at once, the others need not wait
            await limit.release(sent, overloaded=overloaded, ok=ok, retry_after=retry_after)

    async def complete(
        self,
        client: Any,
        messages: list[dict[str, str]],
        *,
        name: str,
        schema: dict,
        max_tokens: int,
        usage: Usage,
    ) -> Completion:
        """One chat completion, retried on transient failures; raises ModelError/TransientError/ItemError.

        ``client`` is the :class:`Session` that :meth:`run_batch` passed to ``work``.
        """
        s = self.settings

        def body() -> bytes:
            kwargs: dict[str, Any] = {
                "model": s.model, "messages": messages, "temperature": s.temperature, "max_tokens": max_tokens,
            }
            rf = self._response_format(name, schema)
            if rf is not None:
                kwargs["response_format"] = rf
            return json.dumps(kwargs, ensure_ascii=False).encode("utf-8")

        def structured_refused(r: Response) -> bool:
            text = _error_text(r).lower()
            if self._response_format(name, schema) is None or not any(
                    w in text for w in ("response_format", "schema", "json_object")):
                return False
            self.structured = "off"
            self.structured_fallback_note = (f"the endpoint rejected response_format ({s.structured_output}); "
                                             "plain JSON instructions used instead")
            log.warning("%s", self._msg(self.structured_fallback_note))
            return True  # asked again at once (it happens once: the mode is now off)

        return await self.post_json(client, "/chat/completions", body, usage,
                                    lambda r: self._completion(r, usage), structured_refused)

    async def post_json(self, client: Any, path: str, body: Callable[[], bytes], usage: Usage,
                        accept: Callable[[Response], tuple[R | None, str]],
                        retry_400: Callable[[Response], bool] | None = None) -> R:
        """POST ``body()`` to ``path`` until ``accept`` takes an HTTP 200 answer (it returns the value, or None and
        what is wrong with the answer, "{n}" standing for the attempts), retried on transient failures as the
        module docstring says; raises ModelError/TransientError/ItemError. ``retry_400`` may turn an HTTP 400
        into one immediate retry (it returns True) instead of an :class:`ItemError`."""
        session: Session = client
        tries = _Tries()
        while True:
            if session.expired():
                raise DeadlineError(self._deadline_message(tries.sent))
            out = await self._send(session, body(), usage, path)
            tries.sent += out.sent
            self._stop_if_over(out, tries)
            r = out.response
            if r is None:
                tries.last = self._transport_failure(out, tries)
            elif r.status == 200:
                value, problem = accept(r)
                if value is not None:
                    return value
                tries.last = problem
            elif r.status == 400:
                if retry_400 is not None and retry_400(r):
                    continue  # does not use up a retry
                raise ItemError(self._msg(f"the endpoint refused the request (HTTP 400): {_error_text(r)}"))
            else:
                wait = self._status_failure(r, tries)
                if wait is not None:  # busy: the request was not processed; its own allowance
                    await self._sleep(session, wait, tries.sent)
                    continue
            tries.failures += 1
            if tries.failures > self.settings.max_retries:
                raise TransientError(self._msg(tries.last.replace("{n}", str(tries.sent))))
            await self._sleep(session, _backoff(tries.failures), tries.sent)

    def _stop_if_over(self, out: _Outcome, tries: _Tries) -> None:
        """Raise when the run's deadline or model-call budget ended this item's attempts."""
        if out.kind == "deadline":
            raise DeadlineError(self._deadline_message(tries.sent))
        if out.kind == "budget":
            raise BudgetError(self._msg(f"the budget of {self.max_calls} model calls was spent before "
                                        f"{self.where} answered" + (f" ({tries.sent} attempt(s))" if tries.sent
                                                                    else ", so it was not asked")))

    def _transport_failure(self, out: _Outcome, tries: _Tries) -> str:
        """Why no answer came (``{n}`` = attempts), or raise when a refused connection is final."""
        if out.kind == "connect":
            # a refused connection gets one more try (a server may be restarting); then it is final
            if tries.failures >= 1 or self.settings.max_retries == 0:
                raise self._unreachable(out.detail)
            return f"could not connect to {self.where} ({out.detail})"
        if out.kind == "timeout":
            return (f"no complete answer from {self.where} within {self.settings.timeout:g} s "
                    f"({{n}} attempts): raise --timeout or lower --concurrency")
        return f"the connection to {self.where} broke ({{n}} attempts): {out.detail}"

    def _status_failure(self, r: Any, tries: _Tries) -> float | None:
        """An HTTP error status: raise when final; the seconds to wait when the endpoint is busy (429, or 503
        with Retry-After: not a failure, Retry-After honoured up to ``max_retry_wait``); else None, with
        ``tries.last`` saying what failed (a retryable 5xx, 408, 409)."""
        s = self.settings
        fatal = self._fatal_status(r, s.model)
        if fatal is not None:
            raise fatal
        retry_after = parse_retry_after(r.headers.get("retry-after"))
        if r.status == 429 or (r.status == 503 and retry_after is not None):
            tries.overloads += 1
            if retry_after is not None and retry_after > s.max_retry_wait:
                raise TransientError(self._msg(
                    f"the endpoint {self.where} is busy (HTTP {r.status}) and asked to wait "
                    f"{retry_after:g} s, more than --max-retry-wait {s.max_retry_wait:g} s"))
            if tries.overloads > s.overload_retries:
                raise TransientError(self._msg(
                    f"the endpoint {self.where} stayed busy (HTTP {r.status}, {tries.sent} attempts): "
                    f"{_error_text(r)}; lower --concurrency"))
            return retry_after if retry_after is not None else _backoff(tries.overloads)
        if r.status < 500 and r.status not in (408, 409):
            raise ItemError(self._msg(f"the endpoint refused the request (HTTP {r.status}): {_error_text(r)}"))
        tries.last = f"the endpoint {self.where} answered HTTP {r.status} ({{n}} attempts): {_error_text(r)}"
        return None

    def budget_spent(self) -> bool:
        return self.max_calls is not None and self.calls_made >= self.max_calls

    async def _sleep(self, session: Session, seconds: float, attempts: int) -> None:
        if seconds <= 0:
            return
        if seconds >= session.remaining():  # the wait alone would pass the deadline
            raise DeadlineError(self._deadline_message(attempts))
        await asyncio.sleep(seconds)

    def _deadline_message(self, attempts: int) -> str:
        done = f" after {attempts} attempt(s)" if attempts else ", so it was not asked"
        return self._msg(f"the run's deadline passed before {self.where} answered{done}")

    def _completion(self, r: Response, usage: Usage) -> tuple[Completion | None, str]:
        """The chat answer in an HTTP 200, or (None, what is wrong with it) — "{n}" stands for the attempts."""
        where = self.where
        text = r.body[:4096].decode("utf-8", "replace").lstrip().lower()
        if r.content_type == "text/html" or text.startswith(("<!doctype html", "<html")):
            return None, (f"the endpoint {where} answered HTTP 200 with an HTML page, not an OpenAI-compatible "
                          "JSON answer ({n} attempts): check that --base-url is the API's address (it usually "
                          "ends in /v1) and not a web page or a login proxy")
        try:
            data = json.loads(r.body)
        except (ValueError, UnicodeDecodeError):
            return None, (f"the endpoint {where} answered HTTP 200 with a body that is not JSON "
                          f"({{n}} attempts): {_preview(r.body)}")
        except RecursionError:
            return None, (f"the endpoint {where} answered HTTP 200 with JSON nested too deeply to be a chat "
                          f"completion ({{n}} attempts): {_preview(r.body)}")
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
            return None, (f"the endpoint {where} answered HTTP 200 with JSON that is not a chat completion "
                          f"(no 'choices' list) ({{n}} attempts): {_preview(r.body)}")
        u = data.get("usage")
        if isinstance(u, dict):
            usage.prompt_tokens += _count(u.get("prompt_tokens"))
            usage.completion_tokens += _count(u.get("completion_tokens"))
        if not data["choices"]:
            return None, f"the endpoint {where} gave no usable answer ({{n}} attempts): the answer had no choices"
        choice = data["choices"][0]
        message = choice.get("message") if isinstance(choice, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if content is not None and not isinstance(content, str):
            content = None
        if not isinstance(message, dict):
            return None, (f"the endpoint {where} gave no usable answer ({{n}} attempts): the first choice has no "
                          "message")
        finish = choice.get("finish_reason")
        return Completion(content or "", finish if isinstance(finish, str) else None, usage), ""

    # -- batches --------------------------------------------------------------------------------
    def _pool(self) -> ConnectionPool:
        s = self.settings
        try:
            return ConnectionPool(s.base_url, {"Authorization": f"Bearer {s.key}"}, max_idle=s.concurrency,
                                  timeout=s.timeout)
        except InvalidHeader:
            raise ModelError("the API key contains characters that cannot be sent in an HTTP header") from None

    def run_batch(
        self,
        items: Sequence[T],
        work: Callable[[Any, T], Awaitable[R]],
        is_transient_failure: Callable[[R], bool],
        *,
        deadline: float | None = None,
    ) -> list[R]:
        """``work(session, item)`` on every item, at most ``concurrency`` in flight, results in input order.

        ``work`` returns a result (a failure recorded in it, if any) or raises
        :class:`ModelError` (stops the batch). ``is_transient_failure`` tells the
        circuit breaker which results count as transport failures (none count
        once the deadline has passed or the call budget is spent). ``deadline``: ``time.monotonic()`` time
        after which no call is made (the earlier of it and :attr:`deadline`).
        """
        if not items:
            return []
        run = run_deadline.current()  # the run's overall deadline (``--deadline``), read on the calling thread
        ends = [d for d in (deadline, self.deadline, run.ends_at if run is not None else None) if d is not None]
        return run_sync(lambda: self._batch(items, work, is_transient_failure, min(ends) if ends else None))

    async def _batch(self, items: Sequence[T], work: Callable[[Any, T], Awaitable[R]],
                     is_transient_failure: Callable[[R], bool], deadline: float | None) -> list[R]:
        s = self.settings
        results: list[Any] = [None] * len(items)
        session = Session(self._pool(), AdaptiveLimit(s.concurrency, s.min_concurrency), deadline)
        streak = 0  # transient failures in a row
        indices = iter(range(len(items)))

        async def worker() -> None:
            nonlocal streak
            for i in indices:  # one shared iterator: each item is taken by exactly one worker
                result = await work(session, items[i])
                results[i] = result
                if is_transient_failure(result) and not (session.expired() or self.budget_spent()):
                    streak += 1
                    if streak >= s.fail_fast_after:
                        # a grouped item's result is a list (one per edge): its first error
                        errors = [getattr(r, "error", "") for r in (result if isinstance(result, list) else [result])]
                        last = str(next((x for x in errors if x), ""))
                        raise ModelError(self._msg(
                            f"{streak} model calls in a row to {self.where} failed, so the run stops "
                            f"instead of recording the same failure for every item. Last: {last}"))
                else:
                    streak = 0

        workers = [asyncio.ensure_future(worker()) for _ in range(min(s.concurrency, len(items)))]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for t in workers:
                t.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        finally:
            await session.pool.close()
            self.last_stats = session.limit.stats
            self.connections_opened = session.pool.opened
            if session.limit.stats.cuts:
                log.info("model endpoint %s was busy: %d answers 429/503, concurrency limit cut %d times "
                         "(lowest %.1f, final %.1f)", self.where, session.limit.stats.overloaded,
                         session.limit.stats.cuts, session.limit.stats.lowest, session.limit.stats.final)
        return results

    def list_models(self) -> list[str]:
        """Model names the endpoint serves (``GET /models``); ModelError when it cannot be asked."""
        return run_sync(self._list_models)

    async def _list_models(self) -> list[str]:
        s = self.settings
        pool = self._pool()
        limit = min(s.timeout, 30.0)
        try:
            r: Response | None = None
            for attempt in range(2):
                try:
                    async with asyncio.timeout(limit):
                        r = await pool.request("GET", "/models")
                    log.debug('HTTP Request: GET %s "HTTP/1.1 %d"', mask_secrets(s.base_url + "/models"), r.status)
                    break
                except ConnectFailed as e:
                    if attempt:
                        raise self._unreachable(str(e)) from None
                except TimeoutError:
                    raise ModelError(self._msg(f"could not list the models of {self.where}: no complete answer "
                                               f"within {limit:g} s")) from None
                except Dropped as e:
                    if attempt:
                        raise ModelError(self._msg(f"could not list the models of {self.where}: {e}")) from None
                await asyncio.sleep(0.5)
            assert r is not None
            if r.status != 200:
                fatal = self._fatal_status(r, s.model)
                raise fatal or ModelError(self._msg(
                    f"could not list the models of {self.where}: HTTP {r.status}: {_error_text(r)}"))
            try:
                data = json.loads(r.body)
                return [str(m["id"]) for m in data["data"]]
            except (ValueError, TypeError, KeyError, RecursionError):
                kind = "an HTML page" if r.content_type == "text/html" else "JSON of another shape"
                raise ModelError(self._msg(
                    f"could not list the models of {self.where}: it answered with {kind}, not an OpenAI-compatible "
                    "model list: check that --base-url is the API's address (it usually ends in /v1)")) from None
        finally:
            await pool.close()


def _backoff(n: int) -> float:
    """Seconds before retry ``n`` (1, 2, …): 0.5, 1, 2, 4, 8, 8, … with ±10 % jitter."""
    return min(8.0, 0.5 * 2 ** (n - 1)) * random.uniform(0.9, 1.1)


def _count(x: Any) -> int:
    """A token count from ``usage`` (anything not a finite, non-negative number counts 0)."""
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x < 0:
        return 0
    return int(x)


def _preview(body: bytes, limit: int = 120) -> str:
    text = " ".join(body[: limit * 2].decode("utf-8", "replace").split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _error_text(r: Response, limit: int = 300) -> str:
    """The error message of a non-200 answer (OpenAI ``{"error": {"message"}}`` or the text), shortened."""
    try:
        data = json.loads(r.body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        data = None
    if isinstance(data, dict):
        err = data.get("error", data)
        text = str(err.get("message") or err) if isinstance(err, dict) else str(err)
    elif r.content_type == "text/html":
        text = "an HTML page"
    else:
        text = r.body[:1000].decode("utf-8", "replace") or "(empty body)"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run_sync(factory: Callable[[], Awaitable[R]]) -> R:
    """Run a coroutine to completion from sync code, even when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_as_coro(factory))
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(_as_coro(factory))).result()


async def _as_coro(factory: Callable[[], Awaitable[R]]) -> R:
    return await factory()
