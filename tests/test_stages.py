"""The pipeline's stages on their own: build_graph and its budget, the seeding hook, pruning and reasons."""

from __future__ import annotations

import datetime as dt

import pytest

from crase_core.backends import offline_backend
from crase_core.cache import ResultCache
from crase_core.component_cache import claims_digest, matrix_key
from crase_core.errors import BudgetExceeded
from crase_core.evaluation.stress import InjectedSeeds
from crase_core.pipeline import Engine, StageEvent, build_graph, estimate_budget, run_query
from crase_core.ranking.trails import RESTART_ONLY_REASON, explain
from crase_core.records import EdgeMatrix, Paper, PlanResult, SearchHit, Seed, SeedOrigin, TrailStep
from crase_core.retrieval.neighbourhood import ExpandedGraph
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.expansion import Expansion
from crase_core.stages.pruning import prune_graph
from crase_core.stages.ranking import rank_papers
from crase_core.stages.seeding import Seeding, search_seeds
from crase_core.store.termstats import TermStats

NOW = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
QUERY = "black hole microstates in anti-de Sitter space"
SETTINGS = PipelineSettings(m=2, L_offline=3, k=10)


@pytest.fixture()
def engine(tiny_source, tmp_path):
    return Engine(tiny_source, offline_backend(TermStats.from_index(tiny_source.text_index)), ResultCache(tmp_path / "rc"))


def test_build_graph_knows_the_budget_before_any_claim_or_matrix(engine):
    events: list[StageEvent] = []
    build = build_graph(QUERY, engine, SETTINGS, progress=events.append, now=NOW)
    assert engine.cache is not None and len(engine.cache) == 1  # only the plan was computed (and cached)
    graph = build.expansion.graph
    assert build.budget.total == 1 + len(graph.nodes) + len(graph.edges)
    assert build.budget.cached == 0 and build.budget.to_call == build.budget.total
    assert build.components.counters.model_calls == 1
    assert {e.stage for e in events} == {"plan", "seeds", "expansion"}

    planned = estimate_budget(QUERY, engine, SETTINGS)  # the plan is cached now: the run will not pay for it
    assert planned.cached == 1 and planned.to_call == planned.total - 1
    run_events: list[StageEvent] = []
    trace = run_query(QUERY, engine, SETTINGS, progress=run_events.append, now=NOW)
    assert trace.budget == planned and trace.counters.model_calls == planned.to_call
    assert [n.paper.id for n in trace.nodes] == graph.nodes
    assert [(e.citing, e.cited) for e in trace.edges] == graph.edges
    assert run_events[: len(events)] == events  # the run reports the same stages 1–2a, then the budget
    assert run_events[len(events)].stage == "claims" and run_events[len(events)].budget == trace.budget

    warm = estimate_budget(QUERY, engine, SETTINGS)
    assert warm.cached == warm.total and warm.to_call == 0
    assert run_query(QUERY, engine, SETTINGS, now=NOW).budget == warm


def test_estimate_budget_ignores_the_cap_and_run_query_enforces_it(tiny_source, tmp_path):
    engine = Engine(tiny_source, offline_backend(), ResultCache(tmp_path / "rc"))
    capped = SETTINGS.replace(max_model_calls=3)
    estimate_budget(QUERY, engine, capped)  # plans (and caches the plan)
    budget = estimate_budget(QUERY, engine, capped)
    assert budget.to_call > 3
    with pytest.raises(BudgetExceeded, match=f"needs {budget.to_call:,} model calls"):
        run_query(QUERY, engine, capped, now=NOW)
    assert run_query(QUERY, engine, SETTINGS.replace(max_model_calls=budget.to_call), now=NOW).budget == budget


def test_a_corrupt_cached_matrix_is_not_counted_as_cached_in_the_budget(tiny_source, tmp_path):
    backend = offline_backend()
    first = run_query(QUERY, Engine(tiny_source, backend, ResultCache(tmp_path / "rc")), SETTINGS, now=NOW)
    edge = first.edges[0]
    key = matrix_key(backend.scorer.identity, (), (), digests=(claims_digest(first.claims[edge.citing].claims),
                                                               claims_digest(first.claims[edge.cited].claims)))
    ResultCache(tmp_path / "rc").set_many({key: [[7.0]]})
    again = run_query(QUERY, Engine(tiny_source, backend, ResultCache(tmp_path / "rc")), SETTINGS, now=NOW)
    assert again.budget.to_call == again.counters.model_calls == 1
    assert again.counters.cache_hits == again.budget.cached == again.budget.total - 1
    assert again.edge(edge.citing, edge.cited).matrix == edge.matrix


def test_seeding_hook_replaces_the_seed_search(engine):
    calls: list[list[str]] = []

    def recorded(plan: PlanResult, source, settings, progress) -> Seeding:
        calls.append(list(plan.subqueries))
        return search_seeds(plan, source, settings, progress)

    plain = run_query(QUERY, engine, SETTINGS, now=NOW)
    hooked = run_query(QUERY, engine, SETTINGS, now=NOW, seeding=recorded)
    assert calls == [plain.plan.subqueries]
    assert hooked.seeds == plain.seeds and hooked.results == plain.results


def test_injected_seeds(engine):
    trace = run_query(QUERY, engine, SETTINGS, now=NOW, seeding=InjectedSeeds(["9902001", "nope", "9801001", "9902001"]))
    assert [s.paper_id for s in trace.seeds] == ["9902001", "9801001"]
    assert [(o.subquery, o.relevance_rank) for s in trace.seeds for o in s.origins] == [
        ("(injected seed)", 1), ("(injected seed)", 2)]
    assert trace.subquery_results == []
    assert trace.counters.search_calls == 1  # only the full-query search (query restart, text candidates)
    assert trace.warnings[0] == "seeds injected by the caller (2 of 4 visible); stage 1 search skipped"
    assert trace.plan.subqueries  # the plan is still made
    assert {n.paper.id for n in trace.nodes if n.role == "seed"} == {"9902001", "9801001"}


def _paper(pid: str, year: int | None) -> Paper:
    return Paper(pid, f"Paper {pid.upper()}", "", year)


def _hand_graph() -> tuple[Expansion, dict[tuple[str, str], EdgeMatrix], list[Seed]]:
    """Seeds s and z; x cites s (Δ = 1/2), s cites y (scoring failed); t is a text candidate."""
    papers = {p.id: p for p in (_paper("s", 2016), _paper("z", 2010), _paper("x", 2018), _paper("y", None),
                                _paper("t", 2019))}
    graph = ExpandedGraph(nodes=["s", "z", "x", "y", "t"], edges=[("s", "y"), ("x", "s")], hop={})
    matrices = {("x", "s"): EdgeMatrix([[0.9, 0.1], [0.2, 0.3]], "hand"),
                ("s", "y"): EdgeMatrix([], "hand", error="HTTP 503")}
    seeds = [Seed(pid, [SeedOrigin(0, "sq", r, r, 2)]) for r, pid in enumerate(["s", "z"], 1)]
    return Expansion(graph, papers, {"s", "z"}, ["t"]), matrices, seeds


#: the hand graph's edges are word-overlap ("offline") ones, judged at θ_lexical 0.75 and pruned at τ_lexical 0 as the
#: hand-checked Δ assume
HAND = PipelineSettings(theta_lexical=0.75, tau_lexical=0.0)


def test_prune_graph_by_hand():
    expansion, matrices, seeds = _hand_graph()
    pruning = prune_graph(expansion, matrices, seeds, HAND, reference_year=2020, scorers={})
    xs = next(e for e in pruning.edges if e.citing == "x")
    assert xs.supported == [True, False] and xs.delta == 0.5 and xs.kept and xs.rule == "delta-above-tau"
    assert (xs.scorer, xs.theta) == ("offline", 0.75)
    assert xs.decision == ("kept: 1 of 2 citing claims shares enough words with a cited claim (word-overlap support "
                           "≥ 0.75); rule: Δ = 0.5 > τ_lexical 0 at θ_lexical 0.75")
    assert xs.age_years == 4 and xs.weight == pytest.approx(0.5 * 4 ** -0.5)
    sy = next(e for e in pruning.edges if e.citing == "s")
    assert not sy.kept and sy.delta == 0.0 and sy.weight == 0.0 and sy.rule == "scoring-failed"
    assert sy.decision == ("pruned: scoring failed (HTTP 503); rule: an edge that cannot be scored has Δ = 0 ≤ "
                           "τ_lexical 0; cited paper has no year, age taken as 1")
    assert pruning.alive == {"s", "x", "t"}  # t: a text candidate, exempt from isolation pruning
    nodes = {n.paper.id: n for n in pruning.nodes}
    assert [n.role for n in pruning.nodes] == ["seed", "seed", "expanded", "expanded", "text"]
    assert nodes["y"].prune_reason == "isolated: all 1 of its edges were pruned"
    assert nodes["z"].prune_reason == "no citation edge inside the graph"
    assert [(s.fate, s.fate_reason) for s in seeds] == [
        ("kept", "kept: 1 of 2 edges kept"), ("pruned", "pruned: no references or citers inside the graph")]


def test_default_prunes_word_overlap_edges_where_no_claim_shares_words():
    """The default (θ_lexical 0.05, τ_lexical 0) on a hand graph: seeds s and z; a and b cite s, z and c cite
    each other. Row maxima: a→s 0.40 / 0.06 / 0.03, b→s 0.04 / 0.10 / 0.02 / 0, z→c 0.04 / 0.01, c→z 0.049."""
    papers = {p.id: p for p in (_paper("s", 2016), _paper("z", 2010), _paper("a", 2018), _paper("b", 2019),
                                _paper("c", 2019))}
    graph = ExpandedGraph(nodes=["s", "z", "a", "b", "c"], edges=[("a", "s"), ("b", "s"), ("z", "c"), ("c", "z")],
                          hop={})
    matrices = {("a", "s"): EdgeMatrix([[0.40, 0.01], [0.06, 0.02], [0.0, 0.03]], "word-overlap/v2"),
                ("b", "s"): EdgeMatrix([[0.04, 0.0], [0.10, 0.0], [0.02, 0.0], [0.0, 0.0]], "word-overlap/v2"),
                ("z", "c"): EdgeMatrix([[0.02, 0.04], [0.01, 0.0]], "word-overlap/v2"),
                ("c", "z"): EdgeMatrix([[0.049]], "word-overlap/v2")}
    seeds = [Seed(pid, [SeedOrigin(0, "sq", r, r, 2)]) for r, pid in enumerate(["s", "z"], 1)]
    pruning = prune_graph(Expansion(graph, papers, {"s", "z"}, []), matrices, seeds, PipelineSettings(),
                          reference_year=2020, scorers={})
    e = {(x.citing, x.cited): x for x in pruning.edges}
    a_s, b_s, z_c, c_z = e[("a", "s")], e[("b", "s")], e[("z", "c")], e[("c", "z")]
    # ✓ are the claims reaching θ_lexical 0.05, and Δ is their share
    assert (a_s.supported, a_s.delta) == ([True, True, False], 2 / 3)
    assert a_s.kept and a_s.weight == pytest.approx(2 / 3 * 4 ** -0.5)
    assert a_s.decision == ("kept: 2 of 3 citing claims share enough words with a cited claim (word-overlap support "
                            "≥ 0.05); rule: Δ = 0.667 > τ_lexical 0 at θ_lexical 0.05")
    assert (b_s.supported, b_s.delta, b_s.kept) == ([False, True, False, False], 0.25, True)
    assert b_s.weight == pytest.approx(0.25 * 4 ** -0.5)
    assert b_s.decision == ("kept: 1 of 4 citing claims shares enough words with a cited claim (word-overlap "
                            "support ≥ 0.05); rule: Δ = 0.25 > τ_lexical 0 at θ_lexical 0.05")
    assert (z_c.delta, z_c.kept, c_z.delta, c_z.kept) == (0.0, False, 0.0, False)
    assert z_c.decision == ("pruned: no citing claim shares enough words with a cited claim (word-overlap support "
                            "< 0.05 for all 2 citing claims); rule: Δ = 0 ≤ τ_lexical 0 at θ_lexical 0.05")
    assert {x.rule for x in (z_c, c_z)} == {"delta-at-most-tau"} and {a_s.rule, b_s.rule} == {"delta-above-tau"}
    assert all((x.theta, x.weight) == (0.05, 0.0) for x in (z_c, c_z))
    assert pruning.alive == {"a", "b", "s"}
    nodes = {n.paper.id: n for n in pruning.nodes}
    assert nodes["c"].prune_reason == "isolated: all 2 of its edges were pruned"
    # the seed z loses both its edges: it is pruned, and says why
    assert [(s.fate, s.fate_reason) for s in seeds] == [
        ("kept", "kept: 2 of 2 edges kept"), ("pruned", "pruned: all 2 of its edges were pruned (Δ ≤ τ)")]
    assert nodes["z"].display_role == "seed_pruned"


def test_rank_papers_explains_each_result():
    expansion, matrices, seeds = _hand_graph()
    settings = HAND.replace(personalization="query")
    pruning = prune_graph(expansion, matrices, seeds, settings, reference_year=2020, scorers={})
    hits = [SearchHit("x", 1, 1, 2.0), SearchHit("t", 2, 2, 1.0)]
    ranked = rank_papers(expansion, pruning, seeds, hits, settings, query="a hand-made question")
    assert sum(ranked.ranking.scores.values()) == pytest.approx(1.0)
    assert [r.rank for r in ranked.results] == list(range(1, len(ranked.results) + 1))
    by_id = {r.paper_id: r for r in ranked.results}
    assert set(by_id) == {"s", "x", "t"}
    assert by_id["s"].seed == "s" and by_id["s"].trail == [] and by_id["s"].reason.startswith("seed from sub-query 1")
    assert by_id["x"].seed == "s" and by_id["x"].reason == "cites seed “Paper S” (Δ 0.50)"
    assert by_id["t"].seed is None and by_id["t"].reason.startswith("text match #2 for the full query")
    nodes = {n.paper.id: n for n in pruning.nodes}
    assert {pid: nodes[pid].rank for pid in by_id} == {pid: r.rank for pid, r in by_id.items()}


def test_explain_a_paper_reached_only_by_restarts_and_a_long_trail():
    assert explain("q", None, None, None, {}) == (RESTART_ONLY_REASON, None, [])
    trail = [TrailStep("s", "a", 0.5, True), TrailStep("a", "b", 0.25, False)]
    reason, seed, steps = explain("b", trail, None, 3, {"s": "S" * 70, "a": "A", "b": "B"})
    assert seed == "s" and steps == trail  # a trail wins over being a text candidate
    assert reason == f"2 steps: seed “{'S' * 57}…” → (Δ 0.50) “A” ← (Δ 0.25) “B”"
