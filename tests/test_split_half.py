"""Split-half choice (crase_core.evaluation.split_half) on hand-made per-query rows."""

from __future__ import annotations

import pytest

from crase_core.evaluation.split_half import choose_and_test, halves, objective


def _row(qid: str, ap: float) -> dict[str, float | str]:
    return {"qid": qid, "n_relevant": 1, **{f"hits@{k}": 1 if ap > 0 else 0 for k in (5, 10, 20, 30, 40, 50)},
            **{f"ap@{k}": ap for k in (5, 10, 20, 30, 40, 50)}}


def test_halves_alternate_within_each_kind():
    kinds = {"a1": "x", "a2": "x", "a3": "x", "b1": "y", "b2": "y"}
    first, second = halves({"s": list(kinds)}, kinds)
    assert first == {"a1", "a3", "b1"} and second == {"a2", "b2"}


def test_the_choice_on_one_half_is_judged_on_the_other():
    # config "fit" is perfect on q1, q3 (the first half) and useless on q2, q4; "steady" is 0.5 everywhere
    qids = ["q1", "q2", "q3", "q4"]
    first, second = halves({"s": qids}, {})
    assert first == {"q1", "q3"}
    configs = {"steady": {"s": [_row(q, 0.5) for q in qids]},
               "fit": {"s": [_row(q, 1.0 if q in first else 0.0) for q in qids]}}
    a, b = choose_and_test(configs, (first, second))
    assert (a.tuned_on, a.chosen) == ("first", "fit") and a.test_scores["fit"] == 0.0
    assert (b.tuned_on, b.chosen) == ("second", "steady") and b.test_scores["steady"] == 0.5


def test_objective_averages_the_sets_not_the_queries():
    rows = {"big": [_row(f"b{i}", 1.0) for i in range(9)], "small": [_row("s0", 0.0)]}
    keep = {f"b{i}" for i in range(9)} | {"s0"}
    assert objective(rows, keep) == pytest.approx(0.5)
