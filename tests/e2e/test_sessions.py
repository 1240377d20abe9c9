"""Six browser sessions on one app server run their queries at the same time.

Each session (its own browser context, so its own Streamlit session) types a query and clicks Search
within a few milliseconds of the others. Three queries, each in two sessions. Every session must end
with its own query's results and no error box; the runs folder must hold exactly three distinct runs
(the second session of a pair reopens the run the first saved, instead of a copy), each a readable
trace with the id the app showed. Screenshots of all six go to the screenshot folder.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e_support import SHOTS, chromium, skip_without_browser, streamlit_app  # noqa: E402

skip_without_browser()

from playwright.sync_api import sync_playwright  # noqa: E402

CORPUS = ROOT / "tests" / "fixtures" / "hostile_corpus"
QUERIES = [
    "holographic entanglement entropy of BTZ black holes",
    "black hole entropy microstates",
    "string theory on AdS3 spectral flow",
]


def test_six_sessions_query_at_once(tmp_path):
    from crase_core import trace as trace_io
    from crase_core.runs import content_id

    with streamlit_app(tmp_path, CORPUS) as (url, _runs), sync_playwright() as p:
        browser = chromium(p)
        contexts = [browser.new_context(viewport={"width": 1440, "height": 900}) for _ in range(6)]
        pages = [c.new_page() for c in contexts]
        queries = [QUERIES[i % 3] for i in range(6)]
        for page, query in zip(pages, queries, strict=True):
            page.goto(url)
            box = page.get_by_label("Your literature-search question")
            box.wait_for(timeout=60_000)
            box.fill(query)
        buttons = [page.get_by_role("button", name="Search").first for page in pages]
        for b in buttons:
            b.wait_for(timeout=30_000)
        for b in buttons:  # all six within a few ms
            b.click(no_wait_after=True)
        shown_ids = []
        SHOTS.mkdir(parents=True, exist_ok=True)
        for i, (page, query) in enumerate(zip(pages, queries, strict=True)):
            page.get_by_text("Why it is here:").first.wait_for(timeout=180_000)
            page.get_by_role("button", name="This run in numbers").click()  # the run's caption sits in it
            caption = page.get_by_text(f"Query: {query}").first
            caption.wait_for(timeout=30_000)
            page.wait_for_timeout(300)
            page.mouse.move(5, 5)
            page.screenshot(path=str(SHOTS / f"sessions_{i + 1}.png"), full_page=False)
            assert page.locator("[data-testid='stAlertContentError']").count() == 0, i
            assert page.locator("[data-testid='stException']").count() == 0, i
            text = caption.inner_text()
            assert all(f"Query: {q}" not in text for q in QUERIES if q != query)
            run_id = text.rsplit("run ", 1)[1].split()[0].strip()
            shown_ids.append(run_id)
        browser.close()

    saved = sorted(f for f in (tmp_path / "runs").glob("*.json") if not f.name.endswith(".meta.json"))
    traces = [trace_io.load(f) for f in saved]
    assert sorted(t.query for t in traces) == sorted(QUERIES)  # three distinct runs, no copies
    assert all(t.run_id == content_id(t) for t in traces)
    by_query = {t.query: t.run_id for t in traces}
    assert shown_ids == [by_query[q] for q in queries]  # both sessions of a pair show the one saved run
    for f in saved:
        meta = json.loads(f.with_name(f.stem + ".meta.json").read_text())
        assert meta["run_id"] == by_query[meta["query"]]
    assert not list((tmp_path / "runs").glob(".*.tmp"))  # no temp file left behind
