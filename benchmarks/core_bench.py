"""Core engine numbers on the embedded corpus (prints a table; not a test).

    python benchmarks/core_bench.py [--queries PATH] [--n 20] [--preset NAME] [--set knob=value ...]

Reports: corpus load and BM25 index build time and size (fresh cache dir);
per-stage wall time, |V|, |E| for each query, cold (empty result cache),
warm from the disk cache (fresh in-process state) and warm in-process; median and max; peak RSS; and PPR time side by side with
``networkx.pagerank`` on the same weighted graph.
Targets (issue 2): end to end median < 3 s cold, < 0.5 s warm; peak memory < 1.5 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_QUERIES = [ROOT / "benchmarks" / "data" / "hepth_litsearch_dev.jsonl"]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=Path, default=next((p for p in DEFAULT_QUERIES if p.exists()), None))
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--preset", default="default", help="the settings preset to measure (default: the defaults)")
    ap.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE",
                    help="a pipeline setting on top of the preset, as JSON (e.g. --set L=5 --set theta=0.75)")
    args = ap.parse_args()
    if args.queries is None or not args.queries.exists():
        sys.exit("no query file found; pass --queries PATH (JSONL with a 'query' field)")
    queries = [json.loads(line)["query"] for line in args.queries.read_text().splitlines() if line.strip()][: args.n]

    os.environ["CRASE_CACHE_DIR"] = tempfile.mkdtemp(prefix="crase-bench-")
    from crase_core.backends import offline_backend
    from crase_core.cache import ResultCache, cache_root
    from crase_core.pipeline import Engine, run_query
    from crase_core.retrieval.semantic import feedback_fuse
    from crase_core.settings.pipeline import PipelineSettings
    from crase_core.sources.local import LocalSource, open_corpus
    from crase_core.store.corpus import load_corpus
    from crase_core.store.termstats import TermStats
    from crase_core.store.textindex import TextIndex

    t = time.perf_counter()
    load_corpus()
    t_parse = time.perf_counter() - t
    t = time.perf_counter()
    corpus = open_corpus()  # parses again and builds the memory-mapped store (docs/scaling.md)
    t_build = time.perf_counter() - t
    t = time.perf_counter()
    corpus = open_corpus()
    t_open = time.perf_counter() - t
    t = time.perf_counter()
    index = TextIndex.for_corpus(corpus)
    t_index = time.perf_counter() - t
    print(f"corpus: {len(corpus):,} papers, {corpus.n_citations:,} citations")
    print(f"corpus parse {t_parse:.2f} s; store build {t_build:.2f} s; store open (memory-mapped) {t_open:.2f} s")
    print(f"BM25 index build/open {t_index:.2f} s; size on disk {index.size_bytes() / 1e6:.1f} MB")
    t = time.perf_counter()
    TextIndex.for_corpus(corpus)
    print(f"BM25 index load {time.perf_counter() - t:.2f} s")

    source = LocalSource(corpus, index, shipped_embeddings=True)
    t = time.perf_counter()
    embeddings = source.embeddings  # read at first use; timed here, once per process
    print(f"shipped embeddings (semantic feedback) load {time.perf_counter() - t:.2f} s: "
          + (f"{embeddings.matrix.shape[0]:,} × {embeddings.matrix.shape[1]}" if embeddings is not None else "none"))
    if embeddings is not None:
        hits = source.search("noncommutative solitons and tachyon condensation", 100)
        times = []
        for _ in range(20):
            t = time.perf_counter()
            feedback_fuse(hits, embeddings, corpus.index, corpus.papers, source.visible, 0.4)
            times.append(time.perf_counter() - t)
        print(f"semantic feedback per search (100 hits): median {statistics.median(times) * 1000:.2f} ms")
    engine = Engine(source, offline_backend(TermStats.from_index(index)), ResultCache(cache_root() / "results"))
    changes = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.set)}
    settings = PipelineSettings.from_preset(args.preset, **changes)
    print(f"settings: preset {args.preset}" + (f", {changes}" if changes else ""))
    stages = ["plan", "seeds", "expansion", "budget", "claims", "entailment", "pruning", "ranking"]
    rows = {"cold": [], "warm (disk cache, new process state)": [], "warm (in-process cache)": []}
    traces = []
    for phase in rows:
        if phase.startswith("warm (disk"):
            engine = Engine(source, engine.backend, ResultCache(cache_root() / "results"))  # empty memory layer
        for q in queries:
            t = time.perf_counter()
            tr = run_query(q, engine, settings)
            wall = time.perf_counter() - t
            rows[phase].append((wall, tr.timings, len(tr.nodes), len(tr.edges)))
            if phase == "cold":
                traces.append(tr)
    for phase, data in rows.items():
        walls = [w for w, *_ in data]
        print(f"\n{phase}: end to end median {statistics.median(walls):.3f} s, max {max(walls):.3f} s over {len(walls)} queries")
        print("  stage        median     max")
        for s in stages:
            vals = [tm.get(s, 0.0) for _, tm, _, _ in data]
            print(f"  {s:<11} {statistics.median(vals):7.3f} {max(vals):7.3f}")
    v = [n for *_, n, _ in rows["cold"]]
    e = [m for *_, m in rows["cold"]]
    print(f"\n|V| median {statistics.median(v):.0f} max {max(v)}; |E| median {statistics.median(e):.0f} max {max(e)}")
    print(f"peak RSS {peak_rss_mb():.0f} MB")

    # PPR vs networkx.pagerank on the same weighted, pruned graphs
    import networkx as nx

    from crase_core.ranking.walks import PersonalizedPageRank, WeightedGraph

    ours_t, nx_t, diffs = [], [], []
    for kept, edges, p in ppr_graphs(traces):
        g = WeightedGraph(kept, edges)
        t = time.perf_counter()
        ours = PersonalizedPageRank().rank(g, p, alpha=0.15, tol=1e-10, max_iter=1000).scores
        ours_t.append(time.perf_counter() - t)
        G = nx.DiGraph()
        G.add_nodes_from(kept)
        G.add_weighted_edges_from(edges)
        t = time.perf_counter()
        theirs = nx.pagerank(G, alpha=0.85, personalization=p, dangling=p, tol=1e-10 / len(kept), max_iter=1000)
        nx_t.append(time.perf_counter() - t)
        diffs.append(max(abs(ours[n] - theirs[n]) for n in kept))
    print(f"\nPPR (ours, scipy sparse power iteration): median {statistics.median(ours_t) * 1e3:.2f} ms")
    print(f"networkx.pagerank (same graph, p, α):      median {statistics.median(nx_t) * 1e3:.2f} ms")
    print(f"ratio networkx/ours {statistics.median(nx_t) / statistics.median(ours_t):.1f}×; "
          f"max |Δπ| {max(diffs):.2e}")


def ppr_graphs(traces: list) -> list[tuple[list[str], list[tuple[str, str, float]], dict[str, float]]]:
    """(kept papers, kept weighted edges, uniform seed restart) of each run that kept a paper: the graphs PPR
    and networkx.pagerank are timed on."""
    from crase_core.stages.ranking import personalization_vector

    out = []
    for tr in traces:
        kept = [n.paper.id for n in tr.nodes if n.kept]
        if kept:
            edges = [(e.citing, e.cited, e.weight) for e in tr.edges if e.kept]
            p = personalization_vector(tr.seeds, set(kept), "uniform") or {n: 1 / len(kept) for n in kept}
            out.append((kept, edges, p))
    return out


if __name__ == "__main__":
    main()
