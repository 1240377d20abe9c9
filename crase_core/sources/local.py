"""A :class:`PaperSource` over a local corpus (the embedded hep-th one by default)."""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np

from .. import corpus_cache, environment
from ..cache import cache_root
from ..corpus import Corpus, load_corpus
from ..errors import CraseError
from ..records import Paper
from ..textindex import TextIndex
from .base import NeighborList, ScoredPaper, SourceFilter

log = logging.getLogger(__name__)

def open_corpus(directory: str | os.PathLike[str] | None = None) -> Corpus:
    """:func:`load_corpus`, memoised on disk by corpus fingerprint (:mod:`crase_core.corpus_cache`).

    The cached copy is plain arrays + JSON (nothing in it can run code), checked against its
    checksum and the corpus fingerprint; a bad copy is rebuilt. When the cache folder cannot be
    written the corpus is used uncached and a warning says so.
    """
    from ..corpus import DEFAULT_CORPUS_DIR, _find, _fingerprint

    folder = Path(directory or environment.get(environment.CORPUS) or DEFAULT_CORPUS_DIR)
    try:
        fp = _fingerprint([_find(folder, "papers.jsonl"), _find(folder, "citations.tsv")])
    except Exception:
        return load_corpus(folder)  # raises the clear CorpusError
    path = cache_root() / "corpus" / f"{folder.name}-{fp}-v{corpus_cache.VERSION}.npz"
    if path.is_file():
        corpus = corpus_cache.read(path, fp, folder.name)
        if corpus is not None:
            return corpus
    corpus = load_corpus(folder)
    try:
        corpus_cache.write(corpus, path)
    except (CraseError, OSError) as e:
        log.warning("could not cache the parsed corpus (%s); running without that cache", e)
    return corpus


class LocalSource:
    """Search, references, citations and lookup over an in-memory corpus with a BM25 index."""

    external_calls = 0

    def __init__(self, corpus: Corpus, index: TextIndex, filter: SourceFilter | None = None):
        self.corpus = corpus
        self.text_index = index
        self.filter = filter or SourceFilter()
        self.name = f"local:{corpus.name}@{corpus.fingerprint[:8]}"
        visible = np.ones(len(corpus), dtype=bool)
        if self.filter.max_month is not None:
            visible &= corpus.months <= self.filter.max_month
        for pid in self.filter.exclude:
            i = corpus.index.get(pid)
            if i is not None:
                visible[i] = False
        self.visible = visible

    @classmethod
    def open(cls, directory: str | os.PathLike[str] | None = None) -> LocalSource:
        corpus = open_corpus(directory)
        return cls(corpus, TextIndex.for_corpus(corpus))

    def describe(self) -> str:
        c = self.corpus
        return f"{c.name} ({len(c):,} papers, {c.n_citations:,} citations); filter: {self.filter.describe()}"

    def restricted(self, filter: SourceFilter) -> LocalSource:
        return LocalSource(self.corpus, self.text_index, filter)

    def is_visible(self, paper_id: str) -> bool:
        i = self.corpus.index.get(paper_id)
        return i is not None and bool(self.visible[i])

    def search(self, query: str, limit: int) -> list[ScoredPaper]:
        scores = self.text_index.scores(query)
        scores = np.where(self.visible, scores, 0.0)
        hits = np.flatnonzero(scores > 0)
        if hits.size == 0:
            return []
        if hits.size > limit:
            hits = hits[np.argpartition(-scores[hits], limit - 1)[:limit]]
        # best score first; ties broken by id for determinism
        order = sorted(hits.tolist(), key=lambda i: (-float(scores[i]), self.corpus.papers[i].id))
        return [ScoredPaper(self.corpus.papers[i], float(scores[i])) for i in order]

    def _neighbors(self, paper_id: str, matrix) -> NeighborList:
        i = self.corpus.index.get(paper_id)
        if i is None or not self.visible[i]:
            return NeighborList(ids=[], total=0)
        cols = matrix.indices[matrix.indptr[i] : matrix.indptr[i + 1]]
        cols = cols[self.visible[cols]]
        ids = sorted(self.corpus.papers[j].id for j in cols)
        return NeighborList(ids=ids, total=len(ids))

    def references(self, paper_id: str) -> NeighborList:
        return self._neighbors(paper_id, self.corpus.refs)

    def citations(self, paper_id: str) -> NeighborList:
        return self._neighbors(paper_id, self.corpus.cites)

    def get(self, ids: Sequence[str]) -> dict[str, Paper]:
        out: dict[str, Paper] = {}
        for pid in ids:
            i = self.corpus.index.get(pid)
            if i is not None and self.visible[i]:
                out[pid] = self.corpus.papers[i]
        return out

    def in_corpus_citation_count(self, paper_id: str) -> int:
        i = self.corpus.index.get(paper_id)
        if i is None:
            return 0
        cols = self.corpus.cites.indices[self.corpus.cites.indptr[i] : self.corpus.cites.indptr[i + 1]]
        return int(self.visible[cols].sum())

    def edges_among(self, ids: Collection[str]) -> list[tuple[str, str]]:
        idx = np.array(sorted({self.corpus.index[p] for p in ids if p in self.corpus.index}), dtype=np.int64)
        idx = idx[self.visible[idx]] if idx.size else idx
        if idx.size == 0:
            return []
        sub = self.corpus.refs[idx][:, idx].tocoo()
        papers = self.corpus.papers
        return sorted((papers[idx[r]].id, papers[idx[c]].id) for r, c in zip(sub.row, sub.col, strict=True))
