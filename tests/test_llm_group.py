"""The grouped entailment prompt (issue 12, "Fewer tokens per decision"): one call per citing paper scores
all its cited papers' claim sets, the result is still one n_u × n_v matrix per edge (paper Eq. 2), a bad
block fails only its own edge, a grouped call is one call of the budget, and a prompt change invalidates
only its own cache entries. Real HTTP to the fake OpenAI-compatible server."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from crase_core.backends import offline_backend
from crase_core.cache import ResultCache
from crase_core.component_cache import ComponentCache
from crase_core.llm import LLMEntailmentScorer, LLMGroupEntailmentScorer, LLMSettings, openai_backend
from crase_core.llm.components import group_pairs, split_usage
from crase_core.llm.parse import OutputError, parse_group
from crase_core.llm.prompts import load_prompt
from crase_core.llm.spend import SpendMeter
from crase_core.records import Claim, ClaimSet, Usage
from crase_core.resources import prompts_dir
from crase_core.runs import content_id, outcome_key
from crase_core.settings.config import add_arguments, settings_from_args
from crase_core.testing.fake_openai import FakeOpenAI

A = [Claim("c1", "THEORETICAL", "Gauge anomalies cancel in ten dimensions.", "x"),
     Claim("c2", "EMPIRICAL", "The lattice spectrum matches the prediction.", "y")]
B = [Claim("c1", "THEORETICAL", "Gauge anomalies cancel for the group SO(32).", "z"),
     Claim("c2", "METHODOLOGICAL", "We compute the spectrum on the lattice.", "w")]
C = [Claim("c1", "EMPIRICAL", "Ten dimensions are needed for anomalies to cancel.", "v")]
# the fake model's word-overlap scores (hand-checked): A1 {gauge anomalies cancel ten dimensions},
# A2 {lattice spectrum matches prediction}; B1 shares 3/5 with A1, B2 2/4 with A2; C1 {ten dimensions needed
# anomalies cancel} shares 4/5 with A1 and nothing with A2
AB = [[0.6, 0.0], [0.0, 0.5]]
AC = [[0.8], [0.0]]
BC = [[0.4], [0.0]]  # B1 {gauge anomalies cancel group so} shares {anomalies cancel} with C1: 2/5


def backend(server: FakeOpenAI, **kw):
    kw.setdefault("model", "fake-model")
    kw.setdefault("max_retries", 1)
    return openai_backend(LLMSettings(base_url=server.base_url, **kw))


def test_group_is_the_default_and_edge_is_a_knob(llm):
    assert isinstance(backend(llm).scorer, LLMGroupEntailmentScorer)
    assert backend(llm).scorer.identity.startswith("openai:fake-model@entail-group-v1+")
    per_edge = backend(llm, entailment_prompt="edge").scorer
    assert isinstance(per_edge, LLMEntailmentScorer) and per_edge.identity.startswith("openai:fake-model@entail-v1+")
    import argparse
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--entailment-prompt", "edge"])
    assert settings_from_args(args).runtime.llm.entailment_prompt == "edge"


def test_one_call_per_citing_paper_gives_the_per_edge_matrices(llm):
    pairs = [(A, B), (A, C), (B, C), (A, B)]
    grouped = backend(llm).scorer.score_many(pairs)
    assert len(llm.chat_requests()) == 2  # A's three edges in one call, B's one edge in another
    assert [em.matrix for em in grouped] == [AB, AC, BC, AB]
    assert all(em.error is None for em in grouped)
    # the same matrices as one call per edge (4 calls)
    n = len(llm.chat_requests())
    per_edge = backend(llm, entailment_prompt="edge").scorer.score_many(pairs)
    assert len(llm.chat_requests()) - n == 4
    assert [em.matrix for em in per_edge] == [em.matrix for em in grouped]
    # a grouped call is one call: its usage is on its first edge, its tokens shared, nothing lost
    assert [em.usage.calls for em in grouped] == [1, 0, 1, 0]
    seen = llm.chat_requests()[:2]
    # the fake server reports prompt tokens = characters // 4 of each request
    assert sum(em.usage.prompt_tokens for em in grouped) == sum(
        max(1, sum(len(m["content"]) for m in r.body["messages"]) // 4) for r in seen)
    body = seen[0].body
    user = body["messages"][1]["content"]
    assert user.count("A1 [THEORETICAL]") == 1 and user.count('<cited id="P') == 3  # citing claims sent once
    assert body["response_format"]["schema"]["required"] == ["P1", "P2", "P3"]
    assert sum(em.usage.prompt_tokens + em.usage.completion_tokens for em in grouped) < \
        sum(em.usage.prompt_tokens + em.usage.completion_tokens for em in per_edge)


def test_split_usage_adds_up_and_puts_the_call_on_the_first_edge():
    parts = split_usage(Usage(1, 1001, 97), [4, 2, 1])
    assert [p.calls for p in parts] == [1, 0, 0]
    assert sum(p.prompt_tokens for p in parts) == 1001 and sum(p.completion_tokens for p in parts) == 97
    assert [p.prompt_tokens for p in parts] == [572, 286, 143]  # 1001·4//7, 1001·2//7, 1001//7


def test_group_pairs_chunks_by_citing_claims():
    pairs = [(A, B)] * 10 + [(B, C), ([], C), (A, C)]
    assert group_pairs(pairs, 8) == [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 12], [10], [11]]


def test_parse_group_keeps_good_blocks_and_names_the_bad_one():
    mats, bad, _ = parse_group({"P1": [[0.5, 1], [0, 0.25]], "P2": [[0.5]], "P3": [[2.0], [0.1]]}, 2, [2, 1, 1])
    assert mats == {0: [[0.5, 1.0], [0.0, 0.25]]}
    assert bad[1] == "P2: expected 2 rows (one per A claim), got 1" and "outside [0, 1]" in bad[2]
    mats, bad, _ = parse_group({"P1": [[0.5], [0.5]]}, 2, [1, 1])
    assert list(mats) == [0] and bad == {1: "no matrix for P2"}
    with pytest.raises(OutputError):
        parse_group("yes", 2, [1])


def test_a_malformed_block_fails_only_its_edge_and_only_it_is_asked_again(llm):
    llm.add("group_block_wrong", count=5)  # every answer's last block is 1 × 1
    ems = backend(llm, max_retries=1).scorer.score_many([(A, B), (A, C)])
    assert ems[0].matrix == AB and ems[0].error is None  # the good block is kept
    assert ems[1].matrix == [] and ems[1].error.startswith("model output: no usable answer in 2 attempt(s): P2: ")
    first, retry = llm.chat_requests()
    assert first.body["messages"][1]["content"].count('<cited id="P') == 2
    assert retry.body["messages"][1]["content"].count('<cited id="P') == 1  # only the failed block
    assert "Ten dimensions are needed" in retry.body["messages"][1]["content"]
    assert sum(em.usage.calls for em in ems) == 2


def test_a_retry_repairs_the_failed_block(llm):
    llm.add("group_block_wrong", count=1)
    ems = backend(llm, max_retries=1).scorer.score_many([(A, B), (A, C)])
    assert [em.matrix for em in ems] == [AB, AC] and len(llm.chat_requests()) == 2
    assert any("repaired by retry" in n for n in ems[1].notes)


def test_a_grouped_call_is_one_call_of_the_budget(llm):
    meter = SpendMeter(max_calls=1)
    ems = backend(llm).scorer.score_many([(A, B), (A, C), (B, C)], meter=meter)
    assert meter.calls == 1 == len(llm.chat_requests())
    assert [em.matrix for em in ems[:2]] == [AB, AC]
    assert ems[2].error.startswith("budget:") and ems[2].usage.calls == 0


def _cache_run(server: FakeOpenAI, tmp: Path, **kw) -> tuple[ComponentCache, int]:
    cc = ComponentCache(backend(server, **kw), ResultCache(tmp / "rc"))
    claims = {"a": ClaimSet("a", A, "x"), "b": ClaimSet("b", B, "x"), "c": ClaimSet("c", C, "x")}
    edges = [("a", "b"), ("a", "c")]
    hits = cc.cached_matrices(claims, edges)
    if len(hits) < len(edges):
        cc.score(claims, [e for e in edges if e not in hits])
    return cc, len(hits)


def test_a_prompt_change_invalidates_only_its_own_entries(llm, tmp_path):
    assert _cache_run(llm, tmp_path)[1] == 0  # grouped: computed
    assert _cache_run(llm, tmp_path, entailment_prompt="edge")[1] == 0  # per-edge: its own entries
    n = len(llm.chat_requests())
    assert _cache_run(llm, tmp_path)[1] == 2 and _cache_run(llm, tmp_path, entailment_prompt="edge")[1] == 2
    assert len(llm.chat_requests()) == n  # both cached
    # a changed grouped prompt (same version line, other text: the hash differs) misses its entries only
    custom = tmp_path / "prompts"
    shutil.copytree(prompts_dir(), custom)
    path = custom / "entailment_group.txt"
    path.write_text(path.read_text(encoding="utf-8").replace("Judge each cited paper on its own.",
                                                             "Judge each cited paper separately."), encoding="utf-8")
    assert load_prompt("entailment_group", custom).tag != load_prompt("entailment_group").tag
    assert load_prompt("entailment", custom).tag == load_prompt("entailment").tag
    assert _cache_run(llm, tmp_path, prompts_dir=str(custom))[1] == 0
    assert _cache_run(llm, tmp_path, prompts_dir=str(custom), entailment_prompt="edge")[1] == 2
    assert _cache_run(llm, tmp_path)[1] == 2  # the shipped grouped prompt's entries are still there


def test_the_offline_fallback_is_untouched(llm):
    b = openai_backend(LLMSettings(base_url=llm.base_url, model="fake-model"), fallback=offline_backend())
    assert b.fallback is not None and b.fallback.scorer.identity.startswith("word-overlap")


def test_a_group_is_cut_before_it_outgrows_a_small_context():
    big = [Claim(f"c{i}", "EMPIRICAL", "x" * 900, "s") for i in range(1, 6)]  # 4,500 characters of cited claims
    # cells: A (2 claims) × B (2) = 4 per pair; 31 pairs of 4 cells fit 120, the 31st does not (124)
    assert [len(g) for g in group_pairs([(A, B)] * 31, 100)] == [30, 1]
    # characters: one 4,500-character block fits 5,000, a second does not
    assert group_pairs([(A, big), (A, big), (A, C)]) == [[0], [1, 2]]  # the newest chunk is the open one
    assert group_pairs([(A, big + big)]) == [[0]]  # one pair over the limits is a call of its own


# --- the cascade with a grouped scorer (deterministic fake model, tiny corpus) -------------------------------

def _run(tiny_source, grouped: bool, calls: int):  # type: ignore[no-untyped-def]
    import datetime as dt

    from crase_core.pipeline import Engine, run_query
    from crase_core.settings.pipeline import PipelineSettings
    from crase_core.store.termstats import TermStats
    from crase_core.testing.fake_group_model import FakeGroupModel
    from crase_core.testing.fake_model import FakeModel, fake_backend

    stats = TermStats.from_index(tiny_source.text_index)
    backend, _ = fake_backend(stats)
    model = FakeGroupModel(stats) if grouped else FakeModel(stats)
    backend.planner = backend.extractor = backend.scorer = model
    # round 6's pruning of the fallback's edges (none): the trail-first priority these tests pin needs the edge the
    # word-overlap scorer would prune (0001001 → 9902001, the only trail) in the interim graph
    settings = PipelineSettings(m=3, L=2, llm_budget=calls, llm_token_budget=0, theta_lexical=0.0, tau_lexical=0.0)
    trace = run_query("black hole microstates anti-de Sitter", Engine(tiny_source, backend, None), settings,
                      now=dt.datetime(2001, 6, 1, tzinfo=dt.UTC))
    return trace, model


def test_unlimited_grouped_run_makes_one_call_per_citing_paper_and_the_same_decisions(tiny_source):
    edge, edge_model = _run(tiny_source, False, 0)
    group, group_model = _run(tiny_source, True, 0)
    citing = {e.citing for e in group.edges}
    assert len(group.edges) >= 5 and len(citing) < len(group.edges)
    assert group_model.group_calls == len(citing)  # ≤ 8 cited papers each on this graph
    assert group.counters.model_calls == 1 + len(group.nodes) + len(citing) == group_model.calls
    assert edge.counters.model_calls == 1 + len(edge.nodes) + len(edge.edges)
    assert {(e.citing, e.cited): e.matrix for e in group.edges} == {(e.citing, e.cited): e.matrix for e in edge.edges}
    assert [r.paper_id for r in group.results] == [r.paper_id for r in edge.results]
    assert all(e.scorer == "model" for e in group.edges)
    tokens = group.counters.prompt_tokens + group.counters.completion_tokens
    assert tokens < edge.counters.prompt_tokens + edge.counters.completion_tokens


@pytest.mark.parametrize("calls", [4, 6, 9])
def test_a_grouped_call_is_one_call_of_the_cascade_budget(tiny_source, calls):
    group, model = _run(tiny_source, True, calls)
    edge, _ = _run(tiny_source, False, calls)
    assert group.counters.model_calls == model.calls <= calls
    decided = [e for e in group.edges if e.scorer == "model"]
    # the first edge decided is the top of the priority order, as with one call per edge
    first = min(decided, key=lambda e: int(e.scorer_reason.split("#")[1].split(":")[0]))
    assert first.scorer_reason.startswith("priority #1: on the evidence trail of result #")
    assert len(decided) >= sum(e.scorer == "model" for e in edge.edges)  # never fewer decisions per call


def test_retries_of_claims_do_not_starve_the_matrices_of_the_round(tiny_source):
    """A server that fails every other request (each item costs 2 calls): claims that need retries may not
    spend the calls the round set aside for its matrices, so the model still decides edges."""
    import datetime as dt

    sys.path.insert(0, str(Path(__file__).parent))
    from model_server import ModelServer

    from crase_core.pipeline import Engine, run_query
    from crase_core.settings.pipeline import PipelineSettings
    from crase_core.store.termstats import TermStats

    server = ModelServer("flaky")
    try:
        b = openai_backend(LLMSettings(base_url=server.base_url, model="test-model", max_retries=1, concurrency=1),
                           fallback=offline_backend(TermStats.from_index(tiny_source.text_index)))
        t = run_query("black hole microstates anti-de Sitter", Engine(tiny_source, b, None),
                      PipelineSettings(m=3, L=2, llm_budget=10, llm_token_budget=0),
                      now=dt.datetime(2001, 6, 1, tzinfo=dt.UTC))
    finally:
        server.stop()
    assert t.counters.model_calls == server.requests <= 10
    decided = [e for e in t.edges if e.scorer == "model"]
    assert decided and all(len(e.matrix) >= 1 for e in decided)


def test_a_rerun_of_a_limited_query_asks_nothing_and_gives_the_same_answer(tiny_source, tmp_path):
    """Issue 12: the same query with the same budget reuses what the first run paid for (0 calls), instead of
    buying the next edges; a larger budget buys more."""
    import datetime as dt

    from crase_core.pipeline import Engine, run_query
    from crase_core.settings.pipeline import PipelineSettings
    from crase_core.store.termstats import TermStats
    from crase_core.testing.fake_group_model import FakeGroupModel
    from crase_core.testing.fake_model import fake_backend

    stats = TermStats.from_index(tiny_source.text_index)
    backend, _ = fake_backend(stats)
    model = FakeGroupModel(stats)
    backend.planner = backend.extractor = backend.scorer = model
    cache = ResultCache(tmp_path / "rc")
    settings = PipelineSettings(m=3, L=2, llm_budget=5, llm_token_budget=0)
    now = dt.datetime(2001, 6, 1, tzinfo=dt.UTC)

    def run(s: PipelineSettings):  # type: ignore[no-untyped-def]
        return run_query("black hole microstates anti-de Sitter", Engine(tiny_source, backend, cache), s, now=now)

    first = run(settings)
    assert 0 < first.counters.model_calls <= 5 and 0 < first.counters.model_edges < len(first.edges)
    calls = model.calls
    again = run(settings)
    assert model.calls == calls and again.counters.model_calls == 0
    assert [r.paper_id for r in again.results] == [r.paper_id for r in first.results]
    assert {(e.citing, e.cited, e.scorer) for e in again.edges} == {(e.citing, e.cited, e.scorer) for e in first.edges}
    # the same outcome: the app reopens the saved run instead of saving a copy (issue 11 item 7)
    assert outcome_key(again) == outcome_key(first) and content_id(again) != content_id(first)
    more = run(settings.replace(llm_budget=9))  # another budget: the cascade goes on from the cached answers
    assert 0 < more.counters.model_calls <= 9 and more.counters.model_edges > first.counters.model_edges
