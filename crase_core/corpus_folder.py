"""A corpus folder's on-disk form: found, built, grown and merged.

:func:`open_or_build` maps the corpus of a folder — one store (:mod:`crase_core.corpus_store`) or a store and
its appended segments (:mod:`crase_core.segments`) — building a store first when there is none;
:func:`add_papers` grows the folder's files and publishes one segment (``crase corpus add``);
:func:`merge_segments` folds a store and its segments into one store (``crase corpus merge``). One append
or merge runs at a time per corpus (a lock file beside the fingerprint memo).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import time
from pathlib import Path
from typing import Any

from . import corpus_store, segments
from .corpus import Corpus, _find, _lines
from .corpus_store import (
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
from .errors import CorpusError
from .textindex import TextIndex, index_folder

log = logging.getLogger("crase_core.corpus_store")


def _appended_text(path: Path) -> str:
    """The text of a corpus file as it will be appended: its decoded lines, the last one ended by a newline."""
    text = "".join(line for _, line in _lines(path))
    return text if not text or text.endswith("\n") else text + "\n"


def _append_to_file(path: Path, text: str) -> list[Any]:
    """Append ``text`` to a corpus file: a new gzip member for ``.gz`` (read back as one stream), else
    plain bytes; a blank line first when needed, so the last old line and the first new one stay apart
    (blank lines are skipped by the parser). Returns ``[start, end, sha256]`` of the bytes written."""
    if path.suffix == ".gz":
        import gzip

        data = gzip.compress(("\n" + text).encode("utf-8", "surrogatepass")) if text else b""
        with open(path, "ab") as f:
            start = f.tell()
            f.write(data)
        return [start, start + len(data), hashlib.sha256(data).hexdigest()]
    with open(path, "rb+") as f:
        f.seek(0, os.SEEK_END)
        start = f.tell()
        sep = ""
        if start and text:
            f.seek(-1, os.SEEK_END)
            sep = "" if f.read(1) == b"\n" else "\n"
        data = (sep + text).encode("utf-8", "surrogatepass")
        f.write(data)
    return [start, start + len(data), hashlib.sha256(data).hexdigest()]


def open_or_build(folder: Path, *, workers: int = 1, progress: Progress = _no_progress) -> Corpus:
    """The corpus of ``folder`` from its store — one store, or a store and its appended segments
    (:mod:`crase_core.segments`) — building a store (and text index) first when there is none or it is
    damaged (a warning says why). CorpusError for a bad corpus; OSError when the cache folder cannot be
    written (the caller then parses into memory)."""
    papers_path, cites_path = _find(folder, "papers.jsonl"), _find(folder, "citations.tsv")
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
    is published beside its store (:mod:`crase_core.segments`); no existing store file is rewritten, so the
    cost follows the batch. The corpus then reads exactly as a build of the grown files would, under a new
    (chained) fingerprint. The new files are parsed once and checked in full before anything is written;
    one append at a time per corpus. With ``merge_policy``, an append that leaves too many segments merges
    them (:func:`segments.needs_merge`, :func:`merge_segments`)."""
    start = time.perf_counter()
    new_folder = Path(new_folder)
    if not new_folder.is_dir():
        raise CorpusError(f"folder of new papers {new_folder} does not exist")
    new_papers = _find(new_folder, "papers.jsonl")
    try:
        new_cites: Path | None = _find(new_folder, "citations.tsv")
    except CorpusError:
        new_cites = None
    with _lock(folder) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        corpus = open_or_build(folder, progress=progress)
        # every new line is parsed (and so checked) once, before anything is written
        chunks = [_parse_chunk(job) for job in _chunks(new_papers, _CHUNK_BYTES)]
        papers_text = _appended_text(new_papers)
        cites_text = _appended_text(new_cites) if new_cites else ""
        if not papers_text.strip() and not cites_text.strip():
            return {"papers": 0, "citations": 0, "total_papers": len(corpus)}
        papers_path, cites_path = _find(folder, "papers.jsonl"), _find(folder, "citations.tsv")
        if not corpus.segments:
            TextIndex.for_corpus(corpus)  # the first part's index exists before a segment refers to it
        source = {"papers": _append_to_file(papers_path, papers_text),
                  "citations": _append_to_file(cites_path, cites_text)}
        fp = segments.chain_fingerprint(corpus.fingerprint, source["papers"][2], source["citations"][2])
        target = segments.segment_path(folder.name, fp)
        added = segments.write_segment(corpus, chunks, new_cites, fp, target, source)
        remember_fingerprint(folder, [papers_path, cites_path], fp)
        progress(f"appended {added.papers:,} papers and {added.citations:,} citations as a segment in "
                 f"{time.perf_counter() - start:.1f} s")
        counts = {"papers": added.papers, "citations": added.citations, "total_papers": added.total_papers}
        if merge_policy:
            grown = segments.open_chain(target, fp, folder.name)
            if segments.needs_merge(grown):
                progress(f"{len(grown.segments)} segments: merging them into one store")
                _merge_locked(folder, grown)
        return counts


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
