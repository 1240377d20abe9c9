"""Sparse citation graphs: how the default fills a pool of fewer than k papers, measured against BM25.

    nice -n 10 .venv/bin/python benchmarks/sparse_corpus.py --out DIR [--keep 0.1] [--n 150] [--workers 1]

Makes a sparse corpus from the embedded hep-th one (the same papers; each citation line kept with probability
``--keep``, seeded: 0.1 keeps ~1.2 citations a paper, the density of the CiteSeer corpus of issue 23), and,
with ``--second``, a second one whose papers before 2001 keep no citation at all (an archive whose older
reference lists were never digitised). Builds a refs-style benchmark on each with ``crase bench make``
(``--since 2002 --min-refs 3``), then runs every query with BM25 and with the default under each pool-fill
mode (``crase_core.stages.expansion.POOL_FILL``: off, text, hop, hop+text) and writes ``DIR/<corpus>/<run>.jsonl``
(the harness's per-query rows). Prints, per corpus and run, Recall@50 and MAP@50 with 95 % bootstrap
intervals, the median list length, the share of queries whose pool was filled, and the paired permutation
p-value of each against BM25 and against "off".
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from crase_core.evaluation import significance
from crase_core.evaluation.benchmark import load_benchmark
from crase_core.evaluation.harness import EvalJob, evaluate_query
from crase_core.runtime import RuntimeConfig
from crase_core.stages import expansion
from crase_core.store.corpus import DEFAULT_CORPUS_DIR, month_from_id

REPO = Path(__file__).resolve().parents[1]

RUNS = ("bm25", "off", "text", "hop", "hop+text")


def sparse_corpus(dest: Path, keep: float, seed: int, before: int | None = None) -> Path:
    """hep-th with each citation line kept with probability ``keep`` (and none of the papers published before
    the year ``before``, when given)."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(DEFAULT_CORPUS_DIR / "papers.jsonl.gz", dest / "papers.jsonl.gz")
    rng = random.Random(seed)
    kept = 0
    with gzip.open(DEFAULT_CORPUS_DIR / "citations.tsv.gz", "rt") as f, open(dest / "citations.tsv", "w") as out:
        for line in f:
            citing = line.split("\t", 1)[0]
            month = month_from_id(citing) or 0
            if before is not None and month // 100 < before:
                continue
            if rng.random() < keep:
                out.write(line)
                kept += 1
    return dest


def run_all(corpus: Path, bench: Path, out: Path) -> dict[str, list[dict[str, Any]]]:
    runtime = RuntimeConfig(corpus_dir=str(corpus))
    queries = load_benchmark(bench)
    default = expansion.POOL_FILL
    rows: dict[str, list[dict[str, Any]]] = {}
    for run in RUNS:
        path = out / f"{run}.jsonl"
        if path.is_file():
            rows[run] = [json.loads(x) for x in path.read_text().splitlines()]
            continue
        expansion.POOL_FILL = "off" if run == "bm25" else run
        job = EvalJob(bench=str(bench), out=str(out), method="bm25" if run == "bm25" else "crase", runtime=runtime)
        rows[run] = [evaluate_query(job, q) for q in queries]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows[run]))
    expansion.POOL_FILL = default
    return rows


def recall(rows: list[dict[str, Any]]) -> float:
    return sum(r["hits@50"] for r in rows) / max(1, sum(r["n_relevant"] for r in rows))


def mean_ap(rows: list[dict[str, Any]]) -> float:
    return statistics.fmean(r["ap@50"] for r in rows)


def summarise(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for run, rs in rows.items():
        errors = sum(1 for r in rs if r.get("error"))
        filled = sum(1 for r in rs if any("sparse citation graph" in w for w in r.get("warnings", [])))
        out[run] = {
            "queries": len(rs), "errors": errors,
            "recall@50": round(recall(rs), 4), "recall@50_ci": [round(x, 4) for x in significance.bootstrap_interval(rs, recall)],
            "map@50": round(mean_ap(rs), 4), "map@50_ci": [round(x, 4) for x in significance.bootstrap_interval(rs, mean_ap)],
            "median_list": statistics.median(len(r["ranked"]) for r in rs),
            "pool_filled": filled,
        }
        for base in ("bm25", "off"):
            if run != base and base in rows:
                out[run][f"p_recall_vs_{base}"] = round(significance.paired_permutation_test(
                    [r["hits@50"] for r in rs], [r["hits@50"] for r in rows[base]]), 4)
                out[run][f"p_map_vs_{base}"] = round(significance.paired_permutation_test(
                    [r["ap@50"] for r in rs], [r["ap@50"] for r in rows[base]]), 4)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--keep", type=float, default=0.1)
    ap.add_argument("--n", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--second", action="store_true", help="also the corpus whose papers before 2001 have no reference list")
    args = ap.parse_args()
    corpora = {f"hepth-keep{args.keep:g}": dict(keep=args.keep, before=None)}
    if args.second:
        corpora["hepth-from2001"] = dict(keep=1.0, before=2001)
    result: dict[str, Any] = {}
    for name, spec in corpora.items():
        folder = args.out / name
        corpus = folder / "corpus"
        if not corpus.is_dir():
            sparse_corpus(corpus, spec["keep"], args.seed, spec["before"])
        bench = folder / "bench.jsonl"
        if not bench.is_file():
            subprocess.run([sys.executable, "-m", "crase_core.cli", "bench", "make", str(corpus), "--kind", "refs",
                            "--out", str(bench), "--n", str(args.n), "--min-refs", "3", "--since", "2002"],
                           check=True, cwd=str(REPO))
        rows = run_all(corpus, bench, folder)
        result[name] = summarise(rows)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
