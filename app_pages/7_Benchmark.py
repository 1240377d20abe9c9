"""Benchmark: how well the default finds the papers it should, read from the summary in each run's file.

A *result set* is a folder whose run folders each hold the run file ``run.json.gz`` that ``crase eval`` and
``benchmarks/eval_dev.py`` write (its summary: Recall@K, MAP@K, the job that made them), a single run folder,
an ablation folder (``ablation.json``: configuration → summary) or the entailment scorer's ``scifact.json``.
They are only ever read from the allowed roots: the project's ``benchmarks/results``, the operator's
``storage.eval_dir`` and the runs folder. The visitor picks one from a list (no path is typed); the scan is
bounded (depth, entries, sets) and follows no link that leads out of its root; every file is read with a size
limit (a run file also once decompressed) and every number is checked to be one.
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from crase_app.display import md_escape
from crase_app.shared import code, guarded, page_header, run_store
from crase_core.evaluation.run_file import RUN_FILE, RunFileError, read_run
from crase_core.settings.config import load_settings

ROOT = Path(__file__).resolve().parents[1]
PROJECT_RESULTS = ROOT / "benchmarks" / "results"
MAX_DEPTH = 4  # a summary at most this many folders below a root
MAX_ENTRIES = 5000  # directory entries looked at per root
MAX_SETS = 200
MAX_JSON_BYTES = 2 << 20
MAX_RUN_BYTES = 8 << 20  # a run file as stored (the project's are under 50 KB)
MAX_RUN_JSON_BYTES = 64 << 20  # and once decompressed
KS = (5, 10, 20, 30, 40, 50)
KIND_ORDER = {"comparison": 0, "ablation": 1, "scorer": 2, "run": 3}
KIND_LABEL = {"comparison": "Retrieval comparison", "ablation": "Ablation", "scorer": "Entailment scorer",
              "run": "Single run"}

#: the development sets shipped with the project, in a reader's words
BENCHES = {
    "hepth_refs_dev": (
        "Citation set: 150 hep-th papers of 2002–2003",
        "Each query is a paper's title; the papers it cites inside the corpus are the ones to find (19 on "
        "median). The paper itself and everything published after it are hidden while it is answered, so the "
        "search sees only what its authors could have read. It asks for a whole reference list, so a recall of "
        "a third in the top 50 is a good score."),
    "hepth_litsearch_dev": (
        "Literature questions: 70 questions in a researcher's words",
        "Long precise questions with one target paper (specific, broad), questions that avoid the target's own "
        "rare words (paraphrase), and short search-box queries with one to four papers a researcher would "
        "accept (short). A recall near 1 means the wanted paper is almost always on the first page."),
}
#: the runs a reader compares, and what each is
HEADLINE_RUNS = {
    "crase": "the default (what the app runs): search, citation graph, claim support, ranking",
    "bm25": "a plain text search (BM25) on the question alone",
    "dense": "nearest papers by sentence embedding (MiniLM), whole corpus",
    "paper": "the configuration of the Crase paper (--preset paper)",
    "seeds": "the seed papers alone, by their best search rank (no graph)",
    "ppr-unpruned": "a random walk on the unpruned citation graph",
    "citations": "the most-cited papers inside the graph",
    "recency": "the newest papers of the graph first",
}


@dataclass(frozen=True)
class ResultSet:
    root_label: str
    root: Path
    folder: Path  # resolved, inside root
    kind: str

    @property
    def rel(self) -> str:
        return str(self.folder.relative_to(self.root)) if self.folder != self.root else "."

    @property
    def label(self) -> str:
        return f"{KIND_LABEL[self.kind]} — {self.rel} ({self.root_label})"


# --- where result sets may come from ----------------------------------------------------------------------------
def allowed_roots() -> list[tuple[str, Path]]:
    """(label, resolved folder) of every root result sets may come from; missing folders are left out."""
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


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _is_run(folder: Path) -> bool:
    """A run folder: it holds a run file (the summary, with the per-query rows it summarises)."""
    return _regular(folder / RUN_FILE)


def _kind(folder: Path, subfolders: list[Path]) -> str | None:
    """What ``folder`` holds: run folders with summaries, one run, an ablation, the scorer's report — or None."""
    if _regular(folder / "scifact.json"):
        return "scorer"
    if _regular(folder / "ablation.json"):
        return "ablation"
    if any(_is_run(sub) for sub in subfolders):
        return "comparison"
    if _is_run(folder):
        return "run"
    return None


def _folders(folder: Path, root: Path) -> tuple[list[Path], int]:
    """The sub-folders of ``folder`` that stay inside ``root`` (links followed only when they do), and the
    number of entries looked at."""
    try:
        with os.scandir(folder) as it:
            items = sorted(it, key=lambda e: e.name)
    except OSError:
        return [], 0
    out = []
    for entry in items:
        path = Path(entry.path)
        if entry.is_symlink():
            try:
                path = path.resolve(strict=True)
            except (OSError, RuntimeError):
                continue
            if not _inside(path, root):
                continue  # a link out of the allowed root is never followed
        try:
            if stat.S_ISDIR(os.stat(path).st_mode):
                out.append(path)
        except OSError:
            continue
    return out, len(items)


def find_sets(label: str, root: Path) -> tuple[list[ResultSet], bool]:
    """Every result set under ``root`` (breadth first, bounded); True when the scan stopped early."""
    found: list[ResultSet] = []
    queue: list[tuple[Path, int]] = [(root, 0)]
    seen: set[Path] = {root}
    entries = 0
    while queue:
        folder, depth = queue.pop(0)
        subs, n = _folders(folder, root)
        entries += n
        if entries > MAX_ENTRIES or len(found) >= MAX_SETS:
            return found, True
        kind = _kind(folder, subs)
        if kind is not None:
            found.append(ResultSet(label, root, folder, kind))
            if kind != "comparison":
                continue
        for sub in subs:  # a comparison's own run folders are part of it, not sets of their own
            if depth < MAX_DEPTH and sub not in seen and not (kind == "comparison" and _is_run(sub)):
                seen.add(sub)
                queue.append((sub, depth + 1))
    return found, False


# --- reading ------------------------------------------------------------------------------------------------------
def read_json(path: Path) -> Any:
    """A regular file's JSON (None when it is not one, is over the size limit, or is not valid JSON); never
    blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_JSON_BYTES:
            return None
        data = f.read(MAX_JSON_BYTES + 1)
    try:
        return json.loads(data.decode("utf-8")) if len(data) <= MAX_JSON_BYTES else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def read_summary(folder: Path) -> Any:
    """The summary in the run file of ``folder`` (None when the file is not a readable run file within the
    size limits); never blocks on a FIFO."""
    try:
        return read_run(folder / RUN_FILE, max_file_bytes=MAX_RUN_BYTES, max_json_bytes=MAX_RUN_JSON_BYTES).summary
    except RunFileError:
        return None


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


@dataclass
class Run:
    name: str
    summary: dict[str, Any]

    def metric(self, key: str) -> float | None:
        return _number(self.summary.get(key))

    @property
    def job(self) -> dict[str, Any]:
        job = self.summary.get("job")
        return job if isinstance(job, dict) else {}


def load_runs(rs: ResultSet) -> list[Run]:
    """The runs of a result set, each from its own summary (a comparison's run folders, an ablation's
    configurations, or the one run); summaries with no Recall@K are left out."""
    if rs.kind == "ablation":
        data = read_json(rs.folder / "ablation.json")
        items = list(data.items()) if isinstance(data, dict) else []
    elif rs.kind == "run":
        items = [(rs.folder.name, read_summary(rs.folder))]
    else:
        subs, _ = _folders(rs.folder, rs.root)
        items = [(sub.name, read_summary(sub)) for sub in subs if _is_run(sub)]
    runs = [Run(str(name), s) for name, s in items if isinstance(s, dict) and _number(s.get("recall@5")) is not None]
    order = list(HEADLINE_RUNS)
    return sorted(runs, key=lambda r: (order.index(r.name) if r.name in order else len(order), r.name))


# --- drawing --------------------------------------------------------------------------------------------------------
def _fmt(x: float | None, d: int = 3) -> str:
    return "–" if x is None else f"{x:.{d}f}"


def metric_frame(runs: list[Run], what: dict[str, str] | None = None) -> pd.DataFrame:
    """One row a run: Recall@5/20/50, MAP@50 (the headline table also says what each run is; the others add
    Recall@10 and MAP@5)."""
    rows = []
    for r in runs:
        row: dict[str, Any] = {"run": r.name}
        if what is not None:
            row["what it is"] = what.get(r.name, "")
        for k in (5, 20, 50) if what is not None else (5, 10, 20, 50):
            row[f"Recall@{k}"] = r.metric(f"recall@{k}")
        for k in (50,) if what is not None else (5, 50):
            row[f"MAP@{k}"] = r.metric(f"map@{k}")
        row["queries"] = r.metric("queries")
        wall = r.metric("median_wall_s")
        row["s per query"] = wall
        rows.append(row)
    return pd.DataFrame(rows)


def show_frame(frame: pd.DataFrame, key: str) -> None:
    config: dict[str, Any] = {"run": st.column_config.TextColumn("run", pinned=True, width=120)}
    for col in frame.columns:
        if col.startswith(("Recall", "MAP")):
            config[col] = st.column_config.NumberColumn(col, format="%.3f", width=86)
    if "what it is" in frame.columns:
        config["what it is"] = st.column_config.TextColumn("what it is", width=420)
    if "differs from the default in" in frame.columns:
        config["differs from the default in"] = st.column_config.TextColumn(width="large")
    config["queries"] = st.column_config.NumberColumn("queries", format="%d", width=70)
    config["s per query"] = st.column_config.NumberColumn("s per query", format="%.2f", width=90,
                                                          help="Median time per query of that run, in seconds.")
    st.dataframe(frame, hide_index=True, width="stretch", height=min(35 * (len(frame) + 1) + 3, 560),
                 column_config=config, key=key)


def recall_chart(runs: list[Run]) -> alt.Chart:
    rows = [{"run": r.name, "K": k, "Recall@K": v} for r in runs for k in KS if (v := r.metric(f"recall@{k}")) is not None]
    return alt.Chart(pd.DataFrame(rows)).mark_line(point=True).encode(
        x=alt.X("K:Q", scale=alt.Scale(domain=[5, 50]), title="K (papers read from the top)"),
        y=alt.Y("Recall@K:Q", title="Recall@K"),
        color=alt.Color("run:N", sort=[r.name for r in runs], legend=alt.Legend(title=None, orient="right")),
        tooltip=["run", "K", alt.Tooltip("Recall@K:Q", format=".3f")],
    ).properties(height=300)


def differences(run: Run, default: Run | None) -> str:
    """The settings (and method, stage variant) in which ``run`` differs from the default, from their jobs."""
    if default is None:
        return ""
    a, b = default.job, run.job
    out = [f"method {b.get('method')}"] if b.get("method") != a.get("method") else []
    if b.get("variant") != a.get("variant") and b.get("variant"):
        out.append(f"stage {b.get('variant')}")
    sa, sb = a.get("settings"), b.get("settings")
    if isinstance(sa, dict) and isinstance(sb, dict):
        out += [f"{k} {sb.get(k)}" for k in sorted(set(sa) | set(sb)) if sa.get(k) != sb.get(k)]
    return ", ".join(str(x) for x in out) if out else "nothing (the same job)"


METRICS_HELP = ("**Recall@K**: of all the papers the queries should find, the share found in the top K of "
                "their lists (pooled over queries). **MAP@K**: mean average precision — how high up the found "
                "papers stand, 1 when every one of them leads the list. Higher is better for both.")


def render_comparison(rs: ResultSet, runs: list[Run]) -> None:
    bench = rs.folder.name
    default = next((r for r in runs if r.name == "crase"), None)
    title, about = BENCHES.get(bench, (bench, ""))
    st.subheader(title)
    queries = next((r.metric("queries") for r in runs if r.metric("queries")), None)
    if about:
        st.markdown(about)
    elif queries:
        st.markdown(f"{queries:.0f} queries from {code(rs.folder.name)}.")
    st.caption(METRICS_HELP)
    text = next((r for r in runs if r.name == "bm25"), None)
    if default is not None:
        cols = st.columns(4)
        for col, key, label in zip(cols, ("recall@5", "recall@20", "recall@50", "map@50"),
                                   ("Recall@5", "Recall@20", "Recall@50", "MAP@50"), strict=True):
            v, base = default.metric(key), text.metric(key) if text else None
            col.metric(f"default · {label}", _fmt(v),
                       delta=f"{v - base:+.3f} vs text search" if v is not None and base is not None else None,
                       help="The default configuration; the change is against BM25 on the question alone.")
    headline = [r for r in runs if r.name in HEADLINE_RUNS]
    if headline:
        st.markdown("**The default next to the baselines**")
        show_frame(metric_frame(headline, HEADLINE_RUNS), key=f"bench_headline_{bench}")
        st.altair_chart(recall_chart(headline), width="stretch")
    others = [r for r in runs if r.name not in HEADLINE_RUNS]
    if others:
        with st.expander(f"Every other run in this folder ({len(others)}: ablations and earlier defaults)"):
            frame = metric_frame(others)
            frame.insert(1, "differs from the default in", [differences(r, default) for r in others])
            show_frame(frame, key=f"bench_others_{bench}")
    st.caption("Numbers by query kind with 95% intervals, and each change against the default with its paired "
               "permutation p-value: docs/benchmarks.md (regenerate with `benchmarks/eval_dev.py`).")


def render_scorer(rs: ResultSet) -> None:
    data = read_json(rs.folder / "scifact.json")
    rows = [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []
    if not rows:
        st.warning("This scifact.json holds no scorer results.")
        return
    st.subheader("The edge scorer on SciFact")
    first = rows[0]
    labels = first.get("labels") if isinstance(first.get("labels"), dict) else {}
    n = _number(first.get("pairs"))
    parts = ", ".join(f"{md_escape(k)} {v}" for k, v in labels.items() if _number(v) is not None)
    st.markdown(f"{n:.0f} claim–abstract pairs ({parts}) from SciFact: does the scorer's support score reach θ "
                "exactly for the claims the abstract supports? A claim is scored against the whole abstract, or "
                "against the rationale sentences only." if n else "Claim–abstract pairs from SciFact.")
    table = []
    for d in rows:
        at, best = d.get("at_theta") or {}, d.get("best") or {}
        table.append({"scorer": str(d.get("scorer", "?")),
                      "cited side": "rationale sentences" if d.get("evidence_only") else "full abstract",
                      "θ": _number(at.get("theta")), "precision": _number(at.get("precision")),
                      "recall": _number(at.get("recall")), "F1": _number(at.get("f1")),
                      "best θ": _number(best.get("theta")), "best F1": _number(best.get("f1"))})
    st.dataframe(pd.DataFrame(table), hide_index=True, width="stretch", key="bench_scorer",
                 column_config={c: st.column_config.NumberColumn(c, format="%.3f")
                                for c in ("precision", "recall", "F1", "best F1")})


def render_set(rs: ResultSet) -> None:
    if rs.kind == "scorer":
        render_scorer(rs)
        return
    runs = load_runs(rs)
    if not runs:
        st.warning("No readable run file with Recall@K in this folder.", icon=":material/warning:")
        return
    if rs.kind == "comparison":
        render_comparison(rs, runs)
        return
    st.subheader(rs.folder.name if rs.kind == "run" else f"Ablation: {rs.folder.name}")
    st.caption(METRICS_HELP)
    show_frame(metric_frame(runs), key="bench_runs")
    if len(runs) > 1:
        st.altair_chart(recall_chart(runs), width="stretch")


page_header("Benchmark", "How well Crase finds the papers it should: its default configuration next to a plain "
            "text search and graph-only baselines, on development sets of hep-th questions, and its edge scorer "
            "on SciFact. Every number is read from the summary in a run's file.")

roots = allowed_roots()
sets: list[ResultSet] = []
truncated = []
for label, root in roots:
    found, stopped = find_sets(label, root)
    sets += found
    if stopped:
        truncated.append(label)
if truncated:
    st.warning(f"Only the first {MAX_SETS} result sets (or {MAX_ENTRIES:,} files) of "
               + ", ".join(md_escape(t) for t in truncated) + " were looked at.", icon=":material/warning:")
if not sets:
    st.info("No results in these folders yet. Run `crase eval BENCH.jsonl --out DIR` or `benchmarks/eval_dev.py`.")
    st.stop()
# the retrieval comparisons of the dev sets first, then ablations, the scorer and single runs
root_rank = {root: i for i, (_, root) in enumerate(roots)}
sets.sort(key=lambda r: (KIND_ORDER[r.kind], r.folder.name not in BENCHES, root_rank[r.root], r.rel))
labels = {r.label: r for r in sets}
choice = st.selectbox("Results", list(labels), index=0, key="bench_report")
chosen = labels[choice]
st.caption(f"{code(chosen.rel)} in {md_escape(chosen.root_label)} · read from "
           + "; ".join(f"{md_escape(label)}: {code(root)}" for label, root in roots)
           + " (set `CRASE_EVAL_DIR` to add your own folder)")
render_set(chosen)
