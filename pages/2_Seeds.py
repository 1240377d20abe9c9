"""Seeds: the plan's sub-queries and, per sub-query, the seeds with their ranks and fate (paper Table 13)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages._display import md_escape
from pages._shared import trace_page

trace = trace_page("Seeds", "Stage 1: one search per sub-query; a seed stands in the top t of both the relevance and the "
            "recency ranking. Stage 2 decides its fate: ✓ kept (some edge survives) or ✗ pruned (every edge has Δ ≤ τ).")

plan = trace.plan
kept = sum(1 for s in trace.seeds if s.fate == "kept")
pruned = sum(1 for s in trace.seeds if s.fate == "pruned")
c1, c2, c3, c4 = st.columns(4)
c1.metric("sub-queries", len(plan.subqueries))
c2.metric("seeds |S|", len(trace.seeds))
c3.metric("✓ kept", kept)
c4.metric("✗ pruned", pruned)
st.caption(f"Planner: {md_escape(plan.planner)}" + (" (cached)" if plan.cached else "")
           + (f" · notes: {md_escape('; '.join(plan.notes))}" if plan.notes else ""))
if plan.error:
    st.warning(f"The planner failed: {md_escape(plan.error)}")

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
            "title": p.title if p else pid,
            "year": p.year if p else None,
            "relevance rank": origin.relevance_rank if origin else None,
            "recency rank": origin.recency_rank if origin else None,
            "also from sub-queries": ", ".join(str(o.subquery_index + 1) for o in s.origins if o.subquery_index != sqr.index)
            if s else "",
            "reason": s.fate_reason if s else "",
            "id": pid,
        })
    n_kept = sum(r["fate"] == "✓" for r in rows)
    st.markdown(f"#### ρ{sqr.index + 1} “{md_escape(sqr.subquery)}”")
    st.caption(f"{len(sqr.hits)} search hits · t = {sqr.t} · {len(rows)} seeds: {n_kept} ✓ kept, "
               f"{len(rows) - n_kept} ✗ pruned")
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                     column_config={"fate": st.column_config.TextColumn("fate", width="small"),
                                    "year": st.column_config.NumberColumn("year", format="%d"),
                                    "title": st.column_config.TextColumn("title", width="large"),
                                    "reason": st.column_config.TextColumn("reason", width="medium")})
    else:
        st.caption("This sub-query found no papers.")
st.markdown(f"**Summary:** {kept} seeds retained (✓), {pruned} pruned (✗)"
            + (" — pruned seeds had no citation edge with claim-level support." if pruned else "."))
