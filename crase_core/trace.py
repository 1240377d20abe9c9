"""The run trace: one JSON-serialisable record of everything a run produced.

``RunTrace`` is a dataclass; :func:`dumps`/:func:`loads` go through pydantic's
``TypeAdapter`` so that ``loads(dumps(t)) == t`` (the same objects back). A
trace holds no secrets: backends describe themselves without keys.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from crase_core import atomic
from crase_core.errors import TraceError
from crase_core.llm.cost_report import uses_model
from crase_core.ranking.pruning import scorer_rule
from crase_core.records import (
    AppliedVerdict,
    Budget,
    ClaimSet,
    Counters,
    EdgeRecord,
    NodeRecord,
    PlanResult,
    QueryCoverage,
    RankedPaper,
    RankingResult,
    RecallEstimate,
    SearchHit,
    Seed,
    SubQueryResult,
    Truncation,
    UserLibrary,
)
from crase_core.settings.pipeline import PipelineSettings
from crase_core.views.terminal import printable

if TYPE_CHECKING:
    from pydantic import TypeAdapter

#: the schema this Crase writes; a trace of an earlier version is read through :data:`MIGRATIONS`. A field added
#: with a default that means "not recorded" (``recall_estimate``: None) needs no new version: an older trace
#: without it reads as a run without it, and nothing is filled in for it.
TRACE_VERSION = 3

#: what a version-1 trace that does not record a knob ran with (the default of that time, "round 3"): five
#: sub-queries for any planner, the word-overlap scorer's edges judged at 0.15 and pruned at τ, no question seeds,
#: no term proximity, no anchor text in the restart, a fixed μ 0.4; θ_lexical and τ_lexical are the trace's own θ
#: and τ (one θ and one τ decided every edge then). Migration data of :func:`_v1_to_v2`.
ROUND3_DEFAULTS: dict[str, Any] = {"L_offline": 5, "theta_lexical": 0.15, "tau_lexical": 0.0, "query_seeds": 0,
                                   "proximity_weight": 0.0, "proximity_window_weight": 0.0,
                                   "anchor_restart_weight": 0.0, "text_rank_weight": 0.4,
                                   "text_rank_confidence": 0.0, "text_rank_specificity": 0.0,
                                   "semantic_feedback_weight": 0.0, "semantic_feedback_scope": "all",
                                   "dense_seed_weight": 0.0, "dense_restart_weight": 0.0,
                                   "dense_fusion_weight": 0.0}
#: the largest trace file :func:`load` reads (a cap, so a huge or endless file cannot exhaust memory).
MAX_TRACE_BYTES = 512 << 20


@dataclass
class RunTrace:
    """Parameters, plan, seeds and fates, graph, matrices, decisions, scores, timings, costs."""

    #: pydantic's settings for (de)serialising it, nested records included: a trace holds finite numbers only
    __pydantic_config__: ClassVar[dict[str, Any]] = {"allow_inf_nan": False}

    query: str
    settings: PipelineSettings
    source: str
    source_filter: str
    backend: dict[str, str]
    reference_year: int
    plan: PlanResult
    subquery_results: list[SubQueryResult]
    seeds: list[Seed]
    nodes: list[NodeRecord]
    claims: dict[str, ClaimSet]
    edges: list[EdgeRecord]
    truncations: list[Truncation]
    budget: Budget
    ranking: RankingResult
    results: list[RankedPaper]
    timings: dict[str, float] = field(default_factory=dict)
    counters: Counters = field(default_factory=Counters)
    warnings: list[str] = field(default_factory=list)
    source_stats: dict[str, float] = field(default_factory=dict)  # this run's share of the source's counters
    query_hits: list[SearchHit] = field(default_factory=list)  # the full-query search (query restart, text candidates)
    #: the walk's restart list when it differed from ``query_hits`` (anchor text in the restart); None: query_hits
    restart_hits: list[SearchHit] | None = None
    created_at: str = ""
    run_id: str = ""
    coverage: QueryCoverage | None = None  # how much the corpus has on the query (weak-match notice)
    library: UserLibrary | None = None  # the user's own papers, when the run was given them
    #: whether the run's searches were fused with semantic feedback (asked for, and embeddings for the corpus)
    semantic_feedback: bool = False
    #: the run this one was re-ranked from by auditors' verdicts (``crase rerank``; "" for a run of the pipeline)
    parent_run_id: str = ""
    applied_verdicts: list[AppliedVerdict] = field(default_factory=list)  # the verdicts that re-ranking applied
    #: what semantic feedback read (model, where from), or why it was off and how to turn it on
    semantic_note: str = ""
    #: the run's estimate of its own recall@k (None in a trace written before estimates: nothing is guessed for it)
    recall_estimate: RecallEstimate | None = None
    #: whether the question was embedded and fused with the search (crase_core.retrieval.dense)
    dense_question: bool = False
    #: what the question's embedding read (model), or why the run ranked by words
    dense_note: str = ""
    trace_version: int = TRACE_VERSION

    # --- convenient views (not serialised) ---
    def node(self, paper_id: str) -> NodeRecord:
        for n in self.nodes:
            if n.paper.id == paper_id:
                return n
        raise KeyError(paper_id)

    def edge(self, citing: str, cited: str) -> EdgeRecord:
        for e in self.edges:
            if e.citing == citing and e.cited == cited:
                return e
        raise KeyError((citing, cited))

    def threshold(self, e: EdgeRecord) -> tuple[str, float]:
        """(name, value) of the one θ that decided edge ``e``'s s_i — its ✓ marks and Δ: ``("θ", theta)`` for an
        edge a model scored, ``("θ_lexical", theta_lexical)`` for one the offline lexical scorer decided
        (:data:`crase_core.ranking.pruning.SCORERS`; the value the edge records, the settings' when it records
        none)."""
        rule = scorer_rule(e.scorer)
        return rule.theta_label, e.theta if e.theta is not None else rule.theta(self.settings)

    @property
    def model_ran(self) -> bool:
        """Whether a model did the plan/claims/scoring work (False for the offline backend's lexical parts)."""
        return uses_model(self.backend)

    def stage_counts(self) -> dict[str, int]:
        kept_nodes = sum(1 for n in self.nodes if n.kept)
        kept_edges = sum(1 for e in self.edges if e.kept)
        return {
            "subqueries": len(self.plan.subqueries),
            "seeds": len(self.seeds),
            "seeds_kept": sum(1 for s in self.seeds if s.fate == "kept"),
            "nodes": len(self.nodes),
            "edges": len(self.edges),
            "edges_kept": kept_edges,
            "nodes_kept": kept_nodes,
            "results": len(self.results),
        }


@lru_cache(maxsize=1)
def _adapter() -> TypeAdapter[RunTrace]:
    from pydantic import TypeAdapter  # at first (de)serialisation: a run that writes no trace never loads it

    return TypeAdapter(RunTrace)


def to_dict(trace: RunTrace) -> dict:
    return _adapter().dump_python(trace, mode="json")


def dumps(trace: RunTrace, indent: int | None = None) -> str:
    return _adapter().dump_json(trace, indent=indent).decode("utf-8")


def _no_constant(name: str) -> float:
    raise TraceError(f"not a valid Crase trace: the number {name} is not finite (a trace holds finite numbers only)")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        _no_constant(text)
    return value


def loads(text: str | bytes) -> RunTrace:
    """A trace from JSON text; :class:`TraceError` for anything else (``NaN``, ``Infinity``, ``1e999`` included).

    The text is parsed by pydantic's JSON parser (about twice as fast as ``json`` with a check of every number);
    text it refuses (``NaN``, ``Infinity``, malformed, nested too deeply) and a number it reads as infinite
    (``1e999``) are read again by :func:`_parse_exactly`, whose error names the fault."""
    from pydantic_core import from_json

    try:
        data = from_json(text, allow_inf_nan=False)
    except ValueError:
        return from_dict(_parse_exactly(text))
    try:
        return from_dict(data)
    except TraceError:
        _parse_exactly(text)  # a number read as infinite is the fault (the exact parse finds it first)
        raise


def _parse_exactly(text: str | bytes) -> object:
    """``text`` parsed by ``json``, every number checked as it is read; :class:`TraceError` saying what is wrong."""
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TraceError(f"not a JSON trace ({e})") from None
    except RecursionError:
        raise TraceError("not a Crase trace (JSON nested too deeply)") from None


def from_dict(data: object) -> RunTrace:
    """The trace ``data`` holds: migrated to this version, validated (finite numbers only), :func:`check_graph`."""
    if not isinstance(data, dict):
        raise TraceError("not a Crase trace (expected a JSON object)")
    from pydantic import ValidationError

    data = migrate(data)
    try:
        trace = _adapter().validate_python(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise TraceError(f"not a valid Crase trace: {where}: {first.get('msg')}") from None
    except RecursionError:
        raise TraceError("not a Crase trace (nested too deeply)") from None
    check_graph(trace)
    return trace


def check_graph(trace: RunTrace) -> None:
    """:class:`TraceError` unless the node ids are distinct, every edge joins two of the trace's nodes, no kept
    edge has a negative weight and every result is a node: what every reader (``crase show``, ``rerank``,
    ``export``, the app) relies on. :func:`from_dict` checks it, so a loaded trace has passed it."""
    ids = [n.paper.id for n in trace.nodes]
    known = set(ids)
    if len(known) != len(ids):
        raise TraceError("not a valid Crase trace: two nodes have the same paper id")
    for i, e in enumerate(trace.edges):
        if e.citing not in known or e.cited not in known:
            raise TraceError(f"not a valid Crase trace: edges.{i} ({printable(e.citing)[:200]} → "
                             f"{printable(e.cited)[:200]}) joins a paper that is not among the nodes")
        if e.kept and not e.weight >= 0.0:
            raise TraceError(f"not a valid Crase trace: edges.{i} has a negative weight")
    for i, r in enumerate(trace.results):
        if r.paper_id not in known:
            raise TraceError(f"not a valid Crase trace: results.{i}: paper {r.paper_id!r} is not among the nodes")


def migrate(data: dict) -> dict:
    """``data`` brought to :data:`TRACE_VERSION` one version at a time (:data:`MIGRATIONS`); :class:`TraceError`
    for a version this Crase does not know (a newer one included). ``data`` itself is not changed."""
    version = data.get("trace_version")
    if type(version) is not int or not 1 <= version <= TRACE_VERSION:
        raise TraceError(f"trace version {version!r} is not supported (this Crase reads versions 1 to {TRACE_VERSION})")
    while version < TRACE_VERSION:
        data = MIGRATIONS[version](data)
        version += 1
    return _fill_dense_knobs(data)


#: the knobs of the question's embedding (issue 30): a trace written before them ran without it
DENSE_KNOBS = ("dense_seed_weight", "dense_restart_weight", "dense_fusion_weight")


def _fill_dense_knobs(data: dict) -> dict:
    """``data`` with the dense knobs its settings do not record set to 0 (what such a run did: the question was
    not embedded), so the settings shown, re-ranked and exported are the run's. ``data`` itself is not changed."""
    settings = data.get("settings")
    if not isinstance(settings, dict) or all(k in settings for k in DENSE_KNOBS):
        return data
    return {**data, "settings": {**{k: 0.0 for k in DENSE_KNOBS}, **settings}}


def _v1_to_v2(data: dict) -> dict:
    """Version 1 → 2: the knobs a version-1 trace may not record, filled with what its run used
    (:func:`_fill_unrecorded`); each edge's ``covered`` where it has none (:func:`_fill_covered`)."""
    return {**_fill_unrecorded(data), "trace_version": 2}


def _fill_unrecorded(data: dict) -> dict:
    """``data`` with what a trace written before a knob existed does not record filled in with what its run
    used: the knobs added or switched since (:data:`ROUND3_DEFAULTS`) at their earlier
    values (``L_offline``: its ``L``, which limited every planner then; ``tau_lexical``: its ``tau``), and for a trace from before the scorer-aware θ, its settings' ``theta_lexical`` = its ``theta``
    (one θ decided every edge) and each edge's ``theta`` = that θ (so the settings shown, re-ranked and exported
    are those the run had). ``data`` itself is not changed; anything malformed is left for validation to
    report."""
    data = _fill_covered(data)
    settings = data.get("settings")
    if not isinstance(settings, dict):
        return data
    missing = {k: v for k, v in ROUND3_DEFAULTS.items() if k not in settings}
    if not missing:
        return data
    if "L_offline" in missing and isinstance(settings.get("L"), int):
        missing["L_offline"] = settings["L"]  # one L limited every planner then
    filled = {**data, "settings": {**missing, **settings}}
    if "tau_lexical" in missing:  # one τ pruned every edge then
        filled["settings"]["tau_lexical"] = settings.get("tau", PipelineSettings.tau)
    if "theta_lexical" in settings:
        return filled
    theta = settings.get("theta", PipelineSettings.theta)
    filled["settings"]["theta_lexical"] = theta
    edges = data.get("edges")
    if isinstance(edges, list):
        filled["edges"] = [{"theta": theta, **e} if isinstance(e, dict) else e for e in edges]
    return filled


def _fill_covered(data: dict) -> dict:
    """``data`` with each edge that records no ``covered`` (a trace from before calibrated support, whose
    ``supported`` is Eq. 3's s_i at the edge's θ) given ``covered`` = its ``supported``."""
    edges = data.get("edges")
    if not isinstance(edges, list) or not any(isinstance(e, dict) and "covered" not in e for e in edges):
        return data
    return {**data, "edges": [{**e, "covered": e.get("supported", [])} if isinstance(e, dict) and "covered" not in e
                              else e for e in edges]}


def _v2_to_v3(data: dict) -> dict:
    """Version 2 → 3, one story per edge and the text matches kept: each edge's ``supported`` becomes the s_i
    its Δ counted (its ``covered``, read at its own θ; version 2 also ticked claims at a separate calibrated
    threshold, ``support_theta``, which version 3 does not have), and each node records ``text_match``: kept
    whatever its edges, as version 2 kept them — a text candidate (role ``text``), or a kept node without any
    edge (a seed the sparse-pool fill kept) —, and its settings ``text_matches`` 0 (no top text match was kept
    without an edge then). ``data`` itself is not changed; anything malformed is left for validation to
    report."""
    out = {**data, "trace_version": 3}
    settings = data.get("settings")
    if isinstance(settings, dict) and "text_matches" not in settings:  # pruning alone decided then
        out["settings"] = {**settings, "text_matches": 0}
    edges = data.get("edges")
    touched: set[object] = set()
    if isinstance(edges, list):
        out["edges"] = [_v3_edge(e) if isinstance(e, dict) else e for e in edges]
        touched = {e.get(end) for e in edges if isinstance(e, dict) for end in ("citing", "cited")}
    nodes = data.get("nodes")
    if isinstance(nodes, list):
        out["nodes"] = [{**n, "text_match": n.get("role") == "text" or (
            n.get("kept") is True and isinstance(n.get("paper"), dict) and n["paper"].get("id") not in touched)}
            if isinstance(n, dict) and "text_match" not in n else n for n in nodes]
    return out


def _v3_edge(e: dict) -> dict:
    """A version-2 edge with ``supported`` = its ``covered`` (what Δ counted) and no ``support_theta``."""
    out = {k: v for k, v in e.items() if k not in ("covered", "support_theta")}
    if "covered" in e:
        out["supported"] = e["covered"]
    return out


#: version → the function that turns a trace of that version into one of the next.
MIGRATIONS: dict[int, Callable[[dict], dict]] = {1: _v1_to_v2, 2: _v2_to_v3}


def save(trace: RunTrace, path: str | Path) -> Path:
    """Write the trace to ``path`` atomically (:func:`crase_core.atomic.write_text`).

    A symlink, folder or device at ``path`` is refused (:class:`~crase_core.errors.InputError`), never
    written through or replaced.
    """
    return atomic.write_text(path, dumps(trace))


def load(path: str | Path, max_bytes: int = MAX_TRACE_BYTES) -> RunTrace:
    """Read a trace file; :class:`TraceError` for anything but a regular file of at most ``max_bytes``."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise TraceError(f"cannot read trace {path}: {e.strerror or e}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # checked on the descriptor: a directory cannot even be wrapped in a file
        os.close(fd)
        raise TraceError(f"cannot read trace {path}: not a regular file")
    with os.fdopen(fd, "rb") as f:
        if st.st_size > max_bytes:
            raise TraceError(f"cannot read trace {path}: {st.st_size:,} bytes is more than the "
                             f"{max_bytes:,} a trace may have")
        try:
            text = f.read(max_bytes + 1)
        except OSError as e:
            raise TraceError(f"cannot read trace {path}: {e.strerror or e}") from None
    if len(text) > max_bytes:
        raise TraceError(f"cannot read trace {path}: more than the {max_bytes:,} bytes a trace may have")
    return loads(text)
