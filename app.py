"""Crase Explorer — the Streamlit front end. Run: ``streamlit run app.py``.

This file is the router (pages are discovered from ``pages/[0-9]*.py``) and the
Search page. The UI only presents :mod:`crase_core`: queries run through
``runtime.build_engine`` + ``pipeline.run_query``; everything shown afterwards
comes from the run's trace.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import streamlit as st

from crase_core.errors import CraseError
from crase_core.pipeline import STAGES, StageEvent, clean_query, estimate_budget, run_query
from pages._display import authors_line, load_demo_queries, md_escape
from pages._settings_form import choices_json, operator_settings, runtime_form, settings_form
from pages._shared import (
    current_trace,
    downloads,
    get_engine,
    guarded,
    open_trace,
    page_header,
    run_caption,
    run_store,
    trace_notice,
    trace_problem,
)

log = logging.getLogger("crase.app")
ROOT = Path(__file__).resolve().parent
STAGE_LABELS = {
    "plan": "Plan sub-queries",
    "seeds": "Search seeds",
    "expansion": "Expand citation graph",
    "claims": "Extract claims",
    "entailment": "Score entailment matrices",
    "pruning": "Coverage Δ and pruning",
    "ranking": "Rank",
}
PAGE_ICONS = {"evidence": ":material/hub:", "seeds": ":material/spa:", "ranking": ":material/leaderboard:", "audit": ":material/fact_check:", "runs": ":material/history:", "benchmark": ":material/straighten:"}


def budget_text(b) -> str:
    return (f"**Budget: {b.total:,} model calls** = 1 plan + {b.claim_calls:,} claim extractions (|V|) + "
            f"{b.entailment_calls:,} entailment matrices (|E|); **{b.cached:,} already cached → "
            f"{b.to_call:,} new calls**.")


class ProgressBoard:
    """One line per pipeline stage, updated from StageEvents, plus the budget once it is known."""

    def __init__(self, container) -> None:
        self.container = container
        self.budget_slot = container.empty()
        self.slots = {s: container.empty() for s in STAGES}
        self.state: dict[str, StageEvent] = {}
        self.started = time.perf_counter()
        for s in STAGES:
            self.slots[s].markdown(f":material/radio_button_unchecked: {STAGE_LABELS[s]}")

    def __call__(self, ev: StageEvent) -> None:
        self.state[ev.stage] = ev
        budget = getattr(ev, "budget", None)
        if budget is not None:
            self.budget_slot.info(budget_text(budget), icon=":material/calculate:")
        idx = STAGES.index(ev.stage) if ev.stage in STAGES else -1
        for s in STAGES[:idx]:  # earlier stages are done
            prev = self.state.get(s)
            self.slots[s].markdown(f":material/check_circle: {STAGE_LABELS[s]} — {md_escape(prev.message) if prev else 'done'}")
        done = ev.total > 0 and ev.done >= ev.total
        count = f" ({ev.done:,}/{ev.total:,})" if ev.total else ""
        icon = ":material/check_circle:" if done else ":material/progress_activity:"
        self.slots[ev.stage].markdown(f"{icon} **{STAGE_LABELS.get(ev.stage, ev.stage)}**{count} — {md_escape(ev.message)}")

    def finish(self) -> None:
        for s in STAGES:
            ev = self.state.get(s)
            if ev:
                self.slots[s].markdown(f":material/check_circle: {STAGE_LABELS[s]} — {md_escape(ev.message)}")


def ranked_list(trace) -> None:
    papers = {n.paper.id: n.paper for n in trace.nodes}
    if not trace.results:
        st.warning("No papers to show for this query.")
        return
    for r in trace.results:
        p = papers[r.paper_id]
        with st.container(border=True):
            left, right = st.columns([8, 1.3])
            left.markdown(f"**{r.rank}. {md_escape(p.title)}** · {p.year or 'n.d.'}  \n"
                          f"{md_escape(authors_line(list(p.authors)))}")
            left.caption(f"Why it is here: {md_escape(r.reason)}")
            right.markdown(f"<div style='text-align:right;color:#56616c;font-size:.8rem'>score</div>"
                           f"<div style='text-align:right;font-weight:600;font-size:1.05rem'>{r.score:.4f}</div>",
                           unsafe_allow_html=True)  # a number only
            if right.button("Inspect", key=f"inspect_{r.paper_id}", width="stretch"):
                st.session_state["selected"] = {"kind": "node", "id": r.paper_id}
                st.switch_page(graph_page)


def run_summary(trace) -> None:
    c = trace.stage_counts()
    cols = st.columns(6)
    cols[0].metric("seeds kept", f"{c['seeds_kept']} / {c['seeds']}")
    cols[1].metric("papers kept", f"{c['nodes_kept']:,} / {c['nodes']:,}")
    cols[2].metric("edges kept", f"{c['edges_kept']:,} / {c['edges']:,}")
    cols[3].metric("model calls", f"{trace.counters.model_calls:,}", help="Calls made in this run (cache hits excluded).")
    cols[4].metric("cache hits", f"{trace.counters.cache_hits:,}")
    cols[5].metric("time", f"{sum(trace.timings.values()):.1f} s")
    for w in trace.warnings:
        st.warning(md_escape(w))


def save_and_open(trace) -> None:
    """Save a finished run and open it; an identical saved run (same request, same result) is reopened instead."""
    saved = guarded(lambda: run_store().save(trace, reuse=True), "The run finished but could not be saved")
    if saved is None:
        open_trace(trace, "")
    elif saved.existed:
        when = saved.trace.created_at.replace("T", " ")[:19] or "earlier"
        open_trace(saved.trace, saved.name,
                   notice=f"Same query, settings, source and backend as the run saved at {when}, with the same "
                   "results: that saved run is reopened (no copy was saved).")
    else:
        open_trace(saved.trace, saved.name)


def search_page() -> None:
    page_header("Crase Explorer", "Auditable literature search: seeds → citation graph → claim-level entailment "
                "pruning → recency-aware ranking. Every step can be opened and checked.")
    demos = load_demo_queries()
    if demos:
        st.markdown("**Try a demo query** (embedded hep-th corpus)")
        cols = st.columns(len(demos))
        for col, d in zip(cols, demos, strict=True):
            if col.button(d["label"], key=f"demo_{d['label']}", help=d["query"], width="stretch"):
                st.session_state["query_text"] = d["query"]
                st.session_state["autorun"] = True
    query = st.text_area("Your literature-search question", key="query_text", height=90,
                         placeholder="e.g. Which papers explain the spectrum of strings on AdS3 via spectral flow?")
    operator = guarded(operator_settings, "The server's settings are invalid")
    if operator is None:
        return
    with st.expander("Run settings", expanded=False):
        choices = runtime_form(operator)
        st.divider()
        settings = guarded(lambda: settings_form(operator), "Invalid settings")
    b1, b2, _ = st.columns([1, 1, 4])
    go = b1.button("Search", type="primary", width="stretch", icon=":material/search:")
    estimate = b2.button("Estimate budget", width="stretch", icon=":material/calculate:",
                         help="Plan, search seeds and expand the graph, then count the model calls the run needs "
                         "(1 + |V| + |E|, less cached) without extracting claims or scoring edges.")
    autorun = st.session_state.pop("autorun", False)
    if settings is None:
        return
    engine_key = choices_json(choices)
    if estimate or go or autorun:
        try:
            clean_query(query)
        except CraseError as e:  # say what is wrong before any stage starts
            st.error(str(e), icon=":material/error:")
            return
    if estimate:
        engine = guarded(lambda: get_engine(engine_key), "Could not open the source/backend")
        if engine is not None:
            with st.spinner("Planning, searching and expanding to count the model calls…"):
                b = guarded(lambda: estimate_budget(query, engine, settings), "Could not estimate the budget")
            if b is not None:
                st.info(budget_text(b), icon=":material/calculate:")
    if go or autorun:
        engine = guarded(lambda: get_engine(engine_key), "Could not open the source/backend")
        if engine is not None:
            with st.status("Running the pipeline…", expanded=True) as status:
                board = ProgressBoard(status)
                try:
                    trace = run_query(query, engine, settings, progress=board)
                except CraseError as e:
                    status.update(label="The run stopped", state="error", expanded=True)
                    st.error(str(e), icon=":material/error:")
                    trace = None
                except Exception:
                    log.exception("run_query failed")
                    status.update(label="The run failed", state="error", expanded=True)
                    st.error("The run failed with an unexpected error (details are in the server log).", icon=":material/error:")
                    trace = None
                if trace is not None:
                    board.finish()
                    elapsed = time.perf_counter() - board.started
                    status.update(label=f"Done in {elapsed:.1f} s — {len(trace.results)} papers", state="complete",
                                  expanded=False)
            if trace is not None:
                save_and_open(trace)
    trace = st.session_state.get("trace")
    if trace is None or trace_problem(trace) is not None:
        if trace is not None:
            current_trace()  # says why the open run cannot be shown
        return
    st.divider()
    st.subheader("Results")
    trace_notice()
    run_caption(trace)
    run_summary(trace)
    with st.expander("Download", expanded=False):
        downloads(trace, key="search")
    ranked_list(trace)


def _discover_pages() -> list:
    pages = [st.Page(search_page, title="Search", icon=":material/search:", default=True, url_path="search")]
    for path in sorted((ROOT / "pages").glob("[0-9]*.py")):
        title = re.sub(r"^\d+_", "", path.stem).replace("_", " ")
        icon = next((v for k, v in PAGE_ICONS.items() if k in title.lower()), ":material/description:")
        pages.append(st.Page(str(path.relative_to(ROOT)), title=title, icon=icon))
    return pages


st.set_page_config(page_title="Crase Explorer", page_icon=":material/hub:", layout="wide")
_pages = _discover_pages()
graph_page = next((p for p in _pages if p.title.lower().startswith("evidence")), _pages[0])
with st.sidebar:
    # a widget's state is dropped on pages that do not draw it, so the name lives in a plain key
    st.text_input("Auditor name", value=st.session_state.get("auditor", ""), key="auditor_input",
                  help="Your name as recorded with audit verdicts (stored locally).",
                  on_change=lambda: st.session_state.update(auditor=st.session_state["auditor_input"].strip()))
    if st.session_state.get("trace") is not None:
        t = st.session_state["trace"]
        st.caption(f"Open run: {md_escape(t.query[:90])}{'…' if len(t.query) > 90 else ''}")
st.navigation(_pages).run()
