"""Fault: two downloads in quick succession lost the second one (``MediaFileStorageError``).

In a real browser on a real app server: open a run, click the JSON and the BibTeX download buttons
40 ms apart, then three more at once; every file must arrive complete (the JSON is the saved trace). Before
the fix each click reran the page, which gave every download button a new deferred file id and dropped the
old ones, so a click that still held an old id got "Deferred file … not found".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from e2e_support import SHOTS, chromium, skip_without_browser, streamlit_app  # noqa: E402

skip_without_browser()

from playwright.sync_api import sync_playwright  # noqa: E402

CORPUS = ROOT / "tests" / "fixtures" / "hostile_corpus"
QUERY = "holographic entanglement entropy of BTZ black holes"


@pytest.mark.fault_kind("app-quick-downloads")
def test_quick_successive_downloads_all_arrive(tmp_path):
    with streamlit_app(tmp_path, CORPUS) as (url, _runs), sync_playwright() as p:
        browser = chromium(p)
        page = browser.new_page(viewport={"width": 1440, "height": 900}, accept_downloads=True)
        page.goto(url)
        box = page.get_by_label("Your literature-search question")
        box.wait_for(timeout=30_000)
        box.fill(QUERY)
        page.get_by_role("button", name="Search").first.click()
        page.get_by_text("Why it is here:").first.wait_for(timeout=90_000)  # the results are drawn
        page.get_by_role("link", name="Runs").click()
        buttons = page.locator("[data-testid='stDownloadButton'] button")
        buttons.first.wait_for(timeout=30_000)
        page.wait_for_timeout(500)
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "fault_downloads_runs_page.png"), full_page=True)
        labels = [b.inner_text().split("\n")[-1].strip() for b in buttons.all()]  # after the icon's name
        assert labels == ["Trace (JSON)", "BibTeX", "RIS", "CSV", "Graph (GraphML)"], labels

        downloads = []
        page.on("download", lambda d: downloads.append(d))
        buttons.nth(0).click()
        page.wait_for_timeout(40)
        buttons.nth(1).click()
        for i in (2, 3, 4):  # and three more at once
            buttons.nth(i).click()
        deadline = 200
        while len(downloads) < 5 and deadline:
            page.wait_for_timeout(100)
            deadline -= 1
        names = sorted(d.suggested_filename.rsplit(".", 1)[1] for d in downloads)
        assert names == ["bib", "csv", "graphml", "json", "ris"], names
        for d in downloads:
            assert d.failure() is None, (d.suggested_filename, d.failure())
        got = {d.suggested_filename.rsplit(".", 1)[1]: Path(d.path()).read_bytes() for d in downloads}
        saved = [f for f in (tmp_path / "runs").glob("*.json") if not f.name.endswith(".meta.json")]
        assert len(saved) == 1
        assert json.loads(got["json"]) == json.loads(saved[0].read_bytes())
        assert got["bib"].startswith(b"@") and got["csv"].startswith(b"rank,")
        assert b"<graphml" in got["graphml"]
        log = (tmp_path / "streamlit.log").read_text()
        assert "MediaFileStorageError" not in log and "not found" not in log, log[-2000:]
        browser.close()
