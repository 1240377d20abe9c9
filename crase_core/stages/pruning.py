"""Stage 2c: Δ, pruning and weights of each edge (paper Eq. 3–5), then the fate of each node and seed.

Pure functions of the scored graph (apart from progress events): see :mod:`crase_core.ranking.affinity`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from crase_core.component_cache import Edge
from crase_core.evidence.entailment import WORD_OVERLAP_SUPPORT_THETA
from crase_core.ranking.affinity import (
    RULE_FAILED,
    age_years,
    coverage_affinity,
    decide_edge,
    edge_tau,
    supported_claims,
    surviving_nodes,
)
from crase_core.records import MODEL, OFFLINE, EdgeMatrix, EdgeRecord, NodeRecord, Paper, SearchHit, Seed
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages import expansion as expansion_stage
from crase_core.stages.expansion import Expansion
from crase_core.stages.progress import ProgressFn, emit


@dataclass
class Pruning:
    """Every edge with Δ and its decision, every node with its fate; ``alive`` = the kept node ids."""

    edges: list[EdgeRecord]
    nodes: list[NodeRecord]
    alive: set[str]


def edge_tallies(edges: Sequence[EdgeRecord]) -> tuple[Counter[str], Counter[str], dict[str, Counter[str]]]:
    """(degree, kept degree, the rules of the pruned edges) of every paper the ``edges`` touch: what the node
    and seed fates are decided from."""
    degree: Counter[str] = Counter()
    kept_degree: Counter[str] = Counter()
    rules: dict[str, Counter[str]] = {}
    for e in edges:
        degree.update((e.citing, e.cited))
        if e.kept:
            kept_degree.update((e.citing, e.cited))
        else:
            for end in (e.citing, e.cited):
                rules.setdefault(end, Counter())[e.rule] += 1
    return degree, kept_degree, rules


def edge_theta(scorer: str, settings: PipelineSettings) -> float:
    """The θ of Eq. 3 for an edge whose matrix ``scorer`` decided: ``settings.theta`` for a model's matrix
    ("model"), ``settings.theta_lexical`` for the offline lexical scorer's ("offline": the offline backend,
    or the model backend's fallback when the model was not asked or failed)."""
    return settings.theta if scorer == MODEL else settings.theta_lexical


def support_theta(scorer: str, settings: PipelineSettings) -> float:
    """The θ a claim is marked supported at: the scorer's own calibrated threshold — ``settings.theta`` for a
    model's matrix (the paper's), :data:`~crase_core.evidence.entailment.WORD_OVERLAP_SUPPORT_THETA` for the word-overlap
    scorer's, whatever θ_lexical the pruning reads."""
    return settings.theta if scorer == MODEL else WORD_OVERLAP_SUPPORT_THETA


def edge_record(u: str, v: str, em: EdgeMatrix, cited: Paper, expansion: Expansion, settings: PipelineSettings,
                reference_year: int, scorer: tuple[str, str]) -> EdgeRecord:
    """Edge u→v with its scorer (who decided it, why), the θ that scorer's matrices are read at
    (:func:`edge_theta`), s_i (``covered``), Δ (0 when scoring failed), the claims supported at the scorer's
    calibrated θ (:func:`support_theta`), age factor, weight, rule and decision (Δ ≤ the scorer's τ → pruned)."""
    age = age_years(cited.year, reference_year)
    theta = edge_theta(scorer[0], settings)
    ok = not em.error
    rec = EdgeRecord(
        citing=u, cited=v, matrix=em.matrix, error=em.error, cached=em.cached,
        supported=supported_claims(em.matrix, support_theta(scorer[0], settings)) if ok else [],
        covered=supported_claims(em.matrix, theta) if ok else [],
        delta=coverage_affinity(em.matrix, theta) if ok else 0.0,
        age_years=age, age_factor=age ** (-settings.beta),
        contexts=expansion.graph.contexts.get((u, v), []), intents=expansion.graph.intents.get((u, v), []),
        scorer=scorer[0], scorer_reason=scorer[1], theta=theta, support_theta=support_theta(scorer[0], settings),
    )
    decide_edge(rec, edge_tau(scorer[0], settings.tau, settings.tau_lexical))
    if cited.year is None:
        rec.decision += "; cited paper has no year, age taken as 1"
    return rec


def node_prune_reason(degree: int) -> str:
    """Why a node was pruned: isolated by its ``degree`` pruned edges, or no edge at all."""
    return f"isolated: all {degree} of its edges were pruned" if degree else "no citation edge inside the graph"


def node_records(expansion: Expansion, alive: set[str], degree: Counter[str]) -> list[NodeRecord]:
    """One record per node of V: its role, and why it was pruned (isolated) when it was."""
    nodes: list[NodeRecord] = []
    for n in expansion.graph.nodes:
        rec = NodeRecord(paper=expansion.papers[n], role=expansion.role(n), kept=n in alive)
        if not rec.kept:
            rec.prune_reason = node_prune_reason(degree[n])
        nodes.append(rec)
    return nodes


def decide_seed_fates(seeds: Sequence[Seed], alive: set[str], degree: Counter[str], kept_degree: Counter[str],
                      rules: Mapping[str, Counter[str]]) -> None:
    """Set each seed's ``fate`` (kept/pruned) and ``fate_reason`` (``rules[p]``: the rules that pruned p's edges)."""
    for s in seeds:
        if s.paper_id in alive and not degree[s.paper_id]:  # the sparse-pool fill kept it as a text candidate
            s.fate = "kept"
            s.fate_reason = ("kept as a text candidate (its full-query search rank): no references or citers "
                             "inside the graph")
        elif s.paper_id in alive:
            s.fate = "kept"
            s.fate_reason = f"kept: {kept_degree[s.paper_id]} of {degree[s.paper_id]} edges kept"
        elif degree[s.paper_id]:
            s.fate = "pruned"
            why = rules.get(s.paper_id, Counter())
            failed = why.get(RULE_FAILED, 0)
            s.fate_reason = (f"pruned: all {degree[s.paper_id]} of its edges were pruned (Δ ≤ τ"
                             + (f"; {failed} could not be scored" if failed else "") + ")")
        else:
            s.fate = "pruned"
            s.fate_reason = "pruned: no references or citers inside the graph"


def prune_graph(expansion: Expansion, matrices: dict[Edge, EdgeMatrix], seeds: Sequence[Seed],
                settings: PipelineSettings, reference_year: int, progress: ProgressFn | None = None, *,
                scorers: Mapping[Edge, tuple[str, str]]) -> Pruning:
    """Stage 2c: score and decide every edge; a node survives with a kept edge, or as a text candidate.

    ``scorers[e]`` = (``"model"`` | ``"offline"``, why) says who decided each edge's matrix (stage 2b's
    :class:`~crase_core.stages.scoring.Scored`); it picks the edge's θ (:func:`edge_theta`) and is recorded on
    the edge. An edge it does not list counts as decided offline.
    """
    graph = expansion.graph
    emit(progress, "pruning", 0, len(graph.edges), "coverage affinity and pruning")
    edges = [edge_record(u, v, matrices[(u, v)], expansion.papers[v], expansion, settings, reference_year,
                         scorers.get((u, v), (OFFLINE, ""))) for u, v in graph.edges]
    alive = surviving_nodes(graph.nodes, edges) | set(expansion.text_ids)
    degree, kept_degree, rules = edge_tallies(edges)
    nodes = node_records(expansion, alive, degree)
    decide_seed_fates(seeds, alive, degree, kept_degree, rules)
    emit(progress, "pruning", len(graph.edges), len(graph.edges),
         f"{sum(e.kept for e in edges)} of {len(edges)} edges kept, {len(alive)} of {len(graph.nodes)} nodes")
    return Pruning(edges, nodes, alive)


def refill_after_pruning(expansion: Expansion, pruning: Pruning, query_hits: Sequence[SearchHit],
                         query_papers: Mapping[str, Paper], settings: PipelineSettings) -> str | None:
    """When pruning leaves fewer than k papers to rank — a sparse graph, whose fill (:func:`fill_sparse_pool`)
    counted papers that then lost every edge — add the next full-query hits outside V, in search order, as text
    candidates without citations (nothing new to score: their evidence is the text match), until k can be
    returned. Changes ``expansion`` and ``pruning`` in place; returns the warning that says so, or None when k
    papers are left already, text candidates are off or the fill adds no search hits (a POOL_FILL without "text")."""
    k, left = settings.k, len(pruning.alive)
    if left >= k or settings.text_candidates <= 0 or "text" not in expansion_stage.POOL_FILL:
        return None
    in_graph = set(expansion.graph.nodes)
    new = [h.paper_id for h in query_hits if h.paper_id not in in_graph and h.paper_id in query_papers][: k - left]
    head = f"pruning left {left:,} papers to rank, fewer than k = {k}"
    if not new:
        return f"{head}; the full-query search has no more hits outside the graph, so the list is shorter"
    expansion.graph.nodes = expansion.graph.nodes + new
    expansion.papers.update({n: query_papers[n] for n in new})
    expansion.text_ids.extend(new)
    pruning.nodes.extend(NodeRecord(paper=query_papers[n], role="text", kept=True) for n in new)
    pruning.alive |= set(new)
    return (f"{head}: added the next {len(new):,} full-query search hits as text candidates, without their "
            f"citations ({len(pruning.alive):,} to rank)")
