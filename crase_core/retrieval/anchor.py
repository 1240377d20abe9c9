"""Anchor-text retrieval: score a paper by the words of the papers that cite it.

For a query with content stems T, a paper v with visible citers C(v) scores

    a(v) = Σ_{t ∈ T} idf(t) · |{u ∈ C(v) : t ∈ u}| / (|C(v)| + c)

— for each query term, the share of v's citers whose title or abstract holds it (smoothed by ``c``
pseudo-citers that hold none, so that one matching citer does not make a paper the best answer),
weighted by the term's idf. It is the classic anchor-text field of web search, with the citing
paper's text in place of the link's words: a paper that the field's papers on the query's topic cite
scores high even when its own abstract uses other words.

**Leakage.** Only *visible* citers count (``visible`` is the source's mask: for a citation benchmark
query the query paper and every later paper are hidden, so their text never reaches a(v)), and only
visible papers are returned. idf is the index's aggregate statistic (as for BM25).

Pure numpy over the corpus's citation rows and the index's postings: per query term, the rows of the
papers holding it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from crase_core.store.adjacency import CitationGraph
from crase_core.text import content_terms

#: pseudo-citers that hold no query term (the smoothing ``c`` above)
SMOOTHING = 5.0


def anchor_scores(query: str, postings_of: Callable[[str], np.ndarray], idf: Callable[[str], float],
                  refs: CitationGraph, citers: CitationGraph, visible: np.ndarray,
                  smoothing: float = SMOOTHING) -> np.ndarray:
    """a(v) for every paper (0 for a hidden one); ``postings_of(stem)`` gives the ascending ids of the papers
    holding the stem, ``refs`` row u the papers u cites and ``citers`` (its transpose) row v the papers that
    cite v. A term's citer counts are read from the rows of its own papers alone (issue 31: no product over the
    whole graph per term), or for a term most papers hold, from the rows of those that do not."""
    n = visible.size
    out = np.zeros(n)
    stems: Sequence[str] = list(dict.fromkeys(content_terms(query)))  # each term once
    if not stems or n == 0:
        return out
    indegree = citers.row_lengths() if visible.all() else citers @ visible.astype(float)  # visible citers
    denom = indegree + smoothing
    n_visible = int(np.count_nonzero(visible))
    for t in stems:
        docs = postings_of(t)
        if docs.size == 0:
            continue
        docs = np.asarray(docs, dtype=np.int64)
        holders = docs[visible[docs]]
        if 2 * holders.size <= n_visible:
            counts = np.bincount(refs.columns_of(holders), minlength=n)  # visible citers holding t
        else:  # a term most papers hold: count the visible citers that do not hold it (the same integers)
            others = visible.copy()
            others[holders] = False
            counts = indegree - np.bincount(refs.columns_of(np.flatnonzero(others)), minlength=n)
        out += idf(t) * counts / denom
    return np.where(visible, out, 0.0)
