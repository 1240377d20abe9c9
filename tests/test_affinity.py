"""Coverage affinity Δ (Eq. 3–4), pruning with τ, weights (Eq. 5) on hand-made matrices."""

from __future__ import annotations

import pytest

from crase_core.affinity import (
    age_years,
    coverage_affinity,
    decide_edge,
    edge_weight,
    supported_claims,
    surviving_nodes,
)
from crase_core.records import EdgeRecord

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


def _edge(delta, n=4, k=2, error=None):
    return EdgeRecord("u", "v", supported=[True] * k + [False] * (n - k), delta=delta, age_years=4.0,
                      age_factor=4.0 ** -0.5, error=error)


def test_tau_zero_prunes_exactly_the_unsupported():
    kept = decide_edge(_edge(0.25, k=1), tau=0.0)
    assert kept.kept and kept.weight == pytest.approx(0.25 * 0.5)
    assert kept.decision.startswith("kept: Δ = 0.25 > τ = 0")
    pruned = decide_edge(_edge(0.0, k=0), tau=0.0)
    assert not pruned.kept and pruned.weight == 0.0
    assert pruned.decision.startswith("pruned: Δ = 0 ≤ τ = 0")


def test_tie_at_tau_is_pruned():
    e = decide_edge(_edge(0.5), tau=0.5)
    assert not e.kept and "Δ = 0.5 ≤ τ = 0.5" in e.decision


def test_scoring_failure_prunes_with_reason():
    e = decide_edge(_edge(0.0, error="bad JSON"), tau=0.0)
    assert not e.kept and "scoring failed (bad JSON)" in e.decision


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
