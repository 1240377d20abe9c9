"""Benchmark: the evaluation reports written by `crase eval` or benchmarks/eval_dev.py.

Reports are only ever read from the allowed roots: the project's ``benchmarks/results``, the operator's
``storage.eval_dir`` and the runs folder. The visitor picks one from a list (no path is typed); the scan
is bounded (depth, entries, reports) and follows no link that leads out of its root. The page opens on
the retrieval comparison of the dev benchmarks, and shows every table as a table (no raw Markdown or
Python values).
"""

from __future__ import annotations

import datetime as dt
import html
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from crase_app.display import md_escape
from crase_app.shared import code, guarded, page_header, run_store
from crase_core.config import load_settings

ROOT = Path(__file__).resolve().parents[1]
PROJECT_RESULTS = ROOT / "benchmarks" / "results"
MAX_DEPTH = 4  # report.md at most this many folders below a root
MAX_ENTRIES = 5000  # directory entries looked at per root
MAX_REPORTS = 200
MAX_REPORT_BYTES = 2 << 20
MAX_IMAGE_BYTES = 16 << 20
IMAGE_LINE = re.compile(r"^!\[[^\]]*\]\(([A-Za-z0-9_.\-]+\.png)\)\s*$")
KIND_ORDER = {"comparison": 0, "ablation": 1, "scorer": 2, "method": 3}
KIND_LABEL = {"comparison": "Retrieval comparison", "ablation": "Ablation", "scorer": "Entailment scorers",
              "method": "Single method"}


@dataclass(frozen=True)
class Report:
    root_label: str
    root: Path
    path: Path  # resolved, inside root
    kind: str

    @property
    def rel(self) -> str:
        return str(self.path.parent.relative_to(self.root)) if self.path.parent != self.root else "."

    @property
    def label(self) -> str:
        return f"{KIND_LABEL[self.kind]} — {self.rel} ({self.root_label})"


def allowed_roots() -> list[tuple[str, Path]]:
    """(label, resolved folder) of every root reports may come from; missing folders are left out."""
    roots: list[tuple[str, Path]] = [("project results", PROJECT_RESULTS)]
    settings = guarded(load_settings, "The server's settings are invalid")
    if settings is not None and settings.storage.eval_dir:
        roots.append(("your eval folder", Path(settings.storage.eval_dir)))
    store = guarded(run_store, "The runs folder cannot be used")
    if store is not None:
        roots.append(("your runs folder", store.directory))
    out: list[tuple[str, Path]] = []
    for label, folder in roots:
        try:
            resolved = folder.resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        if resolved.is_dir() and all(resolved != r for _, r in out):
            out.append((label, resolved))
    return out


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _kind(report: Path, root: Path) -> str:
    folder = report.parent
    rel = folder.relative_to(root).parts if folder != root else ()
    if "ablations" in rel:
        return "ablation"
    if "scifact" in folder.name.lower():
        return "scorer"
    try:
        has_methods = any((sub / "report.md").is_file() for sub in folder.iterdir() if sub.is_dir())
    except OSError:
        has_methods = False
    return "comparison" if has_methods else "method"


def find_reports(label: str, root: Path) -> tuple[list[Report], bool]:
    """Every ``report.md`` under ``root`` (breadth first, bounded); True when the scan stopped early.

    Links are followed only when they resolve inside ``root``; anything else that is not a plain folder
    or regular file is skipped.
    """
    found: list[Report] = []
    queue: list[tuple[Path, int]] = [(root, 0)]
    seen: set[Path] = {root}
    entries = 0
    while queue:
        folder, depth = queue.pop(0)
        try:
            with os.scandir(folder) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for entry in items:
            entries += 1
            if entries > MAX_ENTRIES or len(found) >= MAX_REPORTS:
                return found, True
            path = Path(entry.path)
            if entry.is_symlink():
                try:
                    path = path.resolve(strict=True)
                except (OSError, RuntimeError):
                    continue
                if not _inside(path, root):
                    continue  # a link out of the allowed root is never followed
            try:
                mode = os.stat(path).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if depth < MAX_DEPTH and path not in seen:
                    seen.add(path)
                    queue.append((path, depth + 1))
            elif entry.name == "report.md" and stat.S_ISREG(mode):
                found.append(Report(label, root, path, _kind(path, root)))
    return found, False


def read_limited(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes (None if it is not one, or is larger than ``limit``); never blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st_ = os.fstat(f.fileno())
        if not stat.S_ISREG(st_.st_mode) or st_.st_size > limit:
            return None
        data = f.read(limit + 1)
    return data if len(data) <= limit else None


# --- rendering -------------------------------------------------------------------------------------------------
_PY_DICT = re.compile(r"\{((?:'[^'{}]*': [^,{}]+(?:, )?)+)\}")
_PAIR = re.compile(r"'([^'{}]*)': ([^,{}]+)")
_NUMBER = re.compile(r"^-?\d+(?:\.(\d+))?$")


def readable_text(text: str) -> str:
    """Report prose without raw Python values: ``{'NEI': 355, 'SUPPORT': 370}`` → ``NEI 355, SUPPORT 370``."""
    return _PY_DICT.sub(lambda m: ", ".join(f"{k} {v.strip()}" for k, v in _PAIR.findall(m.group(1))), text)


def _cells(line: str) -> list[str]:
    parts = re.split(r"(?<!\\)\|", line.strip())
    return [p.strip() for p in parts[1:-1]]


def _clean_cell(cell: str) -> tuple[str, bool]:
    bold = cell.startswith("**") and cell.endswith("**") and len(cell) > 4
    if bold:
        cell = cell[2:-2]
    cell = cell.replace("\\|", "|").replace("`", "")
    cell = re.sub(r"\\([\\*_\[\]()#+\-.!|<>`])", r"\1", cell)
    return html.unescape(cell), bold


@dataclass
class Table:
    frame: pd.DataFrame
    decimals: dict[str, int]
    bold: list[tuple[int, str]]


def parse_table(block: str) -> Table | None:
    """A Markdown table of the report as a DataFrame (numbers as numbers, best values remembered)."""
    lines = [ln for ln in block.splitlines() if ln.strip()]
    if len(lines) < 2 or not all(ln.lstrip().startswith("|") for ln in lines):
        return None
    if not re.fullmatch(r"\|?(\s*:?-+:?\s*\|)+\s*:?-*:?\s*\|?", lines[1].strip()):
        return None
    header = [_clean_cell(c)[0] for c in _cells(lines[0])]
    header = [h or f"column {i + 1}" for i, h in enumerate(header)]
    header = [h if header.count(h) == 1 else f"{h} ({i + 1})" for i, h in enumerate(header)]
    rows, bold = [], []
    for r, line in enumerate(lines[2:]):
        cells = _cells(line)
        cells += [""] * (len(header) - len(cells))
        row = []
        for col, cell in zip(header, cells[: len(header)], strict=True):
            text, is_bold = _clean_cell(cell)
            row.append(text)
            if is_bold:
                bold.append((r, col))
        rows.append(row)
    frame = pd.DataFrame(rows, columns=header)
    decimals: dict[str, int] = {}
    for col in header:
        values = [v for v in frame[col] if v not in ("", "–", "-")]
        matches = [_NUMBER.match(v) for v in values]
        if values and all(matches):
            decimals[col] = max(len(m.group(1) or "") for m in matches if m)
            frame[col] = pd.to_numeric(frame[col].where(frame[col].isin(values)), errors="coerce")
    return Table(frame, decimals, bold)


def show_table(table: Table, key: str) -> None:
    frame = table.frame
    first = frame.columns[0]
    config: dict[str, Any] = {first: st.column_config.TextColumn(first, pinned=True)}
    for col, d in table.decimals.items():
        config[col] = st.column_config.NumberColumn(col, format=f"%.{d}f" if d else "%d")
    styled = frame.style.format({c: (f"{{:.{d}f}}" if d else "{:.0f}") for c, d in table.decimals.items()},
                                na_rep="–")
    if table.bold:
        marks = pd.DataFrame("", index=frame.index, columns=frame.columns)
        for r, c in table.bold:
            marks.loc[r, c] = "font-weight: 700; background-color: #e8f1fb"
        styled = styled.apply(lambda _: marks, axis=None)
    height = min(36 * (len(frame) + 1) + 3, 600)
    st.dataframe(styled, hide_index=True, width="stretch", height=height, column_config=config, key=key)


def render_report(report: Report) -> None:
    data = read_limited(report.path, MAX_REPORT_BYTES)
    if data is None:
        st.error(f"{code(report.path.name)} is not a readable report (not a regular file, or over "
                 f"{MAX_REPORT_BYTES >> 20} MB).", icon=":material/error:")
        return
    text = data.decode("utf-8", errors="replace")
    images: list[Path] = []
    has_bold = False
    for i, block in enumerate(re.split(r"\n\s*\n", text)):
        lines = block.strip().splitlines()
        if not lines:
            continue
        matches = [IMAGE_LINE.match(line) for line in lines]
        if all(matches):
            images += [report.path.parent / m.group(1) for m in matches if m]
            continue
        table = parse_table(block)
        if table is not None:
            has_bold = has_bold or bool(table.bold)
            show_table(table, key=f"report_table_{i}")
        else:
            # our own generated Markdown (labels escaped when written), rendered without HTML; its
            # headings sit two levels below the page's own title
            text_block = re.sub(r"(?m)^(#{1,4}) ", lambda m: "#" * (len(m.group(1)) + 2) + " ", block.strip())
            st.markdown(readable_text(text_block), unsafe_allow_html=False)
    if has_bold:
        st.caption("Highlighted: the best value in each column.")
    shown = [(p, b) for p in images if _inside(p.resolve(), report.root)
             and (b := read_limited(p, MAX_IMAGE_BYTES)) is not None]
    for start in range(0, len(shown), 3):
        cols = st.columns(3)
        for col, (p, b) in zip(cols, shown[start:start + 3], strict=False):
            col.image(b, caption=p.name, width="stretch")


page_header("Benchmark", "Retrieval quality on the dev benchmarks (Recall@K pooled, MAP@K as in the Crase paper), "
            "the baselines on the same candidate pool, and the entailment scorer on SciFact. "
            "Regenerate with `benchmarks/eval_dev.py` or `crase eval`.")

roots = allowed_roots()
reports: list[Report] = []
truncated = []
for label, root in roots:
    found, stopped = find_reports(label, root)
    reports += found
    if stopped:
        truncated.append(label)
st.caption("Reports are read from " + "; ".join(f"{md_escape(label)}: {code(root)}" for label, root in roots)
           + ". Set `CRASE_EVAL_DIR` to add your own folder.")
if truncated:
    st.warning(f"Only the first {MAX_REPORTS} reports (or {MAX_ENTRIES:,} files) of "
               + ", ".join(md_escape(t) for t in truncated) + " were looked at.", icon=":material/warning:")
if not reports:
    st.info("No report.md in these folders yet. Run `crase eval BENCH.jsonl --out DIR` or `benchmarks/eval_dev.py`.")
    st.stop()

# the retrieval comparison of the dev benchmarks first, then ablations, scorers and single methods
root_rank = {root: i for i, (_, root) in enumerate(roots)}
reports.sort(key=lambda r: (KIND_ORDER[r.kind], "dev" not in r.path.parent.name, root_rank[r.root], r.rel))
labels = {r.label: r for r in reports}
choice = st.selectbox("Report", list(labels), index=0, key="bench_report")
report = labels[choice]
try:
    written = f" — written {dt.datetime.fromtimestamp(report.path.stat().st_mtime):%Y-%m-%d %H:%M}"
except OSError:
    written = ""
st.caption(f"{code(report.path.relative_to(report.root))} in {md_escape(report.root_label)}{written}")
render_report(report)
