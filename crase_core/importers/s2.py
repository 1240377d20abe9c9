"""``crase corpus import --format s2``: Semantic Scholar Datasets files (``papers``, ``abstracts``, ``citations``).

SRC is a folder holding the files of each dataset as the datasets API ships them (JSON lines, gzip or not,
any file names): either one sub-folder per dataset (``papers/``, ``abstracts/``, ``citations/``) or files whose
names start with the dataset's name (``papers-part0.jsonl.gz``, ``abstracts.jsonl`` …). ``papers`` is
required; ``abstracts`` and ``citations`` are optional (a corpus without them has no abstracts / no graph,
and the report says so). The records map by :mod:`crase_core.importers.s2_datasets`; ids are corpus ids.

Passes, each streaming, memory bounded but for the id set: (1) papers → their records without the abstract
(scratch file, in order), (2) abstracts of those papers → a scratch SQLite table, (3) the records joined with
their abstracts → ``papers.jsonl``, (4) citations between those papers → ``citations.tsv``, their ``contexts``
and ``intents`` → a scratch table, then ``citation_contexts.jsonl`` sorted by (citing, cited).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from crase_core.errors import CorpusError
from crase_core.importers.import_io import (
    BLOCK,
    Converted,
    IdSet,
    Progress,
    Steps,
    contexts_db,
    lines_of,
    ordered_map,
    read_blocks,
    sorted_contexts,
    source_bytes,
)
from crase_core.importers.s2_datasets import abstract_of, citation_of, paper_line

DATASETS = ("papers", "abstracts", "citations")
#: the ids every citations worker filters against (set before the workers fork; read-only there)
_IDS: set[str] = set()


def find_files(src: Path) -> dict[str, list[Path]]:
    """The files of each dataset under SRC (module docstring), sorted by name; CorpusError without papers."""
    if not src.is_dir():
        raise CorpusError(f"{src} is not a folder: --format s2 imports a folder of Semantic Scholar datasets files "
                          "(papers/, abstracts/, citations/)")
    out: dict[str, list[Path]] = {}
    for name in DATASETS:
        sub = src / name
        files = sorted(p for p in sub.iterdir() if p.is_file() and not p.name.startswith(".")) if sub.is_dir() else []
        files += sorted(p for p in src.iterdir() if p.is_file() and p.name.lower().startswith(name))
        out[name] = files
    if not out["papers"]:
        raise CorpusError(f"{src} holds no papers files (a papers/ folder, or files named papers…): the papers "
                          "dataset is required")
    return out


def _rows(name: str, first: int, block: bytes) -> Iterator[tuple[int, object]]:
    for lineno, raw in lines_of(block, first):
        try:
            yield lineno, json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise CorpusError(f"{name}:{lineno}: not a JSON line ({str(e)[:80]}); the file is damaged or not a "
                              "Semantic Scholar datasets file") from None


@dataclass
class _Papers:
    ids: list[str] = field(default_factory=list)
    heads: list[bytes] = field(default_factory=list)  # the record's JSON without its closing brace
    records: int = 0


def papers_block(job: tuple[str, int, bytes]) -> _Papers:
    name, first, block = job
    out = _Papers()
    for _, row in _rows(name, first, block):
        out.records += 1
        rec = paper_line(row)
        if rec is not None:
            out.ids.append(rec["id"])
            out.heads.append(json.dumps(rec, ensure_ascii=False).encode("utf-8", "surrogatepass")[:-1])
    return out


def abstracts_block(job: tuple[str, int, bytes]) -> tuple[int, list[tuple[str, str]]]:
    name, first, block = job
    found: list[tuple[str, str]] = []
    n = 0
    for _, row in _rows(name, first, block):
        n += 1
        rec = abstract_of(row)
        if rec is not None and rec[0] in _IDS:
            found.append(rec)
    return n, found


@dataclass
class _Citations:
    lines: bytes = b""
    contexts: list[tuple[str, str, str, str]] = field(default_factory=list)
    records: int = 0
    without_id: int = 0
    outside: int = 0


def citations_block(job: tuple[str, int, bytes]) -> _Citations:
    name, first, block = job
    out = _Citations()
    kept: list[bytes] = []
    for _, row in _rows(name, first, block):
        out.records += 1
        c = citation_of(row)
        if c is None:
            out.without_id += 1
        elif c.citing not in _IDS or c.cited not in _IDS:
            out.outside += 1
        else:
            kept.append(f"{c.citing}\t{c.cited}\n".encode())
            if c.contexts or c.intents:
                out.contexts.append((c.citing, c.cited, json.dumps(list(c.contexts), ensure_ascii=False),
                                     json.dumps(list(c.intents))))
    out.lines = b"".join(kept)
    return out


def _jobs(paths: list[Path], steps: Steps, stage: str) -> Iterator[tuple[str, int, bytes]]:
    for path in paths:
        for first, block, read in read_blocks(path, BLOCK):
            steps(stage, read, f"reading {stage} ({path.name})")
            yield str(path), first, block
        steps.file_done(path.stat().st_size)


def _papers_pass(files: list[Path], heads: Path, workers: int, steps: Steps, c: Counter[str]) -> IdSet:
    ids = IdSet()
    with open(heads, "wb") as f:
        for res in ordered_map(papers_block, _jobs(files, steps, "papers"), workers):
            c["papers records read"] += res.records
            c["no_id"] += res.records - len(res.ids)
            for pid, head in zip(res.ids, res.heads, strict=True):
                if ids.add(pid):
                    f.write(pid.encode() + b"\t" + head + b"\n")
                else:
                    c["duplicate"] += 1
    return ids


def _abstracts_pass(files: list[Path], db: sqlite3.Connection, workers: int, steps: Steps, c: Counter[str]) -> None:
    db.execute("CREATE TABLE abstract (id TEXT PRIMARY KEY, text TEXT) WITHOUT ROWID")
    for n, found in ordered_map(abstracts_block, _jobs(files, steps, "abstracts"), workers):
        c["abstracts records read"] += n
        db.executemany("INSERT OR IGNORE INTO abstract VALUES (?, ?)", found)


def _join(heads: Path, db: sqlite3.Connection, out: Path, c: Counter[str]) -> None:
    """papers.jsonl: each record of ``heads`` closed with its abstract (from ``db``; "" without)."""
    with open(heads, "rb") as f, open(out, "wb") as w:
        batch: list[tuple[str, bytes]] = []
        for raw in f:
            pid, _, head = raw.rstrip(b"\n").partition(b"\t")
            batch.append((pid.decode(), head))
            if len(batch) >= 500:
                _write_joined(batch, db, w, c)
                batch = []
        _write_joined(batch, db, w, c)


def _write_joined(batch: list[tuple[str, bytes]], db: sqlite3.Connection, w: BinaryIO, c: Counter[str]) -> None:
    if not batch:
        return
    marks = ",".join("?" * len(batch))
    found = dict(db.execute(f"SELECT id, text FROM abstract WHERE id IN ({marks})", [p for p, _ in batch]))
    c["with_abstract"] += len(found)
    for pid, head in batch:
        text = json.dumps(found.get(pid, ""), ensure_ascii=False).encode("utf-8", "surrogatepass")
        w.write(head + b', "abstract": ' + text + b"}\n")


def _citations_pass(files: list[Path], tmp: Path, db: sqlite3.Connection, workers: int, steps: Steps,
                    c: Counter[str]) -> None:
    with open(tmp / "citations.tsv", "wb") as f:
        for res in ordered_map(citations_block, _jobs(files, steps, "citations"), workers):
            c["citations records read"] += res.records
            c["without_id"] += res.without_id
            c["outside"] += res.outside
            f.write(res.lines)
            db.executemany("INSERT OR IGNORE INTO ctx VALUES (?, ?, ?, ?)", res.contexts)


def convert_s2(src: Path, tmp: Path, work: Path, workers: int, progress: Progress) -> Converted:
    """Write papers.jsonl, citations.tsv and citation_contexts.jsonl of the datasets files of SRC into ``tmp``."""
    global _IDS
    files = find_files(src)
    steps = Steps(source_bytes([p for group in files.values() for p in group]), progress)
    c: Counter[str] = Counter()
    ids = _papers_pass(files["papers"], work / "papers.heads", workers, steps, c)
    if not ids:
        raise CorpusError(f"{src}: the papers files hold no record with a corpusid")
    db = contexts_db(work / "scratch.sqlite")
    try:
        _IDS = ids.seen  # the workers forked below read it
        _abstracts_pass(files["abstracts"], db, workers, steps, c)
        _join(work / "papers.heads", db, tmp / "papers.jsonl", c)
        _citations_pass(files["citations"], tmp, db, workers, steps, c)
        n_contexts = sorted_contexts(db, tmp / "citation_contexts.jsonl")
    finally:
        _IDS = set()
        db.close()
    if not n_contexts:
        (tmp / "citation_contexts.jsonl").unlink()
    out = {"papers records read": c["papers records read"]}
    if c["no_id"]:
        out["papers records without a corpusid (dropped)"] = c["no_id"]
    if c["duplicate"]:
        out["papers found twice (the first kept)"] = c["duplicate"]
    out["abstracts records read"] = c["abstracts records read"]
    out["papers without an abstract"] = len(ids) - c["with_abstract"]
    out["citations records read"] = c["citations records read"]
    if c["without_id"]:
        out["citations without both corpus ids (dropped)"] = c["without_id"]
    out["citations to or from papers outside the import (dropped)"] = c["outside"]
    out["citations with contexts or intents kept"] = n_contexts
    return Converted(out)
