"""`crase export --format html`: one self-contained file; everything from the trace escaped; in headless
Chromium from disk with the network off, clicking an edge shows that edge's matrix, claims and decision."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import pytest

from crase_core import trace as trace_io
from crase_core.cli.main import main
from crase_core.resources import graph_component_dir
from crase_core.views.html_export import export_data, script_json, to_html

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "fixtures" / "hostile_corpus"
QUERY = "holographic entanglement entropy of BTZ black holes"
HOSTILE_TITLE = "<script>alert('xss')</script> Holographic entanglement entropy of BTZ black holes"
CHROMIUM = os.environ.get("CRASE_CHROMIUM", "/usr/bin/chromium")
REQUIRE_BROWSER = os.environ.get("CRASE_REQUIRE_BROWSER") == "1"


@pytest.fixture(scope="module")
def hostile_trace():
    from crase_core.backends import offline_backend
    from crase_core.pipeline import Engine, run_query
    from crase_core.sources.local import LocalSource
    from crase_core.store.termstats import TermStats

    source = LocalSource.open(HOSTILE)
    engine = Engine(source, offline_backend(TermStats.from_index(source.text_index)))
    return run_query(QUERY, engine)


def test_script_json_cannot_close_the_script_element():
    text = script_json({"t": "</script><script>alert(1)</script> & \u2028 <!--"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"t": "</script><script>alert(1)</script> & \u2028 <!--"}


@pytest.mark.parametrize("value", [{"t": "NaN and Infinity in a title", "x": [0.00001, 1e20, -0.0]},
                                   {"t": "lone \ud800 surrogate"}, {"t": "ä ∂ \u2029"}, {3: [1, 2]}])
def test_script_json_reads_back_as_json_writes_it(value):
    """Whichever serializer writes it, the page reads the same data back."""
    text = script_json(value)
    assert json.loads(text) == json.loads(json.dumps(value))
    assert "<" not in text and "\u2029" not in text


@pytest.mark.parametrize("number", [float("nan"), float("inf")])
def test_script_json_refuses_a_number_that_is_not_finite(number):
    with pytest.raises(ValueError):
        script_json({"x": [1.0, number]})


def test_html_is_self_contained_and_escaped(hostile_trace):
    page = to_html(hostile_trace)
    vis_js = (graph_component_dir() / "vis-network.min.js").read_text(encoding="utf-8")
    assert page.count(vis_js) == 1
    ours = page.replace(vis_js, "")  # vis-network's own code holds a "<script>" string literal
    assert HOSTILE_TITLE in {n["title"] for n in export_data(hostile_trace)["nodes"].values()}
    # the only script elements are ours: the data block, vis-network, the graph script and the page script
    assert re.findall(r"<script[^>]*>", ours) == ['<script type="application/json" id="crase-data">', "<script>",
                                                  "<script>", "<script>"]
    graph_js = (graph_component_dir() / "graph_core.js").read_text(encoding="utf-8")
    assert page.count(graph_js) == 1  # the app's own graph script, inlined
    assert "alert('xss')" not in ours.replace("\\u003cscript\\u003ealert('xss')\\u003c/script\\u003e", "")
    assert "javascript:" not in page.split('id="crase-data">')[1].split("</script>")[0].replace(
        "[links](javascript:alert(1))", "")  # the hostile title's text only, never a link
    # nothing is fetched: no src/href to anything but in-page data
    assert not re.search(r"""(src|href)\s*=\s*["'](https?:)?//""", page)
    assert not re.search(r"@@[A-Z_]+@@", ours)  # every placeholder filled
    assert "vis.js is dual licensed" in page and "Apache-2.0 / MIT" in page  # the licence notices stay
    data = json.loads(page.split('id="crase-data">')[1].split("</script>")[0])
    assert data["query"] == QUERY and len(data["results"]) == len(hostile_trace.results)
    exported = {(e["from"], e["to"]) for e in data["edges"]}
    assert exported <= {(e.citing, e.cited) for e in hostile_trace.edges}
    assert {(e.citing, e.cited) for e in hostile_trace.edges if e.kept} <= exported


def test_cli_export_writes_the_file(hostile_trace, tmp_path, capsys):
    run = trace_io.save(hostile_trace, tmp_path / "run.json")
    out = tmp_path / "run.html"
    assert main(["export", str(run), "--format", "html", "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == to_html(hostile_trace)
    assert "needs no server" in capsys.readouterr().out
    # a folder is refused with one line, not a traceback
    (tmp_path / "dir").mkdir()
    assert main(["export", str(run), "--out", str(tmp_path / "dir")]) == 2


def _browser_missing() -> str | None:
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        return f"chromium not found at {CHROMIUM}"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed"
    return None


def test_exported_file_opens_offline_and_an_edge_click_shows_its_matrix(hostile_trace, tmp_path):
    why = _browser_missing()
    if why:
        if REQUIRE_BROWSER:
            pytest.fail(f"browser test required but {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    path = tmp_path / "run.html"
    path.write_text(to_html(hostile_trace), encoding="utf-8")
    requests: list[str] = []
    shots = Path(os.environ.get("CRASE_SCREENSHOT_DIR", ROOT / "artifacts" / "screenshots"))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM if Path(CHROMIUM).exists() else None,
                                     args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1440, "height": 900}, offline=True)
        context.route("**/*", lambda route: (requests.append(route.request.url),
                                             route.continue_() if route.request.url.startswith("file:") else route.abort()))
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: (errors.append("dialog: " + d.message), d.dismiss()))
        page.goto(path.as_uri())
        page.wait_for_function("window.craseExport && window.craseExport.ready", timeout=20000)
        assert errors == []
        assert [u for u in requests if not u.startswith("file:")] == []
        # the hostile title is text, not markup
        assert page.locator("ol#results").inner_text().count("<script>alert('xss')</script>") == 1
        assert page.evaluate("document.querySelectorAll('script').length") == 4
        # click the midpoint of every drawn edge the reference geometry says is nearest there; the panel opens it
        from crase_core.views.graph_views import arc_midpoint, drawn_curve, pointed_items

        geo = page.evaluate("() => window.craseExport.graph.geometry()")
        box = page.evaluate("() => { const r = window.craseExport.graph.canvas.getBoundingClientRect();"
                            " return {x: r.left, y: r.top, w: r.width, h: r.height}; }")
        nodes = [(n["id"], n["x"], n["y"], n["r"]) for n in geo["nodes"]]
        at = {n["id"]: n for n in geo["nodes"]}
        curves = [(e["id"], drawn_curve((at[e["from"]]["x"], at[e["from"]]["y"]), (at[e["to"]]["x"], at[e["to"]]["y"]),
                                        e["bend"], at[e["from"]]["r"], at[e["to"]]["r"]), e["width"]) for e in geo["edges"]]
        clicked = 0
        for eid, pts, _ in curves:
            if not pts:
                continue
            m = arc_midpoint(pts)
            items = pointed_items(m, nodes, curves)
            if not items or items[0][1:] != ("edge", eid) or (len(items) > 1 and items[1][0] < items[0][0] + 1):
                continue  # another item is as near: not a clean click
            page.mouse.click(box["x"] + m[0], box["y"] + m[1])
            u, v = eid.split("->")
            assert page.locator("#panel").get_attribute("data-edge") == eid
            edge = hostile_trace.edge(u, v)
            assert page.locator("#decision").inner_text().endswith(edge.decision)
            rows = page.locator("#matrix tr")
            assert rows.count() == len(edge.matrix) + 1
            cells = [float(x) for x in page.locator("#matrix tr").nth(1).locator("td").all_inner_texts()]
            # cut, not rounded, to 2 decimals (as the app): a cell below θ never reads as θ
            assert cells == [math.floor(x * 100 + 1e-9) / 100 for x in edge.matrix[0]]
            claims = hostile_trace.claims[edge.citing].claims
            assert claims[0].text in page.locator("#matrix tr").nth(1).locator("th").inner_text()
            clicked += 1
        assert clicked >= 3
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "export_html_edge_1440x900.png"))
        # a ranked paper opens its card, with its link built from a validated id only
        page.locator("ol#results li").first.click()
        assert page.locator("#panel").get_attribute("data-node") == hostile_trace.results[0].paper_id
        context.close()
        browser.close()


TEX_TITLE = r"$\mathcal{N}=4$ super Yang--Mills on $AdS_5\times S^5$ <img src=x onerror=alert(1)>"
TEX_ABSTRACT = r"The entropy $S=\frac{c}{3}\log L$ of ${\cal N}=4$ on $AdS_3$, after Ba\~nados & <b>bold</b>."
TEX_CLAIM = r"Geodesics in $AdS_3$ give $\sqrt{g_{\mu\nu}}$ <script>alert(2)</script>"
TEX_CONTEXT = r"as {\it Ba\~nados} showed for $\bar{\psi}\psi$ \cite{x}"
TEX_AUTHOR = r"M. Ba\~nados"


@pytest.fixture(scope="module")
def tex_trace(hostile_trace):
    """The hostile run with TeX (and markup) in the top paper's title, author, abstract and first claim and in the
    context of one of its kept edges: (trace, paper id, edge id)."""
    import copy
    import dataclasses

    trace = copy.deepcopy(hostile_trace)
    pid = trace.results[0].paper_id
    node = trace.node(pid)
    node.paper = dataclasses.replace(node.paper, title=TEX_TITLE, abstract=TEX_ABSTRACT,
                                     authors=(TEX_AUTHOR, *node.paper.authors[1:]))
    cs = trace.claims[pid]
    cs.claims[0] = dataclasses.replace(cs.claims[0], text=TEX_CLAIM)
    edge = next(e for e in trace.edges if e.kept and pid in (e.citing, e.cited))
    edge.contexts = [TEX_CONTEXT]
    return trace, pid, f"{edge.citing}->{edge.cited}"


def test_the_export_draws_tex_through_the_one_renderer(tex_trace):
    from crase_core.views import tex

    trace, pid, eid = tex_trace
    data = export_data(trace)
    n = data["nodes"][pid]
    assert n["title"] == tex.to_plain(TEX_TITLE) and n["title"].startswith("𝒩=4 super Yang–Mills on AdS₅ × S⁵")
    assert n["title_tex"] == tex.to_json(TEX_TITLE) and n["abstract_tex"] == tex.to_json(TEX_ABSTRACT)
    assert n["authors"][0] == "M. Bañados" and n["abstract"] == tex.to_plain(TEX_ABSTRACT)
    claim = data["claims"][pid]["claims"][0]
    assert claim["text"] == tex.to_plain(TEX_CLAIM) and claim["tex"] == tex.to_json(TEX_CLAIM)
    assert next(e for e in data["edges"] if e["id"] == eid)["contexts"] == [tex.to_json(TEX_CONTEXT)]
    # no text the page shows as plain text carries raw TeX: papers, claims, tooltips, labels, reasons
    plain = [x for m in data["nodes"].values() for x in (m["title"], m["abstract"], m["reason"], m["prune_reason"],
                                                          *m["authors"])]
    plain += [c["text"] for cs in data["claims"].values() for c in cs["claims"]] + data["lines"]
    plain += [s["label"] for s in data["styles"]["nodes"].values()] + [r["reason"] for r in data["results"]]
    assert [r for x in plain for r in tex.raw_tex(x)] == []
    page = to_html(trace)
    assert "mathcal" not in page and "\\\\frac" not in page and "\\\\sqrt" not in page
    # the static "why" section: the title as the renderer's HTML, its markup escaped
    assert f"1. {tex.to_html(TEX_TITLE)}" in page and "<img" not in page


def test_exported_panels_draw_tex_as_the_renderer_does(tex_trace, tmp_path):
    """In Chromium: the list, the paper panel and the edge panel show the renderer's marks (sub/sup elements),
    never raw TeX, and the markup in the text stays text (no element, no script runs)."""
    why = _browser_missing()
    if why:
        if REQUIRE_BROWSER:
            pytest.fail(f"browser test required but {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    from crase_core.views import tex

    trace, pid, eid = tex_trace
    path = tmp_path / "tex.html"
    path.write_text(to_html(trace), encoding="utf-8")
    shots = Path(os.environ.get("CRASE_SCREENSHOT_DIR", ROOT / "artifacts" / "screenshots"))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM if Path(CHROMIUM).exists() else None,
                                     args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: (errors.append("dialog: " + d.message), d.dismiss()))
        page.goto(path.as_uri())
        page.wait_for_function("window.craseExport && window.craseExport.ready", timeout=20000)
        first = page.locator("ol#results li").first
        assert first.locator("strong").inner_html() == "1. " + tex.to_html(TEX_TITLE)
        first.click()
        panel = page.locator("#panel")
        assert panel.get_attribute("data-node") == pid
        assert panel.locator("h3").first.inner_html() == tex.to_html(TEX_TITLE)
        assert panel.locator("p", has_text="The entropy").inner_html() == tex.to_html(TEX_ABSTRACT)
        assert "M. Bañados" in panel.inner_text()
        assert tex.raw_tex(panel.inner_text()) == [] and tex.raw_tex(page.locator("ol#results").inner_text()) == []
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "export_tex_paper_panel.png"))
        page.evaluate("id => window.craseExport.inspect('edge', id)", eid)
        assert panel.get_attribute("data-edge") == eid
        assert panel.locator("blockquote").inner_html() == tex.to_html(TEX_CONTEXT)
        claim_html = tex.to_html(TEX_CLAIM)  # the DOM spells the overline's style "text-decoration: overline;"
        drawn = panel.locator(".claim").evaluate_all("l => l.map(e => e.innerHTML)")
        assert any(claim_html in x.replace('"text-decoration: overline;"', '"text-decoration:overline"') for x in drawn)
        assert tex.raw_tex(panel.inner_text()) == []
        page.screenshot(path=str(shots / "export_tex_edge_panel.png"))
        # the markup in the texts is text: no element of it exists and nothing ran
        assert page.evaluate("document.querySelectorAll('img, b, #panel script, ol#results script').length") == 0
        assert errors == []
        browser.close()


def test_traces_without_the_new_fields_still_load(hostile_trace):
    """Traces saved before coverage/library/in_library/origin kind existed load with the defaults."""
    assert hostile_trace.coverage is not None and not hostile_trace.coverage.weak  # recorded by the run
    data = json.loads(trace_io.dumps(hostile_trace))
    del data["coverage"], data["library"]
    for n in data["nodes"]:
        del n["in_library"]
    for r in data["results"]:
        del r["in_library"]
    for s in data["seeds"]:
        for o in s["origins"]:
            del o["kind"]
    old = trace_io.from_dict(data)
    assert old.coverage is None and old.library is None
    assert not any(n.in_library for n in old.nodes) and all(o.kind == "search" for s in old.seeds for o in s.origins)
    assert [r.paper_id for r in old.results] == [r.paper_id for r in hostile_trace.results]
    assert "crase-data" in to_html(old)


def test_a_large_run_travels_compressed_and_inflates_to_the_same_data(hostile_trace, monkeypatch):
    """Above COMPRESS_ABOVE bytes the data block is gzip + base64 (nothing in it can close the script element);
    inflated, it is exactly what the page would read as JSON."""
    from crase_core.views import html_export

    small = to_html(hostile_trace)
    monkeypatch.setattr(html_export, "COMPRESS_ABOVE", 0)
    page = to_html(hostile_trace)
    block = page.split('id="crase-data">')[1].split("</script>")[0]
    assert f'<script type="{html_export.GZIP_TYPE}" id="crase-data">' in page
    assert re.fullmatch(r"[A-Za-z0-9+/=]+", block)
    assert html_export.page_data(page) == html_export.page_data(small) == json.loads(json.dumps(export_data(hostile_trace)))
    assert len(block) < len(small.split('id="crase-data">')[1].split("</script>")[0])
