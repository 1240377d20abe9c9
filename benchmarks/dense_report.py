"""The tables of docs/benchmarks.md "The question embedded (issue 30)": finished run folders of one benchmark, by
kind, with 95 % bootstrap intervals, each against a base run (paired permutation p), and the split-half check of
the choice over several dev sets.

    .venv/bin/python benchmarks/dense_report.py table --bench B.jsonl --runs DIR/RUN,... [--base no-dense]
    .venv/bin/python benchmarks/dense_report.py split-half --sets B1.jsonl=DIR1,B2.jsonl=DIR2 --runs RUN,...

``table`` reads ``DIR/RUN/run.json.gz`` (crase_core.evaluation.run_file); the kinds come from the benchmark's
``kind`` field. ``split-half``: each set's queries alternately in two halves within each kind; the run with the
best mean MAP@50 over the sets on one half is chosen and judged on the other (crase_core.evaluation.split_half).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from crase_core.evaluation.benchmark import load_benchmark  # noqa: E402
from crase_core.evaluation.report import kind_table, paired_table  # noqa: E402
from crase_core.evaluation.run_file import run_rows  # noqa: E402
from crase_core.evaluation.split_half import choose_and_test, halves  # noqa: E402

METRICS = ("recall@5", "recall@20", "recall@50", "map@50")


def kinds_of(bench: Path) -> dict[str, str]:
    return {q.qid: str(q.extra.get("kind", "")) for q in load_benchmark(bench)}


def table(args: argparse.Namespace) -> None:
    kinds = kinds_of(args.bench)
    runs = [(Path(r).name, run_rows(Path(r))) for r in args.runs.split(",")]
    shown = kinds if len(set(kinds.values())) > 1 else {}
    print(kind_table(runs, shown, METRICS))
    base = next((r for r in runs if r[0] == args.base), None)
    if base is not None:
        print(f"\nAgainst {args.base} (Δ = run − {args.base}; paired permutation p):\n")
        print(paired_table(base, [r for r in runs if r[0] != args.base], shown, METRICS))


def split_half(args: argparse.Namespace) -> None:
    sets = dict(item.split("=", 1) for item in args.sets.split(","))
    kinds: dict[str, str] = {}
    qids: dict[str, list[str]] = {}
    for bench in sets:
        k = kinds_of(Path(bench))
        kinds.update(k)
        qids[bench] = list(k)
    names = args.runs.split(",")
    configs = {n: {b: run_rows(Path(d) / n) for b, d in sets.items()} for n in names}
    print("| tuned on | chosen | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for c in choose_and_test(configs, halves(qids, kinds)):
        cells = [f"{c.tune_scores[n]:.3f} / {c.test_scores[n]:.3f}" for n in names]
        print(f"| {c.tuned_on} half | {c.chosen} | " + " | ".join(cells) + " |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("table")
    t.add_argument("--bench", type=Path, required=True)
    t.add_argument("--runs", required=True)
    t.add_argument("--base", default="no-dense")
    s = sub.add_parser("split-half")
    s.add_argument("--sets", required=True)
    s.add_argument("--runs", required=True)
    args = ap.parse_args()
    (table if args.cmd == "table" else split_half)(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
