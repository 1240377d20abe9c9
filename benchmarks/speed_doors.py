"""Issue 31's figures side by side with their yardsticks, in one run, with the load average beside each.

    .venv/bin/python benchmarks/speed_doors.py [--runs 5] [--queries benchmarks/data/hepth_litsearch_dev.jsonl]

Prints one table: a bare Python start (``python -c "import json"``); a repeated ``crase query`` in a fresh process
(its answer cached) and its ratio to the bare start; ``crase export --format html`` of the tachyon run (time, ratio,
size); PPR against ``networkx.pagerank`` on the same weighted graphs (the 20 benchmark questions' kept graphs; max
|Δπ|); the warm in-process median over those 20 questions; a library query seeded with 4 papers (~50K edges, fresh
process, its matrices cached) with its stage times; and the numbers issue 31 quoted from the release before.
Uses the shared result cache (``$CRASE_CACHE_DIR`` or ~/.cache/crase): the first runs fill it.
"""

from __future__ import annotations

import argparse
import compileall
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TACHYON = "tachyon condensation on unstable D-branes"
LIBRARY_QUERY = "holography and the AdS/CFT correspondence"
LIBRARY_SEEDS = ["9711200", "9802109", "9802150", "9905111"]
#: what issue 31 measured on the release before (2 cores; ratios against a bare Python start)
BEFORE = {"query": "0.78 s (29–40×)", "export": "5.1–6.4 s, 5.7–6.1 MB", "ppr": "1.5–1.7× networkx",
          "warm": "median 0.135–0.21 s", "library": "11.7 s (|E| 43,715, in the app)", "large": "1.75 s"}


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"


#: the code the "before" column runs (``--before DIR``: a checkout of the previous release, put first on PYTHONPATH)
BEFORE_CODE: list[str] = []
CPU: dict[str, float] = {}


def timed(cmd: list[str], runs: int, before: bool = False) -> tuple[float, float, str]:
    """(median, min) wall seconds of ``cmd`` over ``runs`` runs, and the load average when they started; the
    median CPU seconds (user + system) of the runs is left in ``CPU["last"]``. ``before``: with the code of
    ``--before`` (its PYTHONPATH)."""
    env = {**os.environ, "PYTHONPATH": BEFORE_CODE[0]} if before and BEFORE_CODE else None
    at = load()
    times, cpu = [], []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env,
                       cwd=BEFORE_CODE[0] if env else None)  # ``-m`` puts the working folder first on the path
        times.append(time.perf_counter() - t)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    CPU["last"] = statistics.median(cpu)
    return statistics.median(times), min(times), at


def side(cmd: list[str], runs: int, bare: float) -> str:
    """The same command with the ``--before`` code: its median wall and CPU time (empty without ``--before``)."""
    if not BEFORE_CODE:
        return ""
    med, _, at = timed(cmd, runs, before=True)
    return f"; same run, previous code: {med:.2f} s ({med / bare:.0f}×), CPU {CPU['last']:.2f} s (load {at})"


def slowest(trace: Path, k: int = 4) -> str:
    """The ``k`` slowest stages a trace file records, in seconds."""
    timings = json.loads(trace.read_text())["timings"]
    return ", ".join(f"{name} {t:.2f}" for name, t in sorted(timings.items(), key=lambda kv: -kv[1])[:k])


def row(name: str, value: str, yardstick: str, before: str, at: str) -> None:
    print(f"| {name} | {value} | {yardstick} | {before} | {at} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--queries", type=Path, default=ROOT / "benchmarks" / "data" / "hepth_litsearch_dev.jsonl")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--before", type=Path, help="a checkout of the previous code, run side by side (PYTHONPATH)")
    ap.add_argument("--large", type=Path, help="the JSON benchmarks/large_corpus.py printed for 2.5M papers")
    args = ap.parse_args()
    if args.before:
        BEFORE_CODE.append(str(args.before.resolve()))
    py, crase = sys.executable, [sys.executable, "-m", "crase_core.cli"]
    for code in filter(None, [ROOT, *map(Path, BEFORE_CODE)]):  # bytecode written, as an installed package has it
        compileall.compile_dir(str(code / "crase_core"), quiet=1)
    work = Path(tempfile.mkdtemp(prefix="crase-speed-"))
    print("| figure | now | yardstick | issue 31 (before) | load |")
    print("|---|---|---|---|---|")

    bare, bare_min, at = timed([py, "-c", "import json"], args.runs * 3)
    row("bare Python start", f"{bare * 1e3:.0f} ms (min {bare_min * 1e3:.0f})", "—", "—", at)

    trace = work / "tachyon.json"
    subprocess.run([*crase, "query", TACHYON, "--quiet", "--json", str(trace)], stdout=subprocess.DEVNULL, check=True)
    cmd = [*crase, "query", TACHYON, "--quiet"]
    med, low, at = timed(cmd, args.runs)
    cpu = CPU["last"]
    imports = statistics.median(float(subprocess.run(
        [py, "-c", "import time; t = time.perf_counter(); import crase_core.cli.main, crase_core.pipeline; "
         "print(time.perf_counter() - t)"], capture_output=True, text=True, check=True).stdout)
        for _ in range(args.runs))
    again = work / "tachyon-again.json"  # the cached run's own stage times
    subprocess.run([*crase, "query", TACHYON, "--quiet", "--json", str(again)], stdout=subprocess.DEVNULL, check=True)
    before = side(cmd, args.runs, bare)  # after this code's runs: the previous code rewrites cached files it reads
    row("`crase query` (cached, fresh process)", f"{med:.2f} s (min {low:.2f}), CPU {cpu:.2f} s",
        f"{med / bare:.1f}× bare (min {low / bare_min:.1f}×); target ≤ 20×; importing the pipeline {imports:.2f} s, "
        f"slowest stages (s): {slowest(again)}" + before, BEFORE["query"], at)

    page = work / "tachyon.html"
    cmd = [*crase, "export", str(trace), "--format", "html", "--out", str(page)]
    med, low, at = timed(cmd, args.runs)
    cpu, size = CPU["last"], page.stat().st_size / 1e6
    before = side(cmd, args.runs, bare)
    if before:
        before += f", {page.stat().st_size / 1e6:.2f} MB"
    row("`crase export --format html` (tachyon)", f"{med:.2f} s (min {low:.2f}), CPU {cpu:.2f} s, {size:.2f} MB",
        f"{med / bare:.0f}× bare (min {low / bare_min:.0f}×); target ≤ 60×, ≤ 3 MB" + before, BEFORE["export"], at)

    subprocess.run([*crase, "query", LIBRARY_QUERY, "--quiet", "--seed-ids", *LIBRARY_SEEDS],
                   stdout=subprocess.DEVNULL, check=True)  # fills the cache
    cmd = [*crase, "query", LIBRARY_QUERY, "--quiet", "--seed-ids", *LIBRARY_SEEDS]
    med, low, at = timed(cmd, max(1, args.runs // 2))
    cpu = CPU["last"]
    before = side(cmd, max(1, args.runs // 2), bare)
    lib = work / "library.json"
    subprocess.run([*crase, "query", LIBRARY_QUERY, "--quiet", "--json", str(lib), "--seed-ids", *LIBRARY_SEEDS],
                   stdout=subprocess.DEVNULL, check=True)
    lib_trace = json.loads(lib.read_text())
    row(f"library query, 4 seeds (|E| {len(lib_trace['edges']):,}; cached, fresh process)",
        f"{med:.2f} s (min {low:.2f}), CPU {cpu:.2f} s", f"target ≤ 4 s; slowest stages (s): {slowest(lib)}" + before,
        BEFORE["library"], at)

    in_process(args)
    large_row(args.large)


def large_row(path: Path | None) -> None:
    """The 2.5M-paper fresh-process query, from the JSON ``benchmarks/large_corpus.py --papers 2500000`` printed
    (building that store takes minutes, so it is measured there and read here), with the load it ran at."""
    if path is None:
        print("\n2.5M papers: pass --large RESULT.json (what `benchmarks/large_corpus.py --papers 2500000 "
              "--queries 10 --eval-queries 0 --append-share 0` printed) to add its row.")
        return
    r = json.loads(path.read_text())
    stages = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r.get("stage_s_median_warm", {}).items(),
                                                          key=lambda kv: -kv[1])[:3])
    row(f"`crase query`, {r['papers']:,} papers (fresh process, {r.get('queries', 10)} queries; "
        "benchmarks/large_corpus.py)",
        f"median {r['query_wall_s_median_warm']:.2f} s warm, {r['query_wall_s_median_cold']:.2f} s cold "
        f"(max {r['query_wall_s_max_warm']:.2f} / {r['query_wall_s_max_cold']:.2f} s), peak RSS "
        f"{r['query_peak_rss_mb']:,} MB", f"target ≤ 1.5 s; median stages (s): {stages}", BEFORE["large"],
        str(r.get("load_at_queries", "?")))


def in_process(args: argparse.Namespace) -> None:
    """PPR against networkx on the benchmark questions' graphs, and the warm in-process median."""
    from core_bench import ppr_graphs  # the script folder is on sys.path when run as a script

    from crase_core.backends import offline_backend
    from crase_core.cache import ResultCache, cache_root
    from crase_core.pipeline import Engine, run_query
    from crase_core.ranking.walks import load_block_kernel
    from crase_core.sources.local import LocalSource
    from crase_core.store.termstats import TermStats

    queries = [json.loads(line)["query"] for line in args.queries.read_text().splitlines() if line.strip()][: args.n]
    load_block_kernel()  # as the explorer's server does once (crase_app.shared.get_engine)
    source = LocalSource.open()
    engine = Engine(source, offline_backend(TermStats.from_index(source.text_index)), ResultCache(cache_root() / "results"))
    traces = [run_query(q, engine) for q in queries]  # fills the caches
    at = load()
    walls = []
    for q in queries:
        t = time.perf_counter()
        run_query(q, engine)
        walls.append(time.perf_counter() - t)
    row(f"warm in-process query ({len(queries)} questions)", f"median {statistics.median(walls):.3f} s, max {max(walls):.3f}",
        "target median ≤ 0.10 s", BEFORE["warm"], at)

    at = load()
    built: tuple[list[float], list[float]] = ([], [])  # (ours, networkx) seconds per graph
    walk: tuple[list[float], list[float]] = ([], [])
    diffs = []
    for kept, edges, p in ppr_graphs(traces):
        times, diff = ppr_pair(kept, edges, p)
        for i, seconds in enumerate(times):
            (built, walk)[i // 2][i % 2].append(seconds)
        diffs.append(diff)
    for label, (mine, nxs) in (("each building its graph from the same node and edge lists inside the timing", built),
                          ("each on its own graph built before the timing (ours keeps its walk matrices on it; "
                           "networkx.pagerank converts its graph to a scipy matrix on every call)", walk)):
        ratio = statistics.median(n / x for n, x in zip(nxs, mine, strict=True))
        row(f"PPR vs networkx.pagerank ({len(mine)} graphs, α 0.15, best of 3): {label}",
            f"ours median {statistics.median(mine) * 1e3:.2f} ms, networkx {statistics.median(nxs) * 1e3:.2f} ms",
            f"{ratio:.1f}× networkx (median of per-graph ratios); max |Δπ| {max(diffs):.1e}; target ≥ 5×, ≤ 1e-9",
            BEFORE["ppr"], at)


def ppr_pair(kept: list[str], edges: list[tuple[str, str, float]],
             p: dict[str, float]) -> tuple[tuple[float, float, float, float], float]:
    """One graph's PPR timings, best of 3 — (ours, networkx) each building its graph inside the timing, then
    (ours, networkx) on graphs built before it — and the max |Δπ| between the two answers."""
    import networkx as nx

    from crase_core.ranking.walks import PersonalizedPageRank, WeightedGraph

    def ours(graph: WeightedGraph) -> dict[str, float]:
        return PersonalizedPageRank().rank(graph, p, alpha=0.15, tol=1e-10, max_iter=1000).scores

    def theirs(graph: nx.DiGraph) -> dict[str, float]:
        return nx.pagerank(graph, alpha=0.85, personalization=p, dangling=p, tol=1e-10 / len(kept), max_iter=1000)

    def nx_graph() -> nx.DiGraph:
        graph = nx.DiGraph()
        graph.add_nodes_from(kept)
        graph.add_weighted_edges_from(edges)
        return graph

    built = best_of(lambda: ours(WeightedGraph(kept, edges))), best_of(lambda: theirs(nx_graph()))
    g, graph = WeightedGraph(kept, edges), nx_graph()
    a, b = ours(g), theirs(graph)  # ours keeps its walk matrices on the graph from here on
    walk = best_of(lambda: ours(g)), best_of(lambda: theirs(graph))
    return (*built, *walk), max(abs(a[n] - b[n]) for n in kept)


def best_of(run: Callable[[], object], times: int = 3) -> float:
    """The fastest of ``times`` calls of ``run``, in seconds."""
    best = math.inf
    for _ in range(times):
        t = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t)
    return best


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
