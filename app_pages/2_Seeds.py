"""Seeds: the plan's sub-queries and, per sub-query, the seeds with their ranks and fate (paper Table 13)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from crase_app.display import md_escape, tex_plain
from crase_app.shared import trace_page
from crase_core.retrieval.proximity import WINDOW
from crase_core.retrieval.semantic import MODEL_NAME as SEMANTIC_MODEL

trace = trace_page("Seeds", "Stage 1: one search per sub-query; a seed stands in the top t of both the relevance and the "
            "recency ranking (with question seeds on, the question's own top r by relevance join them). Stage 2 "
            "decides its fate: ✓ kept (some edge survives) or ✗ pruned (every edge has Δ ≤ τ).")

plan = trace.plan
kept = sum(1 for s in trace.seeds if s.fate == "kept")
pruned = sum(1 for s in trace.seeds if s.fate == "pruned")
cols = st.columns(5 if trace.library is not None else 4)
cols[0].metric("sub-queries", len(plan.subqueries))
cols[1].metric("seeds |S|", len(trace.seeds))
cols[2].metric("✓ kept", kept)
cols[3].metric("✗ pruned", pruned)
if trace.library is not None:
    cols[4].metric("from your library", sum(any(o.kind == "library" for o in s.origins) for s in trace.seeds),
                   help="Seeds that are papers you gave (ids or BibTeX); their fate is decided like any seed's.")
st.caption(f"Planner: {md_escape(plan.planner)}" + (" (cached)" if plan.cached else "")
           + (f" · notes: {md_escape('; '.join(plan.notes))}" if plan.notes else ""))
if plan.error:
    st.warning(f"The planner failed: {md_escape(plan.error)}")
proximity, window = trace.settings.proximity_weight, trace.settings.proximity_window_weight
if proximity > 0 or window > 0:
    st.caption(f"Relevance ranks are the search's scores re-ranked by term proximity (w = {proximity:g} for the "
               f"search's adjacent words in order, u = {window:g} for them within {WINDOW} words): a paper whose "
               "title or abstract keeps those words together rises.")
semantic, scope = trace.settings.semantic_feedback_weight, trace.settings.semantic_feedback_scope
if trace.semantic_feedback:
    where = {"all": "Every search takes in", "question": "The question's own search takes in",
             "fusion": "For the final ranking (not for the seeds or the walk's restart), the question's search "
                       "list takes in"}
    st.caption(f"{where.get(scope, 'The search takes in')} the papers whose embedding is nearest "
               f"to its top hit's (semantic feedback, w_s = {semantic:g}): a paper that reads like the best match "
               "rises even when it uses other words. " + md_escape(trace.semantic_note or SEMANTIC_MODEL))
elif semantic > 0:
    st.caption(md_escape(trace.semantic_note or "Semantic feedback is not available for this corpus") + ": the "
               "search ranks by its words.")
if trace.dense_question:
    uses = [f"{name} (w_q = {w:g})" for name, w in (
        ("the question's own seeds", trace.settings.dense_seed_weight),
        ("the walk's restart", trace.settings.dense_restart_weight),
        ("the final ranking's list", trace.settings.dense_fusion_weight)) if w > 0]
    st.caption("The question itself is embedded and the papers nearest it join " + ", ".join(uses) + ": a paper "
               "that means what the question asks rises even when it shares few of its words. "
               + md_escape(trace.dense_note[:1].upper() + trace.dense_note[1:]))

# widths (pixels) that fit the page at 1440 px: the title takes most (a typical title shows whole); a cell's
# full text shows on a double click
SEED_COLUMNS = {"fate": st.column_config.TextColumn("fate", width=40),
                "title": st.column_config.TextColumn("title", width=470),
                "year": st.column_config.NumberColumn("year", format="%d", width=50),
                "relevance rank": st.column_config.NumberColumn("relevance", width=72,
                                                                help="The seed's rank in this search by relevance"),
                "recency rank": st.column_config.NumberColumn("recency", width=64,
                                                              help="Its rank among the search's hits by recency"),
                "also from sub-queries": st.column_config.TextColumn("also from", width=72,
                                                                     help="Other searches that found it"),
                "reason": st.column_config.TextColumn("reason", width=140),
                "id": st.column_config.TextColumn("id", width=66)}
titles = {n.paper.id: n.paper for n in trace.nodes}
seeds = {s.paper_id: s for s in trace.seeds}
for sqr in trace.subquery_results:
    rows = []
    for pid in sqr.seed_ids:
        s = seeds.get(pid)
        origin = next((o for o in s.origins if o.subquery_index == sqr.index), None) if s else None
        p = titles.get(pid)
        rows.append({
            "fate": "✓" if s and s.fate == "kept" else "✗",
            "title": tex_plain(p.title) if p else pid,
            "year": p.year if p else None,
            "relevance rank": origin.relevance_rank if origin else None,
            "recency rank": origin.recency_rank if origin else None,
            "also from sub-queries": ", ".join("the question" if o.kind == "question" else str(o.subquery_index + 1)
                                               for o in s.origins
                                               if o.subquery_index != sqr.index and o.kind != "library")
            + (" · in your library" if any(o.kind == "library" for o in s.origins) else "") if s else "",
            "reason": s.fate_reason if s else "",
            "id": pid,
        })
    n_kept = sum(r["fate"] == "✓" for r in rows)
    if sqr.index >= len(plan.subqueries):  # the question's own search (query_seeds): not a sub-query of the plan
        st.markdown(f"#### The question itself “{md_escape(sqr.subquery)}”")
        st.caption(f"{len(sqr.hits)} search hits · its top {sqr.t} by relevance are seeds (question seeds) · "
                   f"{len(rows)} seeds: {n_kept} ✓ kept, {len(rows) - n_kept} ✗ pruned")
    else:
        st.markdown(f"#### ρ{sqr.index + 1} “{md_escape(sqr.subquery)}”")
        st.caption(f"{len(sqr.hits)} search hits · t = {sqr.t} · {len(rows)} seeds: {n_kept} ✓ kept, "
                   f"{len(rows) - n_kept} ✗ pruned")
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", column_config=SEED_COLUMNS)
    else:
        st.caption("This sub-query found no papers.")
library = trace.library
if library is not None:
    lib_seeds = [s for s in trace.seeds if any(o.kind == "library" for o in s.origins)]
    lib_kept = sum(s.fate == "kept" for s in lib_seeds)
    st.markdown("#### From your library")
    st.caption(f"{len(library.items):,} papers given · {len(library.found_ids):,} found in the source · "
               f"{len(lib_seeds)} seeds: {lib_kept} ✓ kept, {len(lib_seeds) - lib_kept} ✗ pruned"
               + (f" · at most {library.max_seeds} seed a run" if len(library.found_ids) > library.max_seeds else ""))
    lib_rows = []
    for item in library.items:
        s = seeds.get(item.paper_id) if item.paper_id else None
        p = titles.get(item.paper_id) if item.paper_id else None
        lib_rows.append({
            "fate": ("✓" if s.fate == "kept" else "✗") if s else "–",
            "given": item.given,
            "from": item.label,
            "title": tex_plain(p.title) if p else ("not in this source" if item.paper_id is None else item.paper_id),
            "year": p.year if p else None,
            "also from sub-queries": ", ".join("the question" if o.kind == "question" else str(o.subquery_index + 1)
                                               for o in s.origins if o.kind != "library") if s else "",
            "reason": s.fate_reason if s else ("not in this source" if item.paper_id is None else "not a seed"),
            "id": item.paper_id or "",
        })
    st.dataframe(pd.DataFrame(lib_rows), hide_index=True, width="stretch",
                 column_config={**SEED_COLUMNS, "given": st.column_config.TextColumn("given", width=110),
                                "from": st.column_config.TextColumn("from", width=90)})
st.markdown(f"**Summary:** {kept} seeds retained (✓), {pruned} pruned (✗)"
            + (" — pruned seeds had no citation edge with claim-level support." if pruned else "."))
