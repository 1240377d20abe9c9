"""Stage 2c: Δ, pruning and weights of each edge (paper Eq. 3–5), then the fate of each node and seed.

The rules, each scorer's θ and τ, live in :mod:`crase_core.ranking.pruning`; this stage applies them to a run's
scored graph (pure apart from progress events) and refills a list pruning left short.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from crase_core.component_cache import Edge
from crase_core.ranking.pruning import (
    age_years,
    decide_edge,
    decide_seed_fates,
    edge_tallies,
    edge_tau,
    edge_theta,
    node_prune_reason,
    share_supported,
    supported_claims,
    surviving_nodes,
    text_match_ids,
)
from crase_core.records import OFFLINE, EdgeMatrix, EdgeRecord, NodeRecord, Paper, SearchHit, Seed
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages import expansion as expansion_stage
from crase_core.stages.expansion import Expansion
from crase_core.stages.progress import ProgressFn, emit


@dataclass
class Pruning:
    """Every edge with Δ and its decision, every node with its fate; ``alive`` = the kept node ids; ``text_ids``
    = the nodes kept by their text match whatever their edges (the text candidates and the question's own top
    hits, :func:`~crase_core.ranking.pruning.text_match_ids`), in V's order."""

    edges: list[EdgeRecord]
    nodes: list[NodeRecord]
    alive: set[str]
    text_ids: list[str] = field(default_factory=list)


def edge_record(u: str, v: str, em: EdgeMatrix, cited: Paper, expansion: Expansion, settings: PipelineSettings,
                reference_year: int, scorer: tuple[str, str]) -> EdgeRecord:
    """Edge u→v with its scorer (who decided it, why), the one θ that scorer's matrices are read at
    (:func:`~crase_core.ranking.pruning.edge_theta`), s_i (``supported``: Eq. 3 at that θ), Δ (their share, Eq. 4;
    0 when scoring failed), age factor, weight, rule and decision (Δ ≤ the scorer's τ → pruned)."""
    age = age_years(cited.year, reference_year)
    theta = edge_theta(scorer[0], settings)
    supported = supported_claims(em.matrix, theta) if not em.error else []
    rec = EdgeRecord(
        citing=u, cited=v, matrix=em.matrix, error=em.error, cached=em.cached,
        supported=supported, delta=share_supported(supported),
        age_years=age, age_factor=age ** (-settings.beta),
        contexts=expansion.graph.contexts.get((u, v), []), intents=expansion.graph.intents.get((u, v), []),
        scorer=scorer[0], scorer_reason=scorer[1], theta=theta,
    )
    decide_edge(rec, edge_tau(scorer[0], settings))
    if cited.year is None:
        rec.decision += "; cited paper has no year, age taken as 1"
    return rec


def node_records(expansion: Expansion, alive: set[str], degree: Counter[str],
                 text_ids: Collection[str] = ()) -> list[NodeRecord]:
    """One record per node of V: its role, whether it is kept by its text match, and why it was pruned
    (isolated) when it was."""
    nodes: list[NodeRecord] = []
    for n in expansion.graph.nodes:
        rec = NodeRecord(paper=expansion.papers[n], role=expansion.role(n), kept=n in alive,
                         text_match=n in text_ids)
        if not rec.kept:
            rec.prune_reason = node_prune_reason(degree[n])
        nodes.append(rec)
    return nodes


def prune_graph(expansion: Expansion, matrices: dict[Edge, EdgeMatrix], seeds: Sequence[Seed],
                settings: PipelineSettings, reference_year: int, progress: ProgressFn | None = None, *,
                scorers: Mapping[Edge, tuple[str, str]], query_hits: Sequence[SearchHit] = ()) -> Pruning:
    """Stage 2c: score and decide every edge; a node survives with a kept edge, or by its text match: a text
    candidate, or one of the question's own top ``text_matches`` hits (``query_hits``, the full-query search).

    ``scorers[e]`` = (``"model"`` | ``"offline"``, why) says who decided each edge's matrix (stage 2b's
    :class:`~crase_core.stages.scoring.Scored`); it picks the edge's θ and τ
    (:data:`~crase_core.ranking.pruning.SCORERS`) and is recorded on the edge. An edge it does not list counts as
    decided offline.
    """
    graph = expansion.graph
    emit(progress, "pruning", 0, len(graph.edges), "coverage affinity and pruning")
    edges = [edge_record(u, v, matrices[(u, v)], expansion.papers[v], expansion, settings, reference_year,
                         scorers.get((u, v), (OFFLINE, ""))) for u, v in graph.edges]
    top = set(text_match_ids(query_hits, settings.text_matches, set(graph.nodes)) + expansion.text_ids)
    text_ids = [n for n in graph.nodes if n in top]
    alive = surviving_nodes(graph.nodes, edges, text_ids)
    degree, kept_degree, rules = edge_tallies(edges)
    nodes = node_records(expansion, alive, degree, top)
    decide_seed_fates(seeds, alive, degree, kept_degree, rules, {h.paper_id: h.relevance_rank for h in query_hits})
    emit(progress, "pruning", len(graph.edges), len(graph.edges),
         f"{sum(e.kept for e in edges)} of {len(edges)} edges kept, {len(alive)} of {len(graph.nodes)} nodes")
    return Pruning(edges, nodes, alive, text_ids)


def refill_after_pruning(expansion: Expansion, pruning: Pruning, query_hits: Sequence[SearchHit],
                         query_papers: Mapping[str, Paper], settings: PipelineSettings) -> str | None:
    """When pruning leaves fewer than k papers to rank — a sparse graph, whose fill (:func:`~crase_core.stages.expansion.fill_sparse_pool`)
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
    pruning.nodes.extend(NodeRecord(paper=query_papers[n], role="text", kept=True, text_match=True) for n in new)
    pruning.alive |= set(new)
    pruning.text_ids.extend(new)
    return (f"{head}: added the next {len(new):,} full-query search hits as text candidates, without their "
            f"citations ({len(pruning.alive):,} to rank)")
