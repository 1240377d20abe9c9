"""Term proximity: a second-stage re-scoring of one search's results by the query's word pairs.

BM25 scores a bag of words: "noncommutative solitons" and a paper about solitons that mentions
noncommutative geometry elsewhere score alike. The ordered-pair feature of the sequential dependence
model (Metzler & Croft, SIGIR 2005) rewards papers that keep the query's adjacent words together.
Here, with B(x) the set of adjacent pairs of content-word stems of x (:func:`crase_core.text.content_terms`,
so stop words between two words do not break a pair; a pair never spans the title/abstract boundary):

    s'(d) = s(d) + s₁ · (w · |B(q) ∩ B(d)| / |B(q)| + u · |U(q) ∩ U(d)| / |U(q)|)

where s(d) is the search's own score, s₁ the best score of the list (so w is relative to the list's scale:
w 0.2 lifts a paper that has every pair of the query by a fifth of the top score) and w ≥ 0 the weight
(``PipelineSettings.proximity_weight``). The second term is the model's unordered-window feature: U(q) the
query's adjacent pairs as unordered pairs of two different stems, U(d) those of d's stems that occur within
:data:`WINDOW` content words of each other (in the title or in the abstract), u ≥ 0 its weight
(``PipelineSettings.proximity_window_weight``): "solitons on noncommutative spaces" has the query's
"noncommutative solitons" in a window, not in order. Only the list the search returned is re-ordered (its top
``search_limit``); a query with fewer than two content words, w = 0 or an empty list leaves it unchanged.
Ties keep the search's order. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from crase_core.paper_source import ScoredPaper
from crase_core.records import Paper
from crase_core.retrieval.text_parts import PAIRS, added, parts_of
from crase_core.retrieval.text_parts import WINDOW as WINDOW_PART
from crase_core.text import content_terms

Pair = tuple[str, str]
#: the unordered window of the sequential dependence model (Metzler & Croft 2005 use 8)
WINDOW = 8


def _adjacent(terms: Sequence[str]) -> frozenset[Pair]:
    return frozenset(zip(terms, terms[1:], strict=False))


def word_pairs(text: str) -> frozenset[Pair]:
    """B(text): the adjacent pairs of ``text``'s content-word stems."""
    return _adjacent(content_terms(text))


Segments = tuple[Sequence[str], Sequence[str]]


def paper_segments(paper: Paper) -> Segments:
    """The content-word stems of a paper's title and of its abstract (no pair or window spans the two)."""
    return _segments(paper.title, paper.abstract or "")


@lru_cache(maxsize=8192)
def _segments(title: str, abstract: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Stemmed once per text in a process: the searches of one run and of the next re-score the same top papers."""
    return tuple(content_terms(title)), tuple(content_terms(abstract))


def paper_pairs(paper: Paper, segments: Segments | None = None) -> frozenset[Pair]:
    """B(d) of a paper: its title's pairs and its abstract's pairs (none across the two)."""
    title, abstract = segments or paper_segments(paper)
    return _adjacent(title) | _adjacent(abstract)


def pair_share(query_pairs: frozenset[Pair], paper: Paper, segments: Segments | None = None) -> float:
    """|B(q) ∩ B(d)| / |B(q)|; 0 for a query without pairs."""
    if not query_pairs:
        return 0.0
    return len(query_pairs & paper_pairs(paper, segments)) / len(query_pairs)


def unordered(query_pairs: frozenset[Pair]) -> frozenset[frozenset[str]]:
    """U(q): the query's pairs of two different stems, unordered."""
    return frozenset(frozenset(p) for p in query_pairs if p[0] != p[1])


def window_share(query_pairs: frozenset[Pair], paper: Paper, window: int = WINDOW,
                 segments: Segments | None = None) -> float:
    """|U(q) ∩ U(d)| / |U(q)|: the share of the query's pairs of two different stems whose stems occur within
    ``window`` content words of each other, in either order, in the paper's title or in its abstract; 0 for a
    query without such a pair."""
    title, abstract = segments or paper_segments(paper)
    return _window_share(unordered(query_pairs), (_term_positions(title), _term_positions(abstract)), window)


Positions = dict[str, list[int]]


def _term_positions(terms: Sequence[str]) -> Positions:
    """Where each stem occurs in one segment (ascending positions)."""
    positions: Positions = {}
    for i, t in enumerate(terms):
        positions.setdefault(t, []).append(i)
    return positions


@lru_cache(maxsize=8192)
def _paper_positions(title: str, abstract: str) -> tuple[Positions, Positions]:
    """:func:`_term_positions` of a paper's title and abstract, once per text in a process."""
    t, a = _segments(title, abstract)
    return _term_positions(t), _term_positions(a)


def _window_share(wanted: frozenset[frozenset[str]], segments: Sequence[Positions], window: int = WINDOW) -> float:
    if not wanted:
        return 0.0
    found: set[frozenset[str]] = set()
    for positions in segments:
        for pair in wanted - found:
            a, b = tuple(pair)
            at_a, at_b = positions.get(a), positions.get(b)
            if at_a and at_b and any(abs(i - j) < window for i in at_a for j in at_b):
                found.add(pair)
    return len(found) / len(wanted)


def rescore(query: str, results: Sequence[ScoredPaper], weight: float,
            window_weight: float = 0.0) -> list[ScoredPaper]:
    """``results`` re-scored by proximity (module docstring: w = ``weight``, u = ``window_weight``) and
    re-ordered by the new score; ties keep their order in ``results``. ``results`` as a list, unchanged,
    when there is nothing to do."""
    pairs = word_pairs(query)
    if (weight <= 0.0 and window_weight <= 0.0) or not pairs or not results:
        return list(results)
    top = max(r.score for r in results)
    wanted = unordered(pairs)

    def bonus(paper: Paper) -> tuple[float, float]:  # one stemming of the paper for both features
        segments = paper_segments(paper)
        ordered = weight * pair_share(pairs, paper, segments) if weight > 0.0 else 0.0
        window = (window_weight * _window_share(wanted, _paper_positions(paper.title, paper.abstract or ""))
                  if window_weight > 0.0 else 0.0)
        return ordered, window

    def rescored(r: ScoredPaper) -> ScoredPaper:  # the score's parts gain the two features' (text_parts)
        ordered, window = bonus(r.paper)
        parts = added(added(parts_of(r.parts, r.score), PAIRS, top * ordered), WINDOW_PART, top * window)
        return ScoredPaper(r.paper, r.score + top * (ordered + window), parts)

    scored = [rescored(r) for r in results]
    order = sorted(range(len(scored)), key=lambda i: -scored[i].score)  # stable: ties keep the search's order
    return [scored[i] for i in order]
