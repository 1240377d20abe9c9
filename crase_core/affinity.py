"""Coverage affinity, pruning and edge weights (paper Eq. 3–5). Pure functions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .records import EdgeRecord


def supported_claims(matrix: Sequence[Sequence[float]], theta: float) -> list[bool]:
    """s_i(u,v) = 1[max_j M_ij ≥ θ] for each citing claim i (Eq. 3). An empty row is unsupported."""
    return [bool(row) and max(row) >= theta for row in matrix]


def coverage_affinity(matrix: Sequence[Sequence[float]], theta: float) -> float:
    """Δ(u,v) = (1/n_u) Σ_i s_i(u,v) ∈ [0, 1] (Eq. 4); 0 for an empty matrix."""
    if not matrix:
        return 0.0
    s = supported_claims(matrix, theta)
    return sum(s) / len(s)


def age_years(year: int | None, reference_year: int) -> float:
    """age(v) in years, at least 1 (a paper of the reference year, or a later one, has age 1).

    A paper without a year gets age 1 (no decay), and the edge decision says so.
    """
    if year is None:
        return 1.0
    return float(max(1, reference_year - year))


def edge_weight(delta: float, age: float, beta: float) -> float:
    """w(u→v) = Δ(u,v) · age(v)^(−β) (Eq. 5)."""
    return delta * age ** (-beta)


#: the decision of a kept edge the offline lexical scorer decided with θ_lexical = 0 (every claim supported).
LEXICAL_NEVER_PRUNES = ("scored by the offline lexical scorer, whose threshold θ_lexical = 0 never prunes "
                        "(measured: docs/benchmarks.md)")


def threshold_note(edge: EdgeRecord) -> str:
    """Which θ decided the edge's s_i, for its decision: ``" at θ = 0.75, the model's threshold"`` for a
    model-scored edge, ``" at θ_lexical = 0.75, the offline lexical scorer's threshold"`` for a lexical one;
    ``""`` when the record names no θ (``edge.theta`` None)."""
    if edge.theta is None:
        return ""
    if edge.scorer == "model":
        return f" at θ = {edge.theta:g}, the model's threshold"
    return f" at θ_lexical = {edge.theta:g}, the offline lexical scorer's threshold"


def decide_edge(edge: EdgeRecord, tau: float) -> EdgeRecord:
    """Set ``kept``, ``weight`` and the human-readable ``decision`` of a scored edge (Δ ≤ τ → pruned).

    The decision names the θ that decided s_i (``edge.theta``, by ``edge.scorer``: :func:`threshold_note`);
    a lexically scored edge kept with θ_lexical = 0 says that this threshold never prunes.
    """
    n = len(edge.supported)
    k = sum(edge.supported)
    counted = f"({k} of {n} citing claims supported{threshold_note(edge)})"
    if edge.error:
        edge.kept = False
        edge.weight = 0.0
        edge.decision = f"pruned: scoring failed ({edge.error}), Δ = 0 ≤ τ = {tau:g}"
    elif edge.delta <= tau:
        edge.kept = False
        edge.weight = 0.0
        edge.decision = f"pruned: Δ = {edge.delta:.3g} ≤ τ = {tau:g} {counted}"
    else:
        edge.kept = True
        edge.weight = edge.delta * edge.age_factor  # Eq. 5, age_factor = age(v)^(−β)
        if edge.theta == 0 and edge.scorer != "model":
            edge.decision = (f"kept: {LEXICAL_NEVER_PRUNES}; Δ = {edge.delta:.3g} > τ = {tau:g} "
                             f"({k} of {n} citing claims supported)")
        else:
            edge.decision = f"kept: Δ = {edge.delta:.3g} > τ = {tau:g} {counted}"
    return edge


def surviving_nodes(node_ids: Iterable[str], edges: Iterable[EdgeRecord]) -> set[str]:
    """Nodes with at least one kept edge (everything else is pruned as isolated)."""
    alive: set[str] = set()
    for e in edges:
        if e.kept:
            alive.add(e.citing)
            alive.add(e.cited)
    return alive & set(node_ids)
