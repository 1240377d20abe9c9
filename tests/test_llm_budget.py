"""The per-query model budget and the cascade (issue 12): limits never exceeded, retries included; the
model decides the edges that matter first; every edge says who decided it and why."""

from __future__ import annotations

import datetime as dt

import pytest
from model_server import ModelServer

from crase_core import trace as trace_io
from crase_core.audit.store import Verdict, summarize, summarize_by_scorer
from crase_core.backends import offline_backend
from crase_core.cache import ResultCache
from crase_core.component_cache import ComponentCache
from crase_core.llm import LLMSettings, openai_backend
from crase_core.llm.spend import SpendMeter
from crase_core.pipeline import Engine, estimate_budget, run_query
from crase_core.records import Claim, EdgeRecord
from crase_core.settings.pipeline import DEFAULT_LLM_BUDGET, DEFAULT_LLM_TOKEN_BUDGET, PipelineSettings
from crase_core.stages.cascade import decision_margin
from crase_core.store.termstats import TermStats
from crase_core.testing.fake_model import fake_backend

NOW = dt.datetime(2001, 6, 1, tzinfo=dt.UTC)
QUERY = "black hole microstates anti-de Sitter"
#: round 6's pruning of the fallback's edges (none): the exact cascade below puts the edge the default's word-overlap
#: rule prunes (0001001 → 9902001, the only evidence trail of the tiny graph) first, which needs it in the interim graph
TINY = PipelineSettings(m=3, L=2, theta_lexical=0.0, tau_lexical=0.0)


@pytest.fixture()
def server():
    s = ModelServer("good")
    yield s
    s.stop()


def _openai(server: ModelServer, tiny_source, **kw) -> object:
    kw.setdefault("max_retries", 2)
    kw.setdefault("concurrency", 2)
    return openai_backend(LLMSettings(base_url=server.base_url, model="test-model", **kw),
                          fallback=offline_backend(TermStats.from_index(tiny_source.text_index)))


def test_the_meter_counts_every_http_attempt_and_refuses_the_one_past_the_limit(server, tiny_source):
    """HTTP 500 on every other request: each retry is a call; the budget stops the attempts, not the items."""
    server.mode = "flaky"
    backend = _openai(server, tiny_source, max_retries=3, entailment_prompt="edge")  # four single-edge calls
    meter = SpendMeter(max_calls=5)
    cc = ComponentCache(backend, None, meter=meter)
    claims = [Claim("c1", "EMPIRICAL", "Anomalies cancel in ten dimensions.", "x")]
    pairs = {("a", "b"): claims, ("b", "c"): claims}
    from crase_core.records import ClaimSet
    sets = {k: ClaimSet(k, claims, "x") for k in "abcdef"}
    results = cc.score(sets, [("a", "b"), ("c", "d"), ("e", "f"), ("b", "a")])
    assert pairs  # (two edges share claim sets; keys differ by paper id)
    assert server.requests == 5 == meter.calls == cc.counters.model_calls  # never one request more
    assert meter.refused >= 1
    refused = [em for em in results if em.error and em.error.startswith("budget:")]
    answered = [em for em in results if not em.error]
    assert refused and answered and len(refused) + len(answered) == 4
    assert cc.counters.failures == 0  # the budget is not a model failure


def test_token_budget_is_never_exceeded(server, tiny_source):
    backend = _openai(server, tiny_source)
    engine = Engine(tiny_source, backend, None)
    t = run_query(QUERY, engine, TINY.replace(llm_budget=0, llm_token_budget=2500), now=NOW)
    c = t.counters
    assert 0 < c.prompt_tokens + c.completion_tokens <= 2500
    assert c.model_calls == server.requests
    assert any(e.scorer == "offline" and "budget" in e.scorer_reason for e in t.edges)


def test_cascade_on_the_tiny_corpus_is_exact(tiny_source):
    stats = TermStats.from_index(tiny_source.text_index)
    # unlimited: the model decides every edge, the offline scorer none
    backend, model = fake_backend(stats)
    full = run_query(QUERY, Engine(tiny_source, backend, None), TINY.replace(llm_budget=0, llm_token_budget=0),
                     now=NOW)
    n_edges = len(full.edges)
    assert n_edges >= 5
    assert all(e.scorer == "model" and e.scorer_reason == "no budget limit" for e in full.edges)
    assert full.counters.model_edges == n_edges and full.counters.model_calls == model.calls
    # a budget of 4 calls: the plan, then the highest-priority edge (2 claims + 1 matrix), nothing more
    backend, model = fake_backend(stats)
    small = run_query(QUERY, Engine(tiny_source, backend, None), TINY.replace(llm_budget=4, llm_token_budget=0),
                      now=NOW)
    assert small.counters.model_calls == model.calls == 4
    assert model.log[0] == "plan" and sum(x.startswith("claims") for x in model.log) == 2
    decided = [e for e in small.edges if e.scorer == "model"]
    assert len(decided) == 1 and decided[0].scorer_reason.startswith("priority #1: on the evidence trail of result #")
    assert all(e.scorer == "offline" and e.scorer_reason.startswith("outside the model budget")
               for e in small.edges if e.scorer == "offline")
    # the model-decided edge has the model's matrix; the others the offline scorer's on the final claims
    assert decided[0].matrix == next(e.matrix for e in full.edges
                                     if (e.citing, e.cited) == (decided[0].citing, decided[0].cited))
    assert any("the model decided 1 of" in w for w in small.warnings)


def test_cached_model_answers_are_free_under_any_budget(tiny_source, tmp_path):
    stats = TermStats.from_index(tiny_source.text_index)
    backend, model = fake_backend(stats)
    cache = ResultCache(tmp_path / "rc")
    first = run_query(QUERY, Engine(tiny_source, backend, cache), TINY.replace(llm_budget=0, llm_token_budget=0),
                      now=NOW)
    calls = model.calls
    again = run_query(QUERY, Engine(tiny_source, backend, cache), TINY.replace(llm_budget=1), now=NOW)
    assert model.calls == calls and again.counters.model_calls == 0
    assert all(e.scorer == "model" and e.scorer_reason == "cached model answer (free)" for e in again.edges)
    assert [r.paper_id for r in again.results] == [r.paper_id for r in first.results]


def test_estimate_shows_limit_tokens_and_time(tiny_source):
    backend, _ = fake_backend(TermStats.from_index(tiny_source.text_index))
    engine = Engine(tiny_source, backend, None)
    b = estimate_budget(QUERY, engine, TINY.replace(llm_budget=3, llm_token_budget=0))
    assert b.limit_calls == 3 and b.limit_tokens is None
    assert b.planned_calls == 3 < b.to_call
    assert b.est_prompt_tokens > 0 and b.est_completion_tokens > 0 and b.est_seconds > 0
    unlimited = estimate_budget(QUERY, engine, TINY.replace(llm_budget=0, llm_token_budget=0))
    assert unlimited.limit_calls is None and unlimited.planned_calls == unlimited.to_call
    assert unlimited.est_prompt_tokens > b.est_prompt_tokens
    # the offline backend has no limit and no estimate of model time
    off = estimate_budget(QUERY, Engine(tiny_source, offline_backend(), None), TINY)
    assert off.limit_calls is None and off.planned_calls == off.to_call


def test_defaults_and_flags():
    s = PipelineSettings()
    assert (s.llm_budget, s.llm_token_budget, s.retry_failures) == (DEFAULT_LLM_BUDGET, DEFAULT_LLM_TOKEN_BUDGET,
                                                                    False)
    import argparse

    from crase_core.settings.config import add_arguments, settings_from_args
    p = argparse.ArgumentParser()
    add_arguments(p)
    got = settings_from_args(p.parse_args(["--llm-budget", "60", "--llm-token-budget", "0", "--retry-failures"]))
    assert (got.pipeline.llm_budget, got.pipeline.llm_token_budget, got.pipeline.retry_failures) == (60, 0, True)


def test_offline_backend_runs_are_unchanged_by_the_budget(tiny_source):
    engine = Engine(tiny_source, offline_backend(TermStats.from_index(tiny_source.text_index)), None)
    a = run_query(QUERY, engine, TINY.replace(llm_budget=1, llm_token_budget=1), now=NOW)
    b = run_query(QUERY, engine, TINY.replace(llm_budget=0, llm_token_budget=0), now=NOW)
    assert [r.paper_id for r in a.results] == [r.paper_id for r in b.results]
    assert [e.delta for e in a.edges] == [e.delta for e in b.edges]
    assert all(e.scorer == "offline" and e.scorer_reason == "offline backend" for e in a.edges)


def test_decision_margin():
    assert decision_margin([[0.7, 0.2], [0.1, 0.9]], 0.75, 0.0) == pytest.approx(0.05)
    assert decision_margin([], 0.75, 0.0) == 1.0
    # τ > 0: |Δ − τ| counts too (Δ = 1/2 here)
    assert decision_margin([[0.2], [1.0]], 0.75, 0.45) == pytest.approx(0.05)


def test_old_traces_load_and_edges_default_to_offline(tiny_source):
    engine = Engine(tiny_source, offline_backend(TermStats.from_index(tiny_source.text_index)), None)
    d = trace_io.to_dict(run_query(QUERY, engine, TINY, now=NOW))
    for e in d["edges"]:
        e.pop("scorer")
        e.pop("scorer_reason")
    old = trace_io.from_dict(d)
    assert all(e.scorer == "offline" and e.scorer_reason == "" for e in old.edges)
    assert EdgeRecord("a", "b").scorer == "offline"


def test_audit_statistics_split_by_scorer():
    v = [Verdict("r", "a", "b", "x", "agree", True), Verdict("r", "c", "d", "x", "disagree", True),
         Verdict("r", "e", "f", "x", "agree", False)]
    split = summarize_by_scorer(v, {("r", "a", "b"): "model", ("r", "c", "d"): "model"})
    assert set(split) == {"model", "offline"}
    assert split["model"].agreement == 0.5 and split["model"].edges == 2
    assert split["offline"].agreement == 1.0 and split["offline"].pruned_n == 1
    assert summarize(v).edges == 3
