"""Model-endpoint faults against the fake OpenAI-compatible server (real HTTP on 127.0.0.1).

One test per fault kind of ``crase_core/testing/fake_openai.py``: the exact
recorded failure (or error), that it ends in bounded time, how many HTTP calls it
cost (server side and in ``Usage``), and that a rerun once the fault is gone
gives the right answer.
"""

from __future__ import annotations

import time

import pytest
from fault_tools import query, ranked
from tiny_corpus import write_corpus

from crase_core.errors import ModelError
from crase_core.llm import LLMSettings, openai_backend
from crase_core.llm.client import AdaptiveLimit, parse_retry_after
from crase_core.records import Claim
from crase_core.testing.fake_openai import FakeOpenAI, http_date

CITING = [Claim("c1", "THEORETICAL", "Gauge anomalies cancel in ten dimensions.", "x"),
          Claim("c2", "EMPIRICAL", "The lattice spectrum matches the prediction.", "y")]
CITED = [Claim("c1", "THEORETICAL", "Gauge anomalies cancel for the group SO(32).", "z"),
         Claim("c2", "METHODOLOGICAL", "We compute the spectrum on the lattice.", "w")]
# the fake model's answer for this pair: word overlap of A_i with B_j on the 0.05 grid
# A1 {gauge, anomalies, cancel, ten, dimensions} vs B1 {gauge, anomalies, cancel, group, so}: 3/5 = 0.6;
# A2 {lattice, spectrum, matches, prediction} vs B2 {compute, spectrum, lattice}: 2/4 = 0.5
EXPECTED = [[0.6, 0.0], [0.0, 0.5]]


def scorer(server: FakeOpenAI, **kw):
    """The per-edge scorer (one item = one call: these tests count the client's calls item by item; the grouped
    prompt's faults are in test_fault_llm_group.py)."""
    kw.setdefault("model", "fake-model")
    kw.setdefault("entailment_prompt", "edge")
    kw.setdefault("max_retries", 1)
    kw.setdefault("timeout", 1.0)
    return openai_backend(LLMSettings(base_url=server.base_url, **kw)).scorer


def score(server: FakeOpenAI, **kw):
    t = time.monotonic()
    (em,) = scorer(server, **kw).score_many([(CITING, CITED)])
    return em, time.monotonic() - t


def rerun_is_right(server: FakeOpenAI) -> None:
    server.clear()
    before = len(server.chat_requests())
    em, _ = score(server)
    assert em.error is None and em.matrix == EXPECTED and em.usage.calls == 1
    assert len(server.chat_requests()) == before + 1


@pytest.mark.fault_support
def test_clean_answer_is_the_hand_checked_matrix(llm):
    em, _ = score(llm)
    assert em.error is None and em.matrix == EXPECTED and em.usage.calls == 1
    assert em.usage.prompt_tokens > 0 and em.usage.completion_tokens > 0


# --- hangs: the timeout is a total deadline per request ------------------------------------------------


@pytest.mark.fault_kind("llm-trickle")
def test_trickling_endpoint_fails_at_the_timeout_not_after_the_body(llm):
    llm.add("trickle", count=-1, delay=0.2)  # one byte every 0.2 s: a ~300-byte answer would take a minute
    em, elapsed = score(llm, timeout=1.0, max_retries=1)
    assert em.error == (f"endpoint: no complete answer from {llm.base_url} within 1 s (2 attempts): "
                        "raise --timeout or lower --concurrency")
    assert em.matrix == [] and em.usage.calls == 2 and len(llm.chat_requests()) == 2
    assert elapsed < 4.0  # 2 × 1 s + one back-off of ≈ 0.5 s
    rerun_is_right(llm)


@pytest.mark.fault_kind("llm-slow-first-byte")
def test_slow_first_byte_is_a_timeout(llm):
    llm.add("slow_first_byte", count=-1, delay=3.0)
    em, elapsed = score(llm, timeout=0.5, max_retries=0)
    assert em.error == (f"endpoint: no complete answer from {llm.base_url} within 0.5 s (1 attempts): "
                        "raise --timeout or lower --concurrency")
    assert em.usage.calls == 1 and elapsed < 2.0
    rerun_is_right(llm)


@pytest.mark.fault_kind("llm-deadline-mid-batch")
def test_run_deadline_caps_a_batch_and_leaves_the_rest_unasked(llm):
    llm.latency = 0.3
    s = scorer(llm, concurrency=2, timeout=30.0)
    s.endpoint.deadline = time.monotonic() + 1.0  # the run's deadline, set by the caller
    t = time.monotonic()
    results = s.score_many([(CITING, CITED)] * 20)  # 20 × 0.3 s / 2 = 3 s of work: more than the deadline
    elapsed = time.monotonic() - t
    assert elapsed < 1.8
    answered = [r for r in results if r.error is None]
    unasked = [r for r in results if r.error and r.error.endswith("so it was not asked")]
    cut = [r for r in results if r.error and "after 1 attempt(s)" in r.error]
    assert 2 <= len(answered) <= 8 and all(r.matrix == EXPECTED for r in answered)
    assert len(answered) + len(unasked) + len(cut) == 20 and len(unasked) >= 10
    assert unasked[0].error == f"endpoint: the run's deadline passed before {llm.base_url} answered, so it was not asked"
    assert all(r.usage.calls == 0 for r in unasked)  # no call made, none counted
    assert len(llm.chat_requests()) == sum(r.usage.calls for r in results)
    # no fail-fast ModelError although far more than fail_fast_after items failed in a row
    s.endpoint.deadline = None
    llm.latency = 0.0
    assert all(r.matrix == EXPECTED for r in s.score_many([(CITING, CITED)] * 3))


# --- answers that are not chat completions ----------------------------------------------------------------


@pytest.mark.fault_kind("llm-html-200")
def test_html_page_with_http_200_is_a_clear_failure(llm):
    llm.add("html", count=-1)
    em, _ = score(llm, max_retries=1)
    assert em.error == (f"endpoint: the endpoint {llm.base_url} answered HTTP 200 with an HTML page, not an "
                        "OpenAI-compatible JSON answer (2 attempts): check that --base-url is the API's address "
                        "(it usually ends in /v1) and not a web page or a login proxy")
    assert em.usage.calls == 2
    planner = openai_backend(LLMSettings(base_url=llm.base_url, model="fake-model", max_retries=0)).planner
    with pytest.raises(ModelError) as err:
        planner.plan("black hole entropy", 3)
    assert str(err.value).startswith("planning failed, so the run stops: the endpoint") and "HTML page" in str(err.value)
    llm.add("html", count=1, path="/models")  # the model list too
    with pytest.raises(ModelError, match="it answered with an HTML page, not an OpenAI-compatible model list"):
        openai_backend(LLMSettings(base_url=llm.base_url, model=None))
    rerun_is_right(llm)


@pytest.mark.fault_kind("llm-body-not-json")
def test_body_that_is_not_json(llm):
    llm.add("bad_json_body", count=-1)
    em, _ = score(llm, max_retries=1)
    assert em.error.startswith(f"endpoint: the endpoint {llm.base_url} answered HTTP 200 with a body that is not "
                               "JSON (2 attempts): '{\"id\": \"chatcmpl-1\"")
    assert em.usage.calls == 2 and len(llm.chat_requests()) == 2
    rerun_is_right(llm)


@pytest.mark.fault_kind("llm-json-not-a-completion")
def test_json_that_is_not_a_chat_completion(llm):
    llm.add("wrong_shape_body", count=-1)
    em, _ = score(llm, max_retries=2)
    assert em.error == (f"endpoint: the endpoint {llm.base_url} answered HTTP 200 with JSON that is not a chat "
                        "completion (no 'choices' list) (3 attempts): '{\"result\": \"ok\", \"data\": [1, 2, 3]}'")
    assert em.usage.calls == 3
    rerun_is_right(llm)


@pytest.mark.fault_kind("llm-empty-choices")
def test_empty_choices(llm):
    llm.add("empty_choices", count=-1)
    em, _ = score(llm, max_retries=1)
    assert em.error == (f"endpoint: the endpoint {llm.base_url} gave no usable answer (2 attempts): "
                        "the answer had no choices")
    assert em.usage.calls == 2 and em.usage.prompt_tokens > 0  # the tokens the server reports are counted
    rerun_is_right(llm)


@pytest.mark.fault_kind("llm-unusable-model-output")
def test_one_bad_answer_is_absorbed_by_a_retry(llm):
    llm.add("html", count=1)
    em, _ = score(llm, max_retries=1)
    assert em.error is None and em.matrix == EXPECTED and em.usage.calls == 2


# --- model output that is not usable ---------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "problem"), [
    ("content_bad_json", "the answer is not valid JSON"),
    ("content_wrong", "row 1: expected 2 scores (one per B claim), got 1"),
    ("content_nan", "row 1: score nan is outside [0, 1]"),
])
@pytest.mark.fault_kind("llm-unusable-model-output")
def test_unusable_model_output_is_retried_then_recorded(llm, kind, problem):
    llm.add(kind, count=-1)
    em, _ = score(llm, max_retries=1)
    if kind == "content_wrong":
        problem = "expected 2 rows (one per A claim), got 1"
    assert em.error == f"model output: no usable answer in 2 attempt(s): {problem}; {problem}"
    assert em.matrix == [] and em.usage.calls == 2
    # the retry shows the model what was wrong
    assert llm.chat_requests()[1].body["messages"][-1]["content"].startswith(f"That answer cannot be used: {problem}")
    rerun_is_right(llm)


@pytest.mark.fault_kind("llm-nan-usage")
def test_nan_token_counts_are_ignored(llm):
    llm.add("usage_nan", count=1)
    em, _ = score(llm)
    assert em.error is None and em.matrix == EXPECTED
    assert em.usage.calls == 1 and em.usage.prompt_tokens == 0 and em.usage.completion_tokens == 0


# --- busy, failing and vanishing servers ------------------------------------------------------------------


@pytest.mark.fault_kind("llm-429-retry-after")
def test_429_with_retry_after_seconds_is_honoured(llm):
    llm.add("429", count=1, retry_after="1")
    s = scorer(llm)
    (em,) = s.score_many([(CITING, CITED)])
    assert em.error is None and em.matrix == EXPECTED and em.usage.calls == 2
    first, second = llm.chat_requests()
    assert second.started - first.started >= 0.95
    st = s.endpoint.last_stats
    assert (st.overloaded, st.cuts, st.lowest) == (1, 1, 2.0)  # concurrency 4 halved once


@pytest.mark.fault_kind("llm-429-retry-after")
def test_429_with_retry_after_http_date_is_honoured(llm):
    llm.add("429", count=1, retry_after=http_date(2))
    em, _ = score(llm)
    assert em.error is None and em.usage.calls == 2
    first, second = llm.chat_requests()
    assert 0.9 <= second.started - first.started <= 3.0  # HTTP dates have whole seconds


@pytest.mark.fault_kind("llm-429-always")
def test_endless_429_fails_after_the_overload_retries(llm):
    llm.add("429", count=-1, retry_after="0")
    em, elapsed = score(llm, overload_retries=3, max_retries=0)
    assert em.error == (f"endpoint: the endpoint {llm.base_url} stayed busy (HTTP 429, 4 attempts): "
                        "rate limit reached, slow down; lower --concurrency")
    assert em.usage.calls == 4 and len(llm.chat_requests()) == 4 and elapsed < 1.0
    rerun_is_right(llm)


@pytest.mark.fault_kind("llm-503-retry-after-too-long")
def test_retry_after_beyond_the_limit_fails_at_once(llm):
    llm.add("503", count=1, retry_after="3600")
    t = time.monotonic()
    first, second = scorer(llm, concurrency=1).score_many([(CITING, CITED)] * 2)
    assert first.error == (f"endpoint: the endpoint {llm.base_url} is busy (HTTP 503) and asked to wait 3600 s, "
                           "more than --max-retry-wait 60 s")
    assert first.usage.calls == 1 and second.error is None and second.matrix == EXPECTED  # no pause for the others
    assert time.monotonic() - t < 1.0
    rerun_is_right(llm)


@pytest.mark.fault_kind("llm-500")
def test_500_is_retried_then_recorded(llm):
    llm.add("500", count=-1)
    em, _ = score(llm, max_retries=1)
    assert em.error == f"endpoint: the endpoint {llm.base_url} answered HTTP 500 (2 attempts): internal error"
    assert em.usage.calls == 2
    rerun_is_right(llm)


@pytest.mark.parametrize(("kind", "detail"), [
    ("drop", "the server closed the connection without answering"),
    ("drop_mid_body", "the server closed the connection before the answer was complete"),
])
@pytest.mark.fault_kind("llm-connection-dropped")
def test_dropped_connection_is_a_recorded_transient_failure_not_unreachable(llm, kind, detail):
    llm.add(kind, count=-1)
    em, elapsed = score(llm, max_retries=1)
    assert em.error == f"endpoint: the connection to {llm.base_url} broke (2 attempts): {detail}"
    assert em.usage.calls == 2 and elapsed < 2.0
    llm.clear()
    llm.add(kind, count=1)  # once: the retry gets the answer
    em, _ = score(llm, max_retries=1)
    assert em.error is None and em.matrix == EXPECTED and em.usage.calls == 2
    rerun_is_right(llm)


# --- throughput machinery -------------------------------------------------------------------------------


@pytest.mark.fault_kind("llm-few-slots")
def test_adaptive_concurrency_fits_a_server_with_few_slots(llm):
    llm.capacity = 3  # a 4th request at once gets 429
    llm.capacity_retry_after = "0"
    llm.latency = 0.02
    s = scorer(llm, concurrency=24, max_retries=0, overload_retries=8)
    results = s.score_many([(CITING, CITED)] * 120)
    assert all(r.error is None and r.matrix == EXPECTED for r in results)
    st = s.endpoint.last_stats
    assert st.cuts >= 2 and st.lowest <= 6 and st.final < 24
    rejected = llm.counts.get("429", 0)
    assert rejected == st.overloaded == sum(r.usage.calls for r in results) - 120
    assert rejected < 120  # a fixed 24 in flight against 3 slots would be refused about 7 times in 8


@pytest.mark.fault_support
def test_connections_are_reused_and_workers_bounded(llm):
    s = scorer(llm, concurrency=4)
    results = s.score_many([(CITING, CITED)] * 200)
    assert all(r.matrix == EXPECTED for r in results)
    assert s.endpoint.connections_opened <= 4 and llm.max_in_flight <= 4


@pytest.mark.fault_kind("llm-few-slots")
def test_aimd_limit_halves_once_per_round_trip_and_grows_back():
    import asyncio

    async def scenario() -> AdaptiveLimit:
        lim = AdaptiveLimit(16, floor=2)
        sent = [await lim.acquire() for _ in range(8)]
        for t in sent:  # a burst of 8 overloads from one round trip: one cut
            await lim.release(t, overloaded=True)
        assert lim.limit == 8
        t = await lim.acquire()
        await lim.release(t, overloaded=True)
        assert lim.limit == 4
        for _ in range(3):  # floor
            t = await lim.acquire()
            await lim.release(t, overloaded=True)
        assert lim.limit == 2
        for _ in range(200):
            t = await lim.acquire()
            await lim.release(t, ok=True)
        assert lim.limit == 16  # grown back, never above the ceiling
        return lim

    assert asyncio.run(scenario()).stats.cuts == 5


@pytest.mark.fault_kind("llm-429-retry-after")
def test_retry_after_forms():
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0) == 0.0


@pytest.mark.fault_kind("llm-budget-runs-out-mid-batch")
def test_call_budget_is_never_exceeded_retries_included(llm):
    llm.add("500", count=2)  # item 1 needs two retries
    s = scorer(llm, concurrency=1, max_retries=2)
    s.endpoint.max_calls = 5
    results = s.score_many([(CITING, CITED)] * 4)
    assert [r.usage.calls for r in results] == [3, 1, 1, 0]
    assert all(r.matrix == EXPECTED for r in results[:3])
    assert results[3].error == (f"endpoint: the budget of 5 model calls was spent before {llm.base_url} answered, "
                                "so it was not asked")
    assert s.endpoint.calls_made == 5 == len(llm.chat_requests())
    s.endpoint.max_calls = None  # the rerun asks what was not asked
    assert s.score_many([(CITING, CITED)])[0].matrix == EXPECTED


# --- the CLI, end to end ------------------------------------------------------------------------------------


@pytest.mark.fault_kind("llm-trickle")
def test_cli_trickling_endpoint_honours_timeout_then_rerun_works(llm, tmp_path):
    """Issue 10: a 1 byte/s endpoint with ``--timeout 3`` used to hang; now the run stops at the timeout."""
    corpus = write_corpus(tmp_path / "tiny")
    flags = ("--backend", "openai", "--base-url", llm.base_url, "--model", "fake-model", "--timeout", "3",
             "--max-retries", "0")
    llm.add("trickle", count=-1, delay=1.0)
    t = time.monotonic()
    r = query(corpus, tmp_path / "cache", *flags, timeout=60)
    assert time.monotonic() - t < 20
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert (f"planning failed, so the run stops: no complete answer from {llm.base_url} within 3 s (1 attempts): "
            "raise --timeout or lower --concurrency") in r.stderr
    assert r.stdout == ""
    llm.clear()
    again = query(corpus, tmp_path / "cache", *flags, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    head = ranked(again.stdout)  # the query, the fake model's plan and a ranked list
    assert "Plan:  ρ1 “black hole entropy microstates” | ρ2 “black hole entropy”" in head


@pytest.mark.fault_kind("llm-html-200")
def test_cli_html_endpoint_is_one_clear_line(llm, tmp_path):
    corpus = write_corpus(tmp_path / "tiny")
    llm.add("html", count=-1)
    r = query(corpus, tmp_path / "cache", "--backend", "openai", "--base-url", llm.base_url, "--model", "fake-model",
              "--max-retries", "0", timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert (f"the endpoint {llm.base_url} answered HTTP 200 with an HTML page, not an OpenAI-compatible JSON answer (1 attempts): check that "
            "--base-url is the API's address") in r.stderr
