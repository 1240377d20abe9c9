"""Ranking: every registered ranker on the same pruned graph, side by side, each column named for what it holds."""

from __future__ import annotations

from functools import partial

import altair as alt
import pandas as pd
import streamlit as st

from crase_app.display import tex_plain
from crase_app.shared import guarded, trace_page
from crase_core.audit.rerank import Reranked, rerank
from crase_core.ranking.rankers import ranker_names

trace = trace_page("Ranking", "The kept papers under each ranker (SALSA, personalised PageRank, CEP and any other "
                   "registered ranker), re-computed from the saved graph — no model calls. The walk's score is the "
                   "ranker's own; the final rank fuses it with the full-query search, as the run's answer does.")


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
search_rank = {h.paper_id: h.relevance_rank for h in trace.query_hits}
names = list(results)
primary = trace.ranking.ranker if trace.ranking.ranker in results else names[0]
shown = st.selectbox("Ranker shown in full", names, index=names.index(primary), format_func=str.upper,
                     key="rank_shown", help="Its final rank and score, and its walk's own score and rank; the other "
                     "rankers' final ranks follow.")
R = shown.upper()


def _row(pid: str) -> dict[str, object]:
    n, r = nodes[pid], results[shown]
    row: dict[str, object] = {"title": tex_plain(n.paper.title), "year": n.paper.year, "role": n.role,
                              "final rank": r.ranks.get(pid), "final score": r.scores.get(pid),
                              f"walk ({R}) score": r.result.scores.get(pid, 0.0),
                              f"walk ({R}) rank": r.walk_ranks.get(pid), "search rank": search_rank.get(pid)}
    for other in names:
        if other != shown:
            row[f"final rank under {other.upper()}"] = results[other].ranks.get(pid)
    row["id"] = pid
    return row


df = pd.DataFrame([_row(pid) for pid in nodes]).sort_values("final rank")
RANKS = ["final rank", f"walk ({R}) rank", "search rank", *(c for c in df.columns if c.startswith("final rank under"))]
df = df.astype({c: "Int64" for c in RANKS})
# a rank column with gaps (a paper the search did not return) is shown as text, a dash for the gap: the grid
# draws a missing number as the word "None"
GAPS = [c for c in RANKS if df[c].isna().any()]
for c in GAPS:
    df[c] = [("–" if pd.isna(x) else str(int(x))) for x in df[c]]
df = df[["final rank", "title", "final score", f"walk ({R}) score", f"walk ({R}) rank", "search rank", "year", "role",
         *(c for c in df.columns if c.startswith("final rank under")), "id"]]
HELP = {
    "final rank": f"Rank in the run's answer order under {R}: the walk fused with the full-query search "
                  f"({trace.settings.fusion}), text floor applied.",
    "final score": "The fused score the answer is sorted by (its parts: the result's “why this rank”).",
    f"walk ({R}) score": f"{R}'s own score over the pruned graph, before any fusion (it sums to 1).",
    f"walk ({R}) rank": f"Rank by {R}'s own score alone.",
    "search rank": "Rank in the full-query search (–: the search did not return it).",
}

tab_table, tab_dist, tab_side = st.tabs(["Scores table", "Walk score distribution", "Side by side"])
with tab_table:
    st.dataframe(df, hide_index=True, width="stretch", height=min(35 * (len(df) + 1) + 4, 520),
                 column_config={
                     "final score": st.column_config.NumberColumn(format="%.5f", help=HELP["final score"]),
                     f"walk ({R}) score": st.column_config.NumberColumn(format="%.5f", help=HELP[f"walk ({R}) score"]),
                     **{c: st.column_config.NumberColumn(format="%d", help=HELP.get(c)) for c in
                        ("final rank", f"walk ({R}) rank", "search rank") if c not in GAPS},
                     **{c: st.column_config.TextColumn(help=HELP.get(c), width="small") for c in GAPS},
                     "year": st.column_config.NumberColumn(format="%d"),
                     "role": st.column_config.TextColumn(width="medium"),
                     "title": st.column_config.TextColumn(width="large")})
with tab_dist:
    long = pd.DataFrame([{"ranker": name.upper(), "walk rank": r.walk_ranks[pid], "walk score": r.result.scores[pid]}
                         for name, r in results.items() for pid in r.walk_ranks])
    long = long[long["walk score"] > 0]
    colours = alt.Scale(range=["#2a9d8f", "#4f6d9a", "#e76f51", "#8d6a9f"])
    chart = alt.Chart(long).mark_line(point=alt.OverlayMarkDef(size=12)).encode(
        x=alt.X("walk rank:Q", scale=alt.Scale(type="log"), title="rank by the walk's own score (log)"),
        y=alt.Y("walk score:Q", scale=alt.Scale(type="log"), title="walk score (log)"),
        color=alt.Color("ranker:N", scale=colours),
        tooltip=["ranker", "walk rank", alt.Tooltip("walk score:Q", format=".5f")],
    ).properties(height=380)
    st.altair_chart(chart, width="stretch")
    hist = alt.Chart(long).mark_bar(opacity=0.75).encode(
        x=alt.X("walk score:Q", bin=alt.Bin(maxbins=40), title="walk score"),
        y=alt.Y("count():Q", stack=None, title="papers"),
        color=alt.Color("ranker:N", scale=colours),
    ).properties(height=220)
    st.altair_chart(hist, width="stretch")
with tab_side:
    if len(nodes) > 1:  # a slider needs two values: a run of 1 paper shows it alone
        k = st.slider("Top k (final ranks)", 1, min(100, len(nodes)), min(20, len(nodes)), key="rank_k")
    else:
        k = len(nodes)
    cols = st.columns(len(results))
    tops = {name: [pid for pid, _ in sorted(r.ranks.items(), key=lambda kv: kv[1])[:k]] for name, r in results.items()}
    for col, name in zip(cols, names, strict=True):
        col.markdown(f"**{name.upper()}**")
        col.dataframe(pd.DataFrame([{"final rank": i, "title": tex_plain(nodes[pid].paper.title), "year": nodes[pid].paper.year}
                                    for i, pid in enumerate(tops[name], 1)]),
                      hide_index=True, width="stretch", height=min(36 * k + 40, 760),
                      column_config={"year": st.column_config.NumberColumn(format="%d")})
    if len(names) >= 2:
        st.markdown("**Overlap of the top k**")
        overlap = pd.DataFrame([[len(set(tops[a]) & set(tops[b])) for b in names] for a in names],
                               index=[n.upper() for n in names], columns=[n.upper() for n in names])
        st.dataframe(overlap, width="content")
