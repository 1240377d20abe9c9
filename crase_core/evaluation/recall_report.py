"""How good the recall estimates were: coverage, width, error and rank agreement against the measured recall@50.

Each eval row of a run that carries an estimate holds ``estimated_recall@50`` and
``estimated_recall@50_interval`` (:mod:`crase_core.recall`); the measured recall@50 of the row is
``hits@50 / n_relevant``. For a group of rows :func:`estimate_scores` gives

* coverage — the share of rows whose interval holds the measured recall;
* mean width of the intervals;
* MAE of the estimate, and the MAE of the best constant guess (the group's own median measured recall, an
  oracle a real estimator does not have);
* Spearman's ρ between estimate and measurement (average ranks for ties);
* for the rows the interval missed: how many lay below it, and their mean estimate against the covered rows'.

:func:`recall_section` is the report's markdown (per set and by kind) and :func:`calibration_plot` the PNG:
estimate against measurement with the intervals, written atomically. Pure functions but the plot.
"""

from __future__ import annotations

import io
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crase_core import atomic
from crase_core.evaluation.significance import bootstrap_interval

Row = Mapping[str, Any]
ESTIMATE = "estimated_recall@50"
INTERVAL = "estimated_recall@50_interval"


def measured_recall(row: Row) -> float | None:
    """hits@50 / n_relevant of an eval row (None for a row without relevant papers or metrics)."""
    n = int(row.get("n_relevant") or 0)
    hits = row.get("hits@50")
    return float(hits) / n if n and hits is not None else None


def has_estimate(row: Row) -> bool:
    iv = row.get(INTERVAL)
    return isinstance(row.get(ESTIMATE), int | float) and isinstance(iv, list | tuple) and len(iv) == 2


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for t in range(i, j + 1):
            ranks[order[t]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's ρ (Pearson on average ranks); None when either side is constant or n < 3."""
    if len(a) != len(b) or len(a) < 3:
        return None
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / (va * vb) ** 0.5 if va > 0 and vb > 0 else None


@dataclass(frozen=True)
class EstimateScores:
    """How the estimates of ``n`` rows fared (see the module docstring)."""

    n: int
    coverage: float
    mean_width: float
    mae: float
    constant_mae: float
    spearman: float | None
    misses_below: int
    misses_above: int
    mean_estimate_covered: float | None
    mean_estimate_missed: float | None
    mean_measured: float


def estimate_scores(rows: Sequence[Row]) -> EstimateScores | None:
    """The scores of the rows that carry an estimate and a measured recall (None when there are none)."""
    pts = [(float(r[ESTIMATE]), float(r[INTERVAL][0]), float(r[INTERVAL][1]), y) for r in rows
           if has_estimate(r) and (y := measured_recall(r)) is not None]
    if not pts:
        return None
    ys = [p[3] for p in pts]
    med = statistics.median(ys)
    covered = [lo - 1e-9 <= y <= hi + 1e-9 for _, lo, hi, y in pts]
    est_cov = [p[0] for p, c in zip(pts, covered, strict=True) if c]
    est_miss = [p[0] for p, c in zip(pts, covered, strict=True) if not c]
    return EstimateScores(
        n=len(pts), coverage=sum(covered) / len(pts), mean_width=statistics.fmean(hi - lo for _, lo, hi, _ in pts),
        mae=statistics.fmean(abs(e - y) for e, _, _, y in pts), constant_mae=statistics.fmean(abs(med - y) for y in ys),
        spearman=spearman([p[0] for p in pts], ys),
        misses_below=sum(1 for (_, lo, _, y), c in zip(pts, covered, strict=True) if not c and y < lo),
        misses_above=sum(1 for (_, _, hi, y), c in zip(pts, covered, strict=True) if not c and y > hi),
        mean_estimate_covered=statistics.fmean(est_cov) if est_cov else None,
        mean_estimate_missed=statistics.fmean(est_miss) if est_miss else None,
        mean_measured=statistics.fmean(ys),
    )


def _f(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _ci(rows: Sequence[Row], stat: Callable[[EstimateScores], float | None], n_resamples: int) -> str:
    """`` [lo, hi]``: the 95 % percentile-bootstrap interval of ``stat`` over ``rows`` ("" when n_resamples 0)."""
    if not n_resamples:
        return ""

    def value(rs: Sequence[Row]) -> float:
        s = estimate_scores(rs)
        v = stat(s) if s is not None else None
        return float("nan") if v is None else float(v)

    lo, hi = bootstrap_interval(list(rows), value, n_resamples=n_resamples, seed=0)
    return "" if lo != lo or hi != hi else f" [{lo:.2f}, {hi:.2f}]"


def scores_table(groups: Mapping[str, Sequence[Row]], n_resamples: int = 0) -> str:
    """Markdown: one line per group (label → rows) with :class:`EstimateScores`; with ``n_resamples`` each of
    coverage, width, the MAE gain over the constant guess and ρ with its 95 % bootstrap interval over queries."""
    lines = ["| set / kind (queries) | coverage of 80 % interval | mean width | MAE | MAE of the set's median | "
             "Spearman ρ | misses below / above | mean estimate: covered / missed |", "|---|---|---|---|---|---|---|---|"]
    for label, rows in groups.items():
        s = estimate_scores(rows)
        if s is None:
            continue
        gain = _ci(rows, lambda x: x.constant_mae - x.mae, n_resamples)
        lines.append(f"| {label} ({s.n}) | {s.coverage:.3f}{_ci(rows, lambda x: x.coverage, n_resamples)} | "
                     f"{s.mean_width:.3f}{_ci(rows, lambda x: x.mean_width, n_resamples)} | {s.mae:.3f} | "
                     f"{s.constant_mae:.3f}" + (f" (gain{gain})" if gain else "") + " | "
                     f"{_f(s.spearman)}{_ci(rows, lambda x: x.spearman, n_resamples) if s.spearman is not None else ''} | "
                     f"{s.misses_below} / {s.misses_above} | "
                     f"{_f(s.mean_estimate_covered)} / {_f(s.mean_estimate_missed)} |")
    return "\n".join(lines)


def grouped(rows: Sequence[Row], kinds: Mapping[str, str], label: str = "all") -> dict[str, list[Row]]:
    """``label`` (every row) plus ``label / kind`` for each kind of ``kinds`` (qid → kind) that has rows."""
    out: dict[str, list[Row]] = {label: list(rows)}
    for r in rows:
        kind = kinds.get(str(r.get("qid")))
        if kind:
            out.setdefault(f"{label} / {kind}", []).append(r)
    return out if len(out) > 2 else {label: list(rows)}


def calibration_plot(path: str | Path, sets: Mapping[str, Sequence[Row]], title: str = "") -> Path | None:
    """A PNG at ``path`` (written atomically): each row's estimate (x) against its measured recall@50 (y), its
    80 % interval as a horizontal bar, missed rows marked, the diagonal; one colour per set. None when no row
    carries an estimate."""
    pts = {name: [(float(r[ESTIMATE]), float(r[INTERVAL][0]), float(r[INTERVAL][1]), y) for r in rows
                  if has_estimate(r) and (y := measured_recall(r)) is not None] for name, rows in sets.items()}
    if not any(pts.values()):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.0, 5.6))
    colours = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:red")
    for i, (name, p) in enumerate(pts.items()):
        if not p:
            continue
        c = colours[i % len(colours)]
        for _, lo, hi, y in p:
            ax.plot([lo, hi], [y, y], color=c, alpha=0.18, linewidth=1.2)
        hit = [(e, y) for e, lo, hi, y in p if lo - 1e-9 <= y <= hi + 1e-9]
        miss = [(e, y) for e, lo, hi, y in p if not lo - 1e-9 <= y <= hi + 1e-9]
        ax.scatter([e for e, _ in hit], [y for _, y in hit], s=14, color=c, label=f"{name} ({len(p)})")
        if miss:
            ax.scatter([e for e, _ in miss], [y for _, y in miss], s=30, color=c, marker="x",
                       label=f"{name}: outside its interval ({len(miss)})")
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.04, 1.04)
    ax.set_xlabel("estimated recall@50 (bar: its 80 % interval)")
    ax.set_ylabel("measured recall@50")
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return atomic.write_bytes(Path(path), buf.getvalue())
