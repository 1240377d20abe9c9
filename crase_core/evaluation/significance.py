"""Paired significance across queries and bootstrap intervals. Pure functions (seeded, reproducible).

* :func:`paired_permutation_test` — two configurations answered the same queries; under H0 (no
  difference) each query's difference d_q = a_q − b_q is as likely to have either sign. The p-value is
  the share of sign assignments whose |mean| is at least the observed |mean d| (two-sided). Exact
  (all 2^n assignments) when 2^n ≤ ``n_resamples``, else ``n_resamples`` random assignments plus the
  observed one. For pooled Recall@K pass per-query hits (Σ hits / Σ |Rel| differs between two runs
  only through Σ (hits_a − hits_b), so the test of the mean hit difference is the test of the
  recall difference); for MAP@K pass per-query AP.
* :func:`bootstrap_interval` — percentile bootstrap over queries of any statistic of the rows
  (queries resampled with replacement), e.g. pooled recall Σ hits / Σ |Rel| or MAP.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from crase_core.errors import InputError

Row = TypeVar("Row")

#: floating-point slack when comparing a resampled |mean| with the observed one
_EPS = 1e-12


def paired_permutation_test(a: Sequence[float], b: Sequence[float], n_resamples: int = 10_000,
                            seed: int = 0) -> float:
    """Two-sided p-value of the paired sign-flip permutation test of mean(a − b) = 0 (see module doc)."""
    if len(a) != len(b):
        raise InputError(f"paired test needs equal lengths (got {len(a)} and {len(b)})")
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    n = d.size
    if n == 0:
        raise InputError("paired test needs at least one query")
    observed = abs(d.mean())
    if observed <= _EPS:
        return 1.0
    if 2 ** n <= n_resamples:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        means = np.abs(signs @ d) / n
        return float(np.mean(means >= observed - _EPS))
    rng = np.random.default_rng(seed)
    signs = rng.choice((-1.0, 1.0), size=(n_resamples, n))
    means = np.abs(signs @ d) / n
    return float((np.sum(means >= observed - _EPS) + 1) / (n_resamples + 1))


def bootstrap_interval(rows: Sequence[Row], statistic: Callable[[Sequence[Row]], float], level: float = 0.95,
                       n_resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """(low, high) percentile bootstrap interval of ``statistic(rows)``, resampling rows with replacement."""
    if not rows:
        raise InputError("bootstrap needs at least one row")
    if not 0.0 < level < 1.0:
        raise InputError(f"level must be in (0, 1) (got {level})")
    rng = np.random.default_rng(seed)
    n = len(rows)
    values = np.empty(n_resamples)
    for i in range(n_resamples):
        idx = rng.integers(0, n, size=n)
        values[i] = statistic([rows[j] for j in idx])
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(values, [tail, 100.0 - tail])
    return float(lo), float(hi)
