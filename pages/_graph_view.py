"""What the evidence-graph page draws: which nodes and edges a view shows, their layout and vis-network records.

Plain functions over a :class:`RunTrace` (no Streamlit), so they are unit-tested
without a browser. Node colour = role, size = score; edge colour/width = Δ (Eq. 4),
pruned edges dashed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from crase_core.errors import InputError
from crase_core.records import EdgeRecord, NodeRecord
from crase_core.trace import RunTrace
from pages._display import PRUNED_EDGE_COLOUR, ROLE_COLOURS, ROLE_LABELS, authors_line, node_role, short_title

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
