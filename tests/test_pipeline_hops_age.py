"""hops = 1 / 1.5 / 2 and age_reference_year through the whole pipeline (run_query) on the tiny corpus.

The plan is fixed to one sub-query, "supergravity", a word only 9802001's abstract holds, so the seed
set is exactly {9802001}; every matrix is [[1.0]] (Δ = 1, every edge kept), so each weight is the age factor.

Tiny corpus citations (citing → cited): 9802001→9801001, 9901001→9801001, 9901001→9802001,
0001001→9901001, 0001001→9802001, 0001001→9902001, 0002001→9902001.
Years: 9801001, 9802001: 1998; 9901001, 9902001: 1999; 0001001, 0002001: 2000.
"""

from __future__ import annotations

import datetime as dt

import pytest
from stub_backend import scripted_backend

from crase_core.pipeline import Engine, run_query
from crase_core.settings.pipeline import PipelineSettings

NOW = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
SEED = "9802001"
# hops 1: V = seed + its refs (9801001) + its citers (9901001, 0001001); seeds first, the rest by id.
V1 = [SEED, "0001001", "9801001", "9901001"]
E1 = [("0001001", SEED), (SEED, "9801001"), ("9901001", SEED)]  # only seed–neighbour citations
# hops 1.5: same V, every citation among V (adds 0001001→9901001 and 9901001→9801001)
E15 = [("0001001", SEED), ("0001001", "9901001"), (SEED, "9801001"), ("9901001", "9801001"), ("9901001", SEED)]
# hops 2: the neighbours of 0001001, 9801001, 9901001 join: only 9902001 is new (cited by 0001001);
# 0002001 cites 9902001 but is three steps from the seed, so it stays out.
V2 = [SEED, "0001001", "9801001", "9901001", "9902001"]
E2 = sorted(E15 + [("0001001", "9902001")])


@pytest.fixture()
def engine(tiny_source):
    return Engine(tiny_source, scripted_backend(["supergravity"]), None)


def run(engine, **settings):
    return run_query("supergravity", engine, PipelineSettings(**settings), now=NOW)


@pytest.mark.parametrize(("hops", "nodes", "edges"), [(1.0, V1, E1), (1.5, V1, E15), (2.0, V2, E2)])
def test_hops_decide_v_and_e(engine, hops, nodes, edges):
    t = run(engine, hops=hops)
    assert [s.paper_id for s in t.seeds] == [SEED]
    assert [n.paper.id for n in t.nodes] == nodes
    assert [(e.citing, e.cited) for e in t.edges] == edges
    assert [n.role for n in t.nodes] == ["seed"] + ["expanded"] * (len(nodes) - 1)
    # the budget is 1 + |V| + |E| (paper App. A): 1 + 4 + 3 = 8, 1 + 4 + 5 = 10, 1 + 5 + 6 = 12
    assert t.budget.total == {1.0: 8, 1.5: 10, 2.0: 12}[hops]
    assert t.counters.model_calls == t.budget.total
    assert all(e.kept and e.delta == 1.0 for e in t.edges)


def test_hops_two_ranks_the_second_ring(engine):
    t = run(engine, hops=2.0)
    ranked = [r.paper_id for r in t.results]
    assert "9902001" in ranked and "0002001" not in ranked
    r = next(r for r in t.results if r.paper_id == "9902001")
    # 9902001 is reached from the seed only against a citation (0001001 cites the seed) then along one
    assert [(s.source, s.target, s.along_citation) for s in r.trail] == [
        (SEED, "0001001", False), ("0001001", "9902001", True)]
    assert r.seed == SEED
    assert r.reason == ("2 steps: seed “Anti-de Sitter space and holography” ← (Δ 1.00) “Holographic entanglement "
                        "and black hole microstates” → (Δ 1.00) “Lattice simulation of gauge theory glueballs”")


def test_age_reference_year_sets_every_age_and_weight(engine):
    t = run(engine, hops=2.0, age_reference_year=2001)
    assert t.reference_year == 2001
    # age(v) = 2001 − year(v): 1998 → 3, 1999 → 2; factor age^−0.5 (β = 0.5); w = Δ · factor = factor
    expected_age = {"9801001": 3.0, "9802001": 3.0, "9901001": 2.0, "9902001": 2.0}
    for e in t.edges:
        assert e.age_years == expected_age[e.cited]
        assert e.age_factor == pytest.approx(expected_age[e.cited] ** -0.5)
        assert e.weight == pytest.approx(expected_age[e.cited] ** -0.5)
    assert t.edge("0001001", "9902001").weight == pytest.approx(1 / 2 ** 0.5)
    assert t.edge(SEED, "9801001").weight == pytest.approx(1 / 3 ** 0.5)


def test_age_of_a_paper_from_the_reference_year_or_after_is_one(engine):
    # reference 1998: 9801001/9802001 (1998) have age max(1, 0) = 1; 9901001/9902001 (1999) would be −1 → 1
    t = run(engine, hops=2.0, age_reference_year=1998)
    assert t.reference_year == 1998
    assert {e.age_years for e in t.edges} == {1.0}
    assert {e.age_factor for e in t.edges} == {1.0}


def test_beta_one_and_default_reference_year_is_now(engine):
    t = run(engine, hops=1.0, beta=1.0)
    assert t.reference_year == 2026  # age_reference_year None: the year of `now`
    # 2026 − 1998 = 28, β = 1 → 1/28 for every cited paper of E1 (9801001 and 9802001 are from 1998)
    assert [(e.age_years, e.age_factor) for e in t.edges] == [(28.0, pytest.approx(1 / 28))] * 3


@pytest.mark.parametrize("ref", [2001, 1998])
def test_age_factors_steer_the_walk(tiny_source, ref):
    # Seed 0001001 ("entanglement" is only in its title) cites 9802001 (1998), 9901001 and 9902001 (1999).
    # hops 1: those three edges only, every target dangling. PPR with α = 1/2, p = {seed: 1}:
    #   π(seed) = 1/2 + 1/2·(1 − π(seed))  →  π(seed) = 2/3;   π(v) = 1/2 · P(seed→v) · 2/3 = P(seed→v)/3,
    #   P(seed→v) = age(v)^−½ / Σ age^−½.
    # ref 2001: ages 3, 2, 2;  ref 1998: ages 1, 1, 1 (a paper from the reference year or later has age 1).
    engine = Engine(tiny_source, scripted_backend(["entanglement"]), None)
    t = run_query("entanglement", engine, PipelineSettings(ranker="ppr", hops=1.0, alpha=0.5, personalization="uniform",
                                                           text_candidates=0, age_reference_year=ref), now=NOW)
    ages = {"9802001": 3.0, "9901001": 2.0, "9902001": 2.0} if ref == 2001 else dict.fromkeys(
        ("9802001", "9901001", "9902001"), 1.0)
    total = sum(a ** -0.5 for a in ages.values())
    expected = {"0001001": 2 / 3, **{v: (a ** -0.5 / total) / 3 for v, a in ages.items()}}
    assert t.ranking.scores == pytest.approx(expected, abs=1e-9)
    if ref == 2001:  # the younger papers outrank the older one; ties keep id order
        assert [r.paper_id for r in t.results] == ["0001001", "9901001", "9902001", "9802001"]
