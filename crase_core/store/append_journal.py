"""All-or-nothing appends to a corpus folder's files (``crase corpus add``), by a journal beside them.

Contract. Before the first byte is appended, :func:`appending` writes ``<folder>/.crase-append.json``
(fsynced, with the folder) recording, for each file the append grows, its size before, the SHA-256 of
the 64 KiB before that point, and the size and SHA-256 of the bytes it adds, plus the name of the
segment the append publishes; the journal is held locked (``flock``) for as long as the append runs.

* An append that fails (a full disk, a read-only file, an exception, Ctrl-C) cuts every file back to
  its recorded size and removes the journal before the error is raised: the files are byte for byte
  as before it.
* An append that dies (SIGKILL, power loss) leaves the journal, unlocked. The next open of the folder
  (:func:`recover`, called by :func:`crase_core.store.corpus_folder.open_or_build`) completes it when every
  file holds exactly the recorded bytes and its segment was published, and otherwise cuts the files
  back to their sizes before it. A reader that finds the journal locked waits for the append to end.
* A journal is read with a size cap, as a regular file only, and names files by a fixed list
  (``papers.jsonl[.gz]``, ``citations.tsv[.gz]``): a planted journal cannot make Crase truncate any
  other file; a file whose bytes before the recorded size changed since is never cut (one-line error).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crase_core.errors import CorpusError

log = logging.getLogger("crase_core.store.corpus_store")

JOURNAL = ".crase-append.json"
FORMAT = "crase-append-journal"
VERSION = 1
MAX_JOURNAL_BYTES = 64 << 10
_TAIL = 64 << 10  # bytes before an append point whose SHA-256 the journal keeps
_NAMES = ("papers.jsonl", "papers.jsonl.gz", "citations.tsv", "citations.tsv.gz")


@dataclass
class Planned:
    """One file's part of an append: ``data`` goes at offset ``before`` of ``folder/name``."""

    name: str
    before: int
    data: bytes

    def record(self, folder: Path) -> dict[str, Any]:
        return {"name": self.name, "before": self.before, "tail_sha256": _tail_sha(folder / self.name, self.before),
                "after": self.before + len(self.data), "sha256": hashlib.sha256(self.data).hexdigest()}


def journal_path(folder: Path) -> Path:
    return Path(folder) / JOURNAL


def _tail_sha(path: Path, end: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(max(0, end - _TAIL))
        h.update(f.read(min(end, _TAIL)))
    return h.hexdigest()


def _range_sha(path: Path, start: int, end: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(start)
        left = end - start
        while left > 0:
            block = f.read(min(left, 1 << 22))
            if not block:
                break
            h.update(block)
            left -= len(block)
    return h.hexdigest()


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# ---- writing ----------------------------------------------------------------------------------------------
class Append:
    """A running append (see :func:`appending`): :meth:`write` grows the files, :meth:`commit` ends it."""

    def __init__(self, folder: Path, planned: Sequence[Planned], fd: int):
        self.folder, self.planned, self.fd = folder, list(planned), fd
        self.committed = False
        self.files: dict[str, Any] = {}

    def open_files(self) -> None:
        """Open every file for writing (before the journal exists: a read-only file touches nothing)."""
        for p in self.planned:
            f = open(self.folder / p.name, "rb+")  # noqa: SIM115 (closed by close_files)
            self.files[p.name] = f
            if os.fstat(f.fileno()).st_size != p.before:
                raise CorpusError(f"{self.folder / p.name} changed while the append was prepared; run it again")

    def write(self) -> None:
        """Append every planned file's bytes at its recorded size and fsync them."""
        for p in self.planned:
            f = self.files[p.name]
            f.seek(p.before)
            f.write(p.data)
            f.flush()
            os.fsync(f.fileno())

    def commit(self) -> None:
        """The append is complete (its segment published): remove the journal."""
        os.unlink(journal_path(self.folder))
        _fsync_dir(self.folder)
        self.committed = True

    def roll_back(self) -> None:
        """Cut every file back to its recorded size (fsynced), then remove the journal."""
        for p in self.planned:
            f = self.files.get(p.name)
            if f is None:
                continue
            f.truncate(p.before)
            f.flush()
            os.fsync(f.fileno())
        os.unlink(journal_path(self.folder))
        _fsync_dir(self.folder)

    def close_files(self) -> None:
        for f in self.files.values():
            with contextlib.suppress(OSError):
                f.close()


def _create(folder: Path, body: bytes) -> int:
    """Create and lock the journal (O_EXCL); its fd. CorpusError when another append's journal is there."""
    path = journal_path(folder)
    for _ in range(3):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            raise CorpusError(f"another `crase corpus add` is appending to {folder} (its journal {JOURNAL} is "
                              "there); wait for it to finish, then run this one again") from None
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            same = os.fstat(fd).st_ino == os.lstat(path).st_ino  # a reader may have removed it, seeing it empty
        except FileNotFoundError:
            same = False
        if same:
            try:
                os.write(fd, body)
                os.fsync(fd)
            except BaseException:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(path)
                raise
            _fsync_dir(folder)
            return fd
        os.close(fd)
    raise CorpusError(f"could not start the append to {folder}: its journal kept disappearing; run it again")


@contextlib.contextmanager
def appending(folder: Path, planned: Sequence[Planned], segment: str) -> Iterator[Append]:
    """The append of ``planned`` to ``folder``'s files, under a journal (module doc). Inside the block,
    call :meth:`Append.write`, publish the segment named ``segment``, then :meth:`Append.commit`; an
    exception before the commit rolls the files back (and is raised again)."""
    folder = Path(folder)
    job = Append(folder, planned, -1)
    try:
        job.open_files()
        body = json.dumps({"format": FORMAT, "version": VERSION, "segment": segment,
                           "files": [p.record(folder) for p in planned]}).encode()
        job.fd = _create(folder, body)
        try:
            yield job
        except BaseException:
            if not job.committed:
                try:
                    job.roll_back()
                except OSError as e:  # the journal stays: the next open cuts the files back
                    log.warning("could not undo the failed append to %s now (%s); the next open of the corpus "
                                "will", folder, e.strerror or e)
            raise
    finally:
        job.close_files()
        if job.fd >= 0:
            os.close(job.fd)


# ---- recovery ---------------------------------------------------------------------------------------------
def _read_journal(path: Path) -> dict[str, Any] | None:
    """The journal's content; None when it is empty (its append died before it was written)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_JOURNAL_BYTES:
            raise ValueError("not a small regular file")
        data = f.read(MAX_JOURNAL_BYTES + 1)
    if not data:
        return None
    value = json.loads(data)
    if not (isinstance(value, dict) and value.get("format") == FORMAT and value.get("version") == VERSION
            and isinstance(value.get("segment"), str) and isinstance(value.get("files"), list)):
        raise ValueError("not an append journal of this Crase")
    for rec in value["files"]:
        if not (isinstance(rec, dict) and rec.get("name") in _NAMES
                and all(isinstance(rec.get(k), int) and not isinstance(rec.get(k), bool) and rec[k] >= 0
                        for k in ("before", "after")) and rec["after"] >= rec["before"]
                and all(isinstance(rec.get(k), str) for k in ("tail_sha256", "sha256"))):
            raise ValueError("it names a file or a size it may not")
    return value


def _settle(folder: Path, journal: dict[str, Any], segment_ready: Callable[[str], bool]) -> str:
    """Complete or roll back the dead append ``journal`` describes; what was done."""
    files = journal["files"]
    sizes = {r["name"]: (folder / r["name"]).stat().st_size for r in files}
    whole = all(sizes[r["name"]] == r["after"]
                and _range_sha(folder / r["name"], r["before"], r["after"]) == r["sha256"] for r in files)
    if whole and segment_ready(journal["segment"]):
        return "completed"
    for r in files:
        path = folder / r["name"]
        if sizes[r["name"]] < r["before"] or _tail_sha(path, r["before"]) != r["tail_sha256"]:
            raise CorpusError(f"an interrupted `crase corpus add` left {folder / JOURNAL}, but {path} changed "
                              "since (its bytes before the append are not what they were), so it is not cut back: "
                              f"check the file, then delete {JOURNAL}")
    for r in files:
        with open(folder / r["name"], "rb+") as f:
            f.truncate(r["before"])
            f.flush()
            os.fsync(f.fileno())
    return "rolled back"


def recover(folder: Path, segment_ready: Callable[[str], bool]) -> str | None:
    """Settle an append to ``folder`` that died (module doc): None when there is no journal, else
    ``"completed"`` or ``"rolled back"`` (the journal is then gone). Waits while a live append holds
    the journal. ``segment_ready(name)``: whether the segment the journal names was published.
    CorpusError (one line) when the journal cannot be settled."""
    path = journal_path(folder)
    try:
        os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None  # the append finished meanwhile
    except OSError as e:
        raise CorpusError(f"{path} (left by an interrupted `crase corpus add`) cannot be read: "
                          f"{e.strerror or e}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a live append holds it: wait for it
        try:
            if os.fstat(fd).st_ino != os.lstat(path).st_ino:
                return None
        except FileNotFoundError:
            return None  # it finished (or someone settled it) while we waited
        try:
            journal = _read_journal(path)
        except (OSError, ValueError, UnicodeDecodeError) as e:
            raise CorpusError(f"{path} is not a journal Crase can settle ({e}); the corpus files were not "
                              f"touched: check them, then delete {JOURNAL}") from None
        try:
            what = "rolled back" if journal is None else _settle(folder, journal, segment_ready)
            os.unlink(path)
        except OSError as e:
            raise CorpusError(f"an interrupted `crase corpus add` left {path}, and it cannot be settled now: "
                              f"{e.strerror or e}; open the corpus once with write access to its folder") from None
        _fsync_dir(folder)
    finally:
        os.close(fd)
    if journal is not None:
        log.warning("an interrupted `crase corpus add` to %s was %s: %s", folder, what,
                    "the corpus holds its papers" if what == "completed"
                    else "the corpus files are exactly as they were before it")
    return what


def is_no_space(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)
