"""``crase corpus build|add|merge|check``: build a corpus's memory-mapped store, grow it by segments, merge
them, check it.

Progress lines go to stderr, results to stdout; a problem a user can act on is a :class:`CorpusError`
(one line, exit status 2, printed by :mod:`crase_core.cli`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from . import corpus_folder, corpus_store, environment
from .corpus import DEFAULT_CORPUS_DIR
from .errors import CorpusError
from .machine import check_workers, max_workers
from .terminal import printable
from .textindex import TextIndex


def _progress(line: str) -> None:
    print(f"crase corpus: {printable(line)}", file=sys.stderr, flush=True)


def _quiet(_: str) -> None:  # on a terminal the bar says it all
    pass


class ProgressBar:
    """Shows :class:`corpus_store.BuildStep` reports on a stream: a bar redrawn in place on a terminal
    (``[#######.............]  35% parse: parsed 175,000 papers``), else one line per tenth of the build."""

    def __init__(self, stream: Any = None, width: int = 30):
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._tenth = -1

    def __call__(self, step: corpus_store.BuildStep) -> None:
        pct = int(step.fraction * 100)
        if self.tty:
            filled = int(step.fraction * self.width)
            end = "\n" if step.stage == "done" else ""
            self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {pct:3d}% "
                              f"{printable(step.stage)}: {printable(step.message)[:60]:<60}{end}")
            self.stream.flush()
        elif pct // 10 > self._tenth:
            self._tenth = pct // 10
            print(f"crase corpus: {pct:3d}% {printable(step.stage)}", file=self.stream, flush=True)


def _folder(arg: Path | None) -> Path:
    folder = Path(arg or environment.get(environment.CORPUS) or DEFAULT_CORPUS_DIR)
    if not folder.is_dir():
        raise CorpusError(f"corpus folder {folder} does not exist")
    return folder


def _size_mb(path: Path | None) -> float:
    if path is None or not path.is_dir():
        return 0.0
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file()) / 2**20


def cmd_build(args: argparse.Namespace) -> int:
    check_workers(args.workers)
    folder = _folder(args.folder)
    start = time.perf_counter()
    bar = ProgressBar()
    with corpus_store.reporting(bar):
        corpus = corpus_folder.open_or_build(folder, workers=args.workers, progress=_quiet if bar.tty else _progress)
    index = TextIndex.for_corpus(corpus)
    parts = f" and {len(corpus.segments)} appended segments" if corpus.segments else ""
    print(f"{corpus.name}: {len(corpus):,} papers, {corpus.n_citations:,} citations "
          f"(fingerprint {corpus.fingerprint}); store {_size_mb(corpus.store):,.1f} MB at {corpus.store}{parts}, "
          f"text index {_size_mb(index.path):,.1f} MB; {time.perf_counter() - start:.1f} s")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    folder = _folder(args.folder)
    counts: dict[str, Any] = corpus_folder.add_papers(folder, args.new, progress=_progress,
                                                     merge_policy=not args.no_merge)
    if not counts.get("appended", 1):
        print(f"nothing added to {folder.name}: every paper and citation of {args.new} is in it already; "
              f"its files are unchanged ({counts['total_papers']:,} papers)")
        return 0
    print(f"added {counts['papers']:,} papers and {counts['citations']:,} citations to {folder.name} "
          f"({counts['total_papers']:,} papers now)")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    folder = _folder(args.folder)
    start = time.perf_counter()
    counts = corpus_folder.merge_segments(folder, progress=_progress)
    if not counts["segments"]:
        print(f"{folder.name}: one store, no segments to merge ({counts['papers']:,} papers)")
    else:
        print(f"{folder.name}: merged {counts['segments']} segments into one store ({counts['papers']:,} papers; "
              f"{time.perf_counter() - start:.1f} s)")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from . import segments

    folder = _folder(args.folder)
    corpus = corpus_folder.open_or_build(folder, progress=_progress)
    assert corpus.store is not None
    problems = segments.verify_chain(corpus.store) if corpus.segments else corpus_store.verify(corpus.store)
    if problems:
        raise CorpusError(f"the corpus store {corpus.store} is damaged: {'; '.join(problems)}; "
                          "delete it and run `crase corpus build` again")
    parts = f"; {len(corpus.segments)} appended segments" if corpus.segments else ""
    print(f"{corpus.store}: sound ({len(corpus):,} papers, {corpus.n_citations:,} citations{parts}; every file's "
          "CRC-32 and structure checked)")
    return 0


def add_corpus_parser(sub: Any) -> None:
    """Add ``crase corpus …`` to the CLI's subcommands."""
    c = sub.add_parser("corpus", help="build, grow or check a local corpus's on-disk store")
    csub = c.add_subparsers(dest="corpus_command", required=True)
    b = csub.add_parser("build", help="build the memory-mapped store and text index of a corpus folder")
    b.add_argument("folder", nargs="?", type=Path, help="corpus folder (default: the embedded hep-th corpus)")
    b.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                   help=f"processes that parse and tokenise papers, 1 to {max_workers()} here (default: %(default)s)")
    b.set_defaults(func=cmd_build)
    a = csub.add_parser("add", help="append new papers and citations to a corpus (a new segment; no rebuild)")
    a.add_argument("folder", type=Path, help="the corpus folder (its files grow by the new lines)")
    a.add_argument("new", type=Path, help="folder with the new papers.jsonl (and citations.tsv)")
    a.add_argument("--no-merge", action="store_true",
                   help="never merge the segments after this append (default: merge when there are more than "
                        "8 or they hold over a quarter of the papers)")
    a.set_defaults(func=cmd_add)
    m = csub.add_parser("merge", help="fold a corpus's appended segments into one store")
    m.add_argument("folder", nargs="?", type=Path, help="corpus folder (default: the embedded hep-th corpus)")
    m.set_defaults(func=cmd_merge)
    k = csub.add_parser("check", help="verify every file of a corpus's store (CRC-32 and structure)")
    k.add_argument("folder", nargs="?", type=Path, help="corpus folder (default: the embedded hep-th corpus)")
    k.set_defaults(func=cmd_check)
