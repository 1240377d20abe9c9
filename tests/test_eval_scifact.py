"""Entailment-scorer evaluation: metric arithmetic by hand, the lexical scorer on constructed pairs, the shipped asset."""

from __future__ import annotations

import pytest

from crase_core.evaluation.scifact import (
    ClaimPair,
    classification_metrics,
    evaluate_scorer,
    load_pairs,
    offline_scorer,
)


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
