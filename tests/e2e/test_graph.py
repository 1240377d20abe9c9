"""The evidence graph in a real browser, on the embedded hep-th corpus and the first demo query (~700 papers).

Checks what a reader relies on, not only screenshots:
* the default view draws labels for the top-ranked papers, no two drawn labels overlap, and no two
  papers carry the same label;
* hovering an edge's midpoint shows *that* edge's tooltip, clicking it opens *that* edge in the
  inspector (20 edges, positions from vis-network), and the tooltip goes when the mouse leaves;
* a claim cell in the inspector shows the claim's whole text (wrapped, not clipped);
* the timeline, cluster and focus layouts render.
Screenshots (1440×900 and 1920×1080) go to ``artifacts/screenshots`` (or ``$CRASE_SCREENSHOT_DIR``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from e2e_support import ROOT, SHOTS, skip_without_browser, streamlit_app

skip_without_browser()

from playwright.sync_api import Frame, Page  # noqa: E402

DEMO = json.loads((ROOT / "assets" / "ui" / "demo_queries.json").read_text(encoding="utf-8"))[0]
N_EDGE_CLICKS = 20


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory, chromium):
    """The app over the embedded corpus, the first demo query run from its button; yields (page, trace)."""
    tmp = tmp_path_factory.mktemp("e2e-graph")
    cache = Path(os.environ["CRASE_E2E_CACHE_DIR"]) if os.environ.get("CRASE_E2E_CACHE_DIR") else None
    with streamlit_app(tmp, corpus=None, cache_dir=cache) as (url, runs_dir):
        page = chromium.new_page(viewport={"width": 1440, "height": 900})
        page.dialogs = []  # type: ignore[attr-defined]
        page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))  # type: ignore[attr-defined]
        page.goto(url)
        page.get_by_role("button", name=DEMO["label"]).click(timeout=60_000)
        deadline = time.time() + 120
        saved: list[Path] = []
        while time.time() < deadline and not saved:
            saved = [p for p in runs_dir.glob("*.json") if not p.name.endswith(".meta.json")]
            time.sleep(0.3)
        assert saved, "the demo query did not finish (no saved run)"
        from crase_core import trace as trace_io

        trace = trace_io.load(saved[0])
        assert trace.query == DEMO["query"]
        page.get_by_role("link", name="Evidence graph").click()
        yield page, trace
        page.close()


def graph_frame(page: Page) -> Frame:
    iframe = page.locator("iframe[title*='crase_graph']").first
    iframe.wait_for(state="visible", timeout=30_000)
    frame = iframe.element_handle().content_frame()
    assert frame is not None
    frame.wait_for_function("() => window.craseGraph && window.craseGraph.ready === true", timeout=30_000)
    return frame


def iframe_origin(page: Page) -> dict:
    box = page.locator("iframe[title*='crase_graph']").first.bounding_box()
    assert box is not None
    return box


# Edges whose midpoint is unambiguous by plain geometry (computed here, not by vis-network's hit test):
# at least 9 px from every other edge's segment, clear of every node's box and drawn label, inside the canvas.
CLEAR_EDGES_JS = """
([n, skip]) => {
  const g = window.craseGraph, net = g.network, pos = net.getPositions();
  const box = document.getElementById('graph').getBoundingClientRect();
  const dom = id => net.canvasToDOM(pos[id]);
  const edges = g.edges.get().map(e => ({id: e.id, from: String(e.from), to: String(e.to),
                                          a: dom(e.from), b: dom(e.to)}));
  const nodes = g.nodes.get().map(v => ({p: dom(v.id), r: (v.size || 10) * net.getScale()}));
  const segDist = (p, a, b) => {
    const dx = b.x - a.x, dy = b.y - a.y, L = dx * dx + dy * dy;
    let t = L ? ((p.x - a.x) * dx + (p.y - a.y) * dy) / L : 0; t = Math.max(0, Math.min(1, t));
    return Math.hypot(p.x - (a.x + t * dx), p.y - (a.y + t * dy));
  };
  const out = [];
  for (const e of edges) {
    if (skip.includes(e.id)) continue;
    const m = {x: (e.a.x + e.b.x) / 2, y: (e.a.y + e.b.y) / 2};
    if (m.x < 12 || m.y < 12 || m.x > box.width - 300 || m.y > box.height - 40) continue;  // legend, hint
    // vis-network hit-tests a node by its bounding box (a square around the disc), not the disc
    if (nodes.some(v => Math.abs(m.x - v.p.x) < v.r + 6 && Math.abs(m.y - v.p.y) < v.r + 6)) continue;
    if ((g.labels || []).some(l => m.x > l.x - 4 && m.x < l.x + l.w + 4 && m.y > l.y - 4 && m.y < l.y + l.h + 4)) continue;
    if (edges.some(o => o.id !== e.id && segDist(m, o.a, o.b) < 9)) continue;
    out.push({id: e.id, from: e.from, to: e.to, x: m.x + box.left, y: m.y + box.top});
    if (out.length >= n) break;
  }
  return out;
}
"""


def test_default_view_labels_fit_and_are_unique(demo_run):
    page, trace = demo_run
    frame = graph_frame(page)
    page.mouse.move(2, 2)
    page.wait_for_timeout(300)
    info = frame.evaluate("""() => {
      const g = window.craseGraph;
      return {labels: g.labels, nodes: g.nodes.get().map(n => ({id: String(n.id), lab: n.lab, rank: n.rank})),
              height: document.getElementById('graph').getBoundingClientRect().height,
              width: document.getElementById('graph').getBoundingClientRect().width};
    }""")
    page.screenshot(path=str(SHOTS / "graph_1440x900_default.png"))
    # the default view: the top 20 and their trails, not the whole ~300-paper graph
    assert len(trace.nodes) > 200
    assert 20 <= len(info["nodes"]) <= 80 and len(info["nodes"]) < len(trace.nodes) / 2, len(info["nodes"])
    # big: full width of the main column, most of the window's height
    assert info["width"] >= 900 and info["height"] >= 0.7 * 900, info
    labs = [n["lab"] for n in info["nodes"]]
    assert len(set(labs)) == len(labs), "two papers share a label"
    drawn = [b for b in info["labels"] if not b.get("group")]
    assert len(drawn) >= 10, drawn
    boxes = info["labels"]
    for i, a in enumerate(boxes):
        assert a["x"] >= 0 and a["y"] >= 0 and a["x"] + a["w"] <= info["width"] and a["y"] + a["h"] <= info["height"]
        for b in boxes[i + 1:]:
            overlap = a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]
            assert not overlap, (a, b)
    top = next(n for n in info["nodes"] if n["rank"] == 1)
    assert any(b["id"] == top["id"] for b in drawn), "the top-ranked paper has no label"


def test_twenty_edge_clicks_open_exactly_that_edge(demo_run):
    page, trace = demo_run
    frame = graph_frame(page)
    page.locator("iframe[title*='crase_graph']").first.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(200)
    origin = iframe_origin(page)
    done: list[str] = []
    # the default view first, then zoomed in on parts of it (still positions from vis-network)
    for zoom in ZOOMS:
        if len(done) >= N_EDGE_CLICKS:
            break
        if zoom is not None:
            frame.evaluate(ZOOM_JS, zoom)
        targets = frame.evaluate(CLEAR_EDGES_JS, [N_EDGE_CLICKS - len(done), done])
        for t in targets:
            click_edge_and_check(page, frame, trace, origin, t, first=not done)
            done.append(t["id"])
    assert len(done) == N_EDGE_CLICKS, f"only {len(done)} edges have an unambiguous midpoint"
    # the tooltip goes away with the mouse
    page.mouse.move(origin["x"] + 5, origin["y"] - 40)
    frame.wait_for_function("() => document.getElementById('tip').style.display === 'none'", timeout=5_000)
    frame.evaluate("() => document.getElementById('fit').click()")


# the fitted view, then 2.5× zooms on a grid of points of it
# the default view, then 35 regions at 2.5×, then (edges that meet near a hub) the same regions at 5× (the
# default keeps every lexically scored edge, θ_lexical 0: the view holds more edges close together)
ZOOMS: list[list[float] | None] = [None] + [[fx, fy, k] for k in (2.5, 5.0) for fy in (0.2, 0.35, 0.5, 0.65, 0.8)
                                            for fx in (0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 0.95)]
ZOOM_JS = """
([fx, fy, k]) => {
  const net = window.craseGraph.network;
  document.getElementById('fit').click();
  const box = document.getElementById('graph').getBoundingClientRect();
  const p = net.DOMtoCanvas({x: box.width * fx, y: box.height * fy});
  net.moveTo({position: p, scale: net.getScale() * k, animation: false});
}
"""


def click_edge_and_check(page: Page, frame: Frame, trace, origin: dict, t: dict, first: bool) -> None:
    """Hover the midpoint (the tooltip names that edge), click it (the inspector opens that edge)."""
    x, y = origin["x"] + t["x"], origin["y"] + t["y"]
    assert 0 < y < page.viewport_size["height"], "the graph is not in the window"
    page.mouse.move(x, y)
    try:
        frame.wait_for_function("id => window.craseGraph.hovered && window.craseGraph.hovered.id === id",
                                arg=t["id"], timeout=5_000)
    except Exception:
        hovered = frame.evaluate("() => window.craseGraph.hovered")
        raise AssertionError(f"hovering the midpoint of {t} hovered {hovered}") from None
    tip = frame.locator("#tip")
    assert tip.is_visible()
    tip_text = tip.inner_text()
    edge = trace.edge(t["from"], t["to"])
    assert "cites" in tip_text and f"Δ = {edge.delta:.3f}" in tip_text, tip_text
    if first:
        page.screenshot(path=str(SHOTS / "graph_1440x900_edge_tooltip.png"))
    page.mouse.click(x, y)
    clicked = frame.evaluate("() => window.craseGraph.clicks[window.craseGraph.clicks.length - 1]")
    assert clicked["kind"] == "edge" and clicked["id"] == t["id"], (clicked, t)
    page.wait_for_function(
        "([u, v]) => [...document.querySelectorAll('h5')].some(h => h.innerText.includes(u + ' → ' + v)"
        " || h.innerText.includes(u + '\\u00a0→\\u00a0' + v))",
        arg=[t["from"], t["to"]], timeout=30_000)
    page.get_by_text(f"Decision — {edge.decision}", exact=False).first.wait_for(timeout=10_000)
    # the page did not move the graph: the next midpoint is still where vis-network says
    assert iframe_origin(page)["y"] == pytest.approx(origin["y"], abs=1)


def test_claim_cells_show_their_whole_text(demo_run):
    page, trace = demo_run
    frame = graph_frame(page)
    page.locator("iframe[title*='crase_graph']").first.evaluate("el => el.scrollIntoView({block: 'start'})")
    frame.evaluate("() => document.getElementById('fit').click()")
    page.wait_for_timeout(200)

    def longest(t: dict):
        e = trace.edge(t["from"], t["to"])
        cs = [c for p in (e.citing, e.cited) if p in trace.claims for c in trace.claims[p].claims if "$" not in c.text]
        return max(cs, key=lambda c: len(c.text), default=None)

    targets = [t for t in frame.evaluate(CLEAR_EDGES_JS, [10, []]) if longest(t) is not None]
    t = max(targets, key=lambda t: len(longest(t).text))
    claim = longest(t)
    assert len(claim.text) > 80
    click_edge_and_check(page, frame, trace, iframe_origin(page), t, first=False)
    cell = page.locator("td", has_text=claim.text[:60]).first
    cell.wait_for(timeout=30_000)
    cell.scroll_into_view_if_needed()
    text = " ".join(cell.inner_text().split())
    assert " ".join(claim.text.split()) in text
    clipped = cell.evaluate("td => td.scrollWidth > td.clientWidth + 1 || getComputedStyle(td).whiteSpace === 'nowrap'")
    assert not clipped
    page.wait_for_timeout(300)
    page.screenshot(path=str(SHOTS / "inspector_1440x900_claims.png"))
    page.locator("[data-testid='stVegaLiteChart']").first.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    page.screenshot(path=str(SHOTS / "inspector_1440x900_heatmap.png"))


def test_layouts_and_wide_screen(demo_run):
    page, trace = demo_run
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.wait_for_timeout(500)
    page.locator("iframe[title*='crase_graph']").first.evaluate("el => el.scrollIntoView({block: 'start'})")
    frame = graph_frame(page)
    assert frame.evaluate("() => document.getElementById('graph').getBoundingClientRect().height") >= 0.7 * 1080
    page.mouse.move(2, 2)
    page.wait_for_timeout(300)
    page.screenshot(path=str(SHOTS / "graph_1920x1080_timeline.png"))
    page.get_by_text("Clusters", exact=True).first.click()
    frame.wait_for_function("() => window.craseGraph.key.includes('|clusters|') && window.craseGraph.ready", timeout=30_000)
    groups = frame.evaluate("() => window.craseGraph.labels.filter(b => b.group).length")
    assert groups >= 2
    page.screenshot(path=str(SHOTS / "graph_1920x1080_clusters.png"))
    page.get_by_text("Focus", exact=True).first.click()
    frame.wait_for_function("() => window.craseGraph.key.includes('|focus|') && window.craseGraph.ready", timeout=30_000)
    nodes = frame.evaluate("() => window.craseGraph.nodes.getIds()")
    top = trace.results[0]
    assert top.paper_id in nodes and (top.seed is None or top.seed in nodes)
    page.screenshot(path=str(SHOTS / "graph_1920x1080_focus.png"))
    page.set_viewport_size({"width": 1440, "height": 900})


# A paper whose disc centre is inside the browser window (not only inside the iframe) and hit-tests to itself.
VISIBLE_NODE_JS = """
([skip, iframeTop, viewH]) => {
  const g = window.craseGraph, net = g.network, box = document.getElementById('graph').getBoundingClientRect();
  for (const id of g.nodes.getIds()) {
    if (String(id) === skip) continue;
    const d = net.canvasToDOM(net.getPositions([id])[id]);
    const pageY = iframeTop + box.top + d.y;
    if (d.x > 20 && d.y > 30 && d.x < box.width - 20 && d.y < box.height - 40 && pageY > 10 && pageY < viewH - 10
        && net.getNodeAt(d) === id)
      return {id: String(id), x: box.left + d.x, y: box.top + d.y};
  }
  return null;
}
"""


def test_double_click_focuses_on_that_paper(demo_run):
    """Double-clicking a paper of the default (timeline) view switches to the focus view of that paper:
    the layout control says Focus, the focus picker names it, and the graph is its focus view."""
    page, trace = demo_run
    page.set_viewport_size({"width": 1440, "height": 900})
    page.get_by_text("Timeline", exact=True).first.click()
    frame = graph_frame(page)
    frame.wait_for_function("() => window.craseGraph.key.includes('|timeline|') && window.craseGraph.ready", timeout=30_000)
    iframe = page.locator("iframe[title*='crase_graph']").first
    iframe.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)
    origin = iframe_origin(page)
    # not the paper the focus picker already holds (the top result): the switch must come from the double click
    target = frame.evaluate(VISIBLE_NODE_JS, [trace.results[0].paper_id, origin["y"], 900])
    assert target is not None, "no paper of the default view is inside the window"
    page.mouse.dblclick(origin["x"] + target["x"], origin["y"] + target["y"])
    frame = graph_frame(page)  # the rerun may replace the component's frame: look it up again
    frame.wait_for_function("id => window.craseGraph.key.includes('|focus|') && window.craseGraph.key.endsWith('|' + id)"
                            " && window.craseGraph.ready", arg=target["id"], timeout=30_000)
    nodes = set(frame.evaluate("() => window.craseGraph.nodes.getIds().map(String)"))
    from crase_app.graph_view import focus_view, node_labels

    assert nodes == set(focus_view(trace, target["id"]).nodes)
    picker = page.locator("[data-testid='stSelectbox']", has_text="Focus on").first
    shown = picker.evaluate("el => el.innerText + ' ' + [...el.querySelectorAll('input')].map(i => i.value).join(' ')"
                            " + ' ' + [...el.querySelectorAll('[title]')].map(t => t.title).join(' ')")
    assert node_labels(trace, [n.paper.id for n in trace.nodes])[target["id"]] in shown, shown
    page.screenshot(path=str(SHOTS / "graph_1440x900_focus_by_double_click.png"))
