"""Calls to an OpenAI-compatible chat endpoint: concurrency, retries, error mapping, usage.

One :class:`Endpoint` per backend. Batches run on a fresh ``AsyncOpenAI`` client
inside ``asyncio.run`` (in a worker thread when the caller already runs an
event loop), with at most ``concurrency`` requests in flight. Failures are
sorted into three kinds:

- **fatal** (connection refused, unknown host, HTTP 401/403/404): the endpoint
  or its configuration is wrong, so every call would fail → :class:`ModelError`
  with one message naming the endpoint (never the key) and what to check;
- **transient** (timeouts, HTTP 429 and 5xx): retried with back-off up to
  ``max_retries``, then recorded on that item; after ``fail_fast_after``
  consecutive items fail this way with no success between them, the batch
  stops with :class:`ModelError` instead of recording thousands of identical
  failures;
- **item** (HTTP 400 for this input, e.g. too long for the context): recorded
  on that item.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import openai

from ..errors import ModelError
from ..records import Usage
from .config import LLMSettings, redact_url

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")


class TransientError(Exception):
    """A call that failed for a reason that may pass (timeout, 429, 5xx), after its retries."""


class ItemError(Exception):
    """The endpoint refused this one request (HTTP 400 and the like)."""


@dataclass
class Completion:
    """One chat answer: its text, why generation stopped, and its cost."""

    content: str
    finish_reason: str | None
    usage: Usage


class Endpoint:
    """The configured endpoint; knows how to ask it for JSON and how to describe its failures."""

    def __init__(self, settings: LLMSettings):
        self.settings = settings
        self.structured = settings.structured_output
        self.structured_fallback_note: str | None = None

    # -- messages -------------------------------------------------------------------------------
    @property
    def where(self) -> str:
        return redact_url(self.settings.base_url)

    def _msg(self, text: str) -> str:
        return self.settings.redact(text)

    def fatal(self, exc: BaseException, model: str | None) -> ModelError | None:
        """The :class:`ModelError` for an exception that means "every call will fail", else None."""
        s, where = self.settings, self.where
        if isinstance(exc, openai.APITimeoutError):
            return None
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = type(cause).__name__ if cause else "connection error"
            return ModelError(self._msg(
                f"cannot reach the model endpoint {where} ({detail}): check that the server is running and "
                "that --base-url (host, port and the /v1 path) is right"))
        if isinstance(exc, openai.NotFoundError):
            return ModelError(self._msg(
                f"the model endpoint {where} answered 404 for model {model!r}: check --model against the "
                f"names the server lists at {where}/models, and that the base URL ends in /v1"))
        if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            env = s.api_key_env or " or ".join(("CRASE_API_KEY", "OPENAI_API_KEY"))
            return ModelError(self._msg(
                f"the model endpoint {where} rejected the API key (HTTP {exc.status_code}): check the key in "
                f"{env}{' / the settings file' if s.settings_file else ''} and its access to model {model!r}"))
        return None

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

    async def complete(
        self,
        client: openai.AsyncOpenAI,
        messages: list[dict[str, str]],
        *,
        name: str,
        schema: dict,
        max_tokens: int,
        usage: Usage,
    ) -> Completion:
        """One chat completion, retried on transient failures; raises ModelError/TransientError/ItemError."""
        s = self.settings
        last: BaseException | None = None
        attempt = -1
        while attempt < s.max_retries:
            attempt += 1
            if attempt:
                await asyncio.sleep(min(8.0, 0.5 * 2 ** (attempt - 1)))
            kwargs: dict[str, Any] = {
                "model": s.model, "messages": messages, "temperature": s.temperature, "max_tokens": max_tokens,
            }
            rf = self._response_format(name, schema)
            if rf is not None:
                kwargs["response_format"] = rf
            usage.calls += 1
            try:
                r = await client.chat.completions.create(**kwargs)
            except openai.BadRequestError as e:
                if rf is not None and any(w in str(e).lower() for w in ("response_format", "schema", "json_object")):
                    self.structured = "off"
                    self.structured_fallback_note = (f"the endpoint rejected response_format ({s.structured_output}); "
                                                     "plain JSON instructions used instead")
                    log.warning("%s", self._msg(self.structured_fallback_note))
                    attempt -= 1  # the fallback does not use up a retry (it happens once: the mode is now off)
                    continue
                raise ItemError(self._msg(f"the endpoint refused the request (HTTP 400): {_short(e)}")) from None
            except (openai.APIConnectionError, openai.APIStatusError) as e:
                err = self.fatal(e, s.model)
                # a refused connection gets one more try (a server may be restarting); the rest are final
                if err is not None and not (isinstance(e, openai.APIConnectionError) and attempt == 0 and s.max_retries > 0):
                    raise err from None
                if isinstance(e, openai.APIStatusError) and e.status_code < 500 and e.status_code not in (408, 409, 429):
                    raise ItemError(self._msg(f"the endpoint refused the request (HTTP {e.status_code}): {_short(e)}")) from None
                last = e
                continue
            u = getattr(r, "usage", None)
            if u is not None:
                usage.prompt_tokens += int(getattr(u, "prompt_tokens", 0) or 0)
                usage.completion_tokens += int(getattr(u, "completion_tokens", 0) or 0)
            if not r.choices:
                last = RuntimeError("the answer had no choices")
                continue
            choice = r.choices[0]
            return Completion(choice.message.content or "", choice.finish_reason, usage)
        raise TransientError(self._msg(self._describe_transient(last)))

    def _describe_transient(self, e: BaseException | None) -> str:
        n = self.settings.max_retries + 1
        if isinstance(e, openai.APITimeoutError):
            return f"no answer from {self.where} within {self.settings.timeout:g} s ({n} attempts): raise --timeout or lower --concurrency"
        if isinstance(e, openai.APIConnectionError):
            return f"connection to {self.where} failed ({n} attempts): check that the server is running"
        if isinstance(e, openai.APIStatusError):
            return f"the endpoint {self.where} answered HTTP {e.status_code} ({n} attempts): {_short(e)}"
        return f"the endpoint {self.where} gave no usable answer ({n} attempts): {e}"

    # -- batches --------------------------------------------------------------------------------
    def client(self) -> openai.AsyncOpenAI:
        s = self.settings
        return openai.AsyncOpenAI(base_url=s.base_url, api_key=s.key, timeout=s.timeout, max_retries=0)

    def run_batch(
        self,
        items: Sequence[T],
        work: Callable[[openai.AsyncOpenAI, T], Awaitable[R]],
        is_transient_failure: Callable[[R], bool],
    ) -> list[R]:
        """``work`` on every item, ``concurrency`` at a time, results in input order.

        ``work`` returns a result (a failure recorded in it, if any) or raises
        :class:`ModelError` (stops the batch). ``is_transient_failure`` tells the
        circuit breaker which results count as transport failures.
        """
        if not items:
            return []
        return run_sync(lambda: self._batch(items, work, is_transient_failure))

    async def _batch(self, items: Sequence[T], work: Callable[[openai.AsyncOpenAI, T], Awaitable[R]],
                     is_transient_failure: Callable[[R], bool]) -> list[R]:
        s = self.settings
        sem = asyncio.Semaphore(s.concurrency)
        streak = 0  # transient failures in a row
        client = self.client()

        async def one(item: T) -> R:
            nonlocal streak
            async with sem:
                result = await work(client, item)
                if is_transient_failure(result):
                    streak += 1
                    if streak >= s.fail_fast_after:
                        last = str(getattr(result, "error", "") or "")
                        raise ModelError(self._msg(
                            f"{streak} model calls in a row to {self.where} failed, so the run stops "
                            f"instead of recording the same failure for every item. Last: {last}"))
                else:
                    streak = 0
                return result

        tasks = [asyncio.ensure_future(one(it)) for it in items]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            await client.close()

    def list_models(self) -> list[str]:
        """Model names the endpoint serves (``GET /models``); ModelError when it cannot be asked."""
        s = self.settings
        sync = openai.OpenAI(base_url=s.base_url, api_key=s.key, timeout=min(s.timeout, 30.0), max_retries=1)
        try:
            return [m.id for m in sync.models.list()]
        except (openai.APIConnectionError, openai.APIStatusError) as e:
            err = self.fatal(e, s.model)
            if err is not None:
                raise err from None
            raise ModelError(self._msg(f"could not list the models of {self.where}: {_short(e)}")) from None
        finally:
            sync.close()


def _short(e: BaseException, limit: int = 300) -> str:
    body = getattr(e, "body", None)
    text = str(body.get("message") or body) if isinstance(body, dict) else str(e)
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
