"""Ranking: every registered ranker on the same pruned graph, side by side."""

from __future__ import annotations

from functools import partial

import altair as alt
import pandas as pd
import streamlit as st

from crase_app.display import tex_plain
from crase_app.shared import guarded, trace_page
from crase_core.rankers import ranker_names
from crase_core.rerank import Reranked, rerank

trace = trace_page("Ranking", "Scores of the kept papers under each ranker (personalised PageRank, SALSA, and any other "
            "registered ranker), re-computed from the saved graph — no model calls.")


@st.cache_data(max_entries=32, show_spinner="Ranking…")
def _rerank(_trace, run_id: str, ranker: str) -> Reranked:
    return rerank(_trace, ranker)


results: dict[str, Reranked] = {}
for name in ranker_names():
    r = guarded(partial(_rerank, trace, trace.run_id, name), f"Ranker {name.upper()} failed")
    if r is not None:
        results[name] = r
if not results or not next(iter(results.values())).result.scores:
    st.warning("Nothing to rank: no paper survived pruning in this run.")
    st.stop()

st.caption("Run's own ranker: " + trace.ranking.ranker.upper() + " · α = "
           + f"{trace.settings.alpha:g} · restart distribution: {trace.settings.personalization} · "
           + " · ".join(f"{n.upper()}: {r.result.iterations} iterations"
                        + ("" if r.result.converged else " (not converged)") for n, r in results.items()))

nodes = {n.paper.id: n for n in trace.nodes if n.kept}
rows = []
for pid, n in nodes.items():
    row: dict[str, object] = {"title": tex_plain(n.paper.title), "year": n.paper.year, "role": n.role}
    for name, r in results.items():
        row[f"{name.upper()} rank"] = r.ranks.get(pid)
        row[f"{name.upper()} score"] = r.result.scores.get(pid, 0.0)
    row["id"] = pid
    rows.append(row)
primary = trace.ranking.ranker if trace.ranking.ranker in results else next(iter(results))
df = pd.DataFrame(rows).sort_values(f"{primary.upper()} rank")

tab_table, tab_dist, tab_side = st.tabs(["Scores table", "Score distribution", "Side by side"])
with tab_table:
    st.dataframe(df, hide_index=True, width="stretch", height=520,
                 column_config={**{f"{n.upper()} score": st.column_config.NumberColumn(format="%.5f") for n in results},
                                "year": st.column_config.NumberColumn(format="%d"),
                                "title": st.column_config.TextColumn(width="large")})
with tab_dist:
    long = pd.DataFrame([{"ranker": name.upper(), "rank": rank, "score": r.result.scores[pid]}
                         for name, r in results.items() for pid, rank in r.ranks.items()])
    long = long[long["score"] > 0]
    chart = alt.Chart(long).mark_line(point=alt.OverlayMarkDef(size=12)).encode(
        x=alt.X("rank:Q", scale=alt.Scale(type="log"), title="rank (log)"),
        y=alt.Y("score:Q", scale=alt.Scale(type="log"), title="score (log)"),
        color=alt.Color("ranker:N", scale=alt.Scale(range=["#2a9d8f", "#4f6d9a", "#e76f51", "#8d6a9f"])),
        tooltip=["ranker", "rank", alt.Tooltip("score:Q", format=".5f")],
    ).properties(height=380)
    st.altair_chart(chart, width="stretch")
    hist = alt.Chart(long).mark_bar(opacity=0.75).encode(
        x=alt.X("score:Q", bin=alt.Bin(maxbins=40), title="score"),
        y=alt.Y("count():Q", stack=None, title="papers"),
        color=alt.Color("ranker:N", scale=alt.Scale(range=["#2a9d8f", "#4f6d9a", "#e76f51", "#8d6a9f"])),
    ).properties(height=220)
    st.altair_chart(hist, width="stretch")
with tab_side:
    k = st.slider("Top k", 5, max(5, min(100, len(nodes))), min(20, max(5, len(nodes))), key="rank_k")
    cols = st.columns(len(results))
    tops = {name: [pid for pid, _ in sorted(r.ranks.items(), key=lambda kv: kv[1])[:k]] for name, r in results.items()}
    names = list(results)
    for col, name in zip(cols, names, strict=True):
        col.markdown(f"**{name.upper()}**")
        col.dataframe(pd.DataFrame([{"#": i, "title": tex_plain(nodes[pid].paper.title), "year": nodes[pid].paper.year}
                                    for i, pid in enumerate(tops[name], 1)]),
                      hide_index=True, width="stretch", height=min(36 * k + 40, 760),
                      column_config={"year": st.column_config.NumberColumn(format="%d")})
    if len(names) >= 2:
        st.markdown("**Overlap of the top k**")
        overlap = pd.DataFrame([[len(set(tops[a]) & set(tops[b])) for b in names] for a in names],
                               index=[n.upper() for n in names], columns=[n.upper() for n in names])
        st.dataframe(overlap, width="content")
