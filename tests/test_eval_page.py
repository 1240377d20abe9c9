"""The Benchmark page: what the numbers are, read from the summary in each run's file (never from report.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crase_core.evaluation import run_file

st_testing = pytest.importorskip("streamlit.testing.v1")
ROOT = Path(__file__).resolve().parents[1]
PAGE = str(ROOT / "app_pages" / "7_Benchmark.py")


def _run(monkeypatch, folder: Path):
    monkeypatch.setenv("CRASE_EVAL_DIR", str(folder))
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))  # the page imports crase_app.shared
    at = st_testing.AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    assert not at.exception
    return at


def write_run(folder: Path, recall: float, method: str = "crase", **settings) -> None:
    """A run folder as ``crase eval`` leaves it: its run file."""
    summary = {f"{m}@{k}": recall for m in ("recall", "map") for k in (5, 10, 20, 30, 40, 50)}
    summary.update(queries=3, median_wall_s=0.25, job={"method": method, "bench": "b.jsonl",
                                                        "settings": {"k": 50, "beta": 0.5, **settings}})
    run_file.write_run(folder, {"method": method}, summary, [{"qid": "q1"}])


def test_a_users_comparison_from_its_run_summaries(tmp_path, monkeypatch):
    bench = tmp_path / "mybench"
    write_run(bench / "crase", 0.5)
    write_run(bench / "bm25", 0.4, method="bm25")
    write_run(bench / "crase <b>beta", 0.45, beta=1.0)
    (bench / "report.md").write_text("| run | R@5 |\n|---|---|\n| FROM-REPORT | 0.9 |\n")  # never read
    at = _run(monkeypatch, tmp_path)
    label = next(o for o in at.selectbox(key="bench_report").options if "(your eval folder)" in o)
    assert label == "Retrieval comparison — mybench (your eval folder)"
    at.selectbox(key="bench_report").select(label).run()
    assert not at.exception
    metrics = {m.label: (m.value, m.delta) for m in at.metric}
    assert metrics["default · Recall@5"] == ("0.500", "+0.100 vs text search")
    headline, others = (d.value for d in at.dataframe)
    assert headline["run"].tolist() == ["crase", "bm25"] and headline["Recall@5"].tolist() == [0.5, 0.4]
    assert headline["what it is"].tolist()[1] == "a plain text search (BM25) on the question alone"
    assert others["run"].tolist() == ["crase <b>beta"]  # a table cell: plain text, never HTML
    assert others["differs from the default in"].tolist() == ["beta 1.0"]
    shown = "\n".join(m.value for m in at.markdown).replace("<style>", "")
    assert "<b>" not in shown and "FROM-REPORT" not in shown
    assert at.get("arrow_vega_lite_chart") or at.get("vega_lite_chart")  # the Recall@K curves


def test_page_without_user_results_shows_the_projects(tmp_path, monkeypatch):
    at = _run(monkeypatch, tmp_path)
    assert at.selectbox(key="bench_report").value == "Retrieval comparison — hepth_litsearch_dev (project results)"
    assert not at.info
    # the project's default, as committed: the summary in its run file, to the digit
    summary = run_file.read_run(ROOT / "benchmarks/results/hepth_litsearch_dev/crase").summary
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["default · Recall@5"] == f"{summary['recall@5']:.3f}"
    assert metrics["default · MAP@50"] == f"{summary['map@50']:.3f}"
