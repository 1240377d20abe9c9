"""Verdicts that re-rank (crase_core.audit.rerank.apply_verdicts, ``crase rerank``) and score parts on real runs.

Real runs of the embedded corpus: the default and one with θ_lexical 0.15 and τ_lexical 0, so that both kept
and pruned edges, and kept seeds, exist whatever the default's pruning rule is (0.15 on word-overlap/v2's scale
is the 0.75 of lexical-support/v1's logistic one; 0.75 on v2's scale keeps 2 of 7,875 edges and no seed).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crase_core import trace as trace_io
from crase_core.audit.rerank import EdgeVerdict, apply_verdicts, auditor_weight, parse_edge, rank_changes
from crase_core.audit.store import Verdict, cohen_kappa, human_decisions, pairwise_agreement
from crase_core.cli.main import main
from crase_core.errors import InputError
from crase_core.pipeline import run_query
from crase_core.settings.pipeline import PipelineSettings
from crase_core.trace import RunTrace

QUERY = "tachyon condensation on unstable D-branes"


@pytest.fixture(scope="module")
def default_run(hepth_engine) -> RunTrace:
    return run_query(QUERY, hepth_engine, PipelineSettings())


@pytest.fixture(scope="module")
def pruned_run(hepth_engine) -> RunTrace:
    trace = run_query(QUERY, hepth_engine, PipelineSettings(theta_lexical=0.15, tau_lexical=0.0))
    assert any(e.kept for e in trace.edges) and any(not e.kept for e in trace.edges)
    assert any(s.fate == "kept" for s in trace.seeds)
    return trace


def _parts_sum_to_scores(trace: RunTrace) -> None:
    for r in trace.results:
        assert r.score_parts, r.paper_id
        assert sum(p.value for p in r.score_parts) == pytest.approx(r.score, rel=1e-12, abs=1e-15)
        for p in r.score_parts:
            assert sum(x.value for x in p.paths) <= p.value * (1 + 1e-9) + 1e-15  # a part's paths carry ≤ it


@pytest.mark.parametrize("fixture", ["default_run", "pruned_run"])
def test_every_result_has_score_parts_summing_to_its_score(request, fixture):
    trace = request.getfixturevalue(fixture)
    _parts_sum_to_scores(trace)
    hits = {h.paper_id: h for h in trace.query_hits}
    for h in trace.query_hits:
        assert sum(h.parts.values()) == pytest.approx(h.score, rel=1e-12)
    signals = {p.signal for r in trace.results for p in r.score_parts}
    assert {"walk", "text"} <= signals
    # the default's search-rank term is μ(q)/(k + s) for the paper's own search rank s
    for r in trace.results:
        terms = {p.part.split(" · ")[0] for p in r.score_parts}
        if r.paper_id in hits:
            assert "search-rank term" in terms
        walk = sum(p.value for p in r.score_parts if p.signal == "walk")
        assert walk >= 0.0


def test_a_run_with_no_verdicts_reranks_to_itself(pruned_run):
    """The re-rank path computes exactly what the pipeline computed: results, scores and parts."""
    child = apply_verdicts(pruned_run, [])
    assert [(r.paper_id, r.score, r.reason) for r in child.results] == [
        (r.paper_id, r.score, r.reason) for r in pruned_run.results]
    assert [r.score_parts for r in child.results] == [r.score_parts for r in pruned_run.results]
    assert {n.paper.id: (n.kept, n.rank) for n in child.nodes} == {n.paper.id: (n.kept, n.rank) for n in pruned_run.nodes}
    assert [(s.fate, s.fate_reason) for s in child.seeds] == [(s.fate, s.fate_reason) for s in pruned_run.seeds]


def test_pruning_an_edge_reranks_without_touching_the_parent(pruned_run):
    before = trace_io.dumps(pruned_run)
    top = pruned_run.results[0].paper_id
    edge = max((e for e in pruned_run.edges if e.kept and e.cited == top), key=lambda e: e.weight, default=None) or next(
        e for e in pruned_run.edges if e.kept)
    child = apply_verdicts(pruned_run, [EdgeVerdict(edge.citing, edge.cited, False, ("ann",), "test")])
    assert trace_io.dumps(pruned_run) == before  # the parent is not changed
    e = child.edge(edge.citing, edge.cited)
    assert not e.kept and e.weight == 0.0 and e.decision.startswith("pruned by the verdict of ann")
    assert child.parent_run_id == pruned_run.run_id and child.run_id != pruned_run.run_id
    assert [(a.citing, a.cited, a.keep, a.was_kept, a.auditors) for a in child.applied_verdicts] == [
        (edge.citing, edge.cited, False, True, ["ann"])]
    assert child.claims == pruned_run.claims  # no claim recomputed
    assert [x.matrix for x in child.edges] == [x.matrix for x in pruned_run.edges]
    assert child.counters.model_calls == 0 and child.counters.cache_misses == 0 and child.counters.cache_hits == 0
    assert child.ranking.scores != pruned_run.ranking.scores
    _parts_sum_to_scores(child)
    assert any("re-ranked from run" in w for w in child.warnings)
    again = trace_io.loads(trace_io.dumps(child))  # the new run is a valid trace
    assert again.parent_run_id == pruned_run.run_id and again.applied_verdicts == child.applied_verdicts


def test_keeping_a_pruned_edge_weighs_it_by_one_supported_claim(pruned_run):
    edge = next(e for e in pruned_run.edges if not e.kept and e.supported)
    child = apply_verdicts(pruned_run, [EdgeVerdict(edge.citing, edge.cited, True)])
    e = child.edge(edge.citing, edge.cited)
    n = max(len(edge.supported), len(edge.matrix))
    assert e.kept and e.weight == pytest.approx(max(edge.delta, 1.0 / n) * edge.age_factor)
    assert e.weight == auditor_weight(edge) and e.decision.startswith("kept by an auditor's verdict")
    assert child.node(edge.citing).kept and child.node(edge.cited).kept
    assert e.delta == edge.delta  # the scorer's Δ is kept as the scorer said


def test_pruning_every_edge_of_a_seed_prunes_the_seed(pruned_run):
    def kept_edges(pid):
        return [e for e in pruned_run.edges if e.kept and pid in (e.citing, e.cited)]

    # a seed the question's own search does not rank near the top (those stay by their text match, below)
    seed = min((s for s in pruned_run.seeds if s.fate == "kept" and not pruned_run.node(s.paper_id).text_match),
               key=lambda s: len(kept_edges(s.paper_id)))
    mine = kept_edges(seed.paper_id)
    child = apply_verdicts(pruned_run, [EdgeVerdict(e.citing, e.cited, False) for e in mine])
    fate = next(s for s in child.seeds if s.paper_id == seed.paper_id)
    node = child.node(seed.paper_id)
    assert fate.fate == "pruned" and not node.kept and node.rank is None
    degree = sum(seed.paper_id in (e.citing, e.cited) for e in pruned_run.edges)
    assert fate.fate_reason == (f"pruned: all {degree} of its edges are pruned, {len(mine)} of them by an "
                                "auditor's verdict")
    assert node.prune_reason == f"isolated: all {degree} of its edges were pruned"
    assert seed.paper_id not in {r.paper_id for r in child.results}
    if seed.paper_id in {r.paper_id for r in pruned_run.results}:
        assert any(c.paper_id == seed.paper_id and c.after is None for c in rank_changes(pruned_run, child))


def test_pruning_every_edge_of_a_top_text_match_keeps_it_by_its_text_match(pruned_run):
    """The strongest text matches are never lost (issue 30): an auditor's verdicts prune its edges, not the paper."""
    top = next(s for s in pruned_run.seeds if pruned_run.node(s.paper_id).text_match and s.fate == "kept")
    mine = [e for e in pruned_run.edges if e.kept and top.paper_id in (e.citing, e.cited)]
    assert mine
    child = apply_verdicts(pruned_run, [EdgeVerdict(e.citing, e.cited, False) for e in mine])
    fate = next(s for s in child.seeds if s.paper_id == top.paper_id)
    rank = next(h.relevance_rank for h in pruned_run.query_hits if h.paper_id == top.paper_id)
    degree = sum(top.paper_id in (e.citing, e.cited) for e in pruned_run.edges)
    assert (fate.fate, fate.fate_reason) == ("kept", f"kept by its text match (#{rank} of the question's own search): "
                                                     f"all {degree} of its edges were pruned")
    assert child.node(top.paper_id).kept
    result = next((r for r in child.results if r.paper_id == top.paper_id), None)
    assert result is not None and "kept by its text match" in result.reason


def test_parse_edge_reads_ids_with_colons_and_refuses_the_rest():
    edges = [("doi:10.1/a", "b"), ("x", "y:z"), ("p", "q")]
    assert parse_edge("doi:10.1/a:b", edges) == ("doi:10.1/a", "b")
    assert parse_edge("x:y:z", edges) == ("x", "y:z")
    for bad, message in [("pq", "malformed"), (":q", "malformed"), ("p:", "malformed"), ("p:nope", "no edge"),
                         ("p :q", "spaces or control"), ("p:\x1b[31mq", "spaces or control"),
                         ("p:" + "q" * 700, "longer than")]:
        with pytest.raises(InputError, match=message):
            parse_edge(bad, edges)
    with pytest.raises(InputError, match="ambiguous"):
        parse_edge("a:b:c", [("a", "b:c"), ("a:b", "c")])


def test_one_edge_both_kept_and_pruned_is_refused(pruned_run):
    e = pruned_run.edges[0]
    with pytest.raises(InputError, match="both --prune and --keep"):
        apply_verdicts(pruned_run, [EdgeVerdict(e.citing, e.cited, False), EdgeVerdict(e.citing, e.cited, True)])


def test_cohen_kappa_and_auditor_pairs():
    assert cohen_kappa([True, True, False, False], [True, False, False, False]) == pytest.approx(0.5)
    assert cohen_kappa([True, False], [False, True]) == pytest.approx(-1.0)
    assert cohen_kappa([True, True], [True, True]) is None  # one category only: undefined
    assert cohen_kappa([], []) is None
    with pytest.raises(InputError):
        cohen_kappa([True], [])

    def v(who, edge, verdict, kept=True):
        return Verdict("r", edge, "z", who, verdict, kept)

    votes = [v("a", "1", "agree"), v("b", "1", "agree"), v("a", "2", "agree"), v("b", "2", "disagree"),
             v("a", "3", "disagree"), v("b", "3", "disagree"), v("a", "4", "agree"), v("b", "4", "agree"),
             v("c", "9", "agree")]
    pairs = pairwise_agreement(votes)
    assert [(p.first, p.second, p.edges) for p in pairs] == [("a", "b", 4)]  # c judged no edge they did
    # a: keep keep prune keep; b: keep prune prune keep → p_o = 3/4, p_e = ¾·½ + ¼·½ = ½
    assert pairs[0].agreement == pytest.approx(0.75) and pairs[0].kappa == pytest.approx(0.5)


def test_human_decisions_mine_and_majority():
    votes = [Verdict("r", "1", "z", "a", "disagree", True), Verdict("r", "1", "z", "b", "disagree", True),
             Verdict("r", "2", "z", "a", "agree", True), Verdict("r", "2", "z", "b", "disagree", True),
             Verdict("other", "3", "z", "a", "disagree", False)]
    mine, ties = human_decisions(votes, "r", "a")
    assert [(d.citing, d.keep) for d in mine] == [("1", False), ("2", True)] and ties == []
    most, ties = human_decisions(votes, "r")
    assert [(d.citing, d.keep, d.auditors) for d in most] == [("1", False, ("a", "b"))] and ties == [("2", "z")]


# ---- the command line -----------------------------------------------------------------------------------
def _crase(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


class RaisingModel:
    """A model that fails the test if anything asks it (re-ranking must not)."""

    def __getattr__(self, name):
        raise AssertionError(f"the model was asked ({name}) while re-ranking")


def test_crase_rerank_makes_no_model_call_and_reads_no_cache(tmp_path, capsys, monkeypatch, pruned_run):
    import crase_core.cache as cache
    import crase_core.component_cache as component_cache
    import crase_core.runtime as runtime
    from crase_core.backends import ModelBackend

    run = trace_io.save(pruned_run, tmp_path / "t.json")
    edge = next(e for e in pruned_run.edges if e.kept)
    pruned = next(e for e in pruned_run.edges if not e.kept)

    def refuse(*_a, **_k):
        raise AssertionError("re-ranking reached a model or the result cache")

    raising = ModelBackend("raising", RaisingModel(), RaisingModel(), RaisingModel())  # type: ignore[arg-type]
    monkeypatch.setattr(runtime, "build_engine", lambda *_a, **_k: raising)
    for name in ("__init__", "plan", "extract", "score", "cached_claims", "cached_matrices"):
        monkeypatch.setattr(component_cache.ComponentCache, name, refuse)
    for name in ("__init__", "get_many", "set_many", "contains_many"):
        monkeypatch.setattr(cache.ResultCache, name, refuse)
    code, out, err = _crase(capsys, "rerank", run, "--prune", f"{edge.citing}:{edge.cited}",
                            "--keep", f"{pruned.citing}:{pruned.cited}", "--json", tmp_path / "t2.json")
    assert code == 0, err
    child = trace_io.load(tmp_path / "t2.json")
    assert child.parent_run_id == pruned_run.run_id
    assert child.counters.model_calls == 0 and child.counters.cache_misses == 0
    assert not child.edge(edge.citing, edge.cited).kept and child.edge(pruned.citing, pruned.cited).kept
    assert f"parent {pruned_run.run_id}" in out and "(0 model calls)" in out
    assert f"{edge.citing} → {edge.cited}: pruned" in out and f"{pruned.citing} → {pruned.cited}: kept" in out


def test_crase_show_why_prints_the_parts(tmp_path, capsys, default_run):
    run = trace_io.save(default_run, tmp_path / "t.json")
    r = default_run.results[1]
    code, out, err = _crase(capsys, "show", run, "--why", r.paper_id)
    assert code == 0, err
    assert out.startswith(f"Rank 2 · score {r.score:.6f}")
    assert f"parts sum to {sum(p.value for p in r.score_parts):.6f} (score {r.score:.6f})" in out
    assert "search-rank term" in out and "fused-rank term" in out and "BM25" in out
    for p in r.score_parts:
        assert f"{p.value:>10.6f}" in out


def test_crase_show_why_strips_control_characters(tmp_path, capsys, default_run):
    data = json.loads(trace_io.dumps(default_run))
    r = data["results"][0]
    for n in data["nodes"]:
        if n["paper"]["id"] == r["paper_id"]:
            n["paper"]["title"] = "\x1b]0;pwned\x07\x1b[31mRed title\x1b[0m"
    r["score_parts"][0]["component"] = "evil\x1b[2Jpart"
    r["score_parts"][0]["term"] = "term\rwith\x08controls"
    path = Path(tmp_path / "hostile.json")
    path.write_text(json.dumps(data), encoding="utf-8")
    code, out, err = _crase(capsys, "show", path, "--why", r["paper_id"])
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out and "\x08" not in out and "\r" not in out
    assert "Red title" in out


def test_crase_show_why_on_an_old_trace_and_an_unknown_paper(tmp_path, capsys, default_run):
    data = json.loads(trace_io.dumps(default_run))
    for r in data["results"]:
        del r["score_parts"]  # a trace written before score parts existed
    del data["parent_run_id"], data["applied_verdicts"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    first = default_run.results[0].paper_id
    code, out, _ = _crase(capsys, "show", path, "--why", first)
    assert code == 0 and "records no score parts" in out
    code, out, err = _crase(capsys, "show", path, "--why", "nope")
    assert code == 2 and out == "" and "the run has no paper 'nope'" in err
    unranked = next(n for n in default_run.nodes if n.paper.id not in {r.paper_id for r in default_run.results})
    code, _, err = _crase(capsys, "show", path, "--why", unranked.paper.id)
    assert code == 2 and "is not among the run's" in err


def test_crase_show_says_what_each_score_is_made_of(tmp_path, capsys, default_run):
    run = trace_io.save(default_run, tmp_path / "t.json")
    code, out, _ = _crase(capsys, "show", run, "--k", "3")
    assert code == 0
    lines = [ln for ln in out.splitlines() if ln.startswith("       rank: score ")]
    assert [ln.split(" = ")[0] for ln in lines] == [f"       rank: score {r.score:.4f}" for r in default_run.results[:3]]
