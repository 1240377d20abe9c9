"""Runs of 1 to 6 papers on every page (issue 25, item 10: the Ranking page raised
``StreamlitInvalidMinMaxError: min_value and max_value both 5`` for a run of 5 or fewer papers).

A real run of the embedded corpus is cut down to its n best papers (the edges, seeds, claims, search hits and
results among them), opened in a session, and each page is drawn with Streamlit's AppTest.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from crase_core.pipeline import run_query
from crase_core.settings.pipeline import PipelineSettings
from crase_core.trace import RunTrace

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the app side (app_pages/, crase_app/) is not part of the installed package
    sys.path.append(str(ROOT))

PAGES = ["app_pages/1_Evidence_graph.py", "app_pages/2_Seeds.py", "app_pages/3_Ranking.py", "app_pages/4_Audit.py",
         "app_pages/5_Runs.py"]


@pytest.fixture(scope="module")
def full_run(hepth_engine) -> RunTrace:
    trace = run_query("tachyon condensation on unstable D-branes", hepth_engine, PipelineSettings())
    assert sum(n.kept for n in trace.nodes) >= 6
    return trace


def cut(trace: RunTrace, n: int) -> RunTrace:
    """``trace`` with only its ``n`` best kept papers (and everything among them)."""
    small = copy.deepcopy(trace)
    keep = [x.paper.id for x in sorted((x for x in small.nodes if x.kept), key=lambda x: x.rank or 10**9)][:n]
    ids = set(keep)
    small.nodes = [x for x in small.nodes if x.paper.id in ids]
    small.edges = [e for e in small.edges if e.citing in ids and e.cited in ids]
    small.seeds = [s for s in small.seeds if s.paper_id in ids]
    small.claims = {k: v for k, v in small.claims.items() if k in ids}
    small.query_hits = [h for h in small.query_hits if h.paper_id in ids]
    small.restart_hits = None if small.restart_hits is None else [h for h in small.restart_hits if h.paper_id in ids]
    small.results = [r for r in small.results if r.paper_id in ids]
    for i, r in enumerate(small.results, 1):
        r.rank = i
    small.ranking.scores = {k: v for k, v in small.ranking.scores.items() if k in ids}
    small.run_id = f"small-{n}"
    return small


@pytest.fixture()
def app_env(tmp_path, monkeypatch):
    import streamlit as st

    monkeypatch.setenv("CRASE_CORPUS", str(ROOT / "tests" / "fixtures" / "hostile_corpus"))
    monkeypatch.setenv("CRASE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(ROOT)
    st.cache_resource.clear()
    st.cache_data.clear()
    yield
    st.cache_resource.clear()
    st.cache_data.clear()


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
@pytest.mark.fault_kind("app-run-of-few-papers")
def test_ranking_page_shows_a_run_of_n_papers(app_env, full_run, n):
    small = cut(full_run, n)
    assert len(small.nodes) == n
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at.session_state["trace"] = small
    at.switch_page("app_pages/3_Ranking.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    table = at.dataframe[0].value
    assert len(table) == n and list(table["final rank"]) == list(range(1, n + 1))
    sliders = [s for s in at.slider if s.key == "rank_k"]
    if n == 1:
        assert sliders == []  # nothing to choose: the one paper is shown
    else:
        assert sliders[0].min == 1 and sliders[0].max == n and sliders[0].value == n


@pytest.mark.parametrize("n", [1, 5])
@pytest.mark.fault_kind("app-run-of-few-papers")
def test_every_page_shows_a_run_of_n_papers(app_env, full_run, n):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at.session_state["trace"] = cut(full_run, n)
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, (page, [e.message for e in at.exception])
