"""Pruning (paper Eq. 3–5): each scorer's θ and τ, Δ, the rules that keep or prune an edge, its weight, and the
fates of the nodes and seeds that follow. Pure functions; stage 2c (:mod:`crase_core.stages.pruning`) applies
them to a run, :mod:`crase_core.audit.rerank` to a saved one.

**One story per edge.** An edge's matrix is read at one threshold, its scorer's θ (:data:`SCORERS`): a citing
claim is *supported* when some cited claim reaches it (s_i, Eq. 3), Δ is the share of supported citing claims
(Eq. 4), the edge is pruned when Δ ≤ its scorer's τ, and a kept edge weighs Δ·age(v)^(−β) (Eq. 5). The ✓ marks
every view shows are those s_i, so Δ is always the share of ✓.

**The strongest text matches are never lost.** A node survives pruning with a kept edge, or by its text match:
a text candidate (a full-query hit the expansion added) or one of the question's own top ``text_matches``
hits (:func:`text_match_ids`), which stays ranked by its text match even when pruning leaves it no edge.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from crase_core.evidence.entailment import WORD_OVERLAP_NAME
from crase_core.evidence.similarity import CLAIM_SIMILARITY_NAME
from crase_core.records import MODEL, OFFLINE, SIMILARITY, EdgeRecord, SearchHit, Seed
from crase_core.settings.pipeline import PipelineSettings


@dataclass(frozen=True)
class ScorerRule:
    """How the edges one claim scorer decided are pruned: where its θ and τ live among the settings and how its
    numbers and thresholds are named wherever an edge is shown."""

    scorer: str  # ``EdgeRecord.scorer``
    score_name: str  # what its matrix values are called ("word-overlap support", never "entailment" for it)
    theta_knob: str  # the PipelineSettings field of its θ (Eq. 3)
    tau_knob: str  # the PipelineSettings field of its τ (Eq. 4)
    theta_label: str  # θ's name in words: "θ", "θ_lexical"
    tau_label: str
    counted: tuple[str, str]  # what a supported citing claim does: (one claim, several claims)

    def theta(self, settings: PipelineSettings) -> float:
        """Its θ in ``settings``."""
        return float(getattr(settings, self.theta_knob))

    def tau(self, settings: PipelineSettings) -> float:
        """Its τ in ``settings``."""
        return float(getattr(settings, self.tau_knob))


#: scorer → its θ and τ: a new claim scorer is one entry here (and its two knobs in crase_core.settings)
SCORERS: dict[str, ScorerRule] = {r.scorer: r for r in (
    ScorerRule(MODEL, "entailment (model)", "theta", "tau", "θ", "τ",
               ("is entailed by a cited claim", "are entailed by a cited claim")),
    ScorerRule(OFFLINE, WORD_OVERLAP_NAME, "theta_lexical", "tau_lexical", "θ_lexical", "τ_lexical",
               ("shares enough words with a cited claim", "share enough words with a cited claim")),
    ScorerRule(SIMILARITY, CLAIM_SIMILARITY_NAME, "theta_similarity", "tau_similarity", "θ_similarity",
               "τ_similarity", ("is close in meaning to a cited claim", "are close in meaning to a cited claim")),
)}


def scorer_rule(scorer: str) -> ScorerRule:
    """The rule of ``scorer``; a name no entry has (a trace from before scorers were recorded) is the offline one."""
    return SCORERS.get(scorer, SCORERS[OFFLINE])


def score_name(scorer: str) -> str:
    """What an edge's matrix values are called: "entailment (model)", "word-overlap support" or "claim similarity
    (MiniLM)" (the offline scorers are never called entailment)."""
    return scorer_rule(scorer).score_name


def edge_theta(scorer: str, settings: PipelineSettings) -> float:
    """The one θ of Eq. 3 an edge whose matrix ``scorer`` decided is read at (Δ counts, ✓ marks)."""
    return scorer_rule(scorer).theta(settings)


def edge_tau(scorer: str, settings: PipelineSettings) -> float:
    """The τ such an edge is pruned at (Δ ≤ τ)."""
    return scorer_rule(scorer).tau(settings)


def supported_claims(matrix: Sequence[Sequence[float]], theta: float) -> list[bool]:
    """s_i(u,v) = 1[max_j M_ij ≥ θ] for each citing claim i (Eq. 3). An empty row is unsupported."""
    return [bool(row) and max(row) >= theta for row in matrix]


def coverage_affinity(matrix: Sequence[Sequence[float]], theta: float) -> float:
    """Δ(u,v) = (1/n_u) Σ_i s_i(u,v) ∈ [0, 1] (Eq. 4); 0 for an empty matrix."""
    return share_supported(supported_claims(matrix, theta))


def share_supported(supported: Sequence[bool]) -> float:
    """Δ from the s_i already computed (Eq. 4): their share, 0 when there are none."""
    return sum(supported) / len(supported) if supported else 0.0


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
RULE_PRUNED = "delta-at-most-tau"  # pruned: Δ ≤ τ (its scorer's τ)
RULE_KEPT = "delta-above-tau"  # kept: Δ > τ
RULE_KEEP_ALL = "theta-zero"  # kept: θ 0 counts every claim, so Δ = 1 whatever the scores
RULE_AUDITOR = "auditor"  # kept or pruned by an auditor's verdict (crase rerank, the Audit page)


def decision_text(edge: EdgeRecord, tau: float) -> str:
    """The edge's decision in words: kept or pruned, what its claims showed, and the rule (name and numbers).

    e.g. ``pruned: only 1 of 5 citing claims shares enough words with a cited claim (word-overlap support ≥
    0.05); rule: Δ = 0.2 ≤ τ_lexical 0.35 at θ_lexical 0.05``.
    """
    if edge.rule == RULE_FAILED:
        r = scorer_rule(edge.scorer)
        return (f"pruned: scoring failed ({edge.error}); rule: an edge that cannot be scored has Δ = 0 ≤ "
                f"{r.tau_label} {tau:g}")
    return _decision_words(edge.scorer, edge.rule, edge.kept, len(edge.supported), sum(edge.supported), edge.delta,
                           edge.theta, tau)


@functools.lru_cache(maxsize=4096)
def _decision_words(scorer: str, rule_name: str, kept: bool, n: int, k: int, delta: float, theta: float | None,
                    tau: float) -> str:
    """:func:`decision_text` of an edge that was scored, from the numbers it depends on (a run's thousands of
    edges share a few hundred of them)."""
    r = scorer_rule(scorer)
    one, many = r.counted
    at = f" at {r.theta_label} {theta:g}" if theta is not None else ""
    rule = f"Δ = {delta:.3g} {'>' if kept else '≤'} {r.tau_label} {tau:g}{at}"
    if rule_name == RULE_KEEP_ALL:
        return (f"kept: {r.theta_label} = 0 counts every citing claim, so Δ = 1 > {r.tau_label} {tau:g} whatever "
                f"the {r.score_name} scores")
    bar = f"{theta:g}" if theta is not None else r.theta_label
    verdict = "kept" if kept else "pruned"
    if k == 0:
        return f"{verdict}: no citing claim {one} ({r.score_name} < {bar} for all {n} citing claims); rule: {rule}"
    counted = f"{k} of {n} citing claims {one if k == 1 else many} ({r.score_name} ≥ {bar})"
    return f"{verdict}: {'' if kept else 'only '}{counted}; rule: {rule}"


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


# ---- nodes and seeds ------------------------------------------------------------------------------------------
def text_match_ids(query_hits: Sequence[SearchHit], top: int, node_ids: Collection[str]) -> list[str]:
    """The question's own top ``top`` hits that are nodes (``node_ids``), in search order: kept by their text
    match whatever pruning does to their edges. Pure."""
    return [h.paper_id for h in query_hits[: max(0, top)] if h.paper_id in node_ids]


def surviving_nodes(node_ids: Iterable[str], edges: Iterable[EdgeRecord],
                    text_ids: Iterable[str] = ()) -> set[str]:
    """Nodes with at least one kept edge, and the nodes kept by their text match (``text_ids``); everything else
    is pruned as isolated."""
    alive: set[str] = set(text_ids)
    for e in edges:
        if e.kept:
            alive.add(e.citing)
            alive.add(e.cited)
    return alive & set(node_ids)


def edge_tallies(edges: Sequence[EdgeRecord]) -> tuple[Counter[str], Counter[str], dict[str, Counter[str]]]:
    """(degree, kept degree, the rules of the pruned edges) of every paper the ``edges`` touch: what the node
    and seed fates are decided from."""
    degree: Counter[str] = Counter()
    kept_degree: Counter[str] = Counter()
    rules: dict[str, Counter[str]] = {}
    for e in edges:
        u, v = e.citing, e.cited
        degree[u] += 1
        degree[v] += 1
        if e.kept:
            kept_degree[u] += 1
            kept_degree[v] += 1
        else:
            for end in (u, v):
                counts = rules.get(end)
                if counts is None:
                    counts = rules[end] = Counter()
                counts[e.rule] += 1
    return degree, kept_degree, rules


def node_prune_reason(degree: int) -> str:
    """Why a node was pruned: isolated by its ``degree`` pruned edges, or no edge at all."""
    return f"isolated: all {degree} of its edges were pruned" if degree else "no citation edge inside the graph"


def text_kept_reason(degree: int, search_rank: int | None) -> str:
    """Why a paper without a kept edge stays: its text match (``search_rank`` in the question's own search)."""
    where = f" (#{search_rank} of the question's own search)" if search_rank else ""
    edges = f"all {degree} of its edges were pruned" if degree else "no references or citers inside the graph"
    return f"kept by its text match{where}: {edges}"


def decide_seed_fates(seeds: Sequence[Seed], alive: set[str], degree: Counter[str], kept_degree: Counter[str],
                      rules: Mapping[str, Counter[str]], search_rank: Mapping[str, int] | None = None) -> None:
    """Set each seed's ``fate`` (kept/pruned) and ``fate_reason``: kept by its kept edges, kept by its text match
    (alive without a kept edge; ``search_rank``: its rank in the question's own search), or pruned
    (``rules[p]``: the rules that pruned p's edges)."""
    ranks = search_rank or {}
    for s in seeds:
        pid = s.paper_id
        if pid in alive and kept_degree[pid]:
            s.fate = "kept"
            s.fate_reason = f"kept: {kept_degree[pid]} of {degree[pid]} edges kept"
        elif pid in alive:
            s.fate = "kept"
            s.fate_reason = text_kept_reason(degree[pid], ranks.get(pid))
        elif degree[pid]:
            s.fate = "pruned"
            why = rules.get(pid, Counter())
            failed = why.get(RULE_FAILED, 0)
            s.fate_reason = (f"pruned: all {degree[pid]} of its edges were pruned (Δ ≤ τ"
                             + (f"; {failed} could not be scored" if failed else "") + ")")
        else:
            s.fate = "pruned"
            s.fate_reason = "pruned: no references or citers inside the graph"
