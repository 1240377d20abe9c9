"""Citation contexts of a local corpus: the citing sentences and intents of an edge, where the corpus has them.

An optional file of a corpus folder, ``citation_contexts.jsonl``, one JSON object a line::

    {"citing": "215416146", "cited": "1624374", "contexts": ["… as shown by [4] …"], "intents": ["background"]}

sorted by ``citing`` then ``cited`` (as ``crase corpus import`` writes it: the S2 datasets' ``contexts`` and
``intents``). :class:`CitationContexts` finds an edge by binary search over the file's bytes (a dozen line
reads; no index, nothing held in memory), or, for a file under :data:`SMALL_FILE` bytes, from a dict read
once (an unsorted hand-made file works then too). A line that is not such a record is skipped; nothing
in the file is executed. The contexts are shown in the edge inspector and traces; they do not change any score.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

FILE = "citation_contexts.jsonl"
#: a file smaller than this is read into a dict at first use (any order)
SMALL_FILE = 8 << 20
#: a longer line is not a context record (skipped)
MAX_LINE = 1 << 20
Key = tuple[str, str]


def record(line: bytes | str) -> tuple[Key, list[str], list[str]] | None:
    """((citing, cited), contexts, intents) of one line; None when it is not a context record."""
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(row, dict) or not isinstance(row.get("citing"), str) or not isinstance(row.get("cited"), str):
        return None
    ctx, intents = row.get("contexts"), row.get("intents")
    return ((row["citing"], row["cited"]),
            [c for c in ctx if isinstance(c, str)] if isinstance(ctx, list) else [],
            [i for i in intents if isinstance(i, str)] if isinstance(intents, list) else [])


def line(citing: str, cited: str, contexts: Iterable[str], intents: Iterable[str]) -> str:
    """One line of the file (with its newline)."""
    return json.dumps({"citing": citing, "cited": cited, "contexts": list(contexts), "intents": list(intents)},
                      ensure_ascii=False) + "\n"


class CitationContexts:
    """Reads ``citation_contexts.jsonl`` of one corpus folder (module docstring)."""

    def __init__(self, path: Path):
        self.path = path
        self.size = path.stat().st_size
        self._small: dict[Key, tuple[list[str], list[str]]] | None = None
        if self.size < SMALL_FILE:
            self._small = {}
            with open(path, "rb") as f:
                for raw in f:
                    rec = record(raw) if len(raw) <= MAX_LINE else None
                    if rec is not None:
                        self._small.setdefault(rec[0], (rec[1], rec[2]))

    @classmethod
    def open(cls, folder: Path | None) -> CitationContexts | None:
        """The contexts of the corpus folder ``folder``; None when it has no contexts file (or it is unreadable)."""
        if folder is None or not (folder / FILE).is_file():
            return None
        try:
            return cls(folder / FILE)
        except OSError as e:
            log.warning("citation contexts of %s are unreadable (%s); the inspector shows none", folder, e)
            return None

    def lookup(self, citing: str, cited: str) -> tuple[list[str], list[str]]:
        """(contexts, intents) of the edge citing → cited; ([], []) when the file has none."""
        if self._small is not None:
            return self._small.get((citing, cited), ([], []))
        for key, ctx, intents in self._scan((citing, cited)):
            if key == (citing, cited):
                return ctx, intents
            break
        return [], []

    def of_edges(self, edges: Iterable[Key]) -> dict[Key, tuple[list[str], list[str]]]:
        """(contexts, intents) of every edge of ``edges`` the file has: one search per citing paper."""
        wanted: dict[str, set[str]] = {}
        for u, v in edges:
            wanted.setdefault(u, set()).add(v)
        out: dict[Key, tuple[list[str], list[str]]] = {}
        for u in sorted(wanted):
            if self._small is not None:
                out.update({(u, v): self._small[(u, v)] for v in wanted[u] if (u, v) in self._small})
                continue
            for key, ctx, intents in self._scan((u, "")):
                if key[0] != u:
                    break
                if key[1] in wanted[u]:
                    out[key] = (ctx, intents)
        return out

    def _scan(self, target: Key) -> Iterator[tuple[Key, list[str], list[str]]]:
        """The records from the first one whose key is ≥ ``target`` on, in file order (binary search)."""
        try:
            with open(self.path, "rb") as f:
                lo, hi = 0, self.size
                while hi - lo > 4096:
                    mid = (lo + hi) // 2
                    start, end, rec = _line_from(f, mid)
                    if rec is None or start >= hi:
                        hi = mid
                    elif rec[0] < target:
                        lo = end
                    else:
                        hi = start
                f.seek(lo)
                for raw in iter(lambda: f.readline(MAX_LINE), b""):
                    rec = record(raw)
                    if rec is not None and rec[0] >= target:
                        yield rec
        except OSError as e:
            log.warning("citation contexts %s became unreadable (%s)", self.path, e)


def _line_from(f: IO[bytes], pos: int) -> tuple[int, int, Any]:
    """(start, end, record) of the first whole line starting at or after byte ``pos`` (the next parsable one)."""
    f.seek(max(0, pos - 1))
    if pos > 0:
        f.readline(MAX_LINE * 4)  # the rest of the line ``pos`` falls in
    while True:
        start = f.tell()
        raw = f.readline(MAX_LINE)
        if not raw:
            return start, start, None
        rec = record(raw)
        if rec is not None:
            return start, f.tell(), rec


def file_size(folder: Path) -> int:
    """Bytes of the folder's contexts file (0 when it has none)."""
    try:
        return os.stat(folder / FILE).st_size
    except OSError:
        return 0
