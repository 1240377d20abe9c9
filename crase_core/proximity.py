"""Term proximity: a second-stage re-scoring of one search's results by the query's word pairs.

BM25 scores a bag of words: "noncommutative solitons" and a paper about solitons that mentions
noncommutative geometry elsewhere score alike. The ordered-pair feature of the sequential dependence
model (Metzler & Croft, SIGIR 2005) rewards papers that keep the query's adjacent words together.
Here, with B(x) the set of adjacent pairs of content-word stems of x (:func:`crase_core.text.content_terms`,
so stop words between two words do not break a pair; a pair never spans the title/abstract boundary):

    s'(d) = s(d) + w · s₁ · |B(q) ∩ B(d)| / |B(q)|

where s(d) is the search's own score, s₁ the best score of the list (so w is relative to the list's scale:
w 0.2 lifts a paper that has every pair of the query by a fifth of the top score) and w ≥ 0 the weight
(``PipelineSettings.proximity_weight``). Only the list the search returned is re-ordered (its top
``search_limit``); a query with fewer than two content words, w = 0 or an empty list leaves it unchanged.
Ties keep the search's order. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from .records import Paper
from .sources.base import ScoredPaper
from .text import content_terms

Pair = tuple[str, str]


def word_pairs(text: str) -> frozenset[Pair]:
    """B(text): the adjacent pairs of ``text``'s content-word stems."""
    terms = content_terms(text)
    return frozenset(zip(terms, terms[1:], strict=False))


def paper_pairs(paper: Paper) -> frozenset[Pair]:
    """B(d) of a paper: its title's pairs and its abstract's pairs (none across the two)."""
    return word_pairs(paper.title) | word_pairs(paper.abstract or "")


def pair_share(query_pairs: frozenset[Pair], paper: Paper) -> float:
    """|B(q) ∩ B(d)| / |B(q)|; 0 for a query without pairs."""
    if not query_pairs:
        return 0.0
    return len(query_pairs & paper_pairs(paper)) / len(query_pairs)


def rescore(query: str, results: Sequence[ScoredPaper], weight: float) -> list[ScoredPaper]:
    """``results`` re-scored by proximity (module docstring) and re-ordered by the new score; ties keep
    their order in ``results``. ``results`` as a list, unchanged, when there is nothing to do."""
    pairs = word_pairs(query)
    if weight <= 0.0 or not pairs or not results:
        return list(results)
    top = max(r.score for r in results)
    scored = [ScoredPaper(r.paper, r.score + weight * top * pair_share(pairs, r.paper)) for r in results]
    order = sorted(range(len(scored)), key=lambda i: -scored[i].score)  # stable: ties keep the search's order
    return [scored[i] for i in order]
