"""A Kamada–Kawai layout by stress majorization, in numpy.

networkx's ``kamada_kawai_layout`` minimises the Kamada–Kawai energy with ``scipy.optimize`` (about half a
second to import, longer than the layouts of a whole run take). The energy is the stress of the graph
distances weighted by their inverse squares, Σ_{i<j} d_ij⁻² (‖x_i − x_j‖ − d_ij)², which stress majorization
(SMACOF: Gansner, Koren & North, "Graph drawing by stress majorization", 2004) lowers at every step with
one solve against a fixed matrix. :func:`stress_layout` starts, as networkx does, from the circle.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

#: steps at most, and the relative fall of the stress below which the layout is taken as settled
MAX_STEPS = 300
SETTLED = 1e-6


def stress_layout(g: Any, max_steps: int = MAX_STEPS) -> dict[Hashable, tuple[float, float]]:
    """Positions of a connected networkx graph's nodes (in its node order) minimising the Kamada–Kawai
    energy by stress majorization from the circle, centred at the origin, unscaled (graph distance ≈ 1).

    >>> import networkx as nx
    >>> pos = stress_layout(nx.path_graph(3))
    >>> round(math.dist(pos[0], pos[2]), 3), round(math.dist(pos[0], pos[1]), 3)
    (2.0, 1.0)
    """
    import networkx as nx
    import numpy as np

    nodes = list(g)
    n = len(nodes)
    if n <= 1:
        return {p: (0.0, 0.0) for p in nodes}
    index = {p: i for i, p in enumerate(nodes)}
    d = np.zeros((n, n))
    for p, lengths in nx.shortest_path_length(g):
        for q, length in lengths.items():
            d[index[p], index[q]] = length
    if not (d + np.eye(n) > 0).all():
        raise ValueError("stress_layout needs a connected graph")
    w = np.zeros((n, n))
    off = ~np.eye(n, dtype=bool)
    w[off] = d[off] ** -2.0
    laplacian = np.diag(w.sum(axis=1)) - w
    solve = np.linalg.pinv(laplacian)
    angle = np.linspace(0.0, 2.0 * math.pi, n + 1)[:-1]
    x = np.column_stack((np.cos(angle), np.sin(angle))) * d.max() / 2.0
    stress = math.inf
    for _ in range(max_steps):
        gaps = np.hypot(*(x[:, None, :] - x[None, :, :]).transpose(2, 0, 1))
        now = float((w[off] * (gaps[off] - d[off]) ** 2).sum()) / 2.0
        if stress - now <= SETTLED * now:
            break
        stress = now
        b = -np.divide(w * d, gaps, out=np.zeros_like(gaps), where=gaps > 1e-12)
        b[np.diag_indices(n)] = -b.sum(axis=1)
        x = solve @ (b @ x)
    x -= x.mean(axis=0)
    return {p: (float(px), float(py)) for p, (px, py) in zip(nodes, x, strict=True)}
