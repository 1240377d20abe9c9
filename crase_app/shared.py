"""Streamlit building blocks shared by the Crase pages (presentation only, no pipeline logic).

Everything computed here comes from :mod:`crase_core`; this module lays it out.
Session state keys: ``trace`` (the open RunTrace), ``run_name``, ``selected``
(``{"kind": "edge", "citing", "cited"}`` or ``{"kind": "node", "id"}``), ``auditor``.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import streamlit as st
import streamlit.components.v1 as components

from crase_app.display import (
    ROLE_COLOURS,
    ROLE_LABELS,
    app_message,
    authors_line,
    md_escape,
    node_role,
    shorten_words,
    tex_markdown,
    tex_plain,
)
from crase_app.why import why_block
from crase_core.audit.store import AuditStore
from crase_core.errors import CraseError
from crase_core.ranking.pruning import score_name
from crase_core.ranking.trails import origin_text
from crase_core.records import EdgeRecord
from crase_core.redaction import install_log_filter
from crase_core.resources import graph_component_dir
from crase_core.runs import RunStore, with_content_id
from crase_core.runtime import BuildStep, build_engine
from crase_core.settings.config import load_settings, with_choices
from crase_core.trace import RunTrace
from crase_core.views import export

if TYPE_CHECKING:  # pandas and altair are imported where a table or chart is drawn, not on the Search page
    import altair as alt
    import pandas as pd

log = logging.getLogger("crase.app")
COMPONENT_DIR = graph_component_dir()
T = TypeVar("T")

# --- logging ---------------------------------------------------------------------------------------------------
@st.cache_resource(show_spinner=False)
def install_secret_log_filter() -> bool:
    """Once per server process: every log line goes through the secret filter (keys, URL passwords masked).

    Called when this module is imported, so it holds whichever page a visitor opens first.
    """
    root = logging.getLogger()
    if not root.handlers:  # records would reach Python's last-resort handler, which no filter can be put on
        handler = logging.StreamHandler()  # like the last-resort handler: warnings and errors, to stderr
        handler.setLevel(logging.WARNING)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    install_log_filter(root)
    install_log_filter(logging.getLogger("streamlit"))
    return True


install_secret_log_filter()


# --- resources (shared across sessions: read-only) -------------------------------------------------------
@st.cache_resource(show_spinner="Opening the paper source and model backend…")
def get_engine(choices_json: str) -> Any:
    """One engine per form choice (source, backend, allowed endpoint name, source knobs) over the operator's
    settings; sources and backends are read-only, so sessions share it."""
    from crase_core.ranking.walks import load_block_kernel

    load_block_kernel()  # a server: its attributions multiply blocks with scipy's kernel (loaded once)
    settings = with_choices(load_settings(), **json.loads(choices_json))
    return build_engine(settings.runtime, build_progress=partial(_record_build_step, choices_json))


# the latest corpus-build step per engine choice, written by whichever thread builds (the prefetch thread, or
# the page run of the first click); a page run that builds itself also gets each step through its own sink
_BUILD_STEPS: dict[str, BuildStep] = {}
_BUILD_LOCK = threading.Lock()
_STEP_SINK = threading.local()


def _record_build_step(choices_json: str, step: BuildStep) -> None:
    with _BUILD_LOCK:
        _BUILD_STEPS[choices_json] = step
    sink = getattr(_STEP_SINK, "fn", None)
    if sink is not None:
        sink(step)


def open_engine(choices_json: str, on_step: Callable[[BuildStep], None]) -> Any:
    """:func:`get_engine`, reporting the corpus build to ``on_step`` (stage, fraction, message) when the store
    and text index must be built first: from this page run when it builds them, or every 0.25 s while the
    background prefetch (:func:`prefetch_engine`) is building them. An opened store reports nothing."""
    thread = _PREFETCHING.get(choices_json)
    if thread is not None and not thread.is_alive():
        thread = None  # finished before this click: nothing to follow
    shown: BuildStep | None = None
    while thread is not None and thread.is_alive():
        with _BUILD_LOCK:
            step = _BUILD_STEPS.get(choices_json)
        if step is not None and step is not shown:
            on_step(step)
            shown = step
        thread.join(0.25)
    if thread is not None:  # the prefetch's last step (done), when its build ended between two looks
        with _BUILD_LOCK:
            step = _BUILD_STEPS.get(choices_json)
        if step is not None and step is not shown:
            on_step(step)
    _STEP_SINK.fn = on_step
    try:
        return get_engine(choices_json)
    finally:
        _STEP_SINK.fn = None


PREFETCH_THREAD = "crase-engine-prefetch"
_PREFETCHING: dict[str, threading.Thread] = {}  # the prefetch thread of each engine choice


class _NotFromPrefetch(logging.Filter):
    """Drops Streamlit's "missing ScriptRunContext" warning of the prefetch thread (it runs no script, by design)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != PREFETCH_THREAD


def _open_quietly(choices_json: str) -> None:
    try:
        get_engine(choices_json)
    except Exception:  # the click that needs the engine opens it again and shows the error
        log.debug("opening the engine ahead of the first query failed", exc_info=True)


@st.cache_resource(max_entries=8, show_spinner=False)
def prefetch_engine(choices_json: str) -> threading.Thread:
    """Start opening the engine for these choices in the background, once per server and choice, while the
    visitor types: the corpus and its search index (seconds on a fresh cache) are then ready, or nearer,
    at the click. :func:`get_engine` computes each engine once; a click during the prefetch waits for it."""
    ctx_log = logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context")
    if not any(isinstance(f, _NotFromPrefetch) for f in ctx_log.filters):
        ctx_log.addFilter(_NotFromPrefetch())
    thread = threading.Thread(target=_open_quietly, args=(choices_json,), name=PREFETCH_THREAD, daemon=True)
    with _BUILD_LOCK:  # a step left by an earlier build of these choices is not this prefetch's progress
        _BUILD_STEPS.pop(choices_json, None)
    _PREFETCHING[choices_json] = thread
    thread.start()
    return thread


def run_store() -> RunStore:
    """The saved runs, in the operator's ``storage.runs_dir`` (default: ``<cache dir>/runs``)."""
    return RunStore(load_settings().storage.runs_dir)


def audit_store() -> AuditStore:
    """The verdict store; says where a damaged store was set aside (the old file is kept, never deleted)."""
    store = AuditStore(run_store().directory / "audit.sqlite")
    aside = store.set_aside_files()
    if aside:
        st.warning("The audit store was not a readable database, so it was set aside and a new one started. "
                   "Verdicts recorded before are in " + ", ".join(code(p) for p in aside)
                   + " (kept unchanged; move it away once you have recovered what you need).",
                   icon=":material/warning:")
    return store


graph_component = components.declare_component("crase_graph", path=str(COMPONENT_DIR))


# --- errors ----------------------------------------------------------------------------------------------------
def guarded(fn: Callable[[], T], what: str) -> T | None:
    """Run ``fn``; show a CraseError as its message, anything else as a short generic message (logged)."""
    try:
        return fn()
    except CraseError as e:
        st.error(f"{what}: {app_message(e)}", icon=":material/error:")
    except Exception:
        log.exception("unexpected error while %s", what)
        st.error(f"{what}: an unexpected error occurred (details are in the server log).", icon=":material/error:")
    return None


# --- page scaffolding ------------------------------------------------------------------------------------------
CSS = """
<style>
.block-container, [data-testid="stMainBlockContainer"] {padding-top: 1.4rem; padding-bottom: 3rem; max-width: 1500px;}
h1 {padding-top: 0.6rem; padding-bottom: 0.4rem;}
.st-key-results_bar h3 {padding: 0.2rem 0;}
.st-key-inspector {scroll-margin-top: 4rem;}
.st-key-results_head [data-testid="stAlertContainer"], .st-key-results_coverage [data-testid="stAlertContainer"],
.st-key-results_warnings [data-testid="stAlertContainer"] {padding: .4rem .8rem;}
.st-key-results_head [data-testid="stAlert"] p, .st-key-results_coverage [data-testid="stAlert"] p,
.st-key-results_warnings [data-testid="stAlert"] p, .st-key-results_warnings [data-testid="stCaptionContainer"] p
{font-size: .86rem; line-height: 1.35;}
h1 {font-weight: 700; letter-spacing: -0.01em;}
[data-testid="stMetricValue"] {font-size: 1.45rem; font-weight: 600;}
[data-testid="stMetricLabel"] p {font-size: 0.82rem; color: #56616c;}
[data-testid="stMetricLabel"] p, [data-testid="stMetricLabel"] .stMarkdownEllipsis {white-space: normal !important; overflow: visible !important; text-overflow: clip !important;}
.crase-legend {display:flex; gap:1.1rem; flex-wrap:wrap; font-size:0.86rem; color:#4a5560; margin:.2rem 0 .4rem 0;}
.crase-legend span.dot {display:inline-block; width:.8rem; height:.8rem; border-radius:50%; margin-right:.35rem; vertical-align:-1px;}
.crase-legend span.line {display:inline-block; width:1.6rem; height:0; border-top:3px solid #1d3557; margin-right:.35rem; vertical-align:3px;}
[class*="st-key-card_"] {padding: .45rem .8rem .4rem .8rem; gap: .1rem;}
[class*="st-key-card_"] [data-testid="stCaptionContainer"] p {line-height: 1.4;}
[class*="st-key-card_"] [data-testid="stMarkdownContainer"] p {margin-bottom: 0;}
[class*="st-key-card_"] button {min-height: 1.9rem; padding-top: 0; padding-bottom: 0;}
.crase-legend span.dash {display:inline-block; width:1.6rem; height:0; border-top:2px dashed #d08c7f; margin-right:.35rem; vertical-align:3px;}
</style>
"""


def page_header(title: str, subtitle: str) -> None:
    st.markdown(CSS, unsafe_allow_html=True)  # static CSS only, no user text
    st.title(title)
    st.caption(subtitle)


def trace_problem(trace: RunTrace) -> str | None:
    """Why the pages cannot show ``trace`` (a result that is not among its nodes), or None."""
    node_ids = {n.paper.id for n in trace.nodes}
    for i, r in enumerate(trace.results):
        if r.paper_id not in node_ids:
            return f"result {i + 1} ({r.paper_id!r}) is not among the run's papers"
    return None


def current_trace() -> RunTrace | None:
    """The run open in this browser session, or a pointer to the Search page (or a clear error, never a crash)."""
    trace = st.session_state.get("trace")
    if trace is None:
        st.info("No run is open yet. Run a query on the **Search** page, or open a saved run on the **Runs** page.",
                icon=":material/search:")
        return None
    problem = trace_problem(trace)
    if problem is not None:
        st.error(f"The open run cannot be shown: {md_escape(problem)}. Open another run on the **Runs** page.",
                 icon=":material/error:")
        return None
    return trace


def trace_page(title: str, subtitle: str) -> RunTrace:
    """Header, then the open run and its caption; stops the page (with a pointer) when no run is open."""
    page_header(title, subtitle)
    trace = current_trace()
    if trace is None:
        st.stop()
    run_caption(trace)
    return trace


def open_trace(trace: RunTrace, name: str, notice: str = "", *, identified: bool = False) -> bool:
    """Make ``trace`` this session's open run (its ``run_id`` = its content id, which keys every cache).

    Refuses (with a clear error, returns False) a trace the pages cannot show. ``notice`` is shown once
    above the run (:func:`trace_notice`). ``identified``: the trace comes from the :class:`RunStore`
    (save, load, import), which gives every trace its content id, so it is not hashed again.
    """
    problem = trace_problem(trace)
    if problem is not None:
        st.error(f"This run cannot be opened: {md_escape(problem)}.", icon=":material/error:")
        return False
    st.session_state["trace"] = trace if identified else with_content_id(trace)
    st.session_state["run_name"] = name
    st.session_state["selected"] = None
    st.session_state["trace_notice"] = notice
    return True


def trace_notice() -> None:
    """The note left by :func:`open_trace` (e.g. that an identical saved run was reopened)."""
    notice = st.session_state.get("trace_notice")
    if notice:
        st.info(notice, icon=":material/history:")


def run_caption(trace: RunTrace) -> None:
    c = trace.stage_counts()
    st.caption(
        f"Query: {md_escape(trace.query)}  \n"
        f"{c['seeds']} seeds ({c['seeds_kept']} kept) · |V| {c['nodes']:,} ({c['nodes_kept']:,} kept) · "
        f"|E| {c['edges']:,} ({c['edges_kept']:,} kept) · ranker {md_escape(trace.ranking.ranker)} · "
        f"source {md_escape(trace.source)} · backend {md_escape(trace.backend.get('backend', '?'))} · "
        f"run {md_escape(trace.run_id)}"
    )


def legend() -> None:
    """The graph's colour / size / edge key, as constant text (the graph component also draws it)."""
    items = "".join(
        f'<span><span class="dot" style="background:{ROLE_COLOURS[r]}"></span>{ROLE_LABELS[r]}</span>'
        for r in ("seed_kept", "seed_pruned", "expanded", "expanded_pruned", "text")
    )
    items += "<span>node size = score (share of the ranking walk)</span>"
    items += '<span><span class="line"></span>kept edge (darker, thicker = higher Δ)</span>'
    items += '<span><span class="dash"></span>pruned edge (Δ ≤ τ)</span>'
    st.markdown(f'<div class="crase-legend">{items}</div>', unsafe_allow_html=True)  # constant text only


# --- settings ----------------------------------------------------------------------------------------------------
# --- inspectors --------------------------------------------------------------------------------------------------
#: what each threshold is, after its value in the matrix caption (RunTrace.threshold names it)
THRESHOLD_OF = {"θ": " (the threshold of edges a model scored)",
                "θ_lexical": " (the threshold of edges the offline word-overlap scorer decided)",
                "θ_similarity": " (the threshold of edges the claim-similarity scorer decided)"}
SCORER_BADGES = {
    "model": ("entailment (model)", "blue", ":material/smart_toy:"),
    "offline": ("word-overlap support (offline scorer, not entailment)", "orange", ":material/rule:"),
    "similarity": ("claim similarity (MiniLM, on-device; not entailment)", "violet", ":material/rule:"),
}
#: what M[i][j] is, by scorer (the matrix caption's first words; ``{shape}``: n_u × n_v)
MATRIX_MEANING = {
    "model": "**Entailment (model)** ({shape}): M[i][j] = ent(claim i of u | claim j of v), the model's score that "
             "claim j of v entails claim i of u.",
    "offline": "**Word-overlap support** ({shape}): M[i][j] = the share of claim i of u's informative words (content "
               "words weighted by their rarity in the corpus, IDF) that claim j of v also uses. Not entailment: "
               "shared words cannot tell support from contradiction.",
    "similarity": "**Claim similarity (MiniLM)** ({shape}): M[i][j] = max(0, cosine) of the on-device "
                  "all-MiniLM-L6-v2 vectors of claim i of u and claim j of v. Not entailment: closeness in meaning "
                  "cannot tell support from contradiction.",
}


def claim_marks(e: EdgeRecord) -> list[str]:
    """One mark per citing claim: ✓ supported (some cited claim reaches the edge's θ: what Δ counts), ✗ not."""
    return ["✓" if i < len(e.supported) and e.supported[i] else "✗" for i in range(len(e.matrix) or len(e.supported))]


def _safe_url(url: str) -> str | None:
    return url if url.startswith(("https://", "http://")) and " " not in url and ")" not in url else None


def code(text: object) -> str:
    """Inline code span (its content is never interpreted as markdown or HTML)."""
    return "`" + str(text).replace("`", "'").replace("\n", " ") + "`"


def paper_line(trace: RunTrace, pid: str) -> str:
    """``Title (year)`` as markdown with the title's TeX rendered (:func:`tex_markdown`; show it with
    ``unsafe_allow_html=True``: the input is escaped, the only HTML is the renderer's own marks)."""
    n = trace.node(pid)
    return f"{tex_markdown(n.paper.title)} ({n.paper.year or 'n.d.'})"


def claims_frame(trace: RunTrace, pid: str, supported: list[bool] | None = None) -> pd.DataFrame:
    """The paper's claims as a table (for downloads and data views; the inspectors use :func:`claims_markdown`)."""
    import pandas as pd

    cs = trace.claims.get(pid)
    rows = []
    for i, c in enumerate(cs.claims if cs else []):
        row = {"claim": c.id, "type": c.type.lower(), "text": c.text, "source phrase": c.source_phrase,
               "verbatim": "yes" if c.verbatim else "NO"}
        if supported is not None:
            row = {"supported": ("✓" if supported[i] else "✗") if i < len(supported) else "–", **row}
        rows.append(row)
    return pd.DataFrame(rows)


def claims_markdown(trace: RunTrace, pid: str, supported: list[bool] | None = None, *, verbatim: bool = True,
                    marks: list[str] | None = None) -> str:
    """The paper's claims as a two-column markdown table (id and type | text) whose cells wrap: every claim
    in full, TeX rendered (:func:`tex_markdown`: show it with ``unsafe_allow_html=True``), the source phrase when it differs from the claim,
    ``✓``/``✗`` (supported at the scorer's own θ) before the id when ``supported`` is given (``marks``: one
    mark per claim instead, :func:`claim_marks`), a warning when a claim is not verbatim (``verbatim=False``
    hides that, for the blind audit). ``""`` when the paper has no claims."""
    if marks is None and supported is not None:
        marks = ["✓" if x else "✗" for x in supported]
    cs = trace.claims.get(pid)
    if not cs or not cs.claims:
        return ""
    lines = ["| claim | text |", "|---|---|"]
    for i, c in enumerate(cs.claims):
        text = tex_markdown(c.text, in_table=True)
        if c.source_phrase and " ".join(c.source_phrase.split()) != " ".join(c.text.split()):
            text += f" — *source:* “{tex_markdown(c.source_phrase, in_table=True)}”"
        if verbatim and not c.verbatim:
            text += " — **⚠ not verbatim in the abstract**"
        mark = ((marks[i] if i < len(marks) else "–") + " ") if marks is not None else ""
        lines.append(f"| {mark}{code(c.id)} *{md_escape(c.type.lower())}* | {text} |")
    return "\n".join(lines)


def cell_value(v: float) -> str:
    """A matrix cell as the heat map and the "Matrix values" table both show it: cut, not rounded, to 2 decimals,
    so that a cell below θ never reads as θ (0.749 shows 0.74, not 0.75) and the two never disagree."""
    return f"{math.floor(float(v) * 100 + 1e-9) / 100:.2f}"


def legend_values(stops: Sequence[float], min_gap: float = 0.12) -> list[float]:
    """The heat map legend's labels: 0, 1 and the colour scale's inner stops (the edge's θ), each only where it
    lies at least ``min_gap`` from every label kept (a θ_lexical of 0.05 beside 0 would print "00.05"; the caption
    names it)."""
    kept = [stops[0], stops[-1]]
    for t in sorted(stops[1:-1], reverse=True):
        if all(abs(t - k) >= min_gap for k in kept):
            kept.append(t)
    return sorted(kept)


def _claim_axis_label(cid: str, text: str, mark: str, limit: int) -> str:
    return f"{cid}{(' ' + mark) if mark else ''} · {shorten_words(tex_plain(text), limit)}"


def matrix_chart(edge: EdgeRecord, theta: float, citing: Sequence[tuple[str, str]],
                 cited: Sequence[tuple[str, str]]) -> alt.LayerChart:
    """Heat map of M (rows: citing claims, columns: cited claims), titled by what M is (:func:`score_name`), each
    row and column labelled with its claim (id, its mark of :func:`claim_marks` for rows, the text cut at a word
    boundary); hovering a cell shows both claims in full and the value; cells ≥ ``theta`` (the edge's one θ: a
    row with such a cell is ✓ supported and counted in Δ) are outlined, their values bold. ``citing``/``cited``:
    ``(id, text)``."""
    import altair as alt
    import pandas as pd

    name = score_name(edge.scorer)
    marks = claim_marks(edge)
    rows = []
    n_cols = len(edge.matrix[0]) if edge.matrix else 0
    for i, row in enumerate(edge.matrix):
        mark = marks[i] if i < len(marks) else "✗"
        cid, ctext = citing[i] if i < len(citing) else (f"c{i + 1}", "")
        for j, v in enumerate(row):
            vid, vtext = cited[j] if j < len(cited) else (f"c{j + 1}", "")
            rows.append({
                "row": _claim_axis_label(cid, ctext, mark, 70),
                "col": _claim_axis_label(vid, vtext, "", 44 if n_cols <= 4 else 30),
                "citing claim": f"{cid} {mark}: {tex_plain(ctext)}",
                "cited claim": f"{vid}: {tex_plain(vtext)}",
                "score": float(v),
                "supports": bool(v >= theta),
                "shown": cell_value(v),
            })
    df = pd.DataFrame(rows)
    y_order = list(dict.fromkeys(df["row"])) if not df.empty else []
    x_order = list(dict.fromkeys(df["col"])) if not df.empty else []
    base = alt.Chart(df).encode(
        x=alt.X("col:N", sort=x_order, title=None,
                axis=alt.Axis(orient="top", labelAngle=-22, labelAlign="left", labelLimit=260, labelFontSize=12,
                              labelOverlap=False)),
        y=alt.Y("row:N", sort=y_order, title=None,
                axis=alt.Axis(labelLimit=460, labelFontSize=12, labelOverlap=False)),
    )
    # stops at the thresholds strictly inside (0, 1) (θ_lexical 0: every cell counts; it would repeat a stop)
    inner = [theta] if 0 < theta < 1 else []
    stops = [0.0, *inner, 1.0]
    palette = {2: ["#f4f6f8", "#08306b"], 3: ["#f4f6f8", "#9ecae1", "#08306b"]}[len(stops)]
    scale = alt.Scale(domain=stops, range=palette)
    tooltip = [alt.Tooltip("citing claim:N"), alt.Tooltip("cited claim:N"),
               alt.Tooltip("score:Q", format=".3f", title=name),
               alt.Tooltip("supports:N", title=f"supports (≥ {theta:g})")]
    rect = base.mark_rect().encode(
        # the legend under the map, across, as long as the map is wide (200 to 480 px): its length never depends
        # on how many rows the matrix has (a vertical one taller than a one- or two-row map was cut off)
        color=alt.Color("score:Q", scale=scale, title=name,
                        legend=alt.Legend(values=legend_values(stops), format=".2~f", orient="bottom",
                                          direction="horizontal",
                                          gradientLength=alt.ExprRef(expr="clamp(width - 12, 200, 480)"),
                                          gradientThickness=12, labelOverlap=False, labelAlign="center",
                                          titleOrient="top", titleAnchor="start")),
        tooltip=tooltip,
    )
    outline = base.transform_filter(alt.datum["supports"]).mark_rect(fill=None, stroke="#e76f51", strokeWidth=3)
    colour = alt.condition(alt.datum.score > max(0.5, (theta + 1) / 2 - 0.1), alt.value("white"),
                           alt.value("#1f2933"))
    value = alt.Text("shown:N")
    text = base.transform_filter(~alt.datum["supports"]).mark_text(fontSize=13).encode(
        text=value, color=colour, tooltip=tooltip)
    strong = base.transform_filter(alt.datum["supports"]).mark_text(fontSize=13, fontWeight="bold").encode(
        text=value, color=colour, tooltip=tooltip)
    # room on the right for the last column's label, which slants up and to the right past the map's edge: its
    # length at 12 px (about 6.6 px a character, at most the label limit) along the slant, less half a column
    last = x_order[-1] if x_order else ""
    right = int(max(24.0, min(260.0, 6.6 * len(last)) * math.cos(math.radians(22)) - 30.0))
    return (rect + outline + text + strong).properties(height=alt.Step(44), padding={"left": 5, "top": 5,
                                                                                    "right": right, "bottom": 5})


def scorer_badge(e: EdgeRecord) -> None:
    """Who scored the edge (``EdgeRecord.scorer``: model or offline fallback) and why, when the run says."""
    scorer = getattr(e, "scorer", None)
    if not scorer:
        return
    label, colour, icon = SCORER_BADGES.get(str(scorer), (f"scored by {scorer}", "gray", ":material/info:"))
    st.badge(label, color=colour, icon=icon)  # type: ignore[arg-type]
    reason = getattr(e, "scorer_reason", None)
    if reason:
        st.caption(md_escape(reason))


def support_help(trace: RunTrace, e: EdgeRecord) -> str:
    """What ✓ means for this edge: the claims some cited claim reaches at the edge's one θ, which Δ counts."""
    theta_name, theta = trace.threshold(e)
    text = (f"Citing claims i with max_j M[i][j] ≥ {theta_name} = {theta:g} (Eq. 3): the claims Δ counts, at the "
            f"threshold{THRESHOLD_OF.get(theta_name, '')}.")
    if e.scorer == "model":
        return text
    if e.scorer == "similarity":
        return text + " Closeness in meaning is not entailment: a claim and its negation are close."
    return text + " Shared words are not entailment: a contradicting claim can share as many."


def edge_inspector(trace: RunTrace, citing: str, cited: str, *, audit: bool = True, key: str = "insp") -> None:
    try:
        e = trace.edge(citing, cited)
    except KeyError:
        st.warning("That edge is not part of this run.")
        return
    st.markdown(f"##### Edge {code(citing)} → {code(cited)}")
    st.markdown(f"**u (citing):** {paper_line(trace, citing)}  \n**v (cited):** {paper_line(trace, cited)}",
                unsafe_allow_html=True)  # paper_line: the TeX renderer's markdown (input escaped, its own marks)
    (st.success if e.kept else st.error)(f"Decision — {md_escape(e.decision)}", icon=":material/check_circle:" if e.kept else ":material/content_cut:")
    scorer_badge(e)
    k, n = sum(e.supported), len(e.supported)
    m1, m2, m3, m4 = st.columns(4)
    theta_name, theta = trace.threshold(e)
    m1.metric("Δ (coverage)", f"{e.delta:.3f}", help=f"Δ(u,v) = share of u's claims that some claim of v reaches at "
              f"{theta_name} = {theta:g} (Eq. 4): the {k} of {n} marked supported.")
    m2.metric("supported", f"{k} of {n}", help=support_help(trace, e))
    m3.metric("age factor", f"{e.age_factor:.3f}", help=f"age(v)^(−β): v is {e.age_years:g} years old against "
              f"{trace.reference_year}, β = {trace.settings.beta:g}.")
    m4.metric("weight w", f"{e.weight:.3f}", help="w(u→v) = Δ · age(v)^(−β) (Eq. 5); 0 for a pruned edge.")
    if e.error:
        st.warning(f"Scoring failed for this edge: {md_escape(e.error)}")
    cu = trace.claims.get(citing)
    cv = trace.claims.get(cited)
    marks = claim_marks(e)
    if e.matrix:
        shape = f"{len(e.matrix)} × {len(e.matrix[0]) if e.matrix else 0}"
        meaning = MATRIX_MEANING.get(e.scorer, MATRIX_MEANING["offline"]).format(shape=shape)
        key_text = (f"Outlined: ≥ {theta_name} {theta:g}{THRESHOLD_OF.get(theta_name, '')} (✓ supported, counted "
                    "in Δ; ✗ not).")
        st.markdown(f"{meaning} Rows: claims of u; columns: claims of v. {key_text} Hover a cell for both claims "
                    "in full.")
        st.altair_chart(
            matrix_chart(e, theta, [(c.id, c.text) for c in cu.claims] if cu else [],
                         [(c.id, c.text) for c in cv.claims] if cv else []),
            width="stretch",
        )
        with st.expander("Matrix values"):
            head = "| u \\ v | " + " | ".join(code(c.id) for c in (cv.claims if cv else [])) + " |"
            sep = "|---" * (1 + (len(cv.claims) if cv else 0)) + "|"
            lines = [head, sep] if cv and len(cv.claims) == len(e.matrix[0]) else []
            for i, row in enumerate(e.matrix):
                cid = cu.claims[i].id if cu and i < len(cu.claims) else f"c{i + 1}"
                mark = marks[i] if i < len(marks) else "✗"
                lines.append(f"| {code(cid)} {mark} | " + " | ".join(cell_value(x) for x in row) + " |")
            st.markdown("\n".join(lines) if lines and lines[0].startswith("| u") else
                        "  \n".join(" ".join(cell_value(x) for x in row) for row in e.matrix))
    else:
        st.caption("No matrix: one of the papers has no claims.")
    st.markdown("**Citation context**")
    if e.contexts:
        for ctx in e.contexts:
            st.markdown(f"> {tex_markdown(ctx)}", unsafe_allow_html=True)
    else:
        st.caption("The paper source has no citing sentence for this edge.")
    if e.intents:
        st.caption("Citation intent (from the source): " + ", ".join(md_escape(i) for i in e.intents))
    left, right = st.columns(2, gap="medium")
    with left:
        st.markdown(f"**Claims of u** — {paper_line(trace, citing)}", unsafe_allow_html=True)
        st.markdown(claims_markdown(trace, citing, marks=marks) or "_No claims._", unsafe_allow_html=True)
    with right:
        st.markdown(f"**Claims of v** — {paper_line(trace, cited)}", unsafe_allow_html=True)
        st.markdown(claims_markdown(trace, cited) or "_No claims._", unsafe_allow_html=True)
    if audit:
        audit_form(trace, e, key=key)


def audit_form(trace: RunTrace, e: EdgeRecord, key: str) -> None:
    """Agree / disagree with this edge's decision, stored per auditor in SQLite."""
    st.markdown("**Audit this decision**")
    auditor = st.session_state.get("auditor", "").strip()
    if not auditor:
        st.caption("Enter your auditor name in the sidebar to record verdicts.")
        return
    store = audit_store()
    prior = store.verdict_for(trace.run_id, e.citing, e.cited, auditor)
    if prior:
        st.caption(f"Your verdict: **{prior.verdict}**" + (f" — {md_escape(prior.note)}" if prior.note else "")
                   + f" ({prior.created_at})")
    with st.form(key=f"{key}_audit_{e.citing}_{e.cited}", border=True):
        choice = st.radio("The pipeline's decision is…", ["agree", "disagree"], horizontal=True,
                          index=0 if not prior or prior.verdict == "agree" else 1,
                          format_func=lambda x: "right (agree)" if x == "agree" else "wrong (disagree)")
        note = st.text_input("Note (optional)", value=prior.note if prior else "", max_chars=2000)
        if st.form_submit_button("Record verdict", type="primary"):
            saved = guarded(lambda: store.record(trace.run_id, e.citing, e.cited, auditor, choice, e.kept, note),
                            "Could not record the verdict")
            if saved:
                st.toast(f"Recorded: {saved.verdict}")
                st.rerun()



def node_inspector(trace: RunTrace, pid: str) -> None:
    try:
        n = trace.node(pid)
    except KeyError:
        st.warning("That paper is not part of this run.")
        return
    p = n.paper
    role = node_role(n)
    st.markdown(f"##### {tex_markdown(p.title)}", unsafe_allow_html=True)  # the TeX renderer: input escaped
    url = _safe_url(p.url)
    st.markdown(f"{p.year or 'n.d.'} · {tex_markdown(authors_line(list(p.authors), 6))}"
                + (f" · {md_escape(p.venue)}" if p.venue else "") + (f" · [{md_escape(p.id)}]({url})" if url else
                                                                     f" · {code(p.id)}"), unsafe_allow_html=True)
    st.markdown(f'<span style="color:{ROLE_COLOURS[role]};font-weight:600">● {ROLE_LABELS[role]}</span>',
                unsafe_allow_html=True)  # role label is our constant text
    if n.in_library:
        st.markdown(":green-badge[:material/bookmark: already in your library]")
    m1, m2, m3 = st.columns(3)
    m1.metric("score", f"{n.score:.4f}" if n.kept else "–")
    m2.metric("rank", str(n.rank) if n.rank else "–")
    ins = [e for e in trace.edges if e.cited == pid]
    outs = [e for e in trace.edges if e.citing == pid]
    m3.metric("edges kept", f"{sum(e.kept for e in ins + outs)} of {len(ins) + len(outs)}")
    seed = next((s for s in trace.seeds if s.paper_id == pid), None)
    if seed:
        st.markdown(f"**Seed fate:** {'✓' if seed.fate == 'kept' else '✗'} {md_escape(seed.fate_reason)}")
        for o in seed.origins:
            st.markdown(f"- {md_escape(origin_text(o))}" + ("" if o.kind == "library" else f" (t = {o.t})"))
    if not n.kept:
        st.markdown(f"**Pruned:** {md_escape(n.prune_reason)}")
    result = next((r for r in trace.results if r.paper_id == pid), None)
    if result:
        st.markdown(f"**Why it is here:** {md_escape(result.reason)}")
        why_block(trace, pid)
    if p.abstract:
        with st.expander("Abstract"):
            st.markdown(tex_markdown(p.abstract), unsafe_allow_html=True)
    st.markdown("**Claims**")
    cs = trace.claims.get(pid)
    if cs and cs.error:
        st.warning(f"Claim extraction failed: {md_escape(cs.error)}")
    st.markdown(claims_markdown(trace, pid) or "_No claims._", unsafe_allow_html=True)
    st.markdown("**Edges** (select a row to inspect it)")
    rows = [{"Δ": round(e.delta, 3), "kept": e.kept, "direction": "cites →" if e.citing == pid else "← cited by",
             "other paper": tex_plain(trace.node(e.cited if e.citing == pid else e.citing).paper.title),
             "citing": e.citing, "cited": e.cited} for e in outs + ins]
    rows.sort(key=lambda r: (not r["kept"], -float(r["Δ"])))
    import pandas as pd

    df = pd.DataFrame(rows)
    event = st.dataframe(df, hide_index=True, width="stretch", on_select="rerun",
                         selection_mode="single-row", key=f"node_edges_{pid}",
                         column_config={"citing": None, "cited": None,
                                        "Δ": st.column_config.NumberColumn("Δ", format="%.3f", width="small", pinned=True),
                                        "kept": st.column_config.CheckboxColumn("kept", width="small", pinned=True),
                                        "other paper": st.column_config.TextColumn("other paper", width="large")})
    sel = event.selection.rows if event else []
    if sel:
        r = rows[sel[0]]
        st.session_state["selected"] = {"kind": "edge", "citing": r["citing"], "cited": r["cited"]}
        st.rerun()


def inspector(trace: RunTrace, key: str = "insp") -> None:
    sel = st.session_state.get("selected")
    if not sel:
        st.info("Click an edge or a paper in the graph — or select a row of the edge table — to inspect it.",
                icon=":material/touch_app:")
        return
    if sel.get("kind") == "edge":
        edge_inspector(trace, sel["citing"], sel["cited"], key=key)
    else:
        node_inspector(trace, sel["id"])


# --- downloads ---------------------------------------------------------------------------------------------------
EXPORTS: dict[str, tuple[str, str, str, Callable[[RunTrace], str | bytes]]] = {
    # format → (button label, file extension, MIME type, exporter)
    "json": ("Trace (JSON)", "json", "application/json", export.to_json),
    "bibtex": ("BibTeX", "bib", "application/x-bibtex", export.to_bibtex),
    "ris": ("RIS", "ris", "application/x-research-info-systems", export.to_ris),
    "csv": ("CSV", "csv", "text/csv", export.to_csv),
    "graphml": ("Graph (GraphML)", "graphml", "application/graphml+xml", export.to_graphml),
}


#: exports made when their button is clicked, not on every page run: GraphML of a 700-paper run takes a
#: second or more (the others take milliseconds and are passed as bytes).
MADE_ON_CLICK = frozenset({"graphml"})


@st.cache_resource(max_entries=64, show_spinner=False)
def export_bytes(_trace: RunTrace, run_id: str, fmt: str) -> bytes:
    """The export ``fmt`` of the run whose content id is ``run_id`` (computed once; bytes are immutable)."""
    data = EXPORTS[fmt][3](_trace)
    return data.encode("utf-8") if isinstance(data, str) else data


def _export_on_click(trace: RunTrace, fmt: str) -> bytes:
    """What a deferred download button runs when clicked (in Streamlit's download thread, not the page)."""
    try:
        return export_bytes(trace, trace.run_id, fmt)
    except Exception:
        log.exception("the %s export failed", fmt)  # the browser's download fails; the page stays up
        raise


def downloads(trace: RunTrace, key: str) -> None:
    """One download button per export format.

    ``trace`` is the open run (:func:`open_trace` gave it its content id). The quick exports are passed
    as bytes computed once per run (keyed by that content id), so a rerun registers the same media file
    under the same URL; the slow ones (:data:`MADE_ON_CLICK`) are made when clicked (then kept, keyed the
    same way), so showing the buttons costs no time. No click reruns the page (``on_click="ignore"``):
    a second click in quick succession never asks for a file that a rerun has just dropped (Streamlit's
    deferred download ids are new on every run, which lost the second file when every click reran).
    """
    stem = export.filename_stem(trace)
    cols = st.columns(len(EXPORTS))
    for col, (fmt, (label, ext, mime, _)) in zip(cols, EXPORTS.items(), strict=True):
        data: bytes | Callable[[], bytes] | None
        if fmt in MADE_ON_CLICK:
            data = partial(_export_on_click, trace, fmt)
        else:
            data = guarded(partial(export_bytes, trace, trace.run_id, fmt), f"Could not export {label}")
        if data is None:
            continue
        col.download_button(label, data=data, file_name=f"{stem}.{ext}", mime=mime, key=f"{key}_dl_{fmt}",
                            on_click="ignore", width="stretch", icon=":material/download:")
