"""Search: the question, the demo queries, run settings, the live progress of a run and its result cards.

The UI only presents :mod:`crase_core`: queries run through ``runtime.build_engine`` + ``pipeline.run_query``;
everything shown afterwards comes from the run's trace. The router (``app.py``) registers this page as the
default one.
"""

from __future__ import annotations

import logging
import time
from functools import partial

import streamlit as st

from crase_app import corpora
from crase_app.display import app_message, authors_line, md_escape, tex_markdown
from crase_app.settings_form import choices_json, operator_settings, runtime_form, settings_form
from crase_app.shared import (
    current_trace,
    downloads,
    guarded,
    open_engine,
    open_trace,
    page_header,
    prefetch_engine,
    run_caption,
    run_store,
    trace_notice,
    trace_problem,
)
from crase_app.why import why_caption, why_details
from crase_core.errors import CraseError
from crase_core.llm.cost_report import OFFLINE_BACKENDS, budget_parts, unit, uses_model
from crase_core.pipeline import STAGES, StageEvent, build_graph, clean_query, run_query
from crase_core.recall.estimate import summary_lines
from crase_core.retrieval.library import ParsedLibrary, paper_arxiv_id, paper_link, parse_ids, parse_library
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.budget import describe_budget
from crase_core.stages.seeding import LibrarySeeding, SeedingStage, search_seeds
from crase_core.views import export
from crase_core.views.html_export import to_html
from crase_core.views.score_words import restart_words, score_sentence

log = logging.getLogger("crase.app")
STAGE_LABELS = {
    "open": "Open the corpus and its search index",
    "plan": "Plan sub-queries",
    "seeds": "Search seeds",
    "expansion": "Expand citation graph",
    "claims": "Extract claims",
    "entailment": "Score claim pairs (entailment, word overlap or claim similarity)",
    "pruning": "Coverage Δ and pruning",
    "ranking": "Rank",
}
GRAPH_PAGE = "app_pages/1_Evidence_graph.py"


def budget_text(b, model: bool, backend=None) -> str:
    """The budget 1 + |V| + |E| in the right unit: model calls when a model runs, else scoring operations;
    with a model, also the per-query model budget line (``describe_budget``: the limit, what the model is
    asked, estimated tokens and time)."""
    left = "new calls" if model else "to compute"
    note = "" if model else (" The offline backend runs no model endpoint: these are scoring operations (word "
                             "overlap, or claim similarity on the on-device MiniLM).")
    text = (f"**Budget: {b.total:,} {unit(model, b.total)}** = {budget_parts(b, model, backend)}; **{b.cached:,} already "
            f"cached → {b.to_call:,} {left}**.{note}")
    if model:
        line = describe_budget(b)
        text += "  \n" + md_escape(line[:1].upper() + line[1:]) + "."
    return text


def model_limit_note(settings: PipelineSettings) -> str:
    """Before any run, with a model backend chosen: what one query may spend (the settings' model budget)."""
    limits = " and ".join(x for x in (f"{settings.llm_budget:,} model calls" if settings.llm_budget else "",
                                      f"{settings.llm_token_budget:,} tokens" if settings.llm_token_budget else "")
                          if x)
    head = (f"Model budget per query: at most {limits}; the offline components decide whatever the model is not "
            "asked about." if limits else "Model budget per query: no limit (every uncached item goes to the model).")
    return head + " **Estimate budget** counts this query's model items, tokens and time before anything is sent."


BOARD_STAGES = ("open", *STAGES)


class ProgressBoard:
    """One line per pipeline stage (opening the corpus first), updated from StageEvents, plus the budget
    once it is known and the elapsed time since the click."""

    def __init__(self, container, started: float | None = None) -> None:
        self.container = container
        self.budget_slot = container.empty()
        self.slots = {s: container.empty() for s in BOARD_STAGES}
        self.state: dict[str, StageEvent] = {}
        self.started = started if started is not None else time.perf_counter()
        self.model = True
        self.drawn: dict[str, str] = {}  # the line each slot shows (a line is sent only when it changes)
        for s in BOARD_STAGES:
            self._line(s, f":material/radio_button_unchecked: {STAGE_LABELS[s]}")

    def _line(self, stage: str, text: str) -> None:
        if self.drawn.get(stage) != text:
            self.slots[stage].markdown(text)
            self.drawn[stage] = text

    def opening(self) -> None:
        self._line("open", f":material/progress_activity: **{STAGE_LABELS['open']}** — the first query after a "
                   "start opens the corpus (building its store and index if the set-up step did not); later ones "
                   "reuse it")

    def building(self, step) -> None:
        """A corpus-build report (the first query over a corpus whose store and index are not built yet)."""
        self._line("open", f":material/progress_activity: **{STAGE_LABELS['open']}** — building its store and "
                   f"index once ({step.fraction:.0%}, {md_escape(step.stage)}): {md_escape(step.message)}")

    def opened(self, engine) -> None:
        self.model = uses_model(engine.backend.describe())
        self.state["open"] = StageEvent("open", 1, 1, f"ready ({time.perf_counter() - self.started:.1f} s)")
        self._line("open", f":material/check_circle: {STAGE_LABELS['open']} — {self.state['open'].message}")

    def __call__(self, ev: StageEvent) -> None:
        self.state[ev.stage] = ev
        budget = getattr(ev, "budget", None)
        if budget is not None:
            self.budget_slot.info(budget_text(budget, self.model), icon=":material/calculate:")
        idx = STAGES.index(ev.stage) if ev.stage in STAGES else -1
        for s in STAGES[:idx]:  # earlier stages are done
            prev = self.state.get(s)
            self._line(s, f":material/check_circle: {STAGE_LABELS[s]} — {md_escape(prev.message) if prev else 'done'}")
        done = ev.total > 0 and ev.done >= ev.total
        count = f" ({ev.done:,}/{ev.total:,})" if ev.total else ""
        icon = ":material/check_circle:" if done else ":material/progress_activity:"
        if ev.stage in self.slots:
            self._line(ev.stage, f"{icon} **{STAGE_LABELS.get(ev.stage, ev.stage)}**{count} — {md_escape(ev.message)}")

    def failed(self) -> None:
        """The run stopped: the stage it stopped in (opening the corpus, if nothing ran) is marked so."""
        last = next((st_ for st_ in reversed(BOARD_STAGES) if st_ in self.state and st_ != "open"), "open")
        if last == "open" and "open" in self.state:
            last = STAGES[0]  # the corpus opened; nothing reported yet from the first stage
        ev = self.state.get(last)
        detail = f": {md_escape(ev.message)}" if ev is not None and ev.message else ""
        self._line(last, f":material/error: **{STAGE_LABELS.get(last, last)}** — stopped here{detail}")

    def finish(self) -> None:
        for s in BOARD_STAGES:
            ev = self.state.get(s)
            if ev:
                self._line(s, f":material/check_circle: {STAGE_LABELS[s]} — {md_escape(ev.message)}")

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started


def result_link(paper) -> str:
    """A markdown link to the paper (arXiv / DOI / the source's page) built from validated ids only, or ""."""
    url = paper_link(paper)
    if not url:
        return ""
    aid = paper_arxiv_id(paper)
    label = f"arXiv:{aid}" if aid else ("doi.org" if url.startswith("https://doi.org/") else "paper page")
    return f"[{md_escape(label)}]({url})"


FIRST_RESULTS = 20  # result cards drawn at first (7 page elements each); "Show all" draws the rest


def score_help(trace) -> str:
    """What a card's score line means (the tooltip of every card; constant text and the run's ranker)."""
    return (f"{trace.ranking.ranker.upper()} over the pruned evidence graph; {restart_words(trace)}. The share is "
            "the paper's part of the ranker's total score (it sums to 1 over the graph); with fusion the list "
            "order also weighs the text match. The number is the paper's score in the ranked list.")


def result_card(trace, r, paper, help_text: str) -> None:
    """One result, compact (about eight fit a 900-pixel screen): title, year, library mark and list score on
    one line beside its Abstract (a popover) and Inspect (opens the paper in the Evidence graph); then the
    authors and link and why it is here; its score in words is the caption's tooltip. Paper text goes through
    the TeX renderer
    (:func:`tex_markdown`). Seven page elements, so twenty cards reach the browser and are drawn quickly."""
    with st.container(border=True, key=f"card_{r.paper_id}"):
        mine = " · :green-badge[:material/bookmark: already in your library]" if r.in_library else ""
        link = result_link(paper)
        with st.container(horizontal=True, vertical_alignment="center", gap="small"):
            st.markdown(f"**{r.rank}. {tex_markdown(paper.title)}** · {paper.year or 'n.d.'}{mine} · "
                        f"score {r.score:.4f}", width="stretch", unsafe_allow_html=True)  # renderer: input escaped
            if paper.abstract:
                with st.popover("Abstract", type="tertiary", icon=":material/notes:"):
                    st.markdown(tex_markdown(paper.abstract), unsafe_allow_html=True)
            if st.button("Inspect", key=f"inspect_{r.paper_id}", type="tertiary", icon=":material/hub:",
                         help="Open this paper in the Evidence graph: its edges, claims and evidence trail."):
                st.session_state["selected"] = {"kind": "node", "id": r.paper_id}
                st.session_state["scroll_to_inspector"] = True  # the graph page opens at its inspector
                st.switch_page(GRAPH_PAGE)
        why = why_caption(trace, r)
        st.caption(f"{tex_markdown(authors_line(list(paper.authors)))}" + (f" · {link}" if link else "")
                   + f"  \nWhy it is here: {tex_markdown(r.reason)}" + (f"  \nWhy this rank: {why}" if why else ""),
                   help=f"Score: {md_escape(score_sentence(trace, r))}.  \n{help_text}", unsafe_allow_html=True)
        if r.score_parts:
            with st.expander("Why this rank: the score's parts"):
                why_details(trace, r)


def _show_all(n: int) -> None:
    """"Show all": for the run open when clicked (the key is the open run's id, read at the click)."""
    open_run = st.session_state.get("trace")
    if open_run is not None:
        st.session_state[f"results_shown_{open_run.run_id}"] = n


def ranked_list(trace) -> None:
    """The result cards, best first: the first :data:`FIRST_RESULTS`, then all on request."""
    papers = {n.paper.id: n.paper for n in trace.nodes}
    if not trace.results:
        st.warning("No papers to show for this query.")
        return
    results = trace.results
    if trace.library is not None and any(r.in_library for r in results):
        mine = sum(r.in_library for r in results)
        hide = st.toggle(f"Hide the {mine} {'paper' if mine == 1 else 'papers'} already in your library",
                         key="hide_library",
                         help="Show only what is new to you; the ranks stay those of the whole list.")
        if hide:
            results = [r for r in results if not r.in_library]
    shown = st.session_state.get(f"results_shown_{trace.run_id}", FIRST_RESULTS)
    help_text = score_help(trace)
    with st.container(gap="xsmall"):  # cards close together: about eight to a 900-pixel screen
        for r in results[:shown]:
            result_card(trace, r, papers[r.paper_id], help_text)
    if len(results) > shown:
        st.button(f"Show all {len(results)} papers", key="results_show_all", icon=":material/expand_more:",
                  on_click=_show_all, args=(len(results),),
                  help=f"The first {shown} are shown; the downloads hold the whole list.")


def coverage_notice(coverage) -> None:
    """The weak-match notice, when the corpus has little on the query."""
    if coverage is not None and coverage.weak:
        st.warning(md_escape(coverage.notice), icon=":material/travel_explore:")


def run_summary(trace) -> None:
    c = trace.stage_counts()
    model = trace.model_ran
    cols = [*st.columns(3), *st.columns(3)]  # two rows of three: they sit in the results bar's popover
    # the kept count large, the total beneath it: "45,912 / 45,912" would not fit a sixth of the page
    for col, label, kept, total in ((cols[0], "seeds kept", c["seeds_kept"], c["seeds"]),
                                    (cols[1], "papers kept", c["nodes_kept"], c["nodes"]),
                                    (cols[2], "edges kept", c["edges_kept"], c["edges"])):
        col.metric(label, f"{kept:,}", delta=f"of {total:,}", delta_color="off", delta_arrow="off")
    if model:
        ct = trace.counters
        cols[3].metric("model calls", f"{ct.model_calls:,}", help=f"Calls made in this run (cache hits excluded); "
                       f"{ct.prompt_tokens:,} prompt + {ct.completion_tokens:,} completion tokens.")
    else:
        cols[3].metric("scoring operations", f"{trace.counters.model_calls:,}",
                       help="Plan, claim extractions and edge matrices computed in this run by the offline backend "
                       "(cache hits excluded). It runs no model: no model calls, no tokens, no cost.")
    cols[4].metric("cache hits", f"{trace.counters.cache_hits:,}")
    pipeline_s = sum(trace.timings.values())
    total = st.session_state.get("elapsed", {}).get(trace.run_id)
    if total is not None:
        cols[5].metric("total time", f"{total:.1f} s", help=f"From the click to the results, opening the corpus "
                       f"included; the pipeline itself took {pipeline_s:.1f} s.")
    else:
        cols[5].metric("pipeline time", f"{pipeline_s:.1f} s", help="The stages' own time, as recorded in the run.")
    if model:
        ct = trace.counters
        st.caption(f"Model: {md_escape(trace.backend.get('backend', '?'))} · {ct.prompt_tokens:,} prompt + "
                   f"{ct.completion_tokens:,} completion tokens · {ct.failures:,} failures · {ct.repairs:,} repairs")


def _in_app_words(text: str, choice) -> str:
    """A note that says how to embed the corpus with ``crase corpus embed …``: in the app, its Embed button."""
    head, sep, _ = text.partition("; turn it on with `crase corpus embed")
    if choice is None or choice.embedded or not sep:
        return md_escape(text)
    return (md_escape(head) + f"; turn it on with **Corpus: {md_escape(choice.name)} — import or embed → Embed this "
            "corpus** on this page")


def run_warnings(trace, choice=None) -> None:
    """The run's warnings above the cards (they qualify them): the first in a box, any others one click away
    (so the first card still shows at 1440×900)."""
    notice = trace.coverage.notice if trace.coverage is not None and trace.coverage.weak else None
    shown = [_in_app_words(w, choice) for w in trace.warnings if w != notice]
    if not shown:
        return
    st.warning(shown[0])
    if len(shown) > 1:
        with st.expander(f"{len(shown) - 1} more note{'s' if len(shown) > 2 else ''} on this run"):
            for w in shown[1:]:
                st.warning(w)


def semantic_note(trace, choice) -> None:
    """When semantic feedback was off: why, and how to turn it on (in the app, for an imported corpus, its
    Embed button rather than the command)."""
    if trace.semantic_feedback or not trace.semantic_note or trace.semantic_note in trace.warnings:
        return
    note = trace.semantic_note
    head, sep, _ = note.partition("; turn it on with")
    if choice is not None and not choice.embedded and sep:
        st.caption(md_escape(head[:1].upper() + head[1:]) + "; turn it on with **Corpus: "
                   f"{md_escape(choice.name)} — import or embed → Embed this corpus** on this page.")
    else:
        st.caption(md_escape(note[:1].upper() + note[1:]))  # off, why, and how to turn it on


def library_example(choice) -> str:
    """The library box's placeholder: ids that exist in the chosen corpus (a DOI only matches a corpus that has
    DOIs, so none is offered as the example)."""
    if choice.embedded:
        return "hep-th/9711200, hep-th/9802150 (arXiv ids) or DOIs …"
    ids = [d["id"] for d in corpora.demo_queries(choice) if d.get("id")][:2]
    return (", ".join(ids) + " (ids of this corpus) or DOIs …") if ids else "paper ids or DOIs …"


def recall_caption(trace) -> None:
    """One line in the results bar: the run's estimate of its own recall (what it rests on in the tooltip)."""
    lines = summary_lines(trace.recall_estimate)
    if lines:
        # one line: the estimate (or that there is none); what follows a dash, and the rest, in its tooltip
        head, _, why = lines[0].partition(" — ")
        more = " ".join(x for x in (why[:1].upper() + why[1:] if why else "", *lines[1:]) if x)
        st.caption(f"**Recall** · {md_escape(head[:1].upper() + head[1:])}", help=md_escape(more) or None)


def library_input(choice) -> ParsedLibrary | None:
    """The papers the user already has (pasted ids, an uploaded BibTeX file), or None when none given."""
    with st.expander("Start from what you know — your papers (optional)", expanded=False):
        st.caption("Paste arXiv ids or DOIs, or upload a BibTeX file. Papers the corpus has become seeds of the "
                   "run, and every paper you already have is marked in the results and the graph, so the list "
                   "shows what is new. Each paper found is expanded like any seed, so a much-cited one widens the "
                   "graph a lot: **Estimate budget** shows the cost first.")
        text = st.text_area("arXiv ids or DOIs", key="library_ids", height=80, placeholder=library_example(choice))
        upload = st.file_uploader("BibTeX file", type=["bib", "bibtex", "txt"], key="library_bib")
        parsed = ParsedLibrary()
        try:
            if text and text.strip():
                parsed.extend(parse_ids(text))
            if upload is not None:
                parsed.extend(parse_library(upload.getvalue().decode("utf-8", errors="replace")))
        except CraseError as e:
            st.error(f"Your library: {e}", icon=":material/error:")
            return None
        if parsed.entries or parsed.unreadable:
            st.caption(f"{len(parsed.entries):,} {'paper' if len(parsed.entries) == 1 else 'papers'} read" + (
                f"; skipped {len(parsed.unreadable):,}: {md_escape('; '.join(parsed.unreadable[:5]))}"
                + ("…" if len(parsed.unreadable) > 5 else "") if parsed.unreadable else ""))
    return parsed if parsed.entries else None


def save_and_open(trace) -> None:
    """Save a finished run and open it; an identical saved run (same request, same result) is reopened instead."""
    saved = guarded(lambda: run_store().save(trace, reuse=True), "The run finished but could not be saved")
    if saved is None:
        open_trace(trace, "")
    elif saved.existed:
        when = saved.trace.created_at.replace("T", " ")[:19] or "earlier"
        open_trace(saved.trace, saved.name, identified=True,
                   notice=f"Same query, settings, source and backend as the run saved at {when}, with the same "
                   "results: that saved run is reopened (no copy was saved).")
    else:
        open_trace(saved.trace, saved.name, identified=True)


def run_search(query: str, engine_key: str, settings: PipelineSettings, seeding: SeedingStage,
               clicked: float) -> tuple[object | None, float]:
    """Run the query with the live progress board; open the finished run (not saved yet). Returns the trace
    and the time from the click, or (None, 0) when the run could not start or stopped (the reason shown)."""
    with st.status("Running the pipeline…", expanded=True) as status:
        board = ProgressBoard(status, clicked)
        board.opening()
        engine = guarded(lambda: open_engine(engine_key, board.building), "Could not open the source/backend")
        trace = None
        if engine is None:
            board.failed()
            status.update(label="Could not open the source or the model backend", state="error", expanded=True)
            return None, 0.0
        board.opened(engine)
        try:
            trace = run_query(query, engine, settings, progress=board, seeding=seeding)
        except CraseError as e:
            board.failed()
            status.update(label="The run stopped", state="error", expanded=True)
            message = app_message(e)
            st.error(message[:1].upper() + message[1:], icon=":material/error:")
            return None, 0.0
        except Exception:
            log.exception("run_query failed")
            board.failed()
            status.update(label="The run failed", state="error", expanded=True)
            st.error("The run failed with an unexpected error (details are in the server log).", icon=":material/error:")
            return None, 0.0
        board.finish()
        elapsed = board.elapsed
        status.update(label=f"Done in {elapsed:.1f} s — {len(trace.results)} papers", state="complete",
                      expanded=False)
    # shown at once; saved after its cards are drawn (an identical saved run is then reopened: same
    # results, so the cards stand), so the first result does not wait for the save
    if open_trace(trace, ""):
        st.session_state.setdefault("elapsed", {})[st.session_state["trace"].run_id] = elapsed
    return trace, elapsed


def stale_notice() -> None:
    """After a search that failed: the open run's results are not drawn under it (they answer another
    search); say where that run still is."""
    open_run = st.session_state.get("trace")
    if open_run is not None:
        q = open_run.query if len(open_run.query) <= 90 else open_run.query[:89] + "…"
        st.caption(f"No results for this search. The results of the run opened before (“{md_escape(q)}”) are "
                   "not shown here, so they cannot be taken for this search's; that run stays open on the other "
                   "pages, and **Runs** lists every saved run.")


def search_page() -> None:
    page_header("Crase Explorer", "Auditable literature search: seeds → citation graph → claim-level support "
                "pruning → recency-aware ranking. Every step can be opened and checked.")
    choice = corpora.chosen()
    demos = corpora.demo_queries(choice)
    if demos:
        st.markdown(f"**Try a demo query** on {md_escape(choice.name)}")
        # one row of buttons as wide as their labels (never cut), wrapping to a second row on a narrow screen
        with st.container(horizontal=True, gap="xsmall", wrap=True):
            for d in demos:
                if st.button(d["label"], key=f"demo_{d['label']}", help=d["query"], width="content"):
                    st.session_state["query_text"] = d["query"]
                    st.session_state["autorun"] = True
    # the question and its buttons are one form: typing and then clicking is one page run, not two (the text
    # box would otherwise send its value, and rerun the page, when the click takes the focus away)
    with st.form("search_form", border=False, enter_to_submit=False):
        query = st.text_area("Your literature-search question", key="query_text", height=76,
                             placeholder="e.g. Which papers explain the spectrum of strings on AdS3 via spectral flow?"
                             if choice.embedded else f"A literature-search question about {choice.name}'s papers")
        buttons = st.container(horizontal=True, gap="small")  # each as wide as its label (never cut)
        go = buttons.form_submit_button("Search", type="primary", icon=":material/search:")
        estimate = buttons.form_submit_button(
            "Estimate budget", icon=":material/calculate:",
            help="Plan, search seeds and expand the graph, then count the work the run needs "
            "(1 + |V| + |E|, less cached) without extracting claims or scoring edges.")
    operator = guarded(operator_settings, "The server's settings are invalid")
    if operator is None:
        return
    left, right = st.columns(2)
    with left:
        library = library_input(choice)
    with right, st.expander(f"Corpus: {choice.name} — import or embed", expanded=False):
        corpora.import_section()
        st.divider()
        corpora.embed_section(choice)
    with st.expander("Run settings", expanded=False):
        choices = runtime_form(operator, corpus=choice)
        st.divider()
        settings = guarded(lambda: settings_form(operator), "Invalid settings")
    autorun = st.session_state.pop("autorun", False)
    if settings is None:
        return
    if choices.get("backend") not in OFFLINE_BACKENDS:
        st.caption(model_limit_note(settings), help="Set in **Run settings** "  # our text and numbers only
                   "(Model budget: calls, tokens); docs/llm_backend.md explains the cascade.")
    engine_key = choices_json(choices)
    if choices.get("source") == "local" and choices.get("backend") in OFFLINE_BACKENDS:
        # only what reads local files: a model endpoint or a web API is contacted when the visitor runs, not
        # while they try choices out (each open would probe it, with the operator's key)
        prefetch_engine(engine_key)
    clicked = time.perf_counter()
    if estimate or go or autorun:
        try:
            q = clean_query(query)
        except CraseError as e:  # say what is wrong before any stage starts
            st.error(app_message(e), icon=":material/error:")
            return
    seeding: SeedingStage = search_seeds if library is None else LibrarySeeding(library.entries)
    if estimate:
        with st.status("Counting the work this query needs…", expanded=True) as status:
            board = ProgressBoard(status, clicked)
            board.opening()
            engine = guarded(lambda: open_engine(engine_key, board.building), "Could not open the source/backend")
            build = None
            if engine is not None:
                board.opened(engine)
                build = guarded(partial(build_graph, query, engine, settings, progress=board, seeding=seeding),
                                "Could not estimate the budget")
            status.update(label=f"Estimated in {board.elapsed:.1f} s" if build else "The estimate failed",
                          state="complete" if build else "error", expanded=False)
        if build is not None:
            st.info(budget_text(build.budget, board.model, build.components.backend.describe()),
                    icon=":material/calculate:")
            coverage_notice(build.seeding.coverage)
        open_run = st.session_state.get("trace")
        if open_run is not None and open_run.query != q:
            # never show another query's results under this estimate
            st.caption("The results of the open run (another query) are hidden while this estimate is shown; "
                       "press **Search** to run this query, or reopen that run on the **Runs** page.")
            return
    just_ran = None  # the run this click made, saved below once its results are drawn
    elapsed = 0.0
    if go or autorun:
        just_ran, elapsed = run_search(query, engine_key, settings, seeding, clicked)
        if just_ran is None:
            stale_notice()
            return
    trace = st.session_state.get("trace")
    if trace is None or trace_problem(trace) is not None:
        if trace is not None:
            current_trace()  # says why the open run cannot be shown
        return
    # one row above the cards (heading, the run in numbers, downloads, share), so that the first card shows
    # without scrolling at 1440×900; the run's own lines go into these slots once it is saved
    with st.container(horizontal=True, vertical_alignment="center", gap="small", key="results_bar"):
        st.subheader("Results", anchor=False, width="content")
        numbers = st.popover("This run in numbers", icon=":material/analytics:", type="tertiary")
        download_slot = st.popover("Download", icon=":material/download:", type="tertiary")
        share_slot = st.container(width="content")
        recall_slot = st.container(width="stretch")
    head, coverage, warnings = (st.container(key=f"results_{k}") for k in ("head", "coverage", "warnings"))
    with coverage:
        coverage_notice(trace.coverage)
    ranked_list(trace)
    with head:
        if just_ran is not None:
            save_and_open(just_ran)  # a problem saving shows here, above the results
            opened = st.session_state.get("trace")  # the saved run (its content id), or an identical earlier one
            if opened is not None and opened is not trace:  # the time the status line says (click → results)
                st.session_state.setdefault("elapsed", {})[opened.run_id] = elapsed
                trace = opened
        trace_notice()
    with numbers:
        run_caption(trace)
        run_summary(trace)
        semantic_note(trace, choice)
    with recall_slot:
        recall_caption(trace)  # visible where the list is, one line (what it rests on in its tooltip)
    with warnings:
        run_warnings(trace, choice)
    with download_slot:
        downloads(trace, key="search")
    with share_slot:
        html_share(trace)


@st.cache_resource(max_entries=8, show_spinner="Writing the HTML file…")
def html_bytes(_trace, run_id: str) -> bytes:
    """The run's one-file HTML share (computed once per run content id; bytes are immutable)."""
    return to_html(_trace).encode("utf-8")


def html_share(trace) -> None:
    """Share the run as one self-contained HTML file. Laying out the graph takes a few seconds on a large run,
    so the file is made on request (once per run), then offered like the other downloads (bytes, no rerun)."""
    if st.session_state.get("html_ready") != trace.run_id:
        st.button("Prepare a shareable HTML file", key="search_html_prepare", icon=":material/share:",
                  on_click=lambda: st.session_state.update(html_ready=trace.run_id),
                  help="One self-contained page: the evidence graph, the ranked list, and every edge's matrix, "
                  "claims and decision. It opens from disk with no server or network.")
    else:
        data = guarded(lambda: html_bytes(trace, trace.run_id), "Could not write the HTML file")
        if data is not None:
            st.download_button("Share as one HTML file (opens offline)", data=data,
                               file_name=f"{export.filename_stem(trace)}.html", mime="text/html", key="search_html",
                               on_click="ignore", icon=":material/download:")



search_page()
