"""Audit: agree / disagree with edge decisions; agreement, retained-edge precision, pruned-edge correctness, κ."""

from __future__ import annotations

import random
from functools import partial

import pandas as pd
import streamlit as st

from crase_app.display import shorten_words, tex_plain
from crase_app.shared import (
    audit_store,
    claims_markdown,
    edge_inspector,
    guarded,
    paper_line,
    run_store,
    trace_page,
)
from crase_core.audit import (
    edge_scorers,
    summarize,
    summarize_by_scorer,
    verdict_from_judgement,
    verdicts_csv,
)

trace = trace_page("Audit", "Judge the pipeline's keep / prune decisions edge by edge. Verdicts are stored locally "
            "(SQLite next to the runs folder) and summarised like the paper's Table 5.")
store = audit_store()
auditor = st.session_state.get("auditor", "").strip()


def blind_judgement(trace, e, auditor: str) -> None:
    """Both papers and their claims, nothing of the pipeline's verdict; the auditor decides keep or prune."""
    st.markdown("##### Judge this citation blind")
    # paper_line / claims_markdown: the TeX renderer's markdown (input escaped, its own sup/sub marks only)
    st.markdown(f"**Citing:** {paper_line(trace, e.citing)}", unsafe_allow_html=True)
    st.markdown(claims_markdown(trace, e.citing, verbatim=False) or "_No claims._", unsafe_allow_html=True)
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
c[5].metric("Fleiss' κ", "–" if s.fleiss_kappa is None else f"{s.fleiss_kappa:.3f}",
            help="Inter-auditor agreement on keep / prune, over edges rated by two or more auditors.")

SCORER_NAMES = {"model": "the model", "offline": "offline (lexical fallback)"}


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
                "offline components scored (a model backend's cascade leaves the rest of the edges to them; the "
                "offline backend scores all). An edge whose run is no longer saved counts as offline.")
    st.dataframe(pd.DataFrame([{
        "scored by": SCORER_NAMES.get(name, name), "verdicts": x.verdicts, "edges": x.edges,
        "agreement": pct(x.agreement), "retained-edge precision": pct(x.retained_precision),
        "kept edges": x.retained_n, "pruned-edge correctness": pct(x.pruned_correctness),
        "pruned edges": x.pruned_n, "Fleiss' κ": "–" if x.fleiss_kappa is None else f"{x.fleiss_kappa:.3f}",
    } for name, x in split.items()]), hide_index=True, width="stretch", key="audit_by_scorer")

left, right = st.columns([1.3, 1], gap="large")
with left:
    st.markdown("#### Audit queue")
    if not auditor:
        st.warning("Enter your auditor name in the sidebar to record verdicts.", icon=":material/edit:")
    n = st.slider("Edges in the queue (half kept, half pruned; a fixed random sample)", 4, 100, 20, 2, key="audit_n")
    rng = random.Random(trace.run_id)
    kept = [e for e in trace.edges if e.kept]
    pruned = [e for e in trace.edges if not e.kept]
    queue = rng.sample(kept, min(len(kept), n // 2)) + rng.sample(pruned, min(len(pruned), n - min(len(kept), n // 2)))
    rng.shuffle(queue)
    titles = {x.paper.id: x.paper.title for x in trace.nodes}
    mine = {(v.citing, v.cited): v.verdict for v in verdicts if v.auditor == auditor and v.run_id == trace.run_id}
    blind = st.toggle("Blind audit", value=True, key="audit_blind",
                      help="Hide the pipeline's decision, Δ and the matrix until you have judged the edge yourself "
                      "(the paper's human validation was blinded). Your keep / prune judgement is stored as agree "
                      "or disagree with the pipeline.")

    def shown_decision(e) -> str:
        if blind and (e.citing, e.cited) not in mine:
            return "hidden"
        return "kept" if e.kept else "pruned"

    qdf = pd.DataFrame([{"done": "✓" if (e.citing, e.cited) in mine else "", "citing": shorten_words(tex_plain(titles[e.citing]), 90),
                         "cited": shorten_words(tex_plain(titles[e.cited]), 90), "decision": shown_decision(e)}
                        for e in queue])
    ev = st.dataframe(qdf, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
                      key="audit_queue", height=min(36 * len(queue) + 40, 560),
                      column_config={"done": st.column_config.TextColumn("done", width="small", pinned=True),
                                     "decision": st.column_config.TextColumn("decision", width="small", pinned=True),
                                     "citing": st.column_config.TextColumn("citing", width="medium"),
                                     "cited": st.column_config.TextColumn("cited", width="medium")},
                      column_order=["done", "decision", "citing", "cited"])
    rows = ev.selection.rows if ev is not None else []
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
with right, st.container(border=True):
    if rows:
        e = queue[rows[0]]
        if blind and auditor and (e.citing, e.cited) not in mine:
            blind_judgement(trace, e, auditor)
        else:
            edge_inspector(trace, e.citing, e.cited, key="auditpage")
    else:
        st.info("Select an edge in the audit queue to judge it. You can also record verdicts from the "
                "edge inspector on the Evidence graph page.", icon=":material/arrow_back:")
