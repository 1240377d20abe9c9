"""The model client's HTTP transport: one keep-alive ``aiohttp`` session per batch, errors sorted for the client.

Why ``aiohttp`` (measured, ``benchmarks/llm_throughput.py`` and ``docs/llm_backend.md``):
against a local endpoint answering in 5 ms, the ``openai`` SDK costs ≈ 2.6 ms of
client CPU per call and ``httpx.AsyncClient`` ≈ 1.7 ms, so on two cores the
client, not the server, was the limit. ``aiohttp`` (C-accelerated HTTP parser)
costs ≈ 0.2 ms per call in the bare request loop (≈ 0.4 ms on the full client
path; 360–650 calls/s from concurrency 4 up on a loaded 2-core VM) and carries
the HTTP framing (``Content-Length``, ``chunked``, ``Connection: close``),
keep-alive and TLS, so no HTTP code of our own sits on the path of an API key.
The hand-written asyncio client it replaced cost ≈ 0.07 ms (≈ 0.2 ms full path):
faster where the client is the limit, but a parser of our own to keep secure.

:class:`ConnectionPool` wraps one :class:`aiohttp.ClientSession` on a
:class:`aiohttp.TCPConnector`: at most ``max_idle`` connections open at once (the
client's concurrency), idle ones dropped after ``keepalive_s``; ``timeout`` is the
**total** time of one request, connect to last byte (``ClientTimeout(total=…)``;
the client adds its run deadline on top). TLS is verified against the system's CA
store unless an ``ssl_context`` is given. It follows no redirect
(``allow_redirects=False``) and uses no proxy (``trust_env=False``: ``HTTPS_PROXY``
and ``.netrc`` are not read): the API key goes to the configured host and nowhere
else. A body over :data:`MAX_BODY_BYTES` is refused while it is read. Failures are
:class:`ConnectFailed` (no connection could be made: refused, unknown host, TLS)
and :class:`Dropped` (the connection broke or the answer is not HTTP); a timeout
is :class:`TimeoutError`.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from urllib.parse import urlsplit

import aiohttp
from yarl import URL

MAX_BODY_BYTES = 32 * 1024 * 1024


class InvalidHeader(ValueError):
    """A header value that cannot be sent (a character outside Latin-1, or a line break)."""


class TransportError(Exception):
    """A request that got no complete HTTP answer."""


class ConnectFailed(TransportError):
    """No connection could be made (refused, unknown host, TLS failure)."""


class Dropped(TransportError):
    """The connection broke, or what came back is not a complete HTTP/1.x answer."""


@dataclass
class Response:
    status: int
    headers: Mapping[str, str]  # case-insensitive names (the first value of a repeated header)
    body: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()


class ConnectionPool:
    """Keep-alive connections to one base URL; ``request`` is safe to call from many tasks at once.

    Create, use and :meth:`close` it inside one running event loop.
    """

    def __init__(self, base_url: str, headers: dict[str, str], *, max_idle: int = 64, keepalive_s: float = 4.0,
                 timeout: float | None = None, ssl_context: ssl.SSLContext | None = None):
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base URL must be http(s)://host[:port]/path")
        fixed = {"Accept": "application/json", "Accept-Encoding": "identity", "User-Agent": "crase-explorer",
                 **headers}
        for k, v in fixed.items():
            try:
                f"{k}: {v}".encode("latin-1")
            except UnicodeEncodeError:
                raise InvalidHeader(f"the HTTP header {k} has characters outside Latin-1") from None
            if "\r" in v or "\n" in v:
                raise InvalidHeader(f"the HTTP header {k} contains a line break")
        self._headers = fixed
        self._origin = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"  # never user:password@ in the URL
        self.base_path = parts.path.rstrip("/")
        self.query = parts.query
        self.tls = parts.scheme == "https"
        self.max_idle = max_idle
        self.keepalive_s = keepalive_s
        self.timeout = timeout
        self._ssl: ssl.SSLContext | bool = (ssl_context or True) if self.tls else False
        self._urls: dict[str, URL] = {}
        self._session: aiohttp.ClientSession | None = None
        self.opened = 0  # connections made (tests and benchmarks check reuse)

    def url(self, path: str) -> str:
        return self.base_path + path + (f"?{self.query}" if self.query else "")

    def _url(self, path: str) -> URL:
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = URL(self._origin + self.url(path), encoded=True)
        return url

    def _open(self) -> aiohttp.ClientSession:
        async def counted(session: aiohttp.ClientSession, ctx: SimpleNamespace,
                          params: aiohttp.TraceConnectionCreateEndParams) -> None:
            self.opened += 1

        trace = aiohttp.TraceConfig()
        trace.on_connection_create_end.append(counted)
        connector = aiohttp.TCPConnector(limit=self.max_idle, limit_per_host=0, keepalive_timeout=self.keepalive_s,
                                         ssl=self._ssl)
        return aiohttp.ClientSession(
            connector=connector, headers=self._headers, trust_env=False, trace_configs=[trace],
            timeout=aiohttp.ClientTimeout(total=self.timeout), raise_for_status=False)

    async def request(self, method: str, path: str, body: bytes | None = None,
                      content_type: str = "application/json") -> Response:
        """One exchange; raises :class:`ConnectFailed`, :class:`Dropped` or :class:`TimeoutError`.

        Cancellation (the caller's deadline) closes the connection instead of returning it to the pool.
        """
        if self._session is None:
            self._session = self._open()
        try:
            async with self._session.request(
                    method, self._url(path), data=body, allow_redirects=False,
                    headers=None if body is None else {"Content-Type": content_type}) as r:
                n = r.content_length
                if n is not None and n > MAX_BODY_BYTES:
                    raise Dropped(f"the answer is {n:,} bytes (the limit is {MAX_BODY_BYTES // 2**20} MiB)")
                if n is not None and "Content-Encoding" not in r.headers:
                    data = await r.read()  # the parser stops at Content-Length
                else:
                    data = await _read_capped(r.content)
                return Response(r.status, r.headers, data)
        except TimeoutError:
            raise
        except aiohttp.ClientConnectorCertificateError as e:
            reason = getattr(e.certificate_error, "reason", None) or type(e.certificate_error).__name__
            raise ConnectFailed(f"TLS failed ({reason})") from None
        except aiohttp.ClientConnectorSSLError as e:
            reason = getattr(e.os_error, "reason", None) or type(e.os_error).__name__
            raise ConnectFailed(f"TLS failed ({reason})") from None
        except aiohttp.ClientConnectorError as e:
            raise ConnectFailed(_os_why(e.os_error)) from None
        except aiohttp.ServerDisconnectedError:
            raise Dropped("the server closed the connection without answering") from None
        except aiohttp.ClientPayloadError as e:
            cause = e.__cause__ or e
            if "not enough data" in str(cause).lower() or "not completed" in str(e).lower():
                raise Dropped("the server closed the connection before the answer was complete") from None
            raise Dropped(f"the answer's body is malformed ({_short(cause)})") from None
        except aiohttp.ClientResponseError as e:  # the parser rejected the answer
            raise Dropped(f"the answer is not valid HTTP/1.x ({_short(e.message)})") from None
        except aiohttp.ClientOSError as e:
            raise Dropped(_os_why(e)) from None
        except (aiohttp.ClientError, OSError) as e:
            raise Dropped(_short(e) or type(e).__name__) from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def _read_capped(stream: aiohttp.StreamReader) -> bytes:
    """A body without a plain ``Content-Length`` (chunked, until close, or compressed), refused past the cap."""
    parts: list[bytes] = []
    total = 0
    async for chunk in stream.iter_any():
        total += len(chunk)
        if total > MAX_BODY_BYTES:
            raise Dropped(f"the answer is larger than {MAX_BODY_BYTES // 2**20} MiB")
        parts.append(chunk)
    return b"".join(parts)


def _os_why(e: BaseException) -> str:
    """``ConnectionRefusedError: Connect call failed`` style: the OS error's kind and text."""
    strerror = getattr(e, "strerror", None)
    return type(e).__name__ + (f": {strerror}" if strerror else "")


def _short(x: object, limit: int = 120) -> str:
    text = " ".join(str(x).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
