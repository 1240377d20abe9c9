"""The run view model: what the evidence graph shows, where, and how it looks — for the app and the HTML export.

Pure functions from a :class:`RunTrace` (no Streamlit, no browser), so the explorer's graph page and
``crase export --format html`` draw the same views from the same records:

* **selection** — :func:`graph_view` (the top k results and their evidence trails, the kept graph,
  everything) and :func:`focus_view` (one paper, its trail, its direct citations) → :class:`GraphView`;
* **layout** — :func:`timeline_layout` (x = publication year on an axis that gives each year room by how
  many papers it holds and folds runs of empty years, so outliers cannot squash the rest; y = score),
  :func:`cluster_layout` (communities of the kept graph, :func:`communities`, each named by its papers'
  distinctive title words, :func:`cluster_names`) and :func:`focus_layout` → :class:`Layout`;
* **drawing records** — :func:`draw_nodes` / :func:`draw_edges`: plain-text label and tooltip, colour =
  role, size = score, edge width and opacity = Δ (Eq. 4), solid = scored by a model, dashed = decided by
  the offline word-overlap scorer, dotted red = pruned; ``bend`` curves the edges that would otherwise
  run through a paper or over their reverse edge (:func:`edge_bends`); :func:`legend_items` says all that;
* :func:`run_view` — all of it for one view, as the JSON the shared graph script (assets/ui/
  graph_component/graph_core.js) draws and hit-tests.

Every text is plain text (TeX spelled in Unicode by :func:`crase_core.views.tex.tex_plain`): the script draws
labels with ``fillText`` and tooltips with ``textContent``, never as HTML. Positions are canvas pixels.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from crase_core.errors import InputError
from crase_core.records import EdgeRecord, NodeRecord
from crase_core.text import STOPWORDS, stem
from crase_core.trace import RunTrace
from crase_core.views.paper_text import (
    authors_line,
    first_author_surname,
    shorten_words,
    tex_accents,
    tex_plain,
)
from crase_core.views.stress import stress_layout

# --- what the views are -----------------------------------------------------------------------------------
VIEW_MODES = ("top-k and trails", "kept graph", "everything")
LAYOUTS = ("timeline", "clusters", "focus")
LAYOUT_LABELS = {"timeline": "Timeline", "clusters": "Clusters", "focus": "Focus"}
DEFAULT_TOP_K = 20  # the default view: the 20 best papers and their trails (readable for a 700-node run)
MIN_NODE_SIZE, MAX_NODE_SIZE = 7.0, 26.0

# --- how they look ----------------------------------------------------------------------------------------
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
#: kept edges by who decided them: a model's matrix, or an offline scorer (word overlap, or claim similarity: both
#: drawn dashed, neither is entailment)
EDGE_COLOURS = {"model": "#1d3557", "offline": "#3f5873"}
EDGE_DASHES: dict[str, list[float]] = {"model": [], "offline": [7.0, 4.0], "pruned": [2.0, 4.0]}
SCORER_LABELS = {"model": "scored by the model",
                 "offline": "scored by word overlap (the offline lexical scorer, not a model)",
                 "similarity": "scored by claim similarity (MiniLM, on-device: closeness in meaning, not entailment)"}
#: the legend's words for the dashed (offline) edges, by scorer
DASHED_LEGEND = {"offline": "dashed: word-overlap scorer (offline)",
                 "similarity": "dashed: claim similarity (MiniLM, not entailment)"}
LIBRARY_BORDER = "#1e7b34"  # the thick green border of a paper already in the user's library
LIBRARY_LABEL = "already in your library"
NOT_CONNECTED, PRUNED_GROUP = -1, -3  # communities: no kept citation edge / pruned papers


@dataclass
class GraphView:
    """The node ids and edges one evidence-graph view shows (edges only between shown nodes)."""

    nodes: list[str]
    edges: list[EdgeRecord]
    hidden_pruned_edges: int = 0
    note: str = ""
    focus: str | None = None
    trail_edges: set[str] = field(default_factory=set)  # top-k view: the evidence trails' edges (the rest: context)


@dataclass
class Layout:
    """Node positions (canvas pixels) plus what the canvas draws behind them.

    ``axis``: timeline ticks ``{"x", "label"}`` (``"fold": True`` marks a fold over empty years);
    ``captions``: cluster captions ``{"x", "y", "label", "cluster"}``; ``groups``: paper id → cluster id.
    """

    positions: dict[str, tuple[float, float]]
    axis: list[dict[str, Any]] = field(default_factory=list)
    captions: list[dict[str, Any]] = field(default_factory=list)
    groups: dict[str, int] = field(default_factory=dict)
    #: the bends of edge lists drawn over these positions (:func:`edge_bends`), by the edges' ids in order
    bends: dict[tuple[str, ...], dict[str, float]] = field(default_factory=dict, repr=False, compare=False)
    #: where :func:`edge_bends` ended on these positions: a view with its pruned edges goes on from its kept ones
    bend_states: list[BendState] = field(default_factory=list, repr=False, compare=False)


@dataclass
class ChosenCurves:
    """The curves :func:`edge_bends` has chosen, in order: each one's segments (``seg_a`` → ``seg_b``,
    BEND_SAMPLES − 1 per curve), their boxes (``seg_lo``–``seg_hi``) and its midpoint; ``count`` of them so far
    in arrays with room for more."""

    seg_a: Any
    seg_b: Any
    seg_lo: Any
    seg_hi: Any
    mids: Any
    count: int = 0

    @classmethod
    def with_room(cls, capacity: int, head: ChosenCurves | None = None) -> ChosenCurves:
        """Room for ``capacity`` curves, beginning with ``head``'s."""
        import numpy as np

        n = capacity * (BEND_SAMPLES - 1)
        out = cls(np.zeros((n, 2)), np.zeros((n, 2)), np.zeros((n, 2)), np.zeros((n, 2)), np.zeros((capacity, 2)))
        if head is not None:
            k = head.count * (BEND_SAMPLES - 1)
            out.seg_a[:k], out.seg_b[:k], out.seg_lo[:k], out.seg_hi[:k] = head.seg_a, head.seg_b, head.seg_lo, head.seg_hi
            out.mids[:head.count], out.count = head.mids, head.count
        return out

    def add(self, pts: Any) -> None:
        """Append the curve through the points ``pts`` (BEND_SAMPLES × 2)."""
        import numpy as np

        at = slice(self.count * (BEND_SAMPLES - 1), (self.count + 1) * (BEND_SAMPLES - 1))
        self.seg_a[at], self.seg_b[at] = pts[:-1], pts[1:]
        np.minimum(pts[:-1], pts[1:], out=self.seg_lo[at])
        np.maximum(pts[:-1], pts[1:], out=self.seg_hi[at])
        self.mids[self.count] = pts[len(pts) // 2]
        self.count += 1

    def room(self, curves: Any, lo: Any, hi: Any) -> Any:
        """Each of ``curves``' room from the curves chosen (its midpoint from their segments, their midpoints
        from it), looking only near its box ``lo``–``hi``: what lies further than MIDPOINT_CLEARANCE only
        adds room that is not read."""
        import numpy as np

        if not self.count:
            return np.full(len(curves), math.inf)
        k = self.count * (BEND_SAMPLES - 1)
        seg_near = ((self.seg_lo[:k] <= hi + MIDPOINT_CLEARANCE).all(axis=1)
                    & (self.seg_hi[:k] >= lo - MIDPOINT_CLEARANCE).all(axis=1))
        m = self.mids[:self.count]
        mid_near = _within(m, lo - MIDPOINT_CLEARANCE, hi + MIDPOINT_CLEARANCE)
        return np.minimum(_to_segments_each(curves[:, len(curves[0]) // 2], self.seg_a[:k][seg_near],
                                            self.seg_b[:k][seg_near]),
                          _clearances(curves, m[mid_near], np.zeros(int(mid_near.sum()))))

    def head(self) -> ChosenCurves:
        """A copy of the curves chosen so far (no spare room)."""
        k = self.count * (BEND_SAMPLES - 1)
        return ChosenCurves(self.seg_a[:k].copy(), self.seg_b[:k].copy(), self.seg_lo[:k].copy(),
                            self.seg_hi[:k].copy(), self.mids[:self.count].copy(), self.count)


@dataclass
class BendState:
    """Where :func:`edge_bends` ended, to go on from: the papers and their radii, the edges in the order chosen
    (id, whether its reverse is drawn too), their bends, and the curves chosen."""

    papers: tuple[str, ...]
    radii: Any
    key: tuple[tuple[str, bool], ...]
    bends: dict[str, float]
    chosen: ChosenCurves

    def continues(self, papers: tuple[str, ...], radii: Any, key: tuple[tuple[str, bool], ...]) -> bool:
        """Whether a choice over ``papers`` (with ``radii``) of the edges ``key`` begins with this one's."""
        import numpy as np

        return (self.papers == papers and key[:len(self.key)] == self.key and np.array_equal(self.radii, radii))


@dataclass
class Communities:
    """Communities of the kept graph: paper id → community id (0 = the largest), names, sizes."""

    of: dict[str, int]
    names: dict[int, str]
    sizes: dict[int, int]


# --- selection --------------------------------------------------------------------------------------------
def seed_subqueries(trace: RunTrace) -> dict[str, list[int]]:
    """paper id → 0-based indices of the sub-queries that brought it in as a seed."""
    return {s.paper_id: sorted({o.subquery_index for o in s.origins}) for s in trace.seeds}


def trail_seed_of(trace: RunTrace) -> dict[str, str | None]:
    """paper id → the seed its evidence trail starts from (ranked papers only)."""
    return {r.paper_id: r.seed for r in trace.results}


def _node_filter(trace: RunTrace, years: tuple[int, int] | None, min_score: float,
                 subqueries: Iterable[int] | None) -> Any:
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

    return passes


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
    max_nodes: int | None = None,
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
    kept before pruned), and ``note`` says when the cap cut edges. ``max_nodes`` keeps the
    highest-ranked papers of a larger selection (the note says so).
    """
    if mode not in VIEW_MODES:
        raise InputError(f"unknown graph view {mode!r}; choose one of {', '.join(VIEW_MODES)}")
    passes = _node_filter(trace, years, min_score, subqueries)
    trail_edges: set[tuple[str, str]] = set()
    if mode == "top-k and trails":
        node_set: set[str] = set()
        for r in trace.results[: top_k or len(trace.results)]:
            if not passes(r.paper_id):
                continue
            node_set.add(r.paper_id)
            for step in r.trail:
                node_set.update((step.source, step.target))
                trail_edges.add((step.source, step.target) if step.along_citation else (step.target, step.source))
    elif mode == "kept graph":
        node_set = {n.paper.id for n in trace.nodes if n.kept and passes(n.paper.id)}
    else:
        node_set = {n.paper.id for n in trace.nodes if passes(n.paper.id)}
    note = ""
    if max_nodes is not None and len(node_set) > max_nodes:
        by_id = {n.paper.id: n for n in trace.nodes}
        best = sorted(node_set, key=lambda p: (by_id[p].rank is None, by_id[p].rank or 0, -by_id[p].score, p))
        note = f"the {max_nodes:,} highest-ranked of {len(node_set):,} papers"
        node_set = set(best[:max_nodes])
    nodes = [n.paper.id for n in trace.nodes if n.paper.id in node_set]
    kept_edges: list[EdgeRecord] = []
    pruned_edges: list[EdgeRecord] = []
    for e in trace.edges:
        if e.citing in node_set and e.cited in node_set:
            (kept_edges if e.kept else pruned_edges).append(e)
    # trail edges first (top-k view), then the other kept edges among the shown papers by Δ
    kept_edges.sort(key=lambda e: ((e.citing, e.cited) not in trail_edges, -e.delta))
    edges = kept_edges + (pruned_edges if show_pruned else [])
    hidden = 0 if show_pruned else len(pruned_edges)
    if len(edges) > max_edges:
        note = "; ".join(x for x in (note, f"showing the {max_edges:,} strongest of {len(edges):,} edges "
                                     "(narrow the filters to see the rest)") if x)
        edges = edges[:max_edges]
    trail_ids = {f"{u}->{v}" for u, v in trail_edges}
    return GraphView(nodes, edges, hidden, note, trail_edges={edge_id(e) for e in edges if edge_id(e) in trail_ids})


def trail_nodes(trace: RunTrace, pid: str) -> list[str]:
    """The evidence trail of a ranked paper as node ids, seed first and ``pid`` last (``[pid]`` if none)."""
    result = next((r for r in trace.results if r.paper_id == pid), None)
    if result is None or not result.trail:
        return [pid]
    path = [result.trail[0].source]
    for step in result.trail:
        if path[-1] != step.source:
            path.append(step.source)
        path.append(step.target)
    return path


@dataclass
class ViewIndex:
    """What the views of one run share, built once by :func:`view_index` (an export draws 64 views of a run):
    each paper's citation edges with their place in ``trace.edges``, and the edge tooltips drawn so far (for
    one set of labels)."""

    edges_of: dict[str, list[tuple[int, EdgeRecord]]]
    tips: dict[str, str] = field(default_factory=dict)


def view_index(trace: RunTrace) -> ViewIndex:
    """:class:`ViewIndex` of ``trace`` (one pass over its edges)."""
    edges_of: dict[str, list[tuple[int, EdgeRecord]]] = {}
    for i, e in enumerate(trace.edges):
        edges_of.setdefault(e.citing, []).append((i, e))
        if e.cited != e.citing:
            edges_of.setdefault(e.cited, []).append((i, e))
    return ViewIndex(edges_of)


def focus_view(trace: RunTrace, pid: str, *, show_pruned: bool = False, max_neighbours: int = 40,
               index: ViewIndex | None = None) -> GraphView:
    """One paper, the papers on its evidence trail to the seed, and its direct citation edges.

    Edges: the trail steps and every edge touching ``pid`` (kept ones; pruned ones too with
    ``show_pruned``), at most ``max_neighbours`` neighbours (kept edges first, then by Δ). ``index``: the
    run's :func:`view_index`, when the caller draws many views.
    """
    try:
        trace.node(pid)
    except KeyError as exc:
        raise InputError(f"paper {pid!r} is not part of this run") from exc
    index = index or view_index(trace)
    trail = trail_nodes(trace, pid)
    trail_pairs = set(zip(trail, trail[1:], strict=False))
    on_trail = set(trail)
    touching = [e for _, e in index.edges_of.get(pid, [])]
    hidden = sum(1 for e in touching if not e.kept) if not show_pruned else 0
    touching = [e for e in touching if e.kept or show_pruned]
    touching.sort(key=lambda e: (not e.kept, -e.delta, e.citing, e.cited))
    neighbours: list[str] = []
    edges: list[EdgeRecord] = []
    cut = 0
    for e in touching:
        other = e.cited if e.citing == pid else e.citing
        if other not in neighbours and other not in on_trail:
            if len(neighbours) >= max_neighbours:
                cut += 1
                continue
            neighbours.append(other)
        edges.append(e)
    seen = {edge_id(e) for e in edges}
    steps = sorted({(i, id(e)): (i, e) for t in on_trail for i, e in index.edges_of.get(t, [])
                    if (e.citing, e.cited) in trail_pairs or (e.cited, e.citing) in trail_pairs}.values(),
                   key=lambda ie: ie[0])  # the trail's edges, in the trace's order
    for _, e in steps:
        if edge_id(e) not in seen:
            edges.append(e)
    shown = on_trail | set(neighbours)
    nodes = [n.paper.id for n in trace.nodes if n.paper.id in shown]
    note = f"{cut} more neighbours not shown (the {max_neighbours} strongest are)" if cut else ""
    return GraphView(nodes, edges, hidden, note, focus=pid)


def edge_id(e: EdgeRecord) -> str:
    return f"{e.citing}->{e.cited}"


def edge_scorer(e: EdgeRecord) -> str | None:
    """``"model"`` / ``"offline"`` when the run recorded who scored the edge, else ``None``."""
    s = getattr(e, "scorer", None)
    return str(s) if s else None


# --- labels and tooltips ----------------------------------------------------------------------------------
def node_size(score: float, max_score: float) -> float:
    """Node radius from score: 7 (score 0) to 26 (the top score in view), square-root scaled (area ∝ score)."""
    if max_score <= 0 or score <= 0:
        return MIN_NODE_SIZE
    return MIN_NODE_SIZE + (MAX_NODE_SIZE - MIN_NODE_SIZE) * math.sqrt(min(1.0, score / max_score))


def node_labels(trace: RunTrace, pids: Sequence[str]) -> dict[str, str]:
    """Short unique labels: ``"#3 Maldacena 1997"`` (rank, first author, year); papers that share author
    and year get ``1997a``, ``1997b`` (in node order) so that two papers never look identical."""
    by_id = {n.paper.id: n for n in trace.nodes}
    base: dict[str, str] = {}
    for pid in pids:
        p = by_id[pid].paper
        name = first_author_surname(list(p.authors)) or shorten_words(tex_plain(p.title), 18)
        base[pid] = f"{shorten_words(name, 22)} {p.year or 'n.d.'}"
    groups: dict[str, list[str]] = {}
    for pid in pids:
        groups.setdefault(base[pid], []).append(pid)
    out: dict[str, str] = {}
    for label, members in groups.items():
        for i, pid in enumerate(members):
            text = label if len(members) == 1 else f"{label}{_suffix(i)}"
            rank = by_id[pid].rank
            out[pid] = f"#{rank} {text}" if rank else text
    return out


def _suffix(i: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return letters[i] if i < len(letters) else f"-{i + 1}"


def label_priority(trace: RunTrace, pids: Sequence[str]) -> dict[str, int]:
    """0 = most important label: ranked papers by rank, then seeds, then the rest by score."""
    by_id = {n.paper.id: n for n in trace.nodes}

    def key(pid: str) -> tuple[int, float, str]:
        n = by_id[pid]
        if n.rank:
            return (0, n.rank, pid)
        return (1 if n.role == "seed" else 2, -n.score, pid)

    return {pid: i for i, pid in enumerate(sorted(pids, key=key))}


def node_tooltip(n: NodeRecord, seed_sq: list[int] | None) -> str:
    """Plain-text tooltip (the script renders it with textContent, never as HTML)."""
    lines = [tex_plain(n.paper.title), f"{n.paper.year or 'n.d.'} · {tex_accents(authors_line(list(n.paper.authors)))}"]
    searched = [i for i in seed_sq or [] if i >= 0]
    found_by = ([f"sub-quer{'y' if len(searched) == 1 else 'ies'} " + ", ".join(str(i + 1) for i in searched)]
                if searched else [])
    if seed_sq and -1 in seed_sq:  # a library seed's origin has sub-query index -1
        found_by.append("your library")
    lines.append(ROLE_LABELS[n.display_role] + (f" ({' and '.join(found_by)})" if found_by else ""))
    if n.in_library:
        lines.append(LIBRARY_LABEL)
    if n.kept:
        lines.append(f"score {n.score:.4f}" + (f" · rank {n.rank}" if n.rank else ""))
    else:
        lines.append(n.prune_reason)
    return "\n".join(lines)


def edge_tooltip(trace: RunTrace, e: EdgeRecord, labels: dict[str, str],
                 by_id: dict[str, NodeRecord] | None = None) -> str:
    """Plain-text edge tooltip: who cites whom (full titles), Δ, weight, decision, scorer."""
    by_id = by_id or {n.paper.id: n for n in trace.nodes}
    u, v = by_id[e.citing].paper, by_id[e.cited].paper
    k, n = sum(e.supported), len(e.supported)
    theta_name, theta = trace.threshold(e)
    lines = [
        f"{labels.get(e.citing, e.citing)} cites {labels.get(e.cited, e.cited)}",
        f"u: {tex_plain(u.title)}",
        f"v: {tex_plain(v.title)}",
        f"Δ = {e.delta:.3f} ({k} of {n} citing claims supported at {theta_name} {theta:g}) · weight {e.weight:.4f}",
        e.decision,
    ]
    scorer = edge_scorer(e)
    if scorer:
        lines.append(SCORER_LABELS.get(scorer, f"scored by {scorer}"))
    return "\n".join(x for x in lines if x)


# --- timeline ---------------------------------------------------------------------------------------------
LANE_GAP = 30.0  # px between two lanes of one year's column
COLUMN_PAD = 46.0  # px of air between two years' columns
EMPTY_YEAR = 34.0  # px standing for one empty year between occupied ones
FOLD_WIDTH = 40.0  # px standing for a run of two or more empty years (the axis is folded there)
ROW_PITCH = 40.0  # px a paper takes vertically in a lane
MIN_WIDTH, MIN_HEIGHT = 900.0, 520.0  # a small view still fills a window at about 1:1 (labels readable)
TIMELINE_ASPECT = 1.6  # stretched to at least this width:height (a wide window, not a strip)


def timeline_columns(counts: dict[int | None, int]) -> tuple[dict[int | None, tuple[float, int]], list[dict[str, Any]]]:
    """Where each year's column sits: year (``None`` = no year) → (centre x, lanes), and the axis ticks.

    A column is as wide as its papers need (``⌈√papers⌉`` lanes, at most 12), so a year with two papers
    takes one narrow column however far it lies from the others; one empty year between occupied ones
    keeps a narrow column, a run of two or more is folded into :data:`FOLD_WIDTH` (a ``fold`` tick naming
    the years). Papers without a year come first, in an ``n.d.`` column.
    """
    out: dict[int | None, tuple[float, int]] = {}
    axis: list[dict[str, Any]] = []
    years = sorted(y for y in counts if y is not None)
    x = 0.0

    def column(yr: int | None) -> None:
        nonlocal x
        lanes = max(1, min(12, math.ceil(math.sqrt(counts[yr]))))
        w = (lanes - 1) * LANE_GAP + COLUMN_PAD
        out[yr] = (x + w / 2, lanes)
        axis.append({"x": x + w / 2, "label": str(yr) if yr is not None else "n.d."})
        x += w

    if None in counts:
        column(None)
        if years:
            axis.append({"x": x + FOLD_WIDTH / 2, "label": "", "fold": True})
            x += FOLD_WIDTH
    for i, yr in enumerate(years):
        gap = yr - years[i - 1] if i else 1
        if gap == 2:
            axis.append({"x": x + EMPTY_YEAR / 2, "label": str(yr - 1)})
            x += EMPTY_YEAR
        elif gap > 2:
            axis.append({"x": x + FOLD_WIDTH / 2, "label": f"{years[i - 1] + 1}–{yr - 1}", "fold": True})
            x += FOLD_WIDTH
        column(yr)
    return out, axis


def _stretch(pos: dict[str, tuple[float, float]], axis: list[dict[str, Any]]) -> None:
    """Stretch (never shrink: no two papers come closer) to at least MIN_WIDTH × MIN_HEIGHT and about
    TIMELINE_ASPECT, in place; the axis ticks follow x."""
    xs = [x for x, _ in pos.values()] + [t["x"] for t in axis]
    ys = [y for _, y in pos.values()]
    w, h = max(xs) - min(xs), max(ys) - min(ys)
    sy = max(1.0, MIN_HEIGHT / h if h else 1.0)
    sx = max(1.0, MIN_WIDTH / w if w else 1.0, TIMELINE_ASPECT * h * sy / w if w else 1.0)
    sy = max(sy, w * sx / (TIMELINE_ASPECT * 1.25) / h if h else 1.0)
    x0 = min(xs)
    for p, (x, y) in pos.items():
        pos[p] = (x0 + (x - x0) * sx, y * sy)
    for t in axis:
        t["x"] = x0 + (t["x"] - x0) * sx


def timeline_layout(trace: RunTrace, nodes: Sequence[str]) -> Layout:
    """x = publication year (:func:`timeline_columns`: room by papers, empty runs folded; papers without a
    year in an ``n.d.`` column at the left), y = rank by score (the best at the top; score 0 in a band
    below). A year's papers take its lanes in turn, by score; none overlaps another: each is pushed below
    the papers in its way (4 px apart)."""
    by_id = {n.paper.id: n for n in trace.nodes}
    if not nodes:
        return Layout({})
    counts = Counter(by_id[p].paper.year for p in nodes)
    columns, axis = timeline_columns(dict(counts))
    height = max(MIN_HEIGHT, max(math.ceil(counts[y] / columns[y][1]) for y in counts) * ROW_PITCH)
    max_score = max((by_id[p].score for p in nodes), default=0.0)
    by_score = sorted((p for p in nodes if by_id[p].score > 0), key=lambda p: (-by_id[p].score, p))
    score_rank = {p: i for i, p in enumerate(by_score)}
    pos: dict[str, tuple[float, float]] = {}
    radius: dict[str, float] = {}

    def target(p: str) -> float:
        if p not in score_rank:
            return height + 60.0
        return score_rank[p] / max(1, len(by_score) - 1) * height

    def lowest_free(x: float, ytarget: float, r: float, neighbours: list[str]) -> float:
        """The smallest y ≥ ytarget where a disc of radius r at x touches no placed paper (4 px apart)."""
        y = ytarget
        for _ in range(len(neighbours) + 1):
            moved = False
            for q in neighbours:
                qx, qy = pos[q]
                gap = r + radius[q] + 4.0
                dx = abs(qx - x)
                if dx < gap and abs(qy - y) < math.sqrt(gap * gap - dx * dx):
                    y = qy + math.sqrt(gap * gap - dx * dx) + 0.01
                    moved = True
            if not moved:
                break
        return y

    placed: list[str] = []
    for yr in sorted(columns, key=lambda y: columns[y][0]):
        cx, n_lanes = columns[yr]
        half = (n_lanes - 1) / 2
        lanes = sorted(((k - half) * LANE_GAP for k in range(n_lanes)), key=abs)
        members = sorted((p for p in nodes if by_id[p].paper.year == yr), key=lambda p: (target(p), p))
        for i, p in enumerate(members):  # lanes in turn (middle ones first): no two neighbours in score one above
            r = node_size(by_id[p].score, max_score)  # the other, where their edges would overlap
            near = [q for q in placed if abs(pos[q][0] - cx) < r + radius[q] + LANE_GAP * 13]
            dx = lanes[i % len(lanes)]
            pos[p] = (cx + dx, lowest_free(cx + dx, target(p), r, near))
            radius[p] = r
            placed.append(p)
    _stretch(pos, axis)
    return Layout(pos, axis=axis)


# --- clusters: communities of the kept graph, named by their papers' words -------------------------------------
def communities(trace: RunTrace, *, min_size: int = 3, resolution: float = 1.0) -> Communities:
    """Louvain communities (networkx, fixed seed) of the kept graph: kept papers, kept edges weighted by Δ.

    Communities smaller than ``min_size`` join the community they share the most edge weight with; papers
    with no kept edge at all are :data:`NOT_CONNECTED`, pruned papers :data:`PRUNED_GROUP`. Ids are 0, 1, …
    from the largest community down; each is named by :func:`cluster_names`.
    """
    import networkx as nx

    kept = [n.paper.id for n in trace.nodes if n.kept]
    order = {p: i for i, p in enumerate(kept)}
    # the undirected kept graph as {(i, j): weight}, i < j the papers' places in ``kept``: parallel and opposite
    # edges add their weights
    weights: dict[tuple[int, int], float] = {}
    for e in trace.edges:
        i, j = order.get(e.citing), order.get(e.cited)
        if e.kept and i is not None and j is not None and i != j:
            pair = (i, j) if i < j else (j, i)
            weights[pair] = max(e.delta, 0.05) + weights.get(pair, 0.0)
    g: dict[str, dict[str, float]] = {}  # paper → its neighbours and the edge weights
    for (i, j), w in weights.items():
        g.setdefault(kept[i], {})[kept[j]] = w
        g.setdefault(kept[j], {})[kept[i]] = w
    # in a fixed order and on integer labels: Louvain walks the graph's nodes and sets of them, whose order for
    # text ids changes with Python's hash seed (the same export drew other clusters); integers hash alike.
    # Nodes and edges in ``kept``'s order (as :func:`ordered_subgraph` orders them)
    numbered = nx.Graph()
    numbered.add_nodes_from(order[p] for p in kept if p in g)
    numbered.add_weighted_edges_from((i, j, weights[i, j]) for i, j in sorted(weights))
    found = nx.community.louvain_communities(numbered, weight="weight", resolution=resolution, seed=7)
    parts = sorted((sorted((kept[i] for i in c), key=order.__getitem__) for c in found),
                   key=lambda c: (-len(c), order[c[0]]))
    big = [c for c in parts if len(c) >= min_size] or parts[:1]
    of = {p: i for i, c in enumerate(big) for p in c}
    for c in parts[len(big):]:
        if c in big:
            continue
        ties: dict[int, float] = {of[q]: 0.0 for p in c for q in g[p] if q in of}
        for p in c:
            for q in g[p]:
                if q in of:
                    ties[of[q]] += g[p][q]
        target = max(ties, key=lambda k: (ties[k], -k)) if ties else NOT_CONNECTED
        of.update({p: target for p in c})
    for n in trace.nodes:
        of.setdefault(n.paper.id, NOT_CONNECTED if n.kept else PRUNED_GROUP)
    sizes = dict(Counter(of.values()))
    return Communities(of, cluster_names(trace, of), sizes)


_TOKEN = re.compile(r"[^\W_][\w'’-]*[^\W_]|[^\W_]")
_SUBSCRIPT = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
GENERIC_TITLE_WORDS = frozenset(["theory", "theories", "model", "models", "note", "notes", "remark", "remarks", "comment", "comments", "aspect", "aspects", "property", "properties", "case", "cases", "problem", "problems", "result", "results", "method", "methods", "application", "applications", "example", "examples", "introduction", "review", "lecture", "lectures", "general", "generalized", "generalised", "simple", "exact", "analysis", "structure", "role"])


def _title_words(title: str) -> list[str]:
    """A title's content words as written (TeX in Unicode, ``AdS_3`` → ``AdS₃``), stop words dropped."""
    words = (re.sub(r"_\{?(\d+)\}?", lambda m: m.group(1).translate(_SUBSCRIPT), w)
             for w in _TOKEN.findall(tex_plain(title)))
    return [w for w in words if len(w) > 1 and w.lower() not in STOPWORDS and not w.isdigit()
            and not (len(w) == 2 and w.isupper())]  # "SL" of SL(2,R), "II" of type II: not words


def _spellings(titles: Iterable[list[str]]) -> dict[str, str]:
    """lower-case word → how to write it in a name: as sentence-case titles write it (``de Sitter``, ``dS``,
    ``Kaluza-Klein``, but ``time-dependent``), lower-case when no such title has it."""
    seen: dict[str, Counter[str]] = {}
    for words in titles:
        if not words or sum(w[:1].isupper() for w in words[1:]) > 0.5 * max(1, len(words) - 1):
            continue  # a Title Case title says nothing about which words are names
        for w in words[1:]:
            seen.setdefault(w.lower(), Counter())[w] += 1
    out = {}
    for low, c in seen.items():
        word, n = c.most_common(1)[0]
        out[low] = word if n >= 2 or word == low else low  # one capitalised sighting may follow a colon
    return out


def _title_terms(words: list[str]) -> set[str]:
    """The terms a title holds: stems of its non-generic words and of each two consecutive words."""
    stems = [stem(w.lower()) for w in words]
    out = {s for s, w in zip(stems, words, strict=True) if w.lower() not in GENERIC_TITLE_WORDS}
    out.update(f"{a} {b}" for a, b in zip(stems, stems[1:], strict=False))
    return out


def cluster_names(trace: RunTrace, of: dict[str, int], k: int = 3) -> dict[int, str]:
    """A name for each community: its ``k`` most distinctive title terms (words and two-word phrases).

    A term's score contrasts the community with the rest of the run's graph: p_in · log(p_in / p_out), with
    p_in (p_out) the share of the community's (the other papers') titles holding it; it must appear in at
    least two of the community's titles (or its only one) and more often there than elsewhere. A phrase replaces its word when it holds at least
    60 % of the word's titles; generic title words ("theory", "model", "note" …) name nothing alone; a word
    is not repeated. Special groups (:data:`NOT_CONNECTED`, :data:`PRUNED_GROUP`) get their own names.
    """
    words = {n.paper.id: _title_words(n.paper.title) for n in trace.nodes}
    spell = _spellings(words.values())
    docs = {pid: _title_terms(ws) for pid, ws in words.items()}
    surface: dict[str, Counter[str]] = {}
    for ws in words.values():
        written = [w if _keeps_case(w) else spell.get(w.lower(), w.lower()) for w in ws]
        stems = [stem(w.lower()) for w in ws]
        for i, s in enumerate(stems):
            surface.setdefault(s, Counter())[written[i]] += 1
            if i + 1 < len(stems):
                surface.setdefault(f"{s} {stems[i + 1]}", Counter())[f"{written[i]} {written[i + 1]}"] += 1
    df = Counter(t for keys in docs.values() for t in keys)
    members: dict[int, list[str]] = {}
    for pid, c in of.items():
        members.setdefault(c, []).append(pid)
    names: dict[int, str] = {NOT_CONNECTED: "no kept citation edge", PRUNED_GROUP: "pruned papers"}
    for c, pids in members.items():
        if c >= 0:
            tf = Counter(t for p in pids for t in docs.get(p, ()))
            rest = max(1, len(docs) - len(pids))
            need = 2 if len(pids) > 1 else 1

            def score(t: str, tf: Counter[str] = tf, n: int = len(pids), rest: int = rest) -> float:
                p_in, p_out = tf[t] / n, (df[t] - tf[t] + 0.5) / rest
                return p_in * math.log(p_in / p_out)

            ranked = sorted((t for t in tf if tf[t] >= need and score(t) > 0), key=lambda t: (-score(t), t))
            names[c] = " · ".join(surface[t].most_common(1)[0][0] for t in _pick_terms(ranked, tf, k)) or f"cluster {c + 1}"
    return names


def _pick_terms(ranked: list[str], tf: Counter[str], k: int) -> list[str]:
    """The first ``k`` of ``ranked`` that share no word with one chosen before; a word gives way to its best
    phrase when the phrase holds at least 60 % of the word's titles (and shares no word with the chosen)."""
    chosen: list[str] = []
    for t in ranked:
        phrase = None if " " in t else next((u for u in ranked if " " in u and t in u.split() and tf[u] >= 0.6 * tf[t]), None)
        for cand in (phrase, t):
            if cand is None or cand in chosen:
                continue
            if not any(_overlaps(a, b) for u in chosen for a in cand.split() for b in u.split()):
                chosen.append(cand)
                break
        if len(chosen) == k:
            break
    return chosen


def _overlaps(a: str, b: str) -> bool:
    """Two stems name the same thing: equal once subscripts are dropped (``ads₃`` / ``ads₂``), or one ends
    the other (``d-bran`` / ``bran``)."""
    a, b = a.rstrip("₀₁₂₃₄₅₆₇₈₉0123456789"), b.rstrip("₀₁₂₃₄₅₆₇₈₉0123456789")
    return a == b or (min(len(a), len(b)) >= 4 and (a.endswith(b) or b.endswith(a)))


def _keeps_case(word: str) -> bool:
    """Acronyms and mixed-case terms keep their spelling (AdS, CFT, dS, BTZ); plain and Title Case words
    (``Time-Dependent``) go lower-case."""
    return any(any(ch.isupper() for ch in part[1:]) for part in word.split("-"))


def ordered_subgraph(g: Any, nodes: Sequence[str]) -> Any:
    """The subgraph of ``g`` on ``nodes`` as a new graph whose nodes and edges come in ``nodes``' order (with their
    data). networkx's ``g.subgraph`` iterates a small node set in the set's order, which changes with Python's
    hash seed: layouts and communities read from it would change from one process to the next."""
    import networkx as nx

    place = {p: i for i, p in enumerate(nodes)}
    out = nx.Graph()
    out.add_nodes_from((p, g.nodes[p]) for p in nodes)
    out.add_edges_from((u, v, g[u][v]) for u in nodes
                       for v in sorted((v for v in g[u] if v in place), key=place.__getitem__) if place[u] <= place[v])
    return out


def _local_positions(sub: Any, radius: float) -> dict[str, tuple[float, float]]:
    """Positions of one community's papers inside a disc of ``radius``: Kamada–Kawai (up to 40 papers, by
    stress majorization: :func:`~crase_core.views.stress.stress_layout`; else networkx's spring layout, fixed
    seed) over its shown edges, with the pieces those leave unconnected tied to a hidden hub so that they sit
    together instead of drifting to the rim."""
    import networkx as nx

    nodes = list(sub.nodes)
    if len(nodes) == 1:
        return {nodes[0]: (0.0, 0.0)}
    g = nx.Graph(sub)
    if not nx.is_connected(g):
        hub = ("hub",)
        place = {p: i for i, p in enumerate(nodes)}
        for piece in sorted((sorted(c, key=place.__getitem__) for c in nx.connected_components(sub)),
                            key=lambda c: place[c[0]]):  # in the view's order, not a set's (hash seed)
            for p in piece:
                g.add_edge(hub, p, weight=0.3)
    if len(nodes) <= 40:
        raw = stress_layout(g)
    else:
        raw = nx.spring_layout(g, k=1.8 / math.sqrt(len(nodes)), seed=7, iterations=80, weight="weight")
    raw = {p: xy for p, xy in raw.items() if p in sub}
    raw = nx.rescale_layout_dict(raw, 1.0)
    return {p: (float(x) * radius, float(y) * radius) for p, (x, y) in raw.items()}


def separate(pos: dict[str, tuple[float, float]], sizes: dict[str, float], gap: float = 8.0,
             rounds: int = 60) -> dict[str, tuple[float, float]]:
    """``pos`` with overlapping papers pushed apart until every two discs keep ``gap`` px between them (or
    ``rounds`` passes are done): each overlapping pair moves apart along the line between them, half each."""
    import numpy as np

    ids = list(pos)
    if len(ids) < 2:
        return dict(pos)
    xy = np.array([pos[p] for p in ids], dtype=float)
    r = np.array([sizes.get(p, MIN_NODE_SIZE) for p in ids], dtype=float)
    need = r[:, None] + r[None, :] + gap
    np.fill_diagonal(need, 0.0)
    jitter = np.random.default_rng(7).normal(0.0, 0.01, xy.shape)
    xy += jitter
    for _ in range(rounds):
        d = xy[:, None, :] - xy[None, :, :]
        dist = np.maximum(np.hypot(d[..., 0], d[..., 1]), 1e-6)
        short = np.clip(need - dist, 0.0, None)
        if not short.any():
            break
        xy += ((d / dist[..., None]) * (short / 2)[..., None]).sum(axis=1)
    return {p: (float(x), float(y)) for p, (x, y) in zip(ids, xy, strict=True)}


CLUSTER_SPACING = 58.0  # px per √paper of a cluster's disc
CLUSTER_GAP = 70.0  # px between two clusters' discs (room for the caption above)
CLUSTER_ASPECT = 1.9  # the width:height the clusters are packed for (the graph's canvas is wide)


def cluster_layout(trace: RunTrace, view: GraphView, groups: Communities | None = None) -> Layout:
    """Each community of the kept graph (:func:`communities`) that has papers in ``view`` gets its own disc
    (radius ∝ √papers), the discs packed in rows largest first, about as wide as a window; inside a disc
    the community's papers are laid out by their shown kept edges. A caption above each disc names it."""
    import networkx as nx

    if not view.nodes:
        return Layout({})
    groups = groups or communities(trace)
    of = {p: groups.of.get(p, NOT_CONNECTED) for p in view.nodes}
    order = sorted(set(of.values()), key=lambda c: (c < 0, -sum(1 for p in of if of[p] == c), c))
    g = nx.Graph()
    g.add_nodes_from(view.nodes)
    for e in view.edges:
        if e.kept and e.citing != e.cited and of[e.citing] == of[e.cited]:
            g.add_edge(e.citing, e.cited, weight=max(e.delta, 0.05))
    by_id = {n.paper.id: n for n in trace.nodes}
    max_score = max((by_id[p].score for p in view.nodes), default=0.0)
    sizes = {p: node_size(by_id[p].score, max_score) for p in view.nodes}
    discs = []
    for c in order:
        pids = [p for p in view.nodes if of[p] == c]
        r = CLUSTER_SPACING * math.sqrt(len(pids)) * (0.55 if len(pids) == 1 else 1.0)
        local = separate(_local_positions(ordered_subgraph(g, pids), r), sizes, gap=12.0)
        r = max([r] + [math.hypot(x, y) + sizes[p] for p, (x, y) in local.items()])
        discs.append((c, pids, r, local))
    def caption(c: int, n: int) -> str:
        label = groups.names.get(c, f"cluster {c + 1}")
        return f"{label} ({n})" if n > 1 else label

    # a slot is as wide as its disc or its caption (13 px bold: about 7.4 px a character), whichever is wider
    slots = [(c, pids, r, local, max(2 * r + 44.0, 7.4 * len(caption(c, len(pids))) + 16.0))
             for c, pids, r, local in discs]
    def shelves(width: float) -> tuple[float, float]:
        """(width, height) of the packing into rows of at most ``width``."""
        x = y = row_h = used = 0.0
        for _, _, r, _, w in slots:
            if x > 0 and x + w > width:
                x, y, row_h = 0.0, y + row_h + CLUSTER_GAP, 0.0
            x += w + CLUSTER_GAP
            used, row_h = max(used, x - CLUSTER_GAP), max(row_h, 2 * r + 44.0)
        return used, y + row_h

    widest, total_w = max(w for *_, w in slots), sum(w + CLUSTER_GAP for *_, w in slots)
    tries = [widest + (total_w - widest) * i / 16 for i in range(17)]
    row_width = min(tries, key=lambda t: abs(math.log(shelves(t)[0] / shelves(t)[1] / CLUSTER_ASPECT)))
    pos: dict[str, tuple[float, float]] = {}
    captions = []
    x = y = row_h = 0.0
    for c, pids, r, local, w in slots:
        if x > 0 and x + w > row_width:
            x, y, row_h = 0.0, y + row_h + CLUSTER_GAP, 0.0
        cx, cy = x + w / 2, y + r + 22.0
        for p, (px, py) in local.items():
            pos[p] = (cx + px, cy + py)
        captions.append({"x": cx, "y": cy - r - 28.0, "label": caption(c, len(pids)), "cluster": c, "r": r,
                         "w": w, "cx": cx, "cy": cy})  # w: the slot's width, the room its caption was given
        x += w + CLUSTER_GAP
        row_h = max(row_h, 2 * r + 44.0)
    return Layout(pos, captions=captions, groups=of)


# --- focus ------------------------------------------------------------------------------------------------
def focus_layout(trace: RunTrace, view: GraphView, radius: float = 300.0) -> Layout:
    """The focus paper in the middle; papers it cites on the left half-circle and papers citing it on the
    right (each half ordered by year, oldest at the top); trail papers further out, behind their
    successor on the trail. The script puts each label on the side facing away from the middle, so the
    arrows into the focus paper do not run through labels."""
    focus = view.focus
    if focus is None or focus not in view.nodes:
        return cluster_layout(trace, view)
    by_id = {n.paper.id: n for n in trace.nodes}
    cites = sorted({e.cited for e in view.edges if e.citing == focus and e.cited != focus},
                   key=lambda p: (by_id[p].paper.year or 0, p))
    cited_by = sorted({e.citing for e in view.edges if e.cited == focus and e.citing != focus} - set(cites),
                      key=lambda p: (by_id[p].paper.year or 0, p))
    pos: dict[str, tuple[float, float]] = {focus: (0.0, 0.0)}
    # each side: an arc of up to 170° (references stay left, citers right), wider for more papers
    n_left, n_right = len(cites), len(cited_by)
    span_l = min(170.0, 40.0 + 12.0 * n_left) if n_left else 0.0
    span_r = min(170.0, 40.0 + 12.0 * n_right) if n_right else 0.0
    widest = max((n / math.radians(sp) for n, sp in ((n_left, span_l), (n_right, span_r)) if n), default=0.0)
    r1 = max(radius, 34.0 * widest)  # ≥ 34 px between neighbours on the ring

    def arc(members: list[str], start: float, end: float) -> None:
        for i, p in enumerate(members):
            t = (i + 1) / (len(members) + 1)
            a = math.radians(start + (end - start) * t)
            pos[p] = (r1 * math.cos(a), r1 * math.sin(a))

    arc(cites, 180.0 + span_l / 2, 180.0 - span_l / 2)  # left: older at the top (canvas y grows downward)
    arc(cited_by, -span_r / 2, span_r / 2)  # right
    trail = trail_nodes(trace, focus)
    # walk the trail backwards from the focus; a paper not yet placed goes one ring further out
    for depth, (succ, p) in enumerate(zip(reversed(trail), list(reversed(trail))[1:], strict=False), start=1):
        if p in pos:
            continue
        sx, sy = pos.get(succ, (0.0, 0.0))
        angle = math.atan2(sy, sx) if (sx, sy) != (0.0, 0.0) else math.radians(-90.0)
        dist = math.hypot(sx, sy) + (r1 if depth == 1 else 170.0)
        pos[p] = (dist * math.cos(angle - 0.12 * depth), dist * math.sin(angle - 0.12 * depth))
    rest = [p for p in view.nodes if p not in pos]
    arc(rest, 200.0, 340.0)
    return Layout(pos)


def view_layout(trace: RunTrace, view: GraphView, layout: str, groups: Communities | None = None) -> Layout:
    """Positions for ``view`` in one of :data:`LAYOUTS`."""
    if layout == "timeline":
        return timeline_layout(trace, view.nodes)
    if layout == "clusters":
        return cluster_layout(trace, view, groups)
    if layout == "focus":
        return focus_layout(trace, view)
    raise InputError(f"unknown graph layout {layout!r}; choose one of {', '.join(LAYOUTS)}")


# --- edge geometry ----------------------------------------------------------------------------------------
BENDS = (0.0, 0.1, -0.1, 0.2, -0.2, 0.3, -0.3, 0.42, -0.42)  # tried in this order
REVERSE_BENDS = (0.12, 0.22, 0.32, 0.42)  # an edge whose reverse is shown too: both bend, to opposite sides
BEND_SAMPLES = 13
NODE_CLEARANCE = 4.0  # px an edge keeps from a paper it does not touch
MIDPOINT_CLEARANCE = 10.0  # px an edge's midpoint keeps from every other edge (room to point at it)
MAX_BENT_EDGES = 400


def curve_points(p: tuple[float, float], q: tuple[float, float], bend: float, n: int = BEND_SAMPLES) -> list[tuple[float, float]]:
    """Points of the drawn edge p → q: the quadratic Bézier whose control point is the midpoint moved by
    ``bend`` × |pq| to the left of the direction p → q (``bend`` 0: the straight segment). The script
    draws and hit-tests edges with the same formula."""
    (x0, y0), (x2, y2) = p, q
    dx, dy = x2 - x0, y2 - y0
    cx, cy = (x0 + x2) / 2 + bend * dy, (y0 + y2) / 2 - bend * dx  # left of p→q on a y-down canvas
    out = []
    for i in range(n):
        t = i / (n - 1)
        a, b, c = (1 - t) ** 2, 2 * (1 - t) * t, t * t
        out.append((a * x0 + b * cx + c * x2, a * y0 + b * cy + c * y2))
    return out


def bend_curves(p: tuple[float, float], q: tuple[float, float], bends: Sequence[float],
                n: int = BEND_SAMPLES) -> Any:
    """:func:`curve_points` of p → q for each of ``bends`` as one (bends × n × 2) array, computed with the same
    operations in the same order (the same floats)."""
    import numpy as np

    (x0, y0), (x2, y2) = p, q
    dx, dy = x2 - x0, y2 - y0
    b = np.asarray(bends, dtype=float)[:, None]
    cx, cy = (x0 + x2) / 2 + b * dy, (y0 + y2) / 2 - b * dx
    t = np.arange(n) / (n - 1)
    a, m, c = (1 - t) ** 2, 2 * (1 - t) * t, t * t
    return np.stack((a * x0 + m * cx + c * x2, a * y0 + m * cy + c * y2), axis=2)


def edge_bends(positions: dict[str, tuple[float, float]], sizes: dict[str, float],
               edges: Sequence[EdgeRecord], states: list[BendState] | None = None) -> dict[str, float]:
    """edge id → bend (see :func:`curve_points`), chosen edge by edge, the kept edges first (in ``edges`` order),
    then the pruned ones — so a view shown with its pruned edges bends its kept edges as the view without them
    (``states``: where earlier calls over the same positions ended; a call goes on from the longest that its
    papers and edges begin with, and adds its own). An edge takes the first of
    :data:`BENDS` (:data:`REVERSE_BENDS` for an edge whose reverse is drawn too: the two bow apart) whose curve
    passes no paper it does not touch closer than :data:`NODE_CLEARANCE` and whose midpoint keeps
    :data:`MIDPOINT_CLEARANCE` from the curves already chosen (as theirs from it) — so each edge has a middle
    one can point at; failing that, the bend that clears the papers with the most room, or the papers most.
    Views of more than :data:`MAX_BENT_EDGES` edges (an overview to zoom into) only bend reverse pairs apart."""
    import numpy as np

    present = {(e.citing, e.cited) for e in edges}
    if len(edges) > MAX_BENT_EDGES:
        return {edge_id(e): REVERSE_BENDS[0] if (e.cited, e.citing) in present else 0.0 for e in edges}
    ids = [p for p in positions if p in sizes]
    if not ids:
        return {}
    xy = np.array([positions[p] for p in ids], dtype=float)
    rad = np.array([sizes[p] for p in ids], dtype=float) + NODE_CLEARANCE
    reach = float(rad.max())
    index = {p: i for i, p in enumerate(ids)}
    drawn = [e for e in edges if e.citing in index and e.cited in index and e.citing != e.cited]
    drawn = [e for e in drawn if e.kept] + [e for e in drawn if not e.kept]
    reverse = [(e.cited, e.citing) in present for e in drawn]
    key = tuple((edge_id(e), r) for e, r in zip(drawn, reverse, strict=True))
    on = tuple(ids)
    start = max((st for st in states or () if st.continues(on, rad, key)), key=lambda st: len(st.key),
                default=None)
    chosen = ChosenCurves.with_room(len(drawn), start.chosen if start is not None else None)
    out: dict[str, float] = dict(start.bends) if start is not None else {}

    def papers_clear(curves: Any, lo: Any, hi: Any, touching: list[int]) -> Any:
        """Each curve's clearance from the papers not in ``touching`` (only those near its box ``lo``–``hi``: a
        paper closer than its radius lies within ``reach`` of it; one further only adds a value not read)."""
        near = _within(xy, lo - reach, hi + reach)
        near[touching] = False
        return _clearances(curves, xy[near], rad[near])

    todo = drawn[chosen.count:]
    bends_of = [REVERSE_BENDS if r else BENDS for r in reverse[chosen.count:]]
    curves_of = [bend_curves(positions[e.citing], positions[e.cited], b) for e, b in zip(todo, bends_of, strict=True)]
    touching_of = [[index[e.citing], index[e.cited]] for e in todo]
    # most edges take their first bend: whether it clears the papers, for every edge at once
    first_clear = _first_bend_clear(curves_of, touching_of, xy, rad)
    for e, bends, curves, touching, clear_first in zip(todo, bends_of, curves_of, touching_of, first_clear,
                                                        strict=True):
        first = curves[:1]
        first_room = chosen.room(first, first.min(axis=(0, 1)), first.max(axis=(0, 1))) if clear_first else None
        if first_room is not None and first_room[0] >= MIDPOINT_CLEARANCE:
            pick = (bends[0], 0.0, float(first_room[0]), curves[0])
        else:
            lo, hi = curves.min(axis=(0, 1)), curves.max(axis=(0, 1))
            papers, rooms = papers_clear(curves, lo, hi, touching), chosen.room(curves, lo, hi)
            options = [(bend, float(papers[i]), float(rooms[i]), curves[i]) for i, bend in enumerate(bends)]
            clear = [o for o in options if o[1] >= 0]
            pick = (next((o for o in clear if o[2] >= MIDPOINT_CLEARANCE), None)
                    or (max(clear, key=lambda o: o[2]) if clear else max(options, key=lambda o: o[1])))
        out[edge_id(e)] = pick[0]
        chosen.add(pick[3])
    if states is not None:
        states.append(BendState(on, rad, key, dict(out), chosen.head()))
    return out


def _first_bend_clear(curves_of: Sequence[Any], touching_of: Sequence[list[int]], xy: Any, rad: Any) -> list[bool]:
    """For each edge, whether the curve of its first bend passes every paper it does not touch at least that
    paper's radius ``rad`` away (:func:`_clearances` ≥ 0 over those papers), for many edges at once."""
    import numpy as np

    out: list[bool] = []
    for lo in range(0, len(curves_of), 64):
        curves = np.stack([c[0] for c in curves_of[lo:lo + 64]])  # (E, S, 2)
        a, b = curves[:, :-1], curves[:, 1:]
        ab = b - a
        length2 = np.maximum((ab ** 2).sum(axis=2), 1e-12)
        ap = xy[None, :, None, :] - a[:, None, :, :]  # (E, N, S, 2)
        t = np.clip((ap * ab[:, None]).sum(axis=3) / length2[:, None], 0.0, 1.0)
        nearest = a[:, None] + t[..., None] * ab[:, None]
        d = np.hypot(*(xy[None, :, None, :] - nearest).transpose(3, 0, 1, 2)).min(axis=2) - rad[None]
        rows = np.arange(len(curves))
        ends = np.array(touching_of[lo:lo + 64])
        d[rows, ends[:, 0]] = d[rows, ends[:, 1]] = math.inf
        out.extend((d.min(axis=1) >= 0).tolist())
    return out


def _within(points: Any, lo: Any, hi: Any) -> Any:
    """Mask of the rows of ``points`` (N × 2) inside the box [lo, hi] (bounds may be scalars or 2-vectors)."""
    return ((points >= lo) & (points <= hi)).all(axis=1)


def _to_segments_each(points: Any, seg_a: Any, seg_b: Any) -> Any:
    """For each of ``points`` (B × 2), the distance to the nearest of the segments seg_a[i]–seg_b[i] (inf when
    there are none): for B points at once."""
    import numpy as np

    if not len(seg_a):
        return np.full(len(points), math.inf)
    ab = seg_b - seg_a
    length2 = np.maximum((ab ** 2).sum(axis=1), 1e-12)
    ap = points[:, None, :] - seg_a[None]
    t = np.clip((ap * ab[None]).sum(axis=2) / length2[None], 0.0, 1.0)
    return np.hypot(*(points[:, None, :] - (seg_a[None] + t[..., None] * ab[None])).transpose(2, 0, 1)).min(axis=1)


def _clearances(curves: Any, centres: Any, radii: Any) -> Any:
    """For each of ``curves`` (B × samples × 2): min over discs of (distance from the disc's centre to the
    polyline) − its radius (inf when there is no disc)."""
    import numpy as np

    if not len(centres):
        return np.full(len(curves), math.inf)
    a, b = curves[:, :-1], curves[:, 1:]  # segments (B, S, 2)
    ab = b - a
    length2 = np.maximum((ab ** 2).sum(axis=2), 1e-12)
    ap = centres[None, :, None, :] - a[:, None, :, :]  # (B, M, S, 2)
    t = np.clip((ap * ab[:, None]).sum(axis=3) / length2[:, None], 0.0, 1.0)
    nearest = a[:, None] + t[..., None] * ab[:, None]
    d = np.hypot(*(centres[None, :, None, :] - nearest).transpose(3, 0, 1, 2)).min(axis=2)
    return (d - radii[None]).min(axis=1)


# --- drawing records --------------------------------------------------------------------------------------
def edge_style(e: EdgeRecord, context: bool = False) -> dict[str, Any]:
    """How an edge is drawn: width 0.6–3 px and opacity 0.3–0.85 grow with Δ (Eq. 4); solid when a model
    scored it, dashed when the offline word-overlap scorer decided it; pruned edges thin, dotted, red. A
    ``context`` edge (a citation among the top papers that is on no evidence trail) is drawn pale and thin;
    the script draws it at full strength while one of its papers is under the pointer."""
    if not e.kept:
        return {"width": 1.2, "colour": PRUNED_EDGE_COLOUR, "opacity": 0.8, "dash": EDGE_DASHES["pruned"],
                "context": context}
    d = max(0.0, min(1.0, e.delta))
    scorer = "model" if edge_scorer(e) == "model" else "offline"
    width, opacity = 0.6 + 2.4 * d, 0.3 + 0.55 * d
    if context:
        width, opacity = 0.45 + 0.9 * d, 0.12 + 0.16 * d
    return {"width": round(width, 2), "colour": EDGE_COLOURS[scorer], "opacity": round(opacity, 3),
            "dash": EDGE_DASHES[scorer], "context": context}


def draw_nodes(trace: RunTrace, view: GraphView, positions: dict[str, tuple[float, float]],
               groups: dict[str, int] | None = None, labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The script's node records: ``id, x, y, label, tip, colour, border, size, pri`` (0 = the label drawn
    first), ``rank``, ``mine`` (in the user's library: thick green border), ``group`` (cluster id)."""
    by_id = {n.paper.id: n for n in trace.nodes}
    sq = seed_subqueries(trace)
    max_score = max((by_id[p].score for p in view.nodes), default=0.0)
    labels = labels or node_labels(trace, [n.paper.id for n in trace.nodes])  # the same label in every view
    priority = label_priority(trace, view.nodes)
    out = []
    for pid in view.nodes:
        n = by_id[pid]
        x, y = positions.get(pid, (0.0, 0.0))
        out.append({
            "id": pid, "x": round(x), "y": round(y),  # whole pixels, where vis-network draws them
            "label": labels[pid], "tip": node_tooltip(n, sq.get(pid)),
            "colour": ROLE_COLOURS[n.display_role], "border": LIBRARY_BORDER if n.in_library else "#ffffff",
            "mine": bool(n.in_library), "size": round(node_size(n.score, max_score), 2),
            "pri": 0 if pid == view.focus else priority[pid] + 1, "rank": n.rank or 0,
            "group": (groups or {}).get(pid, 0),
        })
    return out


def draw_edges(trace: RunTrace, view: GraphView, bends: dict[str, float],
               labels: dict[str, str] | None = None, tips: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The script's edge records: ``id`` (``citing->cited``), ``from``, ``to``, ``kept``, ``scorer``,
    ``delta``, ``tip`` and the style of :func:`edge_style` (``width, colour, opacity, dash, context``), ``bend``.
    ``tips``: the tooltips drawn so far with these ``labels`` (:class:`ViewIndex`), filled as edges are drawn."""
    labels = labels or node_labels(trace, [n.paper.id for n in trace.nodes])
    by_id = {n.paper.id: n for n in trace.nodes}
    tips = {} if tips is None else tips
    out = []
    for e in view.edges:
        eid = edge_id(e)
        tip = tips.get(eid)
        if tip is None:
            tip = tips[eid] = edge_tooltip(trace, e, labels, by_id)
        out.append({"id": eid, "from": e.citing, "to": e.cited, "kept": e.kept, "scorer": edge_scorer(e) or "",
                    "delta": round(e.delta, 4), "tip": tip, "bend": bends.get(eid, 0.0),
                    **edge_style(e, is_context(view, e))})
    return out


DENSE_VIEW_EDGES = 300  # a view with more edges (and no trails) draws them all pale: an overview to hover and zoom


def is_context(view: GraphView, e: EdgeRecord) -> bool:
    """Whether ``e`` is drawn pale (:func:`edge_style`): a citation among the top papers on no evidence
    trail, or any edge of a dense view without trails (more than :data:`DENSE_VIEW_EDGES`)."""
    if view.trail_edges:
        return edge_id(e) not in view.trail_edges
    return len(view.edges) > DENSE_VIEW_EDGES


def legend_items(trace: RunTrace, view: GraphView) -> list[dict[str, str]]:
    """What the graph's legend lists, as constant text: node colours, the library border (when a shown paper
    is in the user's library), node size, Δ as width and darkness, who scored the edges (solid = a model,
    dashed = word overlap), pruned edges (when shown), the hover and selection highlights."""
    by_id = {n.paper.id: n for n in trace.nodes}
    roles = {by_id[p].display_role for p in view.nodes}
    items = [{"kind": "dot", "colour": ROLE_COLOURS[r], "text": ROLE_LABELS[r]}
             for r in ("seed_kept", "seed_pruned", "expanded", "expanded_pruned", "text") if r in roles]
    if any(by_id[p].in_library for p in view.nodes):
        items.append({"kind": "mine", "colour": LIBRARY_BORDER, "text": LIBRARY_LABEL})
    items.append({"kind": "size", "colour": "#8a96a3", "text": "size = score"})
    kept = [e for e in view.edges if e.kept]
    scorers = {"model" if edge_scorer(e) == "model" else "offline" for e in kept}
    if any(is_context(view, e) for e in kept):
        items.append({"kind": "context", "colour": EDGE_COLOURS["offline"],
                      "text": "pale: other citations among them" if view.trail_edges
                      else "pale: every edge (hover a paper for its own)"})
    if kept:
        items.append({"kind": "delta", "colour": EDGE_COLOURS["model" if scorers == {"model"} else "offline"],
                      "text": "width, darkness = Δ (coverage)"})
    if "model" in scorers:
        items.append({"kind": "line", "colour": EDGE_COLOURS["model"], "text": "solid: scored by the model"})
    if "offline" in scorers:
        offline = [s for s in DASHED_LEGEND if any(edge_scorer(e) == s for e in kept)] or ["offline"]
        items.append({"kind": "dash", "colour": EDGE_COLOURS["offline"],
                      "text": "; ".join(DASHED_LEGEND[s] for s in offline)})
    if any(not e.kept for e in view.edges):
        items.append({"kind": "pruned", "colour": PRUNED_EDGE_COLOUR, "text": "pruned edge (Δ ≤ τ)"})
    items.append({"kind": "ring", "colour": "#e76f51", "text": "selected"})
    return items


@dataclass
class RunView:
    """One view of a run, ready to draw: the records the graph script takes (``as_dict``)."""

    layout: str
    view: GraphView
    nodes: list[dict[str, Any]]
    edges: list[dict[str, Any]]
    axis: list[dict[str, Any]]
    captions: list[dict[str, Any]]
    legend: list[dict[str, str]]

    def as_dict(self) -> dict[str, Any]:
        """``{"layout", "nodes", "edges", "axis", "captions", "legend", "note", "hidden", "focus"}``."""
        return {"layout": self.layout, "nodes": self.nodes, "edges": self.edges, "axis": self.axis,
                "captions": self.captions, "legend": self.legend, "note": self.view.note,
                "hidden": self.view.hidden_pruned_edges, "focus": self.view.focus}


def run_view(
    trace: RunTrace,
    layout: str = "timeline",
    mode: str = "top-k and trails",
    *,
    focus: str | None = None,
    show_pruned: bool = False,
    top_k: int | None = DEFAULT_TOP_K,
    years: tuple[int, int] | None = None,
    min_score: float = 0.0,
    subqueries: Iterable[int] | None = None,
    groups: Communities | None = None,
    labels: dict[str, str] | None = None,
    max_nodes: int | None = None,
    max_edges: int = 4000,
    layouts: dict[tuple[Any, ...], Layout] | None = None,
    index: ViewIndex | None = None,
) -> RunView:
    """Select (:func:`graph_view`, or :func:`focus_view` for the ``focus`` layout: ``focus`` or the top
    result), lay out (:func:`view_layout`), bend (:func:`edge_bends`) and style one view of ``trace``.
    ``groups`` / ``labels``: the run's :func:`communities` / :func:`node_labels`, when the caller has them;
    ``layouts``: a dict that keeps layouts between calls (a view with the same papers — and, for focus, the
    same edges — is laid out once); ``index``: the run's :func:`view_index` shared by many views (with ``labels``
    fixed: it keeps their edge tooltips)."""
    if layout not in LAYOUTS:
        raise InputError(f"unknown graph layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    if layout == "focus":
        pid = focus or (trace.results[0].paper_id if trace.results else trace.nodes[0].paper.id if trace.nodes else "")
        view = focus_view(trace, pid, show_pruned=show_pruned, index=index)
    else:
        view = graph_view(trace, mode, show_pruned=show_pruned, top_k=top_k, years=years, min_score=min_score,
                          subqueries=subqueries, max_nodes=max_nodes, max_edges=max_edges)
    key = (layout, tuple(view.nodes), tuple(edge_id(e) for e in view.edges) if layout == "focus" else ())
    lay = layouts.get(key) if layouts is not None else None
    if lay is None:
        lay = view_layout(trace, view, layout, groups)
        if layouts is not None:
            layouts[key] = lay
    by_id = {n.paper.id: n for n in trace.nodes}
    max_score = max((by_id[p].score for p in view.nodes), default=0.0)
    sizes = {p: node_size(by_id[p].score, max_score) for p in view.nodes}
    labels_given = labels is not None
    labels = labels or node_labels(trace, [n.paper.id for n in trace.nodes])
    drawn = tuple(edge_id(e) for e in view.edges)  # a view with and without pruned edges often draws the same
    bends = lay.bends.get(drawn)
    if bends is None:
        bends = lay.bends[drawn] = edge_bends(lay.positions, sizes, view.edges, lay.bend_states)
    return RunView(layout, view, draw_nodes(trace, view, lay.positions, lay.groups, labels),
                   draw_edges(trace, view, bends, labels, index.tips if index is not None and labels_given else None),
                   lay.axis, lay.captions, legend_items(trace, view))


# --- pointing: the hit test's contract, in Python (the browser tests and benchmarks/graph_pointing.py hold
# graph_core.js's hitTest to it) -------------------------------------------------------------------------------
HIT_TOLERANCE = 8.0  # px: how far from an item the pointer may be and still point at it


def drawn_curve(p: tuple[float, float], q: tuple[float, float], bend: float, r_from: float, r_to: float,
                n: int = 400) -> list[tuple[float, float]]:
    """The visible part of an edge p → q (screen pixels): its curve (:func:`curve_points`) from where it
    leaves the disc of radius ``r_from`` around p to where it enters the one of ``r_to`` around q; ``[]``
    when the discs touch."""
    pts = curve_points(p, q, bend, n)
    inside = [i for i, (x, y) in enumerate(pts)
              if math.hypot(x - p[0], y - p[1]) > r_from and math.hypot(x - q[0], y - q[1]) > r_to]
    return pts[inside[0]: inside[-1] + 1] if inside else []


def arc_midpoint(pts: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """The point halfway along the polyline ``pts`` (by length)."""
    lengths = [math.hypot(b[0] - a[0], b[1] - a[1]) for a, b in zip(pts, pts[1:], strict=False)]
    half, run = sum(lengths) / 2, 0.0
    for (a, b), seg in zip(zip(pts, pts[1:], strict=False), lengths, strict=True):
        if run + seg >= half and seg > 0:
            t = (half - run) / seg
            return (a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]))
        run += seg
    return pts[len(pts) // 2]


def _to_polyline(point: tuple[float, float], pts: Sequence[tuple[float, float]]) -> float:
    best = math.inf
    for a, b in zip(pts, pts[1:], strict=False):
        dx, dy = b[0] - a[0], b[1] - a[1]
        length2 = dx * dx + dy * dy
        t = 0.0 if not length2 else max(0.0, min(1.0, ((point[0] - a[0]) * dx + (point[1] - a[1]) * dy) / length2))
        best = min(best, math.hypot(point[0] - a[0] - t * dx, point[1] - a[1] - t * dy))
    return best


def pointed_items(point: tuple[float, float], nodes: Sequence[tuple[str, float, float, float]],
                  edges: Sequence[tuple[str, Sequence[tuple[float, float]], float]],
                  tol: float = HIT_TOLERANCE) -> list[tuple[float, str, str]]:
    """Every item the pointer at ``point`` may mean, nearest first, as (distance, kind, id).

    ``nodes``: (id, x, y, drawn radius); ``edges``: (id, drawn curve, drawn width), all in screen pixels.
    A paper whose disc holds the point comes alone (distance 0): it is what the point means. Otherwise an
    edge counts by its distance to the drawn curve minus half its width, a paper by its distance to its
    rim; items further than ``tol`` do not count.
    """
    inside = [(0.0, "node", nid) for nid, x, y, r in nodes if math.hypot(point[0] - x, point[1] - y) <= r]
    if inside:
        return inside[-1:]  # the paper drawn last is on top
    out = [(d, "node", nid) for nid, x, y, r in nodes if (d := math.hypot(point[0] - x, point[1] - y) - r) <= tol]
    out += [(d, "edge", eid) for eid, pts, width in edges if pts
            and (d := max(0.0, _to_polyline(point, pts) - width / 2)) <= tol]
    return sorted(out)
