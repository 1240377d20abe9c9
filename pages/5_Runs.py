"""Runs: every saved trace; reopen without recomputation, upload a trace, download exports."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages._display import md_escape
from pages._shared import downloads, guarded, open_trace, page_header, run_caption, run_store

page_header("Runs", "Every run is saved as its trace. Reopening a run shows its graph, matrices and scores "
            "exactly as computed — nothing is recomputed.")
store = run_store()
st.caption(f"Runs folder: `{md_escape(store.directory)}` (set CRASE_RUNS_DIR to change it)")

trace = st.session_state.get("trace")
if trace is not None:
    with st.container(border=True):
        st.markdown("**Open run**")
        run_caption(trace)
        downloads(trace, key="runs")

runs = guarded(store.list, "Could not list the saved runs") or []
st.markdown(f"#### Saved runs ({len(runs)})")
if runs:
    df = pd.DataFrame([{
        "created": r.created_at.replace("T", " ")[:19], "query": r.query, "results": r.counts.get("results"),
        "seeds kept": f"{r.counts.get('seeds_kept', 0)}/{r.counts.get('seeds', 0)}",
        "edges kept": f"{r.counts.get('edges_kept', 0):,}/{r.counts.get('edges', 0):,}",
        "source": r.source, "backend": r.backend, "size": f"{r.size_bytes / 1e6:.1f} MB", "name": r.name,
    } for r in runs])
    ev = st.dataframe(df, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
                      key="runs_table", column_config={"query": st.column_config.TextColumn(width="large")})
    rows = ev.selection.rows if ev is not None else []
    if rows:
        chosen = runs[rows[0]]
        c1, c2, _ = st.columns([1, 1, 4])
        if c1.button("Open this run", type="primary", width="stretch", icon=":material/folder_open:"):
            loaded = guarded(lambda: store.load(chosen.name), "Could not open the run")
            if loaded is not None:
                open_trace(loaded, chosen.name)
                st.success(f"Opened: {md_escape(loaded.query)}")
                st.rerun()
        if c2.button("Delete", width="stretch", icon=":material/delete:"):
            guarded(lambda: store.delete(chosen.name), "Could not delete the run")
            st.rerun()
else:
    st.caption("No saved runs yet: every query you run on the Search page is saved here.")

st.markdown("#### Upload a trace")
up = st.file_uploader("A Crase trace (JSON) exported from this app or the CLI", type=["json"], key="trace_upload")
if up is not None and st.session_state.get("_uploaded") != (up.name, up.size):
    result = guarded(lambda: store.import_bytes(up.getvalue()), "Could not open the uploaded trace")
    st.session_state["_uploaded"] = (up.name, up.size)
    if result is not None:
        name, loaded = result
        open_trace(loaded, name)
        st.success(f"Opened and saved: {md_escape(loaded.query)}")
        st.rerun()
