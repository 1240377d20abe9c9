"""Evidence graph: the pruned citation graph, clickable, with the edge/node inspector."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages._graph_view import (
    VIEW_MODES,
    edge_id,
    graph_view,
    layout_positions,
    seed_subqueries,
    vis_network_data,
)
from pages._shared import (
    graph_component,
    guarded,
    inspector,
    legend,
    trace_page,
)

trace = trace_page("Evidence graph", "Click an edge to see both papers' claims, the entailment matrix, Δ and the prune "
            "decision; click a paper for its claims, seed fate and score.")


@st.cache_data(max_entries=16, show_spinner="Laying out the graph…")
def _network(_trace, run_id: str, mode: str, show_pruned: bool, top_k: int, years: tuple[int, int] | None, min_score: float,
             subqueries: tuple[int, ...] | None) -> tuple[dict, str, int, int]:
    tr = _trace
    view = graph_view(tr, mode, show_pruned=show_pruned, top_k=top_k, years=years, min_score=min_score,
                      subqueries=subqueries)
    pos = layout_positions(view.nodes, view.edges)
    return vis_network_data(tr, view, pos), view.note, view.hidden_pruned_edges, len(view.nodes)


# ---- selection: the graph component and the edge table both write st.session_state["selected"] ----
clicked = st.session_state.get("graph_click")
if clicked and clicked.get("nonce") != st.session_state.get("_graph_nonce"):
    st.session_state["_graph_nonce"] = clicked.get("nonce")
    if clicked.get("kind") == "edge":
        st.session_state["selected"] = {"kind": "edge", "citing": clicked["citing"], "cited": clicked["cited"]}
    elif clicked.get("kind") == "node":
        st.session_state["selected"] = {"kind": "node", "id": clicked["id"]}

# ---- filters ----
years_all = sorted({n.paper.year for n in trace.nodes if n.paper.year})
with st.container(border=True):
    f1, f2, f3, f4 = st.columns([1.3, 1.1, 1.6, 1.2])
    mode = f1.radio("Show", VIEW_MODES, index=0, key="g_mode",
                    format_func={"top-k and trails": "Top k and their trails", "kept graph": "Whole kept graph",
                                 "everything": "Everything (incl. pruned papers)"}.get, horizontal=False)
    top_k = f1.slider("k", 1, max(1, len(trace.results)), max(1, len(trace.results)), key="g_k",
                      disabled=mode != "top-k and trails", help="How many top-ranked papers (with their trails).")
    show_pruned = f2.toggle("Show pruned edges", value=False, key="g_pruned",
                            help="Pruned edges (Δ ≤ τ) are drawn dashed.")
    max_score = max((n.score for n in trace.nodes), default=0.0)
    min_score = f2.slider("Minimum score", 0.0, float(max_score) if max_score > 0 else 1.0, 0.0,
                          step=(max_score / 100) if max_score > 0 else 0.01, format="%.4f", key="g_minscore")
    if len(years_all) >= 2:
        years = f3.slider("Publication year", years_all[0], years_all[-1], (years_all[0], years_all[-1]), key="g_years")
    else:
        years = None
    sq_labels = {i: f"{i + 1}. {sq}" for i, sq in enumerate(trace.plan.subqueries)}
    chosen_sq = f3.multiselect("Sub-queries", list(sq_labels), format_func=sq_labels.get, key="g_sq",
                               placeholder="all sub-queries",
                               help="Only seeds from these sub-queries and the papers whose trail starts at them.")
    f4.markdown("**Legend**")
    with f4:
        legend()

years_key = tuple(years) if years and (years[0] != years_all[0] or years[1] != years_all[-1]) else None
result = guarded(lambda: _network(trace, trace.run_id, mode, show_pruned, int(top_k), years_key, float(min_score),
                                  tuple(chosen_sq) if chosen_sq else None), "Could not build the graph view")
if result is None:
    st.stop()
data, note, hidden, n_nodes = result
sel = st.session_state.get("selected")
sel_arg = None
if sel and sel.get("kind") == "edge":
    sel_arg = {"kind": "edge", "id": f"{sel['citing']}->{sel['cited']}"}
elif sel and sel.get("kind") == "node":
    sel_arg = {"kind": "node", "id": sel["id"]}

left, right = st.columns([1.45, 1], gap="large")
with left:
    st.caption(f"{n_nodes:,} papers · {len(data['edges']):,} edges shown"
               + (f" · {hidden:,} pruned edges hidden" if hidden and not show_pruned else "")
               + (f" · {note}" if note else ""))
    graph_component(nodes=data["nodes"], edges=data["edges"], height=600, physics=False, selected=sel_arg,
                    key_data=f"{trace.run_id}|{mode}|{show_pruned}|{top_k}|{years_key}|{min_score}|{chosen_sq}",
                    key="graph_click", default=None)
    # second way in: the edge table (same edges as the graph)
    titles = {n.paper.id: n.paper.title for n in trace.nodes}
    sq_of = seed_subqueries(trace)
    edges = [e for e in trace.edges if edge_id(e) in {d["id"] for d in data["edges"]}]
    df = pd.DataFrame([{
        "citing": e.citing, "citing title": titles[e.citing], "cited": e.cited, "cited title": titles[e.cited],
        "Δ": round(e.delta, 3), "weight": round(e.weight, 4), "kept": e.kept,
        "seed edge": e.citing in sq_of or e.cited in sq_of,
    } for e in edges])
    st.markdown("**Edges in view** — select a row to inspect it")
    event = st.dataframe(df, hide_index=True, width="stretch", height=300, on_select="rerun",
                         selection_mode="single-row", key="edge_table",
                         column_config={"Δ": st.column_config.ProgressColumn("Δ", min_value=0.0, max_value=1.0,
                                                                             format="%.2f")})
    rows = event.selection.rows if event is not None else []
    picked = f"{edges[rows[0]].citing}->{edges[rows[0]].cited}" if rows and rows[0] < len(edges) else None
    if picked and picked != st.session_state.get("_table_pick"):
        st.session_state["_table_pick"] = picked
        u, v = picked.split("->", 1)
        st.session_state["selected"] = {"kind": "edge", "citing": u, "cited": v}
        st.rerun()
    elif not picked:
        st.session_state["_table_pick"] = None

with right, st.container(border=True):
    inspector(trace, key="graph")
