"""Bad input on the grouped entailment path (issue 12, "Bad input"): a slow endpoint, garbage answers, HTTP 429,
an endpoint that dies mid-run. Each time the budget holds, the run finishes with offline decisions for what
the model did not answer (each edge says so), the trace says what failed, and a rerun asks only that.

Real HTTP to ``crase_core/testing/fake_openai.py`` on 127.0.0.1, the tiny corpus, the default (grouped)
entailment prompt; faults are served to grouped calls only (``match='<cited id='``)."""

from __future__ import annotations

import time

import pytest

import crase_core.llm.components as components
from crase_core.backends import offline_backend
from crase_core.cache import ResultCache
from crase_core.llm import LLMSettings, openai_backend
from crase_core.pipeline import Engine, run_query
from crase_core.settings.pipeline import PipelineSettings
from crase_core.store.termstats import TermStats
from crase_core.testing.fake_openai import FakeOpenAI

QUERY = "black hole microstates anti-de Sitter"
BUDGET = 40
SETTINGS = PipelineSettings(m=3, L=2, llm_budget=BUDGET, llm_token_budget=0)
GROUPED = "<cited id="


def engine(server: FakeOpenAI, tiny_source, cache: ResultCache, **kw) -> Engine:
    kw.setdefault("max_retries", 0)
    kw.setdefault("concurrency", 2)
    backend = openai_backend(LLMSettings(base_url=server.base_url, model="fake-model", **kw),
                             fallback=offline_backend(TermStats.from_index(tiny_source.text_index)))
    return Engine(tiny_source, backend, cache)


def grouped_calls(server: FakeOpenAI) -> int:
    return sum(1 for r in server.chat_requests() if GROUPED in str(r.body))


def calls_for(edges) -> int:  # type: ignore[no-untyped-def]
    """Grouped calls that ask these edges again: one per citing paper (≤ 8 cited papers a call)."""
    return sum(-(-sum(1 for e in edges if e.citing == u) // 8) for u in {e.citing for e in edges})


@pytest.mark.fault_kind("llm-group-timeout-breaker")
def test_a_slow_endpoint_times_out_the_groups_the_run_finishes_and_the_rerun_asks_only_them(llm, tiny_source, tmp_path):
    cache = ResultCache(tmp_path / "rc")
    llm.add("slow_first_byte", count=-1, delay=2.0, match=GROUPED)
    t0 = time.monotonic()
    t = run_query(QUERY, engine(llm, tiny_source, cache, timeout=0.4, fail_fast_after=2), SETTINGS)
    assert time.monotonic() - t0 < 30
    assert t.results and t.counters.model_calls <= BUDGET
    # every attempt is counted, also one the breaker cut before the server read it
    assert len(llm.chat_requests()) <= t.counters.model_calls <= BUDGET
    timed_out = [e for e in t.edges if "within 0.4 s" in e.scorer_reason or "failed mid-run" in e.scorer_reason]
    assert timed_out and all(e.scorer == "offline" for e in timed_out)
    assert any("failed mid-run" in w or "within 0.4 s" in w for w in t.warnings)
    assert not any(e.scorer == "model" for e in t.edges)  # no grouped call was answered in time
    # the endpoint is fast again: the rerun asks only the matrices (plan and claims are cached), grouped
    llm.clear()
    n = len(llm.chat_requests())
    again = run_query(QUERY, engine(llm, tiny_source, cache), SETTINGS)
    asked = llm.chat_requests()[n:]
    assert asked and all(GROUPED in str(r.body) for r in asked)
    assert again.counters.model_calls == len(asked) <= BUDGET
    assert all(e.scorer == "model" for e in again.edges if (e.citing, e.cited) in
               {(f.citing, f.cited) for f in timed_out})


@pytest.mark.fault_kind("llm-group-malformed-block")
def test_garbage_blocks_fail_only_their_edges_and_only_they_are_retried(llm, tiny_source, tmp_path):
    cache = ResultCache(tmp_path / "rc")
    llm.add("group_block_wrong", count=-1, match=GROUPED)  # every grouped answer: the last block is 1 × 1
    t = run_query(QUERY, engine(llm, tiny_source, cache), SETTINGS)
    assert t.counters.model_calls == len(llm.chat_requests()) <= BUDGET
    bad = [e for e in t.edges if "unusable" in e.scorer_reason]
    good = [e for e in t.edges if e.scorer == "model"]
    assert bad and good  # a bad block does not take the good ones of its call with it
    assert all(e.scorer == "offline" and "P" in e.scorer_reason for e in bad)
    assert t.counters.model_failed == len(bad)
    assert any("were unusable and were decided offline" in w for w in t.warnings)
    # a plain rerun reuses the cached failures (no call); --retry-failures asks only the failed edges
    n = len(llm.chat_requests())
    assert run_query(QUERY, engine(llm, tiny_source, cache), SETTINGS).counters.model_calls == 0
    llm.clear()
    fixed = run_query(QUERY, engine(llm, tiny_source, cache), SETTINGS.replace(retry_failures=True))
    asked = llm.chat_requests()[n:]
    assert len(asked) == fixed.counters.model_calls == calls_for(bad)
    assert sum(r.body["messages"][1]["content"].count(GROUPED) for r in asked) == len(bad)
    assert all(e.scorer == "model" for e in fixed.edges if (e.citing, e.cited) in {(b.citing, b.cited) for b in bad})


@pytest.mark.fault_kind("llm-group-429")
def test_429_on_grouped_calls_is_waited_out_inside_the_budget(llm, tiny_source, tmp_path):
    llm.add("429", count=2, retry_after="1", match=GROUPED)
    t0 = time.monotonic()
    t = run_query(QUERY, engine(llm, tiny_source, ResultCache(tmp_path / "rc")), SETTINGS)
    assert time.monotonic() - t0 >= 1.0  # Retry-After honoured
    assert llm.counts.get("429") == 2
    assert t.counters.model_calls == len(llm.chat_requests()) <= BUDGET  # a busy answer is a call too
    assert t.counters.model_failed == 0 and any(e.scorer == "model" for e in t.edges)
    assert not any("unusable" in e.scorer_reason or "failed" in e.scorer_reason for e in t.edges)


@pytest.mark.fault_kind("llm-endpoint-dies-mid-run")
def test_an_endpoint_that_dies_mid_run_leaves_a_finished_run_and_the_rerun_asks_only_what_is_missing(
        tiny_source, tmp_path, monkeypatch):
    cache = ResultCache(tmp_path / "rc")
    server = FakeOpenAI(latency=0.0)
    server.start()
    port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
    orig = components.LLMGroupEntailmentScorer.score_many

    def dying(self, pairs, meter=None):  # type: ignore[no-untyped-def]
        server.stop()  # the plan and the claims were answered; the server is gone before the matrices
        return orig(self, pairs, meter)

    monkeypatch.setattr(components.LLMGroupEntailmentScorer, "score_many", dying)
    t = run_query(QUERY, engine(server, tiny_source, cache, max_retries=1), SETTINGS)  # no ModelError: finishes
    monkeypatch.setattr(components.LLMGroupEntailmentScorer, "score_many", orig)
    assert t.results
    assert t.counters.model_calls <= BUDGET
    lost = [e for e in t.edges if e.scorer_reason.startswith("the model endpoint failed mid-run")]
    assert lost and all(e.scorer == "offline" and "cannot reach the model endpoint" in e.scorer_reason for e in lost)
    assert any(w.startswith("the model endpoint failed mid-run") and "a rerun asks only" in w for w in t.warnings)
    assert not any(e.scorer == "model" for e in t.edges)
    # the server is back (same address): only the matrices are asked, grouped; the claims were cached
    back = FakeOpenAI(latency=0.0)
    back.start(port)
    try:
        again = run_query(QUERY, engine(back, tiny_source, cache), SETTINGS)
        assert back.chat_requests() and all(GROUPED in str(r.body) for r in back.chat_requests())
        assert again.counters.model_calls == len(back.chat_requests()) == calls_for(lost)
        assert all(e.scorer == "model" for e in again.edges if (e.citing, e.cited) in {(f.citing, f.cited) for f in lost})
    finally:
        back.stop()
