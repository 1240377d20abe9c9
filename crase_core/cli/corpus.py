"""``crase corpus build|add|merge|check``: build a corpus's memory-mapped store, grow it by segments, merge
them, check it.

Progress lines go to stderr, results to stdout; a problem a user can act on is a :class:`CorpusError`
(one line, exit status 2, printed by :mod:`crase_core.cli.main`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crase_core.errors import CorpusError, InputError
from crase_core.machine import check_workers, max_workers
from crase_core.settings import environment
from crase_core.views.terminal import printable

if TYPE_CHECKING:  # the store loads when a command runs, not for `crase corpus --help`
    from crase_core.store import corpus_store
    from crase_core.store.corpus_validation import ValidationReport


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
    from crase_core.store.corpus import DEFAULT_CORPUS_DIR

    folder = environment.corpus_folder(arg, DEFAULT_CORPUS_DIR)
    if not folder.is_dir():
        raise CorpusError(f"corpus folder {folder} does not exist")
    return folder


def _size_mb(path: Path | None) -> float:
    if path is None or not path.is_dir():
        return 0.0
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file()) / 2**20


def cmd_build(args: argparse.Namespace) -> int:
    from crase_core.store import corpus_folder, corpus_store
    from crase_core.store.textindex import TextIndex

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
    print_report(corpus.validation)
    return 0


def print_report(report: ValidationReport) -> None:
    """The validation report on stdout (warnings also on stderr, so a script that keeps stdout still sees them)."""
    for line in report.lines():
        print(printable(line))
    for w in report.warnings():
        print(f"crase corpus: warning: {printable(w)}", file=sys.stderr)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM (a stopped job, a closed terminal) interrupts like Ctrl-C, so that an import
    removes its temporary folder before it exits."""
    def interrupt(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def cmd_import(args: argparse.Namespace) -> int:
    from crase_core.importers.corpus_import import import_corpus
    from crase_core.store import corpus_store

    bar = ProgressBar()
    with corpus_store.reporting(bar), _terminate_as_interrupt():
        result = import_corpus(args.src, args.dest, args.format, workers=args.workers,
                               progress=_quiet if bar.tty else _progress, manifest=not args.no_manifest)
    print(f"{result.dest}: {result.n_papers:,} papers, {result.n_citations:,} citations imported from {args.format} "
          f"in {result.seconds:.1f} s (store built: crase query --corpus {result.dest} …)")
    print_report(result.report)
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    from crase_core.store import corpus_folder

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
    from crase_core.store import corpus_folder

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
    from crase_core.retrieval.semantic import find_embeddings
    from crase_core.store import corpus_folder, corpus_store, segments

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
    lookup = find_embeddings(folder, corpus.name, corpus.fingerprint, len(corpus), fresh=True)
    if lookup.problem:
        raise CorpusError(lookup.problem)
    if lookup.embeddings is not None:
        print(f"{lookup.embeddings.path}: sound ({lookup.embeddings.describe()}; size, header, SHA-256 and unit "
              "rows checked)")
    else:
        print(printable(lookup.note))
    return 0


def cmd_embed(args: argparse.Namespace) -> int:
    from crase_core.importers.corpus_embed import EndpointEmbedder, MiniLMEmbedder, embed_corpus

    folder = _folder(args.folder)
    use_endpoint = bool(args.base_url or args.endpoint)
    if args.minilm and use_endpoint:
        raise InputError("say which embedder: --base-url URL --model NAME (an OpenAI-compatible /v1/embeddings "
                         "endpoint; or --endpoint NAME of the settings file), or the on-device all-MiniLM-L6-v2 "
                         "(the default; --minilm)")
    for name, value, low, high in (("--batch-size", args.batch_size, 1, 2048), ("--concurrency", args.concurrency, 1, 64),
                                   ("--max-chars", args.max_chars, 16, 1_000_000)):
        if not low <= value <= high:
            raise InputError(f"{name} must be in [{low:,}, {high:,}] (got {value:,})")
    if args.max_calls is not None and args.max_calls < 1:
        raise InputError(f"--max-calls must be ≥ 1 (got {args.max_calls})")
    if args.deadline is not None and not 0 < args.deadline <= 30 * 86400:
        raise InputError(f"--deadline must be a positive number of seconds (got {args.deadline:g})")
    embedder: Any
    if not use_endpoint:
        embedder = MiniLMEmbedder(batch_size=min(args.batch_size * 4, 512))
    else:
        embedder = EndpointEmbedder(_embedding_endpoint(args), batch_size=args.batch_size, max_chars=args.max_chars,
                                    max_calls=args.max_calls,
                                    deadline=time.monotonic() + args.deadline if args.deadline else None)
    report = embed_corpus(folder, embedder, fresh=args.fresh, progress=_progress)
    m = report.manifest
    if report.up_to_date:
        print(f"{report.path}: up to date ({m.describe()}, {m.count:,} papers); nothing to embed")
        return 0
    rate = f" in {report.seconds:.1f} s ({report.rate:,.1f} papers/s)" if report.embedded else ""
    reused = f", {report.reused:,} reused" if report.reused else ""
    print(f"embedded {report.embedded:,} papers{reused}{rate} with {m.describe()}; wrote {report.path} "
          f"({m.size / 2**20:,.1f} MB, {m.count:,} × {m.dimension}, SHA-256 {m.sha256[:12]}…): semantic feedback "
          "is on for this corpus")
    return 0


def _embedding_endpoint(args: argparse.Namespace) -> Any:
    """The endpoint's settings with the key its base URL may receive (the chat client's rules, crase_core.settings.config)."""
    from crase_core.settings.config import load_settings

    llm: dict[str, Any] = {"concurrency": args.concurrency, "timeout": args.timeout, "max_retries": args.max_retries}
    if args.base_url:
        llm["base_url"] = args.base_url
    if args.model:
        llm["model"] = args.model
    if args.api_key_env:
        llm["api_key_env"] = args.api_key_env
    settings = load_settings(args.config, explicit={"llm": llm}, endpoint=args.endpoint)
    if not settings.runtime.llm.model:
        raise InputError("give the embedding model's name with --model (the server lists its models at "
                         f"{settings.runtime.llm.describe()['base_url']}/models)")
    return settings.runtime.llm


def add_corpus_parser(sub: Any) -> None:
    """Add ``crase corpus …`` to the CLI's subcommands."""
    c = sub.add_parser("corpus", help="build, grow or check a local corpus's on-disk store")
    csub = c.add_subparsers(dest="corpus_command", required=True)
    b = csub.add_parser("build", help="build the memory-mapped store and text index of a corpus folder")
    b.add_argument("folder", nargs="?", type=Path, help="corpus folder (default: the embedded hep-th corpus)")
    b.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                   help=f"processes that parse and tokenise papers, 1 to {max_workers()} here (default: %(default)s)")
    b.set_defaults(func=cmd_build)
    i = csub.add_parser("import", help="a new corpus folder (store built) from OpenAlex works, Semantic Scholar "
                        "datasets files or papers.jsonl + citations.tsv",
                        description="Import SRC into the new corpus folder DEST and build its store. openalex: a works "
                        "snapshot folder (works/updated_date=…/part_*.gz, with or without manifest) or a file of API "
                        "results; s2: a folder of Semantic Scholar datasets files (papers/, abstracts/, citations/); "
                        "jsonl: a folder with papers.jsonl and citations.tsv. Field by field: docs/corpus_formats.md. "
                        "DEST appears only when the import succeeded.")
    i.add_argument("src", type=Path, help="what to import (file or folder)")
    i.add_argument("dest", type=Path, help="the new corpus folder (must not exist)")
    i.add_argument("--format", required=True, choices=("openalex", "s2", "jsonl"), help="the format of SRC")
    i.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                   help="processes that parse records (default: %(default)s)")
    i.add_argument("--no-manifest", action="store_true",
                   help="openalex: read every part file found, even when a manifest lists others")
    i.set_defaults(func=cmd_import)
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
    e = csub.add_parser("embed", help="write the corpus's embeddings (all-MiniLM-L6-v2 on this machine by default, "
                        "or an OpenAI-compatible endpoint); resumable, incremental after `corpus add`")
    e.add_argument("folder", nargs="?", type=Path, help="corpus folder (default: the embedded hep-th corpus)")
    e.add_argument("--base-url", metavar="URL", help="OpenAI-compatible API root serving /embeddings, e.g. "
                   "http://127.0.0.1:8080/v1 (llama.cpp's server with --embedding, vLLM, Ollama)")
    e.add_argument("--model", metavar="NAME", help="the embedding model's name at the endpoint")
    e.add_argument("--endpoint", metavar="NAME", help="an endpoint of the settings file ([endpoints.NAME]) instead "
                   "of --base-url; its key goes with it")
    e.add_argument("--api-key-env", metavar="VAR", help="variable holding the key for --base-url (default: the "
                   "key of the configured endpoint with that URL, if any)")
    e.add_argument("--config", metavar="FILE", help="settings file (default: $CRASE_SETTINGS)")
    e.add_argument("--minilm", action="store_true", help="embed with all-MiniLM-L6-v2 on this machine's CPU "
                   "(onnxruntime, int8; the default when no endpoint is given)")
    e.add_argument("--batch-size", type=int, default=32, help="texts per request (default: %(default)s)")
    e.add_argument("--concurrency", type=int, default=4, help="requests in flight (default: %(default)s; halved "
                   "while the endpoint answers 429/503)")
    e.add_argument("--timeout", type=float, default=120.0, help="seconds per request, in total (default: %(default)s)")
    e.add_argument("--max-retries", type=int, default=2, help="retries of a failed request (default: %(default)s)")
    e.add_argument("--max-calls", type=int, default=None, help="stop after this many requests, retries included "
                   "(the rows done are kept; rerun to continue)")
    e.add_argument("--deadline", type=float, default=None, metavar="SECONDS", help="stop after this long (the "
                   "rows done are kept; rerun to continue)")
    e.add_argument("--max-chars", type=int, default=6000, help="cut each title + abstract to this many characters "
                   "before sending it (default: %(default)s)")
    e.add_argument("--fresh", action="store_true", help="embed every paper again (reuse no earlier rows)")
    e.set_defaults(func=cmd_embed)
    k = csub.add_parser("check", help="verify every file of a corpus's store (CRC-32 and structure) and its "
                        "embeddings (size, header, SHA-256)")
    k.add_argument("folder", nargs="?", type=Path, help="corpus folder (default: the embedded hep-th corpus)")
    k.set_defaults(func=cmd_check)
