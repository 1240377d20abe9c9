"""End to end in a real browser: the Streamlit app on 127.0.0.1, driven by Playwright + Debian's chromium.

Starts ``streamlit run app.py`` on a free port over the hostile fixture corpus
(titles with ``<script>``), types a query, waits for the ranked list, opens the
evidence graph, clicks an edge *on the vis-network canvas inside the component
iframe*, and checks that the inspector shows that edge's matrix and decision
(compared with the trace the app saved). Screenshots go to
``$CRASE_SCREENSHOT_DIR`` or ``artifacts/screenshots`` (printed).

Skips when chromium or Playwright is missing, unless ``CRASE_REQUIRE_BROWSER=1``
(CI), where that is a failure.
"""

from __future__ import annotations

import time

import pytest
from e2e_support import ROOT, SHOTS, heat_map, shown_cell, skip_without_browser, streamlit_app

skip_without_browser()

from playwright.sync_api import Frame, Page, expect  # noqa: E402

CORPUS = ROOT / "tests" / "fixtures" / "hostile_corpus"
QUERY = "holographic entanglement entropy of BTZ black holes"
HOSTILE_TITLE = "<script>alert('xss')</script> Holographic entanglement entropy of BTZ black holes"


@pytest.fixture(scope="module")
def app_server(tmp_path_factory):
    with streamlit_app(tmp_path_factory.mktemp("e2e"), corpus=CORPUS) as served:
        yield served


@pytest.fixture(scope="module")
def page(app_server, chromium):
    pg = chromium.new_page(viewport={"width": 1500, "height": 1100})
    pg.dialogs = []  # type: ignore[attr-defined]
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))  # type: ignore[attr-defined]
    yield pg
    pg.close()


def _graph_frame(page: Page) -> Frame:
    iframe = page.locator("iframe[title*='crase_graph']").first
    iframe.wait_for(state="visible", timeout=30_000)
    iframe.scroll_into_view_if_needed()
    frame = iframe.element_handle().content_frame()
    assert frame is not None
    frame.wait_for_function("() => window.craseGraph && window.craseGraph.ready === true", timeout=30_000)
    return frame


FIND_EDGE_JS = """
() => {
  const g = window.craseGraph, geo = g.geometry(), box = g.canvas.getBoundingClientRect();
  const at = Object.fromEntries(geo.nodes.map(n => [n.id, n]));
  for (const e of geo.edges) {
    if (!e.kept) continue;
    const a = at[e.from], b = at[e.to], dx = b.x - a.x, dy = b.y - a.y;
    const c = {x: (a.x + b.x) / 2 + e.bend * dy, y: (a.y + b.y) / 2 - e.bend * dx};  // the drawn curve's control point
    for (const t of [0.5, 0.42, 0.58, 0.35, 0.65]) {
      const d = {x: (1 - t) ** 2 * a.x + 2 * (1 - t) * t * c.x + t * t * b.x, y: (1 - t) ** 2 * a.y + 2 * (1 - t) * t * c.y + t * t * b.y};
      if (d.x < 5 || d.y < 5 || d.x > box.width - 5 || d.y > box.height - 5) continue;
      const hit = g.hitTest(d);
      if (hit && hit.kind === 'edge' && hit.id === e.id) {
        return {id: e.id, from: String(e.from), to: String(e.to), x: box.left + d.x, y: box.top + d.y};
      }
    }
  }
  return null;
}
"""


def test_search_graph_click_inspector_and_escaping(page: Page, app_server):
    url, runs_dir = app_server
    page.goto(url)
    box = page.get_by_label("Your literature-search question")
    box.wait_for(timeout=30_000)
    box.fill(QUERY)
    page.get_by_role("button", name="Search").first.click()
    deadline = time.time() + 90
    while time.time() < deadline and not [p for p in runs_dir.glob("*.json") if not p.name.endswith(".meta.json")]:
        time.sleep(0.3)
    page.get_by_text(HOSTILE_TITLE, exact=False).first.wait_for(timeout=30_000)
    page.mouse.move(5, 5)
    page.screenshot(path=str(SHOTS / "01_search_results.png"), full_page=True)

    # the hostile title renders as text, and no script ran
    assert page.get_by_text(HOSTILE_TITLE, exact=False).count() >= 1
    assert page.dialogs == []  # type: ignore[attr-defined]
    injected = page.evaluate("() => [...document.querySelectorAll('script')].filter(s => s.textContent.includes('xss')).length")
    assert injected == 0

    # the app saved the run: the trace is the ground truth for the inspector
    from crase_core import trace as trace_io

    saved = [p for p in runs_dir.glob("*.json") if not p.name.endswith(".meta.json")]
    assert len(saved) == 1
    trace = trace_io.load(saved[0])

    page.get_by_role("link", name="Evidence graph").click()
    frame = _graph_frame(page)
    assert frame.evaluate("() => [...document.querySelectorAll('script')].filter(s => s.textContent.includes('xss')).length") == 0
    target = frame.evaluate(FIND_EDGE_JS)
    assert target is not None, "no clickable kept edge in the graph"
    iframe_box = page.locator("iframe[title*='crase_graph']").first.bounding_box()
    page.screenshot(path=str(SHOTS / "02_graph_before_click.png"), full_page=False)
    page.mouse.click(iframe_box["x"] + target["x"], iframe_box["y"] + target["y"])

    edge = trace.edge(target["from"], target["to"])
    page.get_by_text("Word-overlap support", exact=False).first.wait_for(timeout=30_000)  # the offline scorer
    header = page.locator("h5", has_text="Edge")
    assert target["from"] in header.inner_text() and target["to"] in header.inner_text()
    decision = f"Decision — {edge.decision}"
    assert page.get_by_text(decision, exact=False).count() == 1, decision
    chart = page.locator("[data-testid='stVegaLiteChart']").first  # the heat map
    chart.wait_for(timeout=30_000)
    page.wait_for_timeout(1_000)  # drawn after the page settles
    cells = [[x for x, _ in r] for r in heat_map(chart)["grid"]]
    page.get_by_text("Matrix values").click()
    table = " ".join(page.locator("[data-testid='stExpander']", has_text="Matrix values").inner_text().split())
    # the table and the heat map show each value alike (cut to 2 decimals: a cell below θ never reads as θ)
    assert cells == [[shown_cell(x) for x in row] for row in edge.matrix], cells
    for i, row in enumerate(edge.matrix):
        mark = "✓" if edge.supported[i] else "✗"
        assert f"{mark} " + " ".join(shown_cell(x) for x in row) in table, (row, table)
    page.wait_for_timeout(500)
    page.screenshot(path=str(SHOTS / "03_edge_inspector.png"), full_page=True)

    # clicking a paper selects it in the node inspector
    node_point = frame.evaluate(
        "() => { const n = window.craseGraph.network, p = n.getPositions(['h001'])['h001'];"
        " const d = n.canvasToDOM(p); const b = document.getElementById('graph').getBoundingClientRect();"
        " return {x: b.left + d.x, y: b.top + d.y}; }"
    )
    iframe = page.locator("iframe[title*='crase_graph']").first
    iframe.scroll_into_view_if_needed()
    iframe_box = iframe.bounding_box()  # the page re-laid out after the first click
    page.mouse.click(iframe_box["x"] + node_point["x"], iframe_box["y"] + node_point["y"])
    page.wait_for_function("t => [...document.querySelectorAll('h5')].some(h => h.innerText.startsWith(t))",
                           arg=HOSTILE_TITLE, timeout=30_000)
    page.get_by_text("Seed fate:").wait_for(timeout=30_000)
    assert page.dialogs == []  # type: ignore[attr-defined]
    # the tooltip shows the hostile title as text (no element built from it), and goes with the mouse
    page.mouse.move(iframe_box["x"] + node_point["x"], iframe_box["y"] + node_point["y"] + 1)
    frame.wait_for_function("() => document.getElementById('tip').style.display === 'block'", timeout=5_000)
    tip = frame.evaluate("() => ({text: document.getElementById('tip').textContent,"
                         " children: document.getElementById('tip').children.length})")
    assert tip["text"].startswith(HOSTILE_TITLE) and tip["children"] == 0
    page.mouse.move(iframe_box["x"] + 3, iframe_box["y"] - 30)
    frame.wait_for_function("() => document.getElementById('tip').style.display === 'none'", timeout=5_000)
    # no link to javascript: anywhere (the h004 title carries a markdown javascript: link); TeX is typeset
    assert page.evaluate("() => document.querySelectorAll('a[href^=\"javascript\"]').length") == 0
    assert frame.evaluate("() => document.querySelectorAll('a[href^=\"javascript\"]').length") == 0
    page.screenshot(path=str(SHOTS / "04_node_inspector.png"), full_page=True)


# the sidebar's page names, without the icons' ligature text
NAV_NAMES_JS = """() => [...document.querySelectorAll("[data-testid='stSidebarNav'] a")].map(a => {
  const c = a.cloneNode(true);
  c.querySelectorAll("[data-testid='stIconMaterial']").forEach(i => i.remove());
  return c.textContent.replace(/\\s+/g, ' ').trim();
})"""
PAGE_TITLES = ["Search", "Evidence graph", "Seeds", "Ranking", "Audit", "Runs", "Benchmark"]


def test_sidebar_lists_only_the_real_pages(app_server, chromium):
    """Opened by URL (a page other than Search), the sidebar names the pages and no helper module."""
    url, _ = app_server
    pg = chromium.new_page(viewport={"width": 1440, "height": 900})
    try:
        seen: list[list[str]] = []
        pg.goto(url + "/Evidence_graph")
        pg.locator("[data-testid='stSidebarNav'] a").first.wait_for(timeout=30_000)
        for _ in range(6):  # while the page settles too: no helper ever shows up
            seen.append(pg.evaluate(NAV_NAMES_JS))
            pg.wait_for_timeout(250)
        pg.get_by_text("No run is open yet", exact=False).first.wait_for(timeout=30_000)
        seen.append(pg.evaluate(NAV_NAMES_JS))
        for names in seen:
            assert names == PAGE_TITLES, names
        pg.screenshot(path=str(SHOTS / "05_page_by_url_sidebar.png"))
    finally:
        pg.close()


def test_library_papers_marked_on_graph_and_in_inspector(app_server, chromium):
    """A paper given as the user's own is marked in the results, on its graph node (green border, legend row,
    tooltip line) and in the node inspector; other papers are not."""
    url, runs_dir = app_server
    pg = chromium.new_page(viewport={"width": 1440, "height": 900})
    try:
        pg.goto(url)
        pg.get_by_label("Your literature-search question").fill(QUERY)
        pg.get_by_text("Start from what you know", exact=False).first.click(timeout=30_000)
        pg.get_by_label("arXiv ids or DOIs").fill("h003")
        pg.get_by_label("arXiv ids or DOIs").press("Tab")  # commits the text (and the query's, before it)
        pg.get_by_text("1 paper read", exact=False).first.wait_for(timeout=30_000)
        pg.get_by_role("button", name="Search").first.click()
        try:
            pg.get_by_text("already in your library", exact=False).first.wait_for(timeout=90_000)
        finally:
            pg.screenshot(path=str(SHOTS / "06_search_results_library.png"), full_page=True)
        from crase_core import trace as trace_io

        traces = [trace_io.load(p) for p in runs_dir.glob("*.json") if not p.name.endswith(".meta.json")]
        trace = next(t for t in traces if t.library is not None)
        assert {n.paper.id for n in trace.nodes if n.in_library} == {"h003"}
        pg.get_by_role("link", name="Evidence graph").click()
        frame = _graph_frame(pg)
        nodes = frame.evaluate("() => window.craseGraph.nodes.get().map(n => ({id: String(n.id), mine: n.mine,"
                               " border: n.color && n.color.border, bw: n.borderWidth || 1}))")
        assert "h003" in {n["id"] for n in nodes}
        for n in nodes:
            if n["id"] == "h003":
                assert n["mine"] is True and n["border"] == "#1e7b34" and n["bw"] >= 3, n
            else:
                assert not n["mine"] and n["bw"] == 1, n
        assert "already in your library" in frame.locator("#legend").inner_text()
        point = frame.evaluate(
            "() => { const n = window.craseGraph.network, p = n.getPositions(['h003'])['h003'];"
            " const d = n.canvasToDOM(p); const b = document.getElementById('graph').getBoundingClientRect();"
            " return {x: b.left + d.x, y: b.top + d.y}; }")
        iframe = pg.locator("iframe[title*='crase_graph']").first
        iframe.evaluate("el => el.scrollIntoView({block: 'start'})")
        box = iframe.bounding_box()
        pg.mouse.move(box["x"] + point["x"], box["y"] + point["y"])
        frame.wait_for_function("() => window.craseGraph.hovered && window.craseGraph.hovered.id === 'h003'",
                                timeout=5_000)
        assert "already in your library" in frame.locator("#tip").inner_text()
        pg.screenshot(path=str(SHOTS / "06_graph_library_marker.png"))
        pg.mouse.click(box["x"] + point["x"], box["y"] + point["y"])
        title = trace.node("h003").paper.title
        pg.get_by_text("Seed fate:").wait_for(timeout=30_000)
        pg.wait_for_function("t => [...document.querySelectorAll('h5')].some(h => h.innerText.startsWith(t.slice(0, 20)))",
                             arg=title, timeout=30_000)
        badge = pg.locator("[data-testid='stMarkdownContainer']", has_text="already in your library")
        badge.first.wait_for(timeout=10_000)
        assert badge.count() == 1
        # another paper's inspector has no mark
        iframe.evaluate("el => el.scrollIntoView({block: 'start'})")
        point = frame.evaluate(
            "() => { const n = window.craseGraph.network, b = document.getElementById('graph').getBoundingClientRect();"
            " for (const id of window.craseGraph.nodes.getIds()) { if (['h003', 'h004'].includes(String(id))) continue;"
            "   const d = n.canvasToDOM(n.getPositions([id])[id]);"
            "   if (n.getNodeAt(d) === id) return {id: String(id), x: b.left + d.x, y: b.top + d.y}; }"
            " return null; }")
        assert point is not None
        other = point["id"]
        box = iframe.bounding_box()
        pg.mouse.click(box["x"] + point["x"], box["y"] + point["y"])
        pg.wait_for_function("t => [...document.querySelectorAll('h5')].some(h => h.innerText.startsWith(t.slice(0, 20)))",
                             arg=trace.node(other).paper.title, timeout=30_000)
        pg.get_by_text("Seed fate:").or_(pg.get_by_text("Why it is here:")).first.wait_for(timeout=30_000)
        try:  # the rerun may still hold the previous paper's elements for a moment
            expect(pg.locator("[data-testid='stMarkdownContainer']", has_text="already in your library")).to_have_count(
                0, timeout=15_000)
        finally:
            pg.screenshot(path=str(SHOTS / "07_node_inspector_not_in_library.png"), full_page=True)
    finally:
        pg.close()
