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

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "hostile_corpus"
CHROMIUM = os.environ.get("CRASE_CHROMIUM", "/usr/bin/chromium")
REQUIRE = os.environ.get("CRASE_REQUIRE_BROWSER") == "1"
QUERY = "holographic entanglement entropy of BTZ black holes"
HOSTILE_TITLE = "<script>alert('xss')</script> Holographic entanglement entropy of BTZ black holes"


def _missing() -> str | None:
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        return f"chromium not found at {CHROMIUM} (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright)"
    return None


_why = _missing()
if _why:
    if REQUIRE:
        pytest.fail(f"browser test required (CRASE_REQUIRE_BROWSER=1) but {_why}", pytrace=False)
    pytest.skip(_why, allow_module_level=True)

from playwright.sync_api import Frame, Page, sync_playwright  # noqa: E402

SHOTS = Path(os.environ.get("CRASE_SCREENSHOT_DIR", ROOT / "artifacts" / "screenshots"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app_server(tmp_path_factory):
    port = _free_port()
    tmp = tmp_path_factory.mktemp("e2e")
    env = dict(os.environ, CRASE_CORPUS=str(CORPUS), CRASE_CACHE_DIR=str(tmp / "cache"),
               CRASE_RUNS_DIR=str(tmp / "runs"), PYTHONUNBUFFERED="1")
    log = open(tmp / "streamlit.log", "w")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.address", "127.0.0.1",
         "--server.port", str(port), "--server.headless", "true", "--server.fileWatcherType", "none",
         "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    break
        except OSError:
            time.sleep(0.3)
        if proc.poll() is not None:
            break
    else:
        proc.kill()
        pytest.fail("streamlit did not start: " + (tmp / "streamlit.log").read_text()[-2000:])
    if proc.poll() is not None:
        pytest.fail("streamlit exited: " + (tmp / "streamlit.log").read_text()[-2000:])
    yield url, tmp / "runs"
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="module")
def page(app_server):
    SHOTS.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {SHOTS}")
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"],
        )
        pg = browser.new_page(viewport={"width": 1500, "height": 1100})
        pg.dialogs = []  # type: ignore[attr-defined]
        pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))  # type: ignore[attr-defined]
        yield pg
        browser.close()


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
    page.get_by_text("Why it is here").first.wait_for(timeout=90_000)
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
    page.screenshot(path=str(SHOTS / "04_node_inspector.png"), full_page=True)
