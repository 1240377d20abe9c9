"""Issue 10: the model endpoint and its key come from the operator; a key goes only to its own endpoint.

Real HTTP: each test starts local OpenAI-like servers that record the
``Authorization`` header of every request they get.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from crase_core.llm import openai_backend
from crase_core.runtime import build_engine
from crase_core.settings.config import load_settings, with_choices

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "fixtures" / "hostile_corpus"
KEY_A = "sk-operator-A-0123456789abcdef"
KEY_B = "sk-operator-B-fedcba9876543210"
PLAN = json.dumps({"subqueries": ["black hole entropy"]})


class Recorder:
    """A local OpenAI-compatible server that answers every chat call with ``content`` and logs headers."""

    def __init__(self) -> None:
        self.auth: list[str | None] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _reply(self, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                recorder.auth.append(self.headers.get("Authorization"))
                self._reply({"object": "list", "data": [{"id": "rec-model", "object": "model"}]})

            def do_POST(self) -> None:  # noqa: N802
                recorder.auth.append(self.headers.get("Authorization"))
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self._reply({"id": "x", "object": "chat.completion", "created": 0, "model": "rec-model",
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": PLAN}}],
                             "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def servers(monkeypatch, tmp_path) -> Iterator[tuple[Recorder, Recorder, Path]]:
    """Two endpoints: A is the operator's default (key in CRASE_API_KEY), B is allowed as 'other' (OTHER_KEY)."""
    a, b = Recorder(), Recorder()
    for var in ("CRASE_SETTINGS", "CRASE_BASE_URL", "CRASE_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CRASE_API_KEY", KEY_A)
    monkeypatch.setenv("OTHER_KEY", KEY_B)
    f = tmp_path / "crase.toml"
    f.write_text(f'[llm]\nbase_url = "{a.url}"\nmax_retries = 0\n'
                 f'[endpoints.other]\nbase_url = "{b.url}"\napi_key_env = "OTHER_KEY"\nmodel = "rec-model"\n')
    yield a, b, f
    a.stop()
    b.stop()


def _plan(settings) -> None:
    openai_backend(settings.runtime.llm).planner.plan("black hole entropy", 2)


def test_the_default_key_goes_to_the_default_endpoint_only(servers):
    a, b, f = servers
    _plan(load_settings(f))
    assert a.auth and set(a.auth) == {f"Bearer {KEY_A}"}
    # the operator's command line points elsewhere without naming a key: the key stays home
    _plan(load_settings(f, explicit={"llm": {"base_url": b.url + "/"}}))  # the same URL as 'other' ...
    assert set(b.auth) == {f"Bearer {KEY_B}"}  # ... gets that endpoint's own key, never A's
    b.auth.clear()
    elsewhere = Recorder()
    try:
        _plan(load_settings(f, explicit={"llm": {"base_url": elsewhere.url, "model": "rec-model"}}))
        assert elsewhere.auth and all(KEY_A not in (h or "") and KEY_B not in (h or "") for h in elsewhere.auth)
    finally:
        elsewhere.stop()
    assert not b.auth


def test_a_named_endpoint_gets_its_own_key_and_nothing_else(servers):
    a, b, f = servers
    chosen = with_choices(load_settings(f), backend="openai", endpoint="other")
    assert chosen.endpoint == "other" and chosen.runtime.llm.base_url == b.url
    _plan(chosen)
    assert b.auth and set(b.auth) == {f"Bearer {KEY_B}"} and not a.auth
    for text in (repr(chosen), json.dumps(chosen.describe(), default=str)):
        assert KEY_A not in text and KEY_B not in text


def test_the_app_offers_endpoint_names_only_and_runs_on_the_chosen_one(servers, monkeypatch, tmp_path):
    import streamlit as st

    a, b, f = servers
    monkeypatch.setenv("CRASE_SETTINGS", str(f))
    monkeypatch.setenv("CRASE_CORPUS", str(HOSTILE))
    monkeypatch.setenv("CRASE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(ROOT)
    st.cache_resource.clear()
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
        at.selectbox(key="rt_backend").set_value("openai").run()
        assert not at.exception
        # no free-text field takes a URL (or anything else) for the model backend: the only ones name the auditor,
        # a corpus folder (opened only inside <cache>/corpora) and a new corpus to import (a checked name, never a
        # path or URL): tests/test_corpora_catalog.py
        assert sorted(t.label for t in at.text_input) == ["Auditor name", "Corpus folder", "Name of the new corpus"]
        assert at.selectbox(key="rt_endpoint").options == ["default", "other (rec-model)"]
        at.selectbox(key="rt_endpoint").set_value("other").run()
        at.text_area(key="query_text").input("holographic entanglement entropy of BTZ black holes")
        next(x for x in at.button if x.label == "Estimate budget").click()
        at.run(timeout=120)
        assert not at.exception
        assert b.auth and set(b.auth) == {f"Bearer {KEY_B}"}  # the engine uses the chosen, allowed endpoint
        assert not a.auth
    finally:
        st.cache_resource.clear()


def test_the_s2_key_goes_only_to_the_configured_graph_api(monkeypatch, fake, tmp_path):
    from crase_core.settings.pipeline import PipelineSettings

    secret = "s2-operator-KEY-77aa"
    monkeypatch.delenv("CRASE_SETTINGS", raising=False)
    monkeypatch.setenv("S2_API_KEY", secret)
    f = tmp_path / "s2.toml"
    f.write_text(f'[s2]\nbase_url = "{fake.base_url}"\nrate = 0\ncache_dir = "{tmp_path / "c1"}"\n')
    from crase_core.pipeline import run_query

    s = load_settings(f, explicit={"runtime": {"source": "s2"}})
    run_query("transformer attention", build_engine(s.runtime), PipelineSettings(m=2, L=1, search_limit=5, k=3))
    assert fake.requests and all(r.headers.get("x-api-key") == secret for r in fake.requests)
    n = len(fake.requests)
    # the same server reached through a URL the operator did not configure: no key
    s = load_settings(explicit={"runtime": {"source": "s2"},
                                "s2": {"base_url": fake.base_url, "rate": 0, "cache_dir": str(tmp_path / "c2")}})
    assert s.runtime.s2_api_key is None
    run_query("transformer attention", build_engine(s.runtime), PipelineSettings(m=2, L=1, search_limit=5, k=3))
    assert len(fake.requests) > n and all(r.headers.get("x-api-key") is None for r in fake.requests[n:])
