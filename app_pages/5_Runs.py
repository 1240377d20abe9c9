"""Runs: every saved trace; reopen without recomputation, upload a trace, download exports."""

from __future__ import annotations

import hashlib
from functools import partial

import pandas as pd
import streamlit as st

from crase_app.display import md_escape
from crase_app.shared import (
    code,
    current_trace,
    downloads,
    guarded,
    open_trace,
    page_header,
    run_caption,
    run_store,
    trace_notice,
    trace_problem,
)
from crase_core.runs import cycle_text
from crase_core.runs import lineage as run_lineage

MAX_LINEAGE_INDENT = 6  # deeper runs are listed at this depth, with their generation

page_header("Runs", "Every run is saved as its trace. Reopening a run shows its graph, matrices and scores "
            "exactly as computed — nothing is recomputed.")
store = guarded(run_store, "The runs folder cannot be used")
if store is None:
    st.stop()
st.caption(f"Runs folder: {code(store.directory)} (set CRASE_RUNS_DIR to change it)")

trace = st.session_state.get("trace")
if trace is not None and trace_problem(trace) is not None:
    current_trace()  # says why the open run cannot be shown
elif trace is not None:
    with st.container(border=True):
        st.markdown("**Open run**")
        trace_notice()
        run_caption(trace)
        downloads(trace, key="runs")

runs = guarded(store.list, "Could not list the saved runs") or []
readable = [r for r in runs if not r.error]
damaged = [r for r in runs if r.error]
st.markdown(f"#### Saved runs ({len(readable)})")
by_id = {r.run_id: r for r in readable}


def _when(r) -> str:
    return r.created_at.replace("T", " ")[:19]


def _parent(r) -> str:
    """Where a re-ranked run comes from: its parent's time and id (or that the parent is no longer saved)."""
    if not r.parent_run_id:
        return ""
    parent = by_id.get(r.parent_run_id)
    return (f"{_when(parent)} · {r.parent_run_id[:10]}" if parent is not None
            else f"{r.parent_run_id[:10]} (not saved here)") + f" + {r.verdicts_applied} verdict(s)"


if readable:
    df = pd.DataFrame([{
        "created": _when(r), "query": r.query, "results": r.counts.get("results"),
        "seeds kept": f"{r.counts.get('seeds_kept', 0)}/{r.counts.get('seeds', 0)}",
        "edges kept": f"{r.counts.get('edges_kept', 0):,}/{r.counts.get('edges', 0):,}",
        "re-ranked from": _parent(r),
        "source": r.source, "backend": r.backend, "size": f"{r.size_bytes / 1e6:.1f} MB", "name": r.name,
    } for r in readable])
    ev = st.dataframe(df, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
                      key="runs_table", column_config={"query": st.column_config.TextColumn(width="large")})
    rows = ev.selection.rows if ev is not None else []
    if rows and rows[0] < len(readable):
        chosen = readable[rows[0]]
        c1, c2, _ = st.columns([1, 1, 4])
        if c1.button("Open this run", type="primary", width="stretch", icon=":material/folder_open:"):
            loaded = guarded(partial(store.load, chosen.name), "Could not open the run")
            if loaded is not None and open_trace(loaded, chosen.name, identified=True):
                st.rerun()
        if c2.button("Delete", width="stretch", icon=":material/delete:"):
            guarded(partial(store.delete, chosen.name), "Could not delete the run")
            st.rerun()
else:
    st.caption("No saved runs yet: every query you run on the Search page is saved here.")


def lineage_lines(runs) -> list[str]:
    """The runs' lineage (:func:`crase_core.runs.lineage`: every run with re-ranked children, then its children …)
    as markdown lines; a loop of parents is said in words. Indentation stops at a few levels (a long chain of
    audits reads as generations, not as a list nested hundreds deep)."""
    lines: list[str] = []
    for row in run_lineage(runs):
        if row.cycle:
            lines.append(f"- ⚠ {md_escape(cycle_text(row))}")
            continue
        r = row.run
        if row.depth == 0:
            lines.append(f"- {md_escape(_when(r))} · run {code(r.run_id[:16])} · {md_escape(r.query)}" if r is not None
                         else f"- run {code(row.run_id[:16])} (no longer saved here)")
            continue
        assert r is not None
        generation = f"generation {row.depth} · " if row.depth > MAX_LINEAGE_INDENT else ""
        lines.append("  " * min(row.depth, MAX_LINEAGE_INDENT) + f"- → {generation}{md_escape(_when(r))} · run "
                     f"{code(r.run_id[:16])} · {r.verdicts_applied} verdict(s) applied · edges kept "
                     f"{r.counts.get('edges_kept', 0):,}/{r.counts.get('edges', 0):,}")
    return lines


lineage = lineage_lines(readable)
if lineage:
    st.markdown("#### Lineage", help="Runs re-ranked from another run with auditors' verdicts (the Audit page's "
                "“apply my verdicts”, or `crase rerank`), under the run they came from.")
    st.markdown("\n".join(lineage))
if damaged:
    with st.expander(f"{len(damaged)} file(s) in the runs folder cannot be read", expanded=False,
                     icon=":material/warning:"):
        for r in damaged:
            st.markdown(f"- {code(r.path.name)}: {md_escape(r.error)}")

st.markdown("#### Upload a trace")
up = st.file_uploader("A Crase trace (JSON) exported from this app or the CLI", type=["json"], key="trace_upload")
if up is not None:
    data = up.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    if st.session_state.get("_uploaded") != digest:  # each upload is handled once, not on every rerun
        st.session_state["_uploaded"] = digest
        result = guarded(partial(store.import_bytes, data), "Could not open the uploaded trace")
        if result is not None:
            note = ("This trace was already saved: the saved run is reopened (nothing was overwritten)."
                    if result.existed else "Uploaded and saved as a new run (no saved run was changed).")
            if open_trace(result.trace, result.name, notice=note, identified=True):
                st.rerun()
