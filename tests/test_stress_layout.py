"""The small clusters' Kamada–Kawai layout by stress majorization (crase_core.views.stress): exact on graphs
whose distances fit the plane, as low an energy as networkx's scipy solver, and no scipy to import."""

from __future__ import annotations

import math
import subprocess
import sys

import networkx as nx
import numpy as np
import pytest

from crase_core.views.stress import stress_layout


def _energy(g: nx.Graph, pos: dict) -> float:
    """The Kamada–Kawai energy Σ_{i<j} (‖x_i − x_j‖ − d_ij)² / d_ij²."""
    d = dict(nx.shortest_path_length(g))
    nodes = list(g)
    return sum((math.dist(pos[a], pos[b]) - d[a][b]) ** 2 / d[a][b] ** 2
               for i, a in enumerate(nodes) for b in nodes[i + 1:])


def test_distances_that_fit_the_plane_are_drawn_exactly():
    path = stress_layout(nx.path_graph(5))  # a path lies on a line: every distance its hop count (to 1 %)
    for i in range(5):
        for j in range(5):
            assert math.dist(path[i], path[j]) == pytest.approx(abs(i - j), rel=0.01)
    square = stress_layout(nx.cycle_graph(4))  # sides 1; the diagonals want 2, get √2 … : a compromise, centred
    assert np.allclose(np.mean(list(square.values()), axis=0), 0.0, atol=1e-9)
    assert stress_layout(nx.empty_graph(1)) == {0: (0.0, 0.0)}


@pytest.mark.parametrize("seed", range(6))
def test_its_energy_is_kamada_kawais(seed):
    """On random connected graphs of the clusters' size, the energy reached is within 1 % of networkx's
    kamada_kawai_layout from the same circle (unscaled), and the same layout comes out every time."""
    from networkx.drawing.layout import _kamada_kawai_solve

    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 41))
    g = nx.connected_watts_strogatz_graph(n, 4, 0.3, seed=seed)
    nodes = list(g)
    d = dict(nx.shortest_path_length(g))
    dist = np.array([[d[a][b] for b in nodes] for a in nodes], dtype=float)
    circle = nx.circular_layout(g)
    theirs = dict(zip(nodes, _kamada_kawai_solve(dist, np.array([circle[v] for v in nodes]), 2), strict=True))
    ours = stress_layout(g)
    assert _energy(g, ours) <= _energy(g, theirs) * 1.01 + 1e-9
    assert stress_layout(g) == ours


def test_a_disconnected_graph_is_refused():
    with pytest.raises(ValueError, match="connected"):
        stress_layout(nx.Graph([(0, 1), (2, 3)]))


def test_the_html_export_loads_no_scipy(tiny_corpus_dir, tmp_path):
    """The export's cluster views lay small clusters out without scipy.optimize (half a second to import)."""
    import os

    env = {**os.environ, "CRASE_CACHE_DIR": str(tmp_path / "cache")}
    run, page = tmp_path / "run.json", tmp_path / "run.html"
    subprocess.run([sys.executable, "-m", "crase_core.cli", "query", "string duality", "--quiet", "--corpus",
                    str(tiny_corpus_dir), "--json", str(run)], env=env, check=True, capture_output=True, timeout=300)
    code = ("import contextlib, io, sys\nfrom crase_core.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert main(['export', {str(run)!r}, '--format', 'html', '--out', {str(page)!r}]) == 0\n"
            "print(sorted(m for m in sys.modules if m == 'scipy' or m.startswith('scipy.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                         check=True)
    assert page.stat().st_size > 0
    assert out.stdout.strip().splitlines()[-1] == "[]"
