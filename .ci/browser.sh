#!/usr/bin/env bash
# Browser end-to-end prerequisites: Debian's chromium + Playwright for Python (no `playwright install`).
# Then: CRASE_REQUIRE_BROWSER=1 .venv/bin/pytest tests/e2e  (screenshots: artifacts/screenshots)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q chromium
fi
PY="${PYTHON:-.venv/bin/python}"
"$PY" -c "import playwright" 2>/dev/null || "$PY" -m pip install -q "playwright>=1.40"
chromium --version
"$PY" -c "import playwright, importlib.metadata as m; print('playwright', m.version('playwright'))"
