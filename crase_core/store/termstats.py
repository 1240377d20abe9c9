"""Corpus term statistics (document frequency, IDF) over the index's stems."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from crase_core.store.textindex import TextIndex


@dataclass
class TermStats:
    """IDF of content stems: idf(t) = ln(1 + (N − df + 0.5)/(df + 0.5)) (BM25's, always > 0).

    Unknown stems get the IDF of a term seen once.
    """

    n_docs: int
    df: dict[str, int]

    @classmethod
    def from_index(cls, index: TextIndex) -> TermStats:
        return cls(index.n_docs, index.document_frequencies())

    def idf(self, term: str) -> float:
        df = self.df.get(term, 1)
        return math.log(1.0 + (self.n_docs - df + 0.5) / (df + 0.5))


def index_idf(index: TextIndex) -> Callable[[str], float]:
    """idf(stem) from ``index``'s document frequencies without building the whole df table (the
    :class:`TermStats` formula; an unknown stem counts as seen once)."""
    n = index.n_docs

    def idf(term: str) -> float:
        df = max(1, index.df(term))
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    return idf
