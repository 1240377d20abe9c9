"""Benchmark: the latest evaluation report written by `crase eval` or benchmarks/eval_dev.py."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import streamlit as st

from crase_core.config import load_settings
from pages._shared import guarded, page_header

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = Path(guarded(lambda: load_settings().storage.eval_dir, "The server's settings are invalid")
                   or ROOT / "benchmarks" / "results")
IMAGE_LINE = re.compile(r"^!\[[^\]]*\]\(([A-Za-z0-9_.\-]+\.png)\)\s*$")

page_header("Benchmark", "Retrieval quality on the dev benchmarks (Recall@K pooled, MAP@K as in the Crase paper), "
            "the baselines on the same candidate pool, and the entailment scorer on SciFact. "
            "Regenerate with `benchmarks/eval_dev.py` or `crase eval`.")

folder = Path(st.text_input("Results folder", str(DEFAULT_DIR)))
reports = sorted(folder.glob("**/report.md"), key=lambda p: p.stat().st_mtime, reverse=True) if folder.is_dir() else []
if not reports:
    st.info(f"No report.md under {folder}. Run `crase eval BENCH.jsonl --out DIR` or `benchmarks/eval_dev.py`.")
    st.stop()

# comparison reports (one folder per benchmark) first, then single-method reports
top = [p for p in reports if p.parent.parent == folder] or reports
labels = {str(p.relative_to(folder)): p for p in top + [p for p in reports if p not in top]}
choice = st.selectbox("Report", list(labels), index=0)
report = labels[choice]
st.caption(f"{report} — written {dt.datetime.fromtimestamp(report.stat().st_mtime):%Y-%m-%d %H:%M}")

# The report is our own generated Markdown (labels escaped when written); render it as Markdown
# without HTML, and show its PNGs with st.image instead of Markdown image links.
for line_block in report.read_text(encoding="utf-8").split("\n\n"):
    images = [IMAGE_LINE.match(line) for line in line_block.splitlines()]
    if images and all(images):
        for m in images:
            path = report.parent / m.group(1)
            if path.is_file():
                st.image(str(path), caption=m.group(1))
    elif line_block.strip():
        st.markdown(line_block, unsafe_allow_html=False)
