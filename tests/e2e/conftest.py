"""Fixtures of the browser end-to-end tests (helpers: ``e2e_support``)."""

from __future__ import annotations

import pytest
from e2e_support import CHROMIUM, CHROMIUM_ARGS, SHOTS


@pytest.fixture(scope="module")
def chromium():
    """One headless chromium per test module (module scope: Playwright's sync API allows one running
    instance per process, and other modules, e.g. test_sessions.py, start their own)."""
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {SHOTS}")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
