"""One end-to-end run of the paper's configuration on a hand-built corpus, checked against a hand-built answer.

The paper's configuration: restart uniform over the kept seeds, α = 0.15, no text candidates, θ = θ_lexical =
0.75, no question seeds (τ = 0, β = 0.5, 1.5 hops: the defaults), i.e. ``--preset paper``; the run below uses the preset itself, and
``crase query --preset paper`` is checked to resolve to the same settings.

Corpus (tests/tiny_corpus.py PRESET_*): seeds S1 = 0101001 (2001) and S2 = 0102001 (2001), found by the
fixed sub-queries "quasinormal" and "bootstrap"; A = 9901001 (1999), B = 9801001 (1998), C = 0201001 (2002),
X = 9601001 (1996), D = 9701001 (1997). Citations: S1→A, S1→B, S2→B, S2→S1, C→S2, S2→X, A→B, A→D.
Ages are measured from 2003 (the run's `now`): A 4, B 5, S1 2, X 7 years.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pytest
from stub_backend import scripted_backend
from tiny_corpus import PRESET_CITATIONS, PRESET_PAPERS, write_corpus

from crase_core.pipeline import Engine, run_query
from crase_core.settings.pipeline import PipelineSettings
from crase_core.sources.local import LocalSource

PAPER = PipelineSettings.from_preset("paper")
NOW = dt.datetime(2003, 6, 1, tzinfo=dt.UTC)
S1, S2, A, B, C, X, D = "0101001", "0102001", "9901001", "9801001", "0201001", "9601001", "9701001"

# Scripted entailment matrices (rows: citing claims, columns: cited claims; S1 and S2 have 2 claims, others 1).
# Δ = share of citing claims with some entry ≥ θ = 0.75 (Eq. 3–4).
MATRICES = {
    (S1, A): [[0.9], [0.2]],  # 1 of 2 supported → Δ = 0.5
    (S1, B): [[0.8], [0.8]],  # Δ = 1
    (S2, B): [[0.75], [0.1]],  # 0.75 ≥ θ counts: Δ = 0.5
    (S2, S1): [[0.1, 0.95], [0.8, 0.2]],  # Δ = 1
    (C, S2): [[0.3, 0.95]],  # Δ = 1
    (S2, X): [[0.74], [0.5]],  # nothing reaches θ: Δ = 0 → pruned, X isolated
    (A, B): [[0.6]],  # Δ = 0 → pruned
}
DELTA = {(S1, A): 0.5, (S1, B): 1.0, (S2, B): 0.5, (S2, S1): 1.0, (C, S2): 1.0, (S2, X): 0.0, (A, B): 0.0}
AGE = {A: 4.0, B: 5.0, S1: 2.0, S2: 2.0, X: 7.0}
# w = Δ · age^−½ (Eq. 5) for the kept edges
WEIGHT = {(S1, A): 0.5 * 4 ** -0.5, (S1, B): 1.0 * 5 ** -0.5, (S2, B): 0.5 * 5 ** -0.5,
          (S2, S1): 1.0 * 2 ** -0.5, (C, S2): 1.0 * 2 ** -0.5}


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    source = LocalSource.open(write_corpus(tmp_path_factory.mktemp("preset") / "preset", PRESET_PAPERS,
                                           PRESET_CITATIONS))
    engine = Engine(source, scripted_backend(["quasinormal", "bootstrap"], MATRICES, n_claims={S1: 2, S2: 2}), None)
    return run_query("quasinormal modes and the conformal bootstrap", engine, PAPER, now=NOW)


def test_graph_is_the_one_and_a_half_hop_neighbourhood(trace):
    assert [s.paper_id for s in trace.seeds] == [S1, S2]
    # seeds first, then the rest by id; D (a reference of A only) is two steps away and stays out
    assert [n.paper.id for n in trace.nodes] == [S1, S2, C, X, B, A]
    assert {(e.citing, e.cited) for e in trace.edges} == set(DELTA)
    assert trace.budget.total == 1 + 6 + 7
    assert trace.query_hits == [] and trace.counters.search_calls == 2  # no full-query search in this setup


def test_deltas_ages_weights_and_decisions(trace):
    for e in trace.edges:
        key = (e.citing, e.cited)
        assert e.delta == DELTA[key], key
        assert e.age_years == AGE[e.cited]
        assert e.kept == (key in WEIGHT)
        assert e.weight == pytest.approx(WEIGHT.get(key, 0.0), abs=1e-15)
    # the scripted scorer stands for a model: every edge is judged at θ = 0.75 and says so
    assert all((e.scorer, e.theta) == ("model", 0.75) for e in trace.edges)
    assert trace.edge(S2, B).decision == ("kept: 1 of 2 citing claims is entailed by a cited claim (entailment "
                                          "(model) ≥ 0.75); rule: Δ = 0.5 > τ 0 at θ 0.75")
    assert trace.edge(S2, X).decision == ("pruned: no citing claim is entailed by a cited claim (entailment (model) "
                                          "< 0.75 for all 2 citing claims); rule: Δ = 0 ≤ τ 0 at θ 0.75")
    assert trace.edge(A, B).decision == ("pruned: no citing claim is entailed by a cited claim (entailment (model) "
                                          "< 0.75 for all 1 citing claims); rule: Δ = 0 ≤ τ 0 at θ 0.75")
    # a model's ✓ is its Eq. 3 at θ: the claims Δ counts
    assert all(e.theta == 0.75 and e.delta == sum(e.supported) / len(e.supported) for e in trace.edges if e.supported)


def test_pruning_keeps_every_paper_with_a_kept_edge(trace):
    assert {n.paper.id for n in trace.nodes if n.kept} == {S1, S2, A, B, C}
    assert trace.node(X).prune_reason == "isolated: all 1 of its edges were pruned"
    assert [(s.paper_id, s.fate, s.fate_reason) for s in trace.seeds] == [
        (S1, "kept", "kept: 3 of 3 edges kept"), (S2, "kept", "kept: 3 of 4 edges kept")]


def test_ppr_scores_match_a_dense_solve_of_eq_7(trace):
    # Restart p: 1/2 on each kept seed. Row-normalised weights; A and B have no kept out-edge (dangling:
    # their mass restarts at p). π = α (I − (1−α)(Wᵀ + p dᵀ))⁻¹ p, with its own matrix built here.
    nodes = [S1, S2, A, B, C]
    out = {u: sum(w for (a, _), w in WEIGHT.items() if a == u) for u in nodes}
    W = np.zeros((5, 5))
    for (u, v), w in WEIGHT.items():
        W[nodes.index(u), nodes.index(v)] = w / out[u]
    p = np.array([0.5, 0.5, 0.0, 0.0, 0.0])
    dangling = np.array([out[u] == 0 for u in nodes], dtype=float)
    pi = np.linalg.solve(np.eye(5) - 0.85 * (W.T + np.outer(p, dangling)), 0.15 * p)
    expected = dict(zip(nodes, pi.tolist(), strict=True))
    assert trace.ranking.scores == pytest.approx(expected, abs=1e-8)
    # by hand: π(C) = 0 (nobody walks to it); π(S2) = 0.425 d + 0.075, d = π(A) + π(B);
    # π(S1) = 0.85 (0.7597 π(S2) + d/2) + 0.075; π(A) = 0.85 · 0.3586 π(S1); π(B) = 0.85 (0.6414 π(S1) + 0.2403 π(S2))
    assert [round(expected[n], 4) for n in nodes] == [0.3873, 0.2354, 0.1181, 0.2592, 0.0]
    assert trace.ranking.converged


def test_ranked_list_and_why_each_paper_is_there(trace):
    # the cited B outranks the seed S2; C (it only cites a seed) is reached by no walk and comes last
    assert [r.paper_id for r in trace.results] == [S1, B, S2, A, C]
    why = {r.paper_id: r.reason for r in trace.results}
    assert why[S1] == "seed from sub-query 1 “quasinormal” (relevance #1, recency #1)"
    assert why[S2] == "seed from sub-query 2 “bootstrap” (relevance #1, recency #1)"
    # B: straight from S1 (P = 0.64) beats S2 → B (0.24) and S2 → S1 → B (0.76 · 0.64 = 0.49)
    assert why[B] == "cited by seed “Quasinormal modes of rotating black holes” (Δ 1.00)"
    assert why[A] == "cited by seed “Quasinormal modes of rotating black holes” (Δ 0.50)"
    assert why[C] == "cites seed “Conformal bootstrap bounds on black hole spectra” (Δ 1.00)"
    assert [r.seed for r in trace.results] == [S1, S1, S2, S1, S2]
    assert [r.rank for r in trace.results] == [1, 2, 3, 4, 5]


def test_the_paper_preset_is_the_papers_configuration_and_what_the_cli_resolves():
    from crase_core.cli.main import build_parser
    from crase_core.settings.config import settings_from_args

    assert (PAPER.personalization, PAPER.alpha, PAPER.text_candidates, PAPER.ranker) == ("uniform", 0.15, 0, "ppr")
    assert (PAPER.theta, PAPER.tau, PAPER.beta, PAPER.hops, PAPER.m) == (0.75, 0.0, 0.5, 1.5, 10)
    # one θ for every edge whoever scored it, and no seeds beyond the sub-queries' (the paper has neither knob)
    assert (PAPER.theta_lexical, PAPER.tau_lexical, PAPER.query_seeds, PAPER.fusion) == (0.15, 0.0, 0, "none")
    args = build_parser().parse_args(["query", "x", "--preset", "paper"])
    assert settings_from_args(args).pipeline == PAPER
    args = build_parser().parse_args(["query", "x", "--preset", "paper", "--alpha", "0.2"])
    assert settings_from_args(args).pipeline == PAPER.replace(alpha=0.2)  # an explicit flag wins over the preset


def test_the_paper_presets_cost_offline_is_what_the_dev_runs_measured(capsys):
    """The preset says what it is for and what it costs offline (issue 32) in --help, the app's warning and the
    README; the numbers it quotes are the dev runs' (benchmarks/results/<set>/{paper,crase}/run.json.gz)."""
    from crase_core.cli.main import build_parser
    from crase_core.evaluation.run_file import read_run
    from crase_core.settings.pipeline import PRESET_PURPOSE

    root = Path(__file__).resolve().parents[1]
    words = PRESET_PURPOSE["paper"]
    assert "model endpoint" in words
    summary = {(bench, run): read_run(root / "benchmarks" / "results" / bench / run / "run.json.gz").summary
               for bench in ("hepth_litsearch_dev", "hepth_refs_dev") for run in ("paper", "crase")}
    for bench, label in (("hepth_litsearch_dev", "questions"), ("hepth_refs_dev", "citation lists")):
        p, d = summary[bench, "paper"], summary[bench, "crase"]
        assert (f"{label} Recall@5 {p['recall@5']:.3f} vs {d['recall@5']:.3f}, "
                f"MAP@50 {p['map@50']:.3f} vs {d['map@50']:.3f}") in words
    with pytest.raises(SystemExit):
        build_parser().parse_args(["query", "--help"])
    assert "meant for a model endpoint" in " ".join(capsys.readouterr().out.split())
    readme = " ".join((root / "README.md").read_text(encoding="utf-8").split())
    assert "Recall@5 0.011" in readme and "for a model endpoint" in readme
