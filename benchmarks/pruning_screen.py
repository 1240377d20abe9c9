"""Screen pruning rules for the word-overlap scorer's edges on the dev sets, stage 3 only.

    .venv/bin/python benchmarks/pruning_screen.py [--benches hepth_refs_dev,hepth_litsearch_dev] [--limit N]
        [--theta 0.05,0.1,...] [--tau 0,0.2,...] [--keep 0,10] [--out rows.jsonl]

Each dev query runs once end to end with the default settings (as ``crase eval`` runs it: the query paper and
everything after it hidden); its edges' matrices are then read again at every (θ_lexical, τ_lexical) of the grid
— Δ = the share of citing claims with some cited claim ≥ θ_lexical (Eq. 3–4), pruned when Δ ≤ τ_lexical, weight
Δ·age^(−β) (Eq. 5) — with the question's top ``keep`` hits kept by their text match or not, and the pruned graph
is ranked again (:func:`crase_core.stages.ranking.rank_graph`, what ``crase rerank`` uses). Nothing but the
pruning and the ranking changes: the pool fills that depend on pruning are not redone, so the numbers screen
rules; the chosen one is measured end to end by ``benchmarks/eval_dev.py``. Prints, per set and rule, R@5/R@10/
R@50, MAP@50, the median share of edges pruned and the paired permutation p against the run's own rule.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from crase_core.evaluation.benchmark import load_benchmark, query_filter
from crase_core.evaluation.gold import in_gold_space
from crase_core.evaluation.harness import unfiltered_source
from crase_core.evaluation.metrics import per_query_metrics
from crase_core.evaluation.report import metric_of_rows, per_query_values
from crase_core.evaluation.significance import paired_permutation_test
from crase_core.pipeline import run_query
from crase_core.ranking.pruning import coverage_affinity, text_match_ids
from crase_core.runtime import RuntimeConfig, build_engine
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.ranking import rank_graph

DATA = Path(__file__).resolve().parent / "data"


def screen_query(trace: Any, settings: PipelineSettings, rules: list[tuple[float, float, int]]) -> dict[str, Any]:
    """Every rule's ranked list of one run, and the share of its word-overlap edges each rule prunes."""
    ids = [n.paper.id for n in trace.nodes]
    base_text = [n.paper.id for n in trace.nodes if n.role == "text"]
    out: dict[str, Any] = {}
    for theta, tau, keep in rules:
        kept_edges = []
        alive: set[str] = set()
        pruned = 0
        for e in trace.edges:
            if e.scorer == "model" or e.error:
                ok, w = e.kept, e.weight
            else:
                delta = coverage_affinity(e.matrix, theta)
                ok, w = delta > tau, delta * e.age_factor
            if ok:
                kept_edges.append((e.citing, e.cited, w))
                alive.update((e.citing, e.cited))
            else:
                pruned += 1
        text = base_text + [n for n in text_match_ids(trace.query_hits, keep, set(ids)) if n not in base_text]
        alive |= set(text)
        ranked = rank_graph(settings.ranker, ids, alive, text, kept_edges, trace.seeds, trace.query_hits,
                            settings, trace.restart_hits, query=trace.query)
        out[f"{theta:g}/{tau:g}/{keep}"] = {"ranked": [n for n, _ in ranked.order[: settings.k]],
                                            "pruned": pruned / max(1, len(trace.edges))}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benches", default="hepth_refs_dev,hepth_litsearch_dev")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--theta", default="0.05,0.1,0.15,0.2,0.25,0.32")
    ap.add_argument("--tau", default="0,0.2,0.35,0.5")
    ap.add_argument("--keep", default="0,10")
    ap.add_argument("--base", default=None, help="the rule the p-values compare with (THETA/TAU/KEEP)")
    ap.add_argument("--out", default=None, help="write each query's metrics per rule here (JSON lines)")
    args = ap.parse_args()
    rules = [(th, ta, kp) for th in map(float, args.theta.split(",")) for ta in map(float, args.tau.split(","))
             for kp in map(int, args.keep.split(","))]
    settings = PipelineSettings()
    base = args.base or f"{settings.theta_lexical:g}/{settings.tau_lexical:g}/0"
    runtime = RuntimeConfig()
    sink = open(args.out, "w") if args.out else None  # noqa: SIM115
    for bench in args.benches.split(","):
        rows: dict[str, list[dict[str, float]]] = {}
        for q in load_benchmark(DATA / f"{bench}.jsonl", args.limit):
            engine = build_engine(runtime, source_filter=query_filter(q, unfiltered_source(runtime)))
            trace = run_query(q.query, engine, settings)
            for rule, got in screen_query(trace, settings, rules).items():
                ranked = got["ranked"]
                ranked = in_gold_space(ranked, q.relevant, engine.source) or ranked
                m = {**per_query_metrics(ranked, q.relevant, (5, 10, 50)), "pruned": got["pruned"],
                     "n_relevant": len(q.relevant)}
                rows.setdefault(rule, []).append(m)
                if sink:
                    sink.write(json.dumps({"bench": bench, "qid": q.qid, "rule": rule, **m}) + "\n")
        print(f"\n{bench} ({len(rows[base])} queries), θ_lexical/τ_lexical/keep; p against {base}")
        print("rule            R@5    R@10   R@50   MAP@50  pruned(median)  p(R@50)  p(MAP@50)")
        for rule, ms in rows.items():
            p50 = paired_permutation_test(per_query_values("recall@50", ms), per_query_values("recall@50", rows[base]))
            pmap = paired_permutation_test(per_query_values("map@50", ms), per_query_values("map@50", rows[base]))
            print(f"{rule:<15} " + "  ".join(f"{metric_of_rows(m, ms):.3f}" for m in
                                             ("recall@5", "recall@10", "recall@50", "map@50"))
                  + f"   {statistics.median(m['pruned'] for m in ms):.3f}           {p50:.3f}    {pmap:.3f}")
    if sink:
        sink.close()


if __name__ == "__main__":
    main()
