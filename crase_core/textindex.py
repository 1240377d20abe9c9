"""BM25 full-text index over title + abstract (bm25s, Lucene BM25, k1=1.5, b=0.75).

Built once per corpus and saved under the cache dir in a folder named by the
corpus fingerprint, so it is rebuilt exactly when the corpus files change.
Title terms count twice (the title is repeated), the usual field boost.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np

from .atomic import publish_dir, temp_dir_beside
from .cache import cache_root
from .corpus import Corpus
from .text import content_terms

log = logging.getLogger(__name__)

INDEX_VERSION = "bm25-lucene-v2"  # v2: Unicode word tokens (ASCII text tokenises as in v1)


def _remove_damaged(path: Path) -> None:
    """Move a damaged index folder out of the way (renamed first, so a concurrent reader never sees it half-deleted)."""
    aside = path.with_name(f".{path.name}.damaged-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.rename(path, aside)
    except OSError:
        return
    shutil.rmtree(aside, ignore_errors=True)


def document_terms(title: str, abstract: str) -> list[str]:
    return content_terms(f"{title} {title} {abstract}")


@dataclass
class TextIndex:
    retriever: bm25s.BM25
    vocab: dict[str, int]
    build_seconds: float = 0.0
    path: Path | None = None

    @classmethod
    def for_corpus(cls, corpus: Corpus, directory: Path | None = None) -> TextIndex:
        """Load the corpus's index from disk, building and saving it first if needed.

        The new index is saved in a uniquely named temp folder and renamed into place, so
        concurrent first runs never share a temp folder (the first rename wins; the others load
        the winner's). A cache folder that cannot be written leaves the index in memory only.
        """
        base = directory or cache_root() / "index"
        path = base / f"{corpus.name}-{corpus.fingerprint}-{INDEX_VERSION}"
        if path.is_dir():
            try:
                retriever = bm25s.BM25.load(str(path), mmap=False)
                return cls(retriever, retriever.vocab_dict, 0.0, path)
            except Exception as e:  # a damaged index is rebuilt, not fatal
                log.warning("index at %s unreadable (%s); rebuilding", path, type(e).__name__)
                _remove_damaged(path)
        index = cls.build(corpus)
        try:
            tmp = temp_dir_beside(path)
            try:
                index.retriever.save(str(tmp))
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            publish_dir(tmp, path)
        except OSError as e:
            log.warning("could not save the BM25 index under %s (%s); using it from memory", base, e)
            return index
        index.path = path
        return index

    @classmethod
    def build(cls, corpus: Corpus) -> TextIndex:
        start = time.perf_counter()
        log.info("building the BM25 index for %s papers of %s", f"{len(corpus):,}", corpus.name)
        docs = [document_terms(p.title, p.abstract) for p in corpus.papers]
        retriever = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
        retriever.index(docs, show_progress=False)
        return cls(retriever, retriever.vocab_dict, time.perf_counter() - start)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (zeros when no term is known)."""
        terms = [t for t in content_terms(query) if t in self.vocab]
        n = self.retriever.scores["num_docs"]
        if not terms:
            return np.zeros(n, dtype=np.float32)
        return self.retriever.get_scores(terms)

    def size_bytes(self) -> int:
        if not self.path:
            return 0
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())
