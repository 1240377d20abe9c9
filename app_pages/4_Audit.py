"""Audit: agree / disagree with edge decisions; agreement, retained-edge precision, pruned-edge correctness, κ;
apply the verdicts (a re-ranked run, saved with its parent named)."""

from __future__ import annotations

from functools import partial

import pandas as pd
import streamlit as st

from crase_app.display import md_escape, shorten_words, tex_plain
from crase_app.shared import (
    audit_store,
    claims_markdown,
    edge_inspector,
    guarded,
    open_trace,
    paper_line,
    run_store,
    trace_page,
)
from crase_core.audit.rerank import EdgeVerdict, apply_verdicts, rank_changes
from crase_core.audit.store import (
    audit_queue,
    edge_scorers,
    human_decisions,
    pairwise_agreement,
    summarize,
    summarize_by_scorer,
    verdict_from_judgement,
    verdicts_csv,
)

trace = trace_page("Audit", "Judge the pipeline's keep / prune decisions edge by edge. Verdicts are stored locally "
                   "(SQLite next to the runs folder) and summarised like the paper's Table 5; applying them ranks "
                   "the run again (a new run, saved next to this one).")
# claim tables wrap inside their column (a long word or formula never pushes a table over its neighbour)
st.markdown("""<style>
[data-testid="stMarkdownContainer"] table {width: 100%; max-width: 100%;}
[data-testid="stMarkdownContainer"] th, [data-testid="stMarkdownContainer"] td {overflow-wrap: break-word;}
[data-testid="stMarkdownContainer"] .katex-display {overflow-x: auto; overflow-y: hidden;}
</style>""", unsafe_allow_html=True)  # static CSS only, no user text
store = audit_store()
auditor = st.session_state.get("auditor", "").strip()
SCORER_NAMES = {"model": "the model (entailment)", "offline": "word overlap (offline)"}


def blind_judgement(trace, e, auditor: str) -> None:
    """Both papers and their claims, nothing of the pipeline's verdict; the auditor decides keep or prune."""
    st.markdown("##### Judge this citation blind")
    left, right = st.columns(2, gap="medium")
    with left:
        st.markdown(f"**Citing:** {paper_line(trace, e.citing)}", unsafe_allow_html=True)
        st.markdown(claims_markdown(trace, e.citing, verbatim=False) or "_No claims._", unsafe_allow_html=True)
    with right:
        st.markdown(f"**Cited:** {paper_line(trace, e.cited)}", unsafe_allow_html=True)
        st.markdown(claims_markdown(trace, e.cited, verbatim=False) or "_No claims._", unsafe_allow_html=True)
    with st.form(key=f"blind_{e.citing}_{e.cited}", border=True):
        choice = st.radio("Does the cited paper support at least one claim of the citing paper?",
                          ["keep", "prune"], horizontal=True,
                          format_func=lambda x: "yes — keep the edge" if x == "keep" else "no — prune it")
        note = st.text_input("Note (optional)", max_chars=2000)
        if st.form_submit_button("Record judgement", type="primary"):
            verdict = verdict_from_judgement(choice == "keep", e.kept)
            saved = guarded(lambda: store.record(trace.run_id, e.citing, e.cited, auditor, verdict, e.kept, note),
                            "Could not record the verdict")
            if saved:
                st.toast("Recorded. The pipeline's decision is now shown.")
                st.rerun()


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def kappa(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


scope = st.radio("Statistics over", ["this run", "all runs"], horizontal=True, key="audit_scope")
verdicts = guarded(lambda: store.verdicts(trace.run_id if scope == "this run" else None), "Could not read verdicts")
verdicts = verdicts or []
s = summarize(verdicts)
c = st.columns(6)
c[0].metric("verdicts", s.verdicts, help=f"{s.edges} edges by {s.auditors} auditor(s)")
c[1].metric("agreement", pct(s.agreement), help="Pipeline decision = majority human judgement "
            f"(over {s.labelled_edges} edges with a majority; ties excluded).")
c[2].metric("retained-edge precision", pct(s.retained_precision),
            help=f"Of {s.retained_n} kept edges, the share the majority would keep.")
c[3].metric("pruned-edge correctness", pct(s.pruned_correctness),
            help=f"Of {s.pruned_n} pruned edges, the share the majority would prune.")
c[4].metric("unanimous", pct(s.unanimous), help=f"Edges rated by ≥ 2 auditors ({s.multi_rated_edges}) where all agree.")
c[5].metric("Fleiss' κ", kappa(s.fleiss_kappa),
            help="Inter-auditor agreement on keep / prune, over edges rated by two or more auditors.")


@st.cache_data(max_entries=64, show_spinner=False)
def saved_run_scorers(name: str, run_id: str) -> dict[tuple[str, str, str], str]:
    """``(run_id, citing, cited) → scorer`` of one saved run (cached by its content id)."""
    t = run_store().load(name)
    return {k: v or "offline" for k, v in edge_scorers(t.run_id, t.edges).items()}


def verdict_scorers(verdicts) -> dict[tuple[str, str, str], str]:
    """Who scored each judged edge: from the open run, and from the saved runs the other verdicts belong to."""
    ids = {v.run_id for v in verdicts}
    out = {k: v or "offline" for k, v in edge_scorers(trace.run_id, trace.edges).items()} if trace.run_id in ids else {}
    missing = ids - {trace.run_id}
    if missing:
        for info in guarded(lambda: run_store().list(), "Could not list the saved runs") or []:
            if info.run_id in missing and not info.error:
                out.update(guarded(partial(saved_run_scorers, info.name, info.run_id),
                                   f"Could not read the run {info.name}") or {})
    return out


if verdicts:
    split = summarize_by_scorer(verdicts, verdict_scorers(verdicts))
    st.markdown("##### By scorer", help="The same measures for the edges the model scored and for those the "
                "word-overlap scorer decided (a model backend's cascade leaves the rest of the edges to it; the "
                "offline backend scores all). An edge whose run is no longer saved counts as word overlap.")
    st.dataframe(pd.DataFrame([{
        "scored by": SCORER_NAMES.get(name, name), "verdicts": x.verdicts, "edges": x.edges,
        "agreement": pct(x.agreement), "retained-edge precision": pct(x.retained_precision),
        "kept edges": x.retained_n, "pruned-edge correctness": pct(x.pruned_correctness),
        "pruned edges": x.pruned_n, "Fleiss' κ": kappa(x.fleiss_kappa),
    } for name, x in split.items()]), hide_index=True, width="stretch", key="audit_by_scorer")
    pairs = pairwise_agreement(verdicts)
    if pairs:
        st.markdown("##### Between auditors", help="Each pair of auditors over the edges both judged: the share of "
                    "those edges they judged alike (keep / prune) and Cohen's κ (– where undefined: both put every "
                    "edge in one and the same category).")
        st.dataframe(pd.DataFrame([{"auditors": f"{p.first} · {p.second}", "edges both judged": p.edges,
                                    "agreement": pct(p.agreement), "Cohen's κ": kappa(p.kappa)} for p in pairs]),
                     hide_index=True, width="stretch", key="audit_pairs")

st.markdown("#### Audit queue")
if not auditor:
    st.warning("Enter your auditor name in the sidebar to record verdicts.", icon=":material/edit:")
controls = st.columns([2, 1], vertical_alignment="bottom")
n = controls[0].slider("Edges in the queue (half kept, half pruned; a fixed random sample)", 4, 100, 20, 2,
                       key="audit_n")
blind = controls[1].toggle("Blind audit", value=True, key="audit_blind",
                           help="Hide the pipeline's decision, Δ and the matrix until you have judged the edge yourself "
                           "(the paper's human validation was blinded). Your keep / prune judgement is stored as agree "
                           "or disagree with the pipeline.")
queue = audit_queue(trace.edges, n, trace.run_id)
titles = {x.paper.id: x.paper.title for x in trace.nodes}
mine = {(v.citing, v.cited): v.verdict for v in verdicts if v.auditor == auditor and v.run_id == trace.run_id}


def shown_decision(e) -> str:
    if blind and (e.citing, e.cited) not in mine:
        return "hidden"
    return "kept" if e.kept else "pruned"


qdf = pd.DataFrame([{"done": "✓" if (e.citing, e.cited) in mine else "", "citing": shorten_words(tex_plain(titles[e.citing]), 110),
                     "cited": shorten_words(tex_plain(titles[e.cited]), 110), "decision": shown_decision(e)}
                    for e in queue])
ev = st.dataframe(qdf, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
                  key=f"audit_queue_{trace.run_id}", height=min(35 * len(queue) + 38, 318),
                  column_config={"done": st.column_config.TextColumn("done", width="small", pinned=True),
                                 "decision": st.column_config.TextColumn("decision", width="small", pinned=True),
                                 # medium, stretched to share the rest of the table's width: two large ones
                                 # (400 px each) run past the table in a 1440 px window (a sideways scrollbar)
                                 "citing": st.column_config.TextColumn("citing", width="medium"),
                                 "cited": st.column_config.TextColumn("cited", width="medium")},
                  column_order=["done", "decision", "citing", "cited"])
rows = ev.selection.rows if ev is not None else []
# the selected edge below the queue, the page's full width: the heat map and the two claim tables need it
with st.container(border=True, key="audit_edge"):
    if rows and rows[0] < len(queue):
        e = queue[rows[0]]
        if blind and auditor and (e.citing, e.cited) not in mine:
            blind_judgement(trace, e, auditor)
        else:
            edge_inspector(trace, e.citing, e.cited, key="auditpage")
    else:
        st.info("Select an edge in the audit queue to judge it. You can also record verdicts from the "
                "edge inspector on the Evidence graph page.", icon=":material/arrow_upward:")


@st.cache_resource(max_entries=16, show_spinner=False)
def saved_run(name: str):
    """A saved run (the store hands out shared, read-only traces)."""
    return run_store().load(name)


def apply_section() -> None:
    """Apply recorded verdicts: a new run with the judged edges decided as the auditors said, ranked again."""
    st.markdown("#### Apply the verdicts", help="Each judged edge takes the auditors' decision; the papers' and "
                "seeds' fates and the ranking are computed again from the saved graph (no claim or matrix is "
                "recomputed, no model is called). The new run names this one as its parent (Runs page).")
    run_verdicts = guarded(lambda: store.verdicts(trace.run_id), "Could not read verdicts") or []
    whose = st.radio("Verdicts to apply", ["mine", "majority"], horizontal=True, key="apply_whose",
                     format_func=lambda x: "mine" if x == "mine" else "the majority of all auditors (ties decide nothing)")
    if whose == "mine" and not auditor:
        st.caption("Enter your auditor name in the sidebar to apply your verdicts.")
        return
    decisions, ties = human_decisions(run_verdicts, trace.run_id, auditor if whose == "mine" else None)
    kept = {(e.citing, e.cited): e.kept for e in trace.edges}
    against = [d for d in decisions if d.keep != kept.get((d.citing, d.cited))]
    st.caption((f"{md_escape(auditor)}: " if whose == "mine" else "All auditors: ")
               + f"{len(decisions)} judged edge(s), {len(against)} against the pipeline's decision"
               + (f"; {len(ties)} tied (not applied)" if ties else "") + ".")
    label = "Apply my verdicts" if whose == "mine" else "Apply the majority's verdicts"
    if st.button(label, type="primary", disabled=not against, key="apply_verdicts", icon=":material/published_with_changes:",
                 help=None if against else "Nothing to change: every judged edge agrees with the pipeline."):
        verdicts_in = [EdgeVerdict(d.citing, d.cited, d.keep, d.auditors, d.note) for d in decisions]
        child = guarded(lambda: apply_verdicts(trace, verdicts_in), "Could not apply the verdicts")
        saved = guarded(lambda: run_store().save(child), "Could not save the re-ranked run") if child else None
        if saved is not None:
            st.session_state["audit_rerank"] = {"parent": trace.run_id, "name": saved.name}
    done = st.session_state.get("audit_rerank")
    if done and done.get("parent") == trace.run_id:
        moved_table(done["name"])


def moved_table(name: str) -> None:
    """The re-ranked run: which papers moved and by how much, and a button to open it."""
    child = guarded(partial(saved_run, name), "Could not open the re-ranked run")
    if child is None:
        return
    changes = rank_changes(trace, child)
    applied = sum(a.keep != a.was_kept for a in child.applied_verdicts)
    st.success(f"Saved the re-ranked run ({applied} edge decision(s) changed): run {md_escape(child.run_id)}. "
               f"{len(changes)} paper(s) of either answer moved.", icon=":material/check_circle:")
    if changes:
        st.dataframe(pd.DataFrame([{
            "paper": tex_plain(child.node(m.paper_id).paper.title), "rank before": m.before, "rank after": m.after,
            "moved": ("left the ranking" if m.after is None else "entered the ranking") if m.moved is None
            else (f"▲ {m.moved}" if m.moved > 0 else f"▼ {-m.moved}")} for m in changes]),
            hide_index=True, width="stretch", key="audit_moved", height=min(35 * len(changes) + 38, 318),
            column_config={"paper": st.column_config.TextColumn(width="large"),
                           "rank before": st.column_config.NumberColumn(format="%d"),
                           "rank after": st.column_config.NumberColumn(format="%d")})
    notice = f"Re-ranked from run {trace.run_id} with the auditors' verdicts."
    if st.button("Open the re-ranked run", key="open_reranked", icon=":material/folder_open:") and open_trace(
            child, name, notice=notice, identified=True):
        st.session_state.pop("audit_rerank", None)
        st.rerun()


apply_section()

st.markdown("#### Verdicts")
if verdicts:
    vdf = pd.DataFrame([{"auditor": v.auditor, "citing": v.citing, "cited": v.cited, "verdict": v.verdict,
                         "pipeline": "kept" if v.pipeline_kept else "pruned", "note": v.note, "when": v.created_at}
                        for v in verdicts])
    st.dataframe(vdf, hide_index=True, width="stretch")
    st.download_button("Export verdicts (CSV)", verdicts_csv(verdicts), file_name="crase-audit.csv",
                       mime="text/csv", icon=":material/download:")
else:
    st.caption("No verdicts yet.")
