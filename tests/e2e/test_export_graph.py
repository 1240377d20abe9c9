"""The HTML export's evidence graph in a real browser (from disk, network off), on the first demo query.

The export draws the app's views from the same view model with the same script: 20 random kept-edge
midpoints and 20 random papers of its default view (seeded) — the highlighted item is the one nearest the
pointer, its tooltip shows, and a click there opens exactly it in the export's inspector; every view
(timeline, clusters, focus, the wider selection, pruned edges shown) draws, labelled; screenshots at
1440×900 and 1920×1080 go to ``artifacts/screenshots`` (or ``$CRASE_SCREENSHOT_DIR``).
"""

from __future__ import annotations

import json

import pytest
from e2e_support import ROOT, SHOTS, skip_without_browser

skip_without_browser()

from pointing import point_and_click, targets  # noqa: E402

from crase_core.views.graph_views import run_view  # noqa: E402
from crase_core.views.html_export import to_html  # noqa: E402

DEMO = json.loads((ROOT / "assets" / "ui" / "demo_queries.json").read_text(encoding="utf-8"))[0]
GRAPH = "window.craseExport.graph"
SEED = 26
PAGE_ERRORS: list[str] = []  # the exported page's script errors (checked again when the page closes)


@pytest.fixture(scope="module")
def exported(tmp_path_factory, chromium, hepth_engine):
    """(page, trace) — the demo run exported and opened from disk in a context with the network off."""
    from crase_core.pipeline import run_query

    trace = run_query(DEMO["query"], hepth_engine)
    path = tmp_path_factory.mktemp("export") / "run.html"
    path.write_text(to_html(trace), encoding="utf-8")
    context = chromium.new_context(viewport={"width": 1440, "height": 900}, offline=True)
    requests: list[str] = []
    context.route("**/*", lambda r: (requests.append(r.request.url),
                                     r.continue_() if r.request.url.startswith("file:") else r.abort()))
    page = context.new_page()
    errors = PAGE_ERRORS
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function("() => window.craseExport && window.craseExport.ready", timeout=60_000)
    yield page, trace
    assert errors == [] and [u for u in requests if not u.startswith("file:")] == []
    context.close()


def show(page, layout: str, papers: str = "top", pruned: bool = False) -> None:
    page.locator(f"[data-view='{layout}']").click()
    if layout != "focus":
        page.select_option("#papers", papers)
    if page.locator("#showPruned").is_checked() != pruned:
        page.locator("#showPruned").click()
    key = f"{layout}|" + ("" if layout == "focus" else papers)
    page.wait_for_function("k => window.craseExport.graph.key.startsWith(k) && window.craseExport.graph.ready",
                           arg=key, timeout=30_000)
    page.mouse.move(2, 2)


def test_the_default_view_is_the_apps(exported):
    """Timeline of the top 20 and their trails: the same papers at the same places as the app's view model."""
    page, trace = exported
    show(page, "timeline")
    want = run_view(trace, "timeline")
    got = page.evaluate(f"() => {GRAPH}.geometry()")
    assert sorted(n["id"] for n in got["nodes"]) == sorted(n["id"] for n in want.nodes)
    at = {n["id"]: (n["x"], n["y"]) for n in want.nodes}
    assert all((n["cx"], n["cy"]) == pytest.approx(at[n["id"]], abs=0.05) for n in got["nodes"])
    assert {e["id"]: e["bend"] for e in got["edges"]} == {e["id"]: e["bend"] for e in want.edges}
    drawn = [b for b in page.evaluate(f"() => {GRAPH}.labels") if not b["caption"]]
    assert len(drawn) >= 15
    hidden, note = want.as_dict()["hidden"], page.locator("#viewNote").inner_text()
    assert f"{len(want.nodes)} papers · {len(want.edges)} edges" in note
    assert (f"{hidden} pruned edge{'' if hidden == 1 else 's'} hidden" in note) if hidden else "hidden" not in note


def test_hover_and_click_name_the_same_item_at_random_edges_and_papers(exported):
    page, trace = exported
    show(page, "timeline")

    def opened(click: dict) -> None:
        attr = "data-edge" if click["kind"] == "edge" else "data-node"
        assert page.locator("#panel").get_attribute(attr) == click["id"]
        if click["kind"] == "edge":
            edge = trace.edge(click["citing"], click["cited"])
            assert page.locator("#decision").inner_text().endswith(edge.decision)

    done = [point_and_click(page, page, GRAPH, (0.0, 0.0), t, opened) for t in targets(page, GRAPH, 20, 20, SEED)]
    assert len(done) == 40
    edge_self = sum((r["click"]["kind"], r["click"]["id"]) == ("edge", r["target"].id) for r in done[:20])
    assert edge_self >= 17
    page.screenshot(path=str(SHOTS / "export_1440x900_edge_selected.png"))


def test_every_view_draws_at_both_sizes(exported):
    page, trace = exported
    for w, h in ((1440, 900), (1920, 1080)):
        page.set_viewport_size({"width": w, "height": h})
        for layout, papers, pruned in (("timeline", "top", False), ("clusters", "top", False), ("focus", "top", False),
                                       ("timeline", "wide", False), ("clusters", "top", True)):
            show(page, layout, papers, pruned)
            n = page.evaluate(f"() => {GRAPH}.nodes.getIds().length")
            labels = page.evaluate(f"() => {GRAPH}.labels")
            assert n > 0 and len([b for b in labels if not b["caption"]]) >= min(10, n)
            if layout == "clusters":
                assert len([b for b in labels if b["caption"]]) >= 2
            if layout == "focus":
                assert any(b.get("heading") for b in labels)
            name = f"export_{w}x{h}_{layout}" + ("_wide" if papers == "wide" else "") + ("_pruned" if pruned else "")
            page.screenshot(path=str(SHOTS / f"{name}.png"))
    page.set_viewport_size({"width": 1440, "height": 900})


def test_a_selection_the_next_view_does_not_draw_is_no_error(exported):
    """The inspector's paper or edge stays selected when the view changes (the panel still shows it); a view
    that does not draw it draws all the same, with no label for it and no script error (the selected paper
    was labelled before: drawLabels read the label of a paper the view does not have, and the view never
    became ready)."""
    page, _ = exported
    views = page.evaluate("() => window.craseExport.data.views")
    focus = page.evaluate("() => window.craseExport.state.focus")
    in_focus = {n[0] for n in views[f"focus|{focus}"]["nodes"]}
    wide_edges = [e[0] for e in views["timeline|wide"]["edges"]]
    pid = next(n[0] for n in views["timeline|wide"]["nodes"] if n[0] not in in_focus)
    eid = next(e for e in wide_edges if not set(e.split("->")) <= in_focus)
    for kind, item in (("node", pid), ("edge", eid)):
        show(page, "timeline", "wide")
        page.evaluate("([k, i]) => window.craseExport.inspect(k, i)", [kind, item])
        assert page.evaluate(f"() => {GRAPH}.selected") == {"kind": kind, "id": item}
        show(page, "focus")  # waits for the view to be drawn and ready
        assert page.evaluate(f"() => {GRAPH}.selected") == {"kind": kind, "id": item}
        labelled = {b["id"] for b in page.evaluate(f"() => {GRAPH}.labels")}
        assert pid not in labelled and len(labelled) >= 2
        assert PAGE_ERRORS == []


def test_the_inspectors_matrix_tells_one_story(exported):
    """An edge's inspector in the export: ✓ marks the rows with a cell ≥ the edge's θ, Δ is their share, the
    outlined cells are exactly those ≥ θ, and a value is cut (not rounded) so that no cell below θ reads as θ
    (a word-overlap share of 0.0496 read "0.05" beside θ_lexical 0.05, unoutlined)."""
    page, trace = exported
    shown = set(page.evaluate("() => window.craseExport.data.edges.map(e => e.id)"))
    edge = next(e for e in trace.edges if f"{e.citing}->{e.cited}" in shown and any(e.supported)
                and not all(e.supported) and any(x < e.theta <= round(x, 2) for row in e.matrix for x in row))
    page.evaluate("id => window.craseExport.inspect('edge', id)", f"{edge.citing}->{edge.cited}")
    rows = page.evaluate("""() => [...document.querySelectorAll('#matrix tr')].slice(1).map(tr => ({
        mark: tr.querySelector('th').textContent.trim()[0],
        cells: [...tr.querySelectorAll('td')].map(td => [td.textContent, td.className === 'hit'])}))""")
    assert [r["mark"] for r in rows] == ["✓" if s else "✗" for s in edge.supported]
    assert edge.delta == sum(edge.supported) / len(edge.supported)
    for r, row in zip(rows, edge.matrix, strict=True):
        assert [hit for _, hit in r["cells"]] == [x >= edge.theta for x in row]
        assert all((float(text) >= edge.theta) == hit for text, hit in r["cells"])
