"""Model endpoint faults (issue 10, "Wrong or lost data"; issue 12, "Bad input"): unusable answers, a dead
server mid-run, cached failures. The run finishes with offline decisions for what failed, says so, and a
later run retries only what failed: at once with ``retry_failures`` (``--retry-failures``), or after the
cached failure expires."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from model_server import ModelServer  # noqa: E402

from crase_core.backends import offline_backend  # noqa: E402
from crase_core.cache import ResultCache  # noqa: E402
from crase_core.component_cache import FAILURE_TTL_S  # noqa: E402
from crase_core.llm import LLMSettings, openai_backend  # noqa: E402
from crase_core.pipeline import Engine, model_mostly_failed, run_query  # noqa: E402
from crase_core.settings.pipeline import PipelineSettings  # noqa: E402
from crase_core.store.termstats import TermStats  # noqa: E402

NOW = dt.datetime(2001, 6, 1, tzinfo=dt.UTC)
QUERY = "black hole microstates anti-de Sitter"
SETTINGS = PipelineSettings(m=3, L=2, llm_budget=0, llm_token_budget=0)


@pytest.fixture()
def server():
    s = ModelServer("garbage")
    yield s
    s.stop()


def _engine(server: ModelServer, tiny_source, cache: ResultCache | None) -> Engine:
    backend = openai_backend(LLMSettings(base_url=server.base_url, model="test-model", max_retries=0,
                                         concurrency=2),
                             fallback=offline_backend(TermStats.from_index(tiny_source.text_index)))
    return Engine(tiny_source, backend, cache)


def _offline_ranking(tiny_source) -> list[str]:
    engine = Engine(tiny_source, offline_backend(TermStats.from_index(tiny_source.text_index)), None)
    return [r.paper_id for r in run_query(QUERY, engine, SETTINGS, now=NOW).results]


@pytest.mark.fault_kind("llm-every-answer-unusable")
def test_every_answer_unusable_gives_offline_results_a_warning_and_a_failed_run(server, tiny_source, tmp_path):
    t = run_query(QUERY, _engine(server, tiny_source, ResultCache(tmp_path / "rc")), SETTINGS, now=NOW)
    # the run finishes with the offline decisions, not "No results"
    assert t.results and [r.paper_id for r in t.results] == _offline_ranking(tiny_source)
    assert all(e.scorer == "offline" and "the model" in e.scorer_reason and "offline decision" in e.scorer_reason
               for e in t.edges)
    assert model_mostly_failed(t)
    assert any(w.startswith("most model answers failed") and "--retry-failures" in w for w in t.warnings)
    assert not any("evidence graph's verdict" in w for w in t.warnings)
    assert t.counters.model_items == t.counters.model_failed > 0
    assert t.plan.error and t.plan.error.startswith("model output:") and t.plan.subqueries  # offline plan


@pytest.mark.fault_kind("llm-rerun-after-fix")
def test_cached_failures_are_reused_then_retried_on_request_or_after_expiry(server, tiny_source, tmp_path):
    cache = ResultCache(tmp_path / "rc")
    first = run_query(QUERY, _engine(server, tiny_source, cache), SETTINGS, now=NOW)
    asked = server.requests
    assert asked == first.counters.model_calls > 0

    # still broken: the cached failures are reused (no call), and marked as such
    again = run_query(QUERY, _engine(server, tiny_source, cache), SETTINGS, now=NOW)
    assert server.requests == asked and again.counters.model_calls == 0
    assert any("cached unusable answer" in e.scorer_reason for e in again.edges)
    assert any("reuse a cached unusable answer" in w for w in again.warnings)

    # the server is fixed: --retry-failures asks again at once, and the model now decides the edges
    server.mode = "good"
    fixed = run_query(QUERY, _engine(server, tiny_source, cache), SETTINGS.replace(retry_failures=True), now=NOW)
    assert fixed.counters.model_calls > 0 and not model_mostly_failed(fixed)
    assert all(e.scorer == "model" for e in fixed.edges)
    assert fixed.plan.error is None
    # and the good answers are cached: a plain rerun makes no call
    n = server.requests
    final = run_query(QUERY, _engine(server, tiny_source, cache), SETTINGS, now=NOW)
    assert server.requests == n and final.counters.model_calls == 0


@pytest.mark.fault_kind("llm-cached-failure-expired")
def test_cached_failures_expire(server, tiny_source, tmp_path):
    from crase_core.component_cache import ComponentCache

    cache = ResultCache(tmp_path / "rc")
    now = [1_000_000.0]
    backend = _engine(server, tiny_source, cache).backend
    cc = ComponentCache(backend, cache, clock=lambda: now[0])
    plan = cc.plan(QUERY, 2)
    assert plan.error and server.requests == 1
    cc.plan(QUERY, 2)
    assert server.requests == 1  # fresh failure: reused
    now[0] += FAILURE_TTL_S + 1
    cc.plan(QUERY, 2)
    assert server.requests == 2  # expired: asked again


@pytest.mark.fault_kind("llm-500-mid-run")
def test_server_dies_mid_run_the_budget_holds_and_the_rerun_retries_only_what_failed(tiny_source, tmp_path):
    server = ModelServer("good")
    try:
        cache = ResultCache(tmp_path / "rc")
        settings = SETTINGS.replace(llm_budget=12)
        engine = _engine(server, tiny_source, cache)
        # answer the plan and a few items, then fail with HTTP 500 (transport failures: never cached)
        import crase_core.llm.components as comp
        orig = comp.LLMGroupEntailmentScorer.score_many

        def dying(self, pairs, meter=None):  # type: ignore[no-untyped-def]
            server.mode = "error"
            return orig(self, pairs, meter)

        comp.LLMGroupEntailmentScorer.score_many = dying  # type: ignore[method-assign]
        try:
            t = run_query(QUERY, engine, settings, now=NOW)
        finally:
            comp.LLMGroupEntailmentScorer.score_many = orig  # type: ignore[method-assign]
        assert t.counters.model_calls == server.requests <= 12
        assert t.results
        failed = [e for e in t.edges if "unusable" in e.scorer_reason or "endpoint" in e.scorer_reason]
        assert failed and all(e.scorer == "offline" for e in failed)
        server.mode = "good"
        n = server.requests
        again = run_query(QUERY, _engine(server, tiny_source, cache), settings, now=NOW)
        # the claims and the plan were cached; only the failed matrices are asked again: one grouped call per
        # citing paper among them (at most 8 cited papers a call)
        calls = sum(-(-sum(1 for f in failed if f.citing == u) // 8) for u in {f.citing for f in failed})
        assert server.requests - n == again.counters.model_calls == calls
        assert all(e.scorer == "model" for e in again.edges if (e.citing, e.cited) in
                   {(f.citing, f.cited) for f in failed})
    finally:
        server.stop()
