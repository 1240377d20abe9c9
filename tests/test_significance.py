"""Paired permutation test and bootstrap interval on inputs small enough to check by hand."""

from __future__ import annotations

import pytest

from crase_core.errors import InputError
from crase_core.evaluation.significance import bootstrap_interval, paired_permutation_test


def test_exact_sign_flip_p_value():
    # d = (1, 2, 3), mean 2. Of the 8 sign assignments only +++ and −−− reach |mean| ≥ 2 → p = 2/8.
    assert paired_permutation_test([1, 2, 3], [0, 0, 0]) == 0.25
    # d = (2, 1), mean 1.5: ++ (1.5) and −− (−1.5) reach it, +− (0.5) and −+ (−0.5) do not → 2/4
    assert paired_permutation_test([3, 1], [1, 0]) == 0.5
    # the test is symmetric in a and b
    assert paired_permutation_test([0, 0, 0], [1, 2, 3]) == 0.25


def test_no_difference_is_p_one():
    assert paired_permutation_test([0.5, 0.2], [0.5, 0.2]) == 1.0
    assert paired_permutation_test([1, 0], [0, 1]) == 1.0  # d = (1, −1), mean 0


def test_monte_carlo_path_counts_the_observed_assignment():
    # n = 20 > log2(10000): random signs. Only the two all-equal assignments reach |mean| = 1, so the
    # p-value is (0 + 1) / (10000 + 1) unless a draw is all + or all − (probability 2^-19 per draw).
    assert paired_permutation_test([1.0] * 20, [0.0] * 20) == pytest.approx(1 / 10_001)


def test_unequal_lengths_are_refused():
    with pytest.raises(InputError):
        paired_permutation_test([1, 2], [1])


def test_bootstrap_interval_of_a_constant_is_that_constant():
    lo, hi = bootstrap_interval([0.4] * 7, lambda rows: sum(rows) / len(rows))
    assert lo == pytest.approx(0.4) and hi == pytest.approx(0.4)


def test_bootstrap_interval_of_pooled_recall():
    # rows = (hits, relevant); pooled recall 3/6 = 0.5. Every resample's recall lies in [0, 1], the
    # interval contains the point estimate and is reproducible with the same seed.
    rows = [(1, 1), (0, 1), (2, 4)]
    stat = lambda rs: sum(h for h, _ in rs) / sum(r for _, r in rs)  # noqa: E731
    lo, hi = bootstrap_interval(rows, stat, n_resamples=500)
    assert 0.0 <= lo <= 0.5 <= hi <= 1.0
    assert (lo, hi) == bootstrap_interval(rows, stat, n_resamples=500)
    assert lo < hi
