"""Coverage affinity Δ (Eq. 3–4), pruning with τ, weights (Eq. 5) on hand-made matrices; each scorer's θ and τ;
the text matches kept whatever their edges; the seed fates."""

from __future__ import annotations

from collections import Counter

import pytest

from crase_core.ranking.pruning import (
    RULE_FAILED,
    RULE_KEEP_ALL,
    RULE_KEPT,
    RULE_PRUNED,
    SCORERS,
    ScorerRule,
    age_years,
    coverage_affinity,
    decide_edge,
    decide_seed_fates,
    edge_tallies,
    edge_tau,
    edge_theta,
    edge_weight,
    scorer_rule,
    supported_claims,
    surviving_nodes,
    text_match_ids,
)
from crase_core.records import OFFLINE, EdgeRecord, SearchHit, Seed
from crase_core.settings.pipeline import PipelineSettings

M = [
    [0.75, 0.20],  # tie at θ: supported
    [0.7499, 0.1],  # just below: not supported
    [0.1, 0.9],  # supported by the second cited claim
    [0.0, 0.0],
]


def test_supported_claims_tie_at_theta_counts():
    assert supported_claims(M, 0.75) == [True, False, True, False]


def test_delta_is_fraction_of_supported_citing_claims():
    assert coverage_affinity(M, 0.75) == 0.5
    assert coverage_affinity(M, 0.0) == 1.0  # every row has max ≥ 0
    assert coverage_affinity(M, 0.95) == 0.0
    assert coverage_affinity([], 0.75) == 0.0


def _edge(delta, n=4, k=2, error=None, scorer="model", theta=0.75):
    return EdgeRecord("u", "v", supported=[True] * k + [False] * (n - k), delta=delta, age_years=4.0,
                      age_factor=4.0 ** -0.5, error=error, scorer=scorer, theta=theta)


def test_tau_zero_prunes_exactly_the_unsupported():
    kept = decide_edge(_edge(0.25, k=1), tau=0.0)
    assert kept.kept and kept.weight == pytest.approx(0.25 * 0.5) and kept.rule == RULE_KEPT
    assert kept.decision == ("kept: 1 of 4 citing claims is entailed by a cited claim (entailment (model) ≥ 0.75); "
                             "rule: Δ = 0.25 > τ 0 at θ 0.75")
    pruned = decide_edge(_edge(0.0, k=0), tau=0.0)
    assert not pruned.kept and pruned.weight == 0.0 and pruned.rule == RULE_PRUNED
    assert pruned.decision == ("pruned: no citing claim is entailed by a cited claim (entailment (model) < 0.75 for "
                               "all 4 citing claims); rule: Δ = 0 ≤ τ 0 at θ 0.75")


def test_word_overlap_decisions_name_the_scorer_and_the_rule():
    none = decide_edge(_edge(0.0, n=5, k=0, scorer="offline", theta=0.05), tau=0.35)
    assert not none.kept and none.decision == (
        "pruned: no citing claim shares enough words with a cited claim (word-overlap support < 0.05 for all 5 "
        "citing claims); rule: Δ = 0 ≤ τ_lexical 0.35 at θ_lexical 0.05")
    one = decide_edge(_edge(0.2, n=5, k=1, scorer="offline", theta=0.05), tau=0.35)
    assert not one.kept and one.rule == RULE_PRUNED and one.decision == (
        "pruned: only 1 of 5 citing claims shares enough words with a cited claim (word-overlap support ≥ 0.05); "
        "rule: Δ = 0.2 ≤ τ_lexical 0.35 at θ_lexical 0.05")
    two = decide_edge(_edge(0.4, n=5, k=2, scorer="offline", theta=0.05), tau=0.35)
    assert two.kept and two.weight == pytest.approx(0.4 * 0.5) and two.decision == (
        "kept: 2 of 5 citing claims share enough words with a cited claim (word-overlap support ≥ 0.05); "
        "rule: Δ = 0.4 > τ_lexical 0.35 at θ_lexical 0.05")
    assert "entailment" not in none.decision + one.decision + two.decision


def test_theta_zero_keeps_every_edge_and_says_why():
    e = decide_edge(_edge(1.0, k=4, scorer="offline", theta=0.0), tau=0.0)
    assert e.kept and e.rule == RULE_KEEP_ALL
    assert e.decision == ("kept: θ_lexical = 0 counts every citing claim, so Δ = 1 > τ_lexical 0 whatever the "
                          "word-overlap support scores")


def test_tie_at_tau_is_pruned():
    e = decide_edge(_edge(0.5), tau=0.5)
    assert not e.kept and "Δ = 0.5 ≤ τ 0.5" in e.decision


def test_scoring_failure_prunes_with_reason():
    e = decide_edge(_edge(0.0, error="bad JSON"), tau=0.0)
    assert not e.kept and e.rule == RULE_FAILED
    assert e.decision == "pruned: scoring failed (bad JSON); rule: an edge that cannot be scored has Δ = 0 ≤ τ 0"


def test_each_scorer_reads_its_own_theta_and_tau():
    s = PipelineSettings(theta=0.8, tau=0.1, theta_lexical=0.3, tau_lexical=0.35)
    assert (edge_theta("model", s), edge_tau("model", s)) == (0.8, 0.1)
    assert (edge_theta("offline", s), edge_tau("offline", s)) == (0.3, 0.35)
    assert scorer_rule("from-an-old-trace") is SCORERS[OFFLINE]  # an unknown name reads as the offline scorer


def test_every_scorer_names_real_knobs():
    """The table is what a new scorer is added to: each entry's θ and τ must be knobs of the settings."""
    s = PipelineSettings()
    for rule in SCORERS.values():
        assert isinstance(rule, ScorerRule) and 0.0 <= rule.theta(s) <= 1.0 and 0.0 <= rule.tau(s) <= 1.0
        assert "entailment" not in rule.score_name or rule.scorer == "model"


def test_weight_and_age():
    assert edge_weight(0.5, 4.0, 0.5) == pytest.approx(0.25)
    assert edge_weight(0.5, 4.0, 0.0) == pytest.approx(0.5)
    assert age_years(2020, 2026) == 6.0
    assert age_years(2026, 2026) == 1.0  # at least one year
    assert age_years(2030, 2026) == 1.0
    assert age_years(None, 2026) == 1.0


def test_isolated_nodes_are_pruned():
    edges = [EdgeRecord("a", "b", kept=True), EdgeRecord("b", "c", kept=False), EdgeRecord("d", "a", kept=False)]
    assert surviving_nodes(["a", "b", "c", "d"], edges) == {"a", "b"}



def test_text_matches_survive_without_a_kept_edge():
    edges = [EdgeRecord("a", "b", kept=True), EdgeRecord("b", "c", kept=False), EdgeRecord("d", "a", kept=False)]
    assert surviving_nodes(["a", "b", "c", "d"], edges, ["c"]) == {"a", "b", "c"}
    assert surviving_nodes(["a", "b", "c", "d"], edges, ["x"]) == {"a", "b"}  # only nodes of V


def _hit(pid: str, rank: int) -> SearchHit:
    return SearchHit(pid, rank, rank, 10.0 - rank)


def test_text_match_ids_are_the_questions_top_hits_in_the_graph():
    hits = [_hit("p", 1), _hit("q", 2), _hit("r", 3), _hit("s", 4)]
    assert text_match_ids(hits, 3, {"p", "r", "s"}) == ["p", "r"]  # q is not a node; s is below the top 3
    assert text_match_ids(hits, 0, {"p"}) == []


def test_seed_fates_say_what_kept_each_seed():
    edges = [EdgeRecord("a", "b", kept=True), EdgeRecord("a", "c", kept=False, rule="delta-at-most-tau"),
             EdgeRecord("c", "d", kept=False, rule="delta-at-most-tau")]
    seeds = [Seed(x, []) for x in ("a", "c", "d", "e", "f")]
    degree, kept_degree, rules = edge_tallies(edges)
    decide_seed_fates(seeds, {"a", "b", "c", "e"}, degree, kept_degree, rules, {"c": 1, "e": 4})
    assert [(s.fate, s.fate_reason) for s in seeds] == [
        ("kept", "kept: 1 of 2 edges kept"),
        ("kept", "kept by its text match (#1 of the question's own search): all 2 of its edges were pruned"),
        ("pruned", "pruned: all 1 of its edges were pruned (Δ ≤ τ)"),
        ("kept", "kept by its text match (#4 of the question's own search): no references or citers inside the graph"),
        ("pruned", "pruned: no references or citers inside the graph"),
    ]
    assert Counter(s.fate for s in seeds) == {"kept": 3, "pruned": 2}
