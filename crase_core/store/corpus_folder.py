"""A corpus folder's on-disk form: found, built, grown and merged.

:func:`open_or_build` maps the corpus of a folder — one store (:mod:`crase_core.store.corpus_store`) or a store and
its appended segments (:mod:`crase_core.store.segments`) — building a store first when there is none;
:func:`add_papers` grows the folder's files and publishes one segment (``crase corpus add``);
:func:`merge_segments` folds a store and its segments into one store (``crase corpus merge``). One append
or merge runs at a time per corpus (a lock file beside the fingerprint memo).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crase_core import atomic
from crase_core.errors import CorpusError
from crase_core.store import append_journal, corpus_store, segments
from crase_core.store.corpus import Corpus, find_file, parse_paper_line, read_lines
from crase_core.store.corpus_store import (
    _CHUNK_BYTES,
    Progress,
    _chunks,
    _memo_path,
    _no_progress,
    _parse_chunk,
    open_store,
    remember_fingerprint,
    remove_store,
    source_fingerprint,
    store_path,
)
from crase_core.store.textindex import TextIndex, index_folder

log = logging.getLogger("crase_core.store.corpus_store")


def _appended_text(path: Path) -> str:
    """The text of a corpus file as it will be appended: its decoded lines, the last one ended by a newline."""
    text = "".join(line for _, line in read_lines(path))
    return text if not text or text.endswith("\n") else text + "\n"


def _new_paper_text(path: Path, known: Mapping[str, int]) -> str:
    """The lines of the new ``papers.jsonl`` that add a paper: its id is neither in the corpus (``known``)
    nor on an earlier line of the batch (the first record of an id wins, as the loader reads it); each
    ended by a newline. Blank lines and records without an id are left out."""
    seen: set[str] = set()
    out: list[str] = []
    for lineno, line in read_lines(path):
        paper = parse_paper_line(line, path, lineno)
        if paper is None or paper.id in seen or paper.id in known:
            continue
        seen.add(paper.id)
        out.append(line if line.endswith("\n") else line + "\n")
    return "".join(out)


def _planned(path: Path, text: str) -> append_journal.Planned:
    """The bytes appending ``text`` adds to a corpus file: a new gzip member for ``.gz`` (read back as one
    stream), else plain bytes; a newline first when the file does not end with one, so the last old line
    and the first new one stay apart."""
    size = path.stat().st_size
    if path.suffix == ".gz":
        import gzip

        data = gzip.compress(("\n" + text).encode("utf-8", "surrogatepass"), mtime=0) if text else b""
        return append_journal.Planned(path.name, size, data)
    sep = ""
    if size and text:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            sep = "" if f.read(1) == b"\n" else "\n"
    return append_journal.Planned(path.name, size, (sep + text).encode("utf-8", "surrogatepass"))


def _source(p: append_journal.Planned) -> list[Any]:
    """``[start, end, sha256]`` of the bytes an append writes to one file (a segment's ``source``)."""
    return [p.before, p.before + len(p.data), hashlib.sha256(p.data).hexdigest()]


def _settle_interrupted_append(folder: Path) -> None:
    """Complete or roll back an append to ``folder`` that died (:mod:`crase_core.store.append_journal`)."""
    pattern = re.compile(rf"{re.escape(folder.name)}-([0-9a-f]{{16}})-v{corpus_store.VERSION}\.seg")
    found: list[str] = []

    def published(name: str) -> bool:
        m = pattern.fullmatch(name)
        if m is None or not (segments.segment_path(folder.name, m.group(1)) / "meta.json").is_file():
            return False
        found.append(m.group(1))
        return True

    if append_journal.recover(folder, published) == "completed":
        remember_fingerprint(folder, [find_file(folder, "papers.jsonl"), find_file(folder, "citations.tsv")], found[-1])


def open_or_build(folder: Path, *, workers: int = 1, progress: Progress = _no_progress) -> Corpus:
    """The corpus of ``folder`` from its store — one store, or a store and its appended segments
    (:mod:`crase_core.store.segments`) — building a store (and text index) first when there is none or it is
    damaged (a warning says why). CorpusError for a bad corpus; OSError when the cache folder cannot be
    written (the caller then parses into memory). An append that died is settled first (completed or
    rolled back, :mod:`crase_core.store.append_journal`); one that is running is waited for."""
    _settle_interrupted_append(folder)
    papers_path, cites_path = find_file(folder, "papers.jsonl"), find_file(folder, "citations.tsv")
    fp = source_fingerprint(folder, [papers_path, cites_path])
    path = store_path(folder.name, fp)
    for _ in range(3):  # a merge may replace the segments by a store while we look: look again
        if path.is_dir():
            try:
                return open_store(path, fp, folder.name)
            except (OSError, ValueError, KeyError, TypeError) as e:
                log.warning("corpus store %s is damaged (%s); rebuilding it", path, e)
                remove_store(path)
                break
        seg = segments.segment_path(folder.name, fp)
        if not seg.is_dir():
            found = segments.find_chain(folder, [papers_path, cites_path], fp)
            if found is None:
                break
            fp, seg = found
            path = store_path(folder.name, fp)
            remember_fingerprint(folder, [papers_path, cites_path], fp)
        try:
            return segments.open_chain(seg, fp, folder.name)
        except (OSError, ValueError, KeyError, TypeError) as e:
            if path.is_dir():
                continue
            log.warning("corpus store %s is damaged (%s); rebuilding it", seg, e)
            remove_store(seg)
            break
    progress(f"building the corpus store of {folder} (once; later opens map it)")
    corpus_store.build(folder, fp, path, folder.name, index_target=index_folder(folder.name, fp), workers=workers,
          progress=progress)
    return open_store(path, fp, folder.name)


def _lock(folder: Path) -> Any:
    lock_path = _memo_path(folder).with_suffix(".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    return open(lock_path, "a")  # noqa: SIM115 (the caller's with-block closes it)


def add_papers(folder: Path, new_folder: Path, *, progress: Progress = _no_progress,
               merge_policy: bool = True) -> dict[str, int]:
    """Append the papers (``papers.jsonl``) and citation lines (``citations.tsv``, optional) of ``new_folder``
    to the corpus ``folder``: its files grow by those lines and a new segment holding only what they add
    is published beside its store (:mod:`crase_core.store.segments`); no existing store file is rewritten, so the
    cost follows the batch. The corpus then reads exactly as a build of the grown files would, under a new
    (chained) fingerprint. Papers whose id the corpus (or an earlier line of the batch) has are not
    appended; a batch that adds nothing (no paper, citation or new pending line) appends nothing.

    All or nothing: the batch is parsed and checked in full and its segment built before a byte is
    appended; the append runs under a journal (:mod:`crase_core.store.append_journal`), so a failed one leaves
    the corpus files exactly as before (CorpusError, one line) and one that died is settled at the next
    open. One append at a time per corpus. With ``merge_policy``, an append that leaves too many
    segments merges them (:func:`segments.needs_merge`, :func:`merge_segments`; a merge that fails is a
    warning: the append stands)."""
    start = time.perf_counter()
    new_folder = Path(new_folder)
    if not new_folder.is_dir():
        raise CorpusError(f"folder of new papers {new_folder} does not exist")
    new_papers = find_file(new_folder, "papers.jsonl")
    try:
        new_cites: Path | None = find_file(new_folder, "citations.tsv")
    except CorpusError:
        new_cites = None
    try:
        with _lock(folder) as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            counts, grown = _add_locked(folder, new_papers, new_cites, progress)
            progress(f"appended {counts['papers']:,} papers and {counts['citations']:,} citations as a segment in "
                     f"{time.perf_counter() - start:.1f} s" if grown else "nothing new to append")
            if merge_policy and grown is not None and segments.needs_merge(grown):
                progress(f"{len(grown.segments)} segments: merging them into one store")
                try:
                    _merge_locked(folder, grown)
                except OSError as e:
                    log.warning("the append stands, but merging the segments failed (%s); run `crase corpus "
                                "merge %s` later", e.strerror or e, folder)
    except OSError as e:
        raise CorpusError(f"cannot append to the corpus {folder}: {os_reason(e)}; its files are unchanged") from None
    return counts


def os_reason(e: OSError) -> str:
    """What an OSError says, with its file; a short write (numpy's, without errno) says what it likely is
    (``crase corpus add`` and ``crase corpus import`` word their one line with it)."""
    text = str(e.strerror or e)
    if e.errno is None and "requested and" in text:
        text += ": a short write (is the disk full?)"
    if e.filename and Path(str(e.filename)).name == append_journal.JOURNAL:
        return f"{text}: its folder must be writable (an append keeps its journal {append_journal.JOURNAL} there)"
    return text + (f" ({e.filename})" if e.filename else "")


def _add_locked(folder: Path, new_papers: Path, new_cites: Path | None,
                progress: Progress) -> tuple[dict[str, int], Corpus | None]:
    """:func:`add_papers` under the corpus's lock: (counts, the grown corpus or None when nothing was added)."""
    corpus = open_or_build(folder, progress=progress)
    # every new line is parsed (and so checked) once, before anything is written
    chunks = [_parse_chunk(job) for job in _chunks(new_papers, _CHUNK_BYTES)]
    papers_text = _new_paper_text(new_papers, corpus.index)
    cites_text = _appended_text(new_cites) if new_cites else ""
    unchanged = {"papers": 0, "citations": 0, "total_papers": len(corpus), "appended": 0}
    if not papers_text.strip() and not cites_text.strip():
        return unchanged, None
    papers_path, cites_path = find_file(folder, "papers.jsonl"), find_file(folder, "citations.tsv")
    if not corpus.segments:
        TextIndex.for_corpus(corpus)  # the first part's index exists before a segment refers to it
    planned = [_planned(papers_path, papers_text), _planned(cites_path, cites_text)]
    source = {"papers": _source(planned[0]), "citations": _source(planned[1])}
    fp = segments.chain_fingerprint(corpus.fingerprint, source["papers"][2], source["citations"][2])
    target = segments.segment_path(folder.name, fp)
    tmp, added = segments.build_segment(corpus, chunks, new_cites, fp, target, source)
    if added.adds_nothing:
        shutil.rmtree(tmp, ignore_errors=True)
        return unchanged, None
    try:
        with append_journal.appending(folder, planned, target.name) as job:
            job.write()
            atomic.publish_dir(tmp, target)
            remember_fingerprint(folder, [papers_path, cites_path], fp)
            job.commit()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    counts = {"papers": added.papers, "citations": added.citations, "total_papers": added.total_papers,
              "appended": 1}
    return counts, segments.open_chain(target, fp, folder.name)


def _merge_locked(folder: Path, corpus: Corpus) -> Path:
    target = store_path(folder.name, corpus.fingerprint)
    segments.merge(corpus, target, index_folder(folder.name, corpus.fingerprint))
    chain = segments.load_chain(corpus)
    for seg in chain.segments:
        remove_store(seg.path)
    remove_store(chain.base_path)
    remove_store(index_folder(folder.name, str(chain.base_meta["fingerprint"])))
    return target


def merge_segments(folder: Path, *, progress: Progress = _no_progress) -> dict[str, int]:
    """Fold the corpus's store and its appended segments into one store (``crase corpus merge``), under the
    same fingerprint; the segments and the old store are removed (processes that mapped them keep their
    mapping). Returns the number of segments merged (0: nothing to do)."""
    start = time.perf_counter()
    with _lock(folder) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        corpus = open_or_build(folder, progress=progress)
        if not corpus.segments:
            return {"segments": 0, "papers": len(corpus)}
        _merge_locked(folder, corpus)
        progress(f"merged {len(corpus.segments)} segments in {time.perf_counter() - start:.1f} s")
        return {"segments": len(corpus.segments), "papers": len(corpus)}
