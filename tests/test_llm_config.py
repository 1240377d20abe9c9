"""Settings, secrets and endpoint failures of the ``openai`` backend.

Failure modes are exercised over real HTTP: a closed port (connection refused)
and a small local HTTP server that answers like an OpenAI-compatible endpoint
in trouble (status codes and error bodies as documented by OpenAI's API), since
a healthy llama.cpp server cannot be made to return them on demand.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from crase_core.errors import InputError, ModelError
from crase_core.llm import LLMSettings, openai_backend
from crase_core.llm.localserver import free_port
from crase_core.records import Claim, Paper
from crase_core.settings.config import add_arguments, explicit_values, load_settings, settings_from_args
from crase_core.settings.llm import redact

SECRET = "sk-test-SECRET-0123456789abcdef"
CLAIMS = [Claim("c1", "THEORETICAL", "Gauge anomalies cancel in ten dimensions.", "anomalies cancel")]
PAPER = Paper("p1", "Anomalies", "We show that gauge anomalies cancel in ten dimensions. More text here.")


class _Stub(BaseHTTPRequestHandler):
    behaviour: dict = {}
    seen: list = []

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass

    def _reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        self._reply(200, {"object": "list", "data": [{"id": "stub-model", "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        self.seen.append({"auth": self.headers.get("Authorization"), "body": body})
        b = self.behaviour
        if b.get("sleep"):
            time.sleep(b["sleep"])
        if b.get("reject_response_format") and "response_format" in body:
            return self._reply(400, {"error": {"message": "response_format is not supported", "type": "invalid_request_error"}})
        status = b.get("status", 200)
        if status != 200:
            return self._reply(status, {"error": {"message": b.get("message", "error"), "type": "server_error"}})
        content = b.get("content", '{"matrix": [[0.5]]}')
        self._reply(200, {
            "id": "x", "object": "chat.completion", "created": 0, "model": body.get("model"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        })


@pytest.fixture()
def stub():
    _Stub.behaviour = {}
    _Stub.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", _Stub
    server.shutdown()
    server.server_close()


def _settings(base_url: str, **kw) -> LLMSettings:
    kw.setdefault("model", "stub-model")
    kw.setdefault("max_retries", 0)
    return LLMSettings(base_url=base_url, api_key=SECRET, **kw)


# --- configuration -------------------------------------------------------------------------------


def test_cli_flags_become_settings_without_the_key(monkeypatch):
    monkeypatch.delenv("CRASE_BASE_URL", raising=False)
    monkeypatch.delenv("CRASE_MODEL", raising=False)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--base-url", "http://h:1/v1", "--model", "m", "--api-key-env", "MY_KEY",
                              "--temperature", "0.2", "--concurrency", "3", "--timeout", "9"])
    assert explicit_values(args) == {"llm": {"base_url": "http://h:1/v1", "model": "m", "api_key_env": "MY_KEY",
                                             "temperature": 0.2, "concurrency": 3, "timeout": 9.0}}
    monkeypatch.setenv("MY_KEY", SECRET)
    settings = settings_from_args(args)
    s = settings.runtime.llm
    assert (s.base_url, s.model, s.temperature, s.concurrency, s.timeout) == ("http://h:1/v1", "m", 0.2, 3, 9.0)
    assert s.key == SECRET  # --api-key-env binds that key to this --base-url on the operator's command line
    for text in (repr(s), json.dumps(s.describe()), repr(settings), json.dumps(settings.describe(), default=str)):
        assert SECRET not in text


def test_key_sources(monkeypatch, tmp_path):
    for var in ("CRASE_API_KEY", "OPENAI_API_KEY", "CRASE_BASE_URL", "CRASE_SETTINGS"):
        monkeypatch.delenv(var, raising=False)
    assert load_settings().runtime.llm.api_key in (None, "")
    monkeypatch.setenv("OPENAI_API_KEY", "from-openai-var")
    assert load_settings().runtime.llm.api_key == "from-openai-var"
    monkeypatch.setenv("CRASE_API_KEY", "from-crase-var")
    assert load_settings().runtime.llm.api_key == "from-crase-var"
    assert LLMSettings().api_key is None  # the default variables belong to the configured endpoint, not to any URL
    f = tmp_path / "llm.toml"
    f.write_text(f'api_key = "{SECRET}"\n')
    assert LLMSettings(api_key_env="UNSET_VAR_X", settings_file=str(f)).api_key == SECRET
    with pytest.raises(InputError, match="UNSET_VAR_X is not set"):
        LLMSettings(api_key_env="UNSET_VAR_X")
    f.write_text(f"api_key = {SECRET}\n")  # broken TOML: the message must not quote the secret
    with pytest.raises(InputError) as e:
        LLMSettings(api_key_env="UNSET_VAR_X", settings_file=str(f))
    assert SECRET not in str(e.value) and "not valid TOML" in str(e.value)


@pytest.mark.parametrize(("options", "message"), [
    ({"base_url": "localhost:8080"}, "not an http"),
    ({"temperature": 3}, "temperature"),
    ({"concurrency": 0}, "concurrency"),
    ({"timeout": 0}, "timeout"),
    ({"structured_output": "xml"}, "structured_output"),
])
def test_bad_settings_are_input_errors(options, message):
    with pytest.raises(InputError, match=message):
        LLMSettings.from_options(options)


def test_redact_removes_key_bearer_and_url_credentials():
    text = f"key {SECRET} / Bearer abcdefghijklmnop / http://user:pw@host:9/v1?key=zz"
    out = redact(text, SECRET, "http://user:pw@host:9/v1?key=zz")
    assert SECRET not in out and "abcdefghijklmnop" not in out and "pw@" not in out and "key=zz" not in out
    assert "http://host:9/v1" in out


def test_identity_names_model_and_prompt_version_not_key(stub):
    url, _ = stub
    b = openai_backend(_settings(url))
    assert b.scorer.identity.startswith("openai:stub-model@entail-group-v1+")  # the default: grouped
    assert openai_backend(_settings(url, entailment_prompt="edge")).scorer.identity.startswith(
        "openai:stub-model@entail-v1+")
    assert b.extractor.identity.startswith("openai:stub-model@claims-")
    assert SECRET not in json.dumps(b.describe())
    warm = openai_backend(_settings(url, temperature=0.7))
    assert warm.scorer.identity.endswith(",t=0.7")


def test_model_is_detected_when_the_server_lists_one(stub):
    url, _ = stub
    assert openai_backend(_settings(url, model=None)).scorer.identity.startswith("openai:stub-model@")


# --- endpoint failures --------------------------------------------------------------------------------


def test_connection_refused_is_one_clear_error_at_plan_time():
    url = f"http://127.0.0.1:{free_port()}/v1"
    b = openai_backend(_settings(url, max_retries=1))
    with pytest.raises(ModelError) as e:
        b.planner.plan("tachyon condensation", 3)
    msg = str(e.value)
    assert url in msg and "server is running" in msg and SECRET not in msg
    with pytest.raises(ModelError, match="cannot reach"):
        b.extractor.extract_many([PAPER, PAPER])


def test_404_names_the_model(stub):
    url, handler = stub
    handler.behaviour = {"status": 404, "message": "model 'nope' not found"}
    with pytest.raises(ModelError) as e:
        openai_backend(_settings(url, model="nope")).scorer.score_many([(CLAIMS, CLAIMS)])
    assert "404" in str(e.value) and "'nope'" in str(e.value) and "--model" in str(e.value)


def test_401_points_at_the_key_without_echoing_it(stub):
    url, handler = stub
    handler.behaviour = {"status": 401, "message": f"Incorrect API key provided: {SECRET}"}
    with pytest.raises(ModelError) as e:
        openai_backend(_settings(url)).planner.plan("q words", 2)
    assert "API key" in str(e.value) and SECRET not in str(e.value)
    assert handler.seen[0]["auth"] == f"Bearer {SECRET}"  # the key goes to the endpoint, and only there


def test_5xx_is_recorded_per_edge_then_fails_fast(stub):
    url, handler = stub
    handler.behaviour = {"status": 503, "message": "overloaded"}
    one = openai_backend(_settings(url, max_retries=1, entailment_prompt="edge")).scorer.score_many([(CLAIMS, CLAIMS)])
    assert one[0].error.startswith("endpoint: ") and "HTTP 503" in one[0].error and one[0].matrix == []
    assert one[0].usage.calls == 2  # one try plus one retry
    with pytest.raises(ModelError, match="3 model calls in a row"):
        openai_backend(_settings(url, fail_fast_after=3, concurrency=1, entailment_prompt="edge")).scorer.score_many(
            [(CLAIMS, CLAIMS)] * 10)
    assert len(handler.seen) == 2 + 3  # stopped after three failures instead of ten


def test_timeout_is_recorded_with_advice(stub):
    url, handler = stub
    handler.behaviour = {"sleep": 1.5}
    res = openai_backend(_settings(url, timeout=0.3)).extractor.extract_many([PAPER])
    assert "within 0.3 s" in res[0].error and "--timeout" in res[0].error and res[0].claims == []


def test_server_without_response_format_falls_back_to_plain_json(stub):
    url, handler = stub
    handler.behaviour = {"reject_response_format": True, "content": '{"matrix": [[0.25]]}'}
    (em,) = openai_backend(_settings(url)).scorer.score_many([(CLAIMS, CLAIMS)])
    assert em.error is None and em.matrix == [[0.25]]
    assert any("rejected response_format" in n for n in em.notes)
    assert "response_format" in handler.seen[0]["body"] and "response_format" not in handler.seen[1]["body"]
    assert em.usage.calls == 2 and em.usage.prompt_tokens == 11 and em.usage.completion_tokens == 7


def test_out_of_range_answer_is_retried_then_recorded(stub):
    url, handler = stub
    handler.behaviour = {"content": '{"matrix": [[200]]}'}
    (em,) = openai_backend(_settings(url, max_retries=2, entailment_prompt="edge")).scorer.score_many([(CLAIMS, CLAIMS)])
    assert em.matrix == [] and em.error.startswith("model output: no usable answer in 3 attempt(s)")
    assert "outside [0, 1]" in em.error and em.usage.calls == 3
    # the retry shows the model its answer and what was wrong with it
    assert handler.seen[1]["body"]["messages"][-1]["content"].startswith("That answer cannot be used: row 1: score 200")
