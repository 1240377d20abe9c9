"""Search page, second pass (issue 11 items 3, 4, 6): result cards, honest numbers, the estimate flow,
the weak-match notice and the user's library — with streamlit.testing (no browser)."""

from __future__ import annotations

import sys
from pathlib import Path

from app_threads import join_prefetch_threads
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

QUERY = "holographic entanglement entropy of BTZ black holes"


def _click(at: AppTest, label: str) -> AppTest:
    next(b for b in at.button if b.label == label).click()
    join_prefetch_threads()  # the rerun compiles the page: not while the prefetch parses (app_threads)
    return at.run(timeout=180)


def _card_captions(at: AppTest) -> list[str]:
    """The captions of the result cards (authors and link, why the paper is here, why it has its rank)."""
    return [c.value for c in at.caption if "  \nWhy it is here: " in c.value]


def _popovers(at: AppTest, label: str) -> list:
    """The popovers labelled ``label`` (AppTest has no accessor for them: read the element tree)."""
    found = []

    def walk(node) -> None:
        if getattr(node, "type", None) == "popover" and node.proto.popover.label == label:
            found.append(node)
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)  # noqa: SLF001 - no public way
    return found


def _search(at: AppTest, query: str) -> AppTest:
    at.text_area(key="query_text").input(query)
    return _click(at, "Search")


def test_cards_and_honest_numbers(app_env):
    at = _search(AppTest.from_file(str(ROOT / "app.py"), default_timeout=180).run(), QUERY)
    assert not at.exception and not at.error
    trace = at.session_state["trace"]
    metrics = {m.label: m.value for m in at.metric}
    # offline backend: scoring operations, never "model calls"; the total time from the click
    assert metrics["scoring operations"] == f"{trace.counters.model_calls:,}" and "model calls" not in metrics
    total = at.session_state["elapsed"][trace.run_id]
    assert metrics["total time"] == f"{total:.1f} s" and total >= sum(trace.timings.values())
    assert not [m for m in at.markdown if "model calls" in m.value]
    # every card says why the paper is here and explains its score in words (the caption and its tooltip), and
    # has its abstract one click away
    from crase_app.display import authors_line, md_escape, tex_markdown
    from crase_app.why import why_caption
    from crase_core.views.score_words import score_sentence, why_line

    cards = _card_captions(at)
    papers = {n.paper.id: n.paper for n in trace.nodes}
    assert [c.split("  \n", 1)[1] for c in cards] == [
        f"Why it is here: {tex_markdown(r.reason)}  \nWhy this rank: {why_caption(trace, r)}" for r in trace.results[:20]]
    assert all(why_caption(trace, r) == md_escape(why_line(trace, r)) and why_line(trace, r).startswith(
        f"score {r.score:.4f} = ") for r in trace.results)
    helps = [c.help for c in at.caption if "  \nWhy it is here: " in c.value]  # the score in words, on hover
    assert [h.split("  \n")[0] for h in helps] == [f"Score: {md_escape(score_sentence(trace, r))}."
                                                  for r in trace.results[:20]]
    assert [c.split(" · ")[0].split("  \n")[0] for c in cards] == [
        tex_markdown(authors_line(list(papers[r.paper_id].authors))).split(" · ")[0] for r in trace.results[:20]]
    assert len([m for m in at.markdown if f" · score {trace.results[0].score:.4f}" in m.value]) == 1
    top = trace.results[0]
    share = trace.ranking.scores[top.paper_id] / sum(trace.ranking.scores.values())  # the ranker's share, not the fused score
    assert trace.ranking.ranker == "salsa"  # the default's ranker: its scores are put as a share of their total
    multiple = share * len(trace.ranking.scores)
    how = "that and its" if multiple >= 1 else "its"  # below the average paper: its text match placed it
    assert score_sentence(trace, trace.results[0]).startswith(
        f"{share:.1%} of the total salsa score — {multiple:.1f}× the average of the "
        f"{len(trace.ranking.scores)} papers in the pruned graph; placed by {how} text match with the whole "
        f"query ({trace.settings.fusion} fusion)")
    assert len(_popovers(at, "Abstract")) == min(20, len(trace.results))  # the abstract one click away
    assert sum(e.label == "Why this rank: the score's parts" for e in at.expander) == min(20, len(trace.results))
    # the progress board started with opening the corpus
    assert any(m.value.startswith(":material/check_circle: Open the corpus and its search index — ready")
               for m in at.markdown)


def test_estimate_never_sits_above_another_querys_results(app_env):
    at = _search(AppTest.from_file(str(ROOT / "app.py"), default_timeout=180).run(), QUERY)
    assert [m for m in at.markdown if "Why it is here" in m.value] or [
        c for c in at.caption if "Why it is here" in c.value]
    at.text_area(key="query_text").input("Virasoro symmetry of anti-de Sitter gravity")
    at = _click(at, "Estimate budget")
    assert not at.exception
    assert any(i.value.startswith("**Budget: ") for i in at.info)
    assert not [c for c in at.caption if "Why it is here" in c.value]
    assert not [s for s in at.subheader if s.value == "Results"]
    assert any("results of the open run (another query) are hidden" in c.value for c in at.caption)
    # the same query as the open run: its results may stay
    at.text_area(key="query_text").input(QUERY)
    at = _click(at, "Estimate budget")
    assert [s for s in at.subheader if s.value == "Results"]


def test_library_seeds_and_marks(app_env):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180).run()
    at.text_area(key="library_ids").input("h003 hep-th/9999999")
    at = _search(at, QUERY)
    assert not at.exception and not at.error
    trace = at.session_state["trace"]
    assert trace.library is not None
    assert [(i.given, i.paper_id, i.seed) for i in trace.library.items] == [
        ("h003", "h003", True), ("arXiv:hep-th/9999999", None, False)]
    marked = [m.value for m in at.markdown if "already in your library" in m.value]
    assert len(marked) == sum(r.in_library for r in trace.results) == 1
    from crase_app.display import md_escape

    assert any(md_escape("not in this source (arXiv:hep-th/9999999)") in w.value for w in at.warning)
    hide = next(t for t in at.toggle if t.key == "hide_library")
    hide.set_value(True)
    at.run()
    assert len(_card_captions(at)) == len(trace.results) - 1
    at.switch_page("app_pages/2_Seeds.py").run()
    assert not at.exception and not at.error
    assert {m.label: m.value for m in at.metric}["from your library"] == "1"
    table = at.dataframe[-1].value
    assert table["given"].tolist() == ["h003", "arXiv:hep-th/9999999"]
    assert table["title"].tolist()[1] == "not in this source"


def test_weak_match_notice_and_links_on_the_embedded_corpus(tmp_path, monkeypatch, hepth_source):
    import streamlit as st

    monkeypatch.delenv("CRASE_CORPUS", raising=False)
    monkeypatch.setenv("CRASE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(ROOT)
    st.cache_resource.clear()
    at = _search(AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run(),
                 "protein folding with deep learning")
    assert not at.exception
    weak = [w.value for w in at.warning if w.value.startswith("Weak match")]
    assert len(weak) == 1
    # cards link to arXiv, built from the validated id
    links = [m.value for m in at.caption if "](https://arxiv.org/abs/hep-th/" in m.value]
    n = len(at.session_state["trace"].results)
    assert n == 50 and len(links) == 20  # the first 20 cards, then all on request
    at = _click(at, "Show all 50 papers")
    assert len([m.value for m in at.caption if "](https://arxiv.org/abs/hep-th/" in m.value]) == n
    assert not [b for b in at.button if b.label.startswith("Show all")]
    st.cache_resource.clear()


def test_html_share_is_made_on_request(app_env):
    at = _search(AppTest.from_file(str(ROOT / "app.py"), default_timeout=180).run(), QUERY)
    assert not [b for b in at.get("download_button") if b.proto.label.startswith("Share as one HTML")]
    at = _click(at, "Prepare a shareable HTML file")
    assert not at.exception and not at.error
    assert [b for b in at.get("download_button") if b.proto.label == "Share as one HTML file (opens offline)"]
    assert not [b for b in at.button if b.label == "Prepare a shareable HTML file"]  # replaced by the download
    assert at.session_state["html_ready"] == at.session_state["trace"].run_id


def test_model_backend_shows_the_model_budget_before_the_run(app_env, monkeypatch):
    """With the openai backend chosen: the per-query model limit under the buttons before anything runs, and the
    estimate's budget line (describe_budget: limit, items, tokens, time); the offline backend shows neither."""
    from model_server import ModelServer

    from crase_app.display import md_escape
    from crase_core.settings.pipeline import DEFAULT_LLM_BUDGET, DEFAULT_LLM_TOKEN_BUDGET

    server = ModelServer("good")
    try:
        monkeypatch.setenv("CRASE_BASE_URL", server.base_url)
        monkeypatch.setenv("CRASE_MODEL", "test-model")
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180).run()
        assert not [c for c in at.caption if c.value.startswith("Model budget per query")]
        at.selectbox(key="rt_backend").set_value("openai").run()
        assert not at.exception
        limit = (f"Model budget per query: at most {DEFAULT_LLM_BUDGET:,} model calls and "
                 f"{DEFAULT_LLM_TOKEN_BUDGET:,} tokens")
        assert [c.value for c in at.caption if c.value.startswith("Model budget per query")][0].startswith(limit)
        at.text_area(key="query_text").input(QUERY)
        at = _click(at, "Estimate budget")
        assert not at.exception and not at.error
        infos = [i.value for i in at.info if i.value.startswith("**Budget: ")]
        assert len(infos) == 1
        first, line = infos[0].split("  \n")
        assert "model calls" in first and "scoring operations" not in first
        assert line.startswith(md_escape(f"Model budget: {DEFAULT_LLM_BUDGET:,} calls and {DEFAULT_LLM_TOKEN_BUDGET:,} "
                                         "tokens; 1 + |V| + |E| = "))
        assert md_escape("the model is asked ≤") in line and "estimated" in line and "prompt/completion tokens" in line
        assert server.requests <= 1  # the estimate asks at most for the plan
        at.selectbox(key="rt_backend").set_value("offline").run()
        assert not [c for c in at.caption if c.value.startswith("Model budget per query")]
    finally:
        server.stop()


def test_audit_statistics_split_by_scorer(app_env):
    """The Audit page shows the Table 5 measures per scorer, equal to summarize_by_scorer over the verdicts."""
    import copy

    from crase_core.audit.store import AuditStore, summarize_by_scorer

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180).run()
    # the default prunes the word-overlap scorer's weak edges (2 of 12 here)
    at = _search(at, QUERY)
    trace = copy.deepcopy(at.session_state["trace"])
    kept = [e for e in trace.edges if e.kept]
    pruned = [e for e in trace.edges if not e.kept]
    assert len(kept) >= 2 and pruned
    for e in trace.edges:  # a mixed run: the model scored the first two kept edges, the rest offline
        object.__setattr__(e, "scorer", "offline")
    for e in kept[:2]:
        object.__setattr__(e, "scorer", "model")
    at.session_state["trace"] = trace
    store = AuditStore(app_env / "audit.sqlite")
    store.record(trace.run_id, kept[0].citing, kept[0].cited, "Ana", "agree", True, "")
    store.record(trace.run_id, kept[1].citing, kept[1].cited, "Ana", "disagree", True, "")
    store.record(trace.run_id, kept[2 % len(kept)].citing, kept[2 % len(kept)].cited, "Ana", "agree", True, "")
    store.record(trace.run_id, pruned[0].citing, pruned[0].cited, "Ana", "agree", False, "")
    at.switch_page("app_pages/4_Audit.py").run()
    assert not at.exception and not at.error
    table = next(d.value for d in at.dataframe if "scored by" in d.value.columns)
    expected = summarize_by_scorer(store.verdicts(trace.run_id),
                                   {(trace.run_id, e.citing, e.cited): e.scorer for e in trace.edges})
    assert list(expected) == ["model", "offline"]
    # the offline scorer is named word overlap, never entailment; the model's scores are its entailment
    assert table["scored by"].tolist() == ["the model (entailment)", "word overlap (offline)"]
    model = table.set_index("scored by").loc["the model (entailment)"]
    assert (model["verdicts"], model["agreement"], model["retained-edge precision"]) == (2, "50.0%", "50.0%")
    assert model["pruned-edge correctness"] == "–"
    offline = table.set_index("scored by").loc["word overlap (offline)"]
    n_off = expected["offline"].verdicts
    assert offline["verdicts"] == n_off and offline["pruned-edge correctness"] == "100.0%"
