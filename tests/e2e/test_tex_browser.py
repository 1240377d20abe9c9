"""No raw TeX where a reader looks: the app's result cards and inspectors, and the HTML export, in Chromium.

"Raw TeX" is :func:`crase_core.views.tex.raw_tex`: a backslash command or escape, a ``$…$`` span, a ``^{`` / ``_{``
script group or a ``{\\`` font group left in the text a reader sees (``innerText``). The runs are the demo
queries over the embedded hep-th corpus, whose titles, authors and abstracts carry TeX (``AdS_3``,
``Ba\\~nados``, ``${\\cal N}=4$``…).
"""

from __future__ import annotations

import html
import json
import re
import time

import pytest
from e2e_support import ROOT, SHOTS, skip_without_browser, streamlit_app

skip_without_browser()

from playwright.sync_api import Page  # noqa: E402

from crase_core.views import tex  # noqa: E402

DEMOS = json.loads((ROOT / "assets" / "ui" / "demo_queries.json").read_text(encoding="utf-8"))
TEXY = ("\\", "$", "_", "^", "{")


def _has_tex(paper) -> bool:
    return any(c in f"{paper.title} {' '.join(paper.authors)} {paper.abstract}" for c in TEXY)


@pytest.fixture(scope="module")
def app_server(tmp_path_factory):
    with streamlit_app(tmp_path_factory.mktemp("tex")) as served:  # the embedded hep-th corpus
        yield served


@pytest.fixture(scope="module")
def page(app_server, chromium):
    pg = chromium.new_page(viewport={"width": 1440, "height": 900})
    yield pg
    pg.close()


def _main_text(page: Page) -> str:
    return page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').innerText")


def _saved_trace(runs_dir, deadline_s: float = 120):
    from crase_core import trace as trace_io

    deadline = time.time() + deadline_s
    while time.time() < deadline:
        saved = [p for p in runs_dir.glob("*.json") if not p.name.endswith(".meta.json")]
        if saved:
            return trace_io.load(max(saved, key=lambda p: p.stat().st_mtime))
        time.sleep(0.3)
    raise AssertionError("the app saved no run")


def test_cards_and_inspectors_show_no_raw_tex(page: Page, app_server):
    url, runs_dir = app_server
    page.goto(url)
    page.get_by_label("Your literature-search question").wait_for(timeout=60_000)
    page.get_by_role("button", name=DEMOS[0]["label"]).click()
    page.get_by_text("Why it is here:").first.wait_for(timeout=120_000)
    trace = _saved_trace(runs_dir)
    papers = {n.paper.id: n.paper for n in trace.nodes}
    shown = [r.paper_id for r in trace.results[:20]]
    assert sum(_has_tex(papers[p]) for p in shown) >= 3  # the cards do carry TeX to render
    page.wait_for_timeout(1000)
    text = _main_text(page)
    assert tex.raw_tex(text) == [], "result cards"
    flat = " ".join(text.split())
    for p in shown[:20]:  # what the cards say, as the renderer draws it (AdS<sub>3</sub> reads "AdS3")
        assert " ".join(html.unescape(re.sub(r"<[^>]+>", "", tex.to_html(papers[p].title))).split()) in flat
    # the abstracts (popovers) of the first cards with TeX in them
    for pid in [p for p in shown if _has_tex(papers[p])][:3]:
        card = page.locator(f"[class*='st-key-card_{pid}']")
        card.get_by_role("button", name="Abstract").click()
        popover = page.locator("[data-testid='stPopoverBody']").last
        popover.wait_for(timeout=10_000)
        assert tex.raw_tex(popover.inner_text()) == [], pid
        page.keyboard.press("Escape")
        page.wait_for_timeout(300)
    # the node inspector of a result with TeX, then the edge inspector of its first edge
    pid = next(p for p in shown if _has_tex(papers[p]))
    page.locator(f"[class*='st-key-card_{pid}']").get_by_role("button", name="Inspect").click()
    page.get_by_text("Seed fate:").or_(page.get_by_text("Why it is here:")).first.wait_for(timeout=60_000)
    page.locator("[data-testid='stExpander']", has_text="Abstract").last.click()
    page.wait_for_timeout(800)
    page.screenshot(path=str(SHOTS / "tex_node_inspector.png"), full_page=False)
    assert tex.raw_tex(_main_text(page)) == [], "node inspector"
    table = page.locator(f"[class*='st-key-node_edges_{pid}']")
    table.scroll_into_view_if_needed()
    box = table.bounding_box()
    page.mouse.click(box["x"] + 18, box["y"] + 35 + 17)  # the first row's selection box
    page.get_by_text("M[i][j] =").first.wait_for(timeout=60_000)  # the matrix caption (either scorer)
    page.wait_for_timeout(800)
    page.screenshot(path=str(SHOTS / "tex_edge_inspector.png"), full_page=False)
    assert tex.raw_tex(_main_text(page)) == [], "edge inspector"


def test_exported_runs_show_no_raw_tex(hepth_engine, chromium, tmp_path):
    from crase_core.pipeline import run_query
    from crase_core.views.html_export import to_html

    pg = chromium.new_page(viewport={"width": 1440, "height": 900})
    checked = 0
    for d in DEMOS:
        trace = run_query(d["query"], hepth_engine)
        path = tmp_path / f"run-{checked}.html"
        path.write_text(to_html(trace), encoding="utf-8")
        pg.goto(path.as_uri())
        pg.wait_for_function("() => window.craseExport && window.craseExport.ready === true", timeout=60_000)
        texts = [pg.evaluate("() => document.body.innerText")]
        # every line of every tooltip and every label of the graph's views (the graph script draws them with
        # textContent / fillText), the focus menu, and every panel a reader opens: the first 12 papers of the
        # list, the first 12 edges
        texts += pg.evaluate("() => window.craseExport.data.lines")
        texts += pg.evaluate("() => Object.values(window.craseExport.data.styles.nodes).map(s => s.label)")
        texts += pg.evaluate("() => Array.from(document.querySelectorAll('#focus option')).map(o => o.textContent)")
        items = pg.locator("ol#results li")
        for i in range(min(12, items.count())):
            items.nth(i).click()
            texts.append(pg.locator("#panel").inner_text())
        for eid in pg.evaluate("() => window.craseExport.data.edges.slice(0, 12).map(e => e.id)"):
            pg.evaluate("id => window.craseExport.inspect('edge', id)", eid)
            assert pg.locator("#panel").get_attribute("data-edge") == eid
            texts.append(pg.locator("#panel").inner_text())
        raw = [r for t in texts for r in tex.raw_tex(t)]
        assert raw == [], (d["label"], raw[:10])
        assert sum(_has_tex(n.paper) for n in trace.nodes) >= 3  # the run does carry TeX to render
        checked += 1
    pg.screenshot(path=str(SHOTS / "tex_export_panel.png"), full_page=False)
    pg.close()
    assert checked == len(DEMOS)
