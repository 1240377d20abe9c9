"""Page flows of the Streamlit app with streamlit.testing.v1.AppTest (no browser)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from app_threads import join_prefetch_threads
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the app side (app_pages/, crase_app/) is not part of the installed package
    sys.path.append(str(ROOT))

from crase_app.display import md_escape  # noqa: E402

QUERY = "holographic entanglement entropy of BTZ black holes"


def _search(at: AppTest, query: str) -> AppTest:
    at.text_area(key="query_text").input(query)
    next(b for b in at.button if b.label == "Search").click()
    join_prefetch_threads()  # the rerun compiles the page: not while the prefetch parses (app_threads)
    return at.run(timeout=120)


# the offline backend runs no model: its budget is counted in scoring operations, not model calls
BUDGET_RE = re.compile(r"\*\*Budget: ([\d,]+) scoring operations\*\* = 1 plan \+ ([\d,]+) claim extractions \(\|V\|\) "
                       r"\+ ([\d,]+) word-overlap support matrices \(\|E\|\); \*\*([\d,]+) already cached → ([\d,]+) to "
                       r"compute\*\*\. The offline backend runs no model")


def _library_ranking(settings) -> list[str]:
    """The ranked ids of QUERY on the app's corpus (the hostile fixture) with the offline backend, by the library."""
    from crase_core.backends import offline_backend
    from crase_core.pipeline import Engine, run_query
    from crase_core.sources.local import LocalSource
    from crase_core.store.termstats import TermStats

    source = LocalSource.open(ROOT / "tests" / "fixtures" / "hostile_corpus")
    trace = run_query(QUERY, Engine(source, offline_backend(TermStats.from_index(source.text_index))), settings)
    return [r.paper_id for r in trace.results]


def _all_markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown) + "\n".join(c.value for c in at.caption)


def test_search_runs_saves_and_escapes(app_env):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    assert not at.exception
    demo_labels = [b.label for b in at.button if b.key and b.key.startswith("demo_")]
    assert len(demo_labels) >= 3
    at = _search(at, QUERY)
    assert not at.exception and not at.error
    trace = at.session_state["trace"]
    from crase_core.settings.pipeline import PipelineSettings

    assert trace.settings == PipelineSettings()  # the form's untouched defaults are the library's
    # and the ranking is the library's for them, on the same corpus
    assert trace.query == QUERY and [r.paper_id for r in trace.results] == _library_ranking(PipelineSettings())
    text = _all_markdown(at)
    # the hostile title is rendered escaped (as text), never as raw HTML
    assert "&lt;script&gt;alert\\('xss'\\)&lt;/script&gt;" in text
    assert "<script>" not in text
    assert text.count("Why it is here") == len(trace.results)
    saved = [p for p in app_env.glob("*.json") if not p.name.endswith(".meta.json")]
    assert len(saved) == 1
    # the budget and the per-stage progress were shown
    assert any("Budget:" in i.value and f"{trace.budget.total:,} scoring operations" in i.value for i in at.info)
    assert not [i for i in at.info if "model calls" in i.value]
    assert any("Rank" in m.value and "papers" in m.value for m in at.markdown)
    # the fixture corpus has no embeddings: the Search page says semantic feedback is off and how to turn it on
    # (in the app: the corpus's Embed button)
    assert not trace.semantic_feedback
    assert any(c.value.startswith("Semantic feedback off\\: no embeddings for the corpus hostile\\_corpus") and
               "Embed this corpus" in c.value for c in at.caption), [c.value for c in at.caption if "emantic" in c.value]


def test_empty_query_and_estimate_budget(app_env):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at = _search(at, "   ")
    assert not at.exception
    assert any("the query is empty" in e.value for e in at.error)
    at.text_area(key="query_text").input(QUERY)
    next(b for b in at.button if b.label == "Estimate budget").click()
    at.run(timeout=120)
    assert not at.exception
    estimates = [m for i in at.info if (m := BUDGET_RE.search(i.value))]
    assert len(estimates) == 1
    total, n_v, n_e, cached, to_call = (int(x.replace(",", "")) for x in estimates[0].groups())
    assert total == 1 + n_v + n_e and to_call == total - cached
    # the estimate runs nothing: no trace is opened and no result is shown
    assert "trace" not in at.session_state or at.session_state["trace"] is None
    assert not [m for m in at.markdown if "Why it is here" in m.value]
    assert not [c for c in at.caption if "Why it is here" in c.value]
    # the real run then needs exactly the estimated graph: 1 + |V| + |E|
    at = _search(at, QUERY)
    trace = at.session_state["trace"]
    assert (trace.budget.total, len(trace.nodes), len(trace.edges)) == (total, n_v, n_e)


def test_pages_after_a_run(app_env):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at = _search(at, QUERY)
    trace = at.session_state["trace"]
    edge = next(e for e in trace.edges if e.kept)

    at.switch_page("app_pages/1_Evidence_graph.py").run()
    assert not at.exception and not at.error
    assert any("Click an edge or a paper" in i.value for i in at.info)
    at.session_state["selected"] = {"kind": "edge", "citing": edge.citing, "cited": edge.cited}
    at.run()
    assert not at.exception
    assert any(edge.citing in m.value and edge.cited in m.value and m.value.startswith("##### Edge") for m in at.markdown)
    assert any(s.value.startswith("Decision — kept") for s in at.success)
    assert any(m.value.startswith("**Word-overlap support**") and "Not entailment" in m.value for m in at.markdown)
    # the offline backend's edges are judged at θ_lexical (0.05 by default): ✓ and Δ at that one θ, and the
    # inspector says so
    assert (edge.scorer, edge.theta) == ("offline", 0.05)
    assert edge.decision.endswith("τ_lexical 0 at θ_lexical 0.05")
    assert any(s.value == f"Decision — {md_escape(edge.decision)}" for s in at.success)
    assert any("Outlined: ≥ θ_lexical 0.05 (the threshold of edges the offline word-overlap scorer decided) (✓ "
               "supported, counted in Δ; ✗ not)." in m.value for m in at.markdown)
    at.session_state["selected"] = {"kind": "node", "id": "h001"}
    at.run()
    assert not at.exception
    assert any(m.value.startswith("##### &lt;script&gt;") for m in at.markdown)
    assert any("Seed fate" in m.value for m in at.markdown)

    at.switch_page("app_pages/2_Seeds.py").run()
    assert not at.exception and not at.error
    kept = sum(s.fate == "kept" for s in trace.seeds)
    pruned = sum(s.fate == "pruned" for s in trace.seeds)
    assert {m.label: m.value for m in at.metric} == {
        "sub-queries": str(len(trace.plan.subqueries)), "seeds |S|": str(len(trace.seeds)),
        "✓ kept": str(kept), "✗ pruned": str(pruned)}
    # the plan's sub-queries, then the question's own search (query_seeds, on by default) under its own heading
    planned = [r for r in trace.subquery_results if r.index < len(trace.plan.subqueries)]
    question = [r for r in trace.subquery_results if r.index >= len(trace.plan.subqueries)]
    assert trace.settings.query_seeds > 0 and [r.subquery for r in question] == [QUERY]
    assert [m.value for m in at.markdown if m.value.startswith("#### ρ")] == [
        f"#### ρ{r.index + 1} “{md_escape(r.subquery)}”" for r in planned]
    assert [m.value for m in at.markdown if m.value.startswith("#### The question itself")] == [
        f"#### The question itself “{md_escape(QUERY)}”"]
    assert len(at.dataframe) == len(trace.subquery_results)
    fate = {s.paper_id: "✓" if s.fate == "kept" else "✗" for s in trace.seeds}
    for table, sqr in zip(at.dataframe, trace.subquery_results, strict=True):
        assert table.value["id"].tolist() == sqr.seed_ids
        assert table.value["fate"].tolist() == [fate[pid] for pid in sqr.seed_ids]
        assert table.value["relevance rank"].tolist() == [
            next(h.relevance_rank for h in sqr.hits if h.paper_id == pid) for pid in sqr.seed_ids]
    assert any(m.value.startswith(f"**Summary:** {kept} seeds retained (✓), {pruned} pruned (✗)") for m in at.markdown)

    at.switch_page("app_pages/3_Ranking.py").run()
    assert not at.exception and not at.error
    own = trace.ranking.ranker.upper()  # the default's ranker: SALSA (docs/benchmarks.md)
    assert own == "SALSA"
    assert any(c.value.startswith(f"Run's own ranker: {own} · α = {trace.settings.alpha:g} · restart distribution: "
                                  f"{trace.settings.personalization} · PPR: ") for c in at.caption)
    scores = at.dataframe[0].value  # the scores table, by the run's own ranker's rank
    kept_ids = {n.paper.id for n in trace.nodes if n.kept}
    assert set(scores["id"]) == kept_ids
    assert scores["id"].tolist()[: len(trace.results)] == [r.paper_id for r in trace.results]
    assert scores["final rank"].tolist() == list(range(1, len(kept_ids) + 1))
    # re-ranked from the saved graph, the run's own ranker gives back the run's own walk scores
    for pid, score in zip(scores["id"], scores[f"walk ({own}) score"], strict=True):
        assert score == pytest.approx(trace.ranking.scores[pid], abs=1e-9)

    at.switch_page("app_pages/5_Runs.py").run()
    assert not at.exception and not at.error
    assert any("Saved runs (1)" in m.value for m in at.markdown)
    runs = at.dataframe[0].value
    assert len(runs) == 1
    row = runs.iloc[0]
    c = trace.stage_counts()
    assert (row["query"], row["results"], row["seeds kept"], row["edges kept"]) == (
        QUERY, len(trace.results), f"{c['seeds_kept']}/{c['seeds']}", f"{c['edges_kept']:,}/{c['edges']:,}")


def test_audit_verdicts_persist(app_env):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at = _search(at, QUERY)
    trace = at.session_state["trace"]
    assert (trace.settings.theta_lexical, trace.settings.tau_lexical) == (0.05, 0.0)  # the default prunes
    edge = next(e for e in trace.edges if not e.kept)
    assert edge.decision.endswith("≤ τ_lexical 0 at θ_lexical 0.05")
    at.text_input(key="auditor_input").input("Ana")
    at.switch_page("app_pages/1_Evidence_graph.py")
    at.session_state["selected"] = {"kind": "edge", "citing": edge.citing, "cited": edge.cited}
    at.run()
    next(r for r in at.radio if r.label.startswith("The pipeline's decision")).set_value("disagree")
    next(t for t in at.text_input if t.label == "Note (optional)").input("the citing paper does use this result")
    next(b for b in at.button if b.label == "Record verdict").click()
    at.run()
    assert not at.exception
    assert [e.value for e in at.error] == [f"Decision — {md_escape(edge.decision)}"]  # only the pruned decision
    from crase_core.audit.store import AuditStore

    vs = AuditStore(app_env / "audit.sqlite").verdicts(trace.run_id)
    assert [(v.citing, v.cited, v.auditor, v.verdict, v.pipeline_kept) for v in vs] == [
        (edge.citing, edge.cited, "Ana", "disagree", False)]
    at.switch_page("app_pages/4_Audit.py").run()
    assert not at.exception and not at.error
    queue = next(d.value for d in at.dataframe if "done" in d.value.columns)  # the audit queue
    judged = queue["done"] == "✓"
    assert set(queue.loc[~judged, "decision"]) == {"hidden"}  # blind by default: undecided edges hide the decision
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["verdicts"] == "1"
    assert metrics["pruned-edge correctness"] == "0.0%"
    assert metrics["Fleiss' κ"] == "–"


def test_sessions_do_not_share_state(app_env):
    a = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    a = _search(a, QUERY)
    b = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    assert "trace" not in b.session_state or b.session_state["trace"] is None
    assert not [m for m in b.markdown if "Why it is here" in m.value]


def test_settings_form_is_generated_presets_and_inapplicable_knobs(app_env):
    from crase_core.settings.config import form_specs
    from crase_core.settings.pipeline import PipelineSettings

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    keys = {w.key for kind in (at.slider, at.number_input, at.selectbox) for w in kind if w.key}
    assert {f"set_{s.name}" for s in form_specs(PipelineSettings)} <= keys  # one widget per form knob
    assert at.slider(key="set_alpha").value == 0.5 and not at.slider(key="set_alpha").disabled
    assert at.slider(key="set_cep_hop_discount").disabled  # CEP's own knob, PPR chosen
    at.selectbox(key="set_ranker").set_value("cep").run()
    assert at.slider(key="set_alpha").disabled and not at.slider(key="set_cep_hop_discount").disabled
    at.selectbox(key="set_ranker").set_value("ppr").run()
    at.selectbox(key="set_preset").set_value("paper").run()
    assert not at.exception
    assert at.slider(key="set_alpha").value == 0.15 and at.selectbox(key="set_personalization").value == "uniform"
    assert at.number_input(key="set_text_candidates").value == 0 and at.slider(key="set_query_power").disabled
    # the preset says what it is for and what it costs offline (issue 32)
    assert any("meant for a model endpoint" in w.value and "Recall@5 0.011 vs 0.874" in w.value for w in at.warning)
    at = _search(at, QUERY)
    assert not at.exception and not at.error
    assert at.session_state["trace"].settings == PipelineSettings.from_preset("paper")
