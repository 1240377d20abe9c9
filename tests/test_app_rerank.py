"""The app's Ranking, Audit and Runs pages with Streamlit's AppTest (no browser), over the hostile fixture corpus:
the Ranking page's columns hold what they are named for; "apply my verdicts" saves a re-ranked run that names
its parent and shows which papers moved; the Runs page shows the lineage; the auditors' agreement and κ."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the app side (app_pages/, crase_app/) is not part of the installed package
    sys.path.append(str(ROOT))

HOSTILE = ROOT / "tests" / "fixtures" / "hostile_corpus"
QUERY = "holographic entanglement entropy of BTZ black holes"


@pytest.fixture()
def app_env(tmp_path, monkeypatch):
    import streamlit as st

    runs = tmp_path / "runs"
    monkeypatch.setenv("CRASE_CORPUS", str(HOSTILE))
    monkeypatch.setenv("CRASE_RUNS_DIR", str(runs))
    monkeypatch.chdir(ROOT)
    st.cache_resource.clear()
    st.cache_data.clear()
    yield runs
    st.cache_resource.clear()
    st.cache_data.clear()


def _searched() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at.text_area(key="query_text").input(QUERY)
    next(b for b in at.button if b.label == "Search").click()
    at.run()
    assert not at.exception and not at.error
    return at


def _frame(at: AppTest, column: str) -> pd.DataFrame:
    """The page's one table with ``column``."""
    found = [d.value for d in at.dataframe if column in d.value.columns]
    assert len(found) == 1, [list(d.value.columns) for d in at.dataframe]
    return found[0]


def _saved(runs: Path) -> list[Path]:
    return sorted(p for p in runs.glob("*.json") if not p.name.endswith(".meta.json"))


def test_ranking_page_columns_hold_what_they_are_named_for(app_env):
    at = _searched()
    trace = at.session_state["trace"]
    at.switch_page("app_pages/3_Ranking.py").run()
    assert not at.exception
    df = at.dataframe[0].value
    r = trace.ranking.ranker.upper()
    assert list(df.columns[:6]) == ["final rank", "title", "final score", f"walk ({r}) score", f"walk ({r}) rank",
                                    "search rank"]
    ranks = {n.paper.id: n.rank for n in trace.nodes if n.kept}
    scores = {n.paper.id: n.score for n in trace.nodes if n.kept}
    search = {h.paper_id: h.relevance_rank for h in trace.query_hits}
    walk = trace.ranking.scores
    walk_order = sorted(walk, key=lambda p: -walk[p])
    for row in df.itertuples(index=False):
        pid = row.id
        assert row[0] == ranks[pid] and row[2] == pytest.approx(scores[pid])
        assert row[3] == pytest.approx(walk[pid])
        assert walk[walk_order[int(row[4]) - 1]] == pytest.approx(walk[pid])  # the walk's own rank, not the fused one
        assert (None if pd.isna(row[5]) else int(row[5])) == search.get(pid)


def test_apply_my_verdicts_saves_a_child_run_and_the_runs_page_shows_its_lineage(app_env):
    from crase_core.audit.rerank import EdgeVerdict, apply_verdicts, rank_changes
    from crase_core.audit.store import AuditStore

    at = _searched()
    parent = at.session_state["trace"]
    edge = next(e for e in parent.edges if e.kept)
    AuditStore(app_env / "audit.sqlite").record(parent.run_id, edge.citing, edge.cited, "ann", "disagree", True)
    at.session_state["auditor"] = "ann"
    at.switch_page("app_pages/4_Audit.py").run()
    assert not at.exception
    button = next(b for b in at.button if b.label == "Apply my verdicts")
    assert not button.disabled
    assert "ann: 1 judged edge(s), 1 against the pipeline's decision." in [c.value for c in at.caption]
    button.click().run()
    assert not at.exception and not at.error
    saved = _saved(app_env)
    assert len(saved) == 2
    from crase_core import trace as trace_io

    child = next(t for t in (trace_io.load(p) for p in saved) if t.parent_run_id)
    assert child.parent_run_id == parent.run_id
    assert [(a.citing, a.cited, a.keep, a.auditors) for a in child.applied_verdicts] == [
        (edge.citing, edge.cited, False, ["ann"])]
    expected = apply_verdicts(parent, [EdgeVerdict(edge.citing, edge.cited, False)])
    assert [r.paper_id for r in child.results] == [r.paper_id for r in expected.results]
    moved = rank_changes(parent, child)
    assert any(f"{len(moved)} paper(s) of either answer moved" in s.value for s in at.success)
    if moved:
        table = _frame(at, "rank before")
        assert list(table["rank before"]) == [m.before for m in moved]

    at.switch_page("app_pages/5_Runs.py").run()
    assert not at.exception
    lineage = next(m.value for m in at.markdown if "verdict(s) applied" in m.value)
    assert lineage.index(parent.run_id[:16]) < lineage.index(child.run_id[:16])
    listed = at.dataframe[0].value
    assert [str(v) for v in listed["re-ranked from"] if v] == [
        f"{parent.created_at.replace('T', ' ')[:19]} · {parent.run_id[:10]} + 1 verdict(s)"]

    at.switch_page("app_pages/4_Audit.py").run()
    next(b for b in at.button if b.label == "Open the re-ranked run").click().run()
    assert at.session_state["trace"].run_id == child.run_id


def test_audit_page_shows_agreement_and_kappa_between_auditors(app_env):
    from crase_core.audit.store import AuditStore

    at = _searched()
    trace = at.session_state["trace"]
    store = AuditStore(app_env / "audit.sqlite")
    edges = trace.edges[:4]
    # ann: keep keep prune keep; bob: keep prune prune keep (the pipeline kept all four) → κ 0.5
    for e, (a, b) in zip(edges, [("agree", "agree"), ("agree", "disagree"), ("disagree", "disagree"),
                                 ("agree", "agree")], strict=False):
        store.record(trace.run_id, e.citing, e.cited, "ann", a if e.kept else ("disagree" if a == "agree" else "agree"),
                     e.kept)
        store.record(trace.run_id, e.citing, e.cited, "bob", b if e.kept else ("disagree" if b == "agree" else "agree"),
                     e.kept)
    at.switch_page("app_pages/4_Audit.py").run()
    assert not at.exception
    pairs = _frame(at, "Cohen's κ")
    assert list(pairs["auditors"]) == ["ann · bob"] and list(pairs["edges both judged"]) == [len(edges)]
    if len(edges) == 4:
        assert list(pairs["agreement"]) == ["75.0%"] and list(pairs["Cohen's κ"]) == ["0.500"]
    by_scorer = _frame(at, "scored by")
    # one row per scorer of the judged edges, the offline scorer named word overlap (never entailment)
    names = {"model": "the model (entailment)", "offline": "word overlap (offline)"}
    assert sorted(by_scorer["scored by"]) == sorted({names[e.scorer or "offline"] for e in edges})


def test_node_inspector_says_why_this_rank(app_env):
    from crase_app.why import why_caption

    at = _searched()
    trace = at.session_state["trace"]
    first = trace.results[0]
    at.session_state["selected"] = {"kind": "node", "id": first.paper_id}
    at.switch_page("app_pages/1_Evidence_graph.py").run()
    assert not at.exception
    assert f"**Why rank 1:** {why_caption(trace, first)}" in [m.value for m in at.markdown]
    parts = next(e for e in at.expander if e.label == "Score parts")
    assert any("sum of the parts" in m.value for m in parts.markdown)
