"""Can a reader point at what they see? Edge midpoints and papers of the evidence graph, in headless Chromium.

    .venv/bin/python -m benchmarks.graph_pointing [TRACE.json ...] [--window 1440x900]
        [--views timeline,clusters,focus] [--export] [--chromium /usr/bin/chromium]

(from the repository root, as a module: it draws the explorer's own graph component, ``crase_app``, which is
not an installed package.)

Without traces it runs the four demo queries of the explorer on the embedded hep-th corpus (default settings).
Each view is the app's graph component (assets/ui/graph_component, given the run view model's records as
the explorer page gives them), at the size the page draws it in a window of ``--window``; with ``--export``
also the HTML export of each run (the same script and records, in the export's own page). For every kept edge the pointer goes to the midpoint of its drawn
curve; for every paper to its centre. Printed per view (and over all):

* ``edge → itself``: share of edge midpoints at which the graph's hit test names that edge (what hover
  highlights and a click opens);
* ``nearest = itself``: share whose nearest item by the reference geometry
  (:func:`crase_core.views.graph_views.pointed_items`) is that edge;
* ``clear 5 px``: share with no other item (edge or paper rim) within 5 px — a midpoint a hand can hit;
* ``script = reference``: share of midpoints where the hit test names the reference's nearest item (items
  within 0.5 px of each other count as a tie);
* ``paper → itself``: share of paper centres at which the hit test names that paper.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from crase_app.graph_view import component_args
from crase_core import trace as trace_io
from crase_core.trace import RunTrace
from crase_core.views import graph_views as V

ROOT = Path(__file__).resolve().parent.parent

COMPONENT = ROOT / "assets" / "ui" / "graph_component" / "index.html"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
CLEAR_PX = 5.0


def app_canvas(window: tuple[int, int]) -> tuple[int, int]:
    """The component's size in the explorer at this window size: the page's main column, 70 % of the height."""
    w, h = window
    return (min(w - 461, 1400) if w > 1000 else w - 60), max(420, min(1040, round(h * 0.7)))


def demo_traces(tmp: Path) -> list[Path]:
    from crase_core.backends import offline_backend
    from crase_core.cache import ResultCache
    from crase_core.pipeline import Engine, run_query
    from crase_core.sources.local import LocalSource
    from crase_core.store.termstats import TermStats

    source = LocalSource.open()
    engine = Engine(source, offline_backend(TermStats.from_index(source.text_index)), ResultCache(tmp / "cache"))
    out = []
    for i, demo in enumerate(json.loads((ROOT / "assets" / "ui" / "demo_queries.json").read_text(encoding="utf-8"))):
        out.append(trace_io.save(run_query(demo["query"], engine), tmp / f"demo{i}.json"))
    return out


def measure(page: Any, graph: str = "window.craseGraph") -> dict[str, float]:
    """The shares of the module docstring for the view the page shows (``graph``: the page's graph object)."""
    geo = page.evaluate(f"() => {graph}.geometry()")
    nodes = [(n["id"], n["x"], n["y"], n["r"]) for n in geo["nodes"]]
    by_id = {n["id"]: n for n in geo["nodes"]}
    curves = []
    for e in geo["edges"]:
        a, b = by_id[e["from"]], by_id[e["to"]]
        curves.append((e["id"], V.drawn_curve((a["x"], a["y"]), (b["x"], b["y"]), e["bend"], a["r"], b["r"]),
                       e["width"], e["kept"]))
    box = page.evaluate(f"() => {{ const r = {graph}.canvas.getBoundingClientRect(); return [r.width, r.height]; }}")
    points, owners = [], []
    for eid, pts, _w, kept in curves:
        if kept and pts:
            m = V.arc_midpoint(pts)
            if 0 <= m[0] <= box[0] and 0 <= m[1] <= box[1]:
                points.append(m)
                owners.append(eid)
    hits = page.evaluate(f"ps => ps.map(p => {graph}.hitTest({{x: p[0], y: p[1]}}))", points)
    edges = [(eid, pts, w) for eid, pts, w, _ in curves]
    n_self = n_near = n_clear = n_agree = 0
    for m, eid, hit in zip(points, owners, hits, strict=True):
        items = V.pointed_items(m, nodes, edges)
        n_self += bool(hit and hit["kind"] == "edge" and hit["id"] == eid)
        n_near += bool(items and items[0][1:] == ("edge", eid))
        others = [d for d, kind, iid in items if (kind, iid) != ("edge", eid)]
        n_clear += not others or min(others) > CLEAR_PX
        best = [(k, i) for d, k, i in items if items and d <= items[0][0] + 0.5]
        n_agree += (hit is None and not items) or bool(hit and (hit["kind"], hit["id"]) in best)
    centres = [[n["x"], n["y"]] for n in geo["nodes"] if 0 <= n["x"] <= box[0] and 0 <= n["y"] <= box[1]]
    node_hits = page.evaluate(f"ps => ps.map(p => {graph}.hitTest({{x: p[0], y: p[1]}}))", centres)
    ids = [n["id"] for n in geo["nodes"] if 0 <= n["x"] <= box[0] and 0 <= n["y"] <= box[1]]
    n_nodes = sum(bool(h and h["kind"] == "node" and h["id"] == i) for h, i in zip(node_hits, ids, strict=True))
    k = max(1, len(points))
    return {"edges": len(points), "self": n_self / k, "nearest": n_near / k, "clear": n_clear / k,
            "agree": n_agree / k, "papers": len(ids), "paper_self": n_nodes / max(1, len(ids))}


def show_view(page: Any, trace: RunTrace, layout: str, groups: V.Communities | None) -> None:
    args = component_args(trace, layout, "top-k and trails", groups=groups if layout == "clusters" else None)
    args["key_data"] = f"{trace.run_id}|{layout}"
    page.evaluate("a => window.postMessage({type: 'streamlit:render', args: a}, '*')", args)
    page.wait_for_function("k => window.craseGraph && window.craseGraph.ready && window.craseGraph.key === k",
                           arg=args["key_data"], timeout=30_000)


def export_rows(browser: Any, paths: list[Path], views: list[str], window: tuple[int, int], tmp: Path) -> list[Any]:
    """The same shares in the HTML export (``crase export --format html``) of each run, opened from disk."""
    from crase_core.views.html_export import to_html

    rows = []
    page = browser.new_page(viewport={"width": window[0], "height": window[1]})
    for path in paths:
        html = tmp / (path.stem + ".html")
        html.write_text(to_html(trace_io.load(path)), encoding="utf-8")
        page.goto(html.as_uri())
        page.wait_for_function("() => window.craseExport && window.craseExport.ready", timeout=60_000)
        for layout in views:
            page.locator(f"[data-view='{layout}']").click()
            page.wait_for_function("l => window.craseExport.graph.key.startsWith(l) && window.craseExport.graph.ready",
                                   arg=layout, timeout=30_000)
            rows.append((path.name, "export " + layout, measure(page, "window.craseExport.graph")))
    page.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--window", default="1440x900")
    ap.add_argument("--views", default="timeline,clusters,focus")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--export", action="store_true", help="also measure the HTML export of each run")
    args = ap.parse_args(argv)
    window = tuple(int(x) for x in args.window.lower().split("x"))
    w, h = app_canvas((window[0], window[1]))
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        paths = args.traces or demo_traces(Path(tmp))
        rows = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": w, "height": h + 160})
            page.goto(COMPONENT.as_uri())
            for path in paths:
                trace = trace_io.load(path)
                groups = V.communities(trace)
                for layout in args.views.split(","):
                    show_view(page, trace, layout, groups)
                    rows.append((path.name, layout, measure(page)))
            if args.export:
                rows += export_rows(browser, paths, args.views.split(","), (window[0], window[1]), Path(tmp))
            browser.close()
    print(f"window {window[0]}×{window[1]} (graph canvas {w}×{h} px); pointer at every kept edge's midpoint and every paper")
    head = f"{'run':<16} {'view':<16} {'edges':>5} {'edge→itself':>11} {'nearest=itself':>14} {'clear 5px':>9} " \
           f"{'script=ref':>10} {'papers':>6} {'paper→itself':>12}"
    print(head)
    for name, layout, m in rows:
        print(f"{name:<16} {layout:<16} {m['edges']:>5} {m['self']:>11.1%} {m['nearest']:>14.1%} {m['clear']:>9.1%} "
              f"{m['agree']:>10.1%} {m['papers']:>6} {m['paper_self']:>12.1%}")
    for layout in sorted({lay for _, lay, _ in rows}, key=[lay for _, lay, _ in rows].index):
        sel = [m for _, lay, m in rows if lay == layout]
        n = sum(m["edges"] for m in sel)
        avg = {k: sum(m[k] * m["edges"] for m in sel) / max(1, n) for k in ("self", "nearest", "clear", "agree")}
        print(f"{'all':<16} {layout:<16} {n:>5} {avg['self']:>11.1%} {avg['nearest']:>14.1%} {avg['clear']:>9.1%} "
              f"{avg['agree']:>10.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
