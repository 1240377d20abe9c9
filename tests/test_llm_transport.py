"""The model client's HTTP transport (aiohttp) against a real ASGI server (uvicorn), as vLLM's OpenAI server is built.

vLLM serves its OpenAI API with uvicorn; Ollama and llama.cpp are other HTTP/1.1
servers that answer with ``Content-Length`` or ``chunked`` bodies. These tests run
uvicorn on 127.0.0.1 and check what the client relies on: both body framings
(small and 3 MB), keep-alive and ``Connection: close``, the body size cap, that a
redirect is not followed and no proxy from the environment is used (the key goes
to the configured host only), that an answer that is not HTTP is :class:`Dropped`,
TLS verified by default, and that the full client path works on top of it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter

import pytest

uvicorn = pytest.importorskip("uvicorn")
starlette_apps = pytest.importorskip("starlette.applications")
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from crase_core.errors import ModelError  # noqa: E402
from crase_core.llm import LLMSettings, openai_backend, transport  # noqa: E402
from crase_core.llm.localserver import free_port  # noqa: E402
from crase_core.llm.transport import ConnectFailed, ConnectionPool, Dropped  # noqa: E402
from crase_core.records import Claim  # noqa: E402

MATRIX = {"matrix": [[0.25, 1.0]]}
BIG = "x" * 3_000_000  # a 3 MB answer (a long completion)
HITS: Counter[str] = Counter()  # requests each path received
SEEN_HEADERS: list[dict[str, str]] = []


def _completion(content: str) -> dict:
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}}


async def chat(request: Request) -> Response:
    HITS[request.url.path] += 1
    SEEN_HEADERS.append(dict(request.headers))
    await request.json()
    path = request.url.path
    if path.startswith("/redirect"):
        return RedirectResponse(str(request.url).replace("/redirect", ""), status_code=307)
    data = _completion(BIG if path.startswith(("/big", "/chunkedbig")) else json.dumps(MATRIX))
    if path.startswith("/chunked"):
        raw = json.dumps(data).encode()
        step = 7 if len(raw) < 10_000 else 65_536

        async def parts():
            for i in range(0, len(raw), step):
                yield raw[i : i + step]

        return StreamingResponse(parts(), media_type="application/json")
    if path.startswith("/close"):
        return JSONResponse(data, headers={"Connection": "close"})
    return JSONResponse(data)


async def models(request: Request) -> Response:
    HITS[request.url.path] += 1
    if request.url.path.startswith("/redirect"):
        return RedirectResponse(str(request.url).replace("/redirect", ""), status_code=302)
    return JSONResponse({"object": "list", "data": [{"id": "uvicorn-model", "object": "model"}]})


PREFIXES = ("", "/chunked", "/close", "/big", "/chunkedbig", "/redirect")
ROUTES = [Route(f"{prefix}/v1/chat/completions", chat, methods=["POST"]) for prefix in PREFIXES]
ROUTES += [Route(f"{prefix}/v1/models", models) for prefix in PREFIXES]


@pytest.fixture(scope="module")
def server():
    port = free_port()
    config = uvicorn.Config(starlette_apps.Starlette(routes=ROUTES), host="127.0.0.1", port=port, log_level="error")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.started
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(10)


def _exchange(base: str, n: int) -> tuple[list[dict], int, dict[str, str], int]:
    """n POSTs on one pool: the answers, connections opened, the last answer's headers and body size."""
    async def go() -> tuple[list[dict], int, dict[str, str], int]:
        pool = ConnectionPool(base, {"Authorization": "Bearer k"}, max_idle=2)
        out = []
        try:
            for _ in range(n):
                r = await pool.request("POST", "/chat/completions", b'{"messages": []}')
                assert r.status == 200
                out.append(json.loads(r.body))
        finally:
            await pool.close()
        return out, pool.opened, {k.lower(): v for k, v in r.headers.items()}, len(r.body)

    return asyncio.run(go())


@pytest.mark.parametrize(("prefix", "connections"), [("", 1), ("/chunked", 1), ("/close", 3)])
def test_body_framings_and_keep_alive(server, prefix, connections):
    SEEN_HEADERS.clear()
    answers, opened, headers, _ = _exchange(f"{server}{prefix}/v1", 3)
    assert (headers.get("transfer-encoding") == "chunked") == (prefix == "/chunked")
    assert (headers.get("connection") == "close") == (prefix == "/close")
    assert all(a["choices"][0]["message"]["content"] == json.dumps(MATRIX) for a in answers)
    assert opened == connections  # one kept-alive connection; a new one after each "Connection: close"
    sent = SEEN_HEADERS[-1]
    assert sent["authorization"] == "Bearer k" and sent["content-type"] == "application/json"
    assert sent["accept-encoding"] == "identity" and sent["user-agent"] == "crase-explorer"


@pytest.mark.parametrize("prefix", ["/big", "/chunkedbig"])
def test_a_3_mb_answer_arrives_whole_in_both_framings(server, prefix):
    answers, opened, headers, size = _exchange(f"{server}{prefix}/v1", 2)
    assert size > 3_000_000 and (headers.get("transfer-encoding") == "chunked") == (prefix == "/chunkedbig")
    assert all(a["choices"][0]["message"]["content"] == BIG for a in answers) and opened == 1


@pytest.mark.parametrize(("prefix", "message"), [("/big", r"the answer is 3,000,\d+ bytes \(the limit is 1 MiB\)"),
                                                 ("/chunkedbig", r"the answer is larger than 1 MiB")])
def test_a_body_over_the_cap_is_refused(server, monkeypatch, prefix, message):
    monkeypatch.setattr(transport, "MAX_BODY_BYTES", 2**20)
    with pytest.raises(Dropped, match=message):
        _exchange(f"{server}{prefix}/v1", 1)


def test_redirects_are_not_followed(server):
    """A 3xx comes back as it is (the key is not sent to the Location); the client names it as a fatal setting."""
    HITS.clear()

    async def go() -> tuple[int, str]:
        pool = ConnectionPool(f"{server}/redirect/v1", {"Authorization": "Bearer k"})
        try:
            r = await pool.request("POST", "/chat/completions", b'{"messages": []}')
        finally:
            await pool.close()
        return r.status, r.headers["location"]

    status, location = asyncio.run(go())
    assert status == 307 and location == f"{server}/v1/chat/completions"
    assert dict(HITS) == {"/redirect/v1/chat/completions": 1}  # the target was never asked
    with pytest.raises(ModelError, match=r"answered HTTP 302 \(a redirect, which is not followed"):
        openai_backend(LLMSettings(base_url=f"{server}/redirect/v1", model=None))
    assert HITS["/v1/models"] == 0


def test_no_proxy_from_the_environment_is_used(server, monkeypatch):
    """With every proxy variable pointing at a listening socket, the request still goes straight to the host."""
    proxied: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        proxied.append(await reader.read(200))
        writer.close()

    async def go(*, control: bool) -> int | None:
        srv = await asyncio.start_server(proxy, "127.0.0.1", 0)
        address = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
        for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.setenv(var, address)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        try:
            if control:  # the same request through an aiohttp session that reads the environment: proxied
                import aiohttp

                async with aiohttp.ClientSession(trust_env=True) as s:
                    with pytest.raises(aiohttp.ClientError):
                        await s.post(f"{server}/v1/chat/completions", data=b"{}")
                return None
            pool = ConnectionPool(f"{server}/v1", {"Authorization": "Bearer k"})
            try:
                return (await pool.request("POST", "/chat/completions", b'{"messages": []}')).status
            finally:
                await pool.close()
        finally:
            srv.close()
            await srv.wait_closed()

    assert asyncio.run(go(control=False)) == 200 and proxied == []
    asyncio.run(go(control=True))
    assert len(proxied) == 1 and proxied[0].startswith(b"POST http://127.0.0.1")  # the control can fail


@pytest.mark.parametrize(("answer", "message"), [
    (b"SSH-2.0-OpenSSH_9.6\r\n", r"the answer is not valid HTTP/1\.x"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"choices\"", "before the answer was complete"),
    (b"", "the server closed the connection without answering"),
])
def test_answers_that_are_not_complete_http_are_dropped(answer, message):
    async def go() -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(1000)
            writer.write(answer)
            await writer.drain()
            writer.close()

        srv = await asyncio.start_server(serve, "127.0.0.1", 0)
        pool = ConnectionPool(f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/v1", {})
        try:
            await pool.request("POST", "/chat/completions", b"{}")
        finally:
            await pool.close()
            srv.close()
            await srv.wait_closed()

    with pytest.raises(Dropped, match=message):
        asyncio.run(go())


@pytest.mark.parametrize("prefix", ["", "/chunked", "/close"])
def test_full_client_on_uvicorn(server, prefix):
    claims_a = [Claim("c1", "THEORETICAL", "Gauge anomalies cancel.", "x")]
    claims_b = [Claim("c1", "THEORETICAL", "Anomalies cancel.", "y"), Claim("c2", "EMPIRICAL", "Data agree.", "z")]
    backend = openai_backend(LLMSettings(base_url=f"{server}{prefix}/v1", model=None, max_retries=0,
                                         entailment_prompt="edge"))  # five items, five requests
    assert backend.scorer.identity.startswith("openai:uvicorn-model@")  # the model list was read too
    results = backend.scorer.score_many([(claims_a, claims_b)] * 5)
    assert all(r.error is None and r.matrix == [[0.25, 1.0]] for r in results)
    assert all(r.usage.calls == 1 and r.usage.prompt_tokens == 12 and r.usage.completion_tokens == 5 for r in results)


def test_connection_refused_is_connect_failed():
    async def go() -> None:
        pool = ConnectionPool(f"http://127.0.0.1:{free_port()}/v1", {})
        try:
            await pool.request("GET", "/models")
        finally:
            await pool.close()

    with pytest.raises(ConnectFailed, match="ConnectionRefusedError"):
        asyncio.run(go())


def test_unknown_host_is_connect_failed():
    async def go() -> None:
        pool = ConnectionPool("http://no-such-host.invalid/v1", {})
        try:
            await pool.request("GET", "/models")
        finally:
            await pool.close()

    with pytest.raises(ConnectFailed, match="gaierror"):
        asyncio.run(go())


def test_a_key_that_cannot_be_a_header_is_one_clear_error():
    for key in ("sk-\u00e9\u4e2d", "sk-abc\r\nX-Injected: 1"):
        with pytest.raises(ModelError, match="cannot be sent in an HTTP header"):
            openai_backend(LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key=key)).scorer.score_many(
                [([Claim("c1", "THEORETICAL", "a", "x")], [Claim("c1", "THEORETICAL", "b", "y")])])


def test_tls_checks_the_certificate_and_then_works(tmp_path):
    """https: a self-signed certificate is refused by default (one clear error); trusted, the exchange works."""
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(str(cert), str(key))
    from crase_core.testing.fake_openai import FakeOpenAI

    with FakeOpenAI(latency=0.0, tls=server_ctx) as fake:
        assert fake.base_url.startswith("https://127.0.0.1:")
        with pytest.raises(ModelError, match=r"cannot reach the model endpoint https://127\.0\.0\.1:\d+/v1 "
                                             r"\(TLS failed \(CERTIFICATE_VERIFY_FAILED\)\)"):
            openai_backend(LLMSettings(base_url=fake.base_url, model=None))

        async def go() -> dict:
            trusting = ssl.create_default_context(cafile=str(cert))
            pool = ConnectionPool(fake.base_url, {}, ssl_context=trusting)
            try:
                r = await pool.request("POST", "/chat/completions", json.dumps(
                    {"messages": [{"role": "user",
                                   "content": 'x {"subqueries": [...]} <query>tls check</query>'}]}).encode())
            finally:
                await pool.close()
            return json.loads(r.body)

        answer = asyncio.run(go())
        assert json.loads(answer["choices"][0]["message"]["content"]) == {"subqueries": ["tls check"]}
