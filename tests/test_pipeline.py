"""The whole pipeline: on the tiny corpus (exact, milliseconds) and on the embedded corpus (invariants)."""

from __future__ import annotations

import datetime as dt
import math

import pytest
from tiny_corpus import TINY_CITATIONS

from crase_core import trace as trace_io
from crase_core.backends import offline_backend
from crase_core.cache import ResultCache
from crase_core.errors import BudgetExceeded, InputError
from crase_core.pipeline import Engine, StageEvent, clean_query, run_query
from crase_core.settings.pipeline import PipelineSettings
from crase_core.store.termstats import TermStats

NOW = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)


@pytest.fixture()
def tiny_engine(tiny_source, tmp_path):
    return Engine(tiny_source, offline_backend(TermStats.from_index(tiny_source.text_index)), ResultCache(tmp_path / "rc"))


def comparable(trace) -> dict:
    """The trace as a dict without what legitimately differs between two identical runs (time, cache state)."""
    d = trace_io.to_dict(trace)
    for key in ("timings", "counters", "budget"):
        d.pop(key)
    for e in d["edges"]:
        e.pop("cached")
    for c in d["claims"].values():
        c.pop("cached")
    d["plan"].pop("cached")
    return d


def test_tiny_pipeline_end_to_end(tiny_engine):
    events: list[StageEvent] = []
    s = PipelineSettings(m=2, L_offline=3, k=10)
    t = run_query("black hole microstates in anti-de Sitter space", tiny_engine, s, progress=events.append, now=NOW)
    real = {e for e in TINY_CITATIONS if e[0] != e[1]}
    assert t.seeds and {e.citing for e in t.edges} | {e.cited for e in t.edges} <= {n.paper.id for n in t.nodes}
    assert {(e.citing, e.cited) for e in t.edges} <= real
    assert t.budget.total == 1 + len(t.nodes) + len(t.edges)
    assert t.budget.cached == 0 and t.budget.to_call == t.budget.total
    assert t.counters.model_calls == t.budget.total
    assert {e.stage for e in events} == {"plan", "seeds", "expansion", "claims", "entailment", "pruning", "ranking"}
    # every kept node has a kept edge, every pruned edge has weight 0 and a decision saying why
    kept_edges = [e for e in t.edges if e.kept]
    touched = {e.citing for e in kept_edges} | {e.cited for e in kept_edges}
    assert {n.paper.id for n in t.nodes if n.kept} == touched
    for e in t.edges:
        assert e.decision.startswith("kept" if e.kept else "pruned")
        assert (e.weight > 0) == e.kept
        assert len(e.matrix) == len(t.claims[e.citing].claims)
        assert all(len(row) == len(t.claims[e.cited].claims) for row in e.matrix)
        age = max(1, t.reference_year - t.node(e.cited).paper.year)  # Eq. 5: age ≥ 1 year
        assert e.weight == (pytest.approx(e.delta * age ** -0.5) if e.kept else 0.0)
    assert sum(t.ranking.scores.values()) == pytest.approx(1.0)
    assert [r.rank for r in t.results] == list(range(1, len(t.results) + 1))
    for s_ in t.seeds:
        assert s_.fate in ("kept", "pruned") and s_.fate_reason


def test_second_run_is_fully_cached_and_identical(tiny_engine):
    s = PipelineSettings(m=2, L_offline=3)
    a = run_query("black hole entropy D-branes", tiny_engine, s, now=NOW)
    b = run_query("black hole entropy D-branes", tiny_engine, s, now=NOW)
    assert b.counters.model_calls == 0
    assert b.counters.cache_hits == b.budget.total and b.budget.to_call == 0
    assert comparable(a) == comparable(b)


def test_trace_round_trip(tiny_engine, tmp_path):
    t = run_query("glueball spectrum lattice", tiny_engine, PipelineSettings(m=2, L_offline=2), now=NOW)
    path = trace_io.save(t, tmp_path / "t.json")
    back = trace_io.load(path)
    assert back == t
    assert trace_io.dumps(back) == trace_io.dumps(t)


def test_budget_cap_refuses_before_scoring(tiny_source, tmp_path):
    engine = Engine(tiny_source, offline_backend(), ResultCache(tmp_path / "rc2"))
    with pytest.raises(BudgetExceeded, match="model calls"):
        run_query("black hole", engine, PipelineSettings(m=3, max_model_calls=2), now=NOW)
    assert len(engine.cache) == 1  # only the plan: no claim or matrix was computed


def test_no_hits_is_a_clear_empty_result(tiny_engine):
    t = run_query("zzzqqq xyzzy", tiny_engine, now=NOW)
    assert t.results == [] and t.seeds == []
    assert any("no paper matched" in w for w in t.warnings)


@pytest.mark.parametrize("bad", ["", "   \n\t ", None, "x" * 10_000, "a\x00b"])
def test_bad_queries(bad):
    with pytest.raises(InputError):
        clean_query(bad)


def test_non_ascii_query_runs(tiny_engine):
    t = run_query("Schwarzschild–de Sitter black holes — entropía, 黑洞", tiny_engine, now=NOW)
    assert t.query.startswith("Schwarzschild–de Sitter")


def test_settings_validation():
    with pytest.raises(InputError, match="hops"):
        PipelineSettings(hops=3)
    with pytest.raises(InputError, match="alpha"):
        PipelineSettings(alpha=1.0)
    with pytest.raises(InputError, match="ranker"):
        PipelineSettings(ranker="nope")


def test_corrupt_cache_entries_are_recomputed(tiny_source, tmp_path):
    cache = ResultCache(tmp_path / "rc3")
    engine = Engine(tiny_source, offline_backend(), cache)
    a = run_query("black hole entropy", engine, PipelineSettings(m=2), now=NOW)
    # overwrite every cached value with garbage of the wrong shape
    for key in list(cache._cache.iterkeys()):
        cache._cache.set(key, {"garbage": True} if key.startswith("claims") else "not a matrix")
    fresh = Engine(tiny_source, offline_backend(), ResultCache(tmp_path / "rc3"))  # no in-memory copies
    b = run_query("black hole entropy", fresh, PipelineSettings(m=2), now=NOW)
    assert b.counters.cache_hits == 0 and b.counters.model_calls == b.budget.total
    assert [r.paper_id for r in b.results] == [r.paper_id for r in a.results]


# ---- the embedded corpus ---------------------------------------------------------------------------

QUERY = "Is there work on the moduli-space quantum mechanics of BPS black holes with superconformal symmetry?"


@pytest.fixture(scope="module")
def real_trace(hepth_engine):
    return run_query(QUERY, hepth_engine, PipelineSettings(), now=NOW)


def test_real_graph_invariants(real_trace, hepth_source):
    t = real_trace
    refs = hepth_source.corpus.refs
    idx = hepth_source.corpus.index
    assert len(t.nodes) > 100 and len(t.edges) > 500
    for e in t.edges:  # every edge is a real citation
        assert idx[e.cited] in refs.row(idx[e.citing])
    kept_edges = [e for e in t.edges if e.kept]
    touched = {e.citing for e in kept_edges} | {e.cited for e in kept_edges}
    text = {n.paper.id for n in t.nodes if n.role == "text"}  # full-query hits the expansion did not reach
    assert text <= {h.paper_id for h in t.query_hits[: t.settings.text_candidates]}
    # no kept node without a kept edge, except text candidates (exempt from isolation pruning)
    assert {n.paper.id for n in t.nodes if n.kept} == touched | text
    assert math.isclose(sum(t.ranking.scores.values()), 1.0, abs_tol=1e-9)
    assert len(t.results) == 50
    seed_ids = {s.paper_id for s in t.seeds}
    assert all(n.role == ("seed" if n.paper.id in seed_ids else "text" if n.paper.id in text else "expanded")
               for n in t.nodes)
    for r in t.results:  # every trail is a chain of kept edges from a seed
        if r.trail:
            assert r.trail[0].source in seed_ids and r.trail[-1].target == r.paper_id
            for a, b in zip(r.trail, r.trail[1:], strict=False):
                assert a.target == b.source


def test_real_run_is_deterministic(real_trace, hepth_engine):
    again = run_query(QUERY, hepth_engine, PipelineSettings(), now=NOW)
    assert comparable(real_trace) == comparable(again)


def test_leakage_filter_in_the_pipeline(hepth_source, hepth_engine):
    from crase_core.paper_source import SourceFilter

    f = SourceFilter(max_month=199912, exclude=frozenset({"9911001"}))
    engine = Engine(hepth_source.restricted(f), hepth_engine.backend, hepth_engine.cache)
    t = run_query("superconformal multi black hole moduli spaces", engine, PipelineSettings(), now=NOW)
    assert t.nodes and all(n.paper.month <= 199912 and n.paper.id != "9911001" for n in t.nodes)
    assert "1999-12" in t.source_filter


class _PickyModel:
    """A deterministic stand-in model: claims fail for one paper, matrices fail for one edge (like a model
    whose answer stays unusable after its retries). Counts its calls."""

    def __init__(self, base, bad_paper: str, bad_cited: str):
        self.base, self.bad_paper, self.bad_cited, self.calls = base, bad_paper, bad_cited, 0
        self.identity = "picky/v1"

    def extract_many(self, papers):
        self.calls += len(papers)
        out = self.base.extractor.extract_many(papers)
        for cs in out:
            cs.extractor = self.identity
            if cs.paper_id == self.bad_paper:
                cs.claims, cs.error = [], "model output: 2 claims, expected 4-5"
        return out

    def score_many(self, pairs):
        self.calls += len(pairs)
        out = self.base.scorer.score_many(pairs)
        for (_citing, cited), em in zip(pairs, out, strict=True):
            em.scorer = self.identity
            if cited and cited[0].text.startswith(self.bad_cited):
                em.matrix, em.error = [], "model output: matrix has 3 rows, expected 4"
        return out


def test_model_output_failures_are_recorded_and_cached(tiny_source, tmp_path):
    from crase_core.backends import ModelBackend

    base = offline_backend()
    bad_cited = tiny_source.get(["9801001"])["9801001"].abstract[:20]
    model = _PickyModel(base, bad_paper="9802001", bad_cited=bad_cited)
    backend = ModelBackend("picky", base.planner, model, model)
    engine = Engine(tiny_source, backend, ResultCache(tmp_path / "rc4"))
    a = run_query("black hole microstates anti-de Sitter", engine, PipelineSettings(m=3, L_offline=2), now=NOW)
    assert a.claims["9802001"].error.startswith("model output:")
    failed_edges = [e for e in a.edges if e.error]
    assert failed_edges and all(not e.kept and "scoring failed" in e.decision or "no claims" in e.decision
                                for e in failed_edges)
    assert a.counters.failures == 1 + sum(1 for e in a.edges if e.error and e.error.startswith("model output:"))
    calls = model.calls
    fresh = Engine(tiny_source, backend, ResultCache(tmp_path / "rc4"))  # disk cache only
    b = run_query("black hole microstates anti-de Sitter", fresh, PipelineSettings(m=3, L_offline=2), now=NOW)
    assert model.calls == calls and b.counters.model_calls == 0  # the repeated query costs nothing
    assert b.counters.failures == a.counters.failures
    assert comparable(a) == comparable(b)
