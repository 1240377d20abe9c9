"""One evaluation run in one file: ``DIR/run.json.gz``.

A run of ``crase eval`` (and of ``benchmarks/eval_dev.py``) leaves its folder ``DIR`` holding this one
file, gzip'd JSON (written with a fixed header, so the same run gives the same bytes)::

    {"format": "crase-eval-run", "version": 1,
     "config": {...},     # what the run pinned (EvalJob.fingerprint): a rerun with anything else is refused
     "summary": {...},    # recall@k and map@k for k in 5…50, queries, medians of |V|, |E|, calls, wall time,
                          # errors, the job
     "rankings": true,    # whether the rows keep their ranked lists
     "rows": [{...}, …]}  # one per query: qid, method, n_relevant, hits@k and ap@k for every k (what the paired
                          # tests compare), costs, error; ranked (top-k ids) when "rankings" is true

While a run is in progress its folder also holds ``journal.jsonl`` (the harness's: the pin on the first
line, then one row per finished query, flushed as it finishes), folded into the run file when the run ends.

:func:`read_run` reads with bounds (compressed and decompressed size) before anything parses, and checks the
shape; every problem is a :class:`RunFileError` naming the file. :func:`pack_legacy` turns a run folder of
the older form (``config.json``, ``summary.json``, ``per_query.jsonl``) into the one file, numbers unchanged.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crase_core import atomic
from crase_core.bounded import Unreadable, read_regular
from crase_core.errors import InputError

RUN_FILE = "run.json.gz"
FORMAT = "crase-eval-run"
VERSION = 1
#: the fields of a row that name papers (the top-k list, and the source's own ids when the gold is mapped)
RANKING_FIELDS = ("ranked", "source_ids")
#: the files of a run folder of the older form (before the run file); ``.lock`` was its lock file
LEGACY_FILES = ("per_query.jsonl", "config.json", "summary.json", ".lock")
#: default bounds of :func:`read_run`: the file as stored, and the JSON it decompresses to
MAX_FILE_BYTES = 256 << 20
MAX_JSON_BYTES = 2 << 30


class RunFileError(InputError):
    """A run file that cannot be used (unreadable, too large, not gzip'd JSON, not a run)."""


@dataclass
class RunFile:
    """What a run file holds."""

    config: dict[str, Any]
    summary: dict[str, Any]
    rows: list[dict[str, Any]]
    rankings: bool = True


def run_path(folder: str | os.PathLike[str]) -> Path:
    """Where the run file of the run folder ``folder`` is."""
    return Path(folder) / RUN_FILE


def strip_rankings(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows without their ranked lists (what the paired tests and the summary need is kept)."""
    return [{k: v for k, v in r.items() if k not in RANKING_FIELDS} for r in rows]


def encode(run: RunFile) -> bytes:
    """The bytes of a run file (gzip with no name and no time in its header: the same run, the same bytes)."""
    rows = list(run.rows) if run.rankings else strip_rankings(run.rows)
    doc = {"format": FORMAT, "version": VERSION, "config": run.config, "summary": run.summary,
           "rankings": run.rankings, "rows": rows}
    return gzip.compress(json.dumps(doc, separators=(",", ":")).encode("ascii"), compresslevel=9, mtime=0)


def write_run(folder: str | os.PathLike[str], config: Mapping[str, Any], summary: Mapping[str, Any],
              rows: Sequence[Mapping[str, Any]], *, rankings: bool = True) -> Path:
    """Write (atomically replace) ``folder/run.json.gz``; ``rankings=False`` leaves the ranked lists out."""
    run = RunFile(dict(config), dict(summary), [dict(r) for r in rows], rankings)
    return atomic.write_bytes(run_path(folder), encode(run))


def _gunzip(data: bytes, limit: int) -> bytes:
    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # a gzip member
    out = d.decompress(data, limit + 1)
    if len(out) > limit or d.unconsumed_tail:
        raise ValueError(f"more than {limit:,} bytes once decompressed")
    if not d.eof:
        raise ValueError("the gzip data is cut short")
    return out


def decode(data: bytes, max_json_bytes: int = MAX_JSON_BYTES) -> RunFile:
    """A run file's bytes as a :class:`RunFile`; ValueError saying what is wrong."""
    try:
        text = _gunzip(data, max_json_bytes)
    except zlib.error as e:
        raise ValueError(f"not gzip data ({e})") from None
    try:
        doc = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, RecursionError):
        raise ValueError("not JSON text") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"not valid JSON ({e.msg})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} file")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version > VERSION:
        raise ValueError(f"version {version!r}, this Crase reads version {VERSION}")
    config, summary, rows = doc.get("config"), doc.get("summary"), doc.get("rows")
    if not isinstance(config, dict) or not isinstance(summary, dict):
        raise ValueError("its config or summary is not an object")
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "qid" in r for r in rows):
        raise ValueError("its rows are not a list of per-query objects")
    return RunFile(config, summary, rows, bool(doc.get("rankings", True)))


def read_run(path: str | os.PathLike[str], *, max_file_bytes: int = MAX_FILE_BYTES,
             max_json_bytes: int = MAX_JSON_BYTES) -> RunFile:
    """The run file ``path`` (or a run folder's); :class:`RunFileError` when it cannot be used.

    Never blocks on a FIFO nor reads more than ``max_file_bytes`` (+1), never decompresses more than
    ``max_json_bytes`` (+1)."""
    p = Path(path)
    if p.is_dir():
        p = run_path(p)
    try:
        data = read_regular(p, max_file_bytes)
    except FileNotFoundError:
        raise RunFileError(f"{p}: no such run file") from None
    except (Unreadable, OSError) as e:
        raise RunFileError(f"{p} is unreadable: {e.strerror or e}") from None
    try:
        return decode(data, max_json_bytes)
    except ValueError as e:
        raise RunFileError(f"{p} is unreadable: {e}") from None


def run_rows(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The per-query rows of the run folder ``folder`` (its run file's)."""
    return read_run(folder).rows


def is_run(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` holds a run file (a regular file; its content is not checked)."""
    return run_path(folder).is_file()


# ---- the older form ------------------------------------------------------------------------------------------
def legacy_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of an older run folder's ``per_query.jsonl`` (one JSON object a line); a torn line is skipped."""
    rows: list[dict[str, Any]] = []
    if not path.is_file():
        return rows
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and "qid" in row:
                rows.append(row)
    return rows


def pack_legacy(folder: str | os.PathLike[str], *, rankings: bool = True) -> Path:
    """Write the older run folder ``folder`` (``config.json``, ``summary.json``, ``per_query.jsonl``) as its
    run file, byte for byte the same numbers (rows in the order of ``per_query.jsonl``, the summary as it
    was written), then remove the older files; returns the run file's path."""
    d = Path(folder)
    try:
        config = json.loads((d / "config.json").read_text(encoding="utf-8"))
        summary = json.loads((d / "summary.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RunFileError(f"{d}: its config.json or summary.json is unreadable ({e})") from None
    if not isinstance(config, dict) or not isinstance(summary, dict):
        raise RunFileError(f"{d}: its config.json or summary.json is not an object")
    path = write_run(d, config, summary, legacy_rows(d / "per_query.jsonl"), rankings=rankings)
    for name in LEGACY_FILES:
        (d / name).unlink(missing_ok=True)
    return path
