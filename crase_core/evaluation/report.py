"""Markdown report with PNG plots for one or several evaluation runs (same benchmark).

``write_report(folder, runs)`` writes ``folder/report.md``, ``recall_at_k.png``
(Recall@K curve per run), ``map_at_k.png`` and ``hub_degree.png`` (mean
in-corpus citation count of each run's top 10 / top 50: how much a ranking
favours hubs). Labels and numbers only; no paper text is rendered.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .metrics import KS


@dataclass
class RunSummary:
    """One row of a comparison: a label, its summary.json content and the folder it came from."""

    label: str
    summary: dict[str, Any]
    folder: str = ""


def load_run(folder: str | Path, label: str | None = None) -> RunSummary:
    path = Path(folder) / "summary.json"
    summary = json.loads(path.read_text(encoding="utf-8"))
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
        fig.savefig(folder / fname, dpi=110)
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
        fig.savefig(folder / "hub_degree.png", dpi=110)
        plt.close(fig)
        made.append("hub_degree.png")
    return made


def write_report(folder: str | Path, runs: Sequence[RunSummary], title: str = "Crase evaluation",
                 notes: Sequence[str] = (), ks: Sequence[int] = KS) -> Path:
    """Write report.md and the PNG plots into ``folder``; return the report path."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    images = _plots(out, runs, ks)
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
    parts += ["## Plots", ""] + [f"![{name}]({name})" for name in images] + [""]
    path = out / "report.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
