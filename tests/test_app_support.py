"""Non-Streamlit helpers of the app (crase_app.display), the run store and re-ranking; the graph views are in
tests/test_graph_views.py (the library marks on the graph are here, beside the inspector's)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from crase_core.audit.rerank import rerank, rerank_all
from crase_core.errors import InputError, TraceError
from crase_core.ranking.rankers import ranker_names
from crase_core.runs import RunStore, content_id, outcome_key, runs_dir, with_content_id

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the app side (app_pages/, crase_app/) is not part of the installed package
    sys.path.append(str(ROOT))

from crase_app import display as D  # noqa: E402
from crase_core.pipeline import estimate_budget as probe_budget  # noqa: E402
from crase_core.views import graph_views as G  # noqa: E402

HOSTILE = ROOT / "tests" / "fixtures" / "hostile_corpus"
QUERY = "holographic entanglement entropy of BTZ black holes"


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from crase_core.backends import offline_backend
    from crase_core.cache import ResultCache
    from crase_core.pipeline import Engine
    from crase_core.sources.local import LocalSource
    from crase_core.store.termstats import TermStats

    src = LocalSource.open(HOSTILE)
    return Engine(src, offline_backend(TermStats.from_index(src.text_index)),
                  ResultCache(tmp_path_factory.mktemp("support-cache")))


@pytest.fixture(scope="module")
def budget_then_trace(engine):
    from crase_core.pipeline import run_query
    from crase_core.settings.pipeline import PipelineSettings

    probe = probe_budget(QUERY, engine, PipelineSettings())  # fresh cache: nothing cached yet
    return probe, run_query(QUERY, engine)


def test_md_escape_makes_paper_text_literal():
    assert D.md_escape("<script>alert(1)</script>") == "&lt;script&gt;alert\\(1\\)&lt;/script&gt;"
    assert D.md_escape("[a](javascript:x) $x_1$ *b*") == (
        "\\[a\\]\\(javascript\\:x\\) \\$x\\_1\\$ \\*b\\*"
    )
    assert D.md_escape("a\nb") == "a b"


def test_probe_budget_is_exact_and_caches_only_the_plan(budget_then_trace):
    probe, trace = budget_then_trace
    c = trace.stage_counts()
    assert probe.total == 1 + c["nodes"] + c["edges"] == trace.budget.total
    assert (probe.claim_calls, probe.entailment_calls) == (c["nodes"], c["edges"])
    assert probe.cached == 0 and probe.to_call == probe.total
    # the probe paid for the plan (and cached it), nothing else
    assert trace.budget.cached == 1 and trace.budget.to_call == probe.total - 1


def test_run_store_round_trip(tmp_path, budget_then_trace):
    _, trace = budget_then_trace
    store = RunStore(tmp_path / "runs")
    first = store.save(trace)
    name = first.name
    assert not first.existed and first.trace.run_id == content_id(trace) != trace.run_id
    again = store.save(trace)
    assert (again.name, again.existed) == (name, True)  # same run, same name, nothing rewritten
    runs = store.list()
    assert [r.name for r in runs] == [name]
    assert runs[0].query == QUERY and runs[0].counts == trace.stage_counts()
    assert runs[0].run_id == content_id(trace) and runs[0].outcome == outcome_key(trace)
    assert store.load(name) == first.trace == with_content_id(trace)
    # a trace without sidecar (copied in by hand) is listed too
    (tmp_path / "runs" / f"{name}.meta.json").unlink()
    assert store.list()[0].run_id == content_id(trace)
    with pytest.raises(InputError):
        store.load("../../etc/passwd")
    with pytest.raises(TraceError):
        store.load("nope")
    with pytest.raises(TraceError, match="not a JSON trace"):
        store.import_bytes(b"<html>")
    with pytest.raises(TraceError, match="version"):
        store.import_bytes(json.dumps({"trace_version": 99}).encode())
    other = RunStore(tmp_path / "other")
    imported = other.import_bytes((tmp_path / "runs" / f"{name}.json").read_bytes())
    assert imported.trace == first.trace and other.list()[0].name == imported.name == name


def test_reuse_reopens_the_saved_run_without_reading_its_file_and_rereads_a_changed_file(
        tmp_path, budget_then_trace, monkeypatch):
    import dataclasses

    from crase_core import runs as runs_mod
    from crase_core import trace as trace_io

    _, trace = budget_then_trace
    store = RunStore(tmp_path / "runs")
    first = store.save(trace, reuse=True)
    assert not first.existed
    path = store.path(first.name)
    assert path.read_text() == trace_io.dumps(first.trace)  # the one-serialisation text is dumps' text
    # the same result again (another time, other timings: another content id): the saved run comes back,
    # the very object this process saved, and its file is neither parsed nor written again
    rerun = dataclasses.replace(trace, created_at="2030-01-01T00:00:00+00:00", timings={"plan": 9.0})
    reads = []
    real_load = trace_io.load
    monkeypatch.setattr(trace_io, "load", lambda p, *a, **k: reads.append(p) or real_load(p, *a, **k))
    again = store.save(rerun, reuse=True)
    assert again.existed and again.name == first.name and again.trace is first.trace and reads == []
    assert store.load(first.name) is first.trace and reads == []
    assert len([p for p in (tmp_path / "runs").glob("*.json") if not p.name.endswith(".meta.json")]) == 1
    # a file replaced on disk (another trace under that name) is read again, and reuse checks it:
    # its outcome differs from the sidecar's, so the rerun is saved instead of reopening the wrong run
    other = with_content_id(dataclasses.replace(trace, query=trace.query + " (edited)"))
    path.write_text(trace_io.dumps(other))
    assert store.load(first.name) == other and len(reads) == 1
    saved = store.save(rerun, reuse=True)
    assert not saved.existed and saved.name != first.name
    # a new store object over the same folder (another session) shares what this process knows
    assert RunStore(tmp_path / "runs").save(rerun, reuse=True).trace is saved.trace and len(reads) == 1
    assert runs_mod.outcome_key(saved.trace) == runs_mod.outcome_key(rerun)


def test_runs_dir_env(tmp_path, monkeypatch):
    monkeypatch.setenv("CRASE_RUNS_DIR", str(tmp_path / "my-runs"))
    assert runs_dir() == tmp_path / "my-runs" and (tmp_path / "my-runs").is_dir()


def test_rerank_reproduces_the_run_and_covers_every_ranker(budget_then_trace):
    _, trace = budget_then_trace
    same = rerank(trace, trace.settings.ranker)
    assert same.result.scores == trace.ranking.scores
    assert all(same.ranks[n.paper.id] == n.rank for n in trace.nodes if n.kept)
    every = rerank_all(trace)
    assert set(every) == set(ranker_names())
    for r in every.values():
        assert set(r.result.scores) == {n.paper.id for n in trace.nodes if n.kept}
        assert sum(r.result.scores.values()) == pytest.approx(1.0)
        assert sorted(r.ranks.values()) == list(range(1, len(r.ranks) + 1))
    with pytest.raises(InputError):
        rerank(trace, "nope")


def test_rerank_reproduces_a_run_with_a_text_floor(hepth_engine):
    """A floor beyond the text candidates: the floor-only papers stay out of the walk and the floor places
    them, in the run and in its re-ranking alike."""
    from crase_core.pipeline import run_query
    from crase_core.settings.pipeline import PipelineSettings

    # a long paraphrasing question (LitSearch dev 003 as asked): its plan's seeds are not the search's top 8
    query = ("Looking for an analysis of the bosonic string spectrum on three-dimensional anti-de Sitter space, "
             "where spectral flow generates long strings and unitarity is proven.")
    trace = run_query(query, hepth_engine,
                      # seeds of the plan alone, so the search's top 8 are not seeds and some join for the floor
                      PipelineSettings(text_candidates=2, text_floor=8, k=10, query_seeds=0))
    text = [n.paper.id for n in trace.nodes if n.role == "text" and n.kept]
    assert len(text) > 2  # some joined only for the floor
    same = rerank(trace, trace.settings.ranker)
    assert same.result.scores == trace.ranking.scores
    assert {n.paper.id: n.rank for n in trace.nodes if n.kept} == same.ranks


def test_rerank_on_real_hepth_run_matches(hepth_engine):
    from crase_core.pipeline import run_query
    from crase_core.settings.pipeline import PipelineSettings

    trace = run_query(json.loads(D.DEMO_QUERIES_FILE.read_text())[0]["query"], hepth_engine,
                      PipelineSettings(ranker="salsa"))
    again = rerank(trace, "salsa")
    assert again.result.scores == trace.ranking.scores
    assert len(D.load_demo_queries()) >= 3


def test_shorten_words_never_cuts_inside_a_word():
    text = "In this paper we compare the holographic entanglement entropy of BTZ black holes"
    out = D.shorten_words(text, 30)
    assert out == "In this paper we compare the…" and len(out) <= 30
    assert D.shorten_words("short", 30) == "short"
    assert D.shorten_words("Supercalifragilisticexpialidocious", 10) == "Supercali…"  # one long word: cut it


def test_tex_markdown_renders_tex_with_the_one_renderer_and_escapes_the_rest():
    from crase_core.views import tex

    assert D.tex_markdown("The $R^2$ of $w_{\\infty}$ fits") == "The R<sup>2</sup> of w<sub>∞</sub> fits"
    assert D.tex_markdown("costs $5 and") == "costs \\$5 and"  # a lone dollar stays a dollar
    # commands outside the whitelist, HTML and markdown links stay literal text; no $ reaches Streamlit's KaTeX
    for hostile in ("$\\href{javascript:alert(1)}{x}$", "$\\htmlId{a}{b}$", "$\\def\\x{1}$", "$a<b$",
                    "$\\color{red}{x}$", "$x$ <script>alert(1)</script> [l](javascript:alert(1))"):
        out = D.tex_markdown(hostile)
        assert "<script" not in out and "](javascript" not in out and "\\href" not in out
        assert re.sub(r"</?(?:sub|sup|b|i)>", "", out).count("<") == 0
        assert out == tex.to_markdown(hostile)
    assert D.tex_markdown("$|a|$ ok", in_table=True) == "\\|a\\| ok"  # a table cell stays one cell
    assert D.tex_plain("The $R^2$ of $w_{\\infty}$, $\\alpha_{2}$; $5 and 6") == "The R² of w_∞, α₂; $5 and 6"
    assert D.tex_accents("M. Ba\\~nados") == "M. Bañados" == tex.to_plain("M. Ba\\~nados")


def test_claims_markdown_has_every_claim_in_full_and_no_html(budget_then_trace):
    _, trace = budget_then_trace
    from crase_app.shared import claims_markdown

    pid = max(trace.claims, key=lambda p: len(trace.claims[p].claims))
    cs = trace.claims[pid]
    table = claims_markdown(trace, pid, [True] * len(cs.claims))
    rows = table.splitlines()[2:]
    assert len(rows) == len(cs.claims)
    for c, row in zip(cs.claims, rows, strict=True):
        assert row.startswith(f"| ✓ `{c.id}`") and D.tex_markdown(c.text, in_table=True) in row
        assert row.count(" | ") == 1  # two cells: nothing in the text splits the row
    assert re.sub(r'</?(?:sub|sup|b|i)>|<span style="text-decoration:overline">|</span>', "", table) \
        .replace("&lt;", "").count("<") == 0  # the renderer's own marks only


def test_labels_are_unique_and_name_first_author_and_year():
    assert D.first_author_surname(["M. Ba\\~nados (Santiago)", "C. Teitelboim"]) == "Bañados"
    assert D.first_author_surname(["S.W.Hawking"]) == "Hawking" and D.first_author_surname(["Maldacena, J."]) == "Maldacena"
    assert D.first_author_surname([]) == ""


def _inspector_app(trace, citing, cited):
    import sys

    sys.path.insert(0, ".")
    from crase_app.shared import edge_inspector

    edge_inspector(trace, citing, cited, audit=False)


def test_edge_inspector_renders_scorer_badge_claims_in_full_and_escapes(budget_then_trace):
    import copy

    from streamlit.testing.v1 import AppTest

    _, trace = budget_then_trace
    t = copy.deepcopy(trace)
    e = next(x for x in t.edges if x.kept and "h001" in (x.citing, x.cited))
    object.__setattr__(e, "scorer", "offline")
    object.__setattr__(e, "scorer_reason", "endpoint timed out <b>twice</b>")
    at = AppTest.from_function(_inspector_app, args=(t, e.citing, e.cited), default_timeout=60)
    at.run()
    assert not at.exception
    md = [m.value for m in at.markdown]
    assert any(v.startswith(":orange-badge[") and "word-overlap support (offline scorer, not entailment)" in v for v in md)
    assert "endpoint timed out &lt;b&gt;twice&lt;/b&gt;" in [c.value for c in at.caption]
    for pid in (e.citing, e.cited):
        for c in t.claims[pid].claims:
            assert any(D.tex_markdown(c.text, in_table=True) in v for v in md), c.text
    assert not any("<script" in v for v in md)  # the hostile title h001 is escaped everywhere


def _node_inspector_app(trace, pid):
    import sys

    sys.path.insert(0, ".")
    from crase_app.shared import node_inspector

    node_inspector(trace, pid)


def test_library_papers_marked_on_graph_legend_tooltip_and_inspector(budget_then_trace):
    """Papers the user already has: thick green border (``mine``), a legend row, a tooltip line, an inspector badge;
    no mark, no legend row when the run has none."""
    import copy

    from streamlit.testing.v1 import AppTest

    _, trace = budget_then_trace
    view = G.graph_view(trace, "everything", show_pruned=True)
    positions = {p: (0.0, 0.0) for p in view.nodes}
    plain = G.draw_nodes(trace, view, positions)
    assert not any(n["mine"] for n in plain)
    assert all(i["kind"] != "mine" for i in G.legend_items(trace, view))
    t = copy.deepcopy(trace)
    mine = {"h002", "h003"}
    for n in t.nodes:
        n.in_library = n.paper.id in mine
    by_id = {n["id"]: n for n in G.draw_nodes(t, view, positions)}
    assert {pid for pid, n in by_id.items() if n["mine"]} == mine
    for pid, n in by_id.items():
        assert n["colour"] == D.ROLE_COLOURS[D.node_role(t.node(pid))]
        if pid in mine:
            assert n["border"] == G.LIBRARY_BORDER and n["tip"].splitlines()[-2] == G.LIBRARY_LABEL
        else:
            assert n["border"] == "#ffffff" and G.LIBRARY_LABEL not in n["tip"]
    legend = G.legend_items(t, view)
    assert {"kind": "mine", "colour": G.LIBRARY_BORDER, "text": G.LIBRARY_LABEL} in legend
    # a seed that came only from the library (origin sub-query index -1) says so, not "sub-query 0"
    seed = next(x for x in t.seeds if x.paper_id == "h003")
    for o in seed.origins:
        o.subquery_index = -1
    tip = G.node_tooltip(t.node("h003"), G.seed_subqueries(t)["h003"])
    assert "(your library)" in tip.splitlines()[2] and "sub-quer" not in tip
    for pid, expected in (("h003", True), ("h001", False)):
        at = AppTest.from_function(_node_inspector_app, args=(t, pid), default_timeout=60)
        at.run()
        assert not at.exception
        badges = [m.value for m in at.markdown if "already in your library" in m.value]
        assert badges == ([":green-badge[:material/bookmark: already in your library]"] if expected else [])


def _fresh_corpus_env(tmp_path, monkeypatch) -> str:
    """The hostile fixture corpus with an empty cache folder (its store and index not built yet)."""
    import streamlit as st

    from crase_app.settings_form import choices_json
    from crase_core import runtime

    root = Path(__file__).resolve().parent.parent
    monkeypatch.setenv("CRASE_CORPUS", str(root / "tests" / "fixtures" / "hostile_corpus"))
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    st.cache_resource.clear()
    runtime._local_source.cache_clear()  # a fresh server process: no corpus opened yet
    return choices_json({"source": "local", "backend": "offline"})


def test_the_first_open_reports_the_corpus_build_and_a_later_open_reports_nothing(tmp_path, monkeypatch):
    """Issue 11/13: progress from the first click includes building the store and index (app: ProgressBoard)."""
    from crase_app import shared
    from crase_core import runtime

    key = _fresh_corpus_env(tmp_path, monkeypatch)
    steps: list = []
    engine = shared.open_engine(key, steps.append)
    assert "hostile_corpus" in engine.source.describe()
    assert [s.stage for s in steps][-1] == "done" and steps[-1].fraction == 1.0
    assert {"parse", "index"} <= {s.stage for s in steps}
    assert [s.fraction for s in steps] == sorted(s.fraction for s in steps)
    again: list = []
    import streamlit as st

    st.cache_resource.clear()  # a new server process: the store is on disk now, opening it builds nothing
    runtime._local_source.cache_clear()
    shared.open_engine(key, again.append)
    assert again == []


def test_a_click_during_the_prefetch_shows_the_prefetch_build(tmp_path, monkeypatch):
    import threading

    from crase_app import shared
    from crase_core.store import corpus_store

    key = _fresh_corpus_env(tmp_path, monkeypatch)
    gate = threading.Event()  # the tiny corpus builds in milliseconds: hold the prefetch until the click waits
    real_build = corpus_store.build
    monkeypatch.setattr(corpus_store, "build", lambda *a, **k: (gate.wait(30), real_build(*a, **k))[1])
    # what an earlier build of the same choices left (a server whose caches were cleared): not this build's news
    shared._BUILD_STEPS[key] = corpus_store.BuildStep("done", 1.0, "an earlier build")
    thread = shared.prefetch_engine(key)
    threading.Timer(0.5, gate.set).start()
    steps: list = []
    shared.open_engine(key, steps.append)
    assert not thread.is_alive()
    # what the prefetch built is reported (at least its last step), and this click built nothing itself
    assert steps and steps[-1].stage == "done" and steps[-1].fraction == 1.0
    assert [s.fraction for s in steps] == sorted(s.fraction for s in steps)
    assert all(s.message != "an earlier build" for s in steps)


def test_claim_marks_are_the_claims_delta_counts():
    from crase_app.shared import claim_marks
    from crase_core.records import EdgeRecord

    # word overlap at θ_lexical 0.05: 0.4 and 0.1 reach it (✓, counted in Δ = 2/3), 0.01 not
    lexical = EdgeRecord("u", "v", matrix=[[0.4], [0.1], [0.01]], supported=[True, True, False], delta=2 / 3,
                         scorer="offline", theta=0.05)
    assert claim_marks(lexical) == ["✓", "✓", "✗"]
    model = EdgeRecord("u", "v", matrix=[[0.8], [0.1]], supported=[True, False], scorer="model")
    assert claim_marks(model) == ["✓", "✗"]


def test_heat_map_cells_and_legend_labels():
    """The heat map and its "Matrix values" table show a cell alike (cut to 2 decimals: a value below θ never
    reads as θ); the legend lies under the map (its length does not depend on the rows) and labels 0, 1 and the
    thresholds that are not crowded against another label (θ_lexical 0.05 beside 0 is left to the caption)."""
    from crase_app.shared import cell_value, legend_values, matrix_chart
    from crase_core.records import EdgeRecord

    assert [cell_value(x) for x in (0.2057, 0.749, 0.75, 0.0, 1.0, 0.3399)] == ["0.20", "0.74", "0.75", "0.00", "1.00",
                                                                                "0.33"]
    assert legend_values([0.0, 0.05, 0.32, 1.0]) == [0.0, 0.32, 1.0]
    assert legend_values([0.0, 0.25, 0.5, 1.0]) == [0.0, 0.25, 0.5, 1.0]
    assert legend_values([0.0, 0.5, 0.55, 1.0]) == [0.0, 0.55, 1.0]  # the larger is kept
    assert legend_values([0.0, 1.0]) == [0.0, 1.0]
    edge = EdgeRecord(citing="a", cited="b", kept=True, delta=0.5, weight=0.5, matrix=[[0.2057, 0.04], [0.5, 0.0]],
                      supported=[False, True], scorer="offline")
    spec = matrix_chart(edge, 0.32, [("c1", "one"), ("c2", "two")], [("c1", "x"), ("c2", "y")]).to_dict()
    shown = {(r["row"][:2], r["col"][:2]): r["shown"] for r in spec["datasets"][next(iter(spec["datasets"]))]}
    assert shown == {("c1", "c1"): "0.20", ("c1", "c2"): "0.04", ("c2", "c1"): "0.50", ("c2", "c2"): "0.00"}
    legend = spec["layer"][0]["encoding"]["color"]["legend"]
    assert legend["orient"] == "bottom" and legend["direction"] == "horizontal" and legend["values"] == [0.0, 0.32, 1.0]
