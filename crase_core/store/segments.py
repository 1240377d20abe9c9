"""Appended segments of a corpus store, as Lucene appends segments to an index: an append writes only a
new, immutable segment folder; readers see the first store and its segments as one corpus; a merge folds
them into one store again.

**On disk.** A segment is one folder ``<name>-<fingerprint>-v3.seg`` beside the stores (format
:data:`SEGMENT_FORMAT`), published atomically (built in a temp folder, then renamed), holding only what
its batch adds:

* its papers' columns, as a store holds them (``ids``/``ids_sorted``/``id_order``, the text ``.bin`` files
  and their offsets, ``year``, ``month``), positions local to the segment;
* the citation edges the batch adds, in global positions, in both directions: ``ref_src``/``ref_dst``
  sorted by (citing, cited) and ``cite_dst``/``cite_src`` sorted by (cited, citing) — new → old, new →
  new, old → old from new citation lines, and old → new from earlier citation lines whose unknown id the
  batch brings (kept pending until then), none of them already in the corpus;
* ``pending_src``/``pending_dst``: its batch's lines with an id still unknown, and ``resolved``: the
  numbers (over all earlier parts' pending lines, in order) of the pending lines it turned into edges;
* ``postings/``: the text index of its papers (:mod:`crase_core.store.textindex` format, document ids local);
* ``meta.json``: its own fingerprint and its parent's, the first store's folder and the earlier segments'
  folders (the chain, oldest first), the global position of its first paper, the corpus-wide counts after
  it (papers, citations, citation lines, dropped edges), the byte ranges of the corpus files it appended
  with their SHA-256, and every file's dtype, shape, size and CRC-32.

No existing file is rewritten by an append, so a process that mapped the corpus before keeps reading it.

**Fingerprint.** The fingerprint after an append is chained: SHA-256 of the parent fingerprint and the
SHA-256 of the bytes appended to each corpus file (:func:`chain_fingerprint`) — it costs the batch, not
the corpus, and changes whenever the corpus grows, so every cache and stored run keyed by it misses. It is
remembered with the grown files' size/mtime/inode (``corpus_store.remember_fingerprint``); a process that
finds the files grown without that memo hashes them, finds no store for the content fingerprint and looks
for a chain whose recorded byte ranges re-hash to what it recorded (:func:`find_chain`); failing that it
builds a store from the files (correct, only slower).

**Reading.** :func:`open_chain` gives a :class:`~crase_core.store.corpus.Corpus` whose papers, id index,
months and graph (:class:`GraphUnion`) span the parts (global positions: the first store's, then each
segment's in order); :class:`~crase_core.store.textindex.TextIndex` searches all parts with index-wide BM25
statistics. Search results, scores, neighbours, the leakage filter and the corpus counts equal those of
a store built from the grown files (``tests/test_segments.py``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from crase_core import atomic
from crase_core.errors import CorpusError
from crase_core.records import Paper
from crase_core.store import corpus_store as cs
from crase_core.store.adjacency import CitationGraph
from crase_core.store.corpus import Corpus, fingerprint, hash_range
from crase_core.store.corpus_validation import ParseNotes, ValidationReport, direction_counts
from crase_core.store.npy_folder import map_npy, read_meta
from crase_core.store.sorted_keys import KeyLookup
from crase_core.store.textindex import PostingsBuilder, load_postings, save_merged_postings, save_postings

if TYPE_CHECKING:
    import scipy.sparse as sp

SEGMENT_FORMAT = "crase-corpus-segment"
SEGMENT_VERSION = 1
#: an append that leaves more segments than this merges them into one store (see :func:`needs_merge`)
MAX_SEGMENTS = 8
#: … as does one after which the segments hold more than this share of the papers
MAX_SEGMENT_SHARE = 0.25
_SEG_ARRAYS = ("ids", "ids_sorted", "id_order", "title_off", "abstract_off", "extra_off", "year", "month",
               "ref_src", "ref_dst", "cite_dst", "cite_src", "pending_src", "pending_dst", "resolved")


def segment_path(name: str, fingerprint: str, base: Path | None = None) -> Path:
    """Where the segment that brings the corpus ``name`` to ``fingerprint`` lives."""
    return cs.store_path(name, fingerprint, base).with_name(f"{name}-{fingerprint}-v{cs.VERSION}.seg")


def chain_fingerprint(parent: str, papers_sha256: str, citations_sha256: str) -> str:
    """The fingerprint of a corpus whose files, at ``parent``, grew by bytes with these SHA-256 digests."""
    return hashlib.sha256(f"crase-append|{parent}|{papers_sha256}|{citations_sha256}".encode()).hexdigest()[:16]


# ---- readers over the parts ----------------------------------------------------------------------------
class GraphUnion:
    """A citation graph direction (``refs`` or ``cites``) over a store's CSR matrix and the segments'
    extra edges: what consumers use of a scipy CSR matrix — rows, products with a vector, counts —
    without building one (an open costs nothing; a row costs one binary search per segment).

    ``parts`` are (rows, cols) int64 arrays sorted by (row, col), in global positions; ``n`` the corpus size.
    """

    def __init__(self, base: CitationGraph, n: int, parts: Sequence[tuple[np.ndarray, np.ndarray]]):
        self.base = base
        self.n_base = int(base.shape[0])
        self.shape = (n, n)
        self.parts = [(np.asarray(r), np.asarray(c)) for r, c in parts]
        self.nnz = int(base.nnz) + sum(int(r.size) for r, _ in self.parts)

    def row(self, i: int) -> np.ndarray:
        """Ascending columns of row ``i``."""
        pieces = []
        if i < self.n_base:
            pieces.append(np.asarray(self.base.row(i)))
        for rows, cols in self.parts:
            lo, hi = np.searchsorted(rows, [i, i + 1]).tolist()
            if hi > lo:
                pieces.append(cols[lo:hi])
        if len(pieces) == 1:
            return pieces[0]
        dtype = pieces[0].dtype if pieces else np.int32
        return np.sort(np.concatenate(pieces).astype(dtype)) if pieces else np.zeros(0, dtype=dtype)

    def row_lengths(self) -> np.ndarray:
        out = np.zeros(self.shape[0], dtype=np.int64)
        out[:self.n_base] = self.base.row_lengths()
        for rows, _ in self.parts:
            out += np.bincount(rows, minlength=self.shape[0])
        return out

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        """The matrix (every value 1) times the vector ``x``: per row, the sum of ``x`` over its columns
        (exact for the integer-valued vectors the pipeline multiplies, whatever the order of the sums)."""
        x = np.asarray(x)
        head = np.asarray(self.base @ x[:self.n_base])
        out = np.zeros(self.shape[0], dtype=head.dtype)
        out[:self.n_base] = head
        for rows, cols in self.parts:
            out += np.bincount(rows, weights=x[cols], minlength=self.shape[0]).astype(head.dtype)
        return out

    def columns_of(self, rows: np.ndarray) -> np.ndarray:
        """The columns of the distinct ``rows``, concatenated, once per given row that holds them (see
        :meth:`~crase_core.store.adjacency.Adjacency.columns_of`)."""
        rows = np.asarray(rows, dtype=np.int64)
        pieces = [self.base.columns_of(rows[rows < self.n_base])]
        for r, c in self.parts:
            pieces.append(c[np.isin(r, rows)])
        return np.concatenate(pieces).astype(np.int64, copy=False)

    def edges_within(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The edges with both ends in the ascending ``positions``, as (row, col) indexes into it."""
        positions = np.asarray(positions, dtype=np.int64)
        inside = positions[positions < self.n_base]
        sub_rows, sub_cols = self.base.edges_within(inside)
        rows, cols = [sub_rows], [sub_cols]
        for r, c in self.parts:
            keep = np.isin(r, positions) & np.isin(c, positions)
            rows.append(np.searchsorted(positions, r[keep]))
            cols.append(np.searchsorted(positions, c[keep]))
        return np.concatenate(rows), np.concatenate(cols)

    def tocsr(self) -> sp.csr_matrix:
        """The whole graph as one scipy matrix (O(edges); for checks and tools, not for queries)."""
        import scipy.sparse as sp

        coo = self.base.tocoo()
        rows = np.concatenate([coo.row.astype(np.int64), *(r for r, _ in self.parts)])
        cols = np.concatenate([coo.col.astype(np.int64), *(c for _, c in self.parts)])
        m = sp.csr_matrix((np.ones(rows.size, dtype=np.float32), (rows, cols)), shape=self.shape)
        m.sort_indices()
        return m

    def tocoo(self) -> sp.coo_matrix:
        return self.tocsr().tocoo()


class ChainedPapers(Sequence[Paper]):
    """The papers of every part, in global positions (each built from its part's mapped columns)."""

    def __init__(self, parts: Sequence[cs.StorePapers]):
        self.parts = list(parts)
        self.starts = np.cumsum([0, *(len(p) for p in self.parts)])

    def __len__(self) -> int:
        return int(self.starts[-1])

    def _locate(self, i: int) -> tuple[cs.StorePapers, int]:
        k = int(np.searchsorted(self.starts, i, side="right")) - 1
        return self.parts[k], i - int(self.starts[k])

    def id_of(self, i: int) -> str:
        part, j = self._locate(i)
        return part.id_of(j)

    def ids_of(self, positions: Sequence[int] | np.ndarray) -> list[str]:
        pos = np.asarray(positions, dtype=np.int64)
        out: list[str] = [""] * pos.size
        which = np.searchsorted(self.starts, pos, side="right") - 1
        for k, part in enumerate(self.parts):
            sel = np.flatnonzero(which == k)
            if sel.size:
                for j, pid in zip(sel.tolist(), part.ids_of(pos[sel] - self.starts[k]), strict=True):
                    out[j] = pid
        return out

    def texts(self, name: str) -> Iterator[str]:
        for part in self.parts:
            yield from part.texts(name)

    def containing(self, name: str, needle: bytes, window: int = 1 << 26) -> np.ndarray:
        return np.concatenate([part.containing(name, needle, window) + int(start)
                               for part, start in zip(self.parts, self.starts[:-1].tolist(), strict=True)])

    @overload
    def __getitem__(self, i: int) -> Paper: ...
    @overload
    def __getitem__(self, i: slice) -> list[Paper]: ...
    def __getitem__(self, i: int | slice) -> Paper | list[Paper]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        j = int(i) + n if int(i) < 0 else int(i)
        if not 0 <= j < n:
            raise IndexError(i)
        part, local = self._locate(j)
        return part[local]

    def __iter__(self) -> Iterator[Paper]:
        for part in self.parts:
            yield from part

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class ChainedIds(KeyLookup):
    """paper id → global position over every part's id index (an id is in one part at most)."""

    def __init__(self, parts: Sequence[cs.IdIndex], starts: Sequence[int]):
        self.parts = list(zip(parts, (int(s) for s in starts), strict=True))

    def lookup(self, key: str) -> int | None:
        for index, start in self.parts:
            i = index.lookup(key)
            if i is not None:
                return start + i
        return None

    def positions(self, keys: np.ndarray) -> np.ndarray:
        """Global int64 position of each key of the ``S`` array ``keys`` (−1 where it is no id), vectorised."""
        out = np.full(keys.size, -1, dtype=np.int64)
        for index, start in self.parts:
            local = index.positions(keys)
            found = (local >= 0) & (out < 0)
            out[found] = local[found] + start
        return out

    def __len__(self) -> int:
        return sum(len(index) for index, _ in self.parts)

    def __iter__(self) -> Iterator[str]:
        for index, _ in self.parts:
            yield from index


# ---- the chain on disk ---------------------------------------------------------------------------------
@dataclass
class Segment:
    path: Path
    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]

    @property
    def n(self) -> int:
        return int(self.meta["n_papers"])


@dataclass
class Chain:
    """A corpus's first store and its segments (none for a store without appends)."""

    base_path: Path
    base_meta: dict[str, Any]
    segments: list[Segment]

    @property
    def last_meta(self) -> dict[str, Any]:
        return self.segments[-1].meta if self.segments else self.base_meta

    def pending(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(src, dst, number) of the citation lines still pending, in file order; ``number`` counts every
        part's pending lines in order (what a segment's ``resolved`` refers to)."""
        srcs = [np.asarray(cs._map_one(self.base_path, "pending_src"))] + [s.arrays["pending_src"] for s in self.segments]
        dsts = [np.asarray(cs._map_one(self.base_path, "pending_dst"))] + [s.arrays["pending_dst"] for s in self.segments]
        total = sum(int(a.size) for a in srcs)
        alive = np.ones(total, dtype=bool)
        for s in self.segments:
            alive[s.arrays["resolved"]] = False
        src = _concat_all(srcs)
        dst = _concat_all(dsts)
        numbers = np.flatnonzero(alive)
        return src[numbers], dst[numbers], numbers


def _concat_all(arrays: Sequence[np.ndarray]) -> np.ndarray:
    width = max([a.dtype.itemsize for a in arrays] + [1])
    return np.concatenate([np.asarray(a).astype(f"S{width}") for a in arrays])


def _narrowest(a: np.ndarray) -> np.ndarray:
    """``a`` (``S``) in the width of its longest value (1 when empty), as a build writes it."""
    width = int(np.char.str_len(a).max()) if a.size else 1
    return np.asarray(a).astype(f"S{max(1, width)}")


def _map_segment(path: Path, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    files = meta.get("files")
    if not isinstance(files, dict) or not {f"{a}.npy" for a in _SEG_ARRAYS} | {f"{k}.bin" for k in cs._TEXT} <= set(files):
        raise ValueError(f"{path.name}: meta.json lists other files")
    out: dict[str, np.ndarray] = {}
    for fname, spec in files.items():
        if not (isinstance(spec, list) and len(spec) == 4):
            raise ValueError(f"{path.name}: meta.json: bad entry for {fname}")
        p = path / fname
        if fname.startswith("postings/"):
            if p.stat().st_size != spec[2]:
                raise ValueError(f"{path.name}/{fname} has {p.stat().st_size} bytes, meta.json says {spec[2]}")
            continue
        stem = fname.rsplit(".", 1)[0]
        if fname.endswith(".bin"):
            if p.stat().st_size != spec[2]:
                raise ValueError(f"{path.name}/{fname} has {p.stat().st_size} bytes, meta.json says {spec[2]}: "
                                 "truncated or replaced")
            out[stem] = (np.asarray(np.memmap(p, dtype=np.uint8, mode="r", shape=(spec[2],))) if spec[2]
                         else np.zeros(0, dtype=np.uint8))
        else:
            try:
                out[stem] = map_npy(p, spec[0], spec[1], spec[2])
            except ValueError as e:
                raise ValueError(f"{path.name}/{e}") from None
    n = meta.get("n_papers")
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"{path.name}: bad counts")
    for k in ("ids", "ids_sorted", "id_order", "year", "month"):
        if out[k].shape != (n,):
            raise ValueError(f"{path.name}: {k} has the wrong length")
    for k in cs._TEXT:
        off = out[f"{k}_off"]
        if off.shape != (n + 1,) or int(off[0]) != 0 or int(off[-1]) != out[k].size:
            raise ValueError(f"{path.name}: {k} offsets do not fit the text")
    for a, b in (("ref_src", "ref_dst"), ("cite_dst", "cite_src"), ("pending_src", "pending_dst")):
        if out[a].shape != out[b].shape:
            raise ValueError(f"{path.name}: {a}/{b} differ in length")
    postings, _ = load_postings(path / "postings")
    if postings.n_docs != n:
        raise ValueError(f"{path.name}: its postings hold another number of papers")
    return out


def load_chain(corpus: Corpus) -> Chain:
    """The parts of an opened store-backed corpus (mapped again: cheap)."""
    if corpus.store is None:
        raise ValueError("the corpus has no store")
    if not corpus.segments:
        return Chain(corpus.store, cs._load_meta(corpus.store), [])
    last = read_meta(corpus.segments[-1], SEGMENT_FORMAT, SEGMENT_VERSION, "a corpus segment")
    segs = []
    for path in corpus.segments:
        meta = read_meta(path, SEGMENT_FORMAT, SEGMENT_VERSION, "a corpus segment")
        segs.append(Segment(path, meta, _map_segment(path, meta)))
    base = corpus.store.parent / str(last["base"])
    return Chain(base, cs._load_meta(base), segs)


def open_chain(path: Path, fingerprint: str | None = None, name: str | None = None) -> Corpus:
    """The corpus whose last segment is ``path``: its first store and every segment of the chain, mapped.
    ValueError/OSError (saying what) when a part is missing, damaged, or does not continue the chain."""
    meta = read_meta(path, SEGMENT_FORMAT, SEGMENT_VERSION, "a corpus segment")
    if fingerprint is not None and meta.get("fingerprint") != fingerprint:
        raise ValueError("the segment is of another version of the corpus")
    chain = meta.get("chain")
    if not (isinstance(chain, list) and all(isinstance(c, str) and "/" not in c for c in chain)
            and isinstance(meta.get("base"), str) and "/" not in meta["base"]):
        raise ValueError(f"{path.name}: bad chain in meta.json")
    root = path.parent
    base_path = root / meta["base"]
    if not base_path.is_dir():
        raise ValueError(f"{path.name}: its first store {meta['base']} is missing")
    base = cs.open_store(base_path, str(meta.get("base_fingerprint")))
    segs: list[Segment] = []
    first, parent = len(base), base.fingerprint
    for seg_path in [*(root / c for c in chain), path]:
        if not seg_path.is_dir():
            raise ValueError(f"{path.name}: segment {seg_path.name} is missing")
        m = meta if seg_path == path else read_meta(seg_path, SEGMENT_FORMAT, SEGMENT_VERSION, "a corpus segment")
        if m.get("parent") != parent or m.get("first") != first or m.get("base") != meta["base"]:
            raise ValueError(f"{seg_path.name} does not continue the chain")
        segs.append(Segment(seg_path, m, _map_segment(seg_path, m)))
        first += int(m["n_papers"])
        parent = str(m["fingerprint"])
    n = first
    if meta.get("totals", {}).get("n_papers") != n:
        raise ValueError(f"{path.name}: the parts hold another number of papers")
    assert isinstance(base.index, cs.IdIndex) and isinstance(base.papers, cs.StorePapers)
    store_papers: list[cs.StorePapers] = [base.papers] + [
        cs.StorePapers(cs._Columns(s.arrays["ids"], {k: s.arrays[k] for k in cs._TEXT},
                                   {k: s.arrays[f"{k}_off"] for k in cs._TEXT}, s.arrays["year"], s.arrays["month"]))
        for s in segs]
    starts = [0, *np.cumsum([len(p) for p in store_papers])[:-1].tolist()]
    index = ChainedIds([base.index] + [cs.IdIndex(s.arrays["ids_sorted"], s.arrays["id_order"]) for s in segs],
                       starts)
    refs = GraphUnion(base.refs, n, [(s.arrays["ref_src"], s.arrays["ref_dst"]) for s in segs])
    cites = GraphUnion(base.cites, n, [(s.arrays["cite_dst"], s.arrays["cite_src"]) for s in segs])
    if refs.nnz != meta["totals"].get("n_refs"):
        raise ValueError(f"{path.name}: the parts hold another number of citations")
    months = np.concatenate([base.months, *(s.arrays["month"] for s in segs)])
    dropped = {str(k): int(v) for k, v in dict(meta.get("dropped_edges") or {}).items()}
    return Corpus(name=name or str(meta.get("name")), papers=ChainedPapers(store_papers), index=index, months=months,
                  refs=refs, cites=cites, fingerprint=str(meta["fingerprint"]), dropped_edges=dropped,
                  store=path, base_fingerprint=base.fingerprint, segments=tuple(s.path for s in segs),
                  validation=ValidationReport.from_dict(meta["validation"]) if isinstance(meta.get("validation"), dict)
                  else base.validation)


def verify_chain(path: Path) -> list[str]:
    """Deep check of a segmented corpus: its first store (:func:`corpus_store.verify`) and every segment's
    files (CRC-32) and structure; the problems found ([] = sound)."""
    try:
        corpus = open_chain(path)
    except (OSError, ValueError, KeyError, TypeError) as e:
        return [str(e)]
    chain = load_chain(corpus)
    problems = [f"{chain.base_path.name}: {p}" for p in cs.verify(chain.base_path)]
    n = len(corpus)
    for s in chain.segments:
        problems += [f"{s.path.name}/{f}: CRC-32 mismatch" for f, spec in s.meta["files"].items()
                     if cs._crc(s.path / f) != spec[3]]
        for a in ("ref_src", "ref_dst", "cite_dst", "cite_src"):
            v = np.asarray(s.arrays[a])
            if v.size and (int(v.min()) < 0 or int(v.max()) >= n):
                problems.append(f"{s.path.name}: {a} out of range")
        for r, c in (("ref_src", "ref_dst"), ("cite_dst", "cite_src")):
            keys = _edge_keys(s.arrays[r], s.arrays[c])
            if keys.size > 1 and not bool((keys[1:] > keys[:-1]).all()):
                problems.append(f"{s.path.name}: {r}/{c} not sorted")
        order = np.asarray(s.arrays["id_order"])
        if order.size and (np.any(np.sort(order) != np.arange(s.n))
                           or np.any(s.arrays["ids"][order] != s.arrays["ids_sorted"])):
            problems.append(f"{s.path.name}: ids_sorted/id_order do not match ids")
    return problems


def _edge_keys(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    return (np.asarray(rows, dtype=np.int64) << 32) | np.asarray(cols, dtype=np.int64)


# ---- appending: one new segment ------------------------------------------------------------------------
def _csr_has(indptr: np.ndarray, indices: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """For each (u, v): whether v is in row u of the CSR structure (columns ascending within a row):
    a vectorised binary search in every row at once."""
    if not u.size or not indices.size:
        return np.zeros(u.size, dtype=bool)
    lo = np.asarray(indptr[u], dtype=np.int64)
    end = np.asarray(indptr[u + 1], dtype=np.int64)
    hi = end.copy()
    last = indices.size - 1
    while True:
        active = lo < hi
        if not active.any():
            break
        mid = (lo + hi) // 2
        right = active & (np.asarray(indices[np.minimum(mid, last)]) < v)
        lo = np.where(right, mid + 1, lo)
        hi = np.where(active & ~right, mid, hi)
    return (lo < end) & (np.asarray(indices[np.minimum(lo, last)]) == v)


@dataclass
class Appended:
    """What :func:`write_segment` added."""

    papers: int
    citations: int
    total_papers: int
    #: the batch's citation lines with an unknown id that are not pending already
    pending: int = 0

    @property
    def adds_nothing(self) -> bool:
        """No paper, no citation and no new pending line: appending the batch would change nothing."""
        return not (self.papers or self.citations or self.pending)


#: parse notes of batch records an append does not write to the corpus files.
_NOT_WRITTEN = frozenset({"duplicate_ids", "missing_ids"})


def _grown_validation(corpus: Corpus, chain: Chain, sink: Any, new_years: np.ndarray, u: np.ndarray, v: np.ndarray,
                      n: int, n_refs: int, dropped: dict[str, int], edges: Any, loops: int,
                      resolved: int) -> ValidationReport:
    """The validation report a build of the grown files gives (its examples aside: they name lines of the
    batch's own file): the corpus's report plus the batch's parse notes, its citation lines and the direction
    of the edges it adds (``u`` → ``v``, global positions)."""
    report = ValidationReport.from_dict(corpus.validation.to_dict())
    # the grown papers file holds the batch's new papers only: records without an id and ids the corpus (or an
    # earlier line) has are not written (corpus_folder._new_paper_text), so a build of the files never reads them
    written = ParseNotes({r: n for r, n in sink.notes.counts.items() if r not in _NOT_WRITTEN},
                         {r: ex for r, ex in sink.notes.examples.items() if r not in _NOT_WRITTEN})
    report.add_notes(written)
    report.papers_read += len(sink.index)
    report.papers_kept = n
    report.citation_lines += edges.rows.size + edges.self_loops + len(edges.pending_src) + edges.malformed
    report.citations_kept = n_refs
    report.dropped_edges = dict(dropped)
    years = np.concatenate([np.asarray(cs._map_one(chain.base_path, "year")),
                            *(s.arrays["year"] for s in chain.segments), new_years])
    a, b = direction_counts(u.astype(np.int64), v.astype(np.int64), years, cs.NO_YEAR)
    report.newer_to_older += a
    report.older_to_newer += b
    return report


def write_segment(corpus: Corpus, chunks: Sequence[cs._Chunk], new_citations: Path | None, fingerprint: str,
                  target: Path, source: Mapping[str, list[Any]]) -> Appended:
    """:func:`build_segment`, published at ``target`` (atomic rename)."""
    tmp, added = build_segment(corpus, chunks, new_citations, fingerprint, target, source)
    atomic.publish_dir(tmp, target)
    return added


@dataclass(frozen=True)
class _NewEdges:
    """What a batch adds to the graph: the edge keys (``u << 32 | v``) not there yet, and the pending lines."""

    keys: np.ndarray  # sorted, unique, none already in the chain
    resolved: np.ndarray  # line numbers of earlier pending lines that now resolve
    self_loops: int  # earlier pending lines that resolve to a self-loop
    lines: int  # valid citation lines the batch adds (before deduplication)
    pending_src: np.ndarray  # the chain's pending lines before the batch
    pending_dst: np.ndarray


def _new_edges(chain: Chain, ids: ChainedIds, new_sorted_ids: np.ndarray, edges: cs._Edges, n_old: int,
               n_new: int) -> _NewEdges:
    """The edges of ``edges`` (the batch's citation lines) and of the chain's pending lines that name a new id
    (they may now have both ends: an edge, or a self-loop), less those already in the base or a segment."""
    psrc, pdst, pnum = chain.pending()
    touched = np.zeros(psrc.size, dtype=bool)
    if psrc.size and n_new:
        touched = np.isin(psrc, new_sorted_ids) | np.isin(pdst, new_sorted_ids)
    tu, tv = ids.positions(psrc[touched]), ids.positions(pdst[touched])
    ok = (tu >= 0) & (tv >= 0)
    resolved = pnum[touched][ok]
    loops = ok & (tu == tv)
    rows = np.concatenate([tu[ok & ~loops], edges.rows])
    cols = np.concatenate([tv[ok & ~loops], edges.cols])
    keys = np.unique(_edge_keys(rows, cols))
    u, v = keys >> 32, keys & 0xFFFFFFFF
    old = (u < n_old) & (v < n_old)  # only an edge between two old papers can be there already
    there = np.zeros(keys.size, dtype=bool)
    n_base = n_old - sum(s.n for s in chain.segments)
    in_base = old & (u < n_base) & (v < n_base)
    if in_base.any():
        there[in_base] = _csr_has(cs._map_one(chain.base_path, "refs_indptr"),
                                  cs._map_one(chain.base_path, "refs_indices"), u[in_base], v[in_base])
    for s in chain.segments:
        seg_keys = _edge_keys(s.arrays["ref_src"], s.arrays["ref_dst"])
        if seg_keys.size and old.any():
            at = np.minimum(np.searchsorted(seg_keys, keys[old]), seg_keys.size - 1)
            there[old] |= seg_keys[at] == keys[old]
    return _NewEdges(keys[~there], resolved, int(loops.sum()), int(rows.size), psrc, pdst)


def build_segment(corpus: Corpus, chunks: Sequence[cs._Chunk], new_citations: Path | None, fingerprint: str,
                  target: Path, source: Mapping[str, list[Any]]) -> tuple[Path, Appended]:
    """Build, in a temp folder beside ``target`` (returned, not yet published: the caller renames it to
    ``target``), the segment that adds to ``corpus`` (store-backed, with or without segments) the
    parsed papers ``chunks`` and the citation lines of ``new_citations``: equal, by positions, edges,
    pending lines and counts, to a build of the corpus files followed by these lines. ``source``: the
    byte ranges and SHA-256 the append wrote to each corpus file (kept in ``meta.json``). Cost: the batch,
    plus binary searches in the mapped sorted ids and graph, plus one vectorised pass over the still
    pending citation lines; no existing file is read whole or written."""
    chain = load_chain(corpus)
    n_old = len(corpus)
    old_parts = [cs.IdIndex(cs._map_one(chain.base_path, "ids_sorted"), cs._map_one(chain.base_path, "id_order"))]
    old_parts += [cs.IdIndex(s.arrays["ids_sorted"], s.arrays["id_order"]) for s in chain.segments]
    old_starts = [0, *(int(s.meta["first"]) for s in chain.segments)]
    old_ids = ChainedIds(old_parts, old_starts)
    batch_ids = cs.s_array([pid for c in chunks for pid in c.ids])
    known = {pid for pid, pos in zip(batch_ids.tolist(), old_ids.positions(batch_ids).tolist(), strict=True) if pos >= 0}
    known_ids = {b.decode("utf-8", "surrogatepass") for b in known}
    tmp = atomic.temp_dir_beside(target)
    try:
        sink = cs._PaperSink(tmp, known_ids.__contains__, PostingsBuilder())
        try:
            for chunk in chunks:
                sink.add(chunk)
        finally:
            sink.close()
        n_new = len(sink.index)
        n = n_old + n_new
        id_arrays = cs._id_arrays(cs.s_array(list(sink.index)))
        ids = ChainedIds([*old_parts, cs.IdIndex(id_arrays["ids_sorted"], id_arrays["id_order"])], [*old_starts, n_old])
        if new_citations is not None:
            edges = cs._read_citations(new_citations, ids.get, ids)
        else:
            edges = cs._Edges(cs._cat64([]), cs._cat64([]), [], [])
        new = _new_edges(chain, ids, id_arrays["ids_sorted"], edges, n_old, n_new)
        psrc, pdst, resolved, keys = new.pending_src, new.pending_dst, new.resolved, new.keys
        n_loops, n_lines = new.self_loops, new.lines
        u, v = keys >> 32, keys & 0xFFFFFFFF
        rev = np.sort(_edge_keys(v, u))
        last = chain.last_meta
        totals_before = last.get("totals") or {"n_refs": int(last["n_refs"]),
                                                "valid_lines": int(last.get("valid_lines", last["n_refs"]))}
        valid_lines = int(totals_before["valid_lines"]) + n_lines
        n_refs = int(totals_before["n_refs"]) + int(keys.size)
        d = {str(k): int(val) for k, val in dict(last.get("dropped_edges") or {}).items()}
        pending_left = int(psrc.size) - int(resolved.size) + len(edges.pending_src)
        dropped = {"self_loops": d.get("self_loops", 0) + edges.self_loops + n_loops,
                   "unknown_ids": pending_left, "duplicates": valid_lines - n_refs,
                   "malformed": d.get("malformed", 0) + edges.malformed}
        arrays = {**id_arrays, "year": np.frombuffer(sink.year, dtype=np.int32),
                  "month": np.frombuffer(sink.month, dtype=np.int32),
                  **{f"{k}_off": np.frombuffer(sink.offsets[k], dtype=np.int64) for k in cs._TEXT},
                  "ref_src": u, "ref_dst": v, "cite_dst": rev >> 32, "cite_src": rev & 0xFFFFFFFF,
                  "pending_src": cs.s_array(edges.pending_src), "pending_dst": cs.s_array(edges.pending_dst),
                  "resolved": resolved.astype(np.int64)}
        validation = _grown_validation(corpus, chain, sink, arrays["year"], u, v, n, n_refs, dropped,
                                       edges, n_loops, int(resolved.size))
        assert isinstance(sink.postings, PostingsBuilder)
        save_postings(sink.postings.finish(), tmp / "postings")
        base_name = chain.base_path.name
        header = {"name": corpus.name, "fingerprint": fingerprint, "parent": corpus.fingerprint,
                  "base": base_name, "base_fingerprint": str(chain.base_meta["fingerprint"]),
                  "chain": [s.path.name for s in chain.segments], "first": n_old, "n_papers": n_new,
                  "totals": {"n_papers": n, "n_refs": n_refs, "valid_lines": valid_lines},
                  "dropped_edges": dropped, "source": dict(source), "validation": validation.to_dict()}
        _write_meta(tmp, arrays, header)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    new_pending = len(edges.pending_src)
    if new_pending and not n_new and not keys.size:  # only then does it decide whether anything is added
        known_pending = set(zip(psrc.tolist(), pdst.tolist(), strict=True))
        new_pending = len({(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))
                           for a, b in zip(edges.pending_src, edges.pending_dst, strict=True)} - known_pending)
    return tmp, Appended(n_new, int(keys.size), n, new_pending)


def _write_meta(folder: Path, arrays: Mapping[str, np.ndarray], header: dict[str, Any]) -> None:
    files: dict[str, list[Any]] = {}
    for name, a in arrays.items():
        p = folder / f"{name}.npy"
        np.save(p, np.ascontiguousarray(a), allow_pickle=False)
        files[p.name] = [a.dtype.str, list(a.shape), p.stat().st_size, cs._crc(p)]
    for k in cs._TEXT:
        p = folder / f"{k}.bin"
        files[p.name] = ["|u1", [p.stat().st_size], p.stat().st_size, cs._crc(p)]
    for p in sorted((folder / "postings").iterdir()):
        files[f"postings/{p.name}"] = ["", [], p.stat().st_size, cs._crc(p)]
    meta = {"format": SEGMENT_FORMAT, "version": SEGMENT_VERSION, **header, "files": files}
    (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")


def needs_merge(corpus: Corpus) -> bool:
    """Whether the merge policy folds the corpus's segments into one store now: more than
    :data:`MAX_SEGMENTS` segments, or segments holding more than :data:`MAX_SEGMENT_SHARE` of the papers
    (so the merges' cost, O(corpus) each, stays a constant share of the appends', amortised)."""
    if not corpus.segments:
        return False
    chain = load_chain(corpus)
    in_segments = sum(s.n for s in chain.segments)
    return len(chain.segments) > MAX_SEGMENTS or in_segments > MAX_SEGMENT_SHARE * len(corpus)


# ---- merging: one store again --------------------------------------------------------------------------
def merge(corpus: Corpus, target: Path, index_target: Path) -> Path:
    """Fold the first store and every segment of ``corpus`` into one store at ``target`` (same
    fingerprint) and its text index at ``index_target``: the same arrays, text and postings as a build of
    the corpus files (only ``meta.json``'s fingerprint may differ: the chained one is kept, so nothing
    keyed by it is invalidated). Cost: one pass over the store (memory speed), no parsing; memory: the
    edge keys (8 B a citation, a few copies) and one block of postings (written as they are merged)."""
    from crase_core.store.textindex import TextIndex

    chain = load_chain(corpus)
    n = len(corpus)
    base = chain.base_path
    tmp = atomic.temp_dir_beside(target)
    try:
        parts_text = [base, *(s.path for s in chain.segments)]
        for k in cs._TEXT:
            with open(tmp / f"{k}.bin", "wb") as out:
                for p in parts_text:
                    with open(p / f"{k}.bin", "rb") as f:
                        shutil.copyfileobj(f, out, 1 << 22)
        base_ids = np.asarray(cs._map_one(base, "ids"))
        ids = _concat_all([base_ids, *(s.arrays["ids"] for s in chain.segments)])
        offsets = {}
        for k in cs._TEXT:
            pieces = [np.asarray(cs._map_one(base, f"{k}_off"))]
            for s in chain.segments:
                pieces.append(np.asarray(s.arrays[f"{k}_off"][1:]) + pieces[-1][-1])
            offsets[f"{k}_off"] = np.concatenate(pieces)
        old_keys = cs._keys(cs._map_one(base, "refs_indptr"), cs._map_one(base, "refs_indices"), n)
        added = np.sort(np.concatenate([np.asarray(s.arrays["ref_src"]) * n + np.asarray(s.arrays["ref_dst"])
                                        for s in chain.segments]))
        keys = np.insert(old_keys, np.searchsorted(old_keys, added), added) if old_keys.size else added
        del old_keys, added
        psrc, pdst, _ = chain.pending()
        last = chain.last_meta
        arrays = {**cs._id_arrays(ids),
                  "year": np.concatenate([np.asarray(cs._map_one(base, "year")), *(s.arrays["year"] for s in chain.segments)]),
                  "month": np.asarray(corpus.months), **offsets, **cs._graph_arrays(keys, n),
                  "pending_src": _narrowest(psrc), "pending_dst": _narrowest(pdst)}
        cs._finish(tmp, arrays, {"name": corpus.name, "fingerprint": corpus.fingerprint, "n_papers": n,
                                 "n_refs": int(keys.size), "valid_lines": int(last["totals"]["valid_lines"]),
                                 "dropped_edges": dict(corpus.dropped_edges),
                                 "validation": corpus.validation.to_dict()},
                   text_prefix_crc={k: tuple(chain.base_meta["files"][f"{k}.bin"][2:4]) for k in cs._TEXT})
        del arrays, keys
        index = TextIndex.for_corpus(corpus)
        itmp = atomic.temp_dir_beside(index_target)
        try:
            save_merged_postings(index.parts, itmp, first_folder=index.path)
        except BaseException:
            shutil.rmtree(itmp, ignore_errors=True)
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    atomic.publish_dir(tmp, target)
    if index_target.is_dir():
        shutil.rmtree(itmp, ignore_errors=True)
    else:
        atomic.publish_dir(itmp, index_target)
    return target


# ---- finding a chain without the fingerprint memo ------------------------------------------------------
def _sha256_range(path: Path, start: int, end: int) -> str:
    h = hashlib.sha256()
    hash_range(h, path, start, end)
    return h.hexdigest()


def find_chain(folder: Path, paths: Sequence[Path], content_fingerprint: str) -> tuple[str, Path] | None:
    """The segmented store of the corpus files ``paths`` when the fingerprint memo is gone (their content
    fingerprint names no store): a segment of this corpus whose recorded byte ranges end at the files'
    sizes and, with every earlier segment's, re-hash to what they recorded, on a first store whose
    fingerprint is the hash of the files' bytes before the first append. (its chained fingerprint, its
    folder), or None (the caller builds a store). Reads the files once when a candidate fits their sizes."""
    root = segment_path(folder.name, content_fingerprint).parent
    if not root.is_dir():
        return None
    sizes = [p.stat().st_size for p in paths]
    prefix, suffix = f"{folder.name}-", f"-v{cs.VERSION}.seg"
    for cand in sorted(root.iterdir()):
        if not (cand.name.startswith(prefix) and cand.name.endswith(suffix) and cand.is_dir()):
            continue
        try:
            meta = read_meta(cand, SEGMENT_FORMAT, SEGMENT_VERSION, "a corpus segment")
            if [meta["source"]["papers"][1], meta["source"]["citations"][1]] != sizes:
                continue
            metas = [read_meta(root / c, SEGMENT_FORMAT, SEGMENT_VERSION, "a corpus segment") for c in meta["chain"]]
            metas.append(meta)
            first = metas[0]["source"]
            parent = fingerprint(paths, (first["papers"][0], first["citations"][0]))
            if parent != meta["base_fingerprint"]:
                continue
            for m in metas:
                digests = [_sha256_range(p, int(m["source"][k][0]), int(m["source"][k][1]))
                           for p, k in zip(paths, ("papers", "citations"), strict=True)]
                if digests != [m["source"]["papers"][2], m["source"]["citations"][2]] or m["parent"] != parent:
                    break
                parent = chain_fingerprint(parent, *digests)
                if parent != m["fingerprint"]:
                    break
            else:
                return parent, cand
        except (OSError, CorpusError, ValueError, KeyError, TypeError, IndexError):
            continue
    return None
