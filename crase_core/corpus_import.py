"""``crase corpus import SRC DEST --format openalex|s2|jsonl``: a corpus folder, with its store built, from
the formats the field publishes.

:func:`import_corpus` converts SRC into a temporary folder beside DEST (``papers.jsonl``, ``citations.tsv``
and, where the source has them, ``citation_contexts.jsonl``: docs/corpus_formats.md), builds its store
under the cache folder (:func:`crase_core.corpus_store.build`, which validates and reports), and only then
renames the folder to DEST: DEST is all or nothing — an import that fails or is interrupted leaves no DEST
(and removes its temporary folder unless the process is killed outright). DEST must not exist (or be an
empty folder).

The formats (:mod:`crase_core.corpus_import_openalex`, :mod:`crase_core.corpus_import_s2`, and ``jsonl``
here) read their files in blocks of whole lines (:func:`read_blocks`: gzip or plain, found by its magic
bytes, at most :data:`MAX_LINE` bytes a line), parse the blocks on worker processes in file order
(:func:`ordered_map`) and keep per paper only its id (a set, ~80 B a paper); citations are filtered
against the sorted ids block by block. Memory is bounded whatever the size of SRC but for that id set.
Paths are found by listing SRC; none is built from text read in it (an OpenAlex manifest's URLs are only
matched against the files found).
"""

from __future__ import annotations

import collections
import contextlib
import gzip
import json
import shutil
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from . import atomic, citation_contexts, corpus_store
from .corpus import _find, _fingerprint
from .corpus_store import BuildStep, _plain_pairs, _s_array, _SortedIds
from .corpus_validation import ValidationReport
from .errors import CorpusError
from .textindex import index_folder

FORMATS = ("openalex", "s2", "jsonl")
#: a line longer than this is not a record (the import stops, naming it)
MAX_LINE = 64 << 20
BLOCK = 1 << 22
NL = b"\n"
Progress = Callable[[str], None]
T = TypeVar("T")
R = TypeVar("R")


def _no_progress(_: str) -> None:
    pass


@dataclass
class Converted:
    """What a format's converter wrote into the temporary folder, and what it counted on the way
    (``counts``: reason → number, shown in the report's papers section)."""

    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class ImportResult:
    """An import's outcome: the corpus folder, the validation report (the build's, plus the converter's
    counts) and the seconds it took."""

    dest: Path
    report: ValidationReport
    n_papers: int
    n_citations: int
    seconds: float


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
    """Progress of an import on the build-step hook (:func:`crase_core.corpus_store.reporting`): the
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

    def sorted(self) -> _SortedIds:
        ids = np.sort(_s_array(list(self.seen)))
        return _SortedIds(ids, np.arange(ids.size, dtype=np.int64))


def filter_citations(raw: Path, out: Path, ids: _SortedIds) -> tuple[int, int]:
    """Copy the lines ``citing<TAB>cited`` of ``raw`` whose two ids are both in ``ids`` to ``out``;
    returns (lines read, lines with an id outside). Vectorised per block of plain ASCII lines."""
    read = outside = 0
    with open(out, "ab") as f:
        for first, block, _ in read_blocks(raw):
            pairs = _plain_pairs(block if block.endswith(b"\n") else block + b"\n")
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


# ---- jsonl ------------------------------------------------------------------------------------------------
def _copy(src: Path, dest: Path, steps: Steps, stage: str) -> None:
    with open(src, "rb") as a, open(dest, "wb") as b:
        while block := a.read(BLOCK):
            b.write(block)
            steps(stage, a.tell(), f"copying {src.name}")
    steps.file_done(src.stat().st_size)


def convert_jsonl(src: Path, tmp: Path, work: Path, workers: int, steps: Steps) -> Converted:
    """``jsonl``: SRC is a corpus folder already (papers.jsonl[.gz], citations.tsv[.gz], optional
    citation_contexts.jsonl): its files are copied byte for byte (so its fingerprint is kept), a missing
    citations file becomes an empty one, and the contexts file is sorted (docs/corpus_formats.md)."""
    if not src.is_dir():
        raise CorpusError(f"{src} is not a folder: --format jsonl imports a folder with papers.jsonl and citations.tsv")
    papers = _find(src, "papers.jsonl")
    _copy(papers, tmp / papers.name, steps, "papers")
    try:
        cites = _find(src, "citations.tsv")
        _copy(cites, tmp / cites.name, steps, "citations")
    except CorpusError:
        (tmp / "citations.tsv").write_bytes(b"")
    counts: dict[str, int] = {}
    if (src / citation_contexts.FILE).is_file():
        db = contexts_db(work / "contexts.sqlite")
        bad = 0
        for first, block, read in read_blocks(src / citation_contexts.FILE):
            rows = []
            for _, raw in lines_of(block, first):
                rec = citation_contexts.record(raw)
                if rec is None:
                    bad += 1
                    continue
                rows.append((rec[0][0], rec[0][1], json.dumps(rec[1]), json.dumps(rec[2])))
            db.executemany("INSERT OR IGNORE INTO ctx VALUES (?, ?, ?, ?)", rows)
            steps("contexts", read, "sorting citation contexts")
        counts["citation contexts kept"] = sorted_contexts(db, tmp / citation_contexts.FILE)
        if bad:
            counts["citation-context lines that are not records (dropped)"] = bad
        db.close()
    return Converted(counts)


# ---- the import ---------------------------------------------------------------------------------------------
def _check_dest(dest: Path) -> None:
    if dest.exists() and not (dest.is_dir() and not any(dest.iterdir())):
        raise CorpusError(f"{dest} already exists; import into a new folder (or remove it first)")
    if not dest.name or dest.name.startswith("."):
        raise CorpusError(f"{dest}: the corpus folder needs a name that does not start with a dot")


def source_bytes(paths: Sequence[Path]) -> int:
    return sum(p.stat().st_size for p in paths if p.is_file())


def import_corpus(src: Path, dest: Path, fmt: str, *, workers: int = 1, progress: Progress = _no_progress,
                  manifest: bool = True) -> ImportResult:
    """Import SRC (format ``fmt``) into the new corpus folder DEST and build its store (module docstring).
    :class:`CorpusError` for unusable input (nothing is left behind); OSError when DEST or the cache cannot
    be written."""
    from .corpus_import_openalex import convert_openalex
    from .corpus_import_s2 import convert_s2

    start = time.perf_counter()
    src, dest = Path(src), Path(dest)
    if fmt not in FORMATS:
        raise CorpusError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if not src.exists():
        raise CorpusError(f"{src} does not exist")
    _check_dest(dest)
    tmp = atomic.temp_dir_beside(dest)
    try:
        work = tmp / ".work"
        work.mkdir()
        if fmt == "openalex":
            converted = convert_openalex(src, tmp, work, workers, progress, manifest)
        elif fmt == "s2":
            converted = convert_s2(src, tmp, work, workers, progress)
        else:
            converted = convert_jsonl(src, tmp, work, workers, Steps(source_bytes(list(_jsonl_files(src))), progress))
        shutil.rmtree(work)
        papers, cites = _find(tmp, "papers.jsonl"), _find(tmp, "citations.tsv")
        fp = _fingerprint([papers, cites])
        target = corpus_store.store_path(dest.name, fp)
        hook = corpus_store.current_hook()
        scaled = (lambda s: hook(BuildStep(s.stage, 0.5 + 0.5 * s.fraction, s.message))) if hook else None
        if not target.is_dir():
            progress(f"building the corpus store of {dest.name}")
            with corpus_store.reporting(scaled):
                corpus_store.build(tmp, fp, target, dest.name, index_target=index_folder(dest.name, fp),
                                   workers=workers, progress=progress)
        corpus = corpus_store.open_store(target, fp, dest.name)
        if not atomic.publish_dir(tmp, dest):
            raise CorpusError(f"{dest} was created by another process during the import; nothing was written there")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    corpus_store.remember_fingerprint(dest, [dest / papers.name, dest / cites.name], fp)
    report = ValidationReport.from_dict(corpus.validation.to_dict())
    report.source_counts = dict(converted.counts)
    return ImportResult(dest, report, len(corpus), corpus.n_citations, time.perf_counter() - start)


def _jsonl_files(src: Path) -> Iterator[Path]:
    for stem in ("papers.jsonl", "citations.tsv"):
        with contextlib.suppress(CorpusError):
            yield _find(src, stem)
    if (src / citation_contexts.FILE).is_file():
        yield src / citation_contexts.FILE
