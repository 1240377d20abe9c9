"""``crase`` command line: ``crase query "..."``, ``crase show trace.json [--why ID]``, ``crase rerank``.

Errors a user can act on print one line on stderr and exit with status 2;
nothing prints a traceback unless ``--debug`` is given. When the reader of
stdout goes away (``crase query … | head -1``) the command stops quietly with
status 141 (128 + SIGPIPE), as other Unix tools do; a ``--json`` trace is
written before anything is printed, so it is never lost that way.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crase_core.errors import CraseError, InputError
from crase_core.redaction import install_log_filter
from crase_core.views.terminal import printable

if TYPE_CHECKING:  # each command imports what it needs when it runs, so `crase --help` loads none of it
    from crase_core.pipeline import StageEvent
    from crase_core.records import EdgeRecord
    from crase_core.trace import RunTrace

log = logging.getLogger("crase")

#: exit status after the reader of stdout went away (128 + SIGPIPE, what a shell shows for `yes | head -1`).
EXIT_BROKEN_PIPE = 141


def query_text(arg: str) -> str:
    """The query argument as text: bytes that are not UTF-8 (kept by Python as surrogate escapes) are an
    :class:`InputError` naming the first bad byte; terminal escape sequences and control characters are
    removed (:func:`~crase_core.views.terminal.printable`), so they never become search words."""
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        raw = os.fsencode(arg)
        try:
            arg = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"the query is not UTF-8 text (byte 0x{raw[e.start]:02x} at byte {e.start + 1}); "
                             "set your terminal to UTF-8 or retype the query") from None
    return printable(arg)


# ---- output -----------------------------------------------------------------------------------------

def _progress_printer(stream) -> Callable[[StageEvent], None]:
    last: dict[str, int] = {}

    def show(event: StageEvent) -> None:
        if event.done == event.total and last.get(event.stage) != event.done:
            last[event.stage] = event.done
            print(f"  {event.stage:<11} {printable(event.message)}", file=stream, flush=True)

    return show


def slowest_stage(timings: dict[str, float]) -> str:
    """The run's time and the stage that cost most, for the progress lines (where to look when a run is slow)."""
    if not timings:
        return "no stage ran"
    stage, secs = max(timings.items(), key=lambda kv: kv[1])
    return f"in {sum(timings.values()):.2f} s; most in {stage}: {secs:.2f} s"


def format_trace(trace: RunTrace, k: int | None = None, width: int = 100) -> str:
    """The ranked list with reasons, then stage counts, budget, cache and timings.

    Every string taken from the trace passes through :func:`printable` (no escape sequences reach the terminal);
    titles, authors and reasons have their TeX rendered as plain Unicode first (:func:`crase_core.views.tex.to_plain`).
    """
    from crase_core.llm.cost_report import budget_summary, cost_summary
    from crase_core.recall.estimate import summary_lines
    from crase_core.views.score_words import why_line
    from crase_core.views.tex import to_plain

    lines: list[str] = []
    papers = {n.paper.id: n.paper for n in trace.nodes}
    lines.append(f"Query: {printable(trace.query)}")
    lines.append("Plan:  " + " | ".join(f"ρ{i + 1} “{printable(s)}”" for i, s in enumerate(trace.plan.subqueries)))
    for w in trace.warnings:
        lines.append(f"Note:  {printable(w)}")
    lines.append("")
    shown = trace.results[: k or len(trace.results)]
    if not shown:
        lines.append("No results.")
    for r in shown:
        p = papers[r.paper_id]
        authors = printable(to_plain(", ".join(p.authors[:3]) + (" et al." if len(p.authors) > 3 else "")))
        mark = " [in your library]" if r.in_library else ""
        front = f"{r.rank:>3}. [{r.score:.4f}]{mark} "
        tail = f" ({p.year or 'n.d.'}) — {printable(p.id)}"
        # a long title is cut, never the year and id after it
        title = textwrap.shorten(printable(to_plain(p.title)), width=max(width - len(front) - len(tail), 12),
                                 placeholder="…")
        lines.append(front + title + tail)
        if authors:
            lines.append("       " + textwrap.shorten(authors, width=width - 7, placeholder="…"))
        lines.append("       " + textwrap.shorten(f"why: {printable(to_plain(r.reason))}", width=width - 7, placeholder="…"))
        if r.score_parts:  # what the score is made of (crase show --why: every part)
            lines.append("       " + textwrap.shorten(f"rank: {printable(why_line(trace, r))}", width=width - 7,
                                                      placeholder="…"))
    c = trace.stage_counts()
    b = trace.budget
    ct = trace.counters
    lines.append("")
    for i, line in enumerate(summary_lines(trace.recall_estimate)):  # the run's estimate of its own recall
        lines.append(textwrap.fill(printable(line), width=width, initial_indent="Recall: " if i == 0 else " " * 8,
                                   subsequent_indent=" " * 8, break_on_hyphens=False, break_long_words=False))
    lines += [
        f"Stages: {c['subqueries']} sub-queries → {c['seeds']} seeds ({c['seeds_kept']} kept) → "
        f"|V| {c['nodes']} / |E| {c['edges']} → kept {c['nodes_kept']} nodes / {c['edges_kept']} edges → "
        f"{c['results']} results",
        f"Budget: 1 + |V| + |E| = {budget_summary(b, trace.model_ran, trace.backend)}",
        f"Cost:   {cost_summary(ct, trace.model_ran)}, "
        f"cache {ct.cache_hits:,} hits / {ct.cache_misses:,} misses, {ct.search_calls} searches, "
        f"{ct.external_calls} external calls, {ct.failures} failures, {ct.repairs} repairs",
        "Time:   " + ", ".join(f"{printable(k)} {v:.2f}s" for k, v in trace.timings.items())
        + f" (total {sum(trace.timings.values()):.2f}s)",
        printable(f"Source: {trace.source} (filter: {trace.source_filter}); backend: {trace.backend.get('backend')} "
                  f"[{trace.backend.get('extractor')}, {trace.backend.get('scorer')}]"),
    ]
    for note in (trace.semantic_note, trace.dense_note):
        if note and note not in trace.warnings:
            lines.append(printable(note[:1].upper() + note[1:]))
    if trace.library is not None:
        lib = trace.library
        found = lib.found_ids
        lines.append(printable(f"Library: {len(lib.items):,} papers given, {len(found):,} found in the source "
                               f"({sum(i.seed for i in lib.items):,} used as seeds), "
                               f"{sum(r.in_library for r in shown):,} of the {len(shown)} results already yours"))
    return "\n".join(lines)


def read_library_file(path: Path) -> str:
    """The text of ``--library FILE``: a regular file of at most ``library.MAX_LIBRARY_BYTES``, read with
    that bound before it is parsed (``/dev/zero``, a FIFO or a folder is refused at once)."""
    from crase_core.bounded import TooLarge, read_regular
    from crase_core.retrieval.library import MAX_LIBRARY_BYTES, MAX_LIBRARY_ENTRIES

    try:
        data = read_regular(path, MAX_LIBRARY_BYTES)
    except TooLarge:
        raise InputError(f"the library file {path} is larger than {MAX_LIBRARY_BYTES >> 20} MiB; give at most "
                         f"{MAX_LIBRARY_ENTRIES:,} papers") from None
    except OSError as e:
        hint = " (save the BibTeX or the list of ids to a file)" if e.strerror == "not a regular file" else ""
        raise InputError(f"cannot read the library file {path}: {e.strerror or e}{hint}") from None
    return data.decode("utf-8", errors="replace")


def read_library(ids: Sequence[str] | None, bib: Path | None):
    """The user's papers from ``--seed-ids`` and ``--library FILE`` (BibTeX or a list of ids), or None."""
    from crase_core.retrieval.library import ParsedLibrary, parse_ids, parse_library

    if not ids and bib is None:
        return None
    parsed = ParsedLibrary()
    if ids:
        parsed.extend(parse_ids(" ".join(ids)))
    if bib is not None:
        parsed.extend(parse_library(read_library_file(bib)))
    for bad in parsed.unreadable[:10]:
        print(f"crase: note: library: skipped {printable(bad)}", file=sys.stderr)
    if not parsed.entries:
        raise InputError("the library holds no arXiv id or DOI that could be read")
    return parsed


# ---- commands ------------------------------------------------------------------------------------------

def cmd_query(args: argparse.Namespace) -> int:
    from crase_core import trace as trace_io
    from crase_core.atomic import check_writable
    from crase_core.pipeline import model_mostly_failed, run_query
    from crase_core.runtime import build_engine
    from crase_core.settings.config import settings_from_args
    from crase_core.stages.seeding import LibrarySeeding, SeedingStage, search_seeds

    settings = settings_from_args(args)
    if args.json:
        check_writable(args.json)  # fail now, not after the whole run
    library = read_library(args.seed_ids, args.library)
    query = query_text(args.query)
    engine = build_engine(settings.runtime)
    progress = None if args.quiet else _progress_printer(sys.stderr)
    seeding: SeedingStage = search_seeds if library is None else LibrarySeeding(library.entries)
    try:
        trace = run_query(query, engine, settings.pipeline, progress=progress, seeding=seeding)
    finally:
        engine.backend.close()
    if progress is not None:
        print(f"  {'done':<11} {slowest_stage(trace.timings)}", file=sys.stderr, flush=True)
    path = trace_io.save(trace, args.json) if args.json else None  # saved first: a closed stdout cannot lose it
    print(format_trace(trace, settings.pipeline.k))
    if path is not None:
        print(f"\nTrace written to {path}")
    if model_mostly_failed(trace):
        print("crase: most model answers were unusable (see the notes above); fix the endpoint and rerun with "
              "--retry-failures", file=sys.stderr)
        return 3
    return 0


def format_why(trace: RunTrace, paper_id: str) -> str:
    """``crase show --why``: the result's score parts in plain text (:func:`~crase_core.views.score_words.why_text`);
    :class:`InputError` for a paper that is not among the run's results."""
    from crase_core.views.score_words import why_text

    result = next((r for r in trace.results if r.paper_id == paper_id), None)
    if result is None:
        try:
            node = trace.node(paper_id)
        except KeyError:
            raise InputError(f"the run has no paper {printable(paper_id)!r} (the ids are those `crase show` prints "
                             "after each title)") from None
        where = f"its rank is {node.rank}" if node.rank else ("it was pruned" if not node.kept else "it is not ranked")
        raise InputError(f"{printable(paper_id)} is not among the run's {len(trace.results)} results ({where}); "
                         "score parts are recorded for the results only")
    return "\n".join(printable(line) for line in why_text(trace, result))


def cmd_show(args: argparse.Namespace) -> int:
    from crase_core import trace as trace_io

    trace = trace_io.load(args.trace)
    if args.why is not None:
        print(format_why(trace, args.why))
        return 0
    print(format_trace(trace, args.k))
    if args.edges:
        print("\nEdges (citing → cited: scorer, Δ = the share of citing claims supported at the edge's θ; decision):")
        for e in trace.edges:
            print(printable(f"  {e.citing} → {e.cited}: {edge_summary(trace, e)}; {e.decision}"))
    return 0


def cmd_rerank(args: argparse.Namespace) -> int:
    from crase_core import trace as trace_io
    from crase_core.atomic import check_writable, same_file
    from crase_core.audit.rerank import EdgeVerdict, apply_verdicts, parse_edge, rank_changes

    if same_file(args.json, args.trace):
        raise InputError(f"--json {args.json} is the run being re-ranked; write the new run to another file "
                         "(the parent run is kept as it is)")
    check_writable(args.json)
    trace = trace_io.load(args.trace)
    edges = [(e.citing, e.cited) for e in trace.edges]
    verdicts = [EdgeVerdict(*parse_edge(text, edges), keep=False, note="crase rerank --prune") for text in args.prune]
    verdicts += [EdgeVerdict(*parse_edge(text, edges), keep=True, note="crase rerank --keep") for text in args.keep]
    child = apply_verdicts(trace, verdicts)
    path = trace_io.save(child, args.json)
    changed = [a for a in child.applied_verdicts if a.keep != a.was_kept]
    print(printable(f"Re-ranked run {trace.run_id} with {len(verdicts)} verdict(s), {len(changed)} changing an "
                    f"edge's decision; no claim or matrix recomputed ({child.counters.model_calls} model calls)."))
    for a in child.applied_verdicts:
        what = ("kept" if a.keep else "pruned") + ("" if a.keep != a.was_kept else " (already so)")
        print(printable(f"  {a.citing} → {a.cited}: {what}"))
    moves = rank_changes(trace, child)
    print(f"{len(moves)} of the papers ranked in either run moved" + (":" if moves else "."))
    for m in moves[: args.show]:
        title = printable(child.node(m.paper_id).paper.title)
        print(f"  {m.before or '–':>4} → {m.after or '–':<4} "
              + textwrap.shorten(f"{title} — {printable(m.paper_id)}", width=86, placeholder="…"))
    print(f"\nNew run {child.run_id} (parent {printable(trace.run_id)}) written to {path}")
    return 0


def edge_summary(trace: RunTrace, e: EdgeRecord) -> str:
    """``[word-overlap support] Δ 0.6, 3 of 5 supported (≥ θ_lexical 0.05)``: who scored the edge, its Δ and its ✓
    claims, at the one θ that decided it (Δ is their share)."""
    from crase_core.ranking.pruning import score_name

    theta_name, theta = trace.threshold(e)
    return (f"[{score_name(e.scorer)}] Δ {e.delta:.3g}, {sum(e.supported)} of {len(e.supported)} supported "
            f"(≥ {theta_name} {theta:g})")


def cmd_export(args: argparse.Namespace) -> int:
    from crase_core.gc_pause import gc_deferred

    with gc_deferred():  # its imports, reading the trace and drawing it allocate fast (and leave little cyclic garbage)
        return _export(args)


def _export(args: argparse.Namespace) -> int:
    from crase_core import atomic
    from crase_core import trace as trace_io
    from crase_core.atomic import check_writable, same_file
    from crase_core.views.export import check_html_trace, check_html_trace_file
    from crase_core.views.html_export import to_html

    if same_file(args.out, args.trace):
        raise InputError(f"--out {args.out} is the run being exported; write the page to another file "
                         "(the run is kept as it is)")
    check_writable(args.out)
    check_html_trace_file(args.trace)  # a huge trace is refused before it is read
    trace = trace_io.load(args.trace)
    check_html_trace(trace)
    path = atomic.write_text(args.out, to_html(trace))
    print(f"Wrote {path} (open it in a browser; it needs no server and no network)")
    return 0


#: every subcommand with its one-line help: ``crase --help`` lists them without importing any (the full
#: parser of each gives the same line; tests/test_cli.py checks they agree).
COMMANDS: dict[str, str] = {
    "query": "answer a literature-search query",
    "show": "print a saved run trace",
    "rerank": "apply auditors' keep / prune decisions to a saved run and rank it again (no claim or matrix is "
              "recomputed)",
    "export": "write a saved run as one self-contained HTML file (graph, list, evidence)",
    "eval": "measure retrieval quality on a benchmark (Recall@K, MAP@K)",
    "bench": "make benchmark files for crase eval; calibrate the recall estimate",
    "corpus": "build, grow or check a local corpus's on-disk store",
}


def _add_query(sub: Any) -> None:
    from crase_core.settings.config import add_arguments

    q = sub.add_parser("query", help=COMMANDS["query"])
    q.add_argument("query", help="the question, in quotes")
    add_arguments(q)
    q.add_argument("--json", metavar="PATH", help="write the run trace (JSON) to PATH")
    q.add_argument("--quiet", action="store_true", help="no per-stage progress on stderr")
    q.add_argument("--library", type=Path, metavar="FILE", help="your papers (BibTeX, or arXiv ids/DOIs one per "
                   "line): those in the source seed the run and are marked in the results")
    q.add_argument("--seed-ids", nargs="+", metavar="ID", help="arXiv ids or DOIs of papers you have (as --library)")
    q.set_defaults(func=cmd_query)


def _add_show(sub: Any) -> None:
    s = sub.add_parser("show", help=COMMANDS["show"])
    s.add_argument("trace", type=Path, help="trace JSON written by `crase query --json`")
    s.add_argument("--k", type=int, default=None, help="show only the top k")
    s.add_argument("--edges", action="store_true", help="also list every edge decision")
    s.add_argument("--why", metavar="PAPER_ID", help="print why one result has its rank: its score's parts (text "
                   "search, walk by restart source and path, fusion), which sum to its score")
    s.set_defaults(func=cmd_show)


def _add_rerank(sub: Any) -> None:
    r = sub.add_parser("rerank", help=COMMANDS["rerank"])
    r.add_argument("trace", type=Path, help="trace JSON written by `crase query --json` or saved by the app")
    r.add_argument("--prune", nargs="+", default=[], metavar="CITING:CITED", help="edges to prune")
    r.add_argument("--keep", nargs="+", default=[], metavar="CITING:CITED", help="edges to keep")
    r.add_argument("--json", type=Path, required=True, metavar="NEW.json",
                   help="write the new run's trace here (it names the parent run and the verdicts applied)")
    r.add_argument("--show", type=int, default=20, metavar="N", help="list at most N papers that moved (20)")
    r.set_defaults(func=cmd_rerank)


def _add_export(sub: Any) -> None:
    x = sub.add_parser("export", help=COMMANDS["export"])
    x.add_argument("trace", type=Path, help="trace JSON written by `crase query --json` or saved by the app")
    x.add_argument("--format", choices=("html",), default="html", help="export format (html)")
    x.add_argument("--out", type=Path, required=True, metavar="FILE", help="the file to write")
    x.set_defaults(func=cmd_export)


def _add_eval(sub: Any) -> None:
    from crase_core.evaluation.cli import add_eval_parser

    add_eval_parser(sub)


def _add_bench(sub: Any) -> None:
    from crase_core.evaluation.make_bench import add_bench_parser

    add_bench_parser(sub)


def _add_corpus(sub: Any) -> None:
    from crase_core.cli.corpus import add_corpus_parser

    add_corpus_parser(sub)


_BUILDERS: dict[str, Callable[[Any], None]] = {"query": _add_query, "show": _add_show, "rerank": _add_rerank,
                                               "export": _add_export, "eval": _add_eval, "bench": _add_bench,
                                               "corpus": _add_corpus}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``crase`` parser. With ``only`` (a subcommand name, or "" for none) the other subcommands are
    registered by name and help line alone, so their modules are not imported; None builds every one."""
    parser = argparse.ArgumentParser(prog="crase", description="Auditable scholarly search over a citation graph.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, line in COMMANDS.items():
        if only is None or only == name:
            _BUILDERS[name](sub)
        else:
            sub.add_parser(name, help=line)
    return parser


def subcommand(argv: Sequence[str]) -> str:
    """The subcommand ``argv`` names (its first word that is one), or "" when there is none."""
    return next((a for a in argv if a in COMMANDS), "")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(subcommand(argv)).parse_args(argv)
    level = logging.DEBUG if args.debug else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # a library that sets its own logger to DEBUG (bm25s) stays quiet
        handler.setLevel(level)
    install_log_filter()  # no credentials in any log line, --debug included
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # a reader that went away shows here, not at interpreter exit
        return status
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except CraseError as e:
        print(f"crase: error: {printable(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("crase: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # last resort: one line, not a traceback
        if args.debug:
            raise
        print(f"crase: internal error ({type(e).__name__}: {printable(e)}); rerun with --debug for details", file=sys.stderr)
        return 1


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush does not fail again on the broken pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    raise SystemExit(main())
