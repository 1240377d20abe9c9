"""``crase corpus import --format openalex``: an OpenAlex works snapshot, or a file of API results.

SRC is one of

* a works snapshot folder — ``works/updated_date=YYYY-MM-DD/part_000.gz`` … (JSON lines in the Work schema),
  given as the snapshot root (holding ``works/`` or ``data/works/``) or as the ``works`` folder itself, with or
  without its ``manifest`` (Redshift manifest JSON: ``{"entries": [{"url": …, "meta": {"record_count": …}}]}``);
  with a manifest exactly its files are read and each must hold the records it lists (a download that is
  incomplete or cut short stops the import, naming the file), without one every part file found is;
  partitions are read newest first, so of a work found twice the newest copy is kept;
* a file of API results: one JSON object with ``results`` (a page of ``/works``), a JSON list of Works, or
  JSON lines each of which is a Work or such a page (gzip or plain).

Each Work maps by :func:`crase_core.importers.openalex_works.parse_work`; its ``referenced_works`` become citation
lines, and those to works outside SRC are dropped and counted.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from crase_core.errors import CorpusError
from crase_core.importers.import_io import (
    BLOCK,
    MAX_LINE,
    Converted,
    IdSet,
    Progress,
    Steps,
    filter_citations,
    is_gzip,
    lines_of,
    ordered_map,
    read_blocks,
    source_bytes,
)
from crase_core.importers.openalex_works import obj, parse_work

#: a single-document API results file larger than this is read as JSON lines, not parsed whole
MAX_DOCUMENT = 256 << 20
_MANIFEST_MAX = 64 << 20


@dataclass
class PartFile:
    """One file to read: where it is, and the records its manifest entry promises (None: no manifest)."""

    path: Path
    expected: int | None = None


@dataclass
class _Parsed:
    lines: list[bytes] = field(default_factory=list)  # papers.jsonl lines, one per work with an id
    ids: list[str] = field(default_factory=list)
    refs: list[bytes] = field(default_factory=list)  # "id<TAB>ref\n" lines of each work
    records: int = 0  # Work records read (a page's results counted one by one)
    no_id: int = 0
    references: int = 0


def _works_of(value: object) -> list[object]:
    if isinstance(value, dict) and isinstance(value.get("results"), list):
        return list(value["results"])
    if isinstance(value, list):
        return value
    return [value]


def parse_block(job: tuple[str, int, bytes]) -> _Parsed:
    """The works of a block of JSON lines (each line a Work, or a page of API results); CorpusError naming
    the file and line of a line that is not JSON."""
    name, first, block = job
    out = _Parsed()
    for lineno, raw in lines_of(block, first):
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise CorpusError(f"{name}:{lineno}: not a JSON line ({str(e)[:80]}); the file is damaged or not "
                              "OpenAlex works (JSON lines in the Work schema)") from None
        for work in _works_of(value):
            out.records += 1
            rec = parse_work(work)
            if rec is None:
                out.no_id += 1
                continue
            out.ids.append(rec.id)
            out.lines.append(json.dumps(rec.line(), ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n")
            out.refs.append(b"".join(f"{rec.id}\t{r}\n".encode() for r in rec.references))
            out.references += len(rec.references)
    return out


# ---- finding the files ----------------------------------------------------------------------------------
def _works_dir(src: Path) -> Path | None:
    for d in (src, src / "works", src / "data" / "works", src / "data" / "jsonl" / "works"):
        if d.is_dir() and (any(p.is_dir() and p.name.startswith("updated_date=") for p in d.iterdir())
                           or (d / "manifest").is_file() or (d / "manifest.json").is_file()):
            return d
    return None


def _parts(works: Path) -> list[Path]:
    """Every part file under ``works`` (``updated_date=*/…``), newest partition first, by name within one."""
    dirs = sorted((p for p in works.iterdir() if p.is_dir() and p.name.startswith("updated_date=")),
                  key=lambda p: p.name, reverse=True)
    found: list[Path] = []
    for d in dirs:
        found += sorted(p for p in d.iterdir() if p.is_file() and not p.name.startswith("."))
    return found


def _manifest_key(url: str) -> str:
    """The part of a manifest URL that names a file under the works folder (``updated_date=…/part_000.gz``)."""
    parts = [p for p in PurePosixPath(url.split("://", 1)[-1]).parts if p not in ("", "/")]
    if "works" in parts:
        parts = parts[len(parts) - parts[::-1].index("works"):]
    return "/".join(parts[-2:])


def _from_manifest(works: Path, manifest: Path, found: list[Path]) -> list[PartFile]:
    """The found files the manifest lists, in the found order, with their record counts; CorpusError when the
    manifest is unreadable or lists a file that is not there (matched by name: no path is built from it)."""
    if manifest.stat().st_size > _MANIFEST_MAX:
        raise CorpusError(f"{manifest} is over {_MANIFEST_MAX >> 20} MB: not an OpenAlex manifest")
    try:
        doc = json.loads(manifest.read_bytes())
    except (ValueError, RecursionError, OSError) as e:
        raise CorpusError(f"{manifest}: not a readable manifest ({str(e)[:80]}); pass --no-manifest to read the "
                          "part files that are there") from None
    entries = doc.get("entries") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise CorpusError(f"{manifest}: no 'entries' list (a Redshift manifest); pass --no-manifest to read the "
                          "part files that are there")
    by_key = {p.relative_to(works).as_posix(): p for p in found}
    listed: dict[str, int | None] = {}
    for entry in entries:
        url = entry.get("url") if isinstance(entry, dict) else None
        if not isinstance(url, str):
            raise CorpusError(f"{manifest}: an entry without a 'url'")
        meta = obj(entry.get("meta"))
        count = meta.get("record_count")
        listed[_manifest_key(url)] = count if isinstance(count, int) and not isinstance(count, bool) else None
    missing = [k for k in listed if k not in by_key]
    if missing:
        raise CorpusError(f"the manifest lists {len(missing):,} files that are not in {works} (first: "
                          f"{missing[0][:120]}): the download is incomplete; download them, or pass --no-manifest "
                          "to import the files that are there")
    return [PartFile(p, listed[k]) for k, p in by_key.items() if k in listed]


def find_files(src: Path, use_manifest: bool = True) -> tuple[list[PartFile], dict[str, int]]:
    """The files to read for SRC (module docstring) and counts to report (files outside the manifest)."""
    if src.is_file():
        return [PartFile(src)], {}
    works = _works_dir(src)
    if works is None:
        loose = sorted(p for p in src.iterdir() if p.is_file() and p.suffix in (".gz", ".jsonl", ".json"))
        if loose:
            return [PartFile(p) for p in loose], {}
        raise CorpusError(f"{src} holds no OpenAlex works: expected works/updated_date=…/part_*.gz (a snapshot) or "
                          "a file of API results")
    found = _parts(works)
    manifest = next((m for m in (works / "manifest", works / "manifest.json") if m.is_file()), None)
    if manifest is None or not use_manifest:
        if not found:
            raise CorpusError(f"{works} holds no part files (updated_date=…/part_*.gz)")
        return [PartFile(p) for p in found], {}
    files = _from_manifest(works, manifest, found)
    extra = len(found) - len(files)
    return files, ({"part files not in the manifest (not read)": extra} if extra else {})


# ---- converting -----------------------------------------------------------------------------------------------
def _document_works(path: Path) -> list[bytes] | None:
    """The works of an API results file that is one JSON document spread over lines (a pretty-printed page or
    list), as JSON lines; None when its first line is a JSON value of its own (JSON lines, the common case)."""
    if is_gzip(path):
        return None
    with open(path, "rb") as f:
        first = f.readline(MAX_LINE)
    try:
        json.loads(first)
        return None
    except (ValueError, RecursionError):
        pass
    if first.lstrip()[:1] not in (b"{", b"[") or path.stat().st_size > MAX_DOCUMENT:
        return None  # the line reader names the broken line
    try:
        value = json.loads(path.read_bytes())
    except (ValueError, RecursionError):
        return None
    return [json.dumps(w).encode() + b"\n" for w in _works_of(value)]


def _jobs(part: PartFile, steps: Steps) -> Iterator[tuple[str, int, bytes]]:
    doc = _document_works(part.path)
    if doc is not None:
        steps("works", part.path.stat().st_size, f"reading {part.path.name}")
        yield str(part.path), 1, b"".join(doc)
        return
    for first, block, read in read_blocks(part.path, BLOCK):
        steps("works", read, f"reading {part.path.name}")
        yield str(part.path), first, block


def convert_openalex(src: Path, tmp: Path, work: Path, workers: int, progress: Progress,
                     use_manifest: bool = True) -> Converted:
    """Write papers.jsonl and citations.tsv of the works of SRC into ``tmp`` (module docstring)."""
    files, counts = find_files(src, use_manifest)
    steps = Steps(source_bytes([f.path for f in files]), progress)
    ids = IdSet()
    c: Counter[str] = Counter()
    raw_refs = work / "references.tsv"
    with open(tmp / "papers.jsonl", "wb") as papers, open(raw_refs, "wb") as refs:
        for part in files:
            in_file = 0
            for res in ordered_map(parse_block, _jobs(part, steps), workers):
                in_file += res.records
                c["works read"] += res.records
                c["no_id"] += res.no_id
                for k, pid in enumerate(res.ids):
                    if ids.add(pid):
                        papers.write(res.lines[k])
                        refs.write(res.refs[k])
                        c["references"] += res.refs[k].count(b"\n")
                    else:
                        c["duplicate"] += 1
            if part.expected is not None and in_file != part.expected:
                raise CorpusError(f"{part.path} holds {in_file:,} works, its manifest entry says {part.expected:,}: "
                                  "the file is incomplete; download it again")
            steps.file_done(part.path.stat().st_size)
    if not ids:
        raise CorpusError(f"{src} holds no OpenAlex works with an id (https://openalex.org/W…)")
    progress(f"{len(ids):,} works; keeping the references between them")
    read, outside = filter_citations(raw_refs, tmp / "citations.tsv", ids.sorted())
    out = {"works read": c["works read"]}
    if c["no_id"]:
        out["records without a work id (dropped)"] = c["no_id"]
    if c["duplicate"]:
        out["works found twice (the newest partition's copy kept)"] = c["duplicate"]
    out["references read"] = read
    out["references to works outside the import (dropped)"] = outside
    return Converted({**out, **counts})
