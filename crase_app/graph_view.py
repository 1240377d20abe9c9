"""What the evidence-graph page draws: which nodes and edges a view shows, their layout and vis-network records.

Plain functions over a :class:`RunTrace` (no Streamlit), so they are unit-tested
without a browser. Node colour = role, size = score; edge colour/width = Δ (Eq. 4),
pruned edges dashed. Three layouts: a *timeline* (x = publication year, y = score),
*clusters* (force layout pulled together by the sub-query that brought each paper in)
and *focus* (one paper in the middle, its references left, its citers right, its
evidence trail back to the seed). Labels are short and unique (first author + year,
``a``/``b`` when two papers share both); the component draws only those that fit.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from crase_app.display import (
    PRUNED_EDGE_COLOUR,
    ROLE_COLOURS,
    ROLE_LABELS,
    authors_line,
    first_author_surname,
    node_role,
    shorten_words,
    tex_accents,
    tex_plain,
)
from crase_core.errors import InputError
from crase_core.records import EdgeRecord, NodeRecord
from crase_core.trace import RunTrace

# --- graph views ----------------------------------------------------------------------------------------
VIEW_MODES = ("top-k and trails", "kept graph", "everything")
LAYOUTS = ("timeline", "clusters", "focus")
LAYOUT_LABELS = {"timeline": "Timeline", "clusters": "Clusters", "focus": "Focus"}
DEFAULT_TOP_K = 20  # the default view: the 20 best papers and their trails (readable for a 700-node run)
MIN_NODE_SIZE, MAX_NODE_SIZE = 7.0, 26.0
SCORER_LABELS = {"model": "scored by the model", "offline": "scored offline (lexical fallback)"}
LIBRARY_BORDER = "#1e7b34"  # the thick green border of a paper already in the user's library
LIBRARY_LABEL = "already in your library"
LIBRARY_GROUP = -2  # node_groups: papers whose only seed came from the user's library


@dataclass
class GraphView:
    """The node ids and edges one evidence-graph view shows (edges only between shown nodes)."""

    nodes: list[str]
    edges: list[EdgeRecord]
    hidden_pruned_edges: int = 0
    note: str = ""
    focus: str | None = None


@dataclass
class Layout:
    """Node positions (vis pixels) plus what the canvas draws behind them: year ticks, cluster captions."""

    positions: dict[str, tuple[float, float]]
    axis: list[dict[str, Any]] = field(default_factory=list)  # [{"x", "label"}] for the timeline
    groups: list[dict[str, Any]] = field(default_factory=list)  # [{"x", "y", "label"}] cluster captions


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

    kept_edges: list[EdgeRecord] = []
    pruned_edges: list[EdgeRecord] = []
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


def focus_view(trace: RunTrace, pid: str, *, show_pruned: bool = False, max_neighbours: int = 40) -> GraphView:
    """One paper, the papers on its evidence trail to the seed, and its direct citation edges.

    Edges: the trail steps and every edge touching ``pid`` (kept ones; pruned ones too with
    ``show_pruned``), at most ``max_neighbours`` neighbours (kept edges first, then by Δ).
    """
    try:
        trace.node(pid)
    except KeyError as exc:
        raise InputError(f"paper {pid!r} is not part of this run") from exc
    trail = trail_nodes(trace, pid)
    trail_pairs = set(zip(trail, trail[1:], strict=False))
    on_trail = {p for p in trail}
    touching = [e for e in trace.edges if pid in (e.citing, e.cited)]
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
    for e in trace.edges:
        if ((e.citing, e.cited) in trail_pairs or (e.cited, e.citing) in trail_pairs) and edge_id(e) not in seen:
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


def delta_colour(delta: float) -> str:
    """Kept-edge colour: light blue-grey (Δ→0) to deep navy (Δ = 1)."""
    t = max(0.0, min(1.0, delta))
    lo, hi = (0xA9, 0xB8, 0xCC), (0x1D, 0x35, 0x57)
    r, g, b = (round(a + (c - a) * t) for a, c in zip(lo, hi, strict=True))
    return f"#{r:02x}{g:02x}{b:02x}"


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
    """Plain-text tooltip (the component renders it with textContent, never as HTML)."""
    lines = [tex_plain(n.paper.title), f"{n.paper.year or 'n.d.'} · {tex_accents(authors_line(list(n.paper.authors)))}"]
    found_by = [f"sub-quer{'y' if len([i for i in seed_sq or [] if i >= 0]) == 1 else 'ies'} "
                + ", ".join(str(i + 1) for i in seed_sq or [] if i >= 0)] if any(i >= 0 for i in seed_sq or []) else []
    if seed_sq and -1 in seed_sq:  # a library seed's origin has sub-query index -1
        found_by.append("your library")
    lines.append(ROLE_LABELS[node_role(n)] + (f" ({' and '.join(found_by)})" if found_by else ""))
    if n.in_library:
        lines.append(LIBRARY_LABEL)
    if n.kept:
        lines.append(f"score {n.score:.4f}" + (f" · rank {n.rank}" if n.rank else ""))
    else:
        lines.append(n.prune_reason)
    return "\n".join(lines)


def edge_tooltip(trace: RunTrace, e: EdgeRecord, labels: dict[str, str]) -> str:
    """Plain-text edge tooltip: who cites whom (full titles), Δ, weight, decision, scorer."""
    u, v = trace.node(e.citing).paper, trace.node(e.cited).paper
    k, n = sum(e.supported), len(e.supported)
    lines = [
        f"{labels.get(e.citing, e.citing)} cites {labels.get(e.cited, e.cited)}",
        f"u: {tex_plain(u.title)}",
        f"v: {tex_plain(v.title)}",
        f"Δ = {e.delta:.3f} ({k} of {n} citing claims supported) · weight {e.weight:.4f}",
        e.decision,
    ]
    scorer = edge_scorer(e)
    if scorer:
        lines.append(SCORER_LABELS.get(scorer, f"scored by {scorer}"))
    return "\n".join(x for x in lines if x)


# --- layouts --------------------------------------------------------------------------------------------
def node_groups(trace: RunTrace, nodes: Sequence[str], edges: Sequence[EdgeRecord]) -> dict[str, int]:
    """paper id → the sub-query (0-based) it belongs to: a seed's first sub-query; a ranked paper's trail
    seed's; otherwise that of the nearest shown seed (through shown edges); ``-1`` when none is reachable,
    :data:`LIBRARY_GROUP` for papers whose seed came only from the user's library."""
    sq = seed_subqueries(trace)
    trail_seed = trail_seed_of(trace)
    shown = set(nodes)
    group: dict[str, int] = {}
    def first(indices: list[int]) -> int:  # a search sub-query before the library (origin index -1)
        return next((i for i in indices if i >= 0), LIBRARY_GROUP)

    for pid in nodes:
        if sq.get(pid):
            group[pid] = first(sq[pid])
        else:
            seed = trail_seed.get(pid)
            if seed and sq.get(seed):
                group[pid] = first(sq[seed])
    adj: dict[str, list[str]] = {p: [] for p in nodes}
    for e in edges:
        if e.citing in shown and e.cited in shown:
            adj[e.citing].append(e.cited)
            adj[e.cited].append(e.citing)
    queue = deque(p for p in nodes if p in group)
    while queue:
        p = queue.popleft()
        for q in adj[p]:
            if q not in group:
                group[q] = group[p]
                queue.append(q)
    return {p: group.get(p, -1) for p in nodes}


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


def timeline_layout(trace: RunTrace, nodes: Sequence[str], year_step: float | None = None, height: float = 560.0) -> Layout:
    """x = publication year (papers without one in an ``n.d.`` column at the left), y = rank by score (the
    best at the top; papers with score 0 in a band below). Papers of one year spread over 3–11 lanes; none
    overlaps another: each goes to the lane where it sits highest once pushed below the papers in its way."""
    by_id = {n.paper.id: n for n in trace.nodes}
    if not nodes:
        return Layout({})
    years = sorted({yr for p in nodes if (yr := by_id[p].paper.year)})
    y0 = years[0] if years else 2000
    y1 = years[-1] if years else 2000
    per_year: dict[int | None, int] = {}
    for p in nodes:
        per_year[by_id[p].paper.year] = per_year.get(by_id[p].paper.year, 0) + 1
    # crowded years get more lanes (and the years more room), so a 700-paper view stays wide, not tall
    n_lanes = min(11, max(3, 2 * math.ceil(math.sqrt(max(per_year.values()) / 6.0)) + 1))
    if year_step is None:
        year_step = max(90.0, 26.0 * n_lanes)
    nd_x = (y0 - 2 - y0) * year_step
    max_score = max((by_id[p].score for p in nodes), default=0.0)
    by_score = sorted((p for p in nodes if by_id[p].score > 0), key=lambda p: (-by_id[p].score, p))
    score_rank = {p: i for i, p in enumerate(by_score)}
    height = max(height, 0.45 * (y1 - y0 + 3) * year_step)  # use the canvas' width: not a flat strip
    columns: dict[float, list[str]] = {}
    for p in nodes:
        yr = by_id[p].paper.year
        columns.setdefault((yr - y0) * year_step if yr else nd_x, []).append(p)
    half = n_lanes // 2
    lane_gap = 0.84 * year_step / max(1, n_lanes - 1)
    lanes = tuple(sorted((k * lane_gap for k in range(-half, half + 1)), key=abs))
    pos: dict[str, tuple[float, float]] = {}
    radius: dict[str, float] = {}
    placed_near: dict[float, list[str]] = {}  # column x → papers placed there

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

    for x in sorted(columns):
        members = sorted(columns[x], key=lambda p: (target(p), p))
        for p in members:
            r = node_size(by_id[p].score, max_score)
            near = [q for cx in (x - year_step, x, x + year_step) for q in placed_near.get(cx, [])]
            best = min(((lowest_free(x + dx, target(p), r, near), i) for i, dx in enumerate(lanes)))
            pos[p] = (x + lanes[best[1]], best[0])
            radius[p] = r
            placed_near.setdefault(x, []).append(p)
    span = max(1, y1 - y0)
    every = 1 if span <= 12 else 2 if span <= 25 else 5
    axis = [{"x": (yr - y0) * year_step, "label": str(yr)} for yr in range(y0, y1 + 1) if (yr - y0) % every == 0]
    if nd_x in columns:
        axis.append({"x": nd_x, "label": "n.d."})
    return Layout(pos, axis=axis)


def cluster_layout(trace: RunTrace, view: GraphView, scale: float = 420.0) -> Layout:
    """Force layout in which every paper is also pulled toward its sub-query's anchor (anchors sit on a
    circle), so the papers each sub-query brought in form one cluster; a caption names each cluster."""
    import networkx as nx

    nodes = view.nodes
    if not nodes:
        return Layout({})
    groups = node_groups(trace, nodes, view.edges)
    ids = sorted(set(groups.values()))
    g = nx.Graph()
    g.add_nodes_from(nodes)
    for e in view.edges:
        if e.citing != e.cited:
            w = max(e.delta, 0.05) if e.kept else 0.02
            g.add_edge(e.citing, e.cited, weight=w + (g[e.citing][e.cited]["weight"] if g.has_edge(e.citing, e.cited) else 0))
    anchors: dict[int, str] = {}
    fixed: dict[str, tuple[float, float]] = {}
    for i, gid in enumerate(ids):
        a = f"__anchor_{gid}"
        anchors[gid] = a
        angle = 2 * math.pi * i / max(1, len(ids))
        radius = 0.0 if len(ids) == 1 else 1.0
        fixed[a] = (radius * math.cos(angle), radius * math.sin(angle))
        g.add_node(a)
    for p, gid in groups.items():
        g.add_edge(p, anchors[gid], weight=0.6)
    k = 1.2 / math.sqrt(max(len(nodes), 1))
    iterations = 100 if len(nodes) <= 150 else 50 if len(nodes) <= 350 else 25  # O(n²) per iteration
    pos = nx.spring_layout(g, k=k, seed=7, iterations=iterations, method="force", weight="weight", pos=dict(fixed), fixed=list(fixed))
    grow = scale * max(1.0, math.sqrt(len(nodes) / 45.0))
    out = {p: (float(pos[p][0]) * grow, float(pos[p][1]) * grow) for p in nodes}
    captions = []
    for gid in ids:
        members = [out[p] for p, q in groups.items() if q == gid]
        if not members:
            continue
        cx = sum(x for x, _ in members) / len(members)
        top = min(y for _, y in members)
        sub = trace.plan.subqueries[gid] if 0 <= gid < len(trace.plan.subqueries) else ""
        label = (f"{gid + 1}. {shorten_words(sub, 48)}" if gid >= 0 else
                 "from your library" if gid == LIBRARY_GROUP else "not reached from a seed")
        captions.append({"x": cx, "y": top - 40.0, "label": label})
    return Layout(out, groups=captions)


def focus_layout(trace: RunTrace, view: GraphView, radius: float = 300.0) -> Layout:
    """The focus paper in the middle; papers it cites on the left half-circle and papers citing it on the
    right (each half ordered by year, oldest at the top); trail papers further out, behind their
    successor on the trail."""
    focus = view.focus
    if focus is None or focus not in view.nodes:
        return Layout(layout_positions(view.nodes, view.edges))
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


def view_layout(trace: RunTrace, view: GraphView, layout: str) -> Layout:
    """Positions for ``view`` in one of :data:`LAYOUTS`."""
    if layout == "timeline":
        return timeline_layout(trace, view.nodes)
    if layout == "clusters":
        return cluster_layout(trace, view)
    if layout == "focus":
        return focus_layout(trace, view)
    raise InputError(f"unknown graph layout {layout!r}; choose one of {', '.join(LAYOUTS)}")


# --- vis-network records --------------------------------------------------------------------------------
def vis_network_data(
    trace: RunTrace, view: GraphView, positions: dict[str, tuple[float, float]] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """vis-network ``{"nodes": [...], "edges": [...]}`` for ``view``, assembled with pyvis.

    Every text is plain text: ``label`` (short, unique over the whole run, so a paper keeps its label in
    every view and in the focus picker), ``tip`` (the tooltip: full title,
    authors, role, score) — the component draws labels on the canvas and tooltips via
    ``textContent``, never as HTML. ``pri`` orders labels (0 = drawn first). Node colour =
    role, size = score; a paper already in the user's library has a thick green border
    (``mine`` true); edge colour/width = Δ; pruned edges dashed; when the run mixes
    scorers, edges scored offline are dotted.
    """
    from pyvis.network import Network

    by_id = {n.paper.id: n for n in trace.nodes}
    sq = seed_subqueries(trace)
    max_score = max((by_id[p].score for p in view.nodes), default=0.0)
    labels = node_labels(trace, [n.paper.id for n in trace.nodes])  # the same label in every view and picker
    priority = label_priority(trace, view.nodes)
    mixed = len({edge_scorer(e) for e in view.edges} - {None}) > 1
    net = Network(directed=True)
    for pid in view.nodes:
        n = by_id[pid]
        role = node_role(n)
        extra: dict[str, Any] = {}
        if positions and pid in positions:
            extra["x"], extra["y"] = positions[pid]
        mine = bool(n.in_library)
        colour: str | dict[str, Any] = ROLE_COLOURS[role]
        if mine:
            colour = {"background": ROLE_COLOURS[role], "border": LIBRARY_BORDER,
                      "highlight": {"background": ROLE_COLOURS[role], "border": LIBRARY_BORDER}}
            extra["borderWidth"] = 3.5
            extra["borderWidthSelected"] = 4.5
        net.add_node(
            pid,
            label=labels[pid],
            tip=node_tooltip(n, sq.get(pid)),
            color=colour,
            mine=mine,
            size=node_size(n.score, max_score),
            shape="dot",
            pri=0 if pid == view.focus else priority[pid] + 1,
            rank=n.rank or 0,
            **extra,
        )
    for e in view.edges:
        scorer = edge_scorer(e)
        common = {"id": edge_id(e), "tip": edge_tooltip(trace, e, labels), "kept": e.kept, "scorer": scorer or ""}
        if e.kept:
            dashes: bool | list[int] = [2, 4] if mixed and scorer == "offline" else False
            net.add_edge(e.citing, e.cited, color=delta_colour(e.delta), width=0.8 + 3.2 * e.delta, dashes=dashes,
                         **common)
        else:
            net.add_edge(e.citing, e.cited, color=PRUNED_EDGE_COLOUR, width=1.0, dashes=True, **common)
    return {"nodes": list(net.nodes), "edges": list(net.edges)}


def legend_items(trace: RunTrace, view: GraphView) -> list[dict[str, str]]:
    """What the graph's legend lists, as constant text: node colours, the library border (when a shown paper
    is in the user's library), node size, edge colour/width,
    pruned dashes, the scorer when the run records it, the selection highlight."""
    roles = {node_role(trace.node(p)) for p in view.nodes}
    items = [{"kind": "dot", "colour": ROLE_COLOURS[r], "text": ROLE_LABELS[r]}
             for r in ("seed_kept", "seed_pruned", "expanded", "expanded_pruned", "text") if r in roles]
    if any(trace.node(p).in_library for p in view.nodes):
        items.append({"kind": "mine", "colour": LIBRARY_BORDER, "text": LIBRARY_LABEL})
    items.append({"kind": "size", "colour": "#8a96a3", "text": "size = score (share of the ranking walk)"})
    items.append({"kind": "line", "colour": delta_colour(0.9), "text": "kept edge: darker, thicker = higher Δ"})
    if any(not e.kept for e in view.edges):
        items.append({"kind": "dash", "colour": PRUNED_EDGE_COLOUR, "text": "pruned edge (Δ ≤ τ)"})
    scorers = {s for e in view.edges if (s := edge_scorer(e))}
    if len(scorers) > 1:
        items.append({"kind": "dot-line", "colour": delta_colour(0.9), "text": SCORER_LABELS["offline"]})
    elif scorers:
        s = next(iter(scorers))
        items.append({"kind": "note", "colour": "", "text": "all edges " + SCORER_LABELS.get(s, f"scored by {s}")})
    items.append({"kind": "ring", "colour": "#e76f51", "text": "selected"})
    return items
