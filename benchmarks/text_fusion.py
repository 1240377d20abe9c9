"""Text-level fusion helpers shared by the dense and the lexical-variant benchmarks (pure, numpy only)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from crase_core.evaluation.metrics import aggregate_rows

Row = dict[str, Any]


def top_ids(scores: np.ndarray, ids: Sequence[str], n: int) -> list[int]:
    """Indices of the ``n`` best finite scores, best first, ties by id (as the local source's search)."""
    finite = np.flatnonzero(np.isfinite(scores))
    if finite.size > n:
        finite = finite[np.argpartition(-scores[finite], n - 1)[:n]]
        # every index tied with the n-th score, so the id tie-break is exact at the cut
        cut = scores[finite].min()
        finite = np.union1d(finite, np.flatnonzero(scores == cut))
    order = sorted(finite.tolist(), key=lambda i: (-float(scores[i]), ids[i]))
    return order[:n]


def rrf(lists: Sequence[Sequence[int]], k: float) -> dict[int, float]:
    """Reciprocal-rank fusion: Σ over the lists holding v of 1/(k + rank of v), rank 1-based."""
    fused: dict[int, float] = {}
    for ranked in lists:
        for r, i in enumerate(ranked, 1):
            fused[i] = fused.get(i, 0.0) + 1.0 / (k + r)
    return fused


def interpolate(candidates: Sequence[int], lexical: np.ndarray, semantic: np.ndarray, w: float) -> dict[int, float]:
    """(1 − w)·lexical' + w·semantic' over ``candidates``, each min-max normalised over them (0 when flat)."""
    idx = np.asarray(candidates, dtype=np.int64)

    def norm(x: np.ndarray) -> np.ndarray:
        lo, hi = float(x.min()), float(x.max())
        return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)

    fused = (1.0 - w) * norm(lexical[idx].astype(np.float64)) + w * norm(semantic[idx].astype(np.float64))
    return dict(zip(idx.tolist(), fused.tolist(), strict=True))


def order_by(scores: Mapping[int, float], ids: Sequence[str]) -> list[int]:
    return sorted(scores, key=lambda i: (-scores[i], ids[i]))


def overall_table(runs: Mapping[str, Sequence[Row]]) -> list[str]:
    cols = ("recall@5", "recall@10", "recall@20", "recall@50", "map@5", "map@50")
    lines = ["| run | " + " | ".join(c.replace("recall", "R").replace("map", "MAP") for c in cols) + " |",
             "|---" * (len(cols) + 1) + "|"]
    for name, rows in runs.items():
        a = aggregate_rows(rows)
        lines.append(f"| {name} | " + " | ".join(f"{a[c]:.3f}" for c in cols) + " |")
    return lines
