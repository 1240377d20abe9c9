"""Helpers of the browser end-to-end tests: a Streamlit app on 127.0.0.1 and a headless chromium.

Skips the module when chromium or Playwright is missing, unless ``CRASE_REQUIRE_BROWSER=1``
(CI), where that is a failure. Screenshots go to ``$CRASE_SCREENSHOT_DIR`` or
``artifacts/screenshots``.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the app side (crase_app/) is not part of the installed package
    sys.path.append(str(ROOT))
CHROMIUM = os.environ.get("CRASE_CHROMIUM", "/usr/bin/chromium")
REQUIRE = os.environ.get("CRASE_REQUIRE_BROWSER") == "1"
SHOTS = Path(os.environ.get("CRASE_SCREENSHOT_DIR", ROOT / "artifacts" / "screenshots"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def browser_missing() -> str | None:
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        return f"chromium not found at {CHROMIUM} (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright)"
    return None


def skip_without_browser() -> None:
    """Call at module level: skip (or, with CRASE_REQUIRE_BROWSER=1, fail) when no browser is available."""
    why = browser_missing()
    if why:
        if REQUIRE:
            pytest.fail(f"browser test required (CRASE_REQUIRE_BROWSER=1) but {why}", pytrace=False)
        pytest.skip(why, allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def streamlit_app(tmp: Path, corpus: Path | None = None, cache_dir: Path | None = None) -> Iterator[tuple[str, Path]]:
    """``streamlit run app.py`` on a free port (over ``corpus``, or the embedded default); yields (url, runs dir)."""
    port = _free_port()
    env = dict(os.environ, CRASE_CACHE_DIR=str(cache_dir or tmp / "cache"), CRASE_RUNS_DIR=str(tmp / "runs"),
               PYTHONUNBUFFERED="1")
    if corpus is not None:
        env["CRASE_CORPUS"] = str(corpus)
    else:
        env.pop("CRASE_CORPUS", None)
    log_path = tmp / "streamlit.log"
    log = open(log_path, "w")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.address", "127.0.0.1",
         "--server.port", str(port), "--server.headless", "true", "--server.fileWatcherType", "none",
         "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
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
            pytest.fail("streamlit did not start: " + log_path.read_text()[-2000:])
        if proc.poll() is not None:
            pytest.fail("streamlit exited: " + log_path.read_text()[-2000:])
        yield url, tmp / "runs"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def chromium(p: Any) -> Any:
    """Headless Debian chromium through Playwright (the flags the developers' guide gives)."""
    return p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


HEAT_MAP_JS = """el => {
  const svg = el.querySelector("svg"), s = svg.getBoundingClientRect();
  const box = e => { const r = e.getBoundingClientRect();
                     return [r.left - s.left, r.top - s.top, r.right - s.left, r.bottom - s.top]; };
  const legend = el.querySelector(".role-legend");
  return {
    svg: [0, 0, s.width, s.height],
    legend: legend ? box(legend) : null,
    legend_labels: [...el.querySelectorAll(".role-legend-label text")].map(t => t.textContent),
    legend_label_boxes: [...el.querySelectorAll(".role-legend-label text")].map(box),
    axis_label_boxes: [...el.querySelectorAll(".role-axis-label text")].map(box),
    cells: [...el.querySelectorAll(".layer_0_marks path")].map(box),
    values: [...el.querySelectorAll(".layer_2_marks text, .layer_3_marks text")].map(
      t => ({text: t.textContent, bold: !!t.closest(".layer_3_marks"), at: box(t)})),
  };
}"""


def heat_map(chart: Any) -> dict[str, Any]:
    """What an edge's heat map (a ``stVegaLiteChart`` locator; Vega draws it as SVG) shows, in the chart's
    pixels: its cells' boxes, their values row by row (``grid``, top to bottom, left to right, with whether each
    is bold), the colour legend's box, its labels and their boxes."""
    out = chart.evaluate(HEAT_MAP_JS)
    rows: dict[int, list[dict[str, Any]]] = {}
    for v in out["values"]:
        rows.setdefault(round((v["at"][1] + v["at"][3]) / 2), []).append(v)
    out["grid"] = [[(v["text"], v["bold"]) for v in sorted(r, key=lambda v: v["at"][0])] for _, r in sorted(rows.items())]
    return out


def shown_cell(x: float) -> str:
    """A matrix value as the app shows it: cut (not rounded) to 2 decimals, so a cell below θ never reads as θ."""
    return f"{math.floor(x * 100 + 1e-9) / 100:.2f}"


def choose_option(page: Any, box: Any, option: str, tries: int = 4) -> None:
    """Pick ``option`` in a Streamlit selectbox (``box``: a locator of the widget) the way a user does: click it
    open, click the option. The dropdown can miss the first click while an expander above it still animates, so
    the click is repeated (Escape between tries) until the option shows."""
    wanted = page.get_by_role("option", name=option, exact=True)
    for attempt in range(tries):
        box.get_by_role("combobox").first.click()
        try:
            wanted.wait_for(state="visible", timeout=5_000)
        except Exception:
            if attempt == tries - 1:
                raise
            page.keyboard.press("Escape")
            page.wait_for_timeout(500)
            continue
        wanted.click()
        return


def settled(page: Any, timeout: float = 60_000) -> None:
    """Wait until the page's script run has finished drawing: Streamlit keeps the previous run's elements on the
    page (``data-stale="true"``) until the new run replaces them, and shows its running icon meanwhile, so text
    read before then can mix the two runs."""
    page.wait_for_function(
        "() => !document.querySelector('[data-stale=\"true\"]')"
        " && !document.querySelector('[data-testid=\"stStatusWidgetRunningIcon\"]')",
        timeout=timeout)
