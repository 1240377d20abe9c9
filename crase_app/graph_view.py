"""The evidence-graph page's side of the run view model: what the graph component is given.

The views themselves — selection, timeline / cluster / focus layouts, labels, tooltips, edge styles,
legend — are :mod:`crase_core.views.graph_views`, which the HTML export draws too; this module only turns one
:class:`~crase_core.views.graph_views.RunView` into the component's arguments.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from crase_core.trace import RunTrace
from crase_core.views.graph_views import (
    DEFAULT_TOP_K,
    LAYOUT_LABELS,
    LAYOUTS,
    VIEW_MODES,
    Communities,
    edge_id,
    edge_scorer,
    node_labels,
    run_view,
)

__all__ = ["DEFAULT_TOP_K", "LAYOUTS", "LAYOUT_LABELS", "VIEW_MODES", "component_args", "edge_id", "edge_scorer",
           "node_labels"]

HINT = "Hover: full text · Click: inspect below · Double-click a paper: focus · Scroll: zoom · Drag: pan"


def component_args(trace: RunTrace, layout: str, mode: str, *, focus: str | None = None, show_pruned: bool = False,
                   top_k: int | None = DEFAULT_TOP_K, years: tuple[int, int] | None = None, min_score: float = 0.0,
                   subqueries: Iterable[int] | None = None, groups: Communities | None = None,
                   labels: dict[str, str] | None = None) -> dict[str, Any]:
    """The graph component's arguments for one view: the view model's records (``nodes``, ``edges``,
    ``axis``, ``captions``, ``legend``, ``layout``, ``note``, ``hidden``, ``focus``), the hint line and
    ``n_nodes`` (papers shown)."""
    rv = run_view(trace, layout, mode, focus=focus, show_pruned=show_pruned, top_k=top_k, years=years,
                  min_score=min_score, subqueries=subqueries, groups=groups, labels=labels)
    return {**rv.as_dict(), "hint": HINT, "n_nodes": len(rv.view.nodes)}
