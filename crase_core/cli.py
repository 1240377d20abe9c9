"""``crase`` command line: ``crase query "..."``, ``crase show trace.json``.

Errors a user can act on print one line on stderr and exit with status 2;
nothing prints a traceback unless ``--debug`` is given.
"""

from __future__ import annotations

import argparse
import logging
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

from . import trace as trace_io
from .atomic import check_writable
from .errors import CraseError
from .pipeline import StageEvent, run_query
from .redaction import install_log_filter
from .runtime import BACKEND_FACTORIES, SOURCE_FACTORIES, RuntimeConfig, build_engine
from .settings import PipelineSettings
from .terminal import printable
from .trace import RunTrace

log = logging.getLogger("crase")


def _add_pipeline_arguments(p: argparse.ArgumentParser) -> None:
    d = PipelineSettings()
    g = p.add_argument_group("pipeline settings")
    h = PipelineSettings.help
    g.add_argument("--k", type=int, default=d.k, help=h("k"))
    g.add_argument("--m", type=int, default=d.m, help=h("m"))
    g.add_argument("--L", type=int, default=d.L, help=h("L"))
    g.add_argument("--search-limit", type=int, default=d.search_limit, help=h("search_limit"))
    g.add_argument("--hops", type=float, default=d.hops, choices=(1.0, 1.5, 2.0), help=h("hops"))
    g.add_argument("--neighbor-cap", type=int, default=d.neighbor_cap, help=h("neighbor_cap"))
    g.add_argument("--ranker", default=d.ranker, help=h("ranker"))
    g.add_argument("--theta", type=float, default=d.theta, help=h("theta"))
    g.add_argument("--tau", type=float, default=d.tau, help=h("tau"))
    g.add_argument("--beta", type=float, default=d.beta, help=h("beta"))
    g.add_argument("--alpha", type=float, default=d.alpha, help=h("alpha"))
    g.add_argument("--age-reference-year", type=int, default=d.age_reference_year, help=h("age_reference_year"))
    g.add_argument("--personalization", default=d.personalization, choices=("uniform", "relevance", "query"),
                   help=h("personalization"))
    g.add_argument("--query-power", type=float, default=d.query_power, help=h("query_power"))
    g.add_argument("--text-candidates", type=int, default=d.text_candidates, help=h("text_candidates"))
    g.add_argument("--max-model-calls", type=int, default=d.max_model_calls, help=h("max_model_calls"))


def settings_from_args(args: argparse.Namespace) -> PipelineSettings:
    return PipelineSettings(
        k=args.k, m=args.m, L=args.L, search_limit=args.search_limit, hops=args.hops,
        neighbor_cap=args.neighbor_cap, ranker=args.ranker, theta=args.theta, tau=args.tau, beta=args.beta,
        alpha=args.alpha, age_reference_year=args.age_reference_year, personalization=args.personalization,
        query_power=args.query_power, text_candidates=args.text_candidates,
        max_model_calls=args.max_model_calls,
    )


def _add_runtime_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("source and model backend")
    g.add_argument("--source", default="local", help=f"paper source: {' | '.join(sorted(SOURCE_FACTORIES))}")
    g.add_argument("--corpus", default=None, help="local corpus folder (papers.jsonl + citations.tsv); default: embedded hep-th")
    g.add_argument("--backend", default="offline", help=f"model backend: {' | '.join(sorted(BACKEND_FACTORIES))}")
    g.add_argument("--no-cache", action="store_true", help="do not read or write the result cache")
    for hook in _option_hooks():
        hook.add_cli_arguments(p)


def _option_hooks() -> list:
    """Modules that contribute CLI flags for their source/backend (``add_cli_arguments``/``options_from_args``)."""
    hooks = []
    for name in ("crase_core.llm.config", "crase_core.sources.semantic_scholar"):
        try:
            module = __import__(name, fromlist=["add_cli_arguments"])
        except ImportError:
            continue
        if hasattr(module, "add_cli_arguments") and hasattr(module, "options_from_args"):
            hooks.append(module)
    return hooks


def runtime_from_args(args: argparse.Namespace) -> RuntimeConfig:
    options: dict = {}
    for hook in _option_hooks():
        options.update(hook.options_from_args(args))
    return RuntimeConfig(source=args.source, backend=args.backend, corpus_dir=args.corpus,
                         use_cache=not args.no_cache, options=options)


# ---- output -----------------------------------------------------------------------------------------

def _progress_printer(stream) -> Callable[[StageEvent], None]:
    last: dict[str, int] = {}

    def show(event: StageEvent) -> None:
        if event.done == event.total and last.get(event.stage) != event.done:
            last[event.stage] = event.done
            print(f"  {event.stage:<11} {printable(event.message)}", file=stream, flush=True)

    return show


def format_trace(trace: RunTrace, k: int | None = None, width: int = 100) -> str:
    """The ranked list with reasons, then stage counts, budget, cache and timings.

    Every string taken from the trace passes through :func:`printable` (no escape sequences reach the terminal).
    """
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
        authors = printable(", ".join(p.authors[:3]) + (" et al." if len(p.authors) > 3 else ""))
        head = f"{r.rank:>3}. [{r.score:.4f}] {printable(p.title)} ({p.year or 'n.d.'}) — {printable(p.id)}"
        lines.append(textwrap.shorten(head, width=width, placeholder="…"))
        if authors:
            lines.append(textwrap.shorten(f"       {authors}", width=width, placeholder="…"))
        lines.append(textwrap.shorten(f"       why: {printable(r.reason)}", width=width, placeholder="…"))
    c = trace.stage_counts()
    b = trace.budget
    ct = trace.counters
    lines += [
        "",
        f"Stages: {c['subqueries']} sub-queries → {c['seeds']} seeds ({c['seeds_kept']} kept) → "
        f"|V| {c['nodes']} / |E| {c['edges']} → kept {c['nodes_kept']} nodes / {c['edges_kept']} edges → "
        f"{c['results']} results",
        f"Budget: 1 + |V| + |E| = {b.total:,} model calls; {b.cached:,} cached, {b.to_call:,} to call",
        f"Cost:   {ct.model_calls:,} model calls, {ct.prompt_tokens:,} + {ct.completion_tokens:,} tokens, "
        f"cache {ct.cache_hits:,} hits / {ct.cache_misses:,} misses, {ct.search_calls} searches, "
        f"{ct.external_calls} external calls, {ct.failures} failures, {ct.repairs} repairs",
        "Time:   " + ", ".join(f"{printable(k)} {v:.2f}s" for k, v in trace.timings.items()),
        printable(f"Source: {trace.source} (filter: {trace.source_filter}); backend: {trace.backend.get('backend')} "
                  f"[{trace.backend.get('extractor')}, {trace.backend.get('scorer')}]"),
    ]
    return "\n".join(lines)


# ---- commands ------------------------------------------------------------------------------------------

def cmd_query(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    if args.json:
        check_writable(args.json)  # fail now, not after the whole run
    engine = build_engine(runtime_from_args(args))
    progress = None if args.quiet else _progress_printer(sys.stderr)
    try:
        trace = run_query(args.query, engine, settings, progress=progress)
    finally:
        engine.backend.close()
    print(format_trace(trace, args.k))
    if args.json:
        path = trace_io.save(trace, args.json)
        print(f"\nTrace written to {path}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    trace = trace_io.load(args.trace)
    print(format_trace(trace, args.k))
    if args.edges:
        print("\nEdges (citing → cited: decision):")
        for e in trace.edges:
            print(printable(f"  {e.citing} → {e.cited}: {e.decision}"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crase", description="Auditable scholarly search over a citation graph.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", required=True)

    q = sub.add_parser("query", help="answer a literature-search query")
    q.add_argument("query", help="the question, in quotes")
    _add_pipeline_arguments(q)
    _add_runtime_arguments(q)
    q.add_argument("--json", metavar="PATH", help="write the run trace (JSON) to PATH")
    q.add_argument("--quiet", action="store_true", help="no per-stage progress on stderr")
    q.set_defaults(func=cmd_query)

    s = sub.add_parser("show", help="print a saved run trace")
    s.add_argument("trace", type=Path, help="trace JSON written by `crase query --json`")
    s.add_argument("--k", type=int, default=None, help="show only the top k")
    s.add_argument("--edges", action="store_true", help="also list every edge decision")
    s.set_defaults(func=cmd_show)

    try:
        from .evaluation.cli import add_eval_parser
    except ImportError:
        pass
    else:
        add_eval_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    install_log_filter()  # no credentials in any log line, --debug included
    try:
        return int(args.func(args) or 0)
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


if __name__ == "__main__":
    raise SystemExit(main())
