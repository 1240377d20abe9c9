"""Screenshots of every page of the explorer at the sizes people use (a tool, not a test).

    .venv/bin/python tests/e2e/screenshots.py [--out artifacts/screenshots/pages] [--sizes 1440x900,1920x1080]
        [--demo 0] [--prefix ""]

Starts ``streamlit run app.py`` over the embedded hep-th corpus (fresh caches and runs folder), clicks a demo
query's button, waits for the result cards, then opens each page from the sidebar and takes a viewport
screenshot (what a visitor sees without scrolling) and a full-page one. Also: the Search page before any
query, the HTML export of the run opened in Chromium, and a run against a model endpoint that is down (the
message the app shows, and what happens to the previous results). Prints each file it writes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from e2e_support import ROOT, chromium, streamlit_app  # noqa: E402

PAGES = ["Evidence graph", "Seeds", "Ranking", "Audit", "Runs", "Benchmark"]


def _settle(page, ms: int = 1200) -> None:
    page.wait_for_load_state("networkidle")
    page.mouse.move(2, 2)
    page.wait_for_timeout(ms)


SCROLL_HEIGHT_JS = """() => Math.max(...[...document.querySelectorAll('[data-testid="stMain"], section, div')]
  .filter(e => e.scrollHeight > e.clientHeight + 4 && getComputedStyle(e).overflowY !== 'visible')
  .map(e => e.scrollHeight), document.body.scrollHeight)"""


def _shoot(page, out: Path, name: str, full: bool = True) -> None:
    """The viewport as a visitor sees it; with ``full``, also the whole page (Streamlit scrolls its main
    block, not the document, so the viewport is made as tall as that block for the shot, then restored)."""
    page.screenshot(path=str(out / f"{name}.png"), full_page=False)
    print(out / f"{name}.png")
    if full:
        size = page.viewport_size
        height = min(int(page.evaluate(SCROLL_HEIGHT_JS)) + 40, 12000)
        if height > size["height"]:
            page.set_viewport_size({"width": size["width"], "height": height})
            page.wait_for_timeout(1500)
        page.screenshot(path=str(out / f"{name}_full.png"), full_page=False)
        page.set_viewport_size(size)
        page.wait_for_timeout(500)


def _scroll_to(page, text: str) -> None:
    """Scroll the page so that the first element with ``text`` is at the top of the viewport."""
    page.get_by_text(text, exact=True).first.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(600)


def _wait_cards(page, timeout_s: float = 120) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if page.locator("text=Why it is here").count():
            return
        page.wait_for_timeout(300)
    raise RuntimeError("no result card appeared")


def shoot(out: Path, sizes: list[tuple[int, int]], demo: int, prefix: str) -> None:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, streamlit_app(Path(tmp)) as (url, runs_dir), sync_playwright() as p:
        browser = chromium(p)
        for w, h in sizes:
            tag = f"{prefix}{w}x{h}"
            page = browser.new_page(viewport={"width": w, "height": h})
            page.goto(url)
            page.get_by_label("Your literature-search question").wait_for(timeout=60_000)
            _settle(page)
            _shoot(page, out, f"{tag}_00_search_empty", full=False)
            page.locator("[data-testid='stButton'] button").nth(demo).click()
            _wait_cards(page)
            _settle(page, 2500)
            _shoot(page, out, f"{tag}_01_search_results")
            _scroll_to(page, "Results")
            _shoot(page, out, f"{tag}_01b_search_cards", full=False)
            page.get_by_text("Crase Explorer", exact=True).first.evaluate("e => e.scrollIntoView()")
            for i, name in enumerate(PAGES, start=2):
                page.get_by_role("link", name=name).click()
                page.wait_for_timeout(800)
                _settle(page, 3000 if name == "Evidence graph" else 1500)
                _shoot(page, out, f"{tag}_{i:02d}_{name.lower().replace(' ', '_')}")
            page.close()
        # the HTML export of the saved run, from disk (file://, no server)
        saved = sorted(q for q in runs_dir.glob("*.json") if not q.name.endswith(".meta.json"))
        if saved:
            from crase_core import trace as trace_io
            from crase_core.views.html_export import to_html

            html_file = out / f"{prefix}export.html"
            html_file.write_text(to_html(trace_io.load(saved[0])), encoding="utf-8")
            for w, h in sizes:
                page = browser.new_page(viewport={"width": w, "height": h})
                page.goto(html_file.as_uri())
                page.wait_for_timeout(2500)
                _shoot(page, out, f"{prefix}{w}x{h}_09_export")
                page.close()
        browser.close()


def shoot_endpoint_down(out: Path, prefix: str) -> None:
    """A search with the offline backend, then the same question against an endpoint nobody listens on."""
    import os
    import socket

    from playwright.sync_api import sync_playwright

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # closed again: nobody listens there
    with tempfile.TemporaryDirectory() as tmp:
        settings = Path(tmp) / "settings.toml"
        settings.write_text(f"[llm]\nbase_url = \"http://127.0.0.1:{dead}/v1\"\nmodel = \"qwen\"\n")
        os.environ["CRASE_SETTINGS"] = str(settings)
        try:
            with streamlit_app(Path(tmp)) as (url, _runs), sync_playwright() as p:
                browser = chromium(p)
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                page.goto(url)
                page.get_by_label("Your literature-search question").wait_for(timeout=60_000)
                page.locator("[data-testid='stButton'] button").first.click()
                _wait_cards(page)
                _settle(page)
                settings_toggle = page.locator("[data-testid='stExpander'] summary", has_text="Run settings").first
                settings_toggle.click()
                page.wait_for_timeout(500)
                page.get_by_role("combobox", name="Model backend").click()
                page.get_by_role("option", name="OpenAI-compatible endpoint").click()
                page.wait_for_timeout(1000)
                page.get_by_role("button", name="Search").first.click()
                page.wait_for_timeout(8000)
                _settle(page)
                settings_toggle.click()  # fold it again
                page.wait_for_timeout(800)
                _shoot(page, out, f"{prefix}1440x900_10_endpoint_down")
                browser.close()
        finally:
            os.environ.pop("CRASE_SETTINGS", None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "artifacts" / "screenshots" / "pages"))
    ap.add_argument("--sizes", default="1440x900,1920x1080")
    ap.add_argument("--demo", type=int, default=0, help="which demo button to click (0 = the first)")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--only", choices=("pages", "endpoint", "both"), default="both")
    args = ap.parse_args()
    sizes = [(int(a), int(b)) for a, b in (s.split("x") for s in args.sizes.split(","))]
    out = Path(args.out)
    if args.only in ("pages", "both"):
        shoot(out, sizes, args.demo, args.prefix)
    if args.only in ("endpoint", "both"):
        shoot_endpoint_down(out, args.prefix)


if __name__ == "__main__":
    main()
