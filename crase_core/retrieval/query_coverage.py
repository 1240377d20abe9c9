"""Does the corpus have anything on this query? The weak-match notice.

A query gets the notice when **at least half of its content terms are rare or absent in the corpus**
(in fewer than 0.5 % of its papers) **and no single paper contains 60 % or more of the query**, where
each term counts by its BM25 IDF, ln(1 + (N − df + 0.5)/(df + 0.5)) (so rare terms weigh more). A
query none of whose terms the corpus knows, or with no content word at all, always gets it.

Measured on the embedded hep-th corpus (``tests/test_query_coverage.py``): the off-topic "protein
folding with deep learning" gets it (3 of 4 terms rare: protein 1 paper, deep 58, learn 35; best paper
53 %), while none of the 70 hep-th LitSearch dev questions and none of the first 50 citation-recovery
dev queries (under their leakage filter) do. :func:`assess` is pure; :func:`coverage_for_source` reads
the term postings of a local corpus source (other sources have no corpus-wide statistics: None).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from crase_core.records import QueryCoverage, TermCount
from crase_core.store.textindex import TextIndex
from crase_core.text import content_words, stem

RARE_FRACTION = 0.005  # a term is rare when fewer than this share of the papers contain it
WEAK_RARE_SHARE = 0.5  # weak when at least this share of the query's terms are rare …
WEAK_BEST_MATCH = 0.6  # … and no paper holds this share of the query's IDF weight


def query_terms(query: str) -> list[tuple[str, str]]:
    """The query's distinct content terms as ``(stem, first word)``, in order."""
    out: dict[str, str] = {}
    for w in content_words(query):
        out.setdefault(stem(w), w)
    return list(out.items())


def idf(papers: int, n_papers: int) -> float:
    """BM25's IDF (always > 0), as :class:`crase_core.store.termstats.TermStats` computes it."""
    return math.log(1.0 + (n_papers - papers + 0.5) / (papers + 0.5))


def assess(terms: Sequence[tuple[str, str]], postings: Mapping[str, Sequence[int] | np.ndarray],
           n_papers: int) -> QueryCoverage:
    """The coverage verdict for ``terms`` (``(stem, word)``) given, per stem, the papers that contain it.

    ``postings[stem]``: ids (any integers) of the papers containing the stem (missing = none), out of
    ``n_papers`` papers in all.
    """
    rare_below = max(1, math.ceil(RARE_FRACTION * n_papers))
    counts = [TermCount(t, len(postings.get(t, ())), w) for t, w in terms]
    rare = [c for c in counts if c.papers < rare_below]
    weights = {c.term: idf(c.papers, n_papers) for c in counts}
    total = sum(weights.values())
    best = 0.0
    ids = [_distinct(postings.get(c.term, ())) for c in counts]
    if total > 0 and any(d.size for d in ids):
        papers = np.concatenate(ids)
        w = np.concatenate([np.full(d.size, weights[c.term]) for c, d in zip(counts, ids, strict=True)])
        if papers.min() >= 0:  # paper row numbers (the local index): count in place, no sort
            best = float(np.bincount(papers, weights=w).max()) / total
        else:
            _, which = np.unique(papers, return_inverse=True)
            best = float(np.bincount(which, weights=w).max()) / total
    if not counts:
        weak, notice = True, "Weak match: the query has no content word the corpus could match."
    elif all(c.papers == 0 for c in counts):
        weak = True
        notice = (f"Weak match: none of the query's terms ({_words(counts)}) occurs in the corpus's "
                  f"{n_papers:,} papers. The results below are not about this question.")
    else:
        weak = len(rare) / len(counts) >= WEAK_RARE_SHARE and best < WEAK_BEST_MATCH
        notice = (f"Weak match: the corpus has little on this query. {len(rare)} of its {len(counts)} terms occur "
                  f"in fewer than {rare_below:,} of its {n_papers:,} papers (papers containing each: {_words(rare)}), "
                  f"and no paper contains more than {best:.0%} of the query (terms weighted by rarity). The results "
                  "below are the nearest the corpus has: check them before relying on them.") if weak else ""
    return QueryCoverage(counts, n_papers, rare_below, [c.term for c in rare], round(best, 4), weak, notice)


def _distinct(papers: Sequence[int] | np.ndarray) -> np.ndarray:
    """The distinct ids of ``papers``; a postings list (strictly ascending already) is taken as it is,
    in one linear check instead of a sort (a common stem's list holds a large share of the corpus)."""
    a = np.asarray(papers, dtype=np.int64)
    return a if a.size < 2 or bool((a[1:] > a[:-1]).all()) else np.unique(a)


def _words(counts: Sequence[TermCount]) -> str:
    return ", ".join(f"{c.word or c.term} {c.papers:,}" for c in counts)


def coverage_for_source(query: str, source: object) -> QueryCoverage | None:
    """:func:`assess` over a local corpus source's visible papers (a source with a ``text_index`` and a
    ``visible`` mask, as :class:`~crase_core.sources.local.LocalSource` has); None for a source without postings."""
    index = getattr(source, "text_index", None)
    visible = getattr(source, "visible", None)
    if not isinstance(index, TextIndex) or not isinstance(visible, np.ndarray):
        return None
    terms = query_terms(query)
    postings: dict[str, np.ndarray] = {}
    for t, _ in terms:
        docs = index.postings_of(t).astype(np.int64)
        if docs.size:
            postings[t] = docs[visible[docs]]
    return assess(terms, postings, int(visible.sum()))
