"""The recall estimate: its features' formulas on hand-checked inputs, the conformal ranks, the estimator on
synthetic data, the calibration file, the estimate on every run (tiny corpus) and where it is shown, the eval
rows and report, ``crase bench calibrate``, and the shipped calibration on the embedded corpus."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
from dataclasses import asdict
from pathlib import Path

import pytest

from crase_core import trace as trace_io
from crase_core.backends import offline_backend
from crase_core.cache import ResultCache
from crase_core.cli.main import format_trace, main
from crase_core.errors import InputError
from crase_core.evaluation.recall_calibration import (
    RunSet,
    cross_fitted,
    eval_sections,
    fit_calibration,
    load_runset,
)
from crase_core.evaluation.recall_report import estimate_scores, spearman
from crase_core.evaluation.run_file import run_rows, write_run
from crase_core.pipeline import Engine, run_query
from crase_core.recall import calibration as calib
from crase_core.recall.estimate import summary_lines
from crase_core.recall.features import (
    FEATURES,
    chao_completeness,
    form_value,
    question_form,
    reference_coverage,
    title_form,
)
from crase_core.recall.model import GroupModel, RecallModel, conformal_quantiles, cross_fit, fit, group_of
from crase_core.settings.pipeline import PipelineSettings
from crase_core.store.termstats import TermStats
from crase_core.views.html_export import export_data

NOW = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)


# ---- formulas -------------------------------------------------------------------------------------------
def test_chao_completeness_by_hand():
    # a in both lists, b and c in one each: S_obs 3, f1 2, f2 1 → Ŝ = 3 + 2·1/(2·2) = 3.5
    assert chao_completeness([["a", "b"], ["a", "c"]]) == pytest.approx(3 / 3.5)
    assert chao_completeness([["a", "b"], ["a", "b"]]) == 1.0  # nothing seen once: complete
    assert chao_completeness([]) == 1.0


def test_reference_coverage_by_hand():
    refs = {"s1": {"a", "b"}, "s2": {"a", "c"}}
    # counts a 2, b 1, c 1: n 4, f1 2 → C = 1 − 2/4 = 0.5; the list {a, b} holds 3 of the 4 → M·C = 0.375
    assert reference_coverage(["s1", "s2"], refs, {"a", "b"}) == (0.5, 0.375)
    assert reference_coverage(["nobody"], refs, {"a"}) == (0.0, 0.0)


def test_query_forms():
    assert question_form("Is there work on D-branes?") and not title_form("Is there work on D-branes?")
    assert question_form("looking for papers on tachyon condensation")
    assert title_form("Nambu-Goto Strings from SU(N) Born-Infeld model")
    assert not title_form("moduli space of multi-soliton solutions in noncommutative scalar field theory")
    assert group_of({"title_form": 1.0}) == "title" and group_of({"title_form": 0.0}) == "question"


def test_a_capital_that_belongs_to_a_symbol_leaves_the_form_ambiguous():
    assert form_value("Nambu-Goto Strings from SU(N) Born-Infeld model") == 1.0
    assert form_value("A class of nonlocal truncations in Quantum Einstein Gravity") == 1.0  # "A": a sentence's capital
    assert form_value("D-branes with a null direction, chiral closed strings and quantum horizons") == 0.5
    assert form_value("N=4 SYM on R times S^3 and PP-Wave") == 0.5
    assert form_value("SL(2,Z) family of (p,q) string solutions") == 0.5
    assert form_value("moduli space of multi-soliton solutions") == 0.0
    assert form_value("Is there work on D-branes?") == 0.0
    assert group_of({"title_form": 0.5}) == "title"


def one_feature_model() -> RecallModel:
    """Two hand-made groups on one standardised feature x (mean 0, scale 1): title σ(x) with scores in
    [−0.5, 0.5], question σ(2 + x) one-sided [μ − 0.5·s, 1], scale floor 0.02."""
    title = GroupModel([0.0], [1.0], [1.0], 0.0, -0.5, 0.5, 30)
    question = GroupModel([0.0], [1.0], [1.0], 2.0, -0.5, 1e3, 30)
    return RecallModel(["x"], {"title": title, "question": question}, 0.8, 0.02, 5.0)


def test_an_ambiguous_form_spans_both_groups_intervals():
    m = one_feature_model()
    s = 0.5 * math.sqrt(0.25 + 0.02)  # μ = σ(0) = 0.5: 0.5 ± 0.5·√0.27
    assert m.interval({"x": 0.0, "title_form": 1.0}) == pytest.approx((0.5, 0.5 - s, 0.5 + s))
    mu_q = 1 / (1 + math.exp(-2.0))
    s_q = math.sqrt(mu_q * (1 - mu_q) + 0.02)
    assert m.interval({"x": 0.0, "title_form": 0.0}) == pytest.approx((mu_q, mu_q - 0.5 * s_q, 1.0))
    # either kind: the title model's estimate, from the title's lower end to the question's upper end (1)
    assert m.interval({"x": 0.0, "title_form": 0.5}) == pytest.approx((0.5, 0.5 - s, 1.0))


def test_ambiguous_rows_train_neither_group():
    rows, y, strata = synthetic(60, 11)
    for r in rows[:30]:
        r["title_form"] = 0.0
    for r in rows[:5] + rows[30:35]:
        r["title_form"] = 0.5
    model = fit(rows, y, strata)
    assert set(model.groups) == {"title", "question"}
    assert model.groups["title"].n == 25 and model.groups["question"].n == 25


def test_conformal_ranks():
    # n = 9, α = 0.2: ⌊10·0.1⌋ = 1st and ⌈10·0.9⌉ = 9th smallest
    assert conformal_quantiles([float(i) for i in range(9, 0, -1)], 0.8) == (1.0, 9.0)
    # n = 19: the 2nd and the 18th
    assert conformal_quantiles([float(i) for i in range(1, 20)], 0.8) == (2.0, 18.0)
    # too few for the rank: the interval stays open on that side
    assert conformal_quantiles([0.5, 0.7], 0.8) == (-1e3, 1e3)


def test_spearman_with_ties():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks (1.5, 1.5, 3, 4) against (1, 2, 3, 4): Pearson of the ranks
    assert spearman([1, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486832980505138)
    assert spearman([1, 1, 1], [1, 2, 3]) is None


def test_estimate_scores_by_hand():
    rows = [  # measured 1/2, 0, 1/4, 1
        {"n_relevant": 2, "hits@50": 1, "estimated_recall@50": 0.4, "estimated_recall@50_interval": [0.2, 0.6]},
        {"n_relevant": 1, "hits@50": 0, "estimated_recall@50": 0.3, "estimated_recall@50_interval": [0.1, 0.5]},
        {"n_relevant": 4, "hits@50": 1, "estimated_recall@50": 0.2, "estimated_recall@50_interval": [0.0, 0.5]},
        {"n_relevant": 1, "hits@50": 1, "estimated_recall@50": 0.9, "estimated_recall@50_interval": [0.7, 1.0]},
        {"n_relevant": 1, "hits@50": 1},  # no estimate: not counted
    ]
    s = estimate_scores(rows)
    assert s is not None and s.n == 4
    assert s.coverage == 0.75 and s.misses_below == 1 and s.misses_above == 0  # 0 lies below [0.1, 0.5]
    assert s.mean_width == pytest.approx((0.4 + 0.4 + 0.5 + 0.3) / 4)
    assert s.mae == pytest.approx((0.1 + 0.3 + 0.05 + 0.1) / 4)
    # the median of (0.5, 0, 0.25, 1) is 0.375: |0.125| + 0.375 + 0.125 + 0.625
    assert s.constant_mae == pytest.approx(1.25 / 4)
    assert s.mean_estimate_missed == pytest.approx(0.3)


# ---- the estimator on synthetic data ------------------------------------------------------------------------
def synthetic(n: int, seed: int) -> tuple[list[dict[str, float]], list[float], list[str]]:
    """Title-form runs whose recall is a noisy logistic function of one feature (the rest noise)."""
    rnd = random.Random(seed)
    rows, ys = [], []
    for _ in range(n):
        f = {name: rnd.gauss(0, 1) for name in FEATURES}
        f["title_form"] = 1.0
        p = 1 / (1 + math.exp(-1.5 * f["text_gap_50"]))
        rows.append(f)
        ys.append(sum(rnd.random() < p for _ in range(20)) / 20)
    return rows, ys, ["s"] * n


def test_estimator_learns_the_signal_and_its_intervals_cover():
    rows, y, strata = synthetic(300, 1)
    model = fit(rows, y, strata)
    g = model.groups["title"]
    coef = dict(zip(model.features, g.coef, strict=True))
    assert max(coef, key=lambda k: abs(coef[k])) == "text_gap_50" and coef["text_gap_50"] > 0
    out = cross_fit(rows, y, strata)
    assert all(o is not None and 0 <= o[1] <= o[0] <= o[2] <= 1 for o in out)
    covered = sum(lo <= t <= hi for (_, lo, hi), t in zip(out, y, strict=True)) / len(y)  # type: ignore[misc]
    assert 0.72 <= covered <= 0.9  # 80 % intervals on queries none of whose estimators saw them
    assert spearman([o[0] for o in out], y) > 0.6  # type: ignore[index]


def test_a_group_with_too_few_queries_falls_back_to_all():
    rows, y, strata = synthetic(40, 2)
    for r in rows[:5]:
        r["title_form"] = 0.0  # 5 question-form runs: too few for a model of their own
    model = fit(rows, y, strata)
    assert set(model.groups) == {"title", "all"}
    assert model.group({"title_form": 0.0})[0] == "all"  # type: ignore[index]


# ---- the calibration file --------------------------------------------------------------------------------
def make_calibration(source: str, tmp_path: Path, name: str = "cal.json") -> Path:
    rows, y, strata = synthetic(60, 3)
    for r in rows[:30]:
        r["title_form"] = 0.0
    cal = calib.Calibration(source, "tiny", 50, fit(rows, y, strata),
                            {"benchmarks": [{"name": "b.jsonl", "queries": 60}],
                             "settings": asdict(PipelineSettings())})
    return calib.write_calibration(tmp_path / name, cal)


def test_calibration_round_trip(tmp_path):
    path = make_calibration("local:tiny@00000000", tmp_path)
    back = calib.read_calibration(path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert calib.to_json(back) == doc
    assert back.label() == "tiny (1 benchmark, 60 queries)"


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(format="other"), "not a crase-recall-calibration file"),
    (lambda d: d["model"]["groups"]["title"]["coef"].__setitem__(0, "x"), r"title\.coef\[0\] is not a finite number"),
    (lambda d: d["model"].update(features=["no_such_feature"]), "model.features must be names among"),
    (lambda d: d.update(k=0), "k is not a positive integer"),
])
def test_bad_calibration_files_are_named(tmp_path, change, message):
    path = make_calibration("local:tiny@00000000", tmp_path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    change(doc)
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(calib.CalibrationError, match=message):
        calib.read_calibration(path)


def test_lookup_order_and_other_corpora(tmp_path):
    mine = make_calibration("local:tiny@00000000", tmp_path, "mine.json")
    other = make_calibration("local:other@11111111", tmp_path, "other.json")
    assert calib.find_calibration("local:tiny@00000000", mine).calibration is not None
    got = calib.find_calibration("local:tiny@00000000", other)
    assert got.calibration is None
    assert f"the --recall-calibration file {other} is for the corpus local:other@11111111" in got.why_not
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / calib.CORPUS_FILE).write_bytes(mine.read_bytes())
    found = calib.find_calibration("local:tiny@00000000", None, folder).calibration
    assert found is not None and found.path == str(folder / calib.CORPUS_FILE)


# ---- on every run --------------------------------------------------------------------------------------
@pytest.fixture()
def tiny_engine(tiny_source, tmp_path):
    return Engine(tiny_source, offline_backend(TermStats.from_index(tiny_source.text_index)), ResultCache(tmp_path / "rc"))


def test_a_run_without_calibration_says_so(tiny_engine):
    t = run_query("black hole entropy", tiny_engine, PipelineSettings(m=2), now=NOW)
    est = t.recall_estimate
    assert est is not None and est.estimate is None and set(est.features) == set(FEATURES)
    assert f"no recall calibration for the corpus {t.source}" in est.note and "crase bench calibrate" in est.note
    assert summary_lines(est) == [f"not estimated — {est.note}."]
    assert "Recall: not estimated" in format_trace(t)


def test_a_calibrated_run_carries_its_estimate_everywhere(tiny_engine, tmp_path):
    probe = run_query("black hole entropy", tiny_engine, PipelineSettings(m=2), now=NOW)
    tiny_engine.recall_calibration = str(make_calibration(probe.source, tmp_path))
    t = run_query("black hole entropy", tiny_engine, PipelineSettings(m=2), now=NOW)
    est = t.recall_estimate
    assert est is not None and est.estimate is not None and est.low is not None and est.high is not None
    assert 0 <= est.low <= est.estimate <= est.high <= 1 and est.group == "question"
    assert est.calibration == "tiny (1 benchmark, 60 queries)" and est.calibration_source == t.source
    assert "calibrated on runs with other settings of m" in est.note  # m 2 against the calibration's 10
    words = summary_lines(est)
    assert words[0].startswith("This list likely holds ") and "% of the relevant papers in this corpus" in words[0]
    assert words[1].startswith("It rests on ") and "calibrated on tiny" in words[1]
    assert (est.estimate < 0.5) == any(w.startswith("To find more: ") for w in words)
    assert trace_io.loads(trace_io.dumps(t)) == t  # the record survives the trace's JSON
    assert "Recall: This list likely holds" in format_trace(t)
    assert export_data(t)["recall"] == words


def test_an_older_trace_reads_without_an_estimate(tiny_engine):
    t = run_query("black hole entropy", tiny_engine, PipelineSettings(m=2), now=NOW)
    d = trace_io.to_dict(t)
    d.pop("recall_estimate")
    back = trace_io.from_dict(d)
    assert back.recall_estimate is None and summary_lines(None) == []
    assert "Recall:" not in format_trace(back)


# ---- crase eval and crase bench calibrate -------------------------------------------------------------------
def fake_run(folder: Path, n: int, seed: int, source: str = "local:tiny@00000000", method: str = "crase") -> Path:
    """A run folder of ``n`` rows with recall features and measured recalls (what crase eval writes)."""
    rows, y, _ = synthetic(n, seed)
    out = []
    for i, (f, r) in enumerate(zip(rows, y, strict=True)):
        out.append({"qid": f"q{i}", "method": method, "n_relevant": 20, "hits@50": round(r * 20),
                    "recall_features": f, "recall_group": group_of(f), "recall_source": source})
    write_run(folder, {"method": method, "bench": f"{folder.name}.jsonl", "bench_hash": "h",
                       "settings": asdict(PipelineSettings())}, {}, out)
    return folder


def test_bench_calibrate_fits_a_usable_file(tmp_path, capsys):
    run = fake_run(tmp_path / "runA", 80, 4)
    out = tmp_path / "cal.json"
    assert main(["bench", "calibrate", str(run), "--out", str(out), "--report", str(tmp_path / "rep")]) == 0
    printed = capsys.readouterr().out
    assert "cross-fitted" in printed and "| runA.jsonl (80) |" in printed
    cal = calib.read_calibration(out)
    assert cal.source == "local:tiny@00000000" and cal.k == 50 and cal.fitted_on["benchmarks"][0]["queries"] == 80
    assert cal.fitted_on["settings"] == asdict(PipelineSettings()) and cal.fitted_on["code"]
    assert 0.6 <= cal.scores["runA.jsonl"]["coverage"] <= 1.0
    assert (tmp_path / "rep" / "recall_calibration.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cross_fitting_never_scores_a_query_with_its_own_estimator():
    rows, y, strata = synthetic(60, 5)
    # a query whose recall is far off what its features say: an estimator that saw it would move towards it
    rows[0]["text_gap_50"], y[0] = 3.0, 0.0
    crossed = cross_fit(rows, y, strata)
    seen = fit(rows, y, strata).interval(rows[0])
    assert crossed[0] is not None and seen is not None
    assert crossed[0][0] > seen[0]  # the cross-fitted estimate did not learn from the query itself


def test_eval_report_sections(tmp_path):
    run = fake_run(tmp_path / "r", 60, 6)
    rows = cross_fitted([RunSet("r", {}, run_rows(run))])[0]
    kinds = {f"q{i}": ("a" if i % 2 else "b") for i in range(60)}
    sections = eval_sections(tmp_path / "r", "r.jsonl", rows, kinds)
    titles = [t for t, _ in sections]
    assert titles[0].startswith("Recall estimate as run") and titles[1].startswith("Recall estimate cross-fitted")
    assert "| r.jsonl / a (30) |" in sections[1][1] and "| r.jsonl / b (30) |" in sections[1][1]
    assert (tmp_path / "r" / "recall_calibration.png").is_file()


def test_calibrating_too_few_queries_or_two_corpora_is_refused(tmp_path):
    few = load_runset(fake_run(tmp_path / "a", 12, 7))
    with pytest.raises(InputError, match="12 usable queries; the recall estimator needs at least 20"):
        fit_calibration([few])
    one = load_runset(fake_run(tmp_path / "b", 30, 8))
    two = load_runset(fake_run(tmp_path / "c", 30, 9, source="local:other@1"))
    with pytest.raises(InputError, match=r"different corpora \(local:other@1, local:tiny@00000000\)"):
        fit_calibration([one, two])


# ---- the shipped calibration -------------------------------------------------------------------------------
def test_the_shipped_calibration_is_for_the_embedded_corpus(hepth_source):
    shipped = calib.shipped()
    assert [p.name for p in shipped] == ["hepth.json"]
    cal = calib.read_calibration(shipped[0])
    assert cal.source == hepth_source.name and cal.k == PipelineSettings().k
    assert set(cal.model.groups) == {"title", "question"}
    assert cal.fitted_on["settings"] == asdict(PipelineSettings())  # refit when the default changes
    for scores in cal.scores.values():  # cross-fitted, as docs/benchmarks.md reports them
        assert 0.0 <= scores["coverage"] <= 1.0 and scores["queries"] > 0



def test_a_reranked_run_does_not_carry_its_parents_estimate(tiny_engine, tmp_path):
    from crase_core.audit.rerank import EdgeVerdict, apply_verdicts

    probe = run_query("black hole entropy", tiny_engine, PipelineSettings(m=2), now=NOW)
    tiny_engine.recall_calibration = str(make_calibration(probe.source, tmp_path))
    parent = run_query("black hole entropy", tiny_engine, PipelineSettings(m=2), now=NOW)
    assert parent.recall_estimate is not None and parent.recall_estimate.estimate is not None
    kept = next(e for e in parent.edges if e.kept)
    child = apply_verdicts(parent, [EdgeVerdict(kept.citing, kept.cited, False)])
    est = child.recall_estimate
    assert est is not None and est.estimate is None  # no calibration ships for the tiny corpus
    p = parent.recall_estimate
    assert est.note == ("a re-ranked run is estimated only with a calibration shipped for its corpus; the parent "
                        f"run's was {100 * p.low:.0f}–{100 * p.high:.0f} %")
