"""The scorer-aware thresholds (issues 14 and 22): θ and τ for edges a model scored, θ_lexical and τ_lexical for
edges the offline word-overlap scorer decided, ✓ and Δ at each edge's one θ; the measured defaults;
the presets; old traces; the record of which θ, τ and rule decided each edge."""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
from pathlib import Path

import pytest

from crase_core import trace as trace_io
from crase_core.backends import offline_backend
from crase_core.errors import InputError
from crase_core.pipeline import Engine, run_query
from crase_core.ranking.pruning import edge_theta
from crase_core.records import EdgeMatrix, EdgeRecord, Paper, Seed, SeedOrigin
from crase_core.retrieval.neighbourhood import ExpandedGraph
from crase_core.runs import RunStore
from crase_core.settings.config import add_arguments, settings_from_args
from crase_core.settings.pipeline import PRESETS, PipelineSettings
from crase_core.stages.expansion import Expansion
from crase_core.stages.pruning import prune_graph
from crase_core.store.termstats import TermStats
from crase_core.testing.fake_model import fake_backend
from crase_core.trace import ROUND3_DEFAULTS
from crase_core.views.html_export import export_data

ROOT = Path(__file__).resolve().parents[1]
NOW = dt.datetime(2001, 6, 1, tzinfo=dt.UTC)
QUERY = "black hole microstates anti-de Sitter"
NEVER_PRUNES = ("kept: θ_lexical = 0 counts every citing claim, so Δ = 1 > τ_lexical 0 whatever the word-overlap "
                "support scores")


def _hand_graph() -> tuple[Expansion, dict[tuple[str, str], EdgeMatrix], list[Seed]]:
    """Seed s; x cites s (lexical), y cites s (model), z cites s (model, above θ). Years: s 2016, others 2018."""
    papers = {pid: Paper(pid, f"Paper {pid}", "", 2016 if pid == "s" else 2018) for pid in "sxyz"}
    graph = ExpandedGraph(nodes=["s", "x", "y", "z"], edges=[("x", "s"), ("y", "s"), ("z", "s")], hop={})
    matrices = {
        ("x", "s"): EdgeMatrix([[0.5, 0.1], [0.2, 0.3]], "lexical"),  # best 0.5 (≥ the calibrated 0.32), 0.3
        ("y", "s"): EdgeMatrix([[0.7], [0.74]], "model"),  # best 0.7, 0.74: below 0.75
        ("z", "s"): EdgeMatrix([[0.8], [0.1]], "model"),  # 1 of 2 rows ≥ 0.75: Δ = 1/2
    }
    seeds = [Seed("s", [SeedOrigin(0, "sq", 1, 1, 1)])]
    return Expansion(graph, papers, {"s"}, []), matrices, seeds


SCORERS = {("x", "s"): ("offline", "outside the model budget"), ("y", "s"): ("model", "priority #1"),
           ("z", "s"): ("model", "priority #2")}


def _pruned(settings: PipelineSettings) -> dict[str, EdgeRecord]:
    expansion, matrices, seeds = _hand_graph()
    pruning = prune_graph(expansion, matrices, seeds, settings, reference_year=2020, scorers=SCORERS)
    return {e.citing: e for e in pruning.edges}


def test_a_lexical_edge_below_theta_is_kept_with_theta_lexical_0_and_the_model_edge_is_pruned():
    edges = _pruned(PipelineSettings(theta=0.75, theta_lexical=0.0, tau=0.0, tau_lexical=0.0, beta=0.5))
    x, y, z = edges["x"], edges["y"], edges["z"]
    # lexical: every row's best (0.5, 0.3) ≥ 0 → s = [1, 1], Δ = 1, w = 1 · 4^−½ (s is 4 years old in 2020)
    assert (x.scorer, x.scorer_reason, x.theta) == ("offline", "outside the model budget", 0.0)
    assert x.supported == [True, True] and x.delta == 1.0 and x.kept and x.weight == pytest.approx(0.5)
    assert x.rule == "theta-zero"
    assert x.decision == NEVER_PRUNES
    # model: 0.7 and 0.74 < θ 0.75 → Δ = 0, pruned, and the decision names the model's θ
    assert (y.scorer, y.theta, y.supported, y.delta, y.kept) == ("model", 0.75, [False, False], 0.0, False)
    assert y.decision == ("pruned: no citing claim is entailed by a cited claim (entailment (model) < 0.75 for all 2 "
                          "citing claims); rule: Δ = 0 ≤ τ 0 at θ 0.75")
    assert z.delta == 0.5 and z.kept and z.weight == pytest.approx(0.25) and z.supported == [True, False]
    assert z.decision == ("kept: 1 of 2 citing claims is entailed by a cited claim (entailment (model) ≥ 0.75); "
                          "rule: Δ = 0.5 > τ 0 at θ 0.75")


def test_theta_lexical_075_prunes_the_lexical_edge_and_leaves_the_model_edges_alone():
    edges = _pruned(PipelineSettings(theta=0.75, theta_lexical=0.75, tau=0.0, tau_lexical=0.0, beta=0.5))
    x, y, z = edges["x"], edges["y"], edges["z"]
    assert (x.theta, x.supported, x.delta, x.kept, x.weight) == (0.75, [False, False], 0.0, False, 0.0)
    assert x.decision == ("pruned: no citing claim shares enough words with a cited claim (word-overlap support < "
                          "0.75 for all 2 citing claims); rule: Δ = 0 ≤ τ_lexical 0 at θ_lexical 0.75")
    assert (y.theta, y.delta, y.kept) == (0.75, 0.0, False)
    assert (z.theta, z.delta, z.kept) == (0.75, 0.5, True)


def test_each_threshold_moves_only_its_own_edges():
    # θ_lexical 0.4: the lexical edge's first row (0.5) counts, the second (0.3) not; Δ 0.5 > τ_lexical 0.35
    x = _pruned(PipelineSettings(theta=0.75, theta_lexical=0.4, tau_lexical=0.35))["x"]
    assert (x.theta, x.supported, x.delta, x.kept) == (0.4, [True, False], 0.5, True)
    assert x.decision.endswith("rule: Δ = 0.5 > τ_lexical 0.35 at θ_lexical 0.4")
    # τ_lexical 0.5 prunes it, τ 0.5 does not (it is the model's)
    assert not _pruned(PipelineSettings(theta_lexical=0.4, tau_lexical=0.5))["x"].kept
    assert _pruned(PipelineSettings(theta_lexical=0.4, tau=0.5))["x"].kept
    assert not _pruned(PipelineSettings(tau=0.5))["z"].kept and _pruned(PipelineSettings(tau_lexical=0.5))["z"].kept
    # θ 0.7 for the model: y's rows 0.7 and 0.74 are supported now; the lexical edge still at θ_lexical 0
    edges = _pruned(PipelineSettings(theta=0.7, theta_lexical=0.0))
    assert (edges["y"].theta, edges["y"].delta, edges["y"].kept) == (0.7, 1.0, True)
    assert (edges["x"].theta, edges["x"].delta) == (0.0, 1.0)


def test_an_edge_the_scorers_do_not_list_is_a_lexical_edge_and_a_failed_one_is_pruned_whatever_theta():
    expansion, matrices, seeds = _hand_graph()
    matrices[("x", "s")] = EdgeMatrix([], "lexical", error="paper x has no claims (no abstract)")
    pruning = prune_graph(expansion, matrices, seeds, PipelineSettings(theta_lexical=0.0), reference_year=2020,
                          scorers={})
    x = next(e for e in pruning.edges if e.citing == "x")
    assert (x.scorer, x.theta, x.kept, x.delta) == ("offline", 0.0, False, 0.0)
    assert x.decision == ("pruned: scoring failed (paper x has no claims (no abstract)); rule: an edge that cannot be "
                          "scored has Δ = 0 ≤ τ_lexical 0")
    assert (x.rule, x.supported) == ("scoring-failed", [])
    assert all(e.scorer == "offline" and e.theta == 0.0 for e in pruning.edges)


def test_edge_theta_resolves_by_scorer():
    s = PipelineSettings(theta=0.8, theta_lexical=0.3)
    assert edge_theta("model", s) == 0.8 and edge_theta("offline", s) == 0.3


def test_defaults_are_the_measured_configuration():
    s = PipelineSettings()
    assert (s.L, s.L_offline, s.theta, s.theta_lexical, s.query_seeds) == (5, 1, 0.75, 0.05, 5)
    assert (s.tau, s.tau_lexical, s.text_matches) == (0.0, 0.0, 3)
    assert (s.proximity_weight, s.proximity_window_weight, s.anchor_restart_weight) == (0.4, 0.2, 0.1)
    assert (s.text_rank_weight, s.text_rank_confidence, s.text_rank_specificity) == (0.6, 0.5, 0.5)
    assert (s.semantic_feedback_weight, s.semantic_feedback_scope) == (0.4, "fusion")
    assert (s.ranker, s.fusion, s.tau, s.preset) == ("salsa", "restart-rrf", 0.0, "default")
    assert set(PRESETS) == {"default", "paper"}  # round 4's hybrid preset is superseded by the default


def _cli(*argv: str) -> PipelineSettings:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return settings_from_args(p.parse_args(list(argv))).pipeline


def test_preset_paper_is_the_papers_configuration():
    paper = PipelineSettings(ranker="ppr", personalization="uniform", alpha=0.15, text_candidates=0, hops=1.5, m=10,
                             beta=0.5, theta=0.75, theta_lexical=0.15, tau=0.0, tau_lexical=0.0, fusion="none",
                             query_seeds=0,
                             L_offline=5, proximity_weight=0.0, proximity_window_weight=0.0,
                             anchor_restart_weight=0.0, text_rank_weight=0.4,
                             text_rank_confidence=0.0, text_rank_specificity=0.0, semantic_feedback_weight=0.0,
                             semantic_feedback_scope="all", text_matches=0, preset="paper")
    assert PipelineSettings.from_preset("paper") == paper
    assert _cli("--preset", "paper") == paper
    assert _cli("--theta-lexical", "0.5").theta_lexical == 0.5 and _cli().theta_lexical == 0.05
    assert _cli("--tau-lexical", "0.5").tau_lexical == 0.5 and _cli().tau_lexical == 0.0
    assert _cli("--text-matches", "0").text_matches == 0 and _cli().text_matches == 3
    with pytest.raises(InputError, match=r"--theta-lexical must be in \[0, 1\] \(got 1.5\)"):
        _cli("--theta-lexical", "1.5")


def test_a_run_records_the_theta_of_each_edge_offline_and_in_the_cascade(tiny_source):
    stats = TermStats.from_index(tiny_source.text_index)
    settings = PipelineSettings(m=3, L=2, theta=0.75, theta_lexical=0.0, llm_budget=4, llm_token_budget=0)
    offline = run_query(QUERY, Engine(tiny_source, offline_backend(stats), None), settings, now=NOW)
    assert offline.edges and all(e.scorer == "offline" and e.theta == 0.0 for e in offline.edges)
    assert all(e.kept for e in offline.edges if not e.error and e.matrix)  # θ_lexical 0 never prunes
    # the model backend within 4 calls: one edge by the model (at θ), every other by the fallback (at θ_lexical)
    backend, _ = fake_backend(stats)
    mixed = run_query(QUERY, Engine(tiny_source, backend, None), settings, now=NOW)
    model = [e for e in mixed.edges if e.scorer == "model"]
    lexical = [e for e in mixed.edges if e.scorer == "offline"]
    assert len(model) == 1 and lexical
    assert model[0].theta == 0.75 and model[0].decision.endswith("at θ 0.75")
    assert all(e.theta == 0.0 and (e.kept or e.error) for e in lexical)
    assert mixed.threshold(model[0]) == ("θ", 0.75) and mixed.threshold(lexical[0]) == ("θ_lexical", 0.0)
    # θ_lexical 0.75: the fallback's edges are judged like the model's again
    strict = run_query(QUERY, Engine(tiny_source, fake_backend(stats)[0], None),
                       settings.replace(theta_lexical=0.75), now=NOW)
    assert all(e.theta == 0.75 for e in strict.edges)
    assert any(not e.kept and not e.error for e in strict.edges if e.scorer == "offline")


def _as_before_calibrated_support(data: dict) -> dict:
    """``data`` as a trace written before issue 22 records its edges: ✓ was Eq. 3's s_i at the edge's θ, and
    no covered, support_theta or rule."""
    for e in data["edges"]:
        del e["rule"]
    data["trace_version"] = 1
    return data


def test_traces_from_before_the_split_load_with_their_one_theta(tiny_source, tmp_path):
    engine = Engine(tiny_source, offline_backend(TermStats.from_index(tiny_source.text_index)), None)
    # one θ for every edge, as then (θ_lexical = θ 0.75, τ_lexical = τ 0)
    t = run_query(QUERY, engine, PipelineSettings(**{**ROUND3_DEFAULTS, "theta_lexical": 0.75, "m": 3, "L": 2,
                                                     "L_offline": 2, "text_matches": 0}), now=NOW)
    data = _as_before_calibrated_support(json.loads(trace_io.dumps(t)))
    for name in ROUND3_DEFAULTS:  # what a trace written before issue 14 does not record
        del data["settings"][name]
    for e in data["edges"]:
        del e["theta"]
    old = trace_io.from_dict(data)
    assert old.settings == t.settings  # what the run had, not today's defaults
    decided = [(e.citing, e.cited, e.supported, e.delta, e.kept, e.weight, e.decision, e.theta) for e in t.edges]
    assert [(e.citing, e.cited, e.supported, e.delta, e.kept, e.weight, e.decision, e.theta)
            for e in old.edges] == decided
    # its ✓ are what it recorded (Eq. 3 at its θ), and the views say at which θ
    assert all(e.rule == "" and old.threshold(e) == ("θ_lexical", 0.75) for e in old.edges)
    assert {k: getattr(old.settings, k) for k in ROUND3_DEFAULTS} == {**ROUND3_DEFAULTS, "theta_lexical": 0.75,
                                                                      "L_offline": 2}
    # a run saved before the split opens from the saved-runs folder the same way
    store = RunStore(tmp_path / "runs")
    (tmp_path / "runs" / "20010601-old.json").write_text(json.dumps(data), encoding="utf-8")
    assert store.load("20010601-old").settings == t.settings
    assert [r.error for r in store.list()] == [""]
    # an old trace run at θ 0.6 was judged at 0.6 for every edge
    data["settings"]["theta"] = 0.6
    assert trace_io.from_dict(data).settings.theta_lexical == 0.6
    assert all(e.theta == 0.6 for e in trace_io.from_dict(data).edges)
    # a hand-built record without θ falls back to the settings by scorer
    assert t.threshold(EdgeRecord("a", "b", scorer="model")) == ("θ", 0.75)
    assert t.threshold(EdgeRecord("a", "b")) == ("θ_lexical", 0.75)
    # an old trace run at τ 0.4 pruned every edge at 0.4
    data["settings"]["tau"] = 0.4
    assert trace_io.from_dict(data).settings.tau_lexical == 0.4


def test_the_html_export_carries_each_edges_threshold(tiny_source):
    engine = Engine(tiny_source, offline_backend(TermStats.from_index(tiny_source.text_index)), None)
    t = run_query(QUERY, engine, PipelineSettings(m=3, L_offline=2, theta_lexical=0.0), now=NOW)
    data = export_data(t)
    assert (data["theta"], data["theta_lexical"]) == (0.75, 0.0)
    assert data["edges"] and all((e["scorer"], e["theta_name"], e["theta"]) == ("offline", "θ_lexical", 0.0)
                                 for e in data["edges"])
    assert all(e["score_name"] == "word-overlap support" and "support_theta" not in e for e in data["edges"])
    assert [e["supported"] for e in data["edges"]] == [list(x.supported) for x in t.edges]
    # one story: the ✓ marks the page shows are the claims Δ counted
    assert all(e["delta"] == pytest.approx(sum(e["supported"]) / len(e["supported"])) for e in data["edges"]
               if e["supported"])


def _eval_dev():
    spec = importlib.util.spec_from_file_location("eval_dev", ROOT / "benchmarks" / "eval_dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_dev_run_still_runs_what_it_ran():
    ev = _eval_dev()
    runs = {name: ev.settings_of(run.overrides) for name, run in ev.RUNS.items()}
    assert runs["crase"] == PipelineSettings()
    assert runs["preset-hybrid"].L_offline == 1 and runs["preset-hybrid"].proximity_weight == 0.0
    assert runs["paper"] == PipelineSettings.from_preset("paper")
    round3 = PipelineSettings(**ROUND3_DEFAULTS, text_matches=0)  # and no top text match kept without an edge
    assert runs["round3-default"] == round3
    assert runs["no-pruning"] == round3.replace(theta=0.0, theta_lexical=0.0)
    assert runs["hybrid-keep-planning"] == round3.replace(theta=0.0, theta_lexical=0.0, query_seeds=5,
                                                          text_rank_weight=0.5, text_rank_confidence=0.35)
    # round 6's default (before issue 22) kept every word-overlap edge; its ablations and round 5's run on it
    dense_off = {"dense_seed_weight": 0.0, "dense_restart_weight": 0.0, "dense_fusion_weight": 0.0}  # before issue 30
    round6 = PipelineSettings(theta_lexical=0.0, tau_lexical=0.0, text_matches=0, **dense_off)
    assert runs["round6-default"] == round6 == runs["semantic-fusion-0.4"]  # round 6's default is that run
    assert runs["round6-pruning"] == round6.replace(theta_lexical=0.15)
    round5 = round6.replace(semantic_feedback_weight=0.0, semantic_feedback_scope="all")
    assert runs["round5-default"] == round5
    assert runs["round5-pruning"] == round5.replace(theta_lexical=0.15)
    assert all(runs[n].semantic_feedback_weight == 0.0 for n in ev.RUNS if n.startswith("round5"))
    assert all((runs[n].theta_lexical, runs[n].tau_lexical) != (0.05, 0.35) for n in ev.RUNS
               if n.startswith(("round5", "round6", "semantic")))
    # issue 22's default (before issue 30) pruned at τ_lexical 0.35 and kept no text match without an edge
    assert runs["issue22-default"] == PipelineSettings(tau_lexical=0.35, text_matches=0, **dense_off)
    # issue 30's runs of the question embedded are the default with each dense weight set (and all of them 0)
    dense_runs = [n for n in ev.RUNS if n == "no-dense" or n.startswith("dense-")]
    assert runs["no-dense"] == PipelineSettings(**dense_off) and len(dense_runs) >= 5
    assert all(runs[n].text_matches == 0 for n in ev.RUNS if n not in ("crase", "text-matches-10", *dense_runs))
    assert all(runs[n].dense_fusion_weight == 0.0 for n in ev.RUNS if n not in ("crase", "text-matches-10")
               and not n.startswith("dense-fusion") and n not in ("paper",))
    # every run measured before the switch judged every edge at one bar — θ_lexical 0.15 is the word share the
    # logistic scale of that time read as θ 0.75 (0.17 as 0.85) — and got the round-3 values it does not name
    same_bar = {0.0: 0.0, 0.75: 0.15, 0.85: 0.17}
    for name, run in ev.RUNS.items():
        if name in ("crase", "paper", "issue22-default", "no-text-matches", "text-matches-10", "no-dense") or \
                name.startswith(("round5", "round6", "semantic", "prune", "dense-")):
            continue
        s = runs[name]
        assert s.theta_lexical == same_bar[s.theta] and s.tau_lexical == s.tau, name
        for knob, value in ROUND3_DEFAULTS.items():
            if knob not in run.overrides:
                assert getattr(s, knob) == value, (name, knob)


def test_lexical_theta_0_is_theta_0_for_every_edge_with_the_offline_backend(hepth_engine):
    """θ_lexical 0 with the offline backend (every edge lexical) is θ 0 for every edge: round 6's default ranks as
    it does with θ 0 too, on the real corpus; and the default does prune there (the test can fail)."""
    query = json.loads((ROOT / "assets" / "ui" / "demo_queries.json").read_text(encoding="utf-8"))[0]["query"]
    round6 = PipelineSettings(theta_lexical=0.0, tau_lexical=0.0)
    before = run_query(query, hepth_engine, round6, now=NOW)
    same = run_query(query, hepth_engine, round6.replace(theta=0.0), now=NOW)
    assert len(before.results) == 50
    assert [r.paper_id for r in before.results] == [r.paper_id for r in same.results]
    assert [(e.delta, e.weight, e.kept) for e in before.edges] == [(e.delta, e.weight, e.kept) for e in same.edges]
    pruned = run_query(query, hepth_engine, PipelineSettings(), now=NOW)
    assert not all(e.kept for e in pruned.edges)


def _as_version_2(data: dict) -> dict:
    """``data`` as issue 22 wrote it (trace version 2): ✓ at the word-overlap scorer's calibrated 0.32
    (``supported``, ``support_theta``) beside Eq. 3 at the edge's θ (``covered``, what Δ counted), no
    ``text_match`` on the nodes and no ``text_matches`` knob."""
    for e in data["edges"]:
        e["covered"] = e["supported"]
        e["supported"] = [bool(row) and max(row) >= 0.32 for row in e["matrix"]]
        e["support_theta"] = 0.32
    for n in data["nodes"]:
        del n["text_match"]
    del data["settings"]["text_matches"]
    data["trace_version"] = 2
    return data


def test_a_version_2_trace_tells_one_story_per_edge(tiny_source):
    """Migration 2 → 3: each edge's ✓ become the claims its Δ counted, its text candidates stay kept by their
    text match, and the run is read as one that kept no top text match without an edge (it kept none then)."""
    engine = Engine(tiny_source, offline_backend(TermStats.from_index(tiny_source.text_index)), None)
    t = run_query(QUERY, engine, PipelineSettings(m=3, L_offline=2, text_matches=0), now=NOW)
    data = _as_version_2(json.loads(trace_io.dumps(t)))
    assert any(e["supported"] != e["covered"] for e in data["edges"])  # the two stories of version 2
    old = trace_io.from_dict(data)
    assert old.trace_version == 3 and old.settings == t.settings
    assert [e.supported for e in old.edges] == [e.supported for e in t.edges]
    assert all(e.delta == sum(e.supported) / len(e.supported) for e in old.edges if e.supported)
    assert [n.text_match for n in old.nodes] == [n.text_match for n in t.nodes]
    assert {n.paper.id for n in old.nodes if n.text_match} == {n.paper.id for n in t.nodes if n.role == "text"}
    assert not hasattr(old.edges[0], "covered") and not hasattr(old.edges[0], "support_theta")
