"""The corpus on disk in a form that is memory-mapped, not parsed: open in milliseconds, grow by appending.

A store is one folder (format :data:`FORMAT`, version :data:`VERSION`), published atomically (built in
a uniquely named temp folder, then renamed), named by the corpus name and fingerprint:

* ``meta.json`` — format, version, name, fingerprint, counts, dropped-edge counts, and for every file
  below its dtype, shape, byte size and CRC-32;
* ``ids.npy`` (``S<w>``, UTF-8 paper ids by position), ``ids_sorted.npy`` + ``id_order.npy`` (the ids
  sorted, and their positions: an id is found by binary search, no dict is built at open);
* ``title.bin``/``abstract.bin``/``extra.bin`` (UTF-8 text of every paper, concatenated) with
  ``title_off.npy``… (int64 offsets, n + 1); ``extra`` is a JSON list [authors, venue, url, external ids];
* ``year.npy``, ``month.npy`` (int32; year −2³¹ = unknown);
* ``refs_indptr.npy``/``refs_indices.npy`` (citing → cited) and ``cites_indptr.npy``/``cites_indices.npy``
  (cited → citing): the CSR structure of the graph in both directions (every value is 1);
* ``pending_src.npy``/``pending_dst.npy``: citation lines with an id not (yet) in the corpus, kept so that
  an append that adds that id gives the edge a full rebuild would give.

:func:`open_store` checks the format, version, fingerprint, every file's size, dtype and shape, and
the ends of every CSR pointer array (O(1) per file; no byte of the data is read). A truncated, foreign
or stale store is reported (warning) and rebuilt by the caller. :func:`verify` also checks every
file's CRC-32 and the structure of every array (``crase corpus check``). Nothing in a store can run
code: ``.npy`` files are read with ``allow_pickle=False``, the rest is JSON and raw UTF-8.

The text index of the corpus (:mod:`crase_core.store.textindex`) is built in the same pass over the papers.

A corpus grows by appended segments (:mod:`crase_core.store.segments`): a store is never rewritten by an append;
:mod:`crase_core.store.corpus_folder` finds, builds, grows and merges a corpus folder's store and segments.
"""

from __future__ import annotations

import array
import collections
import contextlib
import contextvars
import hashlib
import json
import logging
import re
import shutil
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, overload

import numpy as np

from crase_core import atomic
from crase_core.cache import cache_root
from crase_core.errors import CorpusError, CraseError
from crase_core.records import Paper
from crase_core.store.adjacency import Adjacency
from crase_core.store.corpus import (
    NO_YEAR,
    UNDATED_MONTH,
    Corpus,
    decode_line,
    find_file,
    fingerprint,
    line_blocks,
    parse_paper_line,
)
from crase_core.store.corpus_validation import ParseNotes, ValidationReport, direction_counts
from crase_core.store.npy_folder import map_npy, read_meta
from crase_core.store.sorted_keys import SortedKeys, find_sorted
from crase_core.store.textindex import DocTerms, PostingsBuilder, PostingsWriter

if TYPE_CHECKING:
    from concurrent.futures import Future

log = logging.getLogger(__name__)

FORMAT = "crase-corpus-store"
VERSION = 4  # 4: the validation report in meta.json; years and months by corpus.paper_month's rules
_NO_YEAR = NO_YEAR
_TEXT = ("title", "abstract", "extra")
_ARRAYS = ("ids", "ids_sorted", "id_order", "title_off", "abstract_off", "extra_off", "year", "month",
           "refs_indptr", "refs_indices", "cites_indptr", "cites_indices", "pending_src", "pending_dst")
_CHUNK_BYTES = 1 << 22  # a block of papers.jsonl parsed by one worker at a time (~6,000 papers of 700 B)
Progress = Callable[[str], None]


def _no_progress(_: str) -> None:
    pass


@dataclass(frozen=True)
class BuildStep:
    """One progress report of a corpus build, for a progress bar: ``stage`` is ``parse``, ``citations``,
    ``store``, ``index`` or ``done``; ``fraction`` (0–1) of the whole build is done (estimated from the
    bytes of ``papers.jsonl`` parsed: parsing is ~70 % of a build); ``message`` is a line for people."""

    stage: str
    fraction: float
    message: str


StepHook = Callable[[BuildStep], None]
_STEP_HOOK: contextvars.ContextVar[StepHook | None] = contextvars.ContextVar("crase_build_steps", default=None)


def current_hook() -> StepHook | None:
    """The hook installed by the innermost :func:`reporting` block, if any."""
    return _STEP_HOOK.get()


@contextlib.contextmanager
def reporting(hook: StepHook | None) -> Iterator[None]:
    """Within the block, every store build (:func:`build`, also when ``corpus_folder.open_or_build`` or a first query
    builds one) reports :class:`BuildStep` s to ``hook`` (called in the building thread; an exception it
    raises is ignored)."""
    token = _STEP_HOOK.set(hook)
    try:
        yield
    finally:
        _STEP_HOOK.reset(token)


# ---- lazy views over the mapped columns ----------------------------------------------------------------
class IdIndex(SortedKeys):
    """paper id → position, by binary search over the sorted ids (memory-mapped)."""

    _CACHED = 200_000  # lookups remembered (a query asks for the same few thousand ids again and again)

    def __init__(self, ids_sorted: np.ndarray, order: np.ndarray):
        super().__init__(ids_sorted)
        self._order = order
        self._seen: dict[str, int | None] = {}

    def lookup(self, key: str) -> int | None:
        try:
            return self._seen[key]
        except KeyError:
            pass
        j = find_sorted(self.keys_array, key)
        pos = None if j is None else int(self._order[j:j + 1].tolist()[0])
        if len(self._seen) >= self._CACHED:
            self._seen.clear()
        self._seen[key] = pos
        return pos

    def positions(self, keys: np.ndarray) -> np.ndarray:
        """int64 position of each key of the ``S`` array ``keys`` (−1 where it is no id): one vectorised
        binary search, nothing built over the whole index."""
        ids, out = self.keys_array, np.full(keys.size, -1, dtype=np.int64)
        if not keys.size or not ids.size:
            return out
        w = ids.dtype.itemsize
        k = keys if keys.dtype.itemsize == w else keys.astype(f"S{w}")  # a longer key never matches (below)
        j = np.minimum(np.searchsorted(ids, k), ids.size - 1)
        found = (ids[j] == k) & (np.char.str_len(keys) <= w)
        out[found] = np.asarray(self._order)[j[found]]
        return out


@dataclass
class _Columns:
    ids: np.ndarray
    text: dict[str, np.ndarray]  # name → uint8 blob
    offsets: dict[str, np.ndarray]
    year: np.ndarray
    month: np.ndarray

    def text_of(self, name: str, i: int) -> str:
        lo, hi = self.offsets[name][i:i + 2].tolist()
        return self.text[name][lo:hi].tobytes().decode("utf-8", "surrogatepass")


class StorePapers(Sequence[Paper]):
    """The corpus's papers, each built from the mapped columns when it is asked for."""

    _CACHED = 50_000  # papers kept once built (a query touches a few thousand, again and again)

    def __init__(self, columns: _Columns):
        self._c = columns
        self._cache: dict[int, Paper] = {}

    def __len__(self) -> int:
        return int(self._c.ids.size)

    def id_of(self, i: int) -> str:
        """The id of paper ``i`` (without building the paper)."""
        return bytes(self._c.ids[i]).decode("utf-8", "surrogatepass")

    def ids_of(self, positions: Sequence[int] | np.ndarray) -> list[str]:
        """The ids of the papers at ``positions``, in order (without building the papers)."""
        return [b.decode("utf-8", "surrogatepass") for b in self._c.ids[np.asarray(positions, dtype=np.int64)].tolist()]

    def texts(self, name: str) -> Iterator[str]:
        """Every paper's ``title``/``abstract`` text in order, read from the mapped column (no Paper is built)."""
        off, blob = self._c.offsets[name], self._c.text[name]
        step = 65_536
        for lo in range(0, len(self), step):
            ends = off[lo:lo + step + 1].tolist()
            data = blob[ends[0]:ends[-1]].tobytes()
            base = ends[0]
            for a, b in zip(ends[:-1], ends[1:], strict=True):
                yield data[a - base:b - base].decode("utf-8", "surrogatepass")

    def containing(self, name: str, needle: bytes, window: int = 1 << 26) -> np.ndarray:
        """Ascending positions of the papers whose ``name`` column (UTF-8) holds ``needle`` (ASCII letters
        compared case-insensitively): a scan of one mapped column, no Paper built."""
        off, blob = self._c.offsets[name], self._c.text[name]
        pattern = re.compile(re.escape(needle), re.IGNORECASE)
        hits: list[int] = []
        step = max(1, window)
        total = int(off[-1]) if off.size else 0
        for lo in range(0, total, step):  # overlapping windows, so a match across a boundary is seen
            data = blob[lo:min(total, lo + step + len(needle))].tobytes()
            hits.extend(lo + m.start() for m in pattern.finditer(data) if m.start() < step)
        if not hits:
            return np.zeros(0, dtype=np.int64)
        return np.unique(np.searchsorted(off, np.array(hits, dtype=np.int64), side="right") - 1)

    def _paper(self, i: int) -> Paper:
        p = self._cache.get(i)
        if p is None:
            if len(self._cache) >= self._CACHED:
                self._cache.clear()
            p = self._cache[i] = self._build(i)
        return p

    def _build(self, i: int) -> Paper:
        c = self._c
        authors, venue, url, external = json.loads(c.text_of("extra", i))
        year, month = int(c.year[i]), int(c.month[i])
        return Paper(id=bytes(c.ids[i]).decode("utf-8", "surrogatepass"), title=c.text_of("title", i),
                     abstract=c.text_of("abstract", i), year=None if year == _NO_YEAR else year,
                     month=None if month >= UNDATED_MONTH else month, authors=tuple(authors), venue=venue, url=url,
                     external_ids=tuple((str(k), str(v)) for k, v in external))

    @overload
    def __getitem__(self, i: int) -> Paper: ...
    @overload
    def __getitem__(self, i: slice) -> list[Paper]: ...
    def __getitem__(self, i: int | slice) -> Paper | list[Paper]:
        if isinstance(i, slice):
            return [self._paper(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        j = int(i) + n if int(i) < 0 else int(i)
        if not 0 <= j < n:
            raise IndexError(i)
        return self._paper(j)

    def __iter__(self) -> Iterator[Paper]:
        for j in range(len(self)):
            yield self._paper(j)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


# ---- where stores live ---------------------------------------------------------------------------------
def store_path(name: str, fingerprint: str, base: Path | None = None) -> Path:
    return (base or cache_root() / "corpus") / f"{name}-{fingerprint}-v{VERSION}"


def _memo_path(folder: Path) -> Path:
    key = hashlib.sha256(str(folder.resolve()).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return cache_root() / "sources" / f"{folder.name}-{key}.json"


def _stat_key(paths: Sequence[Path]) -> list[list[Any]]:
    out: list[list[Any]] = []
    for p in paths:
        st = p.stat()
        out.append([str(p.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
    return out


def source_fingerprint(folder: Path, paths: Sequence[Path]) -> str:
    """The corpus fingerprint (:func:`crase_core.store.corpus.fingerprint`, SHA-256 of the files' bytes).

    Hashing reads every byte (about a second per GB), so the result is remembered under the cache
    folder together with the files' size, mtime, ctime and inode: an unchanged file is not read again.
    """
    memo = _memo_path(folder)
    try:
        key = _stat_key(paths)
        saved = json.loads(memo.read_text(encoding="utf-8"))
        if isinstance(saved, dict) and saved.get("files") == key and isinstance(saved.get("fingerprint"), str):
            return str(saved["fingerprint"])
    except (OSError, ValueError, UnicodeDecodeError):
        pass
    fp = fingerprint(list(paths))
    remember_fingerprint(folder, paths, fp)
    return fp


def remember_fingerprint(folder: Path, paths: Sequence[Path], fp: str) -> None:
    with contextlib.suppress(OSError, CraseError, ValueError):  # an unwritable cache only costs a re-hash
        atomic.write_text(_memo_path(folder), json.dumps({"files": _stat_key(paths), "fingerprint": fp}))


# ---- parsing, in worker processes ----------------------------------------------------------------------
@dataclass
class _Chunk:
    """The papers of a block of ``papers.jsonl`` lines, column-wise (text as UTF-8 bytes, concatenated),
    with their postings (:class:`DocTerms`, document ids local to the chunk)."""

    ids: list[str]
    text: dict[str, bytes]
    lens: dict[str, np.ndarray]  # int64 byte length of each paper's text, per field
    year: np.ndarray  # int32
    month: np.ndarray  # int32
    terms: DocTerms
    n_bytes: int  # bytes of the file this chunk covers (for progress)
    wheres: list[str] = field(default_factory=list)  # each paper's "file:line"
    notes: ParseNotes = field(default_factory=ParseNotes)  # what parsing found (validation report)
    n_records: int = 0  # non-blank lines


def _parse_chunk(job: tuple[str, int, bytes]) -> _Chunk:
    path_s, first, data = job
    path = Path(path_s)
    ids: list[str] = []
    text: dict[str, list[bytes]] = {k: [] for k in _TEXT}
    years: list[int] = []
    months: list[int] = []
    docs: list[tuple[str, str]] = []
    wheres: list[str] = []
    notes = ParseNotes()
    records = 0
    lines = data.split(b"\n")
    last = len(lines) - 1
    for k, raw in enumerate(lines):
        if not raw.strip():
            continue
        records += 1
        line = decode_line(raw, path, first + k)  # with its newline, as read_lines gives it (JSON errors say so)
        p = parse_paper_line(line + "\n" if k < last else line, path, first + k, notes)
        if p is None:
            continue
        wheres.append(f"{path.name}:{first + k}")
        if "\x00" in p.id:
            raise CorpusError(f"{path}:{first + k}: the paper id holds a NUL character")
        ids.append(p.id)
        text["title"].append(p.title.encode("utf-8", "surrogatepass"))
        text["abstract"].append(p.abstract.encode("utf-8", "surrogatepass"))
        text["extra"].append(json.dumps([list(p.authors), p.venue, p.url, [list(e) for e in p.external_ids]],
                                        ensure_ascii=False).encode("utf-8", "surrogatepass"))
        years.append(_NO_YEAR if p.year is None else p.year)
        months.append(p.month or UNDATED_MONTH)
        docs.append((p.title, p.abstract))
    return _Chunk(ids, {k: b"".join(v) for k, v in text.items()},
                  {k: np.fromiter(map(len, v), dtype=np.int64, count=len(v)) for k, v in text.items()},
                  np.array(years, dtype=np.int32), np.array(months, dtype=np.int32), DocTerms.of(docs), len(data),
                  wheres, notes, records)


def _chunks(path: Path, chunk_bytes: int) -> Iterator[tuple[str, int, bytes]]:
    for first, data in line_blocks(path, chunk_bytes):
        yield str(path), first, data


def _parsed(path: Path, workers: int, chunk_bytes: int = _CHUNK_BYTES) -> Iterator[_Chunk]:
    """:func:`_parse_chunk` over the file's blocks, in order, on ``workers`` processes (1: in this one)."""
    if workers <= 1:
        for job in _chunks(path, chunk_bytes):
            yield _parse_chunk(job)
        return
    # here, not at the top: a query never loads multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("fork")) as pool:
        pending: collections.deque[Future[_Chunk]] = collections.deque()
        for job in _chunks(path, chunk_bytes):
            pending.append(pool.submit(_parse_chunk, job))
            if len(pending) > 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


class _PaperSink:
    """Writes kept papers' columns into a store folder and their terms into a postings builder."""

    def __init__(self, folder: Path, known: Callable[[str], bool] | None,
                 postings: PostingsBuilder | PostingsWriter, start_offsets: Mapping[str, int] | None = None):
        self.folder = folder
        self.known = known
        self.index: dict[str, int] = {}
        self.files = {k: open(folder / f"{k}.bin", "ab") for k in _TEXT}  # noqa: SIM115 (closed by close())
        self.offsets = {k: array.array("q", [(start_offsets or {}).get(k, 0)]) for k in _TEXT}
        self.year = array.array("i")
        self.month = array.array("i")
        self.postings = postings
        self.notes = ParseNotes()  # what the chunks' parsing found, duplicates included
        self.records = 0

    def add(self, chunk: _Chunk) -> None:
        index, known = self.index, self.known
        keep = np.ones(len(chunk.ids), dtype=bool)
        self.notes.merge(chunk.notes)
        self.records += chunk.n_records
        for j, pid in enumerate(chunk.ids):
            if pid in index or (known is not None and known(pid)):
                keep[j] = False  # duplicate id: the first record wins
                where = chunk.wheres[j] if j < len(chunk.wheres) else ""
                self.notes.note("duplicate_ids", f"{where} id {pid[:40]!r}" if where else "")
            else:
                index[pid] = len(index)
        whole = bool(keep.all())
        for k in _TEXT:
            lens = chunk.lens[k]
            if whole:
                self.files[k].write(chunk.text[k])
            else:
                ends = np.cumsum(lens).tolist()
                blob = chunk.text[k]
                self.files[k].write(b"".join(blob[e - n:e] for e, n, y in zip(ends, lens.tolist(), keep.tolist(),
                                                                            strict=True) if y))
                lens = lens[keep]
            self.offsets[k].frombytes((np.cumsum(lens) + self.offsets[k][-1]).astype(np.int64).tobytes())
        self.year.frombytes(chunk.year[keep].tobytes())
        self.month.frombytes(chunk.month[keep].tobytes())
        self.postings.add_doc_terms(chunk.terms.select(keep))

    def close(self) -> None:
        for f in self.files.values():
            f.close()


# ---- citations -----------------------------------------------------------------------------------------
@dataclass
class _Edges:
    rows: np.ndarray
    cols: np.ndarray
    pending_src: list[str]
    pending_dst: list[str]
    self_loops: int = 0
    malformed: int = 0


_NOT_PLAIN = np.zeros(256, dtype=bool)  # bytes that send a block of citation lines to the line-by-line reader
_NOT_PLAIN[[0, 11, 12, 13, 28, 29, 30, 31, 32]] = True  # NUL and what str.strip() would strip besides \t, \n
_NOT_PLAIN[128:] = True  # non-ASCII (Unicode spaces, decoding errors)


class SortedIds:
    """Positions of ids given as an ``S`` array (vectorised lookup): by binary search over a 64-bit hash
    of every id (numeric, fast) when the hashes of the corpus's ids are distinct, else over the sorted
    ids themselves; a found position is always confirmed by comparing the ids."""

    def __init__(self, ids_sorted: np.ndarray, order: np.ndarray):
        self.sorted, self.order = ids_sorted, order
        h = _hash_ids(ids_sorted)
        self._hash_order = np.argsort(h, kind="stable")
        self._hashes = h[self._hash_order]
        self._by_hash = bool(h.size) and not bool((self._hashes[1:] == self._hashes[:-1]).any())

    def positions(self, keys: np.ndarray) -> np.ndarray:
        """int64 position of each key, −1 where it is not an id."""
        ids = self.sorted
        if not ids.size or not keys.size:
            return np.full(keys.size, -1, dtype=np.int64)
        if keys.dtype.itemsize > ids.dtype.itemsize:
            # a key longer than every id is no id; the others are looked up at the ids' width (the hashes of
            # the ids are of that width: widening them would make every key of the block miss)
            out = np.full(keys.size, -1, dtype=np.int64)
            fits = np.flatnonzero(np.char.str_len(keys) <= ids.dtype.itemsize)
            if fits.size:
                out[fits] = self.positions(keys[fits].astype(ids.dtype))
            return out
        if keys.dtype.itemsize < ids.dtype.itemsize:
            keys = keys.astype(ids.dtype)
        if self._by_hash:
            hk = _hash_ids(keys)
            k = np.minimum(np.searchsorted(self._hashes, hk), ids.size - 1)
            j = self._hash_order[k]
        else:
            j = np.minimum(np.searchsorted(ids, keys), ids.size - 1)
        found = ids[j] == keys
        return np.where(found, self.order[j], -1).astype(np.int64)


def _hash_ids(a: np.ndarray) -> np.ndarray:
    """A 64-bit polynomial hash of each ``S`` value (its bytes, NUL padding excluded by construction)."""
    w = a.dtype.itemsize
    m = np.frombuffer(a.tobytes(), dtype=np.uint8).reshape(a.size, w)
    h = np.zeros(a.size, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in range(w):  # w is small (an id's length): one vectorised step per byte
            h = h * np.uint64(1099511628211) + m[:, c].astype(np.uint64)
    return h


def plain_pairs(block: bytes) -> tuple[list[bytes], list[bytes]] | None:
    """(citing, cited) ids of a block of whole lines when every line is exactly ``ASCII-id<TAB>ASCII-id``
    with nothing to strip (then the line-by-line reader would read the same); None otherwise."""
    a = np.frombuffer(block, dtype=np.uint8)
    if not a.size or a[-1] != 10 or _NOT_PLAIN[a].any():
        return None
    nl, tab = np.flatnonzero(a == 10), np.flatnonzero(a == 9)
    if nl.size != tab.size or not (tab < nl).all() or not (tab[1:] > nl[:-1]).all():
        return None
    fields = block.replace(b"\t", b"\n").split(b"\n")
    return fields[0:-1:2], fields[1:-1:2]


class IdPositions(Protocol):
    def positions(self, keys: np.ndarray) -> np.ndarray: ...


def _read_citations(path: Path, lookup: Callable[[str], int | None], ids: IdPositions | None = None) -> _Edges:
    """The citation lines of ``path``: edges between known ids (positions by ``lookup``, or vectorised
    by ``ids`` for blocks of plain lines), the lines with an unknown id (pending, in file order),
    self-loops and malformed lines counted."""
    row_parts: list[np.ndarray] = []
    col_parts: list[np.ndarray] = []
    psrc: list[str] = []
    pdst: list[str] = []
    loops = malformed = 0
    for first, block in line_blocks(path):
        pairs = plain_pairs(block) if ids is not None else None  # (a BOM is non-ASCII: line by line)
        if pairs is not None and ids is not None:
            src, dst = np.array(pairs[0]), np.array(pairs[1])
            u, v = ids.positions(src), ids.positions(dst)
            ok = (u >= 0) & (v >= 0)
            loop = ok & (u == v)
            loops += int(loop.sum())
            edge = ok & ~loop
            row_parts.append(u[edge])
            col_parts.append(v[edge])
            for k in np.flatnonzero(~ok).tolist():
                psrc.append(pairs[0][k].decode("ascii"))
                pdst.append(pairs[1][k].decode("ascii"))
            continue
        rows, cols = array.array("q"), array.array("q")
        for k, raw in enumerate(block.split(b"\n")[:-1] if block.endswith(b"\n") else block.split(b"\n")):
            line = decode_line(raw, path, first + k)
            parts = line.split("\t")
            if len(parts) != 2:
                if line.strip():
                    malformed += 1
                continue
            a, b = parts[0].strip(), parts[1].strip()
            x, y = lookup(a), lookup(b)
            if x is None or y is None:
                psrc.append(a)
                pdst.append(b)
            elif x == y:
                loops += 1
            else:
                rows.append(x)
                cols.append(y)
        row_parts.append(np.frombuffer(rows, dtype=np.int64))
        col_parts.append(np.frombuffer(cols, dtype=np.int64))
    return _Edges(_cat64(row_parts), _cat64(col_parts), psrc, pdst, loops, malformed)


def _cat64(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _csr_from_keys(keys: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR (indptr, indices) of the sorted unique edge keys row·n + col."""
    dtype = np.int32 if keys.size < 2**31 - 1 else np.int64
    rows = keys // n
    indptr = np.zeros(n + 1, dtype=dtype)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return indptr, (keys % n).astype(dtype)


def _keys(indptr: np.ndarray, indices: np.ndarray, n: int) -> np.ndarray:
    counts: np.ndarray = np.diff(np.asarray(indptr, dtype=np.int64))
    rows = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), counts)
    return rows * n + np.asarray(indices, dtype=np.int64)


def s_array(values: Sequence[str]) -> np.ndarray:
    enc = [v.encode("utf-8", "surrogatepass") for v in values]
    width = max((len(b) for b in enc), default=1) or 1
    return np.array(enc, dtype=f"S{width}") if enc else np.zeros(0, dtype="S1")


# ---- writing -------------------------------------------------------------------------------------------
def _crc(path: Path, start: int = 0, crc: int = 0) -> int:
    """CRC-32 of the file, continuing ``crc`` (that of its first ``start`` bytes) from byte ``start``."""
    with open(path, "rb") as f:
        f.seek(start)
        for block in iter(lambda: f.read(1 << 22), b""):
            crc = zlib.crc32(block, crc)
    return crc


def _finish(folder: Path, arrays: Mapping[str, np.ndarray], header: dict[str, Any],
            text_prefix_crc: Mapping[str, tuple[int, int]] | None = None) -> None:
    """Save ``arrays`` as ``.npy`` and ``meta.json`` describing every file of the folder.
    ``text_prefix_crc[k] = (size, crc)``: the first ``size`` bytes of ``k.bin`` are known to have that
    CRC-32 (an append's copied text): only the bytes after them are read."""
    files: dict[str, list[Any]] = {}
    for name, a in arrays.items():
        np.save(folder / f"{name}.npy", np.ascontiguousarray(a), allow_pickle=False)
        p = folder / f"{name}.npy"
        files[p.name] = [a.dtype.str, list(a.shape), p.stat().st_size, _crc(p)]
    for k in _TEXT:
        p = folder / f"{k}.bin"
        size, crc = (text_prefix_crc or {}).get(k, (0, 0))
        files[p.name] = ["|u1", [p.stat().st_size], p.stat().st_size, _crc(p, size, crc)]
    meta = {"format": FORMAT, "version": VERSION, **header, "files": files}
    (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")


def _graph_arrays(keys: np.ndarray, n: int) -> dict[str, np.ndarray]:
    refs_indptr, refs_indices = _csr_from_keys(keys, n)
    tkeys = (keys % n) * n
    tkeys += keys // n
    tkeys.sort()
    cites_indptr, cites_indices = _csr_from_keys(tkeys, n)
    return {"refs_indptr": refs_indptr, "refs_indices": refs_indices,
            "cites_indptr": cites_indptr, "cites_indices": cites_indices}


def _id_arrays(ids: np.ndarray) -> dict[str, np.ndarray]:
    order = np.argsort(ids, kind="stable")
    return {"ids": ids, "ids_sorted": ids[order], "id_order": order.astype(np.int64)}


def _validation(sink: _PaperSink, n: int, keys: np.ndarray, years: np.ndarray, edges: _Edges,
                valid_lines: int) -> tuple[dict[str, int], ValidationReport]:
    """The build's dropped-edge counts and :class:`ValidationReport`: the sink's parse notes and counts, the
    dropped edges, and the direction check over the unique edge ``keys`` (row·n + col), a block at a time."""
    dropped = {"self_loops": edges.self_loops, "unknown_ids": len(edges.pending_src),
               "duplicates": int(valid_lines - keys.size), "malformed": edges.malformed}
    lines = valid_lines + edges.self_loops + len(edges.pending_src) + edges.malformed
    report = ValidationReport(papers_read=sink.records, papers_kept=n, citation_lines=lines,
                              citations_kept=int(keys.size), dropped_edges=dict(dropped))
    report.add_notes(sink.notes)
    block = 1 << 22
    for lo in range(0, keys.size, block):
        part = keys[lo:lo + block]
        a, b = direction_counts(part // n, part % n, years, NO_YEAR)
        report.newer_to_older += a
        report.older_to_newer += b
    return dropped, report


def build(folder: Path, fingerprint: str, target: Path, name: str, *, index_target: Path | None = None,
          workers: int = 1, progress: Progress = _no_progress, chunk_bytes: int = _CHUNK_BYTES,
          block_postings: int = 4_000_000) -> Path:
    """Parse the corpus ``folder`` into a store published at ``target`` (and its text index at
    ``index_target``); returns ``target``. CorpusError for a bad corpus file, OSError when the cache
    cannot be written. Concurrent builders are safe: the first rename wins, the others' copies are dropped.

    Memory is bounded whatever the corpus size (except ~100 B a paper for the id map): papers are parsed
    and tokenised ``chunk_bytes`` of ``papers.jsonl`` at a time on ``workers`` processes, their text is
    written as it comes, and the postings are spilled as sorted runs and merged ``block_postings`` at a
    time (:class:`~crase_core.store.textindex.PostingsWriter`). Progress: text lines to ``progress`` and
    :class:`BuildStep` reports to the hook set by :func:`reporting`."""
    papers_path, cites_path = find_file(folder, "papers.jsonl"), find_file(folder, "citations.tsv")
    start = time.perf_counter()
    step = _STEP_HOOK.get() or (lambda _: None)
    total_bytes = max(1, papers_path.stat().st_size)

    def report(stage: str, fraction: float, message: str, *, line: bool = True) -> None:
        if line:
            progress(message)
        with contextlib.suppress(Exception):  # a display that fails must not fail the build
            step(BuildStep(stage, min(1.0, max(0.0, fraction)), message))

    tmp = atomic.temp_dir_beside(target)
    itmp = atomic.temp_dir_beside(index_target) if index_target is not None else tmp / "index-tmp"
    try:
        writer = PostingsWriter(itmp, block_postings)
        sink = _PaperSink(tmp, None, writer)
        done_bytes = 0
        try:
            for chunk in _parsed(papers_path, workers, chunk_bytes):
                sink.add(chunk)
                done_bytes += chunk.n_bytes
                line = len(sink.index) // 50_000 != (len(sink.index) - len(chunk.ids)) // 50_000
                report("parse", 0.7 * done_bytes / total_bytes,
                       f"parsed {len(sink.index):,} papers ({time.perf_counter() - start:.0f} s)", line=line)
        finally:
            sink.close()
            writer.close()
        n = len(sink.index)
        if not n:
            raise CorpusError(f"{papers_path} holds no papers")
        report("citations", 0.7, f"parsed {n:,} papers; reading citations ({time.perf_counter() - start:.0f} s)")
        id_arrays = _id_arrays(s_array(list(sink.index)))
        edges = _read_citations(cites_path, sink.index.get, SortedIds(id_arrays["ids_sorted"], id_arrays["id_order"]))
        del sink.index
        before = edges.rows.size
        keys = edges.rows * n
        keys += edges.cols
        edges.rows = edges.cols = _cat64([])  # freed before the sort (8 B a citation line each)
        keys = np.unique(keys)
        years = np.frombuffer(sink.year, dtype=np.int32)
        dropped, validation = _validation(sink, n, keys, years, edges, before)
        report("store", 0.8, f"{keys.size:,} citations; writing the store ({time.perf_counter() - start:.0f} s)")
        arrays = {**id_arrays, "year": years, "month": np.frombuffer(sink.month, dtype=np.int32),
                  **{f"{k}_off": np.frombuffer(sink.offsets[k], dtype=np.int64) for k in _TEXT},
                  **_graph_arrays(keys, n),
                  "pending_src": s_array(edges.pending_src), "pending_dst": s_array(edges.pending_dst)}
        del keys, edges
        _finish(tmp, arrays, {"name": name, "fingerprint": fingerprint, "n_papers": n,
                              "n_refs": int(arrays["refs_indices"].size), "valid_lines": int(before),
                              "dropped_edges": dropped, "validation": validation.to_dict()})
        del arrays
        report("index", 0.85, f"writing the text index ({time.perf_counter() - start:.0f} s)")
        writer.finish(on_block=lambda f: report("index", 0.85 + 0.15 * f, "merging the text index", line=False))
        if index_target is None:
            shutil.rmtree(itmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(itmp, ignore_errors=True)
        raise
    won = atomic.publish_dir(tmp, target)
    if index_target is not None:
        if index_target.is_dir():
            shutil.rmtree(itmp, ignore_errors=True)
        else:
            atomic.publish_dir(itmp, index_target)
    report("done", 1.0, f"built {name}: {n:,} papers in {time.perf_counter() - start:.1f} s" + ("" if won else
           " (another process published the same store first; using it)"))
    return target


# ---- opening -------------------------------------------------------------------------------------------
def _load_meta(path: Path) -> dict[str, Any]:
    return read_meta(path, FORMAT, VERSION, "a corpus store")


def _map(path: Path, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    files = meta.get("files")
    if not isinstance(files, dict) or set(files) != {f"{a}.npy" for a in _ARRAYS} | {f"{k}.bin" for k in _TEXT}:
        raise ValueError("meta.json lists other files")
    out: dict[str, np.ndarray] = {}
    for fname, spec in files.items():
        p = path / fname
        if not (isinstance(spec, list) and len(spec) == 4):
            raise ValueError(f"meta.json: bad entry for {fname}")
        stem = fname.rsplit(".", 1)[0]
        if fname.endswith(".bin"):
            if p.stat().st_size != spec[2]:
                raise ValueError(f"{fname} has {p.stat().st_size} bytes, meta.json says {spec[2]}: truncated or replaced")
            out[stem] = (np.asarray(np.memmap(p, dtype=np.uint8, mode="r", shape=(spec[2],))) if spec[2]
                         else np.zeros(0, dtype=np.uint8))
            continue
        out[stem] = map_npy(p, spec[0], spec[1], spec[2])
    return out


def _check_shapes(a: dict[str, np.ndarray], n: int, n_refs: int) -> None:
    for k in ("ids", "ids_sorted", "id_order", "year", "month"):
        if a[k].shape != (n,):
            raise ValueError(f"{k} has {a[k].shape[0] if a[k].ndim else 0} entries, not {n}")
    for k in _TEXT:
        off = a[f"{k}_off"]
        if off.shape != (n + 1,) or int(off[0]) != 0 or int(off[-1]) != a[k].size:
            raise ValueError(f"{k} offsets do not fit the text")
    for g in ("refs", "cites"):
        ptr, ind = a[f"{g}_indptr"], a[f"{g}_indices"]
        if ptr.shape != (n + 1,) or int(ptr[0]) != 0 or int(ptr[-1]) != ind.size or ind.size != n_refs:
            raise ValueError(f"{g} graph structure")
        if ptr.dtype != ind.dtype:
            raise ValueError(f"{g} index dtypes differ")
    if a["pending_src"].shape != a["pending_dst"].shape:
        raise ValueError("pending citations")


def open_store(path: Path, fingerprint: str | None = None, name: str | None = None) -> Corpus:
    """The corpus stored at ``path``, memory-mapped. ValueError/OSError (saying what) when the store is
    missing, of another version or fingerprint, truncated, or its files do not fit together."""
    meta = _load_meta(path)
    if fingerprint is not None and meta.get("fingerprint") != fingerprint:
        raise ValueError("the store is of another version of the corpus")
    n, n_refs = meta.get("n_papers"), meta.get("n_refs")
    if not (isinstance(n, int) and n > 0 and isinstance(n_refs, int) and n_refs >= 0):
        raise ValueError("meta.json: bad counts")
    a = _map(path, meta)
    _check_shapes(a, n, n_refs)
    cols = _Columns(a["ids"], {k: a[k] for k in _TEXT}, {k: a[f"{k}_off"] for k in _TEXT}, a["year"], a["month"])
    dropped = {str(k): int(v) for k, v in dict(meta.get("dropped_edges") or {}).items()}
    saved = meta.get("validation")
    validation = ValidationReport.from_dict(saved if isinstance(saved, dict) else {})
    return Corpus(name=name or str(meta.get("name")), papers=StorePapers(cols),
                  index=IdIndex(a["ids_sorted"], a["id_order"]), months=a["month"],
                  refs=Adjacency(a["refs_indptr"], a["refs_indices"], n), cites=Adjacency(a["cites_indptr"], a["cites_indices"], n),
                  fingerprint=str(meta["fingerprint"]), dropped_edges=dropped, store=path, validation=validation)


def verify(path: Path) -> list[str]:
    """Deep check of a store: every file's CRC-32 and every array's structure; the problems found ([] = sound)."""
    try:
        meta = _load_meta(path)
        a = _map(path, meta)
        _check_shapes(a, int(meta["n_papers"]), int(meta["n_refs"]))
    except (OSError, ValueError, KeyError, TypeError) as e:
        return [str(e)]
    problems = [f"{f}: CRC-32 mismatch" for f, spec in meta["files"].items() if _crc(path / f) != spec[3]]
    n = int(meta["n_papers"])
    for g in ("refs", "cites"):
        ptr, ind = np.asarray(a[f"{g}_indptr"]), np.asarray(a[f"{g}_indices"])
        if np.any(np.diff(ptr) < 0) or (ind.size and (int(ind.min()) < 0 or int(ind.max()) >= n)):
            problems.append(f"{g}: pointers or indices out of range")
    order = np.asarray(a["id_order"])
    if order.size and (np.any(np.sort(order) != np.arange(n)) or np.any(a["ids"][order] != a["ids_sorted"])):
        problems.append("ids_sorted/id_order do not match ids")
    return problems


# ---- appending (segments: crase_core.store.segments) -------------------------------------------------
def _concat_s(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    width = max(a.dtype.itemsize, b.dtype.itemsize, 1)
    return np.concatenate([a.astype(f"S{width}"), b.astype(f"S{width}")])


def _map_one(path: Path, name: str) -> np.ndarray:
    return np.load(path / f"{name}.npy", mmap_mode="r", allow_pickle=False)


def remove_store(path: Path) -> None:
    """Remove a store or index folder (renamed aside first; processes that mapped it keep their mapping)."""
    atomic.remove_dir(path, "old")
