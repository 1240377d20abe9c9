"""What "why this rank" costs: the score parts of the top k per query, and a re-rank with one verdict (prints a table).

    python benchmarks/why_bench.py [--queries PATH] [--n 20] [--ranker salsa|ppr|cep]

For each query (default run, warm cache): |V|, |E|, the ranking stage without the score parts
(:func:`rank_graph`), the score parts of the top k (:func:`score_parts`: the restart-source split and the
strongest paths), a ``crase rerank`` of one pruned edge (:func:`apply_verdicts`: copy, fates, ranking,
parts), and the worst |Σ parts − score| over the results. Median and max over the queries.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_QUERIES = [ROOT.parent / "shared" / "data" / "benchmarks" / "hepth_refs_dev.jsonl",
                   ROOT / "assets" / "benchmarks" / "hepth_refs_dev.jsonl"]


def main() -> None:
    from crase_core.audit.rerank import EdgeVerdict, apply_verdicts
    from crase_core.backends import offline_backend
    from crase_core.cache import ResultCache, cache_root
    from crase_core.pipeline import Engine, run_query
    from crase_core.settings.pipeline import PipelineSettings
    from crase_core.sources.local import LocalSource
    from crase_core.stages.ranking import rank_graph, score_parts
    from crase_core.store.termstats import TermStats

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=Path, default=next((p for p in DEFAULT_QUERIES if p.exists()), None))
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--ranker", default="salsa")
    args = ap.parse_args()
    queries = [json.loads(line)["query"] for line in args.queries.read_text(encoding="utf-8").splitlines()[: args.n]]
    source = LocalSource.open()
    engine = Engine(source, offline_backend(TermStats.from_index(source.text_index)), ResultCache(cache_root() / "results"))
    settings = PipelineSettings(ranker=args.ranker)
    rows = []
    for q in queries:
        trace = run_query(q, engine, settings)
        ids = [n.paper.id for n in trace.nodes]
        alive = {n.paper.id for n in trace.nodes if n.kept}
        t0 = time.perf_counter()
        ranked = rank_graph(settings.ranker, ids, alive, [n.paper.id for n in trace.nodes if n.role == "text"],
                            ((e.citing, e.cited, e.weight) for e in trace.edges if e.kept), trace.seeds,
                            trace.query_hits, settings, trace.restart_hits, query=trace.query)
        t1 = time.perf_counter()
        score_parts(ranked, settings.ranker, settings, [n for n, _ in ranked.order[: settings.k]], trace.query_hits)
        t2 = time.perf_counter()
        kept = [e for e in trace.edges if e.kept]
        if kept:
            apply_verdicts(trace, [EdgeVerdict(kept[0].citing, kept[0].cited, False)])
        t3 = time.perf_counter()
        worst = max((abs(sum(p.value for p in r.score_parts) - r.score) for r in trace.results), default=0.0)
        rows.append((len(trace.nodes), len(trace.edges), t1 - t0, t2 - t1, t3 - t2, worst))
        print(f"|V| {rows[-1][0]:>5}  |E| {rows[-1][1]:>6}  rank {rows[-1][2]:6.3f}s  parts {rows[-1][3]:6.3f}s  "
              f"rerank {rows[-1][4]:6.3f}s  max|Σ−score| {worst:.1e}  {q[:50]}")
    for i, name in ((2, "ranking without parts"), (3, "score parts (top k)"), (4, "rerank, one verdict")):
        xs = [r[i] for r in rows]
        print(f"{name:<24} median {statistics.median(xs):.3f} s, max {max(xs):.3f} s over {len(xs)} queries")
    print(f"largest |Σ parts − score|: {max(r[5] for r in rows):.1e}")


if __name__ == "__main__":
    main()
