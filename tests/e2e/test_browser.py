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
from e2e_support import ROOT, SHOTS, skip_without_browser, streamlit_app

skip_without_browser()

from playwright.sync_api import Frame, Page  # noqa: E402

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
  const g = window.craseGraph, net = g.network, pos = net.getPositions();
  const box = document.getElementById('graph').getBoundingClientRect();
  for (const id of g.edges.getIds()) {
    const e = g.edges.get(id);
    if (!e.kept) continue;
    const a = pos[e.from], b = pos[e.to];
    for (const t of [0.5, 0.42, 0.58, 0.35, 0.65]) {
      const d = net.canvasToDOM({x: a.x + (b.x - a.x) * t, y: a.y + (b.y - a.y) * t});
      if (d.x < 5 || d.y < 5 || d.x > box.width - 5 || d.y > box.height - 5) continue;
      if (net.getNodeAt(d) === undefined && net.getEdgeAt(d) === id) {
        return {id: id, from: String(e.from), to: String(e.to), x: box.left + d.x, y: box.top + d.y};
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
    page.get_by_text("Entailment matrix").wait_for(timeout=30_000)
    header = page.locator("h5", has_text="Edge")
    assert target["from"] in header.inner_text() and target["to"] in header.inner_text()
    decision = f"Decision — {edge.decision}"
    assert page.get_by_text(decision, exact=False).count() == 1, decision
    page.locator("[data-testid='stVegaLiteChart']").first.wait_for(timeout=30_000)  # the heat map
    page.get_by_text("Matrix values").click()
    table = " ".join(page.locator("[data-testid='stExpander']", has_text="Matrix values").inner_text().split())
    for i, row in enumerate(edge.matrix):
        mark = "✓" if edge.supported[i] else "✗"
        assert f"{mark} " + " ".join(f"{x:.2f}" for x in row) in table, (row, table)
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
