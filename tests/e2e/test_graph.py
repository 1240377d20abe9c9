"""The evidence graph in a real browser, on the embedded hep-th corpus and the first demo query.

Checks what a reader relies on, not only screenshots:
* the default view draws labels for the top-ranked papers, no two drawn labels overlap, and no two
  papers carry the same label;
* pointing: 20 random kept-edge midpoints and 20 random papers of the default view (seeded) — the item
  highlighted on hover is the one nearest the pointer (reference geometry, tests/e2e/pointing.py), its
  tooltip shows, and a click there opens exactly that item in the inspector;
* a claim cell in the inspector shows the claim's whole text (wrapped, not clipped);
* the timeline, cluster and focus layouts render at 1440×900 and 1920×1080; in the focus view no label
  has an edge running through it; double-clicking a paper opens its focus view.
Screenshots go to ``artifacts/screenshots`` (or ``$CRASE_SCREENSHOT_DIR``).
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
from pointing import point_and_click, targets  # noqa: E402

from crase_core.views.graph_views import drawn_curve  # noqa: E402

DEMO = json.loads((ROOT / "assets" / "ui" / "demo_queries.json").read_text(encoding="utf-8"))[0]
GRAPH = "window.craseGraph"
N_EDGES = N_NODES = 20
SEED = 26


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


def iframe_origin(page: Page) -> tuple[float, float]:
    box = page.locator("iframe[title*='crase_graph']").first.bounding_box()
    assert box is not None
    return box["x"], box["y"]


def to_top(page: Page) -> None:
    """The graph's frame at the top of the window, below Streamlit's header bar."""
    page.locator("iframe[title*='crase_graph']").first.evaluate(
        "el => { el.scrollIntoView({block: 'start'}); window.scrollBy(0, -72);"
        " const main = document.querySelector('[data-testid=stMain]'); if (main) main.scrollBy(0, -72); }")
    page.wait_for_timeout(250)


def test_default_view_labels_fit_and_are_unique(demo_run):
    page, trace = demo_run
    frame = graph_frame(page)
    info = frame.evaluate("""() => { const g = window.craseGraph, r = g.canvas.getBoundingClientRect();
        return {labels: g.labels, width: r.width, height: r.height,
                nodes: g.nodes.getIds().map(id => ({id: String(id)}))}; }""")
    assert info["width"] >= 900 and info["height"] >= 0.65 * 900, info
    from crase_core.views.graph_views import node_labels

    labels = node_labels(trace, [n.paper.id for n in trace.nodes])
    shown = [labels[n["id"]] for n in info["nodes"]]
    assert len(set(shown)) == len(shown), "two papers share a label"
    drawn = [b for b in info["labels"] if not b["caption"]]
    assert len(drawn) >= 15, drawn
    boxes = info["labels"]
    for i, a in enumerate(boxes):
        assert a["x"] >= 0 and a["y"] >= 0 and a["x"] + a["w"] <= info["width"] and a["y"] + a["h"] <= info["height"]
        for b in boxes[i + 1:]:
            overlap = a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]
            assert not overlap, (a, b)
    assert any(b["id"] == trace.results[0].paper_id for b in drawn), "the top-ranked paper has no label"
    to_top(page)
    page.mouse.move(2, 2)
    page.screenshot(path=str(SHOTS / "graph_1440x900_timeline.png"))


def _inspector_shows(page: Page, trace):
    def opened(click: dict) -> None:
        if click["kind"] == "edge":
            edge = trace.edge(click["citing"], click["cited"])
            page.wait_for_function(
                "([u, v]) => [...document.querySelectorAll('h5')].some(h => h.innerText.includes(u + ' → ' + v)"
                " || h.innerText.includes(u + '\\u00a0→\\u00a0' + v))", arg=[edge.citing, edge.cited], timeout=30_000)
            page.get_by_text(f"Decision — {edge.decision}", exact=False).first.wait_for(timeout=10_000)
        else:
            page.wait_for_function(  # the node inspector names the paper's id (as a link or as code)
                "id => [...document.querySelectorAll('[data-testid=stMarkdownContainer]')].some(m => m.innerText.includes(id))"
                " && [...document.querySelectorAll('h5')].length > 0", arg=click["id"], timeout=30_000)
    return opened


def test_hover_and_click_name_the_same_item_at_random_edges_and_papers(demo_run):
    """20 random kept-edge midpoints and 20 random papers of the default view: the highlighted item is the one
    nearest the pointer, and the click opens exactly it (the inspector shows that edge or paper)."""
    page, trace = demo_run
    frame = graph_frame(page)
    to_top(page)
    aims = targets(frame, GRAPH, N_EDGES, N_NODES, SEED)
    origin = iframe_origin(page)
    done = []
    for t in aims:
        done.append(point_and_click(page, frame, GRAPH, origin, t, _inspector_shows(page, trace)))
        if len(done) == 1:
            page.screenshot(path=str(SHOTS / "graph_1440x900_edge_tooltip.png"))
        assert iframe_origin(page) == pytest.approx(origin, abs=1)  # the page did not move the graph
    assert len(done) == N_EDGES + N_NODES
    hits_self = sum((r["click"]["kind"], r["click"]["id"]) == (r["target"].kind, r["target"].id) for r in done)
    print(f"\n{hits_self} of {len(done)} clicks opened the item aimed at (the rest: an item as near or nearer)")
    edge_self = sum((r["click"]["kind"], r["click"]["id"]) == ("edge", r["target"].id) for r in done[:N_EDGES])
    assert edge_self >= 0.85 * N_EDGES  # a midpoint is almost always nearest its own edge
    page.mouse.move(origin[0] + 5, origin[1] - 40)  # the tooltip goes away with the mouse
    frame.wait_for_function(f"() => {GRAPH}.tip.style.display === 'none'", timeout=5_000)


def test_claim_cells_show_their_whole_text(demo_run):
    page, trace = demo_run
    frame = graph_frame(page)
    to_top(page)
    frame.evaluate(f"() => {GRAPH}.fit()")

    def longest(eid: str):
        u, v = eid.split("->")
        cs = [c for p in (u, v) if p in trace.claims for c in trace.claims[p].claims if "$" not in c.text]
        return max(cs, key=lambda c: len(c.text), default=None)

    aims = [t for t in targets(frame, GRAPH, 20, 0, SEED + 1)
            if t.nearest and t.nearest[0] == ("edge", t.id) and len(t.nearest) == 1 and longest(t.id) is not None]
    t = max(aims, key=lambda t: len(longest(t.id).text))
    claim = longest(t.id)
    assert len(claim.text) > 80
    point_and_click(page, frame, GRAPH, iframe_origin(page), t, _inspector_shows(page, trace))
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


def labels_crossed_by_edges(frame: Frame) -> list[tuple[str, str]]:
    """(label, edge) pairs where an edge's drawn curve runs through a drawn label's box."""
    geo = frame.evaluate(f"() => {GRAPH}.geometry()")
    boxes = [b for b in frame.evaluate(f"() => {GRAPH}.labels") if not b["caption"]]
    at = {n["id"]: n for n in geo["nodes"]}
    out = []
    for e in geo["edges"]:
        a, b = at[e["from"]], at[e["to"]]
        pts = drawn_curve((a["x"], a["y"]), (b["x"], b["y"]), e["bend"], a["r"], b["r"], n=200)
        for box in boxes:
            if any(box["x"] <= x <= box["x"] + box["w"] and box["y"] <= y <= box["y"] + box["h"] for x, y in pts):
                out.append((box["text"], e["id"]))
    return out


def test_layouts_and_wide_screen(demo_run):
    page, trace = demo_run
    for w, h in ((1440, 900), (1920, 1080)):
        page.set_viewport_size({"width": w, "height": h})
        page.wait_for_timeout(500)
        for layout in ("Timeline", "Clusters", "Focus"):
            page.get_by_text(layout, exact=True).first.click()
            frame = graph_frame(page)
            frame.wait_for_function(f"l => {GRAPH}.key.includes('|' + l + '|') && {GRAPH}.ready", arg=layout.lower(),
                                    timeout=30_000)
            to_top(page)
            page.mouse.move(2, 2)
            height = frame.evaluate(f"() => {GRAPH}.canvas.getBoundingClientRect().height")
            assert height >= 0.65 * h
            if layout == "Clusters":
                captions = frame.evaluate(f"() => {GRAPH}.labels.filter(b => b.caption).length")
                assert captions >= 2
            if layout == "Focus":
                nodes = frame.evaluate(f"() => {GRAPH}.nodes.getIds()")
                top = trace.results[0]
                assert top.paper_id in nodes and (top.seed is None or top.seed in nodes)
                assert labels_crossed_by_edges(frame) == []
            page.screenshot(path=str(SHOTS / f"graph_{w}x{h}_{layout.lower()}.png"))
    page.set_viewport_size({"width": 1440, "height": 900})
    page.get_by_text("Timeline", exact=True).first.click()


def test_double_click_focuses_on_that_paper(demo_run):
    """Double-clicking a paper of the default (timeline) view switches to the focus view of that paper:
    the layout control says Focus, the focus picker names it, and the graph is its focus view."""
    page, trace = demo_run
    page.set_viewport_size({"width": 1440, "height": 900})
    page.get_by_text("Timeline", exact=True).first.click()
    frame = graph_frame(page)
    frame.wait_for_function(f"() => {GRAPH}.key.includes('|timeline|') && {GRAPH}.ready", timeout=30_000)
    to_top(page)
    origin = iframe_origin(page)
    # not the paper the focus picker already holds (the top result): the switch must come from the double click
    aim = next(t for t in targets(frame, GRAPH, 0, 10, SEED + 2)
               if t.id != trace.results[0].paper_id and t.nearest == [("node", t.id)])
    cx, cy = frame.evaluate(f"() => {{ const r = {GRAPH}.canvas.getBoundingClientRect(); return [r.left, r.top]; }}")
    page.mouse.dblclick(origin[0] + cx + aim.x, origin[1] + cy + aim.y)
    frame = graph_frame(page)  # the rerun may replace the component's frame: look it up again
    frame.wait_for_function(f"id => {GRAPH}.key.includes('|focus|') && {GRAPH}.key.endsWith('|' + id) && {GRAPH}.ready",
                            arg=aim.id, timeout=30_000)
    nodes = set(frame.evaluate(f"() => {GRAPH}.nodes.getIds().map(String)"))
    from crase_core.views.graph_views import focus_view, node_labels

    assert nodes == set(focus_view(trace, aim.id).nodes)
    picker = page.locator("[data-testid='stSelectbox']", has_text="Focus on").first
    shown = picker.evaluate("el => el.innerText + ' ' + [...el.querySelectorAll('input')].map(i => i.value).join(' ')"
                            " + ' ' + [...el.querySelectorAll('[title]')].map(t => t.title).join(' ')")
    assert node_labels(trace, [n.paper.id for n in trace.nodes])[aim.id] in shown, shown
    page.screenshot(path=str(SHOTS / "graph_1440x900_focus_by_double_click.png"))
