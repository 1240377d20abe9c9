"""The model client's HTTP/1.1 transport against a real ASGI server (uvicorn), as vLLM's OpenAI server is built.

vLLM serves its OpenAI API with uvicorn; Ollama and llama.cpp are other HTTP/1.1
servers that answer with ``Content-Length`` or ``chunked`` bodies. These tests run
uvicorn on 127.0.0.1 and check that the transport reads both body framings, keeps
connections alive, honours ``Connection: close``, and that the full client path
works on top of it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

uvicorn = pytest.importorskip("uvicorn")
starlette_apps = pytest.importorskip("starlette.applications")
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse, Response, StreamingResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from crase_core.llm import LLMSettings, openai_backend  # noqa: E402
from crase_core.llm.localserver import free_port  # noqa: E402
from crase_core.llm.transport import ConnectFailed, ConnectionPool  # noqa: E402
from crase_core.records import Claim  # noqa: E402

MATRIX = {"matrix": [[0.25, 1.0]]}


def _completion(content: str) -> dict:
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}}


async def chat(request: Request) -> Response:
    body = await request.json()
    mode = request.query_params.get("mode") or body.get("user", "")
    data = _completion(json.dumps(MATRIX))
    if mode == "chunked" or request.url.path.startswith("/chunked"):
        raw = json.dumps(data).encode()

        async def parts():
            for i in range(0, len(raw), 7):
                yield raw[i : i + 7]

        return StreamingResponse(parts(), media_type="application/json")
    if request.url.path.startswith("/close"):
        return JSONResponse(data, headers={"Connection": "close"})
    return JSONResponse(data)


async def models(request: Request) -> Response:
    return JSONResponse({"object": "list", "data": [{"id": "uvicorn-model", "object": "model"}]})


ROUTES = [Route(f"{prefix}/v1/chat/completions", chat, methods=["POST"]) for prefix in ("", "/chunked", "/close")]
ROUTES += [Route(f"{prefix}/v1/models", models) for prefix in ("", "/chunked", "/close")]


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


def _exchange(base: str, n: int) -> tuple[list[dict], int, dict[str, str]]:
    async def go() -> tuple[list[dict], int, dict[str, str]]:
        pool = ConnectionPool(base, {"Authorization": "Bearer k"}, max_idle=2)
        out = []
        for _ in range(n):
            r = await pool.request("POST", "/chat/completions", b'{"messages": []}')
            assert r.status == 200
            out.append(json.loads(r.body))
        await pool.close()
        return out, pool.opened, r.headers

    return asyncio.run(go())


@pytest.mark.parametrize(("prefix", "connections"), [("", 1), ("/chunked", 1), ("/close", 3)])
def test_body_framings_and_keep_alive(server, prefix, connections):
    answers, opened, headers = _exchange(f"{server}{prefix}/v1", 3)
    assert (headers.get("transfer-encoding") == "chunked") == (prefix == "/chunked")
    assert all(a["choices"][0]["message"]["content"] == json.dumps(MATRIX) for a in answers)
    assert opened == connections  # one kept-alive connection; a new one after each "Connection: close"


@pytest.mark.parametrize("prefix", ["", "/chunked", "/close"])
def test_full_client_on_uvicorn(server, prefix):
    claims_a = [Claim("c1", "THEORETICAL", "Gauge anomalies cancel.", "x")]
    claims_b = [Claim("c1", "THEORETICAL", "Anomalies cancel.", "y"), Claim("c2", "EMPIRICAL", "Data agree.", "z")]
    backend = openai_backend(LLMSettings(base_url=f"{server}{prefix}/v1", model=None, max_retries=0))
    assert backend.scorer.identity.startswith("openai:uvicorn-model@")  # the model list was read too
    results = backend.scorer.score_many([(claims_a, claims_b)] * 5)
    assert all(r.error is None and r.matrix == [[0.25, 1.0]] for r in results)
    assert all(r.usage.calls == 1 and r.usage.prompt_tokens == 12 and r.usage.completion_tokens == 5 for r in results)


def test_connection_refused_is_connect_failed():
    async def go() -> None:
        pool = ConnectionPool(f"http://127.0.0.1:{free_port()}/v1", {})
        await pool.request("GET", "/models")

    with pytest.raises(ConnectFailed, match="ConnectionRefusedError"):
        asyncio.run(go())


def test_tls_checks_the_certificate_and_then_works(tmp_path):
    """https: a self-signed certificate is refused by default (one clear error); trusted, the exchange works."""
    import shutil
    import ssl
    import subprocess
    import sys
    from pathlib import Path

    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(str(cert), str(key))
    sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "llm"))
    from fake_openai import FakeOpenAI

    from crase_core.errors import ModelError

    with FakeOpenAI(latency=0.0, tls=server_ctx) as fake:
        assert fake.base_url.startswith("https://127.0.0.1:")
        with pytest.raises(ModelError, match=r"cannot reach the model endpoint https://127\.0\.0\.1:\d+/v1 "
                                             r"\(TLS failed \(CERTIFICATE_VERIFY_FAILED\)\)"):
            openai_backend(LLMSettings(base_url=fake.base_url, model=None))

        async def go() -> dict:
            trusting = ssl.create_default_context(cafile=str(cert))
            pool = ConnectionPool(fake.base_url, {}, ssl_context=trusting)
            r = await pool.request("POST", "/chat/completions", json.dumps(
                {"messages": [{"role": "user", "content": 'x {"subqueries": [...]} <query>tls check</query>'}]}).encode())
            await pool.close()
            return json.loads(r.body)

        answer = asyncio.run(go())
        assert json.loads(answer["choices"][0]["message"]["content"]) == {"subqueries": ["tls check"]}
