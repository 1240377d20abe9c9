"""The full-query search's score split by what entered it: BM25, term proximity, semantic feedback, …

Every step of the search chain (:func:`crase_core.stages.seeding.search_full_query`) is affine in the
scores it reads, so the parts are carried through it exactly (to float rounding):

* the source's own score is one part (``BM25`` for a local corpus's index, the source's relevance score
  for a remote one);
* term proximity, s + s₁·(w·pairs + u·window) (:mod:`crase_core.retrieval.proximity`), adds two parts;
* semantic feedback, (1 − w)·s + w·s₁·mm(cos) (:mod:`crase_core.retrieval.semantic`), scales the parts by (1 − w)
  and adds one; the question embedded (:mod:`crase_core.retrieval.dense`) does the same with the question's
  cosines;
* a blended second list — the RM3 feedback-term search (:mod:`crase_core.retrieval.feedback`) or anchor text
  (:mod:`crase_core.retrieval.anchor`) — (1 − w)·s/max s + w·s₂/max s₂, scales the first list's parts by
  (1 − w)/max s and adds the second list's whole term as one part.

A :class:`~crase_core.paper_source.ScoredPaper` whose ``parts`` is empty is all source score. Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping

BM25 = "BM25"
SOURCE_SCORE = "the source's relevance score"
PAIRS = "word-pair proximity"
WINDOW = "word-window proximity"
SEMANTIC = "semantic feedback"
QUESTION_EMBEDDING = "question embedding"
FEEDBACK_SEARCH = "feedback-term search (RM3)"
ANCHOR = "anchor text"
#: what a search score is when its trace records no parts (written before they were, or a crafted one)
UNSPLIT = "full-query search score"


def parts_of(parts: Mapping[str, float], score: float, base: str = SOURCE_SCORE) -> dict[str, float]:
    """``parts`` as a new dict, or ``{base: score}`` when there are none."""
    return dict(parts) if parts else {base: score}


def scaled(parts: Mapping[str, float], factor: float) -> dict[str, float]:
    """Every part times ``factor``."""
    return {k: factor * v for k, v in parts.items()}


def added(parts: Mapping[str, float], name: str, value: float) -> dict[str, float]:
    """``parts`` with ``value`` added to part ``name`` (a new dict; a 0 is not added)."""
    out = dict(parts)
    if value != 0.0:
        out[name] = out.get(name, 0.0) + value
    return out


def shares(parts: Mapping[str, float], score: float, tolerance: float = 1e-9) -> list[tuple[str, float]]:
    """Each part's fraction of ``score`` (positive parts only, in their order), or ``[(UNSPLIT, 1.0)]`` when
    there are no parts, a part is negative, or they do not sum to ``score`` within ``tolerance`` (relative):
    a trace that says nothing usable about its search score's ingredients gets one honest part."""
    total = sum(parts.values())
    if (not parts or total <= 0.0 or any(v < 0.0 for v in parts.values())
            or abs(total - score) > tolerance * max(abs(score), 1e-300)):
        return [(UNSPLIT, 1.0)]
    return [(k, v / total) for k, v in parts.items() if v > 0.0]
