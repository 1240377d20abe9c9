"""Coverage affinity, pruning and edge weights (paper Eq. 3–5). Pure functions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from crase_core.evidence.entailment import WORD_OVERLAP_NAME
from crase_core.records import EdgeRecord


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


#: which rule decided an edge (``EdgeRecord.rule``)
RULE_FAILED = "scoring-failed"  # pruned: the edge could not be scored (Δ = 0)
RULE_PRUNED = "delta-at-most-tau"  # pruned: Δ ≤ τ (τ_lexical for a word-overlap edge)
RULE_KEPT = "delta-above-tau"  # kept: Δ > τ
RULE_KEEP_ALL = "theta-zero"  # kept: θ 0 counts every claim, so Δ = 1 whatever the scores
RULE_AUDITOR = "auditor"  # kept or pruned by an auditor's verdict (crase rerank, the Audit page)

#: how each scorer's numbers are named (``EdgeRecord.scorer`` → name); never "entailment" for word overlap
SCORE_NAMES = {"model": "entailment (model)", "offline": WORD_OVERLAP_NAME}


def score_name(scorer: str) -> str:
    """What an edge's matrix values are called: "entailment (model)" or "word-overlap support"."""
    return SCORE_NAMES.get(scorer, SCORE_NAMES["offline"])


def edge_tau(scorer: str, tau: float, tau_lexical: float) -> float:
    """The τ an edge is pruned at: ``tau`` for a model's matrix, ``tau_lexical`` for the word-overlap scorer's."""
    return tau if scorer == "model" else tau_lexical


def _names(edge: EdgeRecord) -> tuple[str, str, str, str]:
    """(θ's name, τ's name, what a counted claim does: singular and plural) for the edge's scorer."""
    if edge.scorer == "model":
        return "θ", "τ", "is entailed by a cited claim", "are entailed by a cited claim"
    return ("θ_lexical", "τ_lexical", "shares enough words with a cited claim",
            "share enough words with a cited claim")


def decision_text(edge: EdgeRecord, tau: float) -> str:
    """The edge's decision in words: kept or pruned, what its claims showed, and the rule (name and numbers).

    e.g. ``pruned: no citing claim shares enough words with a cited claim (word-overlap support < 0.05 for all
    5 citing claims); rule: Δ = 0 ≤ τ_lexical 0.35 at θ_lexical 0.05``.
    """
    theta_name, tau_name, one, many = _names(edge)
    covered = edge.covered or edge.supported
    n, k = len(covered), sum(covered)
    score = score_name(edge.scorer)
    at = f" at {theta_name} {edge.theta:g}" if edge.theta is not None else ""
    rule = f"Δ = {edge.delta:.3g} {'>' if edge.kept else '≤'} {tau_name} {tau:g}{at}"
    if edge.rule == RULE_FAILED:
        return f"pruned: scoring failed ({edge.error}); rule: an edge that cannot be scored has Δ = 0 ≤ {tau_name} {tau:g}"
    if edge.rule == RULE_KEEP_ALL:
        return (f"kept: {theta_name} = 0 counts every citing claim, so Δ = 1 > {tau_name} {tau:g} whatever the "
                f"{score} scores")
    bar = f"{edge.theta:g}" if edge.theta is not None else theta_name
    verdict = "kept" if edge.kept else "pruned"
    if k == 0:
        return f"{verdict}: no citing claim {one} ({score} < {bar} for all {n} citing claims); rule: {rule}"
    counted = f"{k} of {n} citing claims {one if k == 1 else many} ({score} ≥ {bar})"
    return f"{verdict}: {'' if edge.kept else 'only '}{counted}; rule: {rule}"


def decide_edge(edge: EdgeRecord, tau: float) -> EdgeRecord:
    """Set ``kept``, ``weight``, ``rule`` and the human-readable ``decision`` of a scored edge (Δ ≤ τ → pruned;
    ``tau`` is the edge's scorer's, :func:`edge_tau`). The decision says what the claims showed and which rule
    decided, with its numbers (:func:`decision_text`)."""
    if edge.error:
        edge.kept, edge.weight, edge.rule = False, 0.0, RULE_FAILED
    elif edge.delta <= tau:
        edge.kept, edge.weight, edge.rule = False, 0.0, RULE_PRUNED
    else:
        edge.kept = True
        edge.weight = edge.delta * edge.age_factor  # Eq. 5, age_factor = age(v)^(−β)
        edge.rule = RULE_KEEP_ALL if edge.theta == 0 else RULE_KEPT
    edge.decision = decision_text(edge, tau)
    return edge


def surviving_nodes(node_ids: Iterable[str], edges: Iterable[EdgeRecord]) -> set[str]:
    """Nodes with at least one kept edge (everything else is pruned as isolated)."""
    alive: set[str] = set()
    for e in edges:
        if e.kept:
            alive.add(e.citing)
            alive.add(e.cited)
    return alive & set(node_ids)
