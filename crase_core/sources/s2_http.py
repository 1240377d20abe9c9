"""HTTP layer of the Semantic Scholar source: settings, rate limit, retries, disk cache.

Contract of :meth:`S2Client.request`:

* every response body is parsed JSON, checked against the endpoint's documented
  shape (:func:`check_response`), and only when it validates cached on disk
  (``diskcache``, stored as JSON) under a key made of method, base URL, path,
  query parameters and body — never the API key — with an expiry of
  ``cache_ttl_days``; a cache hit that validates sends nothing;
* paper ids go into paths only percent-encoded (:func:`path_segment`), and ids
  read from answers must pass :func:`valid_paper_id`;
* requests are spaced by a client-side rate limiter (``rate`` per second);
* every attempt has a total deadline of ``timeout`` seconds (connect, headers and
  body together, not per read: a server that trickles one byte a second times
  out), capped by what is left of the run's deadline (:mod:`crase_core.deadline`);
  bodies over :data:`MAX_RESPONSE_BYTES` are refused;
* 429 and 5xx answers, timeouts and connection failures are retried up to
  ``max_retries`` times with exponential backoff and jitter; a ``Retry-After``
  header is honoured (the wait is at least what the server asks for); a wait
  that would pass the run's deadline stops the run instead;
* 404 returns ``None`` (cached too: an unknown paper stays unknown until the
  entry expires); 400 raises :class:`S2BadRequest` with the server's message;
* every other failure raises :class:`~crase_core.errors.SourceError` whose
  message names Semantic Scholar, says what to do, and never contains the key.

``stats.requests`` counts every HTTP request sent (retries included), which is
what the pipeline reports as external calls.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard
from urllib.parse import quote

import diskcache
import httpcore
import httpx

from crase_core import deadline
from crase_core.cache import cache_root, open_disk_cache, stable_hash
from crase_core.errors import InputError, SourceError
from crase_core.settings.s2 import S2Settings, api_key_from_env

log = logging.getLogger(__name__)

SERVICE = "Semantic Scholar"
#: appended to every fatal error: what happens to the run and to what was fetched.
STOPPED = ("The run stopped; responses fetched so far are cached on disk, so re-running "
           "the query resumes without fetching them again.")
CACHE_FORMAT = 1
#: the largest answer body read (the API's own limit is 10 MB); a larger one stops the run.
MAX_RESPONSE_BYTES = 64 << 20






class S2BadRequest(SourceError):
    """HTTP 400: the API refused the request's parameters (message from the API)."""

    def __init__(self, message: str, api_message: str):
        super().__init__(message)
        self.api_message = api_message

    @property
    def too_large(self) -> bool:
        return "exceed maximum size" in self.api_message.lower()


class S2AuthError(SourceError):
    """HTTP 401/403: the key (or its absence) was refused. Always stops the run."""


class S2Unavailable(SourceError):
    """The service could not answer after every retry (429, 5xx, timeout, network)."""


class RateLimiter:
    """Spaces call starts at least ``1/rate`` seconds apart (thread-safe); rate 0 disables it."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self._clock, self._sleep = clock, sleep
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> float:
        """Block until the next call may start; return the seconds waited."""
        if self.interval <= 0:
            return 0.0
        with self._lock:
            now = self._clock()
            start = max(now, self._next)
            self._next = start + self.interval
        delay = start - now
        if delay > 0:
            self._sleep(delay)
        return delay


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Wait before retry ``attempt`` (0-based): min(cap, base·2^attempt) scaled by a jitter in [0.5, 1]."""
    return min(cap, base * (2.0 ** attempt)) * rng.uniform(0.5, 1.0)


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or HTTP-date); None when absent/unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (now if now is not None else time.time()))


@dataclass
class S2Stats:
    """What the client and source did (the source adds the data-quality counters)."""

    requests: int = 0  # HTTP requests sent, retries included (= external calls)
    cache_hits: int = 0
    retries: int = 0
    waited_seconds: float = 0.0  # backoff + Retry-After waits (not the rate limiter)
    unknown_neighbors: int = 0  # reference/citation entries without a paperId, skipped
    duplicates_dropped: int = 0
    truncated_lists: int = 0
    skipped_lists: int = 0  # neighbour lists given up after errors (on_neighbor_error='skip')
    not_found: int = 0


class ResponseCache:
    """Parsed JSON responses on disk (JSON only, never pickled), with expiry; any cache failure is a miss."""

    def __init__(self, directory: Path, ttl_seconds: float, service: str = SERVICE):
        self.directory = directory
        self.ttl = ttl_seconds
        self.service = service
        try:
            self._cache: diskcache.Cache | None = open_disk_cache(directory, f"{service} response cache",
                                                                  size_limit=2 << 30)
        except Exception as e:
            log.warning("%s response cache at %s unavailable (%s); responses are not reused", service,
                        directory, type(e).__name__)
            self._cache = None

    def get(self, key: str) -> Any:
        if self._cache is None:
            return None
        try:
            return self._cache.get(key, default=None)
        except Exception as e:
            log.warning("unreadable %s cache entry (%s); fetching again", self.service, type(e).__name__)
            return None

    def set(self, key: str, value: Any) -> None:
        if self._cache is None:
            return
        try:
            self._cache.set(key, value, expire=self.ttl)
        except Exception as e:
            log.warning("could not write the %s cache (%s)", self.service, type(e).__name__)

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()


_NOT_FOUND = {"__s2_status__": 404}
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})

#: what a paper id taken from a response may look like: S2 ids are 40 hex digits; external forms like
#: ``arXiv:0704.0001`` or ``CorpusId:123`` pass too. No ``/ ? # %``, whitespace or leading dot.
_PAPER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
_NEIGHBOR_PATH = re.compile(r"/paper/[^/]+/(references|citations)")


def valid_paper_id(value: object) -> TypeGuard[str]:
    """True for a string that may be used as a paper id (see ``_PAPER_ID``); ids from responses must pass."""
    return isinstance(value, str) and _PAPER_ID.fullmatch(value) is not None


def path_segment(value: str) -> str:
    """``value`` percent-encoded as one URL path segment (``/ ? # %`` and all else escaped; ``.``/``..`` refused)."""
    if value in ("", ".", ".."):
        raise InputError(f"{value!r} is not a paper id")
    return quote(value, safe="")


def _paper_problem(obj: object, nullable: bool) -> bool:
    """True when ``obj`` is not a usable paper object (None allowed when ``nullable``)."""
    if obj is None:
        return not nullable
    if not isinstance(obj, dict):
        return True
    pid = obj.get("paperId")
    return pid is not None and not valid_paper_id(pid)


def check_response(method: str, path: str, body: Any, value: Any) -> tuple[str | None, bool]:
    """``(shape problem, degraded)`` of a parsed 200 answer, by endpoint.

    A shape problem (not the documented container) fails the request; a degraded answer (the
    right container with items that are not paper objects or carry unusable ids) is used but not
    cached, so a rerun after the service recovers fetches it again. Unknown endpoints pass.
    """
    if path == "/paper/search" or _NEIGHBOR_PATH.fullmatch(path):
        if not isinstance(value, dict) or not isinstance(value.get("data", []), list):
            return "expected an object with a 'data' list", False
        items = value.get("data") or []
        if path == "/paper/search":
            return None, any(_paper_problem(item, nullable=False) or not isinstance(item.get("paperId"), str)
                             for item in items)
        nested = "citedPaper" if path.endswith("/references") else "citingPaper"
        return None, any(not isinstance(item, dict) or _paper_problem(item.get(nested), nullable=True)
                         for item in items)
    if path == "/paper/batch" and method == "POST":
        ids = body.get("ids") if isinstance(body, dict) else None
        n = len(ids) if isinstance(ids, list) else -1
        if not isinstance(value, list) or len(value) != n:
            return f"expected a list of {n} entries (null for unknown ids)", False
        degraded = False
        for obj in value:
            if _paper_problem(obj, nullable=True):
                degraded = True
            elif isinstance(obj, dict) and "references" in obj:
                refs = obj["references"]
                degraded |= not isinstance(refs, list) or any(_paper_problem(r, nullable=False) for r in refs)
        return None, degraded
    return None, False


class _CallClock(threading.local):
    """When the HTTP call in progress on this thread must end (monotonic time; None: no bound)."""

    ends_at: float | None = None

    def clamp(self, timeout: float | None) -> float | None:
        """``timeout`` for one socket operation, cut to what is left of the call; none left: a timeout."""
        if self.ends_at is None:
            return timeout
        left = self.ends_at - time.monotonic()
        if left <= 0:
            raise httpcore.ReadTimeout("the call's total deadline passed")
        return left if timeout is None else min(timeout, left)


class _BoundedStream(httpcore.NetworkStream):
    """A socket stream whose every read and write ends by the call's total deadline."""

    def __init__(self, inner: httpcore.NetworkStream, clock: _CallClock):
        self._inner, self._clock = inner, clock

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._clock.clamp(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._clock.clamp(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _BoundedStream(self._inner.start_tls(ssl_context, server_hostname, self._clock.clamp(timeout)),
                              self._clock)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _BoundedBackend(httpcore.NetworkBackend):
    """Connections whose connect, reads and writes all end by the call's total deadline."""

    def __init__(self, inner: httpcore.NetworkBackend, clock: _CallClock):
        self._inner, self._clock = inner, clock

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        return _BoundedStream(self._inner.connect_tcp(host, port, self._clock.clamp(timeout), local_address,
                                                      socket_options), self._clock)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        return _BoundedStream(self._inner.connect_unix_socket(path, self._clock.clamp(timeout), socket_options),
                              self._clock)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _bound_connections(client: httpx.Client, clock: _CallClock) -> None:
    """Make every connection ``client`` opens (direct or through an environment proxy) obey ``clock``.

    httpx's own timeouts apply per socket operation; this wraps the connection pools' network
    backend so that the whole exchange, headers included, ends by the call's deadline. Transports
    without such a pool (a test's mock transport) are left as they are; the body loop of
    :meth:`S2Client._exchange` still enforces the deadline there.
    """
    for transport in (getattr(client, "_transport", None), *getattr(client, "_mounts", {}).values()):
        pool = getattr(transport, "_pool", None)
        inner = getattr(pool, "_network_backend", None)
        if isinstance(inner, httpcore.NetworkBackend) and not isinstance(inner, _BoundedBackend):
            pool._network_backend = _BoundedBackend(inner, clock)  # type: ignore[union-attr]


class _CallTimeout(Exception):
    """The attempt passed its total deadline while the body was still arriving."""


class S2Client:
    """Cached, rate-limited, retrying JSON client for the Graph API (see the module docstring).

    Another JSON API with the same needs (:mod:`crase_core.sources.openalex`) subclasses it: ``service``,
    ``flag`` (its CLI flags' prefix), ``cache_name``, :meth:`check` (documented shapes), :meth:`wire_params`
    and :meth:`auth_headers` (where the key goes: never into the cache key) and :meth:`_auth_message`."""

    service = SERVICE
    flag = "--s2"
    cache_name = "s2"

    def __init__(self, settings: Any = None, api_key: str | None = None,
                 transport: httpx.BaseTransport | None = None, sleep: Callable[[float], None] = time.sleep,
                 seed: int | None = None):
        self.settings: Any = settings or S2Settings()
        self._api_key = api_key if api_key is not None else api_key_from_env()
        self._sleep = sleep
        self._rng = random.Random(seed)
        self.limiter = RateLimiter(self.settings.rate, sleep=sleep)
        self.stats = S2Stats()
        self.base_url = self.settings.base_url.rstrip("/")
        self._http = httpx.Client(timeout=httpx.Timeout(self.settings.timeout), transport=transport,
                                  headers={"User-Agent": "crase-explorer/0.1", "Accept": "application/json"})
        self._call = _CallClock()
        _bound_connections(self._http, self._call)
        self.cache: ResponseCache | None = None
        if self.settings.use_cache:
            folder = Path(self.settings.cache_dir) if self.settings.cache_dir else cache_root() / self.cache_name
            self.cache = ResponseCache(folder, self.settings.cache_ttl_days * 86400.0, self.service)

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(base_url={self.base_url!r}, key={'set' if self._api_key else 'not set'})"

    @property
    def has_key(self) -> bool:
        return bool(self._api_key)

    def close(self) -> None:
        self._http.close()
        if self.cache is not None:
            self.cache.close()

    # -- helpers ---------------------------------------------------------------------------------
    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text

    def _fail(self, message: str, cls: type[SourceError] = SourceError) -> SourceError:
        return cls(self._redact(f"{self.service}: {message} {STOPPED}"))

    def cache_key(self, method: str, path: str, params: dict[str, Any] | None, body: Any) -> str:
        return f"{self.cache_name}|" + stable_hash([CACHE_FORMAT, method, self.base_url, path,
                                    sorted((k, str(v)) for k, v in (params or {}).items()), body])

    # -- the one entry point --------------------------------------------------------------------
    def request(self, method: str, path: str, params: dict[str, Any] | None = None, body: Any = None) -> Any:
        """Parsed JSON of ``method base_url+path``; None for 404 (see the module docstring).

        Only answers that pass :func:`check_response` are cached (and a cached answer that does
        not pass is fetched again): an answer of the wrong shape raises ``malformed``, a degraded
        one is returned uncached.
        """
        key = self.cache_key(method, path, params, body)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                if hit == _NOT_FOUND:
                    self.stats.cache_hits += 1
                    return None
                problem, degraded = self.check(method, path, body, hit)
                if problem is None and not degraded:
                    self.stats.cache_hits += 1
                    return hit
                log.warning("%s: a cached answer to %s %s does not validate; fetching it again", self.service, method,
                            path)
        value = self._fetch(method, path, params, body)
        if value is None:
            if self.cache is not None:
                self.cache.set(key, _NOT_FOUND)
            return None
        problem, degraded = self.check(method, path, body, value)
        if problem is not None:
            raise self.malformed(f"{method} {path}", problem)
        if degraded:
            log.warning("%s: the answer to %s %s holds malformed items; using it without caching it",
                        self.service, method, path)
        elif self.cache is not None:
            self.cache.set(key, value)
        return value

    def _fetch(self, method: str, path: str, params: dict[str, Any] | None, body: Any) -> Any:
        s = self.settings
        what = f"{method} {path}"
        headers = self.auth_headers()
        attempt = 0
        while True:
            total = deadline.call_budget(s.timeout)  # this attempt's whole time; none left: the run stops
            self.limiter.wait()
            self.stats.requests += 1
            problem: str
            retry_after: float | None = None
            try:
                response, payload = self._exchange(method, path, params, body, headers, total)
            except (httpx.TimeoutException, _CallTimeout):
                deadline.check()  # the run's own deadline cut this call short: stop the run
                problem = f"did not answer {what} within {total:g} s"
                hint = f"Raise the timeout ({self.flag}-timeout) or try again later."
            except (httpx.RemoteProtocolError, httpx.ReadError) as e:
                problem = f"broke off its answer to {what} ({type(e).__name__}: {e})"
                hint = "The connection or the service is unstable; try again later."
            except httpx.TransportError as e:
                problem = f"could not be reached at {self.base_url} ({type(e).__name__}: {e})"
                hint = (f"Check your internet connection, proxy or {self.flag}-base-url, "
                        "or run with the local corpus (--source local).")
            else:
                status = response.status_code
                if status == 200:
                    return self._parse(payload, what)
                if status == 404:
                    self.stats.not_found += 1
                    return None
                if status in (401, 403):
                    raise self._fail(self._auth_message(status, what), S2AuthError)
                if status == 400:
                    api_message = self._api_error(response, payload)
                    raise S2BadRequest(self._redact(
                        f"{self.service} refused {what} (HTTP 400: {api_message}). This is a bug in the request "
                        f"Crase built or a change of the API; please report it. {STOPPED}"), api_message)
                if status not in _RETRY_STATUS:
                    raise self._fail(f"answered {what} with HTTP {status} ({self._api_error(response, payload)}).")
                retry_after = parse_retry_after(response.headers.get("Retry-After"))
                if status == 429:
                    problem = f"kept answering {what} with HTTP 429 Too Many Requests"
                    hint = self._busy_hint()
                else:
                    problem = f"failed {what} with HTTP {status}"
                    hint = "The service is having trouble; try again later."
                if retry_after is not None and retry_after > s.max_retry_after:
                    raise self._fail(f"{problem}; it asks to wait {retry_after:.0f} s (Retry-After), more than "
                                     f"the {s.max_retry_after:g} s allowed. {hint}", S2Unavailable)
            if attempt >= s.max_retries:
                tries = attempt + 1
                raise self._fail(f"{problem} ({tries} attempt{'s' if tries > 1 else ''}). {hint}", S2Unavailable)
            delay = backoff_delay(attempt, s.backoff_base, s.backoff_max, self._rng)
            if retry_after is not None:
                delay = max(delay, retry_after)
            left = deadline.remaining()
            run = deadline.current()
            if run is not None and left is not None and delay >= left:
                raise run.error()  # waiting for the retry would pass the run's deadline
            log.info("%s: %s; retry %d of %d in %.1f s", self.service, problem, attempt + 1, s.max_retries, delay)
            self.stats.retries += 1
            self.stats.waited_seconds += delay
            if delay > 0:
                self._sleep(delay)
            attempt += 1

    def check(self, method: str, path: str, body: Any, value: Any) -> tuple[str | None, bool]:
        """``(shape problem, degraded)`` of a parsed 200 answer (:func:`check_response`)."""
        return check_response(method, path, body, value)

    def auth_headers(self) -> dict[str, str]:
        """Headers that carry the key (the Graph API's ``x-api-key``)."""
        return {"x-api-key": self._api_key} if self._api_key else {}

    def wire_params(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        """The query parameters as sent (the cache key has ``params`` without what this adds)."""
        return params

    def _busy_hint(self) -> str:
        return ("Wait a minute and re-run, lower the request rate (--s2-rate), or set S2_API_KEY "
                "for a dedicated limit.")

    def _auth_message(self, status: int, what: str) -> str:
        if self._api_key:
            return (f"rejected the API key for {what} (HTTP {status}). Check the key in S2_API_KEY "
                    "(or SEMANTIC_SCHOLAR_API_KEY), or unset it to use the shared keyless limit.")
        return (f"refused {what} without an API key (HTTP {status}). Set S2_API_KEY to a Semantic Scholar "
                "API key (https://www.semanticscholar.org/product/api).")

    def _exchange(self, method: str, path: str, params: dict[str, Any] | None, body: Any,
                  headers: dict[str, str], total: float) -> tuple[httpx.Response, bytes]:
        """One HTTP exchange that ends within ``total`` seconds: the response and its whole body."""
        ends = time.monotonic() + total
        self._call.ends_at = ends
        try:
            with self._http.stream(method, self.base_url + path, params=self.wire_params(params), json=body,
                                   headers=headers,
                                   timeout=total) as response:
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > MAX_RESPONSE_BYTES:
                        raise self._fail(f"sent an answer to {method} {path} larger than "
                                         f"{MAX_RESPONSE_BYTES >> 20} MB; it was not read.")
                    chunks.append(chunk)
                    if time.monotonic() > ends:
                        raise _CallTimeout()
                return response, b"".join(chunks)
        finally:
            self._call.ends_at = None

    def _api_error(self, response: httpx.Response, payload: bytes) -> str:
        try:
            data = json.loads(payload)
            message = data.get("error") or data.get("message") if isinstance(data, dict) else None
        except (ValueError, RecursionError):
            message = None
        text = str(message) if message else response.reason_phrase or "no message"
        return self._redact(text[:300])

    def _parse(self, payload: bytes, what: str) -> Any:
        try:
            return json.loads(payload)
        except (ValueError, RecursionError):
            raise self._fail(f"returned a response to {what} that is not valid JSON "
                             f"({len(payload)} bytes). The service may be degraded; try again later "
                             "or report it if it persists.") from None

    def malformed(self, what: str, detail: str) -> SourceError:
        """The error for a JSON answer that does not have the documented shape."""
        return self._fail(f"returned an answer to {what} that does not have the documented shape ({detail}). "
                          "The API may have changed or the service is degraded; try again later or report it.")
