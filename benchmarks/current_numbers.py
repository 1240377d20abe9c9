"""The "Current numbers" tables of docs/benchmarks.md, from the committed run files.

    .venv/bin/python benchmarks/current_numbers.py [--results benchmarks/results]

For each dev set: every listed run's R@5, R@20, R@50, MAP@5 and MAP@50 with 95% percentile-bootstrap intervals
over queries, then the default against BM25 on the same queries (Δ and the two-sided paired permutation p).
Reads ``<results>/<set>/<run>/run.json.gz`` (crase_core.evaluation.run_file); runs that are not there are skipped.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from crase_core.evaluation.report import metric_of_rows, per_query_values, with_interval
from crase_core.evaluation.run_file import is_run, run_rows
from crase_core.evaluation.significance import paired_permutation_test

SETS = ("hepth_refs_dev", "hepth_litsearch_dev")
RUNS = ("crase", "bm25", "dense", "paper", "no-pruning", "no-fusion")
METRICS = ("recall@5", "recall@20", "recall@50", "map@5", "map@50")


def label(metric: str) -> str:
    name, k = metric.split("@")
    return ("R@" if name == "recall" else "MAP@") + k


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, default=Path(__file__).resolve().parent / "results")
    root = ap.parse_args().results
    for bench in SETS:
        runs = {r: run_rows(root / bench / r) for r in RUNS if is_run(root / bench / r)}
        if not runs:
            continue
        n = len(next(iter(runs.values())))
        print(f"### {bench} ({n} queries)\n")
        print("| run | " + " | ".join(label(m) for m in METRICS) + " |")
        print("|---" * (len(METRICS) + 1) + "|")
        for name, rows in runs.items():
            cells = []
            for m in METRICS:
                v, lo, hi = with_interval(m, rows)
                cells.append(f"{v:.3f} [{lo:.3f}, {hi:.3f}]")
            print(f"| {name} | " + " | ".join(cells) + " |")
        if "crase" in runs and "bm25" in runs:
            base = {str(r["qid"]): r for r in runs["bm25"]}
            pairs = [(r, base[str(r["qid"])]) for r in runs["crase"] if str(r["qid"]) in base]
            a, b = [p[0] for p in pairs], [p[1] for p in pairs]
            print("\ncrase vs bm25 on the same queries: " + ", ".join(
                f"{label(m)} {metric_of_rows(m, a) - metric_of_rows(m, b):+.3f} "
                f"(p {paired_permutation_test(per_query_values(m, a), per_query_values(m, b)):.4f})" for m in METRICS))
        print()


if __name__ == "__main__":
    main()
