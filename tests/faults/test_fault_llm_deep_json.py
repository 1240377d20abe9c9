"""Model endpoints answering JSON nested 100,000 deep (as a body, as the model's content, on every call or
only on the edge-scoring calls): a recorded unusable answer like any other, never a RecursionError."""

from __future__ import annotations

import pytest
from fault_tools import query, ranked
from test_fault_llm_client import rerun_is_right, score
from tiny_corpus import write_corpus


@pytest.mark.fault_kind("llm-deep-json-body")
def test_a_body_nested_100000_deep_is_a_recorded_failure(llm):
    llm.add("deep_body", count=-1)
    em, _ = score(llm)
    assert em.error.startswith(f"endpoint: the endpoint {llm.base_url} answered HTTP 200 with JSON nested too deeply "
                               "to be a chat completion (2 attempts): '{\"choices\": [[[[")
    assert em.matrix == [] and em.usage.calls == 2 and len(llm.chat_requests()) == 2
    rerun_is_right(llm)


@pytest.mark.fault_kind("llm-deep-json-content")
@pytest.mark.parametrize("depth", [100_000, 900])
def test_content_nested_deep_is_an_unusable_answer(llm, depth):
    """100,000 deep is past the JSON decoder's recursion limit; 900 decodes, and is refused by the depth
    bound (no answer of ours nests more than 4 levels)."""
    llm.add("deep_content", count=-1, depth=depth)
    em, _ = score(llm)
    problem = "the answer is JSON nested too deeply" if depth > 1000 else \
        "the answer is JSON nested more than 16 levels deep"
    assert em.error == f"model output: no usable answer in 2 attempt(s): {problem}; {problem}"
    assert em.matrix == [] and em.usage.calls == 2
    rerun_is_right(llm)


@pytest.mark.fault_kind("llm-deep-json-edges-only")
def test_cli_run_whose_edge_calls_answer_deep_json_finishes_offline(llm, tmp_path):
    """Only the grouped edge-scoring calls answer 100,000-deep JSON: the plan and claims are the model's,
    every edge is decided offline and says why, the run says most answers failed (exit 3); the rerun with
    a healthy endpoint and --retry-failures has the model decide them."""
    corpus = write_corpus(tmp_path / "tiny")
    flags = ("--backend", "openai", "--base-url", llm.base_url, "--model", "fake-model", "--max-retries", "0")
    llm.add("deep_content", count=-1, match="<cited id=")
    r = query(corpus, tmp_path / "cache", *flags, timeout=300)
    assert r.returncode == 3, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr and "RecursionError" not in r.stderr
    assert "Plan:  ρ1 “black hole entropy microstates”" in r.stdout
    assert "6 of 11 model items were unusable and were decided offline; first: matrix " in r.stdout
    assert "model output: no usable answer in 1 attempt(s): the answer is JSON nested too deeply" in r.stdout
    assert r.stderr.strip().endswith("most model answers were unusable (see the notes above); fix the endpoint and "
                                     "rerun with --retry-failures")
    llm.clear()
    again = query(corpus, tmp_path / "cache", *flags, "--retry-failures", timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "unusable" not in ranked(again.stdout)
