"""The Benchmark page renders the newest report (Markdown + PNGs) and says what to do when there is none."""

from __future__ import annotations

from pathlib import Path

import pytest

st_testing = pytest.importorskip("streamlit.testing.v1")
ROOT = Path(__file__).resolve().parents[1]
PAGE = str(ROOT / "app_pages" / "7_Benchmark.py")


def _run(monkeypatch, folder: Path):
    monkeypatch.setenv("CRASE_EVAL_DIR", str(folder))
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))  # the page imports crase_app.shared
    at = st_testing.AppTest.from_file(PAGE, default_timeout=60)
    at.run()
    assert not at.exception
    return at


def test_page_shows_the_report_and_its_plot(tmp_path, monkeypatch):
    from crase_core.evaluation.report import RunSummary, write_report

    summary = {f"{m}@{k}": 0.5 for m in ("recall", "map") for k in (5, 10, 20, 30, 40, 50)}
    summary.update(queries=3, job={"bench": "b.jsonl"})
    write_report(tmp_path / "bench", [RunSummary("crase <b>", summary)], title="dev")
    at = _run(monkeypatch, tmp_path)
    label = next(o for o in at.selectbox(key="bench_report").options if "(your eval folder)" in o)
    at.selectbox(key="bench_report").select(label).run()
    assert not at.exception
    table = at.dataframe[0].value
    assert table["run"].tolist() == ["crase <b>"]  # a table cell: plain text, never HTML
    assert table["R@5"].tolist() == [0.5] and table["queries"].tolist() == [3]
    assert "<b>" not in "\n".join(m.value for m in at.markdown).replace("<style>", "")
    assert len(at.get("image")) >= 2  # recall@K and MAP@K curves


def test_page_without_user_reports_shows_the_projects(tmp_path, monkeypatch):
    at = _run(monkeypatch, tmp_path)
    assert at.selectbox(key="bench_report").value.startswith("Retrieval comparison — hepth_")
    assert not at.info
