"""Front-end helpers that need no Streamlit: run storage, graph views, budget probe, escaping.

The Streamlit pages (``app.py``, ``pages/``) only lay these out. Everything
here is a plain function or a small class over a :class:`RunTrace`, so it is
unit-tested without a browser.

* :class:`RunStore` — every run saved as its trace JSON (plus a small sidecar
  for fast listing) under ``$CRASE_RUNS_DIR`` or ``<cache root>/runs``.
* :func:`graph_view` / :func:`vis_network_data` — which nodes and edges the
  evidence-graph page shows, and their vis-network (pyvis) records.
* :func:`probe_budget` — the exact model-call budget of a query, obtained by
  running the pipeline only up to the point where the budget is known.
* :func:`md_escape` — paper text made safe for Streamlit markdown.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import trace as trace_io
from .cache import cache_root
from .errors import InputError, TraceError
from .records import Budget, EdgeRecord, NodeRecord
from .trace import RunTrace

# --- colours shared by the graph, legends and charts ------------------------------------------------
ROLE_COLOURS: dict[str, str] = {
    "seed_kept": "#2a9d8f",  # teal
    "seed_pruned": "#e76f51",  # burnt orange
    "expanded": "#4f6d9a",  # slate blue
    "expanded_pruned": "#b8bfca",  # grey
    "text": "#9b6bb5",  # muted violet: full-query text match outside the citation graph
}
ROLE_LABELS: dict[str, str] = {
    "seed_kept": "seed, kept",
    "seed_pruned": "seed, pruned",
    "expanded": "expanded (neighbour)",
    "expanded_pruned": "expanded, pruned",
    "text": "text match (outside the graph)",
}
PRUNED_EDGE_COLOUR = "#d08c7f"

DEMO_QUERIES_FILE = Path(__file__).resolve().parent.parent / "assets" / "ui" / "demo_queries.json"

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>$:])")


def md_escape(text: object) -> str:
    """``text`` as literal Streamlit markdown: HTML escaped, markdown/LaTeX syntax backslashed.

    ``<script>`` comes out as the visible text ``<script>``; ``$x$`` is not typeset;
    ``[a](javascript:…)`` is not a link.
    """
    s = html.escape(str(text), quote=False)
    return _MD_SPECIAL.sub(r"\\\1", s).replace("\n", " ")


def node_role(node: NodeRecord) -> str:
    """One of ``ROLE_COLOURS``' keys."""
    if node.role == "seed":
        return "seed_kept" if node.kept else "seed_pruned"
    if node.role == "text":
        return "text"
    return "expanded" if node.kept else "expanded_pruned"


def short_title(title: str, limit: int = 60) -> str:
    t = " ".join(title.split())
    return t if len(t) <= limit else t[: limit - 1] + "…"


def authors_line(authors: Sequence[str], limit: int = 3) -> str:
    if not authors:
        return "unknown authors"
    if len(authors) <= limit:
        return ", ".join(authors)
    return ", ".join(authors[:limit]) + f" et al. (+{len(authors) - limit})"


def load_demo_queries(path: Path = DEMO_QUERIES_FILE) -> list[dict[str, str]]:
    """Demo queries shipped with the app: ``[{"label", "query", "source"}]``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return []
    return [d for d in data if isinstance(d, dict) and d.get("query")]


# --- runs ---------------------------------------------------------------------------------------------
def runs_dir() -> Path:
    """``$CRASE_RUNS_DIR``, else ``<cache root>/runs`` (created)."""
    root = os.environ.get("CRASE_RUNS_DIR")
    path = Path(root) if root else cache_root() / "runs"
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class RunInfo:
    """One saved run, as the runs page lists it (read from the sidecar, not the trace)."""

    name: str
    path: Path
    query: str
    created_at: str
    run_id: str
    source: str
    backend: str
    counts: dict[str, int] = field(default_factory=dict)
    size_bytes: int = 0


def _summary(trace: RunTrace) -> dict[str, Any]:
    return {
        "query": trace.query,
        "created_at": trace.created_at,
        "run_id": trace.run_id,
        "source": trace.source,
        "backend": trace.backend.get("backend", ""),
        "counts": trace.stage_counts(),
    }


_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


class RunStore:
    """Saved traces in one folder: ``<stamp>-<run_id>.json`` plus ``.meta.json`` sidecars."""

    def __init__(self, directory: str | os.PathLike[str] | None = None):
        self.directory = Path(directory) if directory else runs_dir()
        self.directory.mkdir(parents=True, exist_ok=True)

    def _name_for(self, trace: RunTrace) -> str:
        stamp = _SAFE_NAME.sub("", (trace.created_at or "").replace(":", "").replace("+", "Z"))[:17] or "run"
        return f"{stamp}-{_SAFE_NAME.sub('', trace.run_id) or 'trace'}"

    def save(self, trace: RunTrace) -> str:
        """Write the trace and its sidecar; return the run's name (stable for the same run)."""
        name = self._name_for(trace)
        trace_io.save(trace, self.directory / f"{name}.json")
        (self.directory / f"{name}.meta.json").write_text(json.dumps(_summary(trace)), encoding="utf-8")
        return name

    def import_bytes(self, data: bytes) -> tuple[str, RunTrace]:
        """Validate an uploaded trace file, save it into the store; raise :class:`TraceError` if unusable."""
        trace = trace_io.loads(data)
        return self.save(trace), trace

    def path(self, name: str) -> Path:
        if _SAFE_NAME.sub("", name) != name or not name:
            raise InputError(f"not a run name: {name!r}")
        return self.directory / f"{name}.json"

    def load(self, name: str) -> RunTrace:
        path = self.path(name)
        if not path.is_file():
            raise TraceError(f"no saved run named {name!r} in {self.directory}")
        return trace_io.load(path)

    def list(self) -> list[RunInfo]:
        """Saved runs, newest first. Traces without a readable sidecar are summarised from the trace."""
        out: list[RunInfo] = []
        for path in self.directory.glob("*.json"):
            if path.name.endswith(".meta.json"):
                continue
            name = path.name[: -len(".json")]
            meta_path = self.directory / f"{name}.meta.json"
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                try:
                    meta = _summary(trace_io.load(path))
                    meta_path.write_text(json.dumps(meta), encoding="utf-8")
                except TraceError:
                    continue
            out.append(
                RunInfo(name, path, str(meta.get("query", "")), str(meta.get("created_at", "")),
                        str(meta.get("run_id", "")), str(meta.get("source", "")), str(meta.get("backend", "")),
                        dict(meta.get("counts", {})), path.stat().st_size)
            )
        out.sort(key=lambda r: (r.created_at, r.name), reverse=True)
        return out

    def delete(self, name: str) -> None:
        for p in (self.path(name), self.directory / f"{name}.meta.json"):
            p.unlink(missing_ok=True)


# --- budget -------------------------------------------------------------------------------------------
class _BudgetKnown(Exception):
    def __init__(self, budget: Budget):
        self.budget = budget


def probe_budget(query: str, engine: Any, settings: Any) -> Budget:
    """The run's exact model-call budget (1 + |V| + |E|, less cached), without extracting or scoring.

    Runs the pipeline's plan, seed and expansion stages (the plan is cached, so
    the real run does not pay for it twice) and stops at the first ``claims``
    progress event, which carries the budget.
    """
    from .pipeline import run_query  # local: pipeline imports are heavy

    def stop(event: Any) -> None:
        budget = getattr(event, "budget", None)
        if budget is not None:
            raise _BudgetKnown(budget)

    try:
        run_query(query, engine, settings.replace(max_model_calls=None), progress=stop)
    except _BudgetKnown as known:
        return known.budget
    raise InputError("the pipeline finished without reporting a budget")  # pragma: no cover


# --- graph views ----------------------------------------------------------------------------------------
VIEW_MODES = ("top-k and trails", "kept graph", "everything")


@dataclass
class GraphView:
    """The node ids and edges one evidence-graph view shows (edges only between shown nodes)."""

    nodes: list[str]
    edges: list[EdgeRecord]
    hidden_pruned_edges: int = 0
    note: str = ""


def seed_subqueries(trace: RunTrace) -> dict[str, list[int]]:
    """paper id → 0-based indices of the sub-queries that brought it in as a seed."""
    return {s.paper_id: sorted({o.subquery_index for o in s.origins}) for s in trace.seeds}


def trail_seed_of(trace: RunTrace) -> dict[str, str | None]:
    """paper id → the seed its evidence trail starts from (ranked papers only)."""
    return {r.paper_id: r.seed for r in trace.results}


def graph_view(
    trace: RunTrace,
    mode: str = "top-k and trails",
    *,
    show_pruned: bool = False,
    top_k: int | None = None,
    years: tuple[int, int] | None = None,
    min_score: float = 0.0,
    subqueries: Iterable[int] | None = None,
    max_edges: int = 4000,
) -> GraphView:
    """Select what the graph shows.

    * ``top-k and trails``: the top ``top_k`` results and every paper on their trails;
      edges: the trail steps plus kept edges among those papers.
    * ``kept graph``: every kept node and kept edge.
    * ``everything``: every node, pruned ones too.

    Filters apply to nodes (seeds and trail nodes of shown results are kept so trails
    stay connected): publication year in ``years`` (papers without a year pass), score
    ≥ ``min_score``, and — when ``subqueries`` is given — only papers whose seed (or
    whose trail's seed) came from one of those sub-queries. Pruned edges appear only
    with ``show_pruned``; at most ``max_edges`` edges are returned (highest Δ first,
    kept before pruned), and ``note`` says when the cap cut edges.
    """
    if mode not in VIEW_MODES:
        raise InputError(f"unknown graph view {mode!r}; choose one of {', '.join(VIEW_MODES)}")
    by_id = {n.paper.id: n for n in trace.nodes}
    sq_of = seed_subqueries(trace)
    trail_seed = trail_seed_of(trace)
    wanted_sq = set(subqueries) if subqueries is not None else None

    def passes(pid: str) -> bool:
        n = by_id[pid]
        if years is not None and n.paper.year is not None and not years[0] <= n.paper.year <= years[1]:
            return False
        if min_score > 0 and n.score < min_score:
            return False
        if wanted_sq is not None:
            seed = pid if pid in sq_of else trail_seed.get(pid)
            if seed is None or not wanted_sq.intersection(sq_of.get(seed, [])):
                return False
        return True

    trail_edges: set[tuple[str, str]] = set()
    if mode == "top-k and trails":
        results = trace.results[: top_k or len(trace.results)]
        chosen = [r for r in results if passes(r.paper_id)]
        node_set: set[str] = set()
        for r in chosen:
            node_set.add(r.paper_id)
            for step in r.trail:
                node_set.update((step.source, step.target))
                trail_edges.add((step.source, step.target) if step.along_citation else (step.target, step.source))
    elif mode == "kept graph":
        node_set = {pid for pid, n in by_id.items() if n.kept and passes(pid)}
    else:
        node_set = {pid for pid in by_id if passes(pid)}
    nodes = [n.paper.id for n in trace.nodes if n.paper.id in node_set]

    kept_edges, pruned_edges = [], []
    for e in trace.edges:
        if e.citing in node_set and e.cited in node_set:
            (kept_edges if e.kept else pruned_edges).append(e)
    if mode == "top-k and trails":
        # trail edges always, other kept edges among the shown papers as context
        kept_edges.sort(key=lambda e: ((e.citing, e.cited) not in trail_edges, -e.delta))
    else:
        kept_edges.sort(key=lambda e: -e.delta)
    edges = list(kept_edges)
    hidden = 0
    if show_pruned:
        edges += pruned_edges
    else:
        hidden = len(pruned_edges)
    note = ""
    if len(edges) > max_edges:
        note = f"showing the {max_edges:,} strongest of {len(edges):,} edges (narrow the filters to see the rest)"
        edges = edges[:max_edges]
    return GraphView(nodes, edges, hidden, note)


def edge_id(e: EdgeRecord) -> str:
    return f"{e.citing}->{e.cited}"


def delta_colour(delta: float) -> str:
    """Kept-edge colour: light blue-grey (Δ→0) to deep navy (Δ = 1)."""
    t = max(0.0, min(1.0, delta))
    lo, hi = (0xA9, 0xB8, 0xCC), (0x1D, 0x35, 0x57)
    r, g, b = (round(a + (c - a) * t) for a, c in zip(lo, hi, strict=True))
    return f"#{r:02x}{g:02x}{b:02x}"


def node_size(score: float, max_score: float) -> float:
    """Node radius from score: 8 (score 0) to 36 (the top score), square-root scaled."""
    if max_score <= 0 or score <= 0:
        return 8.0
    return 8.0 + 28.0 * math.sqrt(score / max_score)


def node_tooltip(n: NodeRecord, seed_sq: list[int] | None) -> str:
    """Plain-text tooltip (the component renders it with textContent, never as HTML)."""
    lines = [n.paper.title, f"{n.paper.year or 'n.d.'} · {authors_line(list(n.paper.authors))}"]
    lines.append(ROLE_LABELS[node_role(n)] + (f" (sub-queries {', '.join(str(i + 1) for i in seed_sq)})" if seed_sq else ""))
    if n.kept:
        lines.append(f"score {n.score:.4f}" + (f" · rank {n.rank}" if n.rank else ""))
    else:
        lines.append(n.prune_reason)
    return "\n".join(lines)


def layout_positions(nodes: Sequence[str], edges: Sequence[EdgeRecord], scale: float = 420.0) -> dict[str, tuple[float, float]]:
    """Deterministic force-directed positions (networkx spring layout, fixed seed), in vis pixels."""
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(nodes)
    for e in edges:
        if e.citing != e.cited:
            w = max(e.delta, 0.05) if e.kept else 0.02
            if g.has_edge(e.citing, e.cited):
                g[e.citing][e.cited]["weight"] += w
            else:
                g.add_edge(e.citing, e.cited, weight=w)
    if not nodes:
        return {}
    k = 1.6 / math.sqrt(max(len(nodes), 1))
    pos = nx.spring_layout(g, k=k, seed=7, iterations=80, weight="weight")
    grow = scale * max(1.0, math.sqrt(len(nodes) / 60.0))
    return {n: (float(x) * grow, float(y) * grow) for n, (x, y) in pos.items()}


def vis_network_data(
    trace: RunTrace, view: GraphView, positions: dict[str, tuple[float, float]] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """vis-network ``{"nodes": [...], "edges": [...]}`` for ``view``, assembled with pyvis.

    Labels and titles are plain text (vis-network ≥ 9 renders string titles as
    text; our component additionally sets them via ``textContent``). Node colour
    = role, size = score; edge colour/width = Δ; pruned edges dashed.
    """
    from pyvis.network import Network

    by_id = {n.paper.id: n for n in trace.nodes}
    sq = seed_subqueries(trace)
    max_score = max((by_id[p].score for p in view.nodes), default=0.0)
    net = Network(directed=True)
    for pid in view.nodes:
        n = by_id[pid]
        role = node_role(n)
        extra: dict[str, Any] = {}
        if positions and pid in positions:
            extra["x"], extra["y"] = positions[pid]
        net.add_node(
            pid,
            label=short_title(n.paper.title, 28) + (f" ({n.paper.year})" if n.paper.year else ""),
            title=node_tooltip(n, sq.get(pid)),
            color=ROLE_COLOURS[role],
            size=node_size(n.score, max_score),
            shape="dot",
            **extra,
        )
    for e in view.edges:
        title = (
            f"{short_title(by_id[e.citing].paper.title, 50)} → {short_title(by_id[e.cited].paper.title, 50)}\n"
            f"Δ = {e.delta:.3f} · weight {e.weight:.3f}\n{e.decision}"
        )
        if e.kept:
            net.add_edge(e.citing, e.cited, id=edge_id(e), title=title, color=delta_colour(e.delta),
                         width=1.0 + 5.0 * e.delta, dashes=False, kept=True)
        else:
            net.add_edge(e.citing, e.cited, id=edge_id(e), title=title, color=PRUNED_EDGE_COLOUR,
                         width=1.0, dashes=True, kept=False)
    return {"nodes": list(net.nodes), "edges": list(net.edges)}
