"""BM25 full-text index over title + abstract (Lucene BM25, k1=1.5, b=0.75), stored as raw postings.

The index holds what Lucene's segments hold, not precomputed scores: the vocabulary (sorted UTF-8 stems),
for every stem the ascending ids of the documents holding it and its term frequency there (a CSC
``indptr``/``docs``/``tf``), every document's length, and the index-wide statistics (document count,
total length). A query computes, for each of its known stems t in order,

    idf(t) · tf / (tf + k1 · (1 − b + b · |d| / avgdl)),   idf(t) = ln(1 + (N − df + 0.5)/(df + 0.5))

with the same float32/float64 steps as ``bm25s`` (``method="lucene"``), so the scores are bit-identical
to the bm25s index used before. Because no stored number depends on N, df or avgdl, appended documents
live in their own parts (a corpus segment's postings, :mod:`crase_core.store.segments`) searched with the
index-wide statistics, and merging parts (:func:`append_postings`) changes only the postings of the stems
they hold: search after an append equals search on a full rebuild, exactly.

Stored as ``.npy`` files loaded with ``np.load(mmap_mode="r")`` (a query reads only its stems' postings)
in a folder named by the corpus fingerprint, published atomically (rename), so concurrent first builds
never share a folder. Title terms count twice (the title is repeated), the usual field boost.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from crase_core import text as _text
from crase_core.atomic import publish_dir, remove_dir, temp_dir_beside
from crase_core.cache import cache_root
from crase_core.store.corpus import Corpus
from crase_core.store.npy_folder import map_npy, read_meta
from crase_core.store.sorted_keys import SortedKeys, find_sorted
from crase_core.text import content_terms

log = logging.getLogger(__name__)

INDEX_VERSION = "bm25-lucene-v3"  # v3: raw postings (tf, doc lengths) + global stats; v2 was bm25s's score matrix
K1, B = 1.5, 0.75
_FORMAT = "crase-postings"
_ARRAYS = ("vocab", "indptr", "docs", "tf", "doc_len")


def document_terms(title: str, abstract: str) -> list[str]:
    return content_terms(f"{title} {title} {abstract}")


_WORD_TERMS: dict[str, str] = {}  # word → its stem, "" when content_words drops it (this process's memo)
_WORD_TERMS_MAX = 2_000_000


def _document_words(title: str, abstract: str) -> list[str]:
    """``text.words`` of the document text; on ASCII text the whole string is lower-cased once (same tokens)."""
    doc = f"{title} {title} {abstract}"
    if not doc.isascii():
        return _text.words(doc)
    if "\\" in doc:
        doc = _text._TEX_COMMAND.sub(lambda m: " " + m.group(0)[1:] + " ", doc)
    return _text._WORD.findall(doc.lower())


def document_term_ids(docs: Sequence[tuple[str, str]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """:func:`document_terms` of many (title, abstract) pairs at once: ``(terms, token_ids, lens)`` where
    document j's terms are ``terms[i]`` for the ``lens[j]`` ids of ``token_ids`` after the previous
    documents'. Equal, token for token, to calling :func:`document_terms` on each; about 5× faster (each
    distinct word is filtered and stemmed once, the tokens are mapped in C)."""
    flat: list[str] = []
    lens = np.empty(len(docs), dtype=np.int64)
    for j, (title, abstract) in enumerate(docs):
        ws = _document_words(title, abstract)
        flat.extend(ws)
        lens[j] = len(ws)
    table = _WORD_TERMS
    distinct = set(flat)
    missing = [w for w in distinct if w not in table]
    if len(table) + len(missing) > _WORD_TERMS_MAX:
        table.clear()
        missing = list(distinct)
    keep = [w for w in missing if w not in _text.STOPWORDS and (len(w) > 1 or w.isdigit())]
    table.update(dict.fromkeys(missing, ""))
    table.update(zip(keep, map(_text.stem, keep), strict=True))
    local: dict[str, int] = {}
    word_id = {w: (local.setdefault(s, len(local)) if (s := table[w]) else -1) for w in distinct}
    ids = np.fromiter(map(word_id.__getitem__, flat), dtype=np.int32, count=len(flat))
    kept = ids >= 0
    if not kept.all():
        doc = np.repeat(np.arange(len(docs), dtype=np.int64), lens)
        lens = np.bincount(doc[kept], minlength=len(docs)).astype(np.int64)
        ids = ids[kept]
    return list(local), ids, lens


@dataclass
class DocTerms:
    """Documents' postings, ready to add: ``(term, doc, tf)`` triples sorted by term then doc (``doc`` local
    to the batch, ``term`` an index into ``terms``) and each document's length."""

    terms: list[str]
    term: np.ndarray  # int32
    doc: np.ndarray  # int32
    tf: np.ndarray  # uint16 or int32
    lens: np.ndarray  # int64

    @classmethod
    def of(cls, docs: Sequence[tuple[str, str]]) -> DocTerms:
        terms, ids, lens = document_term_ids(docs)
        return cls.from_ids(terms, ids, lens)

    @classmethod
    def from_ids(cls, terms: list[str], ids: np.ndarray, lens: np.ndarray) -> DocTerms:
        n = int(lens.size)
        if not ids.size:
            z = np.zeros(0, dtype=np.int32)
            return cls(terms, z, z, np.zeros(0, dtype=np.uint16), lens.astype(np.int64))
        local = np.repeat(np.arange(n, dtype=np.int64), lens)
        keys, tf = np.unique(ids.astype(np.int64) * n + local, return_counts=True)
        return cls(terms, (keys // n).astype(np.int32), (keys % n).astype(np.int32),
                   tf.astype(np.uint16 if int(tf.max()) < 2**16 else np.int32), lens.astype(np.int64))

    def select(self, keep: np.ndarray) -> DocTerms:
        """Only the documents where ``keep`` (bool, one per document) is set, renumbered in order."""
        if keep.all():
            return self
        new_pos = np.cumsum(keep) - 1
        m = keep[self.doc]
        return DocTerms(self.terms, self.term[m], new_pos[self.doc[m]].astype(np.int32), self.tf[m], self.lens[keep])


class TermVocab(SortedKeys):
    """stem → term id over a sorted array of UTF-8 stems: a lookup is a binary search (nothing is loaded at
    open); the first full iteration (``items()``, ``dict(vocab)``) builds a dict once and uses it after."""

    def __init__(self, terms: np.ndarray):
        super().__init__(terms)
        self._dict: dict[str, int] | None = None

    def as_dict(self) -> dict[str, int]:
        if self._dict is None:
            self._dict = {raw.decode("utf-8", "surrogatepass"): i for i, raw in enumerate(self.keys_array.tolist())}
        return self._dict

    def lookup(self, key: str) -> int | None:
        return self._dict.get(key) if self._dict is not None else find_sorted(self.keys_array, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def keys(self) -> KeysView[str]:
        return self.as_dict().keys()

    def items(self) -> ItemsView[str, int]:
        return self.as_dict().items()


def _sorted_terms(terms: Iterable[str]) -> np.ndarray:
    encoded = sorted(t.encode("utf-8", "surrogatepass") for t in terms)
    width = max((len(t) for t in encoded), default=1) or 1
    return np.array(encoded, dtype=f"S{width}") if encoded else np.zeros(0, dtype="S1")


@dataclass
class Postings:
    """The index's arrays (see the module docstring); ``doc_len[i]`` counts document i's terms with repeats."""

    vocab: np.ndarray  # S<w>, sorted
    indptr: np.ndarray  # int64, len(vocab) + 1
    docs: np.ndarray  # int32, ascending within each term
    tf: np.ndarray  # uint16 or int32
    doc_len: np.ndarray  # int32
    sum_doc_len: int

    @property
    def n_docs(self) -> int:
        return int(self.doc_len.size)

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k) for k in _ARRAYS}


def _global_ids(builder: PostingsBuilder | PostingsWriter, batch: DocTerms) -> np.ndarray:
    """``batch.term`` as the builder's term ids; only stems that occur get one (a dropped document's do not)."""
    if not batch.term.size:
        return batch.term
    used = np.zeros(len(batch.terms), dtype=bool)
    used[batch.term] = True
    ids = np.full(len(batch.terms), -1, dtype=np.int32)
    ids[used] = builder.map_local([batch.terms[i] for i in np.flatnonzero(used).tolist()])
    return ids[batch.term]


class PostingsBuilder:
    """Collects documents' term lists in order and assembles :class:`Postings` (vectorised, chunk by chunk)."""

    def __init__(self) -> None:
        self.term_ids: dict[str, int] = {}
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (term, doc, tf), sorted by term, doc
        self._lens: list[np.ndarray] = []
        self._max_tf = 0
        self.n_docs = 0

    def add_ids(self, token_ids: np.ndarray, lens: np.ndarray) -> None:
        """Add ``len(lens)`` documents whose term ids (of :attr:`term_ids`) are ``token_ids``, concatenated."""
        if lens.size:
            self._add_runs(DocTerms.from_ids([], token_ids, lens))

    def add_doc_terms(self, batch: DocTerms) -> None:
        """Add the documents of ``batch`` (its terms mapped to this builder's ids)."""
        if batch.lens.size:
            self._add_runs(DocTerms([], _global_ids(self, batch), batch.doc, batch.tf, batch.lens))

    def _add_runs(self, b: DocTerms) -> None:
        self._max_tf = max(self._max_tf, int(b.tf.max(initial=0)))
        self._chunks.append((b.term, (b.doc + self.n_docs).astype(np.int32), b.tf))
        self._lens.append(b.lens.astype(np.int32))
        self.n_docs += int(b.lens.size)

    def add(self, docs: Sequence[Sequence[str]]) -> None:
        ids = self.term_ids
        flat = [ids.setdefault(t, len(ids)) for d in docs for t in d]
        self.add_ids(np.array(flat, dtype=np.int32), np.array([len(d) for d in docs], dtype=np.int64))

    def add_texts(self, docs: Sequence[tuple[str, str]]) -> None:
        """Add documents given as (title, abstract) pairs (tokenised with :func:`document_term_ids`)."""
        self.add_doc_terms(DocTerms.of(docs))

    def map_local(self, local_terms: Sequence[str]) -> np.ndarray:
        """Global ids for a worker's local vocabulary (new stems get new ids)."""
        ids = self.term_ids
        return np.array([ids.setdefault(t, len(ids)) for t in local_terms], dtype=np.int32)

    def finish(self) -> Postings:
        terms = list(self.term_ids)
        vocab = _sorted_terms(terms)
        rank = np.empty(len(terms), dtype=np.int64)  # first-seen id → sorted id
        if terms:
            rank[np.argsort(np.array([t.encode("utf-8", "surrogatepass") for t in terms], dtype=vocab.dtype),
                            kind="stable")] = np.arange(len(terms))
        df = np.zeros(len(terms), dtype=np.int64)
        for t, _, _ in self._chunks:
            df += np.bincount(rank[t], minlength=len(terms))
        indptr = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        total = int(indptr[-1])
        docs = np.empty(total, dtype=np.int32)
        tfs = np.empty(total, dtype=np.uint16 if self._max_tf < 2**16 else np.int32)  # 12 B a posting at most
        fill = indptr[:-1].copy()
        while self._chunks:
            t, d, f = self._chunks.pop(0)  # free each chunk as it is placed
            if not t.size:
                continue
            starts = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])  # runs of one term (sorted by term, then doc)
            run_len = np.diff(np.r_[starts, t.size])
            run_terms = rank[t[starts]]
            within = np.arange(t.size) - np.repeat(starts, run_len)
            pos = np.repeat(fill[run_terms], run_len) + within
            docs[pos], tfs[pos] = d, f
            fill[run_terms] += run_len
        doc_len = np.concatenate(self._lens) if self._lens else np.zeros(0, dtype=np.int32)
        return Postings(vocab, indptr, docs, _compact_tf(tfs), doc_len, int(doc_len.sum(dtype=np.int64)))


def _npy_header(f: Any, dtype: np.dtype[Any], n: int) -> None:
    """The header ``np.save`` writes for a 1-D array of ``n`` items of ``dtype`` (format 1.0)."""
    np.lib.format.write_array_header_1_0(f, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
                                             "shape": (n,)})


class PostingsWriter:
    """Builds the index into ``folder`` in memory bounded by ``block_postings``, whatever the corpus size.

    Like :class:`PostingsBuilder`, but every batch's postings are spilled to disk as a sorted run (by the
    first two bytes of the stem, then stem, then document) and :meth:`finish` merges the runs block by
    block: a block is a range of two-byte stem prefixes (which is a contiguous range of the sorted
    vocabulary) holding about ``block_postings`` postings, read from every run, ordered by stem and
    written out. The files are byte for byte those of :func:`save_postings` on :class:`PostingsBuilder`'s
    result (``tests/test_corpus_store.py``). Memory: the vocabulary, a few bytes per document, and one
    block (~40 B a posting).
    """

    _SPILL = ("term", "doc", "tf")

    def __init__(self, folder: Path, block_postings: int = 4_000_000):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.block_postings = max(1, block_postings)
        self.term_ids: dict[str, int] = {}
        self._encoded: list[bytes] = []
        self._bucket = np.zeros(1024, dtype=np.int32)  # first two bytes of each stem, by term id
        self._df = np.zeros(1024, dtype=np.int64)
        self._runs: list[tuple[int, np.ndarray, np.ndarray]] = []  # (start in the spill, buckets, their starts)
        self._spilled = 0
        self._lens: list[np.ndarray] = []
        self._max_tf = 0
        self.n_docs = 0
        self._files = {k: open(folder / f"spill-{k}.bin", "wb") for k in self._SPILL}  # noqa: SIM115 (finish)

    def map_local(self, local_terms: Sequence[str]) -> np.ndarray:
        ids = self.term_ids
        first_new = len(ids)
        out = np.array([ids.setdefault(t, len(ids)) for t in local_terms], dtype=np.int32)
        if len(ids) > first_new:
            new = [t.encode("utf-8", "surrogatepass") for t in list(ids)[first_new:]]
            self._encoded.extend(new)
            if len(ids) > self._bucket.size:
                size = max(len(ids), 2 * self._bucket.size)
                self._bucket = np.resize(self._bucket, size)
                self._df = np.concatenate([self._df, np.zeros(size - self._df.size, dtype=np.int64)])
            self._bucket[first_new:len(ids)] = [(b[0] << 8 | (b[1] if len(b) > 1 else 0)) if b else 0 for b in new]
        return out

    def add_doc_terms(self, batch: DocTerms) -> None:
        if not batch.lens.size:
            return
        term = _global_ids(self, batch)
        buckets = self._bucket[term]
        order = np.argsort(buckets, kind="stable")  # (term, doc) order kept within a bucket
        buckets = buckets[order]
        self._files["term"].write(term[order].astype(np.int32).tobytes())
        self._files["doc"].write((batch.doc[order].astype(np.int64) + self.n_docs).astype(np.int32).tobytes())
        self._files["tf"].write(batch.tf[order].astype(np.int32).tobytes())
        vals, starts = np.unique(buckets, return_index=True)
        self._runs.append((self._spilled, vals, np.append(starts, buckets.size)))
        self._spilled += int(buckets.size)
        self._df[:len(self.term_ids)] += np.bincount(term, minlength=len(self.term_ids))
        self._max_tf = max(self._max_tf, int(batch.tf.max(initial=0)))
        self._lens.append(batch.lens.astype(np.int32))
        self.n_docs += int(batch.lens.size)

    def add_texts(self, docs: Sequence[tuple[str, str]]) -> None:
        self.add_doc_terms(DocTerms.of(docs))

    def close(self) -> None:
        for f in self._files.values():
            f.close()

    def _read(self, name: str, lo: int, hi: int) -> np.ndarray:
        """Entries ``lo:hi`` of a spill file; OSError when the file is shorter (truncated under us)."""
        a = np.fromfile(self.folder / f"spill-{name}.bin", dtype=np.int32, count=hi - lo, offset=4 * lo)
        if a.size != hi - lo:
            raise OSError(f"spill file spill-{name}.bin is truncated ({a.size} of {hi - lo} entries at {lo})")
        return a

    def finish(self, extra: Mapping[str, Any] | None = None, on_block: Callable[[float], None] | None = None) -> None:
        """Merge the runs and write the index files and ``meta.json`` into the folder (spill files removed);
        ``on_block(fraction merged)`` after each block."""
        self.close()
        n_terms = len(self.term_ids)
        vocab = _sorted_terms(self.term_ids)
        rank = np.empty(n_terms, dtype=np.int64)
        if n_terms:
            rank[np.argsort(np.array(self._encoded, dtype=vocab.dtype), kind="stable")] = np.arange(n_terms)
        df = np.zeros(n_terms, dtype=np.int64)
        df[rank] = self._df[:n_terms]
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        tf_dtype = np.dtype(np.uint16 if self._max_tf < 2**16 else np.int32)
        total = np.zeros(1 << 16, dtype=np.int64)
        for _, vals, starts in self._runs:
            total[vals] += np.diff(starts)
        cuts = [0]
        acc = 0
        for b in np.flatnonzero(total).tolist():  # consecutive buckets up to block_postings a block
            if acc and acc + int(total[b]) > self.block_postings:
                cuts.append(b)
                acc = 0
            acc += int(total[b])
        cuts.append(1 << 16)
        shapes: dict[str, list[Any]] = {}

        def save(name: str, array: np.ndarray) -> None:
            np.save(self.folder / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)

        save("vocab", vocab)
        save("indptr", indptr)
        n_post = int(indptr[-1])
        with open(self.folder / "docs.npy", "wb") as fd, open(self.folder / "tf.npy", "wb") as ft:
            _npy_header(fd, np.dtype(np.int32), n_post)
            _npy_header(ft, tf_dtype, n_post)
            for i, (blo, bhi) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
                if on_block is not None:
                    on_block(i / max(1, len(cuts) - 1))
                parts: dict[str, list[np.ndarray]] = {k: [] for k in self._SPILL}
                for base, vals, starts in self._runs:
                    i0, i1 = np.searchsorted(vals, [blo, bhi]).tolist()
                    lo, hi = base + int(starts[i0]), base + int(starts[i1])
                    if hi > lo:
                        for k in self._SPILL:
                            parts[k].append(self._read(k, lo, hi))
                if not parts["term"]:
                    continue
                term = np.concatenate(parts["term"])
                order = np.argsort(rank[term], kind="stable")  # by stem; runs in order, so docs ascend
                del term
                fd.write(np.concatenate(parts["doc"])[order].tobytes())
                ft.write(np.concatenate(parts["tf"])[order].astype(tf_dtype).tobytes())
        for k in self._SPILL:
            (self.folder / f"spill-{k}.bin").unlink()
        doc_len = np.concatenate(self._lens) if self._lens else np.zeros(0, dtype=np.int32)
        save("doc_len", doc_len)
        for name in _ARRAYS:
            a = np.load(self.folder / f"{name}.npy", mmap_mode="r", allow_pickle=False)
            shapes[name] = [a.dtype.str, list(a.shape), (self.folder / f"{name}.npy").stat().st_size]
        meta = {"format": _FORMAT, "version": INDEX_VERSION, "k1": K1, "b": B,
                "sum_doc_len": int(doc_len.sum(dtype=np.int64)), "arrays": shapes, **(extra or {})}
        (self.folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")


def _compact_tf(tf: np.ndarray) -> np.ndarray:
    return tf.astype(np.uint16, copy=False) if not tf.size or int(tf.max()) < 2**16 else tf.astype(np.int32, copy=False)


def append_postings(old: Postings, new: Postings) -> Postings:
    """``old`` followed by ``new``'s documents (ids shifted by ``old.n_docs``): equal to building over both.

    Every new document id is larger than every old one, so each stem's new postings go at the end of its
    run; the sorted vocabulary gains the new stems in order. Cost: one pass over the arrays (memory speed),
    no re-tokenising of the old documents.
    """
    vocab = np.union1d(old.vocab, new.vocab)  # sorted; the wider of the two widths
    old_ids = np.searchsorted(vocab, old.vocab)
    new_ids = np.searchsorted(vocab, new.vocab)
    old_df, new_df = np.diff(np.asarray(old.indptr)), np.diff(np.asarray(new.indptr))
    df = np.zeros(vocab.size, dtype=np.int64)
    df[old_ids] += old_df
    df[new_ids] += new_df
    indptr = np.zeros(vocab.size + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    # a stem's new postings go after the old postings of every stem sorted up to it (its own run included)
    old_counts = np.zeros(vocab.size, dtype=np.int64)
    old_counts[old_ids] = old_df
    old_end = np.cumsum(old_counts)
    at = np.repeat(old_end[new_ids], new_df)
    shift = np.int32(old.n_docs)
    docs = np.insert(np.asarray(old.docs), at, (np.asarray(new.docs) + shift).astype(np.int32))
    tf_dtype = np.result_type(old.tf.dtype, new.tf.dtype)  # no int32 copy of a uint16 column
    tf = np.insert(np.asarray(old.tf).astype(tf_dtype, copy=False), at, np.asarray(new.tf).astype(tf_dtype))
    doc_len = np.concatenate([np.asarray(old.doc_len), np.asarray(new.doc_len)])
    return Postings(vocab, indptr, docs.astype(np.int32, copy=False), _compact_tf(tf),
                    doc_len.astype(np.int32, copy=False), old.sum_doc_len + new.sum_doc_len)


def merge_parts(parts: Sequence[Postings]) -> Postings:
    """The parts (each's document ids following the previous parts') as one :class:`Postings`, equal to
    building over all of them: the small trailing parts are merged with each other first, then with the
    first, so the big arrays are copied once."""
    if len(parts) == 1:
        return parts[0]
    tail = parts[1]
    for p in parts[2:]:
        tail = append_postings(tail, p)
    return append_postings(parts[0], tail)


def _npy_reader(path: Path | None, array: np.ndarray) -> Callable[[int, int], np.ndarray]:
    """``lo, hi → array[lo:hi]``; read from the ``.npy`` file at ``path`` with plain reads when given (no
    page of it stays mapped: memory stays one block whatever the file's size), else sliced from ``array``."""
    if path is None:
        return lambda lo, hi: np.asarray(array[lo:hi])
    mapped = np.load(path, mmap_mode="r", allow_pickle=False)  # only for its header: no page is read
    if not isinstance(mapped, np.memmap) or mapped.shape != array.shape or mapped.dtype != array.dtype:
        raise ValueError(f"{path.name} does not match the postings")
    start, dtype = int(mapped.offset), mapped.dtype
    del mapped

    def read(lo: int, hi: int) -> np.ndarray:
        out = np.fromfile(path, dtype=dtype, count=hi - lo, offset=start + lo * dtype.itemsize)
        if out.size != hi - lo:
            raise OSError(f"{path.name} is truncated")
        return out

    return read


def save_merged_postings(parts: Sequence[Postings], folder: Path, *, first_folder: Path | None = None,
                         block_postings: int = 4_000_000) -> None:
    """Write :func:`merge_parts` of ``parts`` into ``folder``, byte for byte what :func:`save_postings` of it
    writes, a block of stems at a time: memory is the trailing parts merged (small), the vocabulary and one
    block of ~``block_postings`` postings, however big the first part is. ``first_folder``: where the first
    part's files are (read with plain reads, not mapped)."""
    first = parts[0]
    tail = merge_parts(parts[1:])
    vocab = np.union1d(first.vocab, tail.vocab)
    ids_a, ids_b = np.searchsorted(vocab, first.vocab), np.searchsorted(vocab, tail.vocab)
    ptr_a, ptr_b = np.asarray(first.indptr, dtype=np.int64), np.asarray(tail.indptr, dtype=np.int64)
    df_a, df_b = np.zeros(vocab.size, dtype=np.int64), np.zeros(vocab.size, dtype=np.int64)
    df_a[ids_a], df_b[ids_b] = np.diff(ptr_a), np.diff(ptr_b)
    indptr = np.zeros(vocab.size + 1, dtype=np.int64)
    np.cumsum(df_a + df_b, out=indptr[1:])
    read_docs = _npy_reader(first_folder / "docs.npy" if first_folder else None, first.docs)
    read_tf = _npy_reader(first_folder / "tf.npy" if first_folder else None, first.tf)
    tf_dtype: np.dtype[Any] = np.dtype(np.uint16)  # as _compact_tf: uint16 unless a tf does not fit
    if any(p.tf.dtype != np.uint16 for p in parts):
        max_tf = max(int(np.asarray(tail.tf).max(initial=0)),
                     *(int(read_tf(lo, min(lo + block_postings, first.tf.size)).max(initial=0))
                       for lo in range(0, first.tf.size, block_postings)), 0)
        tf_dtype = np.dtype(np.uint16 if max_tf < 2**16 else np.int32)
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "vocab.npy", vocab, allow_pickle=False)
    np.save(folder / "indptr.npy", indptr, allow_pickle=False)
    shift = np.int64(first.n_docs)
    with open(folder / "docs.npy", "wb") as fd, open(folder / "tf.npy", "wb") as ft:
        _npy_header(fd, np.dtype(np.int32), int(indptr[-1]))
        _npy_header(ft, tf_dtype, int(indptr[-1]))
        lo_t = 0
        while lo_t < vocab.size:  # merged stems lo_t:hi_t, about block_postings postings
            hi_t = max(lo_t + 1, int(np.searchsorted(indptr, indptr[lo_t] + block_postings, side="right")) - 1)
            hi_t = min(hi_t, vocab.size)
            base = int(indptr[lo_t])
            out_d = np.empty(int(indptr[hi_t]) - base, dtype=np.int32)
            out_f = np.empty(out_d.size, dtype=tf_dtype)
            for ids, ptr, df_before, reader_d, reader_f, offset in (
                    (ids_a, ptr_a, None, read_docs, read_tf, 0),
                    (ids_b, ptr_b, df_a, lambda a, b: np.asarray(tail.docs[a:b]), lambda a, b: np.asarray(tail.tf[a:b]),
                     shift)):
                k0, k1 = np.searchsorted(ids, [lo_t, hi_t]).tolist()
                p0, p1 = int(ptr[k0]), int(ptr[k1])
                if p1 == p0:
                    continue
                counts = np.diff(ptr[k0:k1 + 1])
                terms = np.repeat(ids[k0:k1], counts)
                within = np.arange(p1 - p0, dtype=np.int64) - np.repeat(ptr[k0:k1] - p0, counts)
                pos = indptr[terms] - base + within + (df_before[terms] if df_before is not None else 0)
                out_d[pos] = (reader_d(p0, p1).astype(np.int64) + offset).astype(np.int32)
                out_f[pos] = reader_f(p0, p1).astype(tf_dtype)
            fd.write(out_d.tobytes())
            ft.write(out_f.tobytes())
            lo_t = hi_t
    doc_len = np.concatenate([np.asarray(p.doc_len) for p in (first, tail)]).astype(np.int32, copy=False)
    np.save(folder / "doc_len.npy", doc_len, allow_pickle=False)
    shapes: dict[str, list[Any]] = {}
    for name in _ARRAYS:
        a = np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False)
        shapes[name] = [a.dtype.str, list(a.shape), (folder / f"{name}.npy").stat().st_size]
    meta = {"format": _FORMAT, "version": INDEX_VERSION, "k1": K1, "b": B,
            "sum_doc_len": first.sum_doc_len + tail.sum_doc_len, "arrays": shapes}
    (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")


def save_postings(postings: Postings, folder: Path, extra: Mapping[str, Any] | None = None) -> None:
    """Write the arrays and ``meta.json`` (shapes, dtypes, sizes: a truncated file is caught at open)."""
    folder.mkdir(parents=True, exist_ok=True)
    shapes: dict[str, list[Any]] = {}
    for name, array in postings.arrays().items():
        np.save(folder / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
        shapes[name] = [array.dtype.str, list(array.shape), (folder / f"{name}.npy").stat().st_size]
    meta = {"format": _FORMAT, "version": INDEX_VERSION, "k1": K1, "b": B, "sum_doc_len": postings.sum_doc_len,
            "arrays": shapes, **(extra or {})}
    (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")


def load_postings(folder: Path) -> tuple[Postings, dict[str, Any]]:
    """The memory-mapped postings saved in ``folder``; ValueError (naming what) when they are damaged."""
    meta = read_meta(folder, _FORMAT, INDEX_VERSION, "an index")
    arrays: dict[str, np.ndarray] = {}
    for name in _ARRAYS:
        want = meta.get("arrays", {}).get(name)
        if not isinstance(want, list) or len(want) != 3 or not want[2]:
            raise ValueError(f"meta.json: bad entry for {name}.npy")
        arrays[name] = map_npy(folder / f"{name}.npy", want[0], want[1], want[2])
    p = Postings(sum_doc_len=int(meta["sum_doc_len"]), **arrays)
    if (p.indptr.shape != (p.vocab.size + 1,) or int(p.indptr[0]) != 0 or int(p.indptr[-1]) != p.docs.size
            or p.tf.shape != p.docs.shape):
        raise ValueError("postings structure")
    return p, meta


def index_folder(name: str, fingerprint: str, base: Path | None = None) -> Path:
    """Where the index of the corpus ``name`` with ``fingerprint`` is saved."""
    return (base or cache_root() / "index") / f"{name}-{fingerprint}-{INDEX_VERSION}"


class _PostingsView:
    """What the index's readers used of the former bm25s object: ``scores`` (``indptr``, ``indices``,
    ``num_docs``) and ``vocab_dict``, over the memory-mapped postings."""

    def __init__(self, postings: Postings, vocab: TermVocab):
        self.scores: dict[str, Any] = {"indptr": postings.indptr, "indices": postings.docs,
                                       "num_docs": postings.n_docs}
        self.vocab_dict = vocab


@dataclass
class TextIndex:
    """BM25 over a corpus's title + abstract (see the module docstring).

    ``postings`` is the first part of the index (all of it for a corpus built in one go); ``segments`` are the
    parts appended since (:mod:`crase_core.store.segments`), each with document ids local to it, following in
    order. Every query method works over all parts with index-wide statistics (N, avgdl, df summed over the
    parts), so a segmented index scores exactly as one built in one go. ``vocab``/``retriever`` (the whole
    vocabulary and postings, for consumers that walk them) are merged in memory once when there are segments.
    """

    postings: Postings
    build_seconds: float = 0.0
    path: Path | None = None
    segments: tuple[Postings, ...] = ()
    _merged: Postings | None = field(default=None, init=False, repr=False)
    _vocab: TermVocab | None = field(default=None, init=False, repr=False)
    _part_vocabs: list[TermVocab] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        self._part_vocabs = [TermVocab(p.vocab) for p in (self.postings, *self.segments)]

    @property
    def parts(self) -> tuple[Postings, ...]:
        return (self.postings, *self.segments)

    def merged(self) -> Postings:
        """The whole index as one :class:`Postings` (the first part itself when there are no segments;
        else merged in memory once, ~6 B a posting)."""
        if not self.segments:
            return self.postings
        if self._merged is None:
            self._merged = merge_parts(self.parts)
        return self._merged

    @property
    def vocab(self) -> TermVocab:
        """stem → term id over the whole (merged) vocabulary."""
        if not self.segments:
            return self._part_vocabs[0]
        if self._vocab is None:
            self._vocab = TermVocab(self.merged().vocab)
        return self._vocab

    @property
    def retriever(self) -> _PostingsView:
        return _PostingsView(self.merged(), self.vocab)

    @property
    def n_docs(self) -> int:
        """N: the documents of every part."""
        return sum(p.n_docs for p in self.parts)

    @property
    def sum_doc_len(self) -> int:
        return sum(p.sum_doc_len for p in self.parts)

    @staticmethod
    def folder_for(corpus: Corpus, base: Path | None = None) -> Path:
        return index_folder(corpus.name, corpus.base_fingerprint or corpus.fingerprint, base)

    @classmethod
    def open(cls, path: Path) -> TextIndex:
        """The index saved at ``path`` (memory-mapped); ValueError/OSError when it is missing or damaged."""
        postings, _ = load_postings(path)
        return cls(postings, 0.0, path)

    @classmethod
    def for_corpus(cls, corpus: Corpus, directory: Path | None = None) -> TextIndex:
        """Open the corpus's index from disk, building and saving it first if needed.

        The new index is saved in a uniquely named temp folder and renamed into place, so
        concurrent first runs never share a temp folder (the first rename wins; the others open
        the winner's). A cache folder that cannot be written leaves the index in memory only.
        For a segmented corpus (:mod:`crase_core.store.segments`) this is the index of its first part plus the
        postings each segment holds (checked when the corpus was opened).
        """
        segments = tuple(load_postings(s / "postings")[0] for s in corpus.segments)
        n_first = len(corpus) - sum(s.n_docs for s in segments)
        base = directory or cache_root() / "index"
        path = cls.folder_for(corpus, base)
        if path.is_dir():
            try:
                index = cls.open(path)
                if index.postings.n_docs == n_first:
                    return cls(index.postings, 0.0, path, segments)
                raise ValueError("document count differs from the corpus")
            except (OSError, ValueError, KeyError, TypeError) as e:  # a damaged index is rebuilt, not fatal
                log.warning("index at %s unreadable (%s); rebuilding", path, e)
                remove_dir(path, "damaged")
        index = cls.build(corpus, n_first)
        try:
            publish(index.postings, path)
        except OSError as e:
            log.warning("could not save the BM25 index under %s (%s); using it from memory", base, e)
            return cls(index.postings, index.build_seconds, None, segments)
        return cls(index.postings, index.build_seconds, path if path.is_dir() else None, segments)

    @classmethod
    def build(cls, corpus: Corpus, n_docs: int | None = None) -> TextIndex:
        """The index of the corpus's first ``n_docs`` papers (default: all), tokenised here."""
        start = time.perf_counter()
        n = len(corpus) if n_docs is None else n_docs
        log.info("building the BM25 index for %s papers of %s", f"{n:,}", corpus.name)
        builder = PostingsBuilder()
        batch: list[tuple[str, str]] = []
        for i in range(n):
            p = corpus.papers[i]
            batch.append((p.title, p.abstract))
            if len(batch) >= 20_000:
                builder.add_texts(batch)
                batch = []
        builder.add_texts(batch)
        return cls(builder.finish(), time.perf_counter() - start)

    def _term_parts(self, term: str) -> list[tuple[int, int, int, int]]:
        """(part, offset of its first document, lo, hi) of every part holding ``term`` (its postings ``lo:hi``)."""
        out = []
        offset = 0
        for k, (p, v) in enumerate(zip(self.parts, self._part_vocabs, strict=True)):
            tid = v.lookup(term)
            if tid is not None:
                lo, hi = int(p.indptr[tid]), int(p.indptr[tid + 1])
                if hi > lo:
                    out.append((k, offset, lo, hi))
            offset += p.n_docs
        return out

    def term_id(self, term: str) -> int | None:
        """The stem's id in the (merged) vocabulary; None when no document holds it."""
        return self.vocab.lookup(term)

    def df(self, term: str) -> int:
        """How many documents hold ``term`` (0 when none)."""
        return sum(hi - lo for _, _, lo, hi in self._term_parts(term))

    def document_frequencies(self) -> dict[str, int]:
        """stem → df over the whole index (each part's vocabulary walked once; no postings are merged)."""
        out: dict[str, int] = {}
        for p, v in zip(self.parts, self._part_vocabs, strict=True):
            counts = np.diff(np.asarray(p.indptr)).tolist()
            for term, tid in v.items():
                out[term] = out.get(term, 0) + counts[tid]
        return out

    def postings_of(self, term: str) -> np.ndarray:
        """Ascending ids of the documents holding ``term`` (empty when unknown)."""
        found = self._term_parts(term)
        if not found:
            return np.zeros(0, dtype=np.int32)
        if len(found) == 1 and found[0][1] == 0:
            k, _, lo, hi = found[0]
            return np.asarray(self.parts[k].docs[lo:hi])
        return np.concatenate([np.asarray(self.parts[k].docs[lo:hi]) + np.int32(off) for k, off, lo, hi in found])

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (float32; zeros when no term is known)."""
        n = self.n_docs
        out = np.zeros(n, dtype=np.float32)
        found = [f for f in (self._term_parts(term) for term in content_terms(query)) if f]
        if not found or not n:
            return out
        avgdl = np.float64(self.sum_doc_len) / np.float64(n)  # == bm25s's np.mean of the lengths
        for parts in found:  # in query order, repeats included (as bm25s sums its score columns)
            df = sum(hi - lo for _, _, lo, hi in parts)
            idf = np.float64(np.float32(math.log(1 + (n - df + 0.5) / (df + 0.5))))
            for k, offset, lo, hi in parts:  # each part's documents are disjoint: every one gets its own term
                p = self.parts[k]
                docs = np.asarray(p.docs[lo:hi])
                tf = np.asarray(p.tf[lo:hi]).astype(np.float64)
                norm = K1 * ((1 - B) + B * np.asarray(p.doc_len[docs]).astype(np.float64) / avgdl)
                out[docs + offset if offset else docs] += (idf * (tf / (norm + tf))).astype(np.float32)
        return out

    def size_bytes(self) -> int:
        if not self.path:
            return 0
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())


def publish(postings: Postings, path: Path, extra: Mapping[str, Any] | None = None) -> bool:
    """Save ``postings`` at ``path`` atomically (temp folder + rename); True if this call's copy won."""
    tmp = temp_dir_beside(path)
    try:
        save_postings(postings, tmp, extra)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return publish_dir(tmp, path)
