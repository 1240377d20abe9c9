"""Saved runs: every run kept as its trace JSON, plus a small sidecar for fast listing.

* :func:`runs_dir` — ``$CRASE_RUNS_DIR``, else ``<cache root>/runs``.
* :func:`content_id` — a run's id: the hash of everything in its trace (so two different traces never
  share an id, whatever id a file claims); :func:`with_content_id` stamps it on a trace.
* :func:`outcome_key` — the hash of what a run *found* (request, plan, graph, decisions, ranking), without
  how it ran (time, timings, model calls, cache hits): two runs with the same key are the same result.
* :class:`RunStore` — save, import, load, list and delete traces in one folder; :class:`SavedRun` is
  what a save returns.
* :class:`RunInfo` / :func:`run_summary` — what a listing shows of a run without reading its trace.

Contract of the store:

* a saved trace's ``run_id`` is its :func:`content_id`, and its file name is ``<stamp>-<run_id>``; a
  save never replaces an existing file (the same name means the same content; anything else found under
  that name is left alone and the run goes to a fresh name);
* :meth:`RunStore.save` with ``reuse=True`` (the app after a query) returns the saved run with the same
  :func:`outcome_key` instead of adding a copy;
* a run this process saved or loaded is remembered (:class:`_Remembered`: the file's inode, size and
  modification time, the outcome key computed from the trace itself, and the trace while something
  still holds it), so reopening it, or finding it again for ``reuse``, neither re-reads nor re-hashes
  its file: a file changed on disk since is read again. Traces the store hands out are shared between
  callers: treat them as read-only;
* the trace and its sidecar are written atomically (:mod:`crase_core.atomic`);
* :meth:`RunStore.list` never fails because of one bad file: a damaged or foreign sidecar is rebuilt
  from its trace, and a trace that cannot be read is listed with its error (:attr:`RunInfo.error`).

Run names are built from the trace's timestamp and id with every character outside ``[A-Za-z0-9_.-]``
removed, and :meth:`RunStore.path` refuses any other name, so no path is ever built from untrusted text.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import re
import stat
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: saves are still atomic, only reuse may race
    fcntl = None  # type: ignore[assignment]

from crase_core import atomic
from crase_core import trace as trace_io
from crase_core.cache import cache_root
from crase_core.errors import InputError, TraceError
from crase_core.records import Budget
from crase_core.settings import environment
from crase_core.trace import RunTrace

#: the largest sidecar :meth:`RunStore.list` reads (a sidecar is a few hundred bytes).
MAX_META_BYTES = 64 << 10
#: trace fields that record how a run went, not what it found (left out of :func:`outcome_key`). The
#: warnings narrate the execution (calls spent, answers reused from the cache, an endpoint that failed);
#: what they report about the outcome is recorded in the compared fields (each edge's scorer, the coverage).
EXECUTION_FIELDS = ("run_id", "created_at", "timings", "counters", "source_stats", "budget", "warnings")
#: fields of the plan, claim sets and edges that say how each was obtained (left out of :func:`outcome_key`):
#: an edge the first run asked the model about is a cached answer on a rerun, with the same decision.
CALL_RECORD_FIELDS = ("cached", "usage", "scorer_reason")


def runs_dir() -> Path:
    """``$CRASE_RUNS_DIR``, else ``<cache root>/runs`` (created)."""
    path = environment.runs_folder(cache_root())
    path.mkdir(parents=True, exist_ok=True)
    return path


def _digest(trace: RunTrace) -> str:
    """sha256 (128 bits, hex) of the trace's JSON as :func:`crase_core.trace.dumps` writes it (field order fixed)."""
    return hashlib.sha256(trace_io.dumps(trace).encode("utf-8")).hexdigest()[:32]


def content_id(trace: RunTrace) -> str:
    """Hash of everything in the trace but its ``run_id`` (two traces that differ in anything differ here)."""
    return _digest(dataclasses.replace(trace, run_id=""))


def with_content_id(trace: RunTrace) -> RunTrace:
    """``trace`` with ``run_id`` = :func:`content_id` (the same object when it already has it)."""
    return _identified(trace)[0]


def _identified(trace: RunTrace) -> tuple[RunTrace, str]:
    """(``trace`` with its content id, its JSON text as :func:`crase_core.trace.dumps` writes it).

    One serialisation: the text with ``"run_id":""`` (hashed for the id) becomes the saved text by
    putting the id into that one field (checked: the key occurs exactly once; else it is dumped again).
    """
    blank = trace_io.dumps(dataclasses.replace(trace, run_id=""))
    cid = hashlib.sha256(blank.encode("utf-8")).hexdigest()[:32]
    trace = trace if trace.run_id == cid else dataclasses.replace(trace, run_id=cid)
    field_text = '"run_id":""'
    if blank.count(field_text) == 1:  # a "run_id" inside a string value is escaped (\"run_id\"), never this
        return trace, blank.replace(field_text, f'"run_id":"{cid}"')
    return trace, trace_io.dumps(trace)


_CALL_RECORD_DEFAULTS: dict[type, tuple[tuple[str, Callable[[], Any]], ...]] = {}


def _call_record_defaults(cls: type) -> tuple[tuple[str, Callable[[], Any]], ...]:
    """(name, default maker) of ``cls``'s :data:`CALL_RECORD_FIELDS` (looked up once per record class)."""
    known = _CALL_RECORD_DEFAULTS.get(cls)
    if known is None:
        out: list[tuple[str, Callable[[], Any]]] = []
        for f in dataclasses.fields(cls):
            if f.name in CALL_RECORD_FIELDS:
                if f.default is not dataclasses.MISSING:
                    out.append((f.name, functools.partial(lambda v: v, f.default)))
                elif f.default_factory is not dataclasses.MISSING:
                    out.append((f.name, f.default_factory))
        known = _CALL_RECORD_DEFAULTS[cls] = tuple(out)
    return known


def _without_call_records(record: Any) -> Any:
    """``record`` (plan, claim set, edge) with its :data:`CALL_RECORD_FIELDS` back at their defaults
    (the same object when they are at their defaults already)."""
    reset = {}
    for name, default in _call_record_defaults(type(record)):
        value = default()
        if getattr(record, name) != value:
            reset[name] = value
    return dataclasses.replace(record, **reset) if reset else record


def outcome_key(trace: RunTrace) -> str:
    """Hash of the request (query, settings, source, filter, backend, year) and everything the run found.

    Leaves out :data:`EXECUTION_FIELDS` (when it ran, how long, model calls, cache hits, budget) and the
    :data:`CALL_RECORD_FIELDS` of the plan, each claim set and each edge (cache hit or call, tokens), so
    a rerun of the same query with the same settings, source, backend and corpus that finds the same
    graph, decisions and ranking has the same key.
    """
    blank = RunTrace(**{f.name: getattr(trace, f.name) for f in dataclasses.fields(RunTrace)
                        if f.name not in EXECUTION_FIELDS},
                     budget=Budget(0, 0, 0, 0, 0, 0))
    blank = dataclasses.replace(
        blank, plan=_without_call_records(trace.plan),
        claims={k: _without_call_records(v) for k, v in trace.claims.items()},
        edges=[_without_call_records(e) for e in trace.edges])
    return _digest(blank)


@dataclass
class RunInfo:
    """One saved run, as the runs page lists it (read from the sidecar, not the trace).

    ``error`` is set (and the other fields mostly empty) for a trace file that cannot be read.
    """

    name: str
    path: Path
    query: str
    created_at: str
    run_id: str
    source: str
    backend: str
    counts: dict[str, int] = field(default_factory=dict)
    size_bytes: int = 0
    outcome: str = ""
    error: str = ""
    parent_run_id: str = ""  # the run this one was re-ranked from by auditors' verdicts ("" for none)
    verdicts_applied: int = 0


@dataclass(frozen=True)
class SavedRun:
    """What :meth:`RunStore.save` did: the run's name, the trace as saved, and whether it was already there."""

    name: str
    trace: RunTrace
    existed: bool = False


def run_summary(trace: RunTrace, outcome: str | None = None) -> dict[str, Any]:
    """The sidecar of a saved run: query, time, run id, source, backend, stage counts and outcome key
    (``outcome``: :func:`outcome_key` of ``trace`` when the caller has it already)."""
    return {
        "query": trace.query,
        "created_at": trace.created_at,
        "run_id": trace.run_id,
        "source": trace.source,
        "backend": trace.backend.get("backend", ""),
        "counts": trace.stage_counts(),
        "outcome": outcome if outcome is not None else outcome_key(trace),
        "parent_run_id": trace.parent_run_id,
        "verdicts_applied": len(trace.applied_verdicts),
    }


_META_TEXT = ("query", "created_at", "run_id", "source", "backend", "outcome")


def _valid_meta(meta: object) -> dict[str, Any] | None:
    """The sidecar if it has the shape :func:`run_summary` writes, else None."""
    if not isinstance(meta, dict) or not all(isinstance(meta.get(k), str) for k in _META_TEXT):
        return None
    counts = meta.get("counts")
    if not isinstance(counts, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in counts.items()):
        return None
    return meta


def _read_small(path: Path, max_bytes: int) -> bytes:
    """A regular file's bytes (at most ``max_bytes``); OSError for anything else (no FIFO can block)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            raise OSError(f"{path.name} is not a small regular file")
        return f.read(max_bytes + 1)


_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def _file_stamp(path: Path) -> tuple[int, int, int, int] | None:
    """What changes whenever a saved file is replaced or rewritten (device, inode, size, mtime in ns)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None


@dataclass
class _Remembered:
    """A saved file this process wrote or read: its stamp, the outcome key of its trace (computed here
    from the trace, never taken from a sidecar) and the trace, held weakly (strongly for the newest few)."""

    stamp: tuple[int, int, int, int]
    outcome: str | None  # None until asked for (a plain load does not need it)
    trace: weakref.ref[RunTrace]


class _RunMemory:
    """Runs this process saved or loaded, by file path: lets :meth:`RunStore.load` and ``reuse`` skip
    reading, parsing and hashing a trace file that has not changed since (thread-safe; sessions share it)."""

    MAX_ENTRIES = 512  # stamps and keys only (~200 bytes each); the traces are weak references
    KEEP_ALIVE = 2  # the newest traces kept even when no session holds them (a rerun soon after is common)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[Path, _Remembered] = OrderedDict()
        self._alive: list[RunTrace] = []

    def remember(self, path: Path, trace: RunTrace, outcome: str | None,
                 stamp: tuple[int, int, int, int] | None) -> None:
        if stamp is None:
            return
        with self._lock:
            self._entries[path] = _Remembered(stamp, outcome, weakref.ref(trace))
            self._entries.move_to_end(path)
            while len(self._entries) > self.MAX_ENTRIES:
                self._entries.popitem(last=False)
            self._alive = [trace, *[t for t in self._alive if t is not trace]][: self.KEEP_ALIVE]

    def recall(self, path: Path) -> tuple[RunTrace, str | None] | None:
        """(trace, outcome key or None) of ``path`` when it is unchanged since it was remembered and still held."""
        stamp = _file_stamp(path)
        with self._lock:
            entry = self._entries.get(path)
            if entry is None or stamp is None or entry.stamp != stamp:
                return None
            trace = entry.trace()
            return None if trace is None else (trace, entry.outcome)


_MEMORY = _RunMemory()


class RunStore:
    """Saved traces in one folder: ``<stamp>-<run_id>.json`` plus ``.meta.json`` sidecars."""

    def __init__(self, directory: str | os.PathLike[str] | None = None):
        self.directory = Path(directory) if directory else runs_dir()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"cannot use the runs folder {self.directory}: {e.strerror or e}") from None

    @staticmethod
    def _name_for(trace: RunTrace) -> str:
        stamp = _SAFE_NAME.sub("", (trace.created_at or "").replace(":", "").replace("+", "Z"))[:17] or "run"
        return f"{stamp}-{_SAFE_NAME.sub('', trace.run_id) or 'trace'}"

    def save(self, trace: RunTrace, *, reuse: bool = False) -> SavedRun:
        """Save ``trace`` under its content id; never replace a saved file.

        ``reuse``: when a saved run has the same :func:`outcome_key` (the same query, settings, source,
        backend and corpus gave the same result), return that run (``existed=True``) and write nothing.
        The same content saved twice is written once (``existed=True`` the second time).
        """
        trace, text = _identified(trace)
        with self._locked():
            return self._save(trace, text, reuse)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the store's lock file (``.lock``), so concurrent saves see each other's runs."""
        try:
            fd = os.open(self.directory / ".lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except OSError as e:
            raise InputError(f"cannot lock the runs folder {self.directory}: {e.strerror or e}") from None
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _save(self, trace: RunTrace, text: str, reuse: bool) -> SavedRun:
        key = outcome_key(trace)
        if reuse:
            same = next((r for r in self.list() if not r.error and r.outcome == key), None)
            if same is not None:
                try:
                    saved = self.load(same.name)  # not read again when this process saved or read it
                except TraceError:
                    saved = None  # listed a moment ago, gone or damaged now: save this one
                if saved is not None and self._outcome_of(same.path, saved) == key:  # the sidecar told the truth
                    return SavedRun(same.name, saved, existed=True)
        base = self._name_for(trace)
        for attempt in range(100):
            name = base if attempt == 0 else f"{base}-{attempt}"
            target = self.directory / f"{name}.json"
            try:
                existing = _read_small(target, len(text.encode("utf-8")))
            except FileNotFoundError:
                break
            except OSError:
                continue  # something else lives under this name: leave it alone
            if existing == text.encode("utf-8"):
                self._write_meta(name, trace, key)
                _MEMORY.remember(target, trace, key, _file_stamp(target))
                return SavedRun(name, trace, existed=True)
        else:
            raise InputError(f"cannot save the run in {self.directory}: no free file name for {base}")
        atomic.write_text(target, text)
        self._write_meta(name, trace, key)
        _MEMORY.remember(target, trace, key, _file_stamp(target))
        return SavedRun(name, trace)

    def _outcome_of(self, path: Path, trace: RunTrace) -> str:
        """:func:`outcome_key` of ``trace`` (just loaded from ``path``), computed once per unchanged file."""
        known = _MEMORY.recall(path)
        if known is not None and known[0] is trace and known[1] is not None:
            return known[1]
        key = outcome_key(trace)
        if known is not None and known[0] is trace:
            _MEMORY.remember(path, trace, key, _file_stamp(path))
        return key

    def _write_meta(self, name: str, trace: RunTrace, outcome: str | None = None) -> None:
        atomic.write_text(self.directory / f"{name}.meta.json", json.dumps(run_summary(trace, outcome)))

    def import_bytes(self, data: bytes) -> SavedRun:
        """Validate an uploaded trace file and save it (never over another run); :class:`TraceError` if unusable."""
        return self.save(trace_io.loads(data))

    def path(self, name: str) -> Path:
        if _SAFE_NAME.sub("", name) != name or not name or name.startswith("."):
            raise InputError(f"not a run name: {name!r}")
        return self.directory / f"{name}.json"

    def load(self, name: str) -> RunTrace:
        """The saved trace ``name``; its ``run_id`` is its content id (older saves are re-identified).

        A file this process saved or loaded and that has not changed since is not read again.
        """
        path = self.path(name)
        known = _MEMORY.recall(path)
        if known is not None:
            return known[0]
        if not path.is_file():
            raise TraceError(f"no saved run named {name!r} in {self.directory}")
        before = _file_stamp(path)
        trace = with_content_id(trace_io.load(path))
        if before is not None and _file_stamp(path) == before:  # not replaced while it was read
            _MEMORY.remember(path, trace, None, before)
        return trace

    def _info(self, path: Path) -> RunInfo:
        name = path.name[: -len(".json")]
        meta_path = self.directory / f"{name}.meta.json"
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
        try:
            meta = _valid_meta(json.loads(_read_small(meta_path, MAX_META_BYTES)))
        except (OSError, ValueError, RecursionError):
            meta = None
        if meta is None:
            try:
                trace = self.load(name)
            except (TraceError, InputError) as e:
                return RunInfo(name, path, "", "", "", "", "", size_bytes=size, error=str(e))
            meta = run_summary(trace)
            with contextlib.suppress(InputError):  # listing works without a sidecar; the next one retries
                self._write_meta(name, trace)
        parent, applied = meta.get("parent_run_id", ""), meta.get("verdicts_applied", 0)
        return RunInfo(name, path, meta["query"], meta["created_at"], meta["run_id"], meta["source"],
                       meta["backend"], dict(meta["counts"]), size, meta["outcome"],
                       parent_run_id=parent if isinstance(parent, str) else "",
                       verdicts_applied=applied if isinstance(applied, int) and not isinstance(applied, bool) else 0)

    def list(self) -> list[RunInfo]:
        """Saved runs, newest first, then unreadable traces (with :attr:`RunInfo.error`), by name."""
        out: list[RunInfo] = []
        for path in self.directory.glob("*.json"):
            if path.name.endswith(".meta.json") or path.name.startswith("."):
                continue
            out.append(self._info(path))
        out.sort(key=lambda r: (not r.error, r.created_at, r.name), reverse=True)
        return out

    def delete(self, name: str) -> None:
        for p in (self.path(name), self.directory / f"{name}.meta.json"):
            p.unlink(missing_ok=True)


# ---- lineage: which saved run was re-ranked from which -------------------------------------------------------
@dataclass(frozen=True)
class LineageRow:
    """One line of the saved runs' lineage (the Runs page): ``run`` at ``depth`` under the run it was re-ranked
    from (depth 0: a run with re-ranked children whose own parent is not saved here). ``run`` is None for a
    parent that is no longer saved (``run_id`` names it). A row with ``cycle`` (depth 0) names runs that are
    each other's ancestors, in parent order: sidecars no re-ranking writes (crafted or edited), said in words
    by :func:`cycle_text`; the children hanging off the loop follow it."""

    depth: int
    run_id: str
    run: RunInfo | None
    cycle: tuple[str, ...] = ()


def lineage(runs: list[RunInfo]) -> list[LineageRow]:
    """The lineage of ``runs`` (readable :class:`RunInfo` only), as rows in display order: each run with
    re-ranked children, newest first, then its children (oldest first) depth-first; parents no longer saved
    after them; then any loop of parents (:attr:`LineageRow.cycle`). Every run appears at most once. The walk is
    iterative, so a chain of any length (a long stretch of auditing, a crafted folder) costs no recursion."""
    by_id: dict[str, RunInfo] = {}
    for r in runs:
        by_id.setdefault(r.run_id, r)
    children: dict[str, list[RunInfo]] = {}
    for r in by_id.values():
        if r.parent_run_id and r.parent_run_id != r.run_id:
            children.setdefault(r.parent_run_id, []).append(r)
    for kids in children.values():
        kids.sort(key=lambda x: (x.created_at, x.name))
    rows: list[LineageRow] = []
    shown: set[str] = set()

    def walk(top: str, depth: int) -> None:  # depth-first, children oldest first, without recursion
        stack = [(kid, depth) for kid in reversed(children.get(top, []))]
        while stack:
            run, d = stack.pop()
            if run.run_id in shown:
                continue
            shown.add(run.run_id)
            rows.append(LineageRow(d, run.run_id, run))
            stack.extend((kid, d + 1) for kid in reversed(children.get(run.run_id, [])))

    roots = [r for r in by_id.values() if r.run_id in children and r.parent_run_id not in by_id]
    for r in sorted(roots, key=lambda x: (x.created_at, x.name), reverse=True):
        shown.add(r.run_id)
        rows.append(LineageRow(0, r.run_id, r))
        walk(r.run_id, 1)
    for pid in sorted(p for p in children if p not in by_id):
        rows.append(LineageRow(0, pid, None))
        walk(pid, 1)
    for r in sorted(by_id.values(), key=lambda x: (x.created_at, x.name)):  # left: runs on a loop, or below one
        if r.run_id in shown or not r.parent_run_id:
            continue
        path: list[str] = []
        at: str = r.run_id
        while at in by_id and at not in path and at not in shown:
            path.append(at)
            at = by_id[at].parent_run_id
        if at not in path:  # hangs below a loop already shown (walked there): nothing new
            continue
        loop = tuple(reversed(path[path.index(at):]))  # ancestor first: each is re-ranked from the one before
        shown.update(loop)
        rows.append(LineageRow(0, loop[0], by_id[loop[0]], cycle=loop))
        for member in loop:
            walk(member, 1)
    return rows


def cycle_text(row: LineageRow, width: int = 16) -> str:
    """A loop of parents in words (ids shortened to ``width`` characters)."""
    ids = [i[:width] for i in row.cycle]
    if len(ids) == 1:
        return (f"run {ids[0]} names itself as the run it was re-ranked from: no re-ranking does that (its sidecar "
                "file was crafted or edited)")
    chain = " → ".join([*ids, ids[0]])
    return (f"{len(ids)} runs are each re-ranked from the one before them, in a loop ({chain}): no re-ranking makes "
            "a loop (their sidecar files were crafted or edited), so none of them is the first of its line")
