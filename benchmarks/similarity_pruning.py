"""The claim-similarity scorer against word overlap, end to end, on the dev sets (issue 30 item 4).

    .venv/bin/python benchmarks/similarity_pruning.py [--benches hepth_refs_dev,hepth_litsearch_dev] [--limit N]
        [--thetas 0.45,0.5] [--out rows.jsonl] [--report rows.jsonl]

Every query of each set (the first ``--limit`` of each) runs twice as ``crase eval`` runs it (the query paper and
everything after it hidden; :func:`crase_core.evaluation.harness.evaluate_query`): once with the default settings
(``support_scorer`` word-overlap) and once with ``support_scorer`` similarity (θ_similarity, τ_similarity at
their defaults; ``--thetas``: also at other θ_similarity, the same matrices read again from the result cache).
Everything runs in this one process, so the claim vectors the on-device model computes are reused
by every later query (the cost is embedding each distinct claim once). Prints, per set, R@10/R@50/MAP@50 with 95 %
bootstrap intervals, the paired Δ with its permutation p, the share of edges pruned (pooled and median per query)
and the share of citing claims marked supported; and the claims embedded per second. ``--report`` prints the
tables of the rows a run wrote so far (on the queries both scorers finished).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from crase_core.backends import similarity_scorer
from crase_core.evaluation.benchmark import load_benchmark
from crase_core.evaluation.harness import EvalJob, evaluate_query
from crase_core.evaluation.report import kind_table, paired_table
from crase_core.settings.pipeline import PipelineSettings

DATA = Path(__file__).resolve().parent / "data"
METRICS = ("recall@10", "recall@50", "map@50")


def pruned_share(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """(pooled share of edges pruned, median per-query share) of runs' rows."""
    edges = sum(r.get("n_edges", 0) for r in rows)
    kept = sum(r.get("n_kept_edges", 0) for r in rows)
    per = [1 - r["n_kept_edges"] / r["n_edges"] for r in rows if r.get("n_edges")]
    return (1 - kept / edges if edges else 0.0), (statistics.median(per) if per else 0.0)


def supported_share(rows: list[dict[str, Any]]) -> float:
    claims = sum(r.get("n_citing_claims", 0) for r in rows)
    return sum(r.get("n_supported_claims", 0) for r in rows) / claims if claims else 0.0


def report(bench: str, rows: dict[str, list[dict[str, Any]]]) -> None:
    """The tables of one set: each scorer's metrics with intervals, the paired Δ, the pruned and supported shares
    (on the queries both scorers finished)."""
    both = set.intersection(*({str(r["qid"]) for r in rs} for rs in rows.values()))
    labelled = [(name, [r for r in rs if str(r["qid"]) in both]) for name, rs in rows.items()]
    print(f"\n## {bench}: {len(both)} queries, the first of the set (a subset)\n")
    print(kind_table(labelled, {}, METRICS))
    print()
    print(paired_table(labelled[0], labelled[1:], {}, METRICS))
    print()
    print("| run | edges pruned (pooled) | edges pruned (median per query) | citing claims supported |")
    print("|---|---|---|---|")
    for name, rs in labelled:
        pooled, median = pruned_share(rs)
        print(f"| {name} | {pooled:.3f} | {median:.3f} | {supported_share(rs):.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benches", default="hepth_refs_dev,hepth_litsearch_dev")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--out", default=None, help="append each query's row per scorer here (JSON lines)")
    ap.add_argument("--thetas", default="", help="also run similarity at these θ_similarity (comma-separated)")
    ap.add_argument("--report", default=None, help="only print the tables of the rows an earlier --out wrote")
    args = ap.parse_args()
    if args.report:
        saved: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for line in Path(args.report).read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            saved.setdefault(r["bench"], {}).setdefault(r["scorer"], []).append(r)
        for bench, by_scorer in saved.items():
            report(bench, by_scorer)
        return
    runs = {"word-overlap": PipelineSettings(), "similarity": PipelineSettings(support_scorer="similarity")}
    for theta in filter(None, args.thetas.split(",")):  # the same matrices read at another θ_similarity
        runs[f"similarity θ {float(theta):g}"] = runs["similarity"].replace(theta_similarity=float(theta))
    scorer: Any = similarity_scorer()  # loads the model now: a run that cannot load it must not measure words twice
    sink = open(args.out, "a") if args.out else None  # noqa: SIM115
    embed_s = 0.0
    for bench in args.benches.split(","):
        queries = load_benchmark(DATA / f"{bench}.jsonl", args.limit)
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name in runs}
        for i, q in enumerate(queries, 1):
            for name, settings in runs.items():
                before = len(scorer._vectors)
                t0 = time.perf_counter()
                row = evaluate_query(EvalJob(bench=bench, out="", settings=settings), q)
                if name.startswith("similarity"):
                    embed_s += time.perf_counter() - t0
                    row["claims_embedded"] = len(scorer._vectors) - before
                if row.get("error"):
                    raise SystemExit(f"{bench} {q.qid}: {row['error']}")
                if any("claim similarity unavailable" in w for w in row.get("warnings", [])):
                    raise SystemExit(f"{bench} {q.qid}: the run fell back to word overlap")
                row.pop("ranked", None)
                rows[name].append(row)
                if sink:
                    sink.write(json.dumps({"bench": bench, "scorer": name, **row}, default=str) + "\n")
                    sink.flush()
            s = rows["similarity"][-1]
            print(f"{bench} {i}/{len(queries)} {q.qid}: |E| {s.get('n_edges')}, {s['claims_embedded']} new claims "
                  f"embedded, {s['wall_s']:.1f}s (word overlap {rows['word-overlap'][-1]['wall_s']:.1f}s)",
                  flush=True)
        report(bench, rows)
    print(f"\nclaims embedded: {len(scorer._vectors):,} distinct in {embed_s:.0f} s of similarity runs")
    if sink:
        sink.close()


if __name__ == "__main__":
    main()
