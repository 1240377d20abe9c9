"""``crase corpus import SRC DEST --format openalex|s2|jsonl``: a corpus folder, with its store built, from
the formats the field publishes.

:func:`import_corpus` converts SRC into a temporary folder beside DEST (``papers.jsonl``, ``citations.tsv``
and, where the source has them, ``citation_contexts.jsonl``: docs/corpus_formats.md), builds its store
under the cache folder (:func:`crase_core.store.corpus_store.build`, which validates and reports), and only then
renames the folder to DEST: DEST is all or nothing — an import that fails or is interrupted leaves no DEST
(and removes its temporary folder unless the process is killed outright). DEST must not exist (or be an
empty folder).

The formats (:mod:`crase_core.importers.openalex`, :mod:`crase_core.importers.s2`, and ``jsonl``
here) read their files in blocks of whole lines (:func:`crase_core.importers.import_io.read_blocks`: gzip or
plain, found by its magic bytes, at most 64 MB a line), parse the blocks on worker processes in file order
(:func:`crase_core.importers.import_io.ordered_map`) and keep per paper only its id (a set, ~80 B a paper);
citations are filtered against the sorted ids block by block. Memory is bounded whatever the size of SRC
but for that id set. Paths are found by listing SRC; none is built from text read in it (an OpenAlex
manifest's URLs are only matched against the files found).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from crase_core import atomic
from crase_core.errors import CorpusError
from crase_core.importers.import_io import (
    BLOCK,
    Converted,
    Progress,
    Steps,
    contexts_db,
    lines_of,
    read_blocks,
    sorted_contexts,
    source_bytes,
)
from crase_core.importers.openalex import convert_openalex
from crase_core.importers.s2 import convert_s2
from crase_core.store import citation_contexts, corpus_store
from crase_core.store.corpus import find_file, fingerprint
from crase_core.store.corpus_folder import os_reason
from crase_core.store.corpus_store import BuildStep
from crase_core.store.corpus_validation import ValidationReport
from crase_core.store.textindex import index_folder

FORMATS = ("openalex", "s2", "jsonl")


def _no_progress(_: str) -> None:
    pass


@dataclass
class ImportResult:
    """An import's outcome: the corpus folder, the validation report (the build's, plus the converter's
    counts) and the seconds it took."""

    dest: Path
    report: ValidationReport
    n_papers: int
    n_citations: int
    seconds: float


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
    papers = find_file(src, "papers.jsonl")
    _copy(papers, tmp / papers.name, steps, "papers")
    try:
        cites = find_file(src, "citations.tsv")
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


def import_corpus(src: Path, dest: Path, fmt: str, *, workers: int = 1, progress: Progress = _no_progress,
                  manifest: bool = True) -> ImportResult:
    """Import SRC (format ``fmt``) into the new corpus folder DEST and build its store (module docstring).
    :class:`CorpusError` for unusable input and when DEST or the cache cannot be written (a read-only folder, a
    full disk): nothing is left behind."""
    start = time.perf_counter()
    src, dest = Path(src), Path(dest)
    if fmt not in FORMATS:
        raise CorpusError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if not src.exists():
        raise CorpusError(f"{src} does not exist")
    _check_dest(dest)
    try:
        return _import(src, dest, fmt, workers, progress, manifest, start)
    except OSError as e:  # a read-only parent folder, a full disk, the cache unusable: one line, nothing left
        raise CorpusError(f"cannot import into {dest}: {os_reason(e)}; nothing was written (make room, or choose a "
                          "folder you can write, and run the import again)") from None


def _import(src: Path, dest: Path, fmt: str, workers: int, progress: Progress, manifest: bool,
            start: float) -> ImportResult:
    """:func:`import_corpus` once its arguments are checked; OSError when a file cannot be written."""
    try:
        tmp = atomic.temp_dir_beside(dest)
    except OSError as e:
        raise CorpusError(f"cannot import into {dest}: {e.strerror or e}: its folder {dest.parent} must be writable "
                          "(the import builds the corpus there and renames it when done); nothing was written") from None
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
        papers, cites = find_file(tmp, "papers.jsonl"), find_file(tmp, "citations.tsv")
        fp = fingerprint([papers, cites])
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
            yield find_file(src, stem)
    if (src / citation_contexts.FILE).is_file():
        yield src / citation_contexts.FILE
