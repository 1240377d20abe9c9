"""Evidence graph: the pruned citation graph, clickable, with the edge/node inspector below it.

The graph takes the full width and most of the window's height. Layouts: a timeline
(x = year, y = score), clusters by sub-query, and a focus view of one paper. The
default view (the 20 best papers and their trails, timeline) stays readable for a
700-node run; the rest is one control away.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from crase_app.display import shorten_words, tex_plain
from crase_app.graph_view import (
    DEFAULT_TOP_K,
    LAYOUT_LABELS,
    LAYOUTS,
    VIEW_MODES,
    component_args,
    edge_id,
    edge_scorer,
    node_labels,
)
from crase_app.shared import (
    graph_component,
    guarded,
    inspector,
    trace_page,
)
from crase_core.views.graph_views import communities

trace = trace_page("Evidence graph", "Hover a paper or an edge for its full text; click it to inspect it below "
                   "(claims, score matrix, Δ, decision). Double-click a paper to focus on it.")


@st.cache_data(max_entries=4, show_spinner="Finding the clusters…")
def _communities(_trace, run_id: str):
    return communities(_trace)


@st.cache_data(max_entries=16, show_spinner="Laying out the graph…")
def _network(_trace, run_id: str, layout: str, mode: str, show_pruned: bool, top_k: int, years: tuple[int, int] | None,
             min_score: float, subqueries: tuple[int, ...] | None, focus: str | None) -> dict:
    groups = _communities(_trace, run_id) if layout == "clusters" else None
    return component_args(_trace, layout, mode, focus=focus if layout == "focus" else None, show_pruned=show_pruned,
                          top_k=top_k, years=years, min_score=min_score, subqueries=subqueries, groups=groups)


# ---- selection: the graph component and the edge table both write st.session_state["selected"] ----
clicked = st.session_state.get("graph_click")
if clicked and clicked.get("nonce") != st.session_state.get("_graph_nonce"):
    st.session_state["_graph_nonce"] = clicked.get("nonce")
    if clicked.get("kind") == "edge":
        st.session_state["selected"] = {"kind": "edge", "citing": clicked["citing"], "cited": clicked["cited"]}
    elif clicked.get("kind") == "node":
        st.session_state["selected"] = {"kind": "node", "id": clicked["id"]}
        if clicked.get("focus"):
            st.session_state["g_layout"] = "focus"
            st.session_state["g_focus"] = clicked["id"]

# ---- controls: layout, which papers, filters (in a popover) ----
n_results = len(trace.results)
# every paper can be the focus: ranked ones first (by rank), then the rest
ranked_first = [n.paper.id for n in sorted(trace.nodes, key=lambda n: (n.rank is None, n.rank or 0, n.paper.id))]
all_labels = node_labels(trace, [n.paper.id for n in trace.nodes])
sel = st.session_state.get("selected")
if "g_focus" not in st.session_state or st.session_state["g_focus"] not in all_labels:
    st.session_state["g_focus"] = (sel["id"] if sel and sel.get("kind") == "node" and sel["id"] in all_labels
                                   else (ranked_first[0] if ranked_first else None))
st.session_state.setdefault("g_layout", "timeline")
# one row of controls at their own widths, wrapping on a narrow window (nothing cut)
controls = st.container(horizontal=True, vertical_alignment="bottom", gap="small", wrap=True, key="graph_controls")
c1 = c2 = c3 = c4 = c5 = controls
layout = c1.segmented_control("Layout", LAYOUTS, format_func=lambda x: LAYOUT_LABELS.get(x, x), key="g_layout",
                              required=True, help="Timeline: x = publication year, y = score. Clusters: papers "
                              "grouped by the sub-query that brought them in. Focus: one paper, its evidence trail "
                              "to its seed and its direct citations.", width="content") or "timeline"
focus: str | None = None
mode = VIEW_MODES[0]
top_k = min(DEFAULT_TOP_K, max(1, n_results))
if layout == "focus":
    focus = c2.selectbox("Focus on", ranked_first, key="g_focus", width=420,
                         format_func=lambda p: f"{all_labels[p]} — {shorten_words(tex_plain(trace.node(p).paper.title), 60)}")
else:
    mode_labels = {"top-k and trails": "Top k and their trails", "kept graph": "Whole kept graph",
                   "everything": "Everything (incl. pruned papers)"}
    mode = c2.selectbox("Papers", list(VIEW_MODES), index=0, key="g_mode", width=220,
                        format_func=lambda m: mode_labels.get(m, m)) or VIEW_MODES[0]
    if mode == "top-k and trails" and n_results > 1:
        top_k = c3.slider("k (top papers)", 1, n_results, min(DEFAULT_TOP_K, n_results), key="g_k", width=150,
                          help="How many top-ranked papers to show, with the papers on their evidence trails.")
years_all = sorted({n.paper.year for n in trace.nodes if n.paper.year})
n_pruned = sum(not e.kept for e in trace.edges)
# a plain session key holds the choice (a widget's own state is dropped on pages that do not draw it)
st.session_state["g_pruned"] = bool(st.session_state.get("show_pruned", False))
show_pruned = c5.toggle(f"Show pruned ({n_pruned:,})", key="g_pruned", width="content",
                        on_change=lambda: st.session_state.update(show_pruned=st.session_state["g_pruned"]),
                        help=f"{n_pruned:,} of the run's {len(trace.edges):,} edges were pruned (Δ ≤ τ); shown, they "
                        "are drawn dashed. The choice holds on every page and for every run of this session.")
with c4.popover("Filters", icon=":material/tune:", width="content"):
    max_score = max((n.score for n in trace.nodes), default=0.0)
    min_score = st.slider("Minimum score", 0.0, float(max_score) if max_score > 0 else 1.0, 0.0,
                          step=(max_score / 100) if max_score > 0 else 0.01, format="%.4f", key="g_minscore",
                          disabled=layout == "focus")
    years = None
    if len(years_all) >= 2:
        years = st.slider("Publication year", years_all[0], years_all[-1], (years_all[0], years_all[-1]), key="g_years",
                          disabled=layout == "focus")
    sq_labels = {i: f"{i + 1}. {sq}" for i, sq in enumerate(trace.plan.subqueries)}
    chosen_sq = st.multiselect("Sub-queries", list(sq_labels), format_func=lambda i: sq_labels.get(i, str(i)), key="g_sq",
                               placeholder="all sub-queries", disabled=layout == "focus",
                               help="Only seeds from these sub-queries and the papers whose trail starts at them.")

years_key: tuple[int, int] | None = (int(years[0]), int(years[1])) if years and (years[0] != years_all[0] or years[1] != years_all[-1]) else None
sq_key = tuple(chosen_sq) if chosen_sq else None
result = guarded(lambda: _network(trace, trace.run_id, layout, mode, show_pruned, int(top_k), years_key,
                                  float(min_score), sq_key, focus), "Could not build the graph view")
if result is None:
    st.stop()
sel_arg = None
if sel and sel.get("kind") == "edge":
    sel_arg = {"kind": "edge", "id": f"{sel['citing']}->{sel['cited']}"}
elif sel and sel.get("kind") == "node":
    sel_arg = {"kind": "node", "id": sel["id"]}

hidden = result["hidden"]
st.caption(f"{result['n_nodes']:,} papers · {len(result['edges']):,} edges shown"
           + (f" (of {len(trace.nodes):,} papers in the run)" if result["n_nodes"] < len(trace.nodes) else "")
           + (f" · {hidden:,} pruned edge{'' if hidden == 1 else 's'} hidden" if hidden and not show_pruned else "")
           + (f" · {result['note']}" if result["note"] else "")
           + " · labels show the top-ranked papers where they fit; hover any paper for its title")
graph_component(**{k: result[k] for k in ("nodes", "edges", "axis", "captions", "legend", "layout", "hint")},
                selected=sel_arg,
                key_data=f"{trace.run_id}|{layout}|{mode}|{show_pruned}|{top_k}|{years_key}|{min_score}|{sq_key}|{focus}",
                key="graph_click", default=None)

# ---- second way in: the edge table (same edges as the graph); key columns pinned on the left ----
by_id = {d["id"] for d in result["edges"]}
edges = [e for e in trace.edges if edge_id(e) in by_id]
labels = all_labels  # the graph's labels: unique over the whole run
with st.expander(f"Edges in view ({len(edges):,}) — select a row to inspect it", expanded=False):
    has_scorer = any(edge_scorer(e) for e in edges)
    df = pd.DataFrame([{
        "Δ": round(e.delta, 3), "weight": round(e.weight, 4), "decision": "kept" if e.kept else "pruned",
        **({"scorer": edge_scorer(e) or ""} if has_scorer else {}),
        "threshold": "{} = {:g}".format(*trace.threshold(e)),
        "supported": f"{sum(e.supported)} of {len(e.supported)}",
        "citing": labels.get(e.citing, e.citing), "cited": labels.get(e.cited, e.cited),
        "citing title": tex_plain(trace.node(e.citing).paper.title),
        "cited title": tex_plain(trace.node(e.cited).paper.title),
    } for e in edges])
    event = st.dataframe(
        df, hide_index=True, width="stretch", height=min(36 * len(edges) + 40, 380), on_select="rerun",
        selection_mode="single-row", key="edge_table",
        column_config={
            "Δ": st.column_config.ProgressColumn("Δ", min_value=0.0, max_value=1.0, format="%.2f", width="small",
                                                 pinned=True),
            "weight": st.column_config.NumberColumn("weight", format="%.4f", width="small", pinned=True),
            "decision": st.column_config.TextColumn("decision", width="small", pinned=True),
            "threshold": st.column_config.TextColumn(
                "threshold", width="small", help="The one θ the edge was read at (its ✓ claims and Δ): θ for an edge "
                "a model scored, θ_lexical for one the offline word-overlap scorer decided (0 = every claim counts, "
                "Δ = 1)."),
            "supported": st.column_config.TextColumn(
                "supported", width="small", help="Citing claims supported at the edge's threshold: Δ is their "
                "share."),
            "citing": st.column_config.TextColumn("citing", width="medium"),
            "cited": st.column_config.TextColumn("cited", width="medium"),
            "citing title": st.column_config.TextColumn("citing title", width="large"),
            "cited title": st.column_config.TextColumn("cited title", width="large"),
        })
    rows = event.selection.rows if event is not None else []
    picked = edge_id(edges[rows[0]]) if rows and rows[0] < len(edges) else None
    if picked and picked != st.session_state.get("_table_pick"):
        st.session_state["_table_pick"] = picked
        u, v = picked.split("->", 1)
        st.session_state["selected"] = {"kind": "edge", "citing": u, "cited": v}
        st.rerun()
    elif not picked:
        st.session_state["_table_pick"] = None

with st.container(border=True, key="inspector"):
    inspector(trace, key="graph")
if st.session_state.pop("scroll_to_inspector", False):
    # "Inspect" on a result card: the inspector sits below a 630-pixel graph, so bring it into view (a constant
    # script, same origin as the page; it reads nothing and sends nothing)
    import streamlit.components.v1 as components

    components.html("<script>setTimeout(function () { var el = window.parent.document.querySelector("
                    "'.st-key-inspector'); if (el) { el.scrollIntoView({block: 'start'}); } }, 600);</script>",
                    height=0)
