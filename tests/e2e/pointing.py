"""Pointing at the evidence graph as a reader does, for the app's component and the HTML export alike.

The pointer goes to the midpoint of a random kept edge's drawn curve, or to a random paper's centre; the
item the graph highlights (hover) must be the one a click then opens, and the one nearest the pointer by
the reference geometry (:func:`crase_core.views.graph_views.pointed_items`, computed here in Python from the
drawn positions, independently of the script's own hit test).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from crase_core.views.graph_views import arc_midpoint, drawn_curve, pointed_items

TIE_PX = 0.5  # items this close to the nearest distance are as near as it (a click lands on a pixel)


@dataclass
class Target:
    kind: str  # what was aimed at: "edge" / "node"
    id: str
    x: float  # in the graph canvas' pixels
    y: float
    nearest: list[tuple[str, str]]  # the items nearest the point (ties within TIE_PX)


def geometry(frame: Any, graph: str) -> dict[str, Any]:
    return frame.evaluate(f"() => {graph}.geometry()")


def targets(frame: Any, graph: str, n_edges: int, n_nodes: int, seed: int) -> list[Target]:
    """``n_edges`` random kept edges' midpoints and ``n_nodes`` random papers' centres of the view the graph
    shows (seeded), each with the items nearest it by the reference geometry."""
    geo = geometry(frame, graph)
    box = frame.evaluate(f"() => {{ const r = {graph}.canvas.getBoundingClientRect(); return [r.width, r.height]; }}")
    nodes = [(n["id"], n["x"], n["y"], n["r"]) for n in geo["nodes"]]
    at = {n["id"]: n for n in geo["nodes"]}
    curves = [(e["id"], drawn_curve((at[e["from"]]["x"], at[e["from"]]["y"]), (at[e["to"]]["x"], at[e["to"]]["y"]),
                                    e["bend"], at[e["from"]]["r"], at[e["to"]]["r"]), e["width"], e["kept"])
              for e in geo["edges"]]
    edges = [(eid, pts, w) for eid, pts, w, _ in curves]
    inside = lambda x, y: 4 <= x <= box[0] - 4 and 4 <= y <= box[1] - 4  # noqa: E731
    rng = random.Random(seed)
    kept = sorted((eid, arc_midpoint(pts)) for eid, pts, _, k in curves if k and pts)
    kept = [(eid, m) for eid, m in kept if inside(*m)]
    papers = sorted((n["id"], (n["x"], n["y"])) for n in geo["nodes"] if inside(n["x"], n["y"]))
    out = []
    for kind, pool, n in (("edge", kept, n_edges), ("node", papers, n_nodes)):
        assert len(pool) >= n, f"only {len(pool)} {kind}s inside the canvas"
        for iid, (x, y) in rng.sample(pool, n):
            items = pointed_items((x, y), nodes, edges)
            best = [(k, i) for d, k, i in items if d <= items[0][0] + TIE_PX] if items else []
            out.append(Target(kind, iid, x, y, best))
    return out


def point_and_click(page: Any, frame: Any, graph: str, origin: tuple[float, float], t: Target,
                    opened: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Hover ``t`` (the graph highlights one of its nearest items and its tooltip shows), click there (the click
    opens exactly the hovered item), then ``opened(click)`` checks what the page shows for it."""
    cx, cy = frame.evaluate(f"() => {{ const r = {graph}.canvas.getBoundingClientRect(); return [r.left, r.top]; }}")
    px, py = origin[0] + cx + t.x, origin[1] + cy + t.y
    page.mouse.move(px, py)
    frame.wait_for_function(f"() => !!{graph}.hovered", timeout=5_000)
    hovered = frame.evaluate(f"() => {graph}.hovered")
    assert (hovered["kind"], hovered["id"]) in t.nearest, (t, hovered)
    tip = frame.evaluate(f"() => {graph}.tip.style.display === 'block' ? {graph}.tip.textContent : ''")
    assert tip, f"no tooltip over {hovered}"
    before = frame.evaluate(f"() => {graph}.clicks.length")
    page.mouse.click(px, py)
    frame.wait_for_function(f"n => {graph}.clicks.length > n", arg=before, timeout=5_000)
    click = frame.evaluate(f"() => {graph}.clicks[{graph}.clicks.length - 1]")
    assert (click["kind"], click["id"]) == (hovered["kind"], hovered["id"]), (t, hovered, click)
    opened(click)
    return {"target": t, "hovered": hovered, "tip": tip, "click": click}
