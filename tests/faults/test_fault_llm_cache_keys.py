"""Result-cache keys name everything a model answer depends on: two endpoints that report the same model
name never share an answer, and the eval's pinned configuration and the cache keys name the same things."""

from __future__ import annotations

import dataclasses
import json

import pytest
from cli_tools import QUERY, crase, ranked
from tiny_corpus import write_corpus

from crase_core.evaluation.harness import EvalJob
from crase_core.llm import LLMSettings, openai_backend
from crase_core.runtime import RuntimeConfig
from crase_core.testing.fake_openai import FakeOpenAI


@pytest.mark.fault_kind("llm-two-endpoints-one-model-name")
def test_two_endpoints_with_one_model_name_do_not_share_answers(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    a, b = FakeOpenAI(latency=0.0), FakeOpenAI(latency=0.0)
    a.start(), b.start()
    try:
        settings = tmp_path / "settings.toml"
        settings.write_text(f'[llm]\nbase_url = "{a.base_url}"\nmodel = "fake-model"\n'
                            f'[endpoints.b]\nbase_url = "{b.base_url}"\nmodel = "fake-model"\n')
        corpus = write_corpus(tmp_path / "tiny")

        def run(endpoint: str, out: str):
            return crase(capsys, "query", QUERY, "--corpus", corpus, "--quiet", "--backend", "openai", "--config",
                         settings, "--endpoint", endpoint, "--json", tmp_path / out)

        first = run("default", "a.json")
        assert first.code == 0, first.err
        asked_a = len(a.chat_requests())
        assert asked_a > 0
        second = run("b", "b.json")  # was: 0 requests to b, and b's trace held a's cached answers
        assert second.code == 0, second.err
        assert len(b.chat_requests()) == asked_a and len(a.chat_requests()) == asked_a
        trace = json.loads((tmp_path / "b.json").read_text())
        assert trace["counters"]["cache_hits"] == 0 and trace["counters"]["model_calls"] == asked_a
        assert ranked(second.out) == ranked(first.out)  # the two fakes answer alike
        again = run("b", "b2.json")  # b's answers are cached under b
        assert again.code == 0 and len(b.chat_requests()) == asked_a
    finally:
        a.stop(), b.stop()


@pytest.mark.fault_kind("llm-cache-key-and-eval-pin-disagree")
def test_the_cache_key_changes_exactly_when_the_eval_pin_does():
    """Every field of the eval's ``llm`` pin changes every model component's cache identity; settings
    that do not shape an answer (timeout, concurrency, retries) change neither."""
    from crase_core.component_cache import key_identity
    base = LLMSettings(base_url="http://127.0.0.1:9/v1", model="m")

    def ids(s: LLMSettings) -> list[str]:
        backend = openai_backend(s)
        return [key_identity(c) for c in (backend.planner, backend.extractor, backend.scorer)]

    def pin(s: LLMSettings) -> dict:
        job = EvalJob(bench="b.jsonl", out="out", runtime=RuntimeConfig(backend="openai", llm=s))
        return job.fingerprint([])["llm"]

    assert pin(base) == base.answer_settings()
    for change in ({"base_url": "http://127.0.0.1:7/v1"}, {"model": "m2"}, {"temperature": 0.5},
                   {"structured_output": "json_object"}):
        other = dataclasses.replace(base, **change)
        assert pin(other) != pin(base), change
        assert all(x != y for x, y in zip(ids(other), ids(base), strict=True)), change
    for change in ({"timeout": 5.0}, {"concurrency": 2}, {"max_retries": 0},
                   {"base_url": "http://user:secret@127.0.0.1:9/v1"}):  # credentials: the same server
        other = dataclasses.replace(base, **change)
        assert pin(other) == pin(base) and ids(other) == ids(base), change
    assert all("secret" not in i for i in ids(dataclasses.replace(base, base_url="http://u:secret@h:9/v1")))
