"""A :class:`PaperSource` over a local corpus (the embedded hep-th one by default)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

import numpy as np

from crase_core.paper_source import NeighborList, ScoredPaper, SourceFilter
from crase_core.records import Paper
from crase_core.retrieval.semantic import DocEmbeddings, Lookup, find_embeddings
from crase_core.settings import environment
from crase_core.store import corpus_folder
from crase_core.store.citation_contexts import CitationContexts
from crase_core.store.corpus import DEFAULT_CORPUS_DIR, Corpus, load_corpus
from crase_core.store.textindex import TextIndex

log = logging.getLogger(__name__)

def open_corpus(directory: str | os.PathLike[str] | None = None, *, workers: int = 1,
                progress: Callable[[str], None] | None = None) -> Corpus:
    """The corpus of ``directory`` (default: the embedded hep-th corpus, or ``$CRASE_CORPUS``), memory-mapped
    from its store under the cache folder (:mod:`crase_core.store.corpus_store`), which is built on first use.

    Opening a built store reads no paper: it maps the files and checks their sizes and shapes. A
    damaged store is rebuilt (a warning says so). When the cache folder cannot be written the corpus is
    parsed into memory and a warning says so.
    """
    from crase_core.store.corpus import find_file

    folder = environment.corpus_folder(directory, DEFAULT_CORPUS_DIR)
    try:
        find_file(folder, "papers.jsonl"), find_file(folder, "citations.tsv")
    except Exception:
        return load_corpus(folder)  # raises the clear CorpusError
    try:
        return corpus_folder.open_or_build(folder, workers=workers, progress=progress or log.info)
    except OSError as e:
        log.warning("could not cache the parsed corpus (%s); running without that cache", e.strerror or e)
    return load_corpus(folder)


class LocalSource:
    """Search, references, citations and lookup over an in-memory corpus with a BM25 index."""

    external_calls = 0

    def __init__(self, corpus: Corpus, index: TextIndex, filter: SourceFilter | None = None,
                 embeddings: DocEmbeddings | None = None, *, shipped_embeddings: bool = False,
                 folder: Path | None = None, _lookup: Lookup | None = None):
        self.corpus = corpus
        self.text_index = index
        #: the corpus folder (its optional citation_contexts.jsonl; where ``crase corpus embed`` writes its
        #: embeddings); None: not known
        self.folder = folder
        self._contexts: CitationContexts | None | bool = False  # False: not opened yet
        # the embeddings are looked up at first use (a query), not while the source opens: opening runs in the
        # app's prefetch thread, and reading an .npy header parses it with ast, which CPython 3.11 must not do
        # in two threads at once (gh-106905) while Streamlit compiles a page
        # None: look them up (find_embeddings, cached by the files' size and mtime, so a file written later by
        # `crase corpus embed` is picked up by a running app); else the embeddings this source was given
        self._lookup = _lookup if _lookup is not None else (
            Lookup(embeddings, f"semantic feedback on: {embeddings.describe()}") if embeddings is not None
            else None if shipped_embeddings else Lookup(None, "semantic feedback off: this source was opened "
                                                              "without embeddings"))
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
    def open(cls, directory: str | os.PathLike[str] | None = None, *, workers: int = 1,
             progress: Callable[[str], None] | None = None) -> LocalSource:
        """The source over ``directory``'s corpus (see :func:`open_corpus`; ``workers`` and ``progress``
        apply when its store must be built first)."""
        from crase_core.store.corpus import DEFAULT_CORPUS_DIR

        corpus = open_corpus(directory, workers=workers, progress=progress)
        folder = environment.corpus_folder(directory, DEFAULT_CORPUS_DIR)
        return cls(corpus, TextIndex.for_corpus(corpus), shipped_embeddings=True, folder=folder)

    @property
    def semantic(self) -> Lookup:
        """The corpus's embeddings for semantic feedback, or why there are none (:func:`find_embeddings`)."""
        if self._lookup is not None:
            return self._lookup
        c = self.corpus
        return find_embeddings(self.folder, c.name, c.fingerprint, len(c))

    @property
    def embeddings(self) -> DocEmbeddings | None:
        """The corpus's verified paper embeddings (semantic feedback, crase_core.retrieval.semantic), else None."""
        return self.semantic.embeddings

    def describe(self) -> str:
        c = self.corpus
        return f"{c.name} ({len(c):,} papers, {c.n_citations:,} citations); filter: {self.filter.describe()}"

    def restricted(self, filter: SourceFilter) -> LocalSource:
        out = LocalSource(self.corpus, self.text_index, filter, shipped_embeddings=True, folder=self.folder,
                          _lookup=self._lookup)
        out._contexts = self._contexts
        return out

    @property
    def citation_contexts(self) -> CitationContexts | None:
        """The corpus folder's citation contexts (``citation_contexts.jsonl``), opened at first use; None without."""
        if self._contexts is False:
            self._contexts = CitationContexts.open(self.folder)
        return self._contexts if isinstance(self._contexts, CitationContexts) else None

    def contexts(self, citing: str, cited: str) -> tuple[list[str], list[str]]:
        """(citing sentences, intents) of the citation citing → cited; ([], []) when the corpus has none."""
        found = self.citation_contexts
        if found is None or not (self.is_visible(citing) and self.is_visible(cited)):
            return [], []
        return found.lookup(citing, cited)

    def edge_contexts(self, edges: Collection[tuple[str, str]]) -> dict[tuple[str, str], tuple[list[str], list[str]]]:
        """(contexts, intents) of every visible edge of ``edges`` that the corpus has contexts for ({} without a file)."""
        found = self.citation_contexts
        if found is None or not edges:
            return {}
        return {e: c for e, c in found.of_edges(edges).items() if self.is_visible(e[0]) and self.is_visible(e[1])}

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
        ids = dict(zip(hits.tolist(), self._ids(hits), strict=True))
        order = sorted(ids, key=lambda i: (-float(scores[i]), ids[i]))
        return [ScoredPaper(self.corpus.papers[i], float(scores[i])) for i in order]

    def _neighbors(self, paper_id: str, row: Callable[[int], np.ndarray]) -> NeighborList:
        i = self.corpus.index.get(paper_id)
        if i is None or not self.visible[i]:
            return NeighborList(ids=[], total=0)
        cols = row(i)
        cols = cols[self.visible[cols]]
        ids = sorted(self._ids(cols))
        return NeighborList(ids=ids, total=len(ids))

    def _ids(self, positions: np.ndarray) -> list[str]:
        """Ids of the papers at ``positions`` (a mapped corpus reads them without building the papers)."""
        papers = self.corpus.papers
        ids_of = getattr(papers, "ids_of", None)
        return ids_of(positions) if ids_of is not None else [papers[int(j)].id for j in positions]

    def references(self, paper_id: str) -> NeighborList:
        return self._neighbors(paper_id, self.corpus.references_of)

    def citations(self, paper_id: str) -> NeighborList:
        return self._neighbors(paper_id, self.corpus.citers_of)

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
        return int(self.visible[self.corpus.citers_of(i)].sum())

    def edges_among(self, ids: Collection[str]) -> list[tuple[str, str]]:
        idx = np.array(sorted({self.corpus.index[p] for p in ids if p in self.corpus.index}), dtype=np.int64)
        idx = idx[self.visible[idx]] if idx.size else idx
        if idx.size == 0:
            return []
        rows, cols = self.corpus.edges_within(idx)
        names = self._ids(idx)
        return sorted((names[r], names[c]) for r, c in zip(rows.tolist(), cols.tolist(), strict=True))
