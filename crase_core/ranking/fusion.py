"""Fusing the walk with the text search: score interpolation, reciprocal-rank fusion, and the search-rank weight
μ(q) that follows the search's confidence and the question's specificity.

Pure functions over score maps (paper id → score); stage 3 (:mod:`crase_core.stages.ranking`) calls them after
the walk, and :mod:`crase_core.ranking.score_parts` explains their terms.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from crase_core.records import FusionTerm, SearchHit
from crase_core.settings.pipeline import PipelineSettings
from crase_core.text import content_terms


def text_relevance(rank_ids: Sequence[str], query_hits: Sequence[SearchHit]) -> dict[str, float]:
    """The full-query search score of every node of ``rank_ids`` that the search returned (others absent)."""
    ids = set(rank_ids)
    return {h.paper_id: h.score for h in query_hits if h.paper_id in ids and h.score > 0.0}


def _ranks(scores: Mapping[str, float], order: Sequence[str]) -> dict[str, int]:
    """1-based ranks by score (highest first), ties broken by ``order`` (ids missing from it last, by id)."""
    pos = {n: i for i, n in enumerate(order)}
    items = sorted(scores, key=lambda n: (-scores[n], pos.get(n, len(pos)), n))
    return {n: i for i, n in enumerate(items, 1)}


def _split(a: float, b: float) -> tuple[float, float]:
    """(a, b)'s shares of a + b; (0, 0) when both are 0."""
    total = a + b
    return (a / total, b / total) if total > 0 else (0.0, 0.0)


def fusion_terms(walk: Mapping[str, float], text: Mapping[str, float], order: Sequence[str], mode: str,
                 weight: float, rrf_k: float, power: float = 1.0) -> dict[str, list[FusionTerm]]:
    """The fused score of every node of ``walk`` as its additive terms (:func:`fuse_scores` sums them).

    ``power`` is the γ that ``text`` was raised to (``restart``: the text term reads t^γ). Pure."""
    if mode == "none" or not walk:
        return {n: [FusionTerm("walk score", "the walk's score π", x, 1.0, 0.0)] for n, x in walk.items()}
    t = {n: x for n, x in text.items() if n in walk}
    if mode == "linear":
        top_w = max(walk.values()) or 1.0
        top_t = max(t.values(), default=0.0) or 1.0
        wl = f"(1 − λ)·π/max π, π the walk's score, λ = {weight:g}"
        tl = (f"λ·t/max t, t the full-query search score, λ = {weight:g}" if power == 1.0 else
              f"λ·t^γ/max t^γ, t the full-query search score, γ = {power:g}, λ = {weight:g}")
        return {n: [FusionTerm("walk term", wl, (1.0 - weight) * walk[n] / top_w, 1.0, 0.0),
                    FusionTerm("text term", tl, weight * t.get(n, 0.0) / top_t, 0.0, 1.0)] for n in walk}
    if mode == "rrf":
        rw, rt = _ranks(walk, order), _ranks(t, order)
        out: dict[str, list[FusionTerm]] = {}
        for n in walk:
            scored = walk[n] > 0.0
            terms = [FusionTerm("walk-rank term", f"(1 − λ)/(k + r), r = {rw[n]} the rank by the walk score, "
                                f"λ = {weight:g}, k = {rrf_k:g}", (1.0 - weight) / (rrf_k + rw[n]),
                                1.0 if scored else 0.0, 0.0)]
            if n in rt:
                terms.append(FusionTerm("text-rank term", f"λ/(k + r_t), r_t = {rt[n]} the rank by the full-query "
                                        f"search score, λ = {weight:g}, k = {rrf_k:g}", weight / (rrf_k + rt[n]),
                                        0.0, 1.0))
            out[n] = terms
        return out
    raise ValueError(f"unknown fusion mode {mode!r}")


def fuse_scores(walk: Mapping[str, float], text: Mapping[str, float], order: Sequence[str], mode: str,
                weight: float, rrf_k: float) -> dict[str, float]:
    """Final score of every node of ``walk``: the walk's score fused with its text relevance.

    ``order`` breaks ties when ranks are taken (the seeds, then V's order). With λ = ``weight``:

    * ``none``: the walk's score π(v) unchanged;
    * ``linear``: (1−λ)·π(v)/max π + λ·t(v)/max t, t the full-query search score (0 when not a hit);
    * ``rrf`` (weighted reciprocal-rank fusion): (1−λ)/(k + r_π(v)) + λ/(k + r_t(v)), r the 1-based rank
      in each list, k = ``rrf_k``; a paper the text search did not return has no text term.
    (:func:`final_scores` also offers ``restart``: ``linear`` with t^γ, the query restart's shape, and
    ``restart-rrf``: see :func:`rank_fusion_with_search`.) The sum of :func:`fusion_terms`.
    Pure; returns a new dict over the keys of ``walk``.
    """
    return {n: sum(x.value for x in terms) for n, terms in fusion_terms(walk, text, order, mode, weight, rrf_k).items()}


def search_rank_terms(scores: Mapping[str, float], query_hits: Sequence[SearchHit], order: Sequence[str],
                      weight: float, rrf_k: float,
                      first: Mapping[str, list[FusionTerm]] | None = None) -> dict[str, list[FusionTerm]]:
    """:func:`rank_fusion_with_search` as terms: the rank term of ``scores`` (split like the terms in
    ``first`` that summed to those scores, when given) and the search-rank term. Pure."""
    r = _ranks(scores, order)
    s = {h.paper_id: h.relevance_rank for h in query_hits if h.paper_id in scores}
    out: dict[str, list[FusionTerm]] = {}
    for n in scores:
        parts = first.get(n, []) if first is not None else []
        walk_part = sum(x.value * x.walk for x in parts)
        text_part = sum(x.value * x.text for x in parts)
        fw, ft = _split(walk_part, text_part) if first is not None else (1.0 if scores[n] > 0 else 0.0, 0.0)
        terms = [FusionTerm("fused-rank term", f"(1 − μ)/(k + r), r = {r[n]} the rank by the restart fusion "
                            f"(1 − λ)·π/max π + λ·t^γ/max t^γ, μ(q) = {weight:.3g}, k = {rrf_k:g}",
                            (1.0 - weight) / (rrf_k + r[n]), fw, ft)]
        if n in s:
            terms.append(FusionTerm("search-rank term", f"μ/(k + s), s = {s[n]} the paper's rank in the full-query "
                                    f"search, μ(q) = {weight:.3g}, k = {rrf_k:g}", weight / (rrf_k + s[n]), 0.0, 1.0))
        out[n] = terms
    return out


def rank_fusion_with_search(scores: Mapping[str, float], query_hits: Sequence[SearchHit], order: Sequence[str],
                            weight: float, rrf_k: float) -> dict[str, float]:
    """Reciprocal-rank fusion of a score list with the full-query search's own ranking.

    For every node of ``scores``: (1−μ)/(k + r(v)) + μ/(k + s(v)), r the 1-based rank by ``scores`` (ties
    by ``order``), s the paper's rank in the full-query search (``relevance_rank``; no term when the
    search did not return it), μ = ``weight``, k = ``rrf_k``. The search rank is the engine's own (over
    the whole visible corpus), not a rank among the graph's nodes. Pure.
    """
    return {n: sum(x.value for x in terms)
            for n, terms in search_rank_terms(scores, query_hits, order, weight, rrf_k).items()}


#: the search-confidence depth: g = 1 − s_d/s_1 with d this rank (see :func:`search_confidence`)
CONFIDENCE_DEPTH = 10


def search_confidence(query_hits: Sequence[SearchHit], depth: int = CONFIDENCE_DEPTH) -> float:
    """How decisively the full-query search answers: g = 1 − s_d/s_1 ∈ [0, 1], the normalised score gap
    between its first hit and its ``depth``-th (a query-performance predictor in the spirit of the
    score-gap/NQC family). 1 when the search returned fewer than ``depth`` hits (s_d = 0); 0 when it
    returned nothing or its first score is not positive. Pure."""
    scores = sorted((h.score for h in query_hits), reverse=True)
    if not scores or scores[0] <= 0.0:
        return 0.0
    s_d = scores[depth - 1] if len(scores) >= depth else 0.0
    return min(1.0, max(0.0, 1.0 - s_d / scores[0]))


#: the question lengths (distinct content words) between which its specificity s(q) rises from 0 to 1
SPECIFICITY_TERMS = (6, 12)


def query_specificity(query: str, terms: tuple[int, int] = SPECIFICITY_TERMS) -> float:
    """How specific a question is by its length, a pre-retrieval query-performance predictor: with n the
    number of distinct content-word stems of ``query`` and (a, b) = ``terms``, s(q) = clip((n − a)/(b − a), 0, 1).
    A paper title or a few keywords (n ≤ 6) asks for a topic's literature, whose citation structure the walk
    reads; a described question (n ≥ 12) asks for the papers that match its words. Pure."""
    lo, hi = terms
    n = len(set(content_terms(query)))
    return min(1.0, max(0.0, (n - lo) / (hi - lo)))


def search_rank_weight(settings: PipelineSettings, query_hits: Sequence[SearchHit], specificity: float = 0.5) -> float:
    """μ(q) of ``restart-rrf``: ``text_rank_weight`` moved by κ = ``text_rank_confidence`` with the search's
    confidence g (:func:`search_confidence`) and by η = ``text_rank_specificity`` with the question's
    specificity s (:func:`query_specificity`): clip(μ + κ·(g − ½) + η·(s − ½), 0, 1); μ itself when κ = η = 0.
    ``specificity`` ½ (the default) leaves the η term out."""
    mu, kappa, eta = settings.text_rank_weight, settings.text_rank_confidence, settings.text_rank_specificity
    if kappa == 0.0 and eta == 0.0:
        return mu
    shift = (kappa * (search_confidence(query_hits) - 0.5) if kappa else 0.0) + eta * (specificity - 0.5)
    return min(1.0, max(0.0, mu + shift))
