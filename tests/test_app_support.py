"""Non-Streamlit helpers of the app (pages/_display, _graph_view), the run store and re-ranking."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from crase_core.errors import InputError, TraceError
from crase_core.rankers import ranker_names
from crase_core.rerank import rerank, rerank_all
from crase_core.runs import RunStore, content_id, outcome_key, runs_dir, with_content_id

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the app side (pages/) is not part of the installed package
    sys.path.append(str(ROOT))

from crase_core.pipeline import estimate_budget as probe_budget  # noqa: E402
from pages import _display as D  # noqa: E402
from pages import _graph_view as G  # noqa: E402

HOSTILE = ROOT / "tests" / "fixtures" / "hostile_corpus"
QUERY = "holographic entanglement entropy of BTZ black holes"


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from crase_core.backends import offline_backend
    from crase_core.cache import ResultCache
    from crase_core.pipeline import Engine
    from crase_core.sources.local import LocalSource
    from crase_core.termstats import TermStats

    src = LocalSource.open(HOSTILE)
    return Engine(src, offline_backend(TermStats.from_index(src.text_index)),
                  ResultCache(tmp_path_factory.mktemp("support-cache")))


@pytest.fixture(scope="module")
def budget_then_trace(engine):
    from crase_core.pipeline import run_query
    from crase_core.settings import PipelineSettings

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


def test_runs_dir_env(tmp_path, monkeypatch):
    monkeypatch.setenv("CRASE_RUNS_DIR", str(tmp_path / "my-runs"))
    assert runs_dir() == tmp_path / "my-runs" and (tmp_path / "my-runs").is_dir()


def test_graph_views(budget_then_trace):
    _, trace = budget_then_trace
    kept = G.graph_view(trace, "kept graph")
    assert set(kept.nodes) == {n.paper.id for n in trace.nodes if n.kept}
    assert all(e.kept for e in kept.edges) and len(kept.edges) == sum(e.kept for e in trace.edges)
    assert kept.hidden_pruned_edges == sum(
        1 for e in trace.edges if not e.kept and e.citing in kept.nodes and e.cited in kept.nodes)
    everything = G.graph_view(trace, "everything", show_pruned=True)
    assert len(everything.nodes) == len(trace.nodes) and len(everything.edges) == len(trace.edges)
    top = G.graph_view(trace, "top-k and trails", top_k=3)
    want = set()
    for r in trace.results[:3]:
        want.add(r.paper_id)
        for s in r.trail:
            want.update((s.source, s.target))
    assert set(top.nodes) == want
    for view in (kept, everything, top):
        shown = set(view.nodes)
        assert all(e.citing in shown and e.cited in shown for e in view.edges)
    # filters
    old = G.graph_view(trace, "everything", years=(1990, 1997))
    assert {trace.node(n).paper.year for n in old.nodes} <= set(range(1990, 1998)) and old.nodes
    sq = G.seed_subqueries(trace)
    only2 = G.graph_view(trace, "kept graph", subqueries=[2])
    assert all(2 in sq.get(n, []) or 2 in sq.get(G.trail_seed_of(trace).get(n) or "", []) for n in only2.nodes)
    capped = G.graph_view(trace, "everything", show_pruned=True, max_edges=3)
    assert len(capped.edges) == 3 and "3" in capped.note
    with pytest.raises(InputError):
        G.graph_view(trace, "sideways")


def test_vis_network_data_colours_sizes_dashes_and_plain_text(budget_then_trace):
    _, trace = budget_then_trace
    view = G.graph_view(trace, "everything", show_pruned=True)
    data = G.vis_network_data(trace, view, G.layout_positions(view.nodes, view.edges))
    by_id = {n["id"]: n for n in data["nodes"]}
    for n in trace.nodes:
        assert by_id[n.paper.id]["color"] == D.ROLE_COLOURS[D.node_role(n)]
        assert "x" in by_id[n.paper.id] and "y" in by_id[n.paper.id]
    top = max(trace.nodes, key=lambda n: n.score)
    assert by_id[top.paper.id]["size"] == pytest.approx(36.0)
    assert by_id["h001"]["title"].startswith("<script>alert('xss')</script>")  # raw text; rendered via textContent
    edges = {e["id"]: e for e in data["edges"]}
    for e in trace.edges:
        rec = edges[f"{e.citing}->{e.cited}"]
        assert (rec["from"], rec["to"]) == (e.citing, e.cited)
        assert rec["dashes"] is (not e.kept)
        assert rec["color"] == (G.delta_colour(e.delta) if e.kept else D.PRUNED_EDGE_COLOUR)
    assert G.delta_colour(0.0) == "#a9b8cc" and G.delta_colour(1.0) == "#1d3557"


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


def test_rerank_on_real_hepth_run_matches(hepth_engine):
    from crase_core.pipeline import run_query
    from crase_core.settings import PipelineSettings

    trace = run_query(json.loads(D.DEMO_QUERIES_FILE.read_text())[0]["query"], hepth_engine,
                      PipelineSettings(ranker="salsa"))
    again = rerank(trace, "salsa")
    assert again.result.scores == trace.ranking.scores
    assert len(D.load_demo_queries()) >= 3
