"""The explorer's fourth pass in Chromium at 1440×900 (issue 32): a corpus imported from the app and an app
started on an imported corpus (its name on every page, its own demo queries, no "hep-th" anywhere), the first
result card above the fold, the pruned-edge toggle surviving a page switch, and no request leaving the machine.

Every request the browser makes is recorded (``context.on("request")``) from the first page load to the last
click; a URL whose host is not 127.0.0.1 / localhost (or a data:/blob: URL) fails the module's last test.
Screenshots: ``$CRASE_SCREENSHOT_DIR`` (default artifacts/screenshots), ``pass4_*.png``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from e2e_support import ROOT, SHOTS, choose_option, settled, skip_without_browser, streamlit_app

skip_without_browser()

from playwright.sync_api import Page  # noqa: E402

from crase_core.views import corpora  # noqa: E402

W, H = 1440, 900
PAGES = ("Search", "Evidence graph", "Seeds", "Ranking", "Audit", "Runs")
NAME = "openaccess"  # the corpus imported through the app
MINE = "mylab"  # the corpus the second app starts on
EMBEDDED_DEMO = json.loads((ROOT / "assets" / "ui" / "demo_queries.json").read_text(encoding="utf-8"))[0]


def _works_file(tmp: Path) -> Path:
    """The OpenAlex fixture's Work objects as an API-results JSON-lines file (what a user downloads)."""
    works = json.loads((ROOT / "tests" / "fixtures" / "openalex" / "works.json").read_text(encoding="utf-8"))["works"]
    path = tmp / "openalex-works.jsonl"
    path.write_text("".join(json.dumps(w) + "\n" for w in works), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return Path(os.environ.get("CRASE_CACHE_DIR") or tmp_path_factory.mktemp("pass4-cache"))


@pytest.fixture(scope="module")
def requests_seen():
    return []


@pytest.fixture(scope="module")
def context(chromium, requests_seen):
    ctx = chromium.new_context(viewport={"width": W, "height": H})
    ctx.on("request", lambda r: requests_seen.append(r.url))
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def embedded_app(tmp_path_factory, cache_dir):
    with streamlit_app(tmp_path_factory.mktemp("pass4-embedded"), cache_dir=cache_dir) as served:
        yield served


def _corpus_shown(page: Page) -> str:
    """The corpus the sidebar's picker shows (its value sits in the combobox's input, not in the text)."""
    return page.locator(".st-key-corpus_pick input").input_value()


def _main_text(page: Page) -> str:
    return page.evaluate("() => document.body.innerText")


def _search_ready(page: Page, url: str) -> None:
    page.goto(url)
    page.get_by_label("Your literature-search question").wait_for(timeout=120_000)


def _results(page: Page) -> None:
    page.get_by_text("Why it is here:").first.wait_for(timeout=180_000)
    page.wait_for_timeout(800)


def _open_page(page: Page, title: str) -> None:
    page.get_by_role("link", name=title).click()
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(1500)


def test_import_a_corpus_from_the_app(context, embedded_app, tmp_path, cache_dir):
    """Upload an OpenAlex works file in the Search page, watch it import, find the new corpus chosen: its name
    in the sidebar and the page, demo queries from its own papers."""
    url, _ = embedded_app
    page = context.new_page()
    _search_ready(page, url)
    page.get_by_text("Corpus: hep-th (embedded) — import or embed").click()
    choose_option(page, page.locator(".st-key-import_format"), "OpenAlex works (API results or snapshot parts)")
    page.get_by_label("Name of the new corpus").fill(NAME)
    page.locator(".st-key-import_files input[type=file]").set_input_files(str(_works_file(tmp_path)))
    page.locator(".st-key-import_files").get_by_text("openalex-works.jsonl").wait_for(timeout=60_000)  # uploaded
    page.get_by_role("button", name="Import", exact=True).click()
    try:
        page.get_by_text(f"Try a demo query on {NAME}").wait_for(timeout=300_000)
    finally:
        page.screenshot(path=str(SHOTS / "pass4_import_done.png"), full_page=True)
    # the import reruns the page: read it once that run has drawn everything (its corpus expander included)
    page.get_by_text(f"Corpus: {NAME} — import or embed").wait_for(timeout=60_000)
    settled(page)
    assert _corpus_shown(page) == NAME
    folder = corpora.corpora_folder(cache_dir) / NAME
    assert corpora.is_corpus_folder(folder)
    page.screenshot(path=str(SHOTS / "pass4_imported_search.png"))
    text = _main_text(page)
    assert "hep-th" not in text.lower()
    from crase_core.store.corpus_folder import open_or_build

    demos = corpora.demo_queries(open_or_build(folder))
    assert demos and demos[0].query.startswith("The state of OA")  # the most cited work of the file
    for d in demos:
        assert page.get_by_role("button", name=d.label).count() == 1
    # embed it from the app with the on-device model: semantic feedback on for its runs
    page.get_by_text(f"Corpus: {NAME} — import or embed").click()
    done = page.get_by_text("Embedded 17 papers").or_(page.get_by_text("Embeddings up to date")).first
    started = page.get_by_text(f"Embedding {NAME}…").or_(done).first
    for attempt in range(3):  # a click while the page still reruns (the expander just opened) can be lost
        page.get_by_role("button", name="Embed this corpus").click()
        try:
            started.wait_for(timeout=30_000)
            break
        except Exception:
            if attempt == 2:
                raise
    try:
        done.wait_for(timeout=300_000)
    finally:
        page.screenshot(path=str(SHOTS / "pass4_embed_done.png"), full_page=True)
    from crase_core.retrieval.semantic import find_embeddings

    corpus = open_or_build(folder)
    assert find_embeddings(folder, corpus.name, corpus.fingerprint, len(corpus)).embeddings is not None
    page.screenshot(path=str(SHOTS / "pass4_imported_embedded.png"))
    page.close()


def test_started_on_an_imported_corpus_no_page_says_hep_th(context, tmp_path_factory, cache_dir):
    """An app started on an imported corpus ($CRASE_CORPUS; the tiny hand-checked corpus with ids of its own,
    imported as `crase corpus import --format jsonl` does): its name on every page, a demo query of its own
    runs, and no page says hep-th."""
    from tiny_corpus import TINY_CITATIONS, TINY_PAPERS, write_corpus

    from crase_core.importers.corpus_import import import_corpus

    tmp = tmp_path_factory.mktemp("pass4-imported")
    src = write_corpus(tmp / "src", [(f"ml{p}", y, t, a) for p, y, t, a in TINY_PAPERS],
                       [(f"ml{u}", f"ml{v}") for u, v in TINY_CITATIONS])
    folder = corpora.corpora_folder(cache_dir) / MINE
    if not folder.exists():
        import_corpus(src, folder, "jsonl")
    with streamlit_app(tmp, corpus=folder, cache_dir=cache_dir) as (url, _):
        page = context.new_page()
        _search_ready(page, url)
        page.get_by_text(f"Try a demo query on {MINE}").wait_for(timeout=60_000)
        page.locator("[class*='st-key-demo_']").first.click()
        _results(page)
        # the first card shows here too, under the run's notes: its title, authors and "why" lines above the fold
        # (the whole card, its parts expander included, is held to the fold on the embedded corpus below)
        box = page.locator("[class*='st-key-card_']").first.bounding_box()
        page.screenshot(path=str(SHOTS / "pass4_imported_results.png"))
        assert box is not None and box["y"] + 100 <= H, box
        for title in PAGES:
            if title != "Search":
                _open_page(page, title)
            if title not in ("Search", "Runs"):
                page.get_by_text(f"source local:{MINE}@").first.wait_for(timeout=60_000)
            settled(page)
            text = _main_text(page)
            assert "hep-th" not in text.lower(), title
            assert _corpus_shown(page) == MINE, title
            if title not in ("Search", "Runs"):  # a run's pages name its source
                assert f"source local:{MINE}@" in text, title
            page.screenshot(path=str(SHOTS / f"pass4_imported_{title.lower().replace(' ', '_')}.png"))
        page.get_by_role("link", name="Search").click()
        page.get_by_text("Run settings").first.click()
        page.wait_for_timeout(800)
        settled(page)
        assert page.locator(".st-key-rt_source input").input_value() == f"Local corpus: {MINE} (offline)"
        assert "hep-th" not in _main_text(page).lower()
        page.screenshot(path=str(SHOTS / "pass4_imported_run_settings.png"))
        page.close()


def test_first_card_above_the_fold_and_pruned_toggle_survives_a_page_switch(context, embedded_app):
    url, _ = embedded_app
    page = context.new_page()
    _search_ready(page, url)
    page.get_by_role("button", name=EMBEDDED_DEMO["label"]).click()
    _results(page)
    assert page.evaluate("() => window.scrollY") == 0
    box = page.locator("[class*='st-key-card_']").first.bounding_box()
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= H, box
    page.screenshot(path=str(SHOTS / "pass4_first_card_above_fold.png"))

    _open_page(page, "Evidence graph")
    toggle = page.locator(".st-key-g_pruned")
    toggle.get_by_text("Show pruned (").wait_for(timeout=60_000)
    label = toggle.inner_text().strip()
    assert label.startswith("Show pruned (") and int(label.split("(")[1].split(")")[0].replace(",", "")) > 0
    switch = toggle.locator("input")
    assert not switch.is_checked()
    shown_caption = page.locator("[data-testid='stCaptionContainer']", has_text="edges shown").first
    before = int(shown_caption.inner_text().split(" edges shown")[0].split("·")[-1].strip().replace(",", ""))
    toggle.locator("label").click()
    page.wait_for_timeout(1500)
    assert switch.is_checked()
    _open_page(page, "Ranking")
    _open_page(page, "Evidence graph")
    assert page.locator(".st-key-g_pruned input").is_checked()
    after = page.locator("[data-testid='stCaptionContainer']", has_text="edges shown").first.inner_text()
    assert "hidden" not in after  # every pruned edge of the view is drawn
    assert int(after.split(" edges shown")[0].split("·")[-1].strip().replace(",", "")) >= before
    page.screenshot(path=str(SHOTS / "pass4_pruned_toggle_after_switch.png"))
    page.close()


def test_no_request_leaves_the_machine(requests_seen):
    """Every request of the tests above (page loads, scripts, fonts, icons, the graph component) went to the
    app on 127.0.0.1."""
    assert len(requests_seen) > 50
    outside = sorted({u for u in requests_seen if not u.startswith(("data:", "blob:"))
                      and urlsplit(u).hostname not in ("127.0.0.1", "localhost")})
    assert outside == []
