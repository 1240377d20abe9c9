"""``crase eval``: run a method (or an ablation family) over a benchmark file.

``add_eval_parser(subparsers)`` registers the subcommand on the main ``crase``
parser. Contract: ``crase eval BENCH.jsonl --out DIR [--method M] [pipeline
options]`` writes the run file ``DIR/run.json.gz`` (the pin, the summary and the
per-query rows: :mod:`.run_file`) and ``DIR/report.md`` (+ PNG plots). ``--ablation
NAME`` runs every variant of the family into ``DIR/<variant>/`` and writes one
comparison report (and ``ablation.json``: label → summary) in ``DIR``. When any query errored (its
row holds the error; e.g. a query paper the leakage filter cannot date) the command says so on stderr and
exits with status 3.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from crase_core import atomic
from crase_core.errors import InputError
from crase_core.evaluation.harness import CORRUPTIONS, EvalJob, run_eval
from crase_core.evaluation.methods import METHODS
from crase_core.evaluation.report import RunSummary, write_report
from crase_core.evaluation.run_file import run_rows
from crase_core.machine import check_workers
from crase_core.ranking.rankers import ranker_names
from crase_core.settings.config import add_arguments, settings_from_args
from crase_core.views.terminal import printable

#: exit status of an evaluation in which a query errored (its results are written; the numbers count it as a miss)
EXIT_QUERY_ERRORS = 3

ABLATIONS: dict[str, str] = {
    "baselines": "every method on the same candidate pool (paper Table 1)",
    "hops": "expansion radius 1 / 1.5 / 2 (Table 9: with |V| and entailment calls)",
    "m": "seed budget m = 5 / 10 / 15 / 20 (Table 10)",
    "theta": "support threshold θ = 0.5 / 0.65 / 0.75 / 0.85 for model-scored edges, with θ_lexical = 0.02 / 0.05 / "
             "0.1 / 0.15 for word-overlap ones",
    "tau": "pruning threshold τ = τ_lexical = 0 / 0.2 / 0.4 / 0.6 (every edge, whoever scored it)",
    "beta": "age decay β = 0 / 0.5 / 1",
    "age": "age reference: current year vs the query's year (Table 3)",
    "ranker": "every registered ranker: PPR / SALSA / CEP (Table 2)",
    "pruning": "full pipeline vs the same graph unpruned (PPR, uniform weights)",
    "corruption": "clean seeds vs lexical distractors vs random papers (App. K)",
}


def ablation_variants(name: str, job: EvalJob) -> list[tuple[str, EvalJob]]:
    """(label, job) for each variant of an ablation family; ``job`` is the base configuration."""
    s = job.settings
    if name == "baselines":
        from crase_core.evaluation.dense import dense_available

        methods = [m for m in METHODS if m != "dense" or dense_available()]
        return [(m, replace(job, method=m)) for m in methods]
    if name == "hops":
        return [(f"hops={h:g}", replace(job, settings=s.replace(hops=h))) for h in (1.0, 1.5, 2.0)]
    if name == "m":
        return [(f"m={m}", replace(job, settings=s.replace(m=m))) for m in (5, 10, 15, 20)]
    if name == "theta":
        # both thresholds: the offline backend's edges are judged at theta_lexical (a share of words), a model's at theta
        return [(f"theta={t:g},theta_lexical={tl:g}", replace(job, settings=s.replace(theta=t, theta_lexical=tl)))
                for t, tl in ((0.5, 0.02), (0.65, 0.05), (0.75, 0.1), (0.85, 0.15))]
    if name == "tau":
        return [(f"tau={t:g}", replace(job, settings=s.replace(tau=t, tau_lexical=t))) for t in (0.0, 0.2, 0.4, 0.6)]
    if name == "beta":
        return [(f"beta={b:g}", replace(job, settings=s.replace(beta=b))) for b in (0.0, 0.5, 1.0)]
    if name == "age":
        return [(f"age={a}", replace(job, age_reference=a)) for a in ("current", "query")]
    if name == "ranker":
        return [(f"ranker={r}", replace(job, settings=s.replace(ranker=r))) for r in ranker_names()]
    if name == "pruning":
        return [("crase", replace(job, method="crase")), ("ppr-unpruned", replace(job, method="ppr-unpruned"))]
    if name == "corruption":
        return [("clean", replace(job, corrupt_seeds=None))] + [
            (c, replace(job, corrupt_seeds=c)) for c in CORRUPTIONS
        ]
    raise InputError(f"unknown ablation {name!r}; choose one of {', '.join(ABLATIONS)}")


def _job_from_args(args: argparse.Namespace) -> EvalJob:
    settings = settings_from_args(args)
    return EvalJob(
        bench=args.bench, out=args.out, method=args.method, settings=settings.pipeline,
        runtime=settings.runtime, age_reference=args.age_reference, corrupt_seeds=args.corrupt_seeds,
        workers=args.workers, limit=args.limit, retry_errors=args.retry_errors,
    )


@contextlib.contextmanager
def _report_kept(out: Path) -> Iterator[None]:
    """A report that cannot be written (full disk, file-size limit) is one line saying the results are kept."""
    try:
        yield
    except InputError as e:
        raise InputError(f"{e}; the results are kept in {out}: make room (free disk "
                         "space, lift a file-size limit) and rerun the same command to write the report (nothing is "
                         "computed again)") from None


def _recall_sections(job: EvalJob, out: Path) -> list[tuple[str, str]]:
    """The report's recall-estimate sections for a run of the default (:mod:`.recall_calibration`)."""
    if job.method != "crase" or job.corrupt_seeds:
        return []
    from crase_core.evaluation.benchmark import load_benchmark
    from crase_core.evaluation.recall_calibration import eval_sections

    kinds = {q.qid: str(q.extra["kind"]) for q in load_benchmark(job.bench, job.limit) if q.extra.get("kind")}
    return eval_sections(out, Path(job.bench).name, run_rows(out), kinds)


def cmd_eval(args: argparse.Namespace) -> int:
    check_workers(args.workers)
    if args.limit is not None and args.limit < 1:
        raise InputError(f"--limit must be ≥ 1 (got {args.limit})")
    job = _job_from_args(args)
    out = Path(args.out)
    if args.ablation:
        runs: list[RunSummary] = []
        for label, variant in ablation_variants(args.ablation, job):
            folder = out / label.replace("=", "-")
            summary = run_eval(replace(variant, out=str(folder)), fresh=args.fresh)
            runs.append(RunSummary(label, summary, str(folder)))
        with _report_kept(out):
            path = write_report(out, runs, title=f"Ablation: {args.ablation} — {ABLATIONS[args.ablation]}")
            atomic.write_text(out / "ablation.json", json.dumps({r.label: r.summary for r in runs}, indent=2))
    else:
        summary = run_eval(job, fresh=args.fresh)
        label = job.method + (f" ({job.corrupt_seeds} seeds)" if job.corrupt_seeds else "")
        runs = [RunSummary(label, summary, str(out))]
        with _report_kept(out):
            path = write_report(out, runs, title=f"crase eval: {label}", sections=_recall_sections(job, out))
    for r in runs:
        s = r.summary
        errors = f", {s['errors']} errored" if s.get("errors") else ""
        print(f"{r.label:<22} R@5 {s['recall@5']:.4f}  R@50 {s['recall@50']:.4f}  "
              f"MAP@5 {s['map@5']:.4f}  MAP@50 {s['map@50']:.4f}  ({s['queries']} queries{errors})")
    print(f"report: {path}")
    failed = [(r, s) for r in runs if (s := r.summary).get("errors")]
    for r, s in failed:
        first = next((row for row in run_rows(r.folder) if row.get("error")), None)
        example = f" (first: {printable(first['qid'])}: {printable(first['error'])[:300]})" if first else ""
        print(f"crase eval: {r.label}: {s['errors']} of {s['queries']} queries errored{example}; they count as "
              f"misses in the numbers above. Fix the cause, then rerun with --retry-errors", file=sys.stderr)
    return EXIT_QUERY_ERRORS if failed else 0


def add_eval_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``eval`` on the ``crase`` sub-parsers; returns the sub-parser."""
    p = subparsers.add_parser("eval", help="measure retrieval quality on a benchmark (Recall@K, MAP@K)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bench", help="benchmark JSONL: qid, query, relevant (+ paper_id, year)")
    p.add_argument("--out", required=True, help="result folder (resumable: rerun to continue)")
    p.add_argument("--method", default="crase", choices=METHODS, help="what to evaluate (default: crase)")
    p.add_argument("--ablation", choices=sorted(ABLATIONS), default=None,
                   help="run a family of variants: " + "; ".join(f"{k}: {v}" for k, v in ABLATIONS.items()))
    p.add_argument("--age-reference", choices=("current", "query"), default="current",
                   help="measure paper ages from the current year (default) or from the query's year")
    p.add_argument("--corrupt-seeds", choices=CORRUPTIONS, default=None,
                   help="seed-corruption stress test: replace the seeds (crase method only)")
    p.add_argument("--workers", type=int, default=1, help="parallel worker processes (each ~300 MB)")
    p.add_argument("--limit", type=int, default=None, help="only the first N queries")
    p.add_argument("--fresh", action="store_true", help="discard earlier results in --out")
    p.add_argument("--retry-errors", action="store_true", help="rerun queries whose row holds an error")
    add_arguments(p)
    p.set_defaults(func=cmd_eval)
    return p
