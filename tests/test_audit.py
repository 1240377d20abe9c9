"""Audit verdicts and the paper's Table 5 measures: exact numbers on hand-checked inputs."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest

from crase_core.audit.store import AuditStore, Verdict, fleiss_kappa, summarize, verdicts_csv
from crase_core.errors import InputError

# Wikipedia's worked example (Fleiss' kappa): 10 items, 14 raters, 5 categories; P̄ = 0.378, P̄e = 0.213, κ = 0.210
WIKI = [
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
]


def test_fleiss_kappa_wikipedia_example():
    assert fleiss_kappa(WIKI) == pytest.approx(0.20993, abs=5e-5)


def test_fleiss_kappa_small_cases_by_hand():
    # P_i = 1, 1, 0 → P̄ = 2/3; p = (1/2, 1/2) → P̄e = 1/2; κ = (2/3 − 1/2)/(1/2) = 1/3
    assert fleiss_kappa([[2, 0], [0, 2], [1, 1]]) == pytest.approx(1 / 3, abs=1e-12)
    assert fleiss_kappa([[3, 0], [0, 3]]) == pytest.approx(1.0)
    assert fleiss_kappa([[3, 0], [3, 0]]) == 1.0  # all in one category: P̄e = 1
    # perfect disagreement between two raters on every item: P̄ = 0, P̄e = 1/2 → κ = −1
    assert fleiss_kappa([[1, 1], [1, 1]]) == pytest.approx(-1.0)


def test_fleiss_kappa_rejects_bad_input():
    with pytest.raises(InputError):
        fleiss_kappa([])
    with pytest.raises(InputError):
        fleiss_kappa([[1, 0]])
    with pytest.raises(InputError):
        fleiss_kappa([[1, 1], [2]])


def _v(edge: str, auditor: str, verdict: str, kept: bool) -> Verdict:
    return Verdict("run1", edge, "x", auditor, verdict, kept)


def test_summary_table5_measures_by_hand():
    vs = [
        # E1 kept: A, B agree (keep), C disagrees (prune) → majority keep = pipeline
        _v("E1", "A", "agree", True), _v("E1", "B", "agree", True), _v("E1", "C", "disagree", True),
        # E2 kept: majority prune ≠ pipeline
        _v("E2", "A", "disagree", True), _v("E2", "B", "disagree", True), _v("E2", "C", "agree", True),
        # E3 pruned: unanimous prune = pipeline
        _v("E3", "A", "agree", False), _v("E3", "B", "agree", False), _v("E3", "C", "agree", False),
        # E4 pruned: a 1–1 tie → no majority label
        _v("E4", "A", "disagree", False), _v("E4", "B", "agree", False),
    ]
    s = summarize(vs)
    assert (s.verdicts, s.auditors, s.edges, s.labelled_edges) == (11, 3, 4, 3)
    assert s.agreement == pytest.approx(2 / 3)
    assert (s.retained_precision, s.retained_n) == (0.5, 2)
    assert (s.pruned_correctness, s.pruned_n) == (1.0, 1)
    assert s.multi_rated_edges == 4
    assert s.unanimous == 0.25
    # counts keep/prune: [2,1],[1,2],[0,3],[1,1]: P̄ = 5/12, P̄e = (4² + 7²)/11² → κ = −175/672
    assert s.fleiss_kappa == pytest.approx(-175 / 672, abs=1e-12)


def test_summary_single_auditor_has_no_kappa_and_later_verdict_wins():
    vs = [_v("E1", "A", "agree", True), _v("E2", "A", "agree", False), _v("E1", "A", "disagree", True)]
    s = summarize(vs)
    assert s.verdicts == 2 and s.fleiss_kappa is None and s.unanimous is None
    assert s.agreement == 0.5 and s.retained_precision == 0.0 and s.pruned_correctness == 1.0


def test_store_persists_replaces_and_exports(tmp_path):
    path = tmp_path / "audit.sqlite"
    t = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
    store = AuditStore(path)
    store.record("r1", "u", "v", "Ana", "agree", True, "looks right", now=t)
    store.record("r1", "u", "w", "Ana", "disagree", False, "=HYPERLINK(bad)", now=t)
    store.record("r1", "u", "v", "Ana", "disagree", True, "changed my mind", now=t)  # replaces
    store.record("r2", "u", "v", "Bo", "agree", False, now=t)
    again = AuditStore(path)  # a restart
    mine = again.verdicts("r1", "Ana")
    assert [(v.citing, v.cited, v.verdict, v.note) for v in mine] == [
        ("u", "w", "disagree", "=HYPERLINK(bad)"), ("u", "v", "disagree", "changed my mind")]
    assert len(again.verdicts()) == 3
    assert again.verdict_for("r1", "u", "v", "Ana").verdict == "disagree"
    assert again.verdict_for("r1", "u", "v", "Bo") is None
    rows = list(csv.DictReader(io.StringIO(verdicts_csv(again.verdicts("r1")))))
    by_cited = {r["cited"]: r for r in rows}
    assert by_cited["w"]["note"] == "'=HYPERLINK(bad)"  # no spreadsheet formula
    assert by_cited["w"]["auditor_judgement"] == "keep"  # pruned + disagree → keep
    assert by_cited["v"]["pipeline_decision"] == "kept" and by_cited["v"]["auditor_judgement"] == "prune"
    again.delete("r1", "u", "v", "Ana")
    assert len(again.verdicts("r1")) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (("r", "u", "v", "  ", "agree", True), "auditor name"),
        (("r", "u", "v", "Ana", "maybe", True), "agree"),
        (("r", "u", "v", "Ana", "agree", True, "x" * 2001), "note"),
        (("", "u", "v", "Ana", "agree", True), "edge"),
    ],
)
def test_store_rejects_bad_input(tmp_path, args, message):
    with pytest.raises(InputError, match=message):
        AuditStore(tmp_path / "a.sqlite").record(*args)


def test_blind_judgement_becomes_agreement():
    from crase_core.audit.store import verdict_from_judgement

    assert verdict_from_judgement(keep=True, pipeline_kept=True) == "agree"
    assert verdict_from_judgement(keep=False, pipeline_kept=False) == "agree"
    assert verdict_from_judgement(keep=True, pipeline_kept=False) == "disagree"
    assert verdict_from_judgement(keep=False, pipeline_kept=True) == "disagree"
