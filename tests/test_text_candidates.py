"""Text candidates: full-query hits the citation expansion did not reach join V with role "text".

Tiny corpus (tests/tiny_corpus.py), citations citing → cited: 9802001→9801001, 9901001→9801001,
9901001→9802001, 0001001→9901001, 0001001→9802001, 0001001→9902001, 0002001→9902001.
The plan is fixed to "supergravity" (a word only 9802001 holds), so the one seed is 9802001 and the
1.5-hop graph is V = {9802001, 0001001, 9801001, 9901001} (its reference and its two citers).
Matrices are scripted (Δ = 1 unless a test lists an edge), so which edges survive is known exactly.
"""

from __future__ import annotations

import datetime as dt

import pytest
from stub_backend import scripted_backend

from crase_core.pipeline import Engine, run_query
from crase_core.settings.pipeline import PipelineSettings

NOW = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
SEED = "9802001"
GRAPH = [SEED, "0001001", "9801001", "9901001"]
E15 = [("0001001", SEED), ("0001001", "9901001"), (SEED, "9801001"), ("9901001", "9801001"), ("9901001", SEED)]
# "Monte Carlo" occurs only in 9902001's abstract: the full query's hits are 9902001 (two matching terms,
# rank 1) and 9802001 (one term of the same idf, rank 2). 9902001 is outside the graph.
QUERY = "supergravity Monte Carlo"
#: the seeds are the plan's alone (no seeds from the question's own search, which would make 9902001 a seed)
PLAN_SEEDS = PipelineSettings(query_seeds=0)


def engine(tiny_source, matrices=None):
    return Engine(tiny_source, scripted_backend(["supergravity"], matrices), None)


def test_a_full_query_hit_outside_the_graph_joins_v_with_its_edges(tiny_source):
    eng = engine(tiny_source)
    t = run_query(QUERY, eng, PLAN_SEEDS.replace(hops=1.5, text_candidates=10), now=NOW)
    assert [h.paper_id for h in t.query_hits] == ["9902001", SEED]
    assert [n.paper.id for n in t.nodes] == GRAPH + ["9902001"]  # appended after the expanded graph
    assert {n.paper.id: n.role for n in t.nodes} == {SEED: "seed", "0001001": "expanded", "9801001": "expanded",
                                                     "9901001": "expanded", "9902001": "text"}
    # its one citation inside V (0001001 cites it) is added and scored like any other edge
    assert [(e.citing, e.cited) for e in t.edges] == sorted(E15 + [("0001001", "9902001")])
    assert ("0001001", "9902001") in eng.backend.scorer.scored
    assert t.budget.total == 1 + 5 + 6
    # 0002001 also cites 9902001 but is in neither V nor the hits: no edge from it
    assert all("0002001" not in (e.citing, e.cited) for e in t.edges)


def test_text_candidates_zero_turns_it_off(tiny_source):
    t = run_query(QUERY, engine(tiny_source), PLAN_SEEDS.replace(hops=1.5, text_candidates=0,
                                                               personalization="uniform"), now=NOW)
    assert [n.paper.id for n in t.nodes] == GRAPH
    assert [(e.citing, e.cited) for e in t.edges] == E15
    assert t.query_hits == []  # with the uniform restart and no candidates there is no full-query search
    assert t.counters.search_calls == 1


def test_text_candidates_counts_the_top_hits(tiny_source):
    # N = 1: only the top hit is considered; it is 9902001, outside the graph, so it still joins
    t = run_query(QUERY, engine(tiny_source), PLAN_SEEDS.replace(hops=1.5, text_candidates=1), now=NOW)
    assert [n.paper.id for n in t.nodes if n.role == "text"] == ["9902001"]


def test_a_text_candidate_is_exempt_from_isolation_pruning(tiny_source):
    # Prune every edge of 0001001, including its one edge to the candidate: 0001001 is isolated and pruned,
    # the text candidate (same situation: all 1 of its edges pruned) stays, because its evidence is the text.
    zero = [[0.0]]
    eng = engine(tiny_source, {("0001001", "9902001"): zero, ("0001001", SEED): zero, ("0001001", "9901001"): zero})
    t = run_query(QUERY, eng, PLAN_SEEDS.replace(hops=1.5, text_candidates=10), now=NOW)
    assert not t.edge("0001001", "9902001").kept
    assert not t.node("0001001").kept
    assert t.node("0001001").prune_reason == "isolated: all 3 of its edges were pruned"
    cand = t.node("9902001")
    assert cand.kept and cand.prune_reason == "" and cand.rank is not None and cand.score > 0
    # it has no kept edge, so no trail: the result says it is the full query's text match #1
    r = next(r for r in t.results if r.paper_id == "9902001")
    assert r.trail == [] and r.seed is None
    assert r.reason.startswith("text match #1 for the full query")
    assert "0001001" not in [x.paper_id for x in t.results]


def test_a_text_candidate_reason_matches_the_restart_in_use(tiny_source):
    eng = engine(tiny_source, {("0001001", "9902001"): [[0.0]]})
    # the walk's own score (no fusion with the text score)
    t = run_query(QUERY, eng, PLAN_SEEDS.replace(hops=1.5, text_candidates=10, personalization="uniform",
                                               fusion="none"), now=NOW)
    r = next(r for r in t.results if r.paper_id == "9902001")
    assert r.score == 0.0  # the uniform restart puts all its mass on the seed; no kept edge leads here
    assert "query restart" not in r.reason and "seed restart gives it no mass" in r.reason


def test_a_text_candidate_with_a_kept_edge_gets_a_trail_instead(tiny_source):
    # Δ = 1 everywhere: the seed → (against 0001001→seed) 0001001 → (along 0001001→9902001) 9902001
    t = run_query(QUERY, engine(tiny_source), PLAN_SEEDS.replace(hops=1.5, text_candidates=10), now=NOW)
    r = next(r for r in t.results if r.paper_id == "9902001")
    assert [(s.source, s.target, s.along_citation) for s in r.trail] == [
        (SEED, "0001001", False), ("0001001", "9902001", True)]
    assert not r.reason.startswith("text match")


# ---- hops < 1.5: only a candidate's citations with a seed at the other end are added ------------------------
# neighbor_cap = 1 keeps one citer of the seed: all have citation count unknown (0), ties by id → 0001001;
# 9901001 (a citer cut by the cap) then is outside the graph. "derive" is in 9901001 and 0001001 only,
# so the full query's hits are 9802001, 9901001, 0001001 and the one candidate is 9901001.
# Its citations inside V ∪ {9901001}: 9901001→9801001, 9901001→9802001 (the seed), 0001001→9901001.

@pytest.mark.parametrize(("hops", "edges"), [
    (1.0, [("0001001", SEED), (SEED, "9801001"), ("9901001", SEED)]),
    (1.5, [("0001001", SEED), ("0001001", "9901001"), (SEED, "9801001"), ("9901001", "9801001"),
           ("9901001", SEED)]),
])
def test_candidate_edges_below_hops_one_and_a_half_must_touch_a_seed(tiny_source, hops, edges):
    t = run_query("supergravity derive", engine(tiny_source),
                  PLAN_SEEDS.replace(hops=hops, neighbor_cap=1, text_candidates=10), now=NOW)
    assert {h.paper_id for h in t.query_hits} == {SEED, "9901001", "0001001"}
    assert [n.paper.id for n in t.nodes] == [SEED, "0001001", "9801001", "9901001"]
    assert [n.role for n in t.nodes] == ["seed", "expanded", "expanded", "text"]
    assert [(e.citing, e.cited) for e in t.edges] == edges
    assert [(x.paper_id, x.relation, x.total, x.kept) for x in t.truncations] == [(SEED, "citations", 2, 1)]
