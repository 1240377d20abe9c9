"""Reading and writing for the corpus importers (:mod:`crase_core.importers.corpus_import`): files in blocks of whole
lines (gzip or plain, found by its magic bytes, at most :data:`MAX_LINE` bytes a line), blocks parsed on
forked worker processes in file order, the id set, citation filtering against the sorted ids, scratch
tables for citation contexts, and progress on the build-step hook."""

from __future__ import annotations

import collections
import contextlib
import gzip
import json
import sqlite3
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from crase_core.errors import CorpusError
from crase_core.store import citation_contexts, corpus_store
from crase_core.store.corpus_store import BuildStep, SortedIds, plain_pairs, s_array

#: a line longer than this is not a record (the import stops, naming it)
MAX_LINE = 64 << 20
BLOCK = 1 << 22
NL = b"\n"
Progress = Callable[[str], None]
T = TypeVar("T")
R = TypeVar("R")


def source_bytes(paths: Sequence[Path]) -> int:
    return sum(p.stat().st_size for p in paths if p.is_file())


@dataclass
class Converted:
    """What a format's converter wrote into the temporary folder, and what it counted on the way
    (``counts``: reason → number, shown in the report's papers section)."""

    counts: dict[str, int] = field(default_factory=dict)


# ---- reading --------------------------------------------------------------------------------------------
def is_gzip(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"\x1f\x8b"
    except OSError as e:
        raise CorpusError(f"cannot read {path}: {e.strerror or e}") from None


def read_blocks(path: Path, size: int = BLOCK, max_line: int = MAX_LINE) -> Iterator[tuple[int, bytes, int]]:
    """``(number of its first line, block of whole lines, bytes of the file read so far)`` of a gzip or plain
    file, undecoded. :class:`CorpusError` naming the file and line for a damaged or truncated gzip stream,
    a line over ``max_line`` bytes or a file that cannot be read."""
    lineno = 1
    try:
        with open(path, "rb") as raw:
            stream: Any = gzip.GzipFile(fileobj=raw) if is_gzip(path) else raw
            rest = b""
            while True:
                block = stream.read(size)
                if not block:
                    if rest:
                        yield lineno, rest, raw.tell()
                    return
                block = rest + block
                cut = block.rfind(b"\n")
                rest = block[cut + 1:] if cut >= 0 else block
                if len(rest) > max_line:
                    at = lineno + (block.count(NL) if cut >= 0 else 0)
                    raise CorpusError(f"{path}:{at}: a line longer than {max_line >> 20} MB is not a record; is this "
                                      "the right file?")
                if cut >= 0:
                    data = block[:cut + 1]
                    yield lineno, data, raw.tell()
                    lineno += data.count(b"\n")
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise CorpusError(f"{path}:{lineno}: the gzip file is damaged or truncated ({e}); download it again") from None
    except OSError as e:
        raise CorpusError(f"cannot read {path}: {e.strerror or e}") from None


def lines_of(block: bytes, first: int) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of every non-blank line of a block."""
    for k, raw in enumerate(block.split(b"\n")):
        if raw.strip():
            yield first + k, raw


def ordered_map(fn: Callable[[T], R], jobs: Iterable[T], workers: int) -> Iterator[R]:
    """``fn`` over ``jobs`` on ``workers`` forked processes (1: in this one), results in job order, at most
    2·workers jobs in flight (bounded memory). A worker's exception is raised here, in order."""
    if workers <= 1:
        for job in jobs:
            yield fn(job)
        return
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("fork")) as pool:
        pending: collections.deque[Future[R]] = collections.deque()
        try:
            for job in jobs:
                pending.append(pool.submit(fn, job))
                if len(pending) > 2 * workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()


class Steps:
    """Progress of an import on the build-step hook (:func:`crase_core.store.corpus_store.reporting`): the
    conversion is the first half of the bar, by bytes of SRC read; the store build the second."""

    def __init__(self, total_bytes: int, progress: Progress):
        self.total = max(1, total_bytes)
        self.done = 0
        self.progress = progress
        self.hook = corpus_store.current_hook()
        self._tenth = -1

    def __call__(self, stage: str, read_bytes: int, message: str) -> None:
        fraction = min(1.0, (self.done + read_bytes) / self.total)
        if self.hook is not None:
            with contextlib.suppress(Exception):
                self.hook(BuildStep(stage, 0.5 * fraction, message))
        elif int(fraction * 10) > self._tenth:
            self._tenth = int(fraction * 10)
            self.progress(f"{100 * fraction:3.0f}% {message}")

    def file_done(self, size: int) -> None:
        self.done += size


# ---- ids and citations ------------------------------------------------------------------------------------
class IdSet:
    """The ids of the papers written so far, in order: membership while the papers stream in, then a sorted
    array for vectorised lookups of citation ids (:meth:`sorted`)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def add(self, pid: str) -> bool:
        """True when ``pid`` is new (and now known); False for a duplicate."""
        if pid in self.seen:
            return False
        self.seen.add(pid)
        return True

    def __len__(self) -> int:
        return len(self.seen)

    def sorted(self) -> SortedIds:
        ids = np.sort(s_array(list(self.seen)))
        return SortedIds(ids, np.arange(ids.size, dtype=np.int64))


def filter_citations(raw: Path, out: Path, ids: SortedIds) -> tuple[int, int]:
    """Copy the lines ``citing<TAB>cited`` of ``raw`` whose two ids are both in ``ids`` to ``out``;
    returns (lines read, lines with an id outside). Vectorised per block of plain ASCII lines."""
    read = outside = 0
    with open(out, "ab") as f:
        for first, block, _ in read_blocks(raw):
            pairs = plain_pairs(block if block.endswith(b"\n") else block + b"\n")
            if pairs is None:
                src, dst = [], []
                for _, line in lines_of(block, first):
                    a, _, b = line.partition(b"\t")
                    src.append(a)
                    dst.append(b)
            else:
                src, dst = pairs
            read += len(src)
            if not src:
                continue
            keep = (ids.positions(np.array(src)) >= 0) & (ids.positions(np.array(dst)) >= 0)
            outside += int((~keep).sum())
            f.write(b"".join(src[k] + b"\t" + dst[k] + b"\n" for k in np.flatnonzero(keep).tolist()))
    return read, outside


def sorted_contexts(db: sqlite3.Connection, out: Path) -> int:
    """Write the contexts held in ``db`` (table ``ctx``) to ``out`` sorted by (citing, cited); their number."""
    n = 0
    with open(out, "w", encoding="utf-8") as f:
        for citing, cited, contexts, intents in db.execute(
                "SELECT citing, cited, contexts, intents FROM ctx ORDER BY citing, cited"):
            f.write(citation_contexts.line(citing, cited, _json_list(contexts), _json_list(intents)))
            n += 1
    return n


def _json_list(text: str) -> list[str]:
    value = json.loads(text)
    return [str(x) for x in value] if isinstance(value, list) else []


def contexts_db(path: Path) -> sqlite3.Connection:
    """A scratch SQLite table (citing, cited) → contexts, intents (JSON lists), first one kept."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    db.execute("CREATE TABLE ctx (citing TEXT, cited TEXT, contexts TEXT, intents TEXT, PRIMARY KEY (citing, cited))"
               " WITHOUT ROWID")
    return db
