"""Split-half check against overfitting a choice to the dev queries. Pure functions.

The queries of every dev set are split in two halves, alternately within each kind (sorted by qid), so
both halves hold every kind. A choice among configurations is made on one half (the best
:func:`objective`) and judged on the other, and the other way round: a configuration that wins only
on the half it was chosen on was fitted to those queries.

:func:`objective` is the mean over the dev sets of MAP@50 (each set's rows pooled separately), so a
set with more queries does not outweigh the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crase_core.evaluation.metrics import aggregate_rows

Row = Mapping[str, Any]


def halves(qids_by_set: Mapping[str, Sequence[str]], kinds: Mapping[str, str]) -> tuple[set[str], set[str]]:
    """(first, second): each set's qids sorted within each kind, alternately assigned."""
    first: set[str] = set()
    second: set[str] = set()
    for qids in qids_by_set.values():
        by_kind: dict[str, list[str]] = {}
        for q in sorted(qids):
            by_kind.setdefault(kinds.get(q, ""), []).append(q)
        for members in by_kind.values():
            for i, q in enumerate(members):
                (first if i % 2 == 0 else second).add(q)
    return first, second


def objective(rows_by_set: Mapping[str, Sequence[Row]], keep: set[str], metric: str = "map@50") -> float:
    """Mean over the sets of ``metric`` on the rows whose qid is in ``keep`` (sets with none skipped)."""
    values = [aggregate_rows([r for r in rows if r["qid"] in keep])[metric]
              for rows in rows_by_set.values() if any(r["qid"] in keep for r in rows)]
    return sum(values) / len(values) if values else 0.0


@dataclass(frozen=True)
class SplitChoice:
    """The configuration chosen on ``tuned_on`` and every candidate's objective on the other half."""

    tuned_on: str
    chosen: str
    tune_scores: dict[str, float]
    test_scores: dict[str, float]


def choose_and_test(configs: Mapping[str, Mapping[str, Sequence[Row]]], split: tuple[set[str], set[str]],
                    metric: str = "map@50") -> list[SplitChoice]:
    """For each half: the config with the best objective there (ties: the first listed) and all configs'
    objectives on the other half. ``configs``: name → set → per-query rows."""
    out: list[SplitChoice] = []
    for name, tune, test in (("first", split[0], split[1]), ("second", split[1], split[0])):
        tune_scores = {c: objective(rows, tune, metric) for c, rows in configs.items()}
        test_scores = {c: objective(rows, test, metric) for c, rows in configs.items()}
        best = max(tune_scores, key=lambda c: tune_scores[c])  # max keeps the first of equal ones
        out.append(SplitChoice(name, best, tune_scores, test_scores))
    return out
