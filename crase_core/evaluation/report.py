"""Markdown report with PNG plots for one or several evaluation runs (same benchmark).

``write_report(folder, runs)`` writes ``folder/report.md`` and, unless
``plots=False``, ``recall_at_k.png`` (Recall@K curve per run), ``map_at_k.png``
and ``hub_degree.png`` (mean in-corpus citation count of each run's top 10 /
top 50: how much a ranking favours hubs). Labels and numbers only; no paper
text is rendered.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crase_core import atomic
from crase_core.errors import InputError
from crase_core.evaluation.metrics import KS
from crase_core.evaluation.run_file import read_run
from crase_core.evaluation.significance import bootstrap_interval, paired_permutation_test

Row = dict[str, Any]
#: the columns of the by-kind tables: pooled Recall@K and MAP@K
KIND_METRICS: tuple[str, ...] = ("recall@5", "recall@20", "recall@50", "map@50")


@dataclass
class RunSummary:
    """One row of a comparison: a label, its run's summary and the folder it came from."""

    label: str
    summary: dict[str, Any]
    folder: str = ""


def load_run(folder: str | Path, label: str | None = None) -> RunSummary:
    """The summary of the run folder ``folder`` (its run file's), labelled ``label`` or by its method."""
    summary = read_run(folder).summary
    return RunSummary(label or summary.get("job", {}).get("method") or Path(folder).name, summary, str(folder))


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def metrics_table(runs: Sequence[RunSummary], ks: Sequence[int] = KS) -> str:
    """Table 1 shape: one row per run, Recall@K then MAP@K columns; best per column in bold."""
    cols = [f"recall@{k}" for k in ks] + [f"map@{k}" for k in ks]
    best = {c: max((r.summary.get(c, 0.0) for r in runs), default=0.0) for c in cols}
    head = "| run | " + " | ".join(f"R@{k}" for k in ks) + " | " + " | ".join(f"MAP@{k}" for k in ks) + " | queries |"
    sep = "|---" * (len(cols) + 2) + "|"
    lines = [head, sep]
    for r in runs:
        cells = []
        for c in cols:
            v = r.summary.get(c)
            s = _fmt(v)
            cells.append(f"**{s}**" if v is not None and len(runs) > 1 and v == best[c] and v > 0 else s)
        lines.append(f"| {_md_escape(r.label)} | " + " | ".join(cells) + f" | {r.summary.get('queries', 0)} |")
    return "\n".join(lines)


def cost_table(runs: Sequence[RunSummary]) -> str:
    keys = [("median_n_nodes", "median |V|"), ("median_n_edges", "median |E|"),
            ("median_n_kept_edges", "median kept |E|"), ("median_entailment_calls", "median entailment calls"),
            ("median_model_calls", "median model calls (uncached)"), ("median_wall_s", "median wall s"),
            ("median_hub_degree@10", "hub degree top-10"), ("median_hub_degree@50", "hub degree top-50"),
            ("errors", "errors")]
    lines = ["| run | " + " | ".join(_md_escape(h) for _, h in keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for r in runs:
        lines.append(f"| {_md_escape(r.label)} | " + " | ".join(_fmt(r.summary.get(k), 2) for k, _ in keys) + " |")
    return "\n".join(lines)


def _plots(folder: Path, runs: Sequence[RunSummary], ks: Sequence[int]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    for metric, fname, ylabel in (("recall", "recall_at_k.png", "Recall@K"), ("map", "map_at_k.png", "MAP@K")):
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for r in runs:
            ax.plot(list(ks), [r.summary.get(f"{metric}@{k}", 0.0) for k in ks], marker="o", label=r.label)
        ax.set_xlabel("K")
        ax.set_ylabel(ylabel)
        ax.set_xticks(list(ks))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        _save_figure(fig, folder / fname)
        plt.close(fig)
        made.append(fname)
    labels = [r.label for r in runs]
    d10 = [r.summary.get("median_hub_degree@10") or 0.0 for r in runs]
    d50 = [r.summary.get("median_hub_degree@50") or 0.0 for r in runs]
    if any(d10) or any(d50):
        fig, ax = plt.subplots(figsize=(max(6.4, 0.9 * len(runs) + 2), 4.2))
        xs = range(len(runs))
        ax.bar([x - 0.2 for x in xs], d10, width=0.4, label="top 10")
        ax.bar([x + 0.2 for x in xs], d50, width=0.4, label="top 50")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("median over queries of mean citation count")
        ax.set_title("Hub degree of the returned papers")
        ax.legend(fontsize=8)
        fig.tight_layout()
        _save_figure(fig, folder / "hub_degree.png")
        plt.close(fig)
        made.append("hub_degree.png")
    return made


def _save_figure(fig: Any, path: Path) -> None:
    """``fig`` as a PNG at ``path``, written atomically (a full disk leaves the old file or none, never a cut one)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    atomic.write_bytes(path, buf.getvalue())


def write_report(folder: str | Path, runs: Sequence[RunSummary], title: str = "Crase evaluation",
                 notes: Sequence[str] = (), ks: Sequence[int] = KS,
                 sections: Sequence[tuple[str, str]] = (), plots: bool = True) -> Path:
    """Write report.md and (``plots``) the PNG plots into ``folder``; return the report path.

    ``sections``: extra (heading, markdown) pairs placed before the plots (e.g. :func:`kind_table`).
    """
    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create {out}: {e.strerror or e}") from None
    images = _plots(out, runs, ks) if plots else []
    bench = {r.summary.get("job", {}).get("bench", "") for r in runs} - {""}
    parts = [f"# {_md_escape(title)}", ""]
    if bench:
        parts += [f"Benchmark: `{', '.join(sorted(bench))}`. Recall@K pooled over queries; MAP@K = mean of AP@K "
                  "with AP divided by |relevant| (Crase paper definitions).", ""]
    parts += ["## Retrieval quality", "", metrics_table(runs, ks), "", "## Graph size, cost and hub degree", "",
              cost_table(runs), ""]
    for n in notes:
        parts.append(f"- {_md_escape(n)}")
    if notes:
        parts.append("")
    for heading, body in sections:
        parts += [f"## {_md_escape(heading)}", "", body, ""]
    if images:
        parts += ["## Plots", ""] + [f"![{name}]({name})" for name in images] + [""]
    return atomic.write_text(out / "report.md", "\n".join(parts))


# ---- by kind, with intervals and paired tests ------------------------------------------------------------
def metric_of_rows(metric: str, rows: Sequence[Row]) -> float:
    """``recall@k`` pooled (Σ hits@k / Σ n_relevant) or ``map@k`` (mean ap@k) of per-query rows."""
    name, k = metric.split("@")
    if name == "recall":
        n_rel = sum(int(r["n_relevant"]) for r in rows)
        return sum(float(r[f"hits@{k}"]) for r in rows) / n_rel if n_rel else 0.0
    return sum(float(r[f"ap@{k}"]) for r in rows) / len(rows) if rows else 0.0


def per_query_values(metric: str, rows: Sequence[Row]) -> list[float]:
    """What a paired test compares per query: hits@k for pooled recall, ap@k for MAP."""
    name, k = metric.split("@")
    return [float(r[f"hits@{k}" if name == "recall" else f"ap@{k}"]) for r in rows]


def with_interval(metric: str, rows: Sequence[Row], n_resamples: int = 1000,
                  seed: int = 0) -> tuple[float, float, float]:
    """(value, low, high): the metric and its 95% percentile-bootstrap interval over queries."""
    lo, hi = bootstrap_interval(list(rows), lambda rs: metric_of_rows(metric, rs), n_resamples=n_resamples, seed=seed)
    return metric_of_rows(metric, rows), lo, hi


def split_by_kind(rows: Sequence[Row], kinds: dict[str, str]) -> dict[str, list[Row]]:
    """``all`` plus one group per kind (``kinds``: qid → kind; a qid without one is only in ``all``)."""
    groups: dict[str, list[Row]] = {"all": list(rows)}
    for r in rows:
        kind = kinds.get(str(r["qid"]))
        if kind:
            groups.setdefault(kind, []).append(r)
    if len(groups) == 2:  # a single kind repeats "all"
        groups = {"all": groups["all"]}
    return groups


def kind_table(runs: Sequence[tuple[str, Sequence[Row]]], kinds: dict[str, str],
               metrics: Sequence[str] = KIND_METRICS, n_resamples: int = 1000) -> str:
    """Markdown: one row per (kind, run), each metric as ``value [low, high]`` (95% bootstrap interval)."""
    head = "| kind (queries) | run | " + " | ".join(_metric_label(m) for m in metrics) + " |"
    lines = [head, "|---" * (len(metrics) + 2) + "|"]
    grouped = [(label, split_by_kind(rows, kinds)) for label, rows in runs]
    order = list(grouped[0][1]) if grouped else []
    for kind in order:
        for label, groups in grouped:
            rows = groups.get(kind, [])
            if not rows:
                continue
            cells = []
            for m in metrics:
                v, lo, hi = with_interval(m, rows, n_resamples)
                cells.append(f"{v:.3f} [{lo:.3f}, {hi:.3f}]")
            lines.append(f"| {_md_escape(kind)} ({len(rows)}) | {_md_escape(label)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paired_table(base: tuple[str, Sequence[Row]], others: Sequence[tuple[str, Sequence[Row]]],
                 kinds: dict[str, str], metrics: Sequence[str] = KIND_METRICS) -> str:
    """Markdown: each run against ``base`` on the same queries, Δ and the paired permutation p-value."""
    base_label, base_rows = base
    head = "| kind | run | " + " | ".join(f"Δ {_metric_label(m)} (p)" for m in metrics) + " |"
    lines = [head, "|---" * (len(metrics) + 2) + "|"]
    base_groups = split_by_kind(base_rows, kinds)
    for label, rows in others:
        groups = split_by_kind(rows, kinds)
        for kind, b_rows in base_groups.items():
            by_qid = {str(r["qid"]): r for r in groups.get(kind, [])}
            pairs = [(b, by_qid[str(b["qid"])]) for b in b_rows if str(b["qid"]) in by_qid]
            if not pairs:
                continue
            bs, os_ = [p[0] for p in pairs], [p[1] for p in pairs]
            cells = []
            for m in metrics:
                delta = metric_of_rows(m, os_) - metric_of_rows(m, bs)
                p = paired_permutation_test(per_query_values(m, os_), per_query_values(m, bs))
                cells.append(f"{delta:+.3f} ({p:.3f})")
            lines.append(f"| {_md_escape(kind)} | {_md_escape(label)} vs {_md_escape(base_label)} | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines)


def _metric_label(metric: str) -> str:
    name, k = metric.split("@")
    return f"{'R' if name == 'recall' else 'MAP'}@{k}"
