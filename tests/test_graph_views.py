"""The run view model (crase_core.views.graph_views): selection, layouts, communities and their names, edge styles and
bends, the pointing contract — exact numbers on small hand-built graphs, invariants on real runs."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from crase_core.errors import InputError
from crase_core.records import (
    Budget,
    EdgeRecord,
    NodeRecord,
    Paper,
    PlanResult,
    RankedPaper,
    RankingResult,
)
from crase_core.settings.pipeline import PipelineSettings
from crase_core.trace import RunTrace
from crase_core.views import graph_views as V

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "fixtures" / "hostile_corpus"
DEMO = json.loads((ROOT / "assets" / "ui" / "demo_queries.json").read_text(encoding="utf-8"))


def hand_trace(papers: list[tuple[str, str, int | None]], edges: list[tuple[str, str, float]],
               ranked: list[str] | None = None, scorer: dict[tuple[str, str], str] | None = None,
               pruned: set[tuple[str, str]] = frozenset()) -> RunTrace:  # type: ignore[assignment]
    """A run over ``papers`` (id, title, year) and citation ``edges`` (citing, cited, Δ); ``ranked`` in order
    (each its own seed, no trail), scores 1/rank."""
    ranked = ranked or [p for p, _, _ in papers]
    rank = {p: i + 1 for i, p in enumerate(ranked)}
    nodes = [NodeRecord(Paper(pid, title, year=year, authors=(f"A. Author{pid}",)), "seed", kept=True,
                        score=1.0 / rank[pid] if pid in rank else 0.0, rank=rank.get(pid)) for pid, title, year in papers]
    recs = [EdgeRecord(u, v, delta=d, kept=(u, v) not in pruned, weight=d, decision="kept" if (u, v) not in pruned
                       else "pruned", supported=[True], scorer=(scorer or {}).get((u, v), "offline")) for u, v, d in edges]
    results = [RankedPaper(p, i + 1, 1.0 / (i + 1), p, [], "a seed") for i, p in enumerate(ranked)]
    return RunTrace(query="q", settings=PipelineSettings(), source="hand", source_filter="", backend={},
                    reference_year=2024, plan=PlanResult("q", ["q"], "hand"), subquery_results=[], seeds=[],
                    nodes=nodes, claims={}, edges=recs, truncations=[], budget=Budget(0, 0, 0, 0, 0, 0),
                    ranking=RankingResult("hand", {n.paper.id: n.score for n in nodes}), results=results)


@pytest.fixture(scope="module")
def hostile_trace():
    from crase_core.backends import offline_backend
    from crase_core.pipeline import Engine, run_query
    from crase_core.sources.local import LocalSource
    from crase_core.store.termstats import TermStats

    source = LocalSource.open(HOSTILE)
    return run_query("holographic entanglement entropy of BTZ black holes",
                     Engine(source, offline_backend(TermStats.from_index(source.text_index))))


@pytest.fixture(scope="module")
def demo_trace(hepth_engine):
    from crase_core.pipeline import run_query

    return run_query(DEMO[0]["query"], hepth_engine)


# --- selection --------------------------------------------------------------------------------------------
def test_selections_and_filters(hostile_trace):
    trace = hostile_trace
    kept = V.graph_view(trace, "kept graph")
    assert set(kept.nodes) == {n.paper.id for n in trace.nodes if n.kept}
    assert all(e.kept for e in kept.edges) and len(kept.edges) == sum(e.kept for e in trace.edges)
    assert kept.hidden_pruned_edges == sum(
        1 for e in trace.edges if not e.kept and e.citing in kept.nodes and e.cited in kept.nodes)
    everything = V.graph_view(trace, "everything", show_pruned=True)
    assert len(everything.nodes) == len(trace.nodes) and len(everything.edges) == len(trace.edges)
    top = V.graph_view(trace, "top-k and trails", top_k=3)
    want, trail = set(), set()
    for r in trace.results[:3]:
        want.add(r.paper_id)
        for s in r.trail:
            want.update((s.source, s.target))
            trail.add(f"{s.source}->{s.target}" if s.along_citation else f"{s.target}->{s.source}")
    assert set(top.nodes) == want and top.trail_edges == {V.edge_id(e) for e in top.edges} & trail
    # trail edges come first (they are bent and drawn on top first)
    assert [V.edge_id(e) in top.trail_edges for e in top.edges] == sorted(
        (V.edge_id(e) in top.trail_edges for e in top.edges), reverse=True)
    for view in (kept, everything, top):
        shown = set(view.nodes)
        assert all(e.citing in shown and e.cited in shown for e in view.edges)
    old = V.graph_view(trace, "everything", years=(1990, 1997))
    assert {trace.node(n).paper.year for n in old.nodes} <= set(range(1990, 1998)) and old.nodes
    capped = V.graph_view(trace, "everything", show_pruned=True, max_edges=3)
    assert len(capped.edges) == 3 and "3" in capped.note
    few = V.graph_view(trace, "kept graph", max_nodes=4)
    ranked = [n.paper.id for n in sorted((n for n in trace.nodes if n.kept), key=lambda n: n.rank or 10**9)]
    assert set(few.nodes) == set(ranked[:4]) and "4 highest-ranked" in few.note
    with pytest.raises(InputError):
        V.graph_view(trace, "sideways")
    with pytest.raises(InputError):
        V.focus_view(trace, "no-such-paper")
    with pytest.raises(InputError):
        V.run_view(trace, "spiral")


# --- timeline -------------------------------------------------------------------------------------------
def test_timeline_columns_fold_empty_years_and_size_years_by_their_papers():
    cols, axis = V.timeline_columns({1992: 2, 1999: 12, 2000: 12, 2002: 1})
    # 2 papers → 2 lanes (76 px), a fold of 40 px for 1993–1998, 12 papers → 4 lanes (136 px), one empty
    # year (2001) → 34 px, 1 paper → 1 lane (46 px)
    assert cols == {1992: (38.0, 2), 1999: (184.0, 4), 2000: (320.0, 4), 2002: (445.0, 1)}
    assert axis == [{"x": 38.0, "label": "1992"}, {"x": 96.0, "label": "1993–1998", "fold": True},
                    {"x": 184.0, "label": "1999"}, {"x": 320.0, "label": "2000"}, {"x": 405.0, "label": "2001"},
                    {"x": 445.0, "label": "2002"}]
    cols, axis = V.timeline_columns({None: 3, 2001: 1})
    assert cols[None][0] < cols[2001][0] and axis[0]["label"] == "n.d." and axis[1]["fold"]


def test_two_early_papers_do_not_squash_the_timeline():
    """Two 1992 papers and 48 from 1999–2002: the later years take most of the width (a linear axis gave
    them 3/10 of it), x follows the year, and no two papers overlap."""
    papers = [("old1", "Old one", 1992), ("old2", "Old two", 1992)]
    papers += [(f"p{i}", f"Paper {i}", 1999 + i % 4) for i in range(48)]
    trace = hand_trace(papers, [])
    lay = V.timeline_layout(trace, [p for p, _, _ in papers])
    xs = {p: x for p, (x, _) in lay.positions.items()}
    late = [xs[p] for p, _, y in papers if y >= 1999]
    span = max(xs.values()) - min(xs.values())
    assert (max(late) - min(late)) / span > 0.75
    assert max(xs["old1"], xs["old2"]) < min(late)
    assert any(t.get("fold") and t["label"] == "1993–1998" for t in lay.axis)
    order = sorted(papers, key=lambda p: xs[p[0]])
    assert [y for *_, y in order] == sorted(y for *_, y in papers)  # x is monotone in the year
    sizes = {n.paper.id: V.node_size(n.score, 1.0) for n in trace.nodes}
    ids = list(lay.positions)
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            (xa, ya), (xb, yb) = lay.positions[a], lay.positions[b]
            assert math.hypot(xa - xb, ya - yb) >= sizes[a] + sizes[b], (a, b)


# --- clusters -------------------------------------------------------------------------------------------
def two_topics() -> RunTrace:
    """Two citation cliques of four (black holes / matrix models) joined by one weak edge, plus a loner."""
    bh = [("b1", "Entropy of black holes", 1998), ("b2", "Black holes and D-branes", 1999),
          ("b3", "Black holes in AdS", 2000), ("b4", "Quasinormal modes of black holes", 2001)]
    mm = [("m1", "Matrix models and strings", 1997), ("m2", "Matrix models at large N", 1998),
          ("m3", "Matrix models of M theory", 1999), ("m4", "Double scaled matrix models", 2000)]
    edges = [(u, v, 1.0) for grp in (bh, mm) for i, (u, _, _) in enumerate(grp) for v, _, _ in grp[:i]]
    return hand_trace(bh + mm + [("x1", "A note on nothing", 2002)], edges + [("b1", "m1", 0.1)])


def test_communities_are_the_two_cliques_named_by_their_words():
    trace = two_topics()
    c = V.communities(trace)
    groups = {}
    for pid, g in c.of.items():
        groups.setdefault(g, set()).add(pid)
    assert sorted(map(sorted, groups.values())) == [["b1", "b2", "b3", "b4"], ["m1", "m2", "m3", "m4"], ["x1"]]
    assert c.of["x1"] == V.NOT_CONNECTED and c.sizes[c.of["b1"]] == 4
    assert c.names[c.of["b1"]].startswith("black holes") and c.names[c.of["m1"]].startswith("matrix models")
    assert c.names[V.NOT_CONNECTED] == "no kept citation edge"
    # a pruned paper and a pruned edge do not make or join a community
    t = copy.deepcopy(trace)
    for e in t.edges:
        if (e.citing, e.cited) == ("b1", "m1"):
            e.kept = False
    t.nodes[-1].kept = False
    c2 = V.communities(t)
    assert c2.of["x1"] == V.PRUNED_GROUP and c2.of["b1"] != c2.of["m1"]


def test_cluster_names_contrast_a_community_with_the_rest():
    """p_in · log(p_in / p_out): a word every community has ("holes") does not name one; a phrase holding its
    word's titles ("black holes", "matrix models") replaces the word; acronyms keep their case."""
    papers = [("a1", "BTZ black holes", 2000), ("a2", "BTZ black holes in AdS", 2001), ("a3", "Rotating BTZ black holes", 2002),
              ("b1", "Matrix models and holes", 2000), ("b2", "Matrix models with holes", 2001), ("b3", "Holes in matrix models", 2002)]
    trace = hand_trace(papers, [])
    names = V.cluster_names(trace, {"a1": 0, "a2": 0, "a3": 0, "b1": 1, "b2": 1, "b3": 1})
    assert names[0].split(" · ")[:2] == ["black holes", "BTZ"] or names[0].split(" · ")[:2] == ["BTZ", "black holes"]
    assert names[1].split(" · ")[0] == "matrix models" and "holes" not in names[1].split(" · ")


def test_cluster_layout_gives_each_community_its_disc(demo_trace):
    groups = V.communities(demo_trace)
    view = V.graph_view(demo_trace, top_k=V.DEFAULT_TOP_K)
    lay = V.cluster_layout(demo_trace, view, groups)
    assert set(lay.positions) == set(view.nodes)
    shown = {groups.of[p] for p in view.nodes}
    assert {c["cluster"] for c in lay.captions} == shown and len(shown) >= 3
    discs = {c["cluster"]: c for c in lay.captions}
    for p, (x, y) in lay.positions.items():  # every paper inside its own community's disc
        d = discs[groups.of[p]]
        assert math.hypot(x - d["cx"], y - d["cy"]) <= d["r"] + 1e-6
    for a in lay.captions:  # discs never overlap
        for b in lay.captions:
            if a is not b:
                assert math.hypot(a["cx"] - b["cx"], a["cy"] - b["cy"]) >= a["r"] + b["r"] + 44
    max_score = max(demo_trace.node(p).score for p in view.nodes)
    size = {p: V.node_size(demo_trace.node(p).score, max_score) for p in view.nodes}
    ids = list(lay.positions)
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            (xa, ya), (xb, yb) = lay.positions[a], lay.positions[b]
            assert math.hypot(xa - xb, ya - yb) >= size[a] + size[b], (a, b)
    assert all(c["label"] and not c["label"].startswith("cluster") for c in lay.captions if c["cluster"] >= 0)


def test_focus_layout_puts_references_left_and_citers_right(demo_trace):
    top = demo_trace.results[0].paper_id
    focus = V.focus_view(demo_trace, top)
    trail = V.trail_nodes(demo_trace, top)
    assert trail[-1] == top and set(trail) <= set(focus.nodes)
    pos = V.focus_layout(demo_trace, focus).positions
    assert pos[top] == (0.0, 0.0)
    cites = {e.cited for e in focus.edges if e.citing == top} - set(trail)
    cited_by = {e.citing for e in focus.edges if e.cited == top} - set(trail) - cites
    assert all(pos[p][0] < 0 for p in cites) and all(pos[p][0] > 0 for p in cited_by)


# --- edges ------------------------------------------------------------------------------------------------
def test_bends_go_around_papers_and_pull_reverse_edges_apart():
    pos = {"a": (0.0, 0.0), "b": (100.0, 0.0), "c": (200.0, 0.0), "d": (0.0, 300.0)}
    sizes = dict.fromkeys(pos, 10.0)
    trace = hand_trace([(p, p, 2000) for p in pos], [("a", "c", 1.0), ("a", "d", 1.0), ("b", "d", 1.0), ("d", "b", 1.0)])
    bends = V.edge_bends(pos, sizes, trace.edges)
    assert bends["a->d"] == 0.0  # nothing in the way
    assert bends["a->c"] != 0.0  # the straight a→c runs through b: bent, and it clears b
    np = __import__("numpy")
    curve = np.array([V.curve_points(pos["a"], pos["c"], bends["a->c"])])
    assert V._clearances(curve, np.array([pos["b"]]), np.array([10.0 + V.NODE_CLEARANCE]))[0] >= 0
    # b→d and d→b: both bend left of their own direction, i.e. to opposite sides
    assert bends["b->d"] > 0 and bends["d->b"] > 0
    mid_bd = V.curve_points(pos["b"], pos["d"], bends["b->d"])[V.BEND_SAMPLES // 2]
    mid_db = V.curve_points(pos["d"], pos["b"], bends["d->b"])[V.BEND_SAMPLES // 2]
    assert math.hypot(mid_bd[0] - mid_db[0], mid_bd[1] - mid_db[1]) > 2 * V.MIDPOINT_CLEARANCE


def test_a_view_with_its_pruned_edges_bends_its_kept_ones_as_the_view_without():
    """The kept edges are bent first, so showing the pruned edges moves no kept edge; the view with them goes on
    from where the view without them ended (``states``), with the bends a fresh choice gives."""
    names = [chr(ord("a") + i) for i in range(9)]
    pos = {p: (100.0 * (i % 3), 100.0 * (i // 3)) for i, p in enumerate(names)}
    links = [("a", "c"), ("a", "i"), ("c", "g"), ("b", "h"), ("d", "f"), ("g", "c"), ("a", "e"), ("i", "a")]
    trace = hand_trace([(p, p.upper(), 2000) for p in names], [(u, v, 1.0) for u, v in links],
                       pruned={("a", "c"), ("d", "f")})  # a pruned edge first in the list, and one amid them
    kept = [e for e in trace.edges if e.kept]
    sizes = dict.fromkeys(pos, 10.0)
    fresh = V.edge_bends(pos, sizes, trace.edges)
    states: list[V.BendState] = []
    alone = V.edge_bends(pos, sizes, kept, states)
    assert len(states) == 1 and len(states[0].key) == len(kept)
    assert V.edge_bends(pos, sizes, trace.edges, states) == fresh
    assert {k: fresh[k] for k in alone} == alone
    assert fresh["a->c"] != 0.0  # the pruned a→c still goes around b
    bigger = dict.fromkeys(pos, 30.0)  # other papers' sizes: nothing to go on from
    assert V.edge_bends(pos, bigger, trace.edges, states) == V.edge_bends(pos, bigger, trace.edges)


def test_curve_points_are_the_scripts_quadratic():
    assert V.curve_points((0, 0), (100, 0), 0.0, 3) == [(0.0, 0.0), (50.0, 0.0), (100.0, 0.0)]
    # control point 0.2 × 100 to the left of →x on a y-down canvas (negative y); the curve's middle halfway there
    assert V.curve_points((0, 0), (100, 0), 0.2, 3)[1] == pytest.approx((50.0, -10.0))


def test_edge_styles_show_delta_scorer_and_decision():
    trace = hand_trace([("a", "A", 2000), ("b", "B", 2001), ("c", "C", 2002)],
                       [("b", "a", 0.2), ("c", "a", 0.9), ("c", "b", 0.5)],
                       scorer={("c", "a"): "model"}, pruned={("c", "b")})
    rv = V.run_view(trace, "timeline", "kept graph", show_pruned=True)
    e = {r["id"]: r for r in rv.edges}
    low, high, cut = e["b->a"], e["c->a"], e["c->b"]
    assert low["width"] == pytest.approx(0.6 + 2.4 * 0.2) and high["width"] == pytest.approx(0.6 + 2.4 * 0.9)
    assert low["opacity"] < high["opacity"]
    assert high["dash"] == [] and low["dash"] == V.EDGE_DASHES["offline"]  # model solid, word overlap dashed
    assert cut["dash"] == V.EDGE_DASHES["pruned"] and cut["colour"] == V.PRUNED_EDGE_COLOUR
    assert "scored by the model" in high["tip"] and "word overlap" in low["tip"]
    kinds = [i["kind"] for i in rv.legend]
    assert {"delta", "line", "dash", "pruned"} <= set(kinds)
    one = V.run_view(hand_trace([("a", "A", 2000), ("b", "B", 2001)], [("b", "a", 1.0)]), "timeline", "kept graph")
    assert [i["kind"] for i in one.legend if i["kind"] in ("line", "dash")] == ["dash"]  # word overlap only


def test_context_edges_are_pale_and_trails_strong(demo_trace):
    rv = V.run_view(demo_trace, "timeline")
    trail = rv.view.trail_edges
    assert trail
    for rec in rv.edges:
        assert rec["context"] == (rec["id"] not in trail)
        if rec["context"] and rec["kept"]:
            assert rec["opacity"] <= 0.28
    if any(r["context"] for r in rv.edges):
        assert any(i["kind"] == "context" for i in rv.legend)
    # a dense view without trails: every edge pale (hover brings a paper's own edges up)
    wide = V.run_view(demo_trace, "timeline", "kept graph")
    assert len(wide.edges) > V.DENSE_VIEW_EDGES and all(r["context"] for r in wide.edges)
    assert "every edge" in next(i["text"] for i in wide.legend if i["kind"] == "context")


def test_records_are_plain_text_with_unique_labels(hostile_trace):
    rv = V.run_view(hostile_trace, "timeline", "everything", show_pruned=True)
    labels = [n["label"] for n in rv.nodes]
    assert len(set(labels)) == len(labels)
    h = next(n for n in rv.nodes if n["id"] == "h001")
    assert h["tip"].startswith("<script>alert('xss')</script>")  # text: the script sets textContent
    assert sorted(n["pri"] for n in rv.nodes) == list(range(1, len(rv.nodes) + 1))
    assert {n["colour"] for n in rv.nodes} <= set(V.ROLE_COLOURS.values())
    assert json.loads(json.dumps(rv.as_dict())) == rv.as_dict()


# --- pointing ---------------------------------------------------------------------------------------------
def test_pointed_items_hand_checked():
    nodes = [("n", 0.0, 0.0, 10.0), ("m", 100.0, 0.0, 10.0)]
    edge = ("e", V.drawn_curve((0.0, 0.0), (100.0, 0.0), 0.0, 10.0, 10.0), 2.0)
    other = ("f", [(50.0, -50.0), (50.0, 50.0)], 2.0)
    assert V.pointed_items((3.0, 4.0), nodes, [edge]) == [(0.0, "node", "n")]  # inside the disc: the paper alone
    items = V.pointed_items((30.0, 5.0), nodes, [edge, other])
    assert items[0][1:] == ("edge", "e") and items[0][0] == pytest.approx(4.0, abs=0.01)  # 5 px − half width
    assert V.pointed_items((50.0, 3.0), nodes, [edge, other])[0][1:] == ("edge", "f")  # 2 px from f, 3 from e
    assert V.pointed_items((14.0, 0.0), nodes, [])[0] == pytest.approx((4.0, "node", "n"))  # 4 px off the rim
    assert V.pointed_items((30.0, 40.0), nodes, [edge]) == []  # nothing within 8 px
    mid = V.arc_midpoint(V.drawn_curve((0.0, 0.0), (100.0, 0.0), 0.0, 10.0, 30.0))
    assert mid == pytest.approx((40.0, 0.0), abs=0.3)  # halfway between the rims (10 and 70)
