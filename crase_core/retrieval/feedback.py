"""Pseudo-relevance feedback for the full-query search (RM3-style, Lavrenko & Croft 2001; Abdul-Jaleel
et al. 2004), through the source's ordinary search call.

1. The first search for the query returns ranked papers with scores s_d. The top ``n_docs`` are taken as
   relevant: P(d|q) = s_d / Σ s over them.
2. Every content stem t of those papers (title twice + abstract, as the index reads them) gets the
   relevance-model weight P(t|R) = Σ_d P(d|q) · tf(t, d) / |d|, times idf(t) so that the field's common
   words ("theory", "model") do not win; stems of the query itself, stems in fewer than ``min_docs`` of
   the feedback papers and one- or two-letter tokens are skipped. The ``n_terms`` best stems, each
   written as its most frequent surface word in the feedback papers, form the expansion query.
3. A second search for the expansion query; the final score of a paper is
   (1 − w)·s_q/max s_q + w·s_e/max s_e (0 for a list the paper is not in), w = ``weight``.

Only papers the source returned (the visible ones: a benchmark's hidden papers never come back from a
search) contribute text; idf is the index's aggregate statistic. Pure functions; the one call site is
:func:`crase_core.stages.seeding.search_full_query`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from crase_core.paper_source import ScoredPaper
from crase_core.records import Paper
from crase_core.retrieval.text_parts import FEEDBACK_SEARCH, added, parts_of, scaled
from crase_core.text import content_words, stem


@dataclass(frozen=True)
class FeedbackTerm:
    """One expansion term: its stem, the surface word searched for, and its weight P(t|R)·idf(t)."""

    stem: str
    word: str
    weight: float


def feedback_terms(query: str, docs: Sequence[tuple[Paper, float]], n_terms: int,
                   idf: Callable[[str], float], min_docs: int = 2) -> list[FeedbackTerm]:
    """The ``n_terms`` best expansion terms from ``docs`` = (paper, first-search score) (see module doc).

    Ties are broken by stem, so the result is deterministic. [] when no paper has a positive score.
    """
    total = sum(s for _, s in docs if s > 0)
    if total <= 0 or n_terms <= 0:
        return []
    query_stems = {stem(w) for w in content_words(query)}
    mass: dict[str, float] = {}
    seen_in: Counter[str] = Counter()
    surface: dict[str, Counter[str]] = {}
    for paper, score in docs:
        if score <= 0:
            continue
        ws = [w for w in content_words(f"{paper.title} {paper.title} {paper.abstract}")
              if len(w) > 2 and not w.isdigit()]
        if not ws:
            continue
        stems = [stem(w) for w in ws]
        tf = Counter(stems)
        for t, c in tf.items():
            mass[t] = mass.get(t, 0.0) + (score / total) * c / len(ws)
            seen_in[t] += 1
        for t, w in zip(stems, ws, strict=True):
            surface.setdefault(t, Counter())[w] += 1
    scored = [(mass[t] * idf(t), t) for t in mass if t not in query_stems and seen_in[t] >= min_docs]
    scored.sort(key=lambda x: (-x[0], x[1]))
    return [FeedbackTerm(t, min(surface[t].items(), key=lambda kv: (-kv[1], kv[0]))[0], w)
            for w, t in scored[:n_terms]]


def interpolate(first: Sequence[ScoredPaper], second: Sequence[ScoredPaper], weight: float,
                limit: int, label: str = FEEDBACK_SEARCH) -> list[ScoredPaper]:
    """The union of two result lists scored (1 − w)·s₁/max s₁ + w·s₂/max s₂, best first (ties by id),
    at most ``limit``; a paper missing from a list gets 0 from it. The scores' parts
    (:mod:`crase_core.retrieval.text_parts`): the first list's scaled, and the second list's term as one part
    named ``label``. Pure."""
    top1 = max((r.score for r in first), default=0.0) or 1.0
    top2 = max((r.score for r in second), default=0.0) or 1.0
    papers: dict[str, Paper] = {}
    score: dict[str, float] = {}
    parts: dict[str, dict[str, float]] = {}
    for r in first:
        papers.setdefault(r.paper.id, r.paper)
        score[r.paper.id] = score.get(r.paper.id, 0.0) + (1.0 - weight) * r.score / top1
        parts[r.paper.id] = scaled(parts_of(r.parts, r.score), (1.0 - weight) / top1)
    for r in second:
        papers.setdefault(r.paper.id, r.paper)
        score[r.paper.id] = score.get(r.paper.id, 0.0) + weight * r.score / top2
        parts[r.paper.id] = added(parts.get(r.paper.id, {}), label, weight * r.score / top2)
    order = sorted(score, key=lambda pid: (-score[pid], pid))
    return [ScoredPaper(papers[pid], score[pid], parts[pid]) for pid in order[:limit] if score[pid] > 0.0]
