"""Support-scorer evaluation: metric arithmetic by hand, the word-overlap scorer on constructed pairs, the shipped
asset, and the word-overlap scorer's calibrated threshold on it."""

from __future__ import annotations

import pytest

from crase_core.evaluation.scifact import (
    ClaimPair,
    best_threshold,
    calibrate,
    classification_metrics,
    evaluate_scorer,
    load_pairs,
    offline_scorer,
)
from crase_core.evidence.entailment import WORD_OVERLAP_SUPPORT_THETA


def test_classification_metrics_by_hand():
    scores = [0.9, 0.8, 0.2, None, 0.95]
    labels = ["SUPPORT", "NEI", "SUPPORT", "SUPPORT", "CONTRADICT"]
    m = classification_metrics(scores, labels, 0.75)
    # predicted: 0, 1, 4 → tp 1, fp 2; missed supports: 2, 3 (failure counts as not supported)
    assert (m["tp"], m["fp"], m["fn"]) == (1, 2, 2)
    assert m["precision"] == pytest.approx(1 / 3) and m["recall"] == pytest.approx(1 / 3)
    assert m["f1"] == pytest.approx(1 / 3)


def test_lexical_scorer_separates_restatement_from_unrelated_text():
    pairs = [
        ClaimPair(1, "Aspirin reduces the risk of colorectal cancer.", 1, "SUPPORT",
                  ("Unrelated sentence about trials.", "Aspirin reduces the risk of colorectal cancer."), (1,)),
        ClaimPair(2, "Vitamin D prevents influenza in children.", 2, "NEI",
                  ("Glacier melt rates increased in the Alps.", "Sea ice is thinning."), ()),
    ]
    r = evaluate_scorer(offline_scorer(pairs), pairs, theta=0.75)
    assert r["at_theta"]["tp"] == 1 and r["at_theta"]["fp"] == 0 and r["at_theta"]["f1"] == 1.0
    assert r["mean_score"]["SUPPORT"] > 0.99 and r["mean_score"]["NEI"] < 0.1
    assert len(r["sweep"]) == 19 and r["failures"] == 0


def test_shipped_pairs_load():
    pairs = load_pairs()
    assert len(pairs) == 919
    counts = {lab: sum(p.label == lab for p in pairs) for lab in ("SUPPORT", "CONTRADICT", "NEI")}
    assert counts == {"SUPPORT": 370, "CONTRADICT": 194, "NEI": 355}
    assert all(p.sentences and all(i < len(p.sentences) for i in p.evidence) for p in pairs)


def test_best_threshold_is_the_lowest_of_equal_f1():
    scores = [0.5, 0.4, 0.1]
    labels = ["SUPPORT", "NEI", "SUPPORT"]
    # θ ≤ 0.1: tp 2, fp 1 (F1 0.8); 0.1 < θ ≤ 0.4: tp 1, fp 1 (F1 0.5); 0.4 < θ ≤ 0.5: tp 1 (F1 2/3)
    best = best_threshold(scores, labels)
    assert best["theta"] == 0.01 and best["f1"] == pytest.approx(0.8)


def test_word_overlap_threshold_is_its_calibration_on_scifact():
    # the shipped constant is what the stated criterion gives on the shipped pairs: the F1-best θ (0.01 grid) of
    # "supported" against SUPPORT, claims against their cited full abstracts
    pairs = load_pairs()
    scorer = offline_scorer(pairs)
    assert calibrate(scorer, pairs) == WORD_OVERLAP_SUPPORT_THETA == 0.32
    r = evaluate_scorer(scorer, pairs, theta=WORD_OVERLAP_SUPPORT_THETA)
    assert (r["at_theta"]["tp"], r["at_theta"]["fp"], r["at_theta"]["fn"]) == (321, 318, 49)
    # better than calling everything supported (F1 2·370 / (370 + 919) = 0.574), though it cannot tell SUPPORT
    # from CONTRADICT: both share words with their abstracts alike
    assert r["at_theta"]["f1"] > 0.63
    assert abs(r["mean_score"]["SUPPORT"] - r["mean_score"]["CONTRADICT"]) < 0.02
