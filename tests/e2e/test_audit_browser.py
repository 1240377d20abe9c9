"""The Audit page in a real browser at 1440×900 and 1920×1080, and the verdict → apply → re-rank flow.

On the embedded hep-th corpus, one query run from the Search page:

* after a blind verdict is recorded, the edge's heat map is drawn (its cells are on screen, not squeezed to
  nothing by the claim labels) and the two claim tables stay inside their columns, side by side, without
  overlapping;
* "Apply my verdicts" saves a re-ranked run whose trace names its parent, applies the verdict and ranks
  exactly as :func:`crase_core.audit.rerank.apply_verdicts` does; the page says how many papers moved, the Runs
  page shows the lineage, and the re-ranked run opens;
* a result's "why this rank" view lists its score's parts, which sum to its score.

Screenshots go to ``artifacts/screenshots`` (or ``$CRASE_SCREENSHOT_DIR``).
"""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest
from e2e_support import SHOTS, heat_map, shown_cell, skip_without_browser, streamlit_app

skip_without_browser()

from playwright.sync_api import Page  # noqa: E402

from crase_core import trace as trace_io  # noqa: E402
from crase_core.audit.rerank import EdgeVerdict, apply_verdicts, rank_changes  # noqa: E402
from crase_core.audit.store import audit_queue  # noqa: E402
from crase_core.records import EdgeRecord  # noqa: E402
from crase_core.trace import RunTrace  # noqa: E402

QUERY = "tachyon condensation on unstable D-branes"
QUEUE = 20  # the page's default queue length
VISIBLE_ROWS = 7  # rows of the queue on screen without scrolling it
ROW = 35  # pixels per row of a Streamlit dataframe (and its header)


@pytest.fixture(scope="module")
def app_run(tmp_path_factory, chromium):
    """The app over the embedded corpus and one run of QUERY; yields (url, runs dir, the saved trace)."""
    tmp = tmp_path_factory.mktemp("e2e-audit")
    cache = Path(os.environ["CRASE_E2E_CACHE_DIR"]) if os.environ.get("CRASE_E2E_CACHE_DIR") else None
    with streamlit_app(tmp, corpus=None, cache_dir=cache) as (url, runs_dir):
        page = chromium.new_page(viewport={"width": 1440, "height": 900})
        page.goto(url)
        box = page.get_by_label("Your literature-search question")
        box.wait_for(timeout=60_000)
        box.fill(QUERY)
        page.get_by_role("button", name="Search").first.click()
        deadline = time.time() + 180
        saved: list[Path] = []
        while time.time() < deadline and not saved:
            saved = _saved(runs_dir)
            time.sleep(0.3)
        assert saved, "the query did not finish (no saved run)"
        page.get_by_text("Why it is here", exact=False).first.wait_for(timeout=60_000)
        trace = trace_io.load(saved[0])
        yield url, runs_dir, trace, page
        page.close()


def _saved(runs_dir: Path) -> list[Path]:
    return sorted(p for p in runs_dir.glob("*.json") if not p.name.endswith(".meta.json"))


def _open_audit(page: Page, auditor: str) -> None:
    page.get_by_role("link", name="Audit").click()
    page.get_by_text("Audit queue", exact=True).wait_for(timeout=60_000)
    page.get_by_role("textbox", name="Auditor name").fill(auditor)
    page.keyboard.press("Enter")
    page.wait_for_timeout(1_000)


#: the first words of the heat map's caption, by the scorer that decided the edge (what M[i][j] is)
MATRIX_NAMES = {"model": "Entailment (model)", "offline": "Word-overlap support"}


def _judge_row(page: Page, row: int, keep: bool, edge: EdgeRecord) -> None:
    """Select queue row ``row`` (``edge``) and record a blind judgement on it; wait for the edge's inspector:
    the pipeline's decision, now shown, and the heat map's caption naming the scorer that decided the edge."""
    grid = page.locator("[class*='st-key-audit_queue_']").first
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + 20, box["y"] + ROW + row * ROW + ROW / 2)
    page.get_by_role("button", name="Record judgement").wait_for(timeout=30_000)
    page.get_by_text("yes — keep the edge" if keep else "no — prune it").click()
    page.get_by_role("button", name="Record judgement").click()
    page.get_by_text(f"Decision — {edge.decision}", exact=False).first.wait_for(timeout=30_000)
    caption = page.locator("[data-testid='stMarkdownContainer']", has_text="Rows: claims of u; columns: claims of v")
    caption.first.wait_for(timeout=30_000)
    assert caption.first.inner_text().startswith(MATRIX_NAMES[edge.scorer or "offline"]), caption.first.inner_text()
    page.wait_for_timeout(2_000)  # the heat map is drawn after the page settles


def _heat_pixels(page: Page, above: float) -> int:
    """Pixels of the heat map's cells on screen: blue shades of the colour scale and the orange outline of
    cells ≥ the calibrated θ, above the colour legend (``above``: its top; its own gradient is not counted)."""
    from PIL import Image

    chart = page.locator("[data-testid='stVegaLiteChart']").first
    chart.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    image = Image.open(io.BytesIO(chart.screenshot())).convert("RGB")
    width, _ = image.size
    pixels = image.crop((0, 0, width, max(1, int(above)))).get_flattened_data()
    return sum(1 for r, g, b in pixels if (b - r >= 40 and b >= 90) or (r > 200 and 80 < g < 140 and b < 110))


def _legend_labels_fit(shown: dict, trace: RunTrace, e: EdgeRecord) -> None:
    """The colour legend is drawn whole (inside the chart, not cut off below a short map, under the map and
    over none of its cells), labelled 0, 1 and at the edge's θ the outlined cells reach (unless it lies so near 0
    that the two would print over each other: the caption names it), each label apart from the others."""
    lx0, ly0, lx1, ly1 = shown["legend"]
    assert lx0 >= 0 and ly0 >= 0 and lx1 <= shown["svg"][2] + 1 and ly1 <= shown["svg"][3] + 1, shown
    assert all(ly0 >= c[3] for c in shown["cells"]), shown
    labels = shown["legend_labels"]
    theta = trace.threshold(e)[1]
    support = f"{theta:.2f}".rstrip("0").rstrip(".")
    assert labels[0] == "0" and labels[-1] == "1" and (support in labels or theta < 0.12), labels
    boxes = sorted(shown["legend_label_boxes"])
    assert all(a[2] <= b[0] for a, b in zip(boxes, boxes[1:], strict=False)), (labels, boxes)


def _claim_tables(page: Page) -> dict:
    """The two claim tables of the edge inspector and the columns that hold them (page coordinates)."""
    return page.evaluate("""() => {
      const out = {};
      for (const [key, label] of [["u", "Claims of u"], ["v", "Claims of v"]]) {
        const col = [...document.querySelectorAll("[data-testid='stColumn']")].find(
          c => c.innerText.trim().startsWith(label) && c.querySelector("table"));
        if (!col) continue;
        const t = col.querySelector("table"), tr = t.getBoundingClientRect(), cr = col.getBoundingClientRect();
        out[key] = {table: [tr.left, tr.right], col: [cr.left, cr.right], scroll: t.parentElement.scrollWidth,
                    client: t.parentElement.clientWidth};
      }
      return out;
    }""")


def _strong_rows(trace: RunTrace) -> list[int]:
    """Queue rows (on screen) whose edge has claims on both sides and at least two heat-map cells at its θ or
    above (the cells Δ counts: the colour scale's blues start at θ, the cells below it fade to white)."""
    queue = audit_queue(trace.edges, QUEUE, trace.run_id)
    return [i for i, e in enumerate(queue[:VISIBLE_ROWS])
            if len(e.matrix) >= 2 and len(e.matrix[0]) >= 2
            and sum(x >= trace.threshold(e)[1] for r in e.matrix for x in r) >= 2]


@pytest.mark.parametrize("size", [(1440, 900), (1920, 1080)], ids=["1440x900", "1920x1080"])
def test_audit_page_after_a_verdict_keeps_its_heat_map_and_claim_tables(app_run, size):
    _, _, trace, page = app_run
    rows = _strong_rows(trace)
    assert rows, "no visible queue row with a strong heat-map cell"
    edge = audit_queue(trace.edges, QUEUE, trace.run_id)[rows[0]]
    page.set_viewport_size({"width": size[0], "height": size[1]})
    try:
        _open_audit(page, f"layout-{size[0]}")
        scroller = page.locator("[class*='st-key-audit_queue_'] .dvn-scroller").first
        scroller.wait_for(timeout=30_000)
        overflow = scroller.evaluate("e => e.scrollWidth - e.clientWidth")
        assert overflow <= 1, f"the queue's columns run {overflow} px past the table (the cited titles are cut)"
        _judge_row(page, rows[0], keep=False, edge=edge)
        shown = heat_map(page.locator("[data-testid='stVegaLiteChart']").first)
        drawn = _heat_pixels(page, above=shown["legend"][1])
        page.screenshot(path=str(SHOTS / f"audit_after_verdict_heatmap_{size[0]}.png"))
        assert drawn >= 1_500, f"the heat map's cells are not drawn ({drawn} cell pixels on screen)"
        n_cells = len(edge.matrix) * len(edge.matrix[0])
        assert len(shown["cells"]) == n_cells and all(c[2] - c[0] >= 24 and c[3] - c[1] >= 24 for c in shown["cells"])
        # every cell's value as the library has it (cut to 2 decimals), bold where it reaches the θ Δ counts at
        theta = trace.threshold(edge)[1]
        assert shown["grid"] == [[(shown_cell(x), x >= theta) for x in r] for r in edge.matrix], shown["grid"]
        _legend_labels_fit(shown, trace, edge)
        # every claim label of both axes inside the chart (the last column's slanted label is not clipped)
        width, height = shown["svg"][2], shown["svg"][3]
        assert shown["axis_label_boxes"] and all(b[0] >= -1 and b[2] <= width + 1 and b[1] >= -1 and b[3] <= height + 1
                                                 for b in shown["axis_label_boxes"]), (shown["axis_label_boxes"], width)
        tables = _claim_tables(page)
        page.locator("[data-testid='stColumn']", has_text="Claims of v").first.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        page.screenshot(path=str(SHOTS / f"audit_after_verdict_claims_{size[0]}.png"))
        assert set(tables) == {"u", "v"}, tables
        for side, t in tables.items():
            assert t["table"][0] >= t["col"][0] - 1 and t["table"][1] <= t["col"][1] + 1, (side, t)
            assert t["scroll"] <= t["client"] + 1, (side, t)  # nothing wider than its column
        assert tables["u"]["table"][1] <= tables["v"]["table"][0], tables  # side by side, not overlapping
    finally:
        page.set_viewport_size({"width": 1440, "height": 900})


def test_why_view_and_ranking_page(app_run):
    """The first result's "why this rank" lists the parts of its score; the Ranking page draws its table."""
    _, _, trace, page = app_run
    page.get_by_role("link", name="Search").click()
    page.get_by_text("Why it is here", exact=False).first.wait_for(timeout=60_000)
    first = trace.results[0]
    page.get_by_text("Why this rank: the score's parts", exact=True).first.click()
    table = page.locator("[data-testid='stExpander']", has_text="sum of the parts").first
    table.wait_for(timeout=30_000)
    text = table.inner_text()
    assert f"{sum(p.value for p in first.score_parts):.5f}" in text and f"the score is {first.score:.5f}" in text
    for p in first.score_parts:
        assert f"{p.value:.5f}" in text
    page.wait_for_timeout(500)
    page.screenshot(path=str(SHOTS / "why_this_rank_1440.png"))
    page.get_by_role("link", name="Ranking").click()
    page.get_by_text("Ranker shown in full").wait_for(timeout=60_000)
    page.locator("[data-testid='stDataFrame']").first.wait_for(timeout=30_000)
    page.wait_for_timeout(1_500)
    page.screenshot(path=str(SHOTS / "ranking_1440.png"))
    assert page.locator("[data-testid='stException']").count() == 0


def test_verdict_apply_rerank_flow(app_run):
    """A blind verdict recorded on the page (prune a queue edge) and one recorded before (prune an edge into a
    top result, so that papers move); apply: the saved child run is exactly the library's re-rank."""
    from crase_core.audit.store import AuditStore

    _, runs_dir, trace, page = app_run
    queue = audit_queue(trace.edges, QUEUE, trace.run_id)[:VISIBLE_ROWS]
    row = next((i for i, e in enumerate(queue) if e.kept), 0)
    edge = queue[row]
    top = {r.paper_id for r in trace.results[:3]}
    candidates = sorted((e for e in trace.edges if e.kept and e.cited in top and e is not edge),
                        key=lambda e: -e.weight)[:8]
    assert candidates, "no kept edge into the top results"
    impact = max(candidates, key=lambda e: len(rank_changes(trace, apply_verdicts(
        trace, [EdgeVerdict(e.citing, e.cited, False)]))))
    AuditStore(runs_dir / "audit.sqlite").record(trace.run_id, impact.citing, impact.cited, "flow-auditor",
                                                  "disagree", True)
    before = {p.name for p in _saved(runs_dir)}
    _open_audit(page, "flow-auditor")
    _judge_row(page, row, keep=False, edge=edge)
    page.screenshot(path=str(SHOTS / "audit_after_verdict_1440.png"))
    apply = page.get_by_role("button", name="Apply my verdicts")
    apply.scroll_into_view_if_needed()
    apply.click()
    message = page.get_by_text("Saved the re-ranked run", exact=False)
    message.wait_for(timeout=60_000)
    message.scroll_into_view_if_needed()
    page.wait_for_timeout(1_000)
    page.screenshot(path=str(SHOTS / "audit_applied_verdicts_1440.png"))
    new = [p for p in _saved(runs_dir) if p.name not in before]
    assert len(new) == 1, new
    child = trace_io.load(new[0])
    assert child.parent_run_id == trace.run_id
    judged = {(impact.citing, impact.cited), (edge.citing, edge.cited)}
    assert {(a.citing, a.cited) for a in child.applied_verdicts} == judged
    assert all(not a.keep and a.auditors == ["flow-auditor"] for a in child.applied_verdicts)
    assert all(not child.edge(*e).kept for e in judged) and child.counters.model_calls == 0
    expected = apply_verdicts(trace, [EdgeVerdict(c, d, False) for c, d in sorted(judged)])
    assert [(r.paper_id, r.score) for r in child.results] == [(r.paper_id, r.score) for r in expected.results]
    changes = rank_changes(trace, child)
    assert changes == rank_changes(trace, expected) and changes  # papers moved, as the library computes
    assert f"{len(changes)} paper(s) of either answer moved" in message.inner_text()

    page.get_by_role("link", name="Runs").click()
    page.get_by_text("Lineage", exact=True).wait_for(timeout=30_000)
    lineage = page.locator("[data-testid='stMarkdownContainer']", has_text="verdict(s) applied").first
    text = lineage.inner_text()
    assert trace.run_id[:16] in text and child.run_id[:16] in text
    assert text.index(trace.run_id[:16]) < text.index(child.run_id[:16])  # parent, then child under it
    lineage.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "runs_lineage_1440.png"))

    page.get_by_role("link", name="Audit").click()
    page.get_by_role("button", name="Open the re-ranked run").click(timeout=30_000)
    page.get_by_text(f"run {child.run_id}", exact=False).first.wait_for(timeout=30_000)
