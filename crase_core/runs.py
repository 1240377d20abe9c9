"""Saved runs: every run kept as its trace JSON, plus a small sidecar for fast listing.

* :func:`runs_dir` — ``$CRASE_RUNS_DIR``, else ``<cache root>/runs``.
* :class:`RunStore` — save, import, load, list and delete traces in one folder.
* :class:`RunInfo` / :func:`run_summary` — what a listing shows of a run without reading its trace.

Run names are built from the trace's timestamp and run id with every character
outside ``[A-Za-z0-9_.-]`` removed, and :meth:`RunStore.path` refuses any other
name, so no path is ever built from untrusted text.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import environment
from . import trace as trace_io
from .cache import cache_root
from .errors import InputError, TraceError
from .trace import RunTrace


def runs_dir() -> Path:
    """``$CRASE_RUNS_DIR``, else ``<cache root>/runs`` (created)."""
    root = environment.get(environment.RUNS_DIR)
    path = Path(root) if root else cache_root() / "runs"
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class RunInfo:
    """One saved run, as the runs page lists it (read from the sidecar, not the trace)."""

    name: str
    path: Path
    query: str
    created_at: str
    run_id: str
    source: str
    backend: str
    counts: dict[str, int] = field(default_factory=dict)
    size_bytes: int = 0


def run_summary(trace: RunTrace) -> dict[str, Any]:
    """The sidecar of a saved run: query, time, run id, source, backend and stage counts."""
    return {
        "query": trace.query,
        "created_at": trace.created_at,
        "run_id": trace.run_id,
        "source": trace.source,
        "backend": trace.backend.get("backend", ""),
        "counts": trace.stage_counts(),
    }


_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


class RunStore:
    """Saved traces in one folder: ``<stamp>-<run_id>.json`` plus ``.meta.json`` sidecars."""

    def __init__(self, directory: str | os.PathLike[str] | None = None):
        self.directory = Path(directory) if directory else runs_dir()
        self.directory.mkdir(parents=True, exist_ok=True)

    def _name_for(self, trace: RunTrace) -> str:
        stamp = _SAFE_NAME.sub("", (trace.created_at or "").replace(":", "").replace("+", "Z"))[:17] or "run"
        return f"{stamp}-{_SAFE_NAME.sub('', trace.run_id) or 'trace'}"

    def save(self, trace: RunTrace) -> str:
        """Write the trace and its sidecar; return the run's name (stable for the same run)."""
        name = self._name_for(trace)
        trace_io.save(trace, self.directory / f"{name}.json")
        (self.directory / f"{name}.meta.json").write_text(json.dumps(run_summary(trace)), encoding="utf-8")
        return name

    def import_bytes(self, data: bytes) -> tuple[str, RunTrace]:
        """Validate an uploaded trace file, save it into the store; raise :class:`TraceError` if unusable."""
        trace = trace_io.loads(data)
        return self.save(trace), trace

    def path(self, name: str) -> Path:
        if _SAFE_NAME.sub("", name) != name or not name:
            raise InputError(f"not a run name: {name!r}")
        return self.directory / f"{name}.json"

    def load(self, name: str) -> RunTrace:
        path = self.path(name)
        if not path.is_file():
            raise TraceError(f"no saved run named {name!r} in {self.directory}")
        return trace_io.load(path)

    def list(self) -> list[RunInfo]:
        """Saved runs, newest first. Traces without a readable sidecar are summarised from the trace."""
        out: list[RunInfo] = []
        for path in self.directory.glob("*.json"):
            if path.name.endswith(".meta.json"):
                continue
            name = path.name[: -len(".json")]
            meta_path = self.directory / f"{name}.meta.json"
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                try:
                    meta = run_summary(trace_io.load(path))
                    meta_path.write_text(json.dumps(meta), encoding="utf-8")
                except TraceError:
                    continue
            out.append(
                RunInfo(name, path, str(meta.get("query", "")), str(meta.get("created_at", "")),
                        str(meta.get("run_id", "")), str(meta.get("source", "")), str(meta.get("backend", "")),
                        dict(meta.get("counts", {})), path.stat().st_size)
            )
        out.sort(key=lambda r: (r.created_at, r.name), reverse=True)
        return out

    def delete(self, name: str) -> None:
        for p in (self.path(name), self.directory / f"{name}.meta.json"):
            p.unlink(missing_ok=True)
