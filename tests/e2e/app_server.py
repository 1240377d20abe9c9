"""Helpers of the browser tests: a real ``streamlit run app.py`` on 127.0.0.1 and Debian's chromium.

:func:`browser_missing` says why a browser test cannot run (the caller skips, or fails when
``CRASE_REQUIRE_BROWSER=1``); :func:`app_server` starts the app over a corpus with its own cache and
runs folders and yields its URL; :func:`chromium` launches the headless browser.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CRASE_CHROMIUM", "/usr/bin/chromium")
REQUIRE = os.environ.get("CRASE_REQUIRE_BROWSER") == "1"
SHOTS = Path(os.environ.get("CRASE_SCREENSHOT_DIR", ROOT / "artifacts" / "screenshots"))


def browser_missing() -> str | None:
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        return f"chromium not found at {CHROMIUM} (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright)"
    return None


def skip_without_browser() -> None:
    """Module-level: skip (or fail under ``CRASE_REQUIRE_BROWSER=1``) when the browser is missing."""
    why = browser_missing()
    if why:
        if REQUIRE:
            pytest.fail(f"browser test required (CRASE_REQUIRE_BROWSER=1) but {why}", pytrace=False)
        pytest.skip(why, allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def app_server(tmp: Path, corpus: Path, **env: str) -> Iterator[str]:
    """``streamlit run app.py`` over ``corpus`` with caches in ``tmp/cache`` and runs in ``tmp/runs``."""
    port = _free_port()
    full_env = dict(os.environ, CRASE_CORPUS=str(corpus), CRASE_CACHE_DIR=str(tmp / "cache"),
                    CRASE_RUNS_DIR=str(tmp / "runs"), PYTHONUNBUFFERED="1", **env)
    log_path = tmp / "streamlit.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.address", "127.0.0.1",
             "--server.port", str(port), "--server.headless", "true", "--server.fileWatcherType", "none",
             "--browser.gatherUsageStats", "false"],
            cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.time() + 60
            while time.time() < deadline and proc.poll() is None:
                try:
                    with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                        if r.read().strip() == b"ok":
                            break
                except OSError:
                    time.sleep(0.3)
            else:
                pytest.fail("streamlit did not start: " + log_path.read_text()[-2000:])
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def chromium(p: Any) -> Any:
    """Headless Debian chromium through Playwright."""
    return p.chromium.launch(
        executable_path=CHROMIUM,
        args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync"],
    )
