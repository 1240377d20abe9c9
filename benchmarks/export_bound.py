"""How long ``crase export --format html`` takes at a given run size: the measurement behind the export's bound
(:data:`crase_core.views.export.MAX_HTML_PAPERS`, ``MAX_HTML_EDGES``, ``MAX_HTML_TRACE_BYTES``).

    .venv/bin/python benchmarks/export_bound.py TRACE.json --sizes 2000:8000,10000:150000 [--keep DIR]

TRACE.json is any saved run (``crase query … --json``); for each ``PAPERS:EDGES`` a synthetic trace of that many
papers (copies of the run's first node and its claims, new ids) and edges (copies of its first edge between random
pairs, seeded) is written, then read back (``trace.load``) and exported (``html_export.to_html``), each timed.
Prints one JSON line per size (file MB, load s, export s, max RSS MB) with the load average beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import tempfile
import time
from pathlib import Path
from typing import Any


def synthetic(base: dict[str, Any], papers: int, edges: int, seed: int = 0) -> dict[str, Any]:
    """A trace of ``papers`` nodes and ``edges`` edges shaped like ``base``'s first node and edge."""
    rnd = random.Random(seed)
    node0, edge0 = base["nodes"][0], base["edges"][0]
    claims0 = base["claims"][node0["paper"]["id"]]
    nodes = [{**node0, "paper": {**node0["paper"], "id": f"P{i}", "title": f"Paper {i}: {node0['paper']['title']}"},
              "rank": i + 1 if i < 50 else None, "role": "seed" if i < 10 else "expanded"} for i in range(papers)]
    pairs: set[tuple[int, int]] = set()
    while len(pairs) < edges:
        a, b = rnd.randrange(papers), rnd.randrange(papers)
        if a != b:
            pairs.add((a, b))
    return {**base, "nodes": nodes, "edges": [{**edge0, "citing": f"P{a}", "cited": f"P{b}"} for a, b in sorted(pairs)],
            "claims": {f"P{i}": {**claims0, "paper_id": f"P{i}"} for i in range(papers)},
            "seeds": [], "results": [], "query_hits": [], "restart_hits": []}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", type=Path)
    ap.add_argument("--sizes", default="2000:8000,10000:40000,10000:150000")
    ap.add_argument("--keep", type=Path, default=None, help="write the synthetic traces here (default: a temp dir)")
    args = ap.parse_args()

    from crase_core import trace as trace_io
    from crase_core.views.html_export import to_html

    base = json.loads(args.trace.read_text(encoding="utf-8"))
    folder = args.keep or Path(tempfile.mkdtemp(prefix="crase-export-bound-"))
    folder.mkdir(parents=True, exist_ok=True)
    for size in args.sizes.split(","):
        papers, edges = (int(x) for x in size.split(":"))
        path = folder / f"trace-{papers}-{edges}.json"
        path.write_text(json.dumps(synthetic(base, papers, edges)), encoding="utf-8")
        load_before = os.getloadavg()[0]
        t0 = time.perf_counter()
        trace = trace_io.load(path)
        t1 = time.perf_counter()
        page = to_html(trace)
        t2 = time.perf_counter()
        print(json.dumps({"papers": papers, "edges": edges, "file_mb": round(path.stat().st_size / 1e6, 1),
                          "load_s": round(t1 - t0, 1), "export_s": round(t2 - t1, 1),
                          "page_mb": round(len(page) / 1e6, 1),
                          "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                          "loadavg": [round(load_before, 2), round(os.getloadavg()[0], 2)]}), flush=True)
        if args.keep is None:
            path.unlink()


if __name__ == "__main__":
    main()
