"""Stage 3: rank the pruned graph (paper Eq. 6) from a restart distribution, fuse the walk with the
full-query text score (``fusion``), then explain the top k.

The ranker is called in one place, :func:`run_ranker`, and a pruned graph is ranked in one place,
:func:`rank_graph` (the pipeline and ``crase_core.audit.rerank``); the fusion is one pure function, :func:`fuse_scores`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from crase_core.ranking import rankers
from crase_core.ranking.fusion import (
    fusion_terms,
    query_specificity,
    search_rank_terms,
    search_rank_weight,
    text_relevance,
)
from crase_core.ranking.score_parts import explain_scores
from crase_core.ranking.trails import best_trails, explain
from crase_core.ranking.walks import WeightedGraph, top_k
from crase_core.records import (
    EdgeRecord,
    FusionTerm,
    NodeRecord,
    RankedPaper,
    RankingResult,
    ScorePart,
    SearchHit,
    Seed,
)
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.expansion import Expansion
from crase_core.stages.progress import ProgressFn, emit
from crase_core.stages.pruning import Pruning

ALL_PRUNED_WARNING = ("every citation edge was pruned (no cited claim supports a citing claim at θ); nothing left "
                      "to rank. Lower θ, or raise nothing: this is the evidence graph's verdict.")

NO_QUERY_MATCH_NOTE = "no ranked paper matched the full-query search; the walk restarts at the kept seeds"
ALL_SEEDS_PRUNED_NOTE = "every seed was pruned; the walk restarts uniformly over the surviving papers"
NOT_CONVERGED = " did not converge in "


def is_ranking_note(note: str) -> bool:
    """Whether a run's warning is one stage 3 writes (a re-ranked run replaces those with its own)."""
    return note in (ALL_PRUNED_WARNING, NO_QUERY_MATCH_NOTE, ALL_SEEDS_PRUNED_NOTE) or (
        NOT_CONVERGED in note and note.endswith(")") and "iterations (residual" in note)


@dataclass
class Ranked:
    """The ranker's scores of every kept node and the top-k answer with reasons."""

    ranking: RankingResult
    results: list[RankedPaper]
    warnings: list[str] = field(default_factory=list)


def personalization_vector(seeds: Sequence[Seed], kept_nodes: set[str], mode: str) -> dict[str, float]:
    """Restart distribution p over kept seeds: uniform, or ∝ 1/best relevance rank ("relevance")."""
    weights: dict[str, float] = {}
    for s in seeds:
        if s.paper_id not in kept_nodes:
            continue
        if mode == "relevance":
            weights[s.paper_id] = 1.0 / min(o.relevance_rank for o in s.origins)
        else:
            weights[s.paper_id] = 1.0
    total = sum(weights.values())
    return {k: v / total for k, v in weights.items()} if total > 0 else {}


def query_restart_vector(node_ids: Sequence[str], query_hits: Sequence[SearchHit], power: float) -> dict[str, float]:
    """Query-conditioned restart: p(v) ∝ score(v)^γ over ``node_ids`` found by the full-query search.

    ``score`` is the source's relevance score of v for the whole query (0 for a paper the search did
    not return); {} when no node has a positive score (the caller falls back to the seeds).
    """
    score = {h.paper_id: h.score for h in query_hits}
    weights = {n: score[n] ** power for n in node_ids if score.get(n, 0.0) > 0.0}
    total = sum(weights.values())
    return {k: v / total for k, v in weights.items()} if total > 0 else {}


def restart_distribution(settings: PipelineSettings, seeds: Sequence[Seed], alive: set[str], rank_ids: Sequence[str],
                         query_hits: Sequence[SearchHit], warnings: list[str] | None = None) -> dict[str, float]:
    """Stage 3's restart distribution p over ``rank_ids`` (kept nodes + text candidates), per settings.

    ``query``: :func:`query_restart_vector`, falling back to the kept seeds; otherwise
    :func:`personalization_vector`; uniform over ``rank_ids`` when all of that is empty.
    Fallbacks are explained in ``warnings``. Pure.
    """
    notes = warnings if warnings is not None else []
    if settings.personalization == "query":
        p = query_restart_vector(rank_ids, query_hits, settings.query_power)
        if rank_ids and not p:
            notes.append(NO_QUERY_MATCH_NOTE)
            p = personalization_vector(seeds, alive, "uniform")
    else:
        p = personalization_vector(seeds, alive, settings.personalization)
    if rank_ids and not p:
        notes.append(ALL_SEEDS_PRUNED_NOTE)
        p = {n: 1.0 / len(rank_ids) for n in rank_ids}
    return p


























def final_terms(settings: PipelineSettings, walk: Mapping[str, float], seeds: Sequence[Seed],
                rank_ids: Sequence[str], query_hits: Sequence[SearchHit],
                specificity: float = 0.5) -> dict[str, list[FusionTerm]]:
    """Stage 3's final node scores per ``settings.fusion`` as additive terms (:func:`final_scores` sums
    them; see there for the modes). Pure."""
    if settings.fusion == "none":
        return fusion_terms(walk, {}, [], "none", 0.0, settings.rrf_k)
    order = [s.paper_id for s in seeds] + list(rank_ids)
    text = text_relevance(rank_ids, query_hits)
    mode, weight = settings.fusion, settings.fusion_weight
    if mode in ("restart", "restart-rrf"):  # linear fusion with the query restart's own shape, text^γ
        text = {n: x ** settings.query_power for n, x in text.items()}
        terms = fusion_terms(walk, text, order, "linear", weight, settings.rrf_k, settings.query_power)
        if mode == "restart":
            return terms
        fused = {n: sum(x.value for x in ts) for n, ts in terms.items()}
        return search_rank_terms(fused, query_hits, order, search_rank_weight(settings, query_hits, specificity),
                                 settings.rrf_k, terms)
    return fusion_terms(walk, text, order, mode, weight, settings.rrf_k)


def final_scores(settings: PipelineSettings, walk: Mapping[str, float], seeds: Sequence[Seed],
                 rank_ids: Sequence[str], query_hits: Sequence[SearchHit], specificity: float = 0.5) -> dict[str, float]:
    """Stage 3's final node scores per ``settings.fusion`` (see :func:`fuse_scores`); ``specificity`` is the
    question's s(q) for μ(q) (:func:`search_rank_weight`). Pure; the sum of :func:`final_terms`.

    ``restart-rrf`` is two steps: the ``restart`` fusion (walk mixed with text^γ, λ = ``fusion_weight``)
    settles the order the scores support — a decisive text match on top, the walk below it — and
    :func:`rank_fusion_with_search` then adds the search engine's own ranking (μ(q) from
    :func:`search_rank_weight`) so that its runner-up answers are not lost under the walk's papers.
    """
    terms = final_terms(settings, walk, seeds, rank_ids, query_hits, specificity)
    return {n: sum(x.value for x in ts) for n, ts in terms.items()}


def run_ranker(ranker: str, graph: WeightedGraph, p: Mapping[str, float], settings: PipelineSettings) -> RankingResult:
    """Rank ``graph`` with the registered ranker ``ranker`` from restart distribution ``p``.

    The one place a ranker is called (the pipeline and :mod:`crase_core.audit.rerank`); the registry
    passes it its own parameters from ``settings`` (α/tol/max_iter for the walks, ``cep_*`` for CEP).
    """
    return rankers.rank(settings if settings.ranker == ranker else settings.replace(ranker=ranker), graph, p)


def rank_order(scores: Mapping[str, float], seeds: Sequence[Seed], rank_ids: Sequence[str]) -> list[tuple[str, float]]:
    """Every scored node by score, ties broken by seed order, then the order of ``rank_ids``."""
    seed_order = [s.paper_id for s in seeds]
    seed_ids = set(seed_order)
    return top_k(scores, len(scores), seed_order + [n for n in rank_ids if n not in seed_ids])


def text_floor(ranked: Sequence[tuple[str, float]], query_hits: Sequence[SearchHit], floor: int,
               k: int) -> list[tuple[str, float]]:
    """``ranked`` with the full-query search's top ``floor`` papers among it guaranteed a top-``k`` place.

    A floor above ``k`` counts as ``k``. The floor papers are the first ``floor`` of ``ranked``'s papers in search order (s = 1, 2, …: the
    search rank among the ranked papers); the one with floor rank s is placed no lower than position
    k − floor + s (1-based; capped to k and to the list's length). A paper already there keeps its
    place; one below it moves up to exactly that position, the papers between moving down one, and
    takes the score of the paper it displaced (scores stay non-increasing). Everything else keeps its
    relative order. ``ranked`` unchanged when ``floor`` ≤ 0. Pure.
    """
    out = list(ranked)
    floor = min(floor, k)
    if floor <= 0 or not out:
        return out
    present = {n for n, _ in out}
    by_search = [h.paper_id for h in sorted(query_hits, key=lambda h: h.relevance_rank) if h.paper_id in present]
    for s, pid in enumerate(by_search[:floor], 1):
        deadline = min(max(k - floor + s, 1), k, len(out))  # 1-based position it must not fall below
        pos = next(i for i, (n, _) in enumerate(out) if n == pid)
        if pos + 1 > deadline:
            item = (pid, out[deadline - 1][1])
            del out[pos]
            out.insert(deadline - 1, item)
    return out


def floor_only_ids(text_ids: Sequence[str], query_hits: Sequence[SearchHit], settings: PipelineSettings) -> list[str]:
    """The text candidates that joined V only for the text floor, in search order: those outside the
    full-query search's top ``text_candidates`` (the expansion takes max(text_candidates, text_floor)
    of them; :func:`expansion_settings`). They stay out of the walk and the fusion; only the floor
    places them. [] when the floor does not reach beyond the text candidates. Pure."""
    if settings.text_floor <= settings.text_candidates:
        return []
    top = {h.paper_id for h in query_hits[: settings.text_candidates]}
    order = {h.paper_id: h.relevance_rank for h in query_hits}
    return sorted((n for n in text_ids if n not in top), key=lambda n: order.get(n, len(order) + 1))


def expansion_settings(settings: PipelineSettings) -> PipelineSettings:
    """The settings stage 2a expands with: ``text_candidates`` raised to ``text_floor`` so that every paper
    the floor may place is a node of V (with its citation edges scored like any other)."""
    if settings.text_floor <= settings.text_candidates:
        return settings
    return settings.replace(text_candidates=settings.text_floor)


def ranked_results(ranked: Sequence[tuple[str, float]], k: int, seeds: Sequence[Seed], edges: Sequence[EdgeRecord],
                   alive: set[str], titles: Mapping[str, str], text_ids: Iterable[str],
                   query_hits: Sequence[SearchHit], query_restart: bool = True,
                   parts: Mapping[str, list[ScorePart]] | None = None) -> list[RankedPaper]:
    """The top ``k`` of ``ranked`` as answer rows, each with its trail from a kept seed, its reason (a paper of
    ``text_ids`` without a kept edge: its text match) and its score parts (``parts``, :func:`score_parts`)."""
    trails = best_trails([s.paper_id for s in seeds if s.paper_id in alive], edges, [n for n, _ in ranked[:k]])
    seed_by_id = {s.paper_id: s for s in seeds}
    text_rank = {h.paper_id: h.relevance_rank for h in query_hits}
    text_set = set(text_ids)
    linked = {x for e in edges if e.kept for x in (e.citing, e.cited)}
    results: list[RankedPaper] = []
    for rank, (n, score) in enumerate(ranked[:k], 1):
        reason, origin, trail = explain(n, trails.get(n), seed_by_id.get(n), text_rank.get(n) if n in text_set
                                        else None, titles, query_restart, edgeless=n not in linked)
        results.append(RankedPaper(n, rank, score, origin, trail, reason,
                                   score_parts=list(parts.get(n, [])) if parts is not None else []))
    return results


@dataclass
class GraphRanking:
    """What :func:`rank_graph` computed: the ranker's own result, the fused scores and their terms, the final
    order (text floor applied), and the graph and restart distribution the ranker read."""

    ranking: RankingResult
    scores: dict[str, float]
    order: list[tuple[str, float]]
    terms: dict[str, list[FusionTerm]]
    graph: WeightedGraph
    restart: dict[str, float]


def rank_graph(ranker: str, node_ids: Sequence[str], alive: set[str], text_ids: Sequence[str],
               kept_edges: Iterable[tuple[str, str, float]], seeds: Sequence[Seed], query_hits: Sequence[SearchHit],
               settings: PipelineSettings, restart_hits: Sequence[SearchHit] | None = None,
               warnings: list[str] | None = None, *, query: str) -> GraphRanking:
    """Stage 3's ranking of a pruned graph with ``ranker``: the ranker's own result, the fused scores (and their
    terms), the final order with the text floor applied. ``node_ids`` in V's order, ``alive`` the kept nodes,
    ``text_ids`` the text candidates, ``kept_edges`` (citing, cited, weight). Text candidates that joined only
    for the floor (:func:`floor_only_ids`) take no part in the walk or the fusion: they enter the list last
    and the floor moves them up. The restart reads ``restart_hits`` when given, else ``query_hits``; the
    fusion and the floor always read ``query_hits``. Why the walk restarted where it did, an empty graph
    and a walk that did not converge are said in ``warnings``. Pure; :mod:`crase_core.audit.rerank` reuses it."""
    notes = warnings if warnings is not None else []
    floor_only = floor_only_ids(text_ids, query_hits, settings)
    held_out = set(floor_only)
    rank_ids = [n for n in node_ids if n in alive and n not in held_out]
    p = restart_distribution(settings, seeds, alive, rank_ids, query_hits if restart_hits is None else restart_hits,
                             notes)
    if seeds and not rank_ids:
        notes.append(ALL_PRUNED_WARNING)
    wgraph = WeightedGraph(rank_ids, [(u, v, w) for u, v, w in kept_edges if u not in held_out and v not in held_out])
    ranking = run_ranker(ranker, wgraph, p, settings) if rank_ids else RankingResult(ranker, {})
    if rank_ids and not ranking.converged:
        notes.append(f"{ranker}{NOT_CONVERGED}{settings.max_iter} iterations (residual {ranking.residual:.2e})")
    terms = final_terms(settings, ranking.scores, seeds, rank_ids, query_hits, query_specificity(query))
    scores = {n: sum(x.value for x in ts) for n, ts in terms.items()}
    tail = [(n, 0.0) for n in floor_only if n in alive]  # placed by the floor alone
    order = text_floor(rank_order(scores, seeds, rank_ids) + tail, query_hits, settings.text_floor, settings.k)
    return GraphRanking(ranking, scores, order, terms, wgraph, p)


def floor_label(settings: PipelineSettings) -> str:
    """What the text floor did to a paper it moved, in words (the ``floor`` score part's term)."""
    return (f"the text floor: the full-query search's top {min(settings.text_floor, settings.k)} among the ranked "
            f"papers are placed no lower than rank {settings.k} − {min(settings.text_floor, settings.k)} + their "
            "search rank there; a paper moved up takes the score of the paper it displaced")


def score_parts(graph_ranking: GraphRanking, ranker: str, settings: PipelineSettings, targets: Sequence[str],
                query_hits: Sequence[SearchHit]) -> dict[str, list[ScorePart]]:
    """The score parts (:mod:`crase_core.ranking.score_parts`) of ``targets``, from what :func:`rank_graph` computed:
    the fusion terms, each walk score's split by restart source (the ranker's ``attribute``) and the search
    score's ingredients. Pure."""
    ranked = [t for t in targets if t in graph_ranking.graph._pos]
    attributions = None
    if ranked and graph_ranking.ranking.scores:
        named = settings if settings.ranker == ranker else settings.replace(ranker=ranker)
        attributions = rankers.attribute(named, graph_ranking.graph, graph_ranking.restart, ranked)
    final = dict(graph_ranking.order)
    return explain_scores(graph_ranking.terms, final, [t for t in targets if t in final], attributions, query_hits,
                          ranker, floor_label(settings))


def rank_papers(expansion: Expansion, pruning: Pruning, seeds: Sequence[Seed], query_hits: Sequence[SearchHit],
                settings: PipelineSettings, progress: ProgressFn | None = None,
                restart_hits: Sequence[SearchHit] | None = None, *, query: str) -> Ranked:
    """Stage 3: restart distribution, ranker, fusion with the text score, text floor (:func:`rank_graph`),
    node scores and ranks, top k with their score parts (:func:`score_parts`). ``restart_hits``: the search
    blended with anchor text (``anchor_restart_weight``), when the walk restarts from it; ``query``: the
    question (μ(q)'s specificity). ``ranking.scores`` keeps the ranker's own distribution; a node's
    ``score`` and the results carry the final (fused) score.
    """
    emit(progress, "ranking", 0, 1, f"ranking with {settings.ranker}")
    warnings: list[str] = []
    ranked = rank_graph(settings.ranker, expansion.graph.nodes, pruning.alive, pruning.text_ids,
                        ((e.citing, e.cited, e.weight) for e in pruning.edges if e.kept), seeds,
                        query_hits, settings, restart_hits, warnings, query=query)
    place_nodes(pruning.nodes, ranked)
    top = [n for n, _ in ranked.order[: settings.k]]
    titles = {n: expansion.papers[n].title for n in expansion.graph.nodes}
    results = ranked_results(ranked.order, settings.k, seeds, pruning.edges, pruning.alive, titles, pruning.text_ids,
                             query_hits, query_restart=settings.personalization == "query" or settings.fusion != "none",
                             parts=score_parts(ranked, settings.ranker, settings, top, query_hits))
    emit(progress, "ranking", 1, 1, f"{len(results)} papers")
    return Ranked(ranked.ranking, results, warnings)


def place_nodes(nodes: Iterable[NodeRecord], ranked: GraphRanking) -> None:
    """Set every kept node's final ``score`` and 1-based ``rank`` from ``ranked`` (a pruned node keeps its own)."""
    scores = {**ranked.scores, **dict(ranked.order)}
    rank_of = {n: i for i, (n, _) in enumerate(ranked.order, 1)}
    for node in nodes:
        if node.kept:
            node.score = scores.get(node.paper.id, 0.0)
            node.rank = rank_of.get(node.paper.id)
