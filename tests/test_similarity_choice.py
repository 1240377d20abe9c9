"""The claim-similarity scorer as a choice of the pipeline (issue 30 item 4): ``support_scorer`` similarity scores
the offline backend's edges by claim similarity, each edge read at θ_similarity and pruned at τ_similarity, its
matrices cached apart from word overlap's, and every view naming it "claim similarity (MiniLM)", never entailment."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from crase_core import trace as trace_io
from crase_core.backends import offline_backend, with_support_scorer
from crase_core.cache import ResultCache
from crase_core.cli.main import main
from crase_core.component_cache import ComponentCache
from crase_core.evidence.similarity import CLAIM_SIMILARITY_THETA, ClaimSimilarityScorer
from crase_core.records import Claim, ClaimSet, Paper, Seed, SeedOrigin
from crase_core.retrieval.neighbourhood import ExpandedGraph
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.expansion import Expansion
from crase_core.stages.pruning import prune_graph
from crase_core.stages.scoring import legacy_scored
from crase_core.testing.fake_model import fake_backend
from crase_core.views.graph_views import graph_view, legend_items
from crase_core.views.html_export import export_data, to_html

#: 2-d claim vectors (normalised by the encoder): s's claims are the axes
VECTORS = {"s1": [1.0, 0.0], "s2": [0.0, 1.0],
           "x1": [1.0, 0.0],  # cos 1 with s1
           "x2": [1.0, 1.0],  # cos 1/√2 ≈ 0.7071 with both
           "x3": [-1.0, 0.0],  # cos −1 with s1 → 0, 0 with s2
           "y1": [-1.0, 0.5]}  # cos 0.5/√1.25 ≈ 0.4472 with s2, negative with s1 → 0


class TableEncoder:
    """A deterministic encoder: each claim text's vector from :data:`VECTORS`, normalised."""

    model_id = "table"

    def encode(self, texts):
        return np.stack([np.asarray(VECTORS[t], dtype=np.float32) / np.linalg.norm(VECTORS[t]) for t in texts])


def _claims(pid: str, *texts: str) -> ClaimSet:
    return ClaimSet(pid, [Claim(f"c{i + 1}", "EMPIRICAL", t, t) for i, t in enumerate(texts)], "hand")


def _graph() -> tuple[Expansion, dict[str, ClaimSet], list[Seed]]:
    """Seed s (2016); x and y (2018) cite it."""
    papers = {pid: Paper(pid, f"Paper {pid}", "", 2016 if pid == "s" else 2018) for pid in "sxy"}
    graph = ExpandedGraph(nodes=["s", "x", "y"], edges=[("x", "s"), ("y", "s")], hop={})
    claims = {"s": _claims("s", "s1", "s2"), "x": _claims("x", "x1", "x2", "x3"), "y": _claims("y", "y1")}
    return Expansion(graph, papers, {"s"}, []), claims, [Seed("s", [SeedOrigin(0, "sq", 1, 1, 1)])]


def _similarity_backend():
    backend, warning = with_support_scorer(offline_backend(), "similarity",
                                           make=lambda: ClaimSimilarityScorer(TableEncoder()))
    assert warning is None
    return backend


def _run(backend, settings: PipelineSettings, cache: ResultCache | None = None):
    expansion, claims, seeds = _graph()
    components = ComponentCache(backend, cache)
    edges = expansion.graph.edges
    matrices = components.cached_matrices(claims, edges)
    todo = [e for e in edges if e not in matrices]
    matrices.update(zip(todo, components.score(claims, todo), strict=True) if todo else [])
    scored = legacy_scored(claims, matrices, edges, backend.name, backend.support)
    pruning = prune_graph(expansion, scored.matrices, seeds, settings, reference_year=2020, scorers=scored.scorers)
    return {e.citing: e for e in pruning.edges}, pruning, components


def test_the_similarity_backend_is_the_offline_one_with_the_claim_similarity_scorer():
    backend = _similarity_backend()
    assert backend.name == "offline" and backend.support == "similarity"
    assert backend.describe()["scorer"] == "claim-similarity/v1(table)"
    assert backend.extractor.identity == offline_backend().extractor.identity  # only the scorer changes


def test_hand_checked_delta_and_prune_decisions_at_theta_similarity():
    edges, pruning, _ = _run(_similarity_backend(), PipelineSettings(support_scorer="similarity", beta=0.5))
    x, y = edges["x"], edges["y"]
    assert x.matrix == [[1.0, 0.0], [0.7071, 0.7071], [0.0, 0.0]]
    # x: row maxima 1, 0.7071, 0 at θ_similarity 0.6 → ✓ ✓ ✗, Δ = 2/3 > τ_similarity 0 → kept, w = 2/3 · 4^−½
    assert (x.scorer, x.theta, x.supported) == ("similarity", 0.6, [True, True, False])
    assert x.delta == pytest.approx(2 / 3) and x.kept and x.weight == pytest.approx(1 / 3)
    assert x.decision == ("kept: 2 of 3 citing claims are close in meaning to a cited claim (claim similarity "
                          "(MiniLM) ≥ 0.6); rule: Δ = 0.667 > τ_similarity 0 at θ_similarity 0.6")
    # y: its one claim reaches 0.4472 < 0.6 → Δ 0 ≤ τ_similarity 0 → pruned
    assert y.matrix == [[0.0, 0.4472]]
    assert (y.scorer, y.supported, y.delta, y.kept, y.weight) == ("similarity", [False], 0.0, False, 0.0)
    assert y.decision == ("pruned: no citing claim is close in meaning to a cited claim (claim similarity (MiniLM) < "
                          "0.6 for all 1 citing claims); rule: Δ = 0 ≤ τ_similarity 0 at θ_similarity 0.6")
    assert "entailment" not in x.decision + y.decision
    assert pruning.alive == {"s", "x"}


def test_its_own_theta_and_tau_decide_not_the_word_overlap_ones():
    # θ_lexical / τ_lexical do nothing to similarity edges
    edges, _, _ = _run(_similarity_backend(), PipelineSettings(support_scorer="similarity", theta_lexical=0.0,
                                                               tau_lexical=0.9))
    assert [edges["x"].kept, edges["y"].kept] == [True, False]
    # θ_similarity 0.4 lets y's 0.4472 count: Δ 1; τ_similarity 0.7 then prunes x (Δ 2/3 ≤ 0.7)
    edges, _, _ = _run(_similarity_backend(), PipelineSettings(support_scorer="similarity", theta_similarity=0.4,
                                                               tau_similarity=0.7))
    assert (edges["y"].delta, edges["y"].kept) == (1.0, True)
    assert (edges["x"].delta, edges["x"].kept) == (pytest.approx(2 / 3), False)
    assert edges["x"].decision.endswith("rule: Δ = 0.667 ≤ τ_similarity 0.7 at θ_similarity 0.4")


def test_word_overlap_and_similarity_matrices_never_mix_in_the_cache(tmp_path):
    cache = ResultCache(tmp_path / "cache")
    sim, _, c1 = _run(_similarity_backend(), PipelineSettings(support_scorer="similarity"), cache)
    assert c1.counters.cache_misses == 2
    words, _, c2 = _run(offline_backend(), PipelineSettings(), cache)  # same claims, same cache
    assert c2.counters.cache_hits == 0 and c2.counters.cache_misses == 2  # similarity's matrices are not words'
    assert words["x"].scorer == "offline" and words["x"].matrix != sim["x"].matrix
    again, _, c3 = _run(_similarity_backend(), PipelineSettings(support_scorer="similarity"), cache)
    assert c3.counters.cache_hits == 2 and again["x"].matrix == sim["x"].matrix


def test_word_overlap_and_model_backends_are_left_alone():
    plain = offline_backend()
    assert with_support_scorer(plain, "word-overlap") == (plain, None)
    model, _ = fake_backend(None, cascade=True)  # a model backend with its offline cascade
    assert with_support_scorer(model, "similarity", make=lambda: ClaimSimilarityScorer(TableEncoder())) == (model, None)


def test_theta_similarity_default_is_the_scifact_calibrated_one():
    assert PipelineSettings().theta_similarity == CLAIM_SIMILARITY_THETA
    assert PipelineSettings().support_scorer == "word-overlap"


# ---- end to end, with the real on-device model --------------------------------------------------------------
PAPERS = [
    {"id": "p1", "title": "Tachyon condensation on unstable D-branes",
     "abstract": "The open string tachyon condenses and the unstable D-brane decays into closed strings.",
     "year": 2002},
    {"id": "p2", "title": "Decay of unstable branes",
     "abstract": "Tachyon condensation describes the decay of unstable D-branes in string theory.", "year": 2000},
    {"id": "p3", "title": "Glueballs on the lattice",
     "abstract": "We measure the glueball spectrum on anisotropic lattices.", "year": 1999},
    {"id": "p4", "title": "Rolling tachyons",
     "abstract": "A rolling tachyon on an unstable brane produces pressureless tachyon matter.", "year": 2001},
]
CITATIONS = [("p1", "p2"), ("p1", "p3"), ("p4", "p2"), ("p1", "p4")]


@pytest.fixture
def brane_corpus(tmp_path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "papers.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PAPERS), encoding="utf-8")
    (src / "citations.tsv").write_text("".join(f"{u}\t{v}\n" for u, v in CITATIONS), encoding="utf-8")
    assert main(["corpus", "import", str(src), str(tmp_path / "corpus"), "--format", "jsonl"]) == 0
    return tmp_path / "corpus"


def test_a_similarity_run_names_its_scorer_in_the_trace_cli_and_export(brane_corpus, tmp_path, capsys):
    run = tmp_path / "run.json"
    assert main(["query", "tachyon condensation unstable D-brane", "--corpus", str(brane_corpus),
                 "--support-scorer", "similarity", "--json", str(run)]) == 0
    out = capsys.readouterr().out
    assert "claim similarity unavailable" not in out
    trace = trace_io.load(run)
    assert trace.edges and {e.scorer for e in trace.edges} == {"similarity"}
    assert trace.backend["scorer"].startswith("claim-similarity/v1(all-MiniLM-L6-v2/onnx-int8@")
    assert "claim-similarity/v1" in out  # the CLI's backend line
    assert "claim-similarity matrices (|E|)" in out and "offline backend: the on-device MiniLM" in out  # its budget
    assert all(e.theta == CLAIM_SIMILARITY_THETA for e in trace.edges)
    # p1 → p2: p1's tachyon claim and p2's are paraphrases; p1 → p3 (glueballs) shares no meaning
    assert trace.edge("p1", "p2").kept and not trace.edge("p1", "p3").kept
    assert main(["show", str(run), "--edges"]) == 0
    shown = capsys.readouterr().out
    assert "[claim similarity (MiniLM)]" in shown and "θ_similarity 0.6" in shown
    assert "entailment" not in "\n".join(line for line in shown.splitlines() if "claim similarity" in line)
    data = export_data(trace)
    assert {e["score_name"] for e in data["edges"]} == {"claim similarity (MiniLM)"}
    assert {e["theta_name"] for e in data["edges"]} == {"θ_similarity"}
    assert data["similarity"].startswith("θ_similarity = 0.6, τ_similarity = 0 (claim-similarity edges, MiniLM")
    assert "D.similarity" in to_html(trace)
    legend = [i["text"] for i in legend_items(trace, graph_view(trace, "everything", show_pruned=True))]
    assert "dashed: claim similarity (MiniLM, not entailment)" in legend
    assert not any("word-overlap" in t for t in legend)


def test_the_heat_map_of_a_similarity_edge_is_titled_claim_similarity_not_entailment():
    from crase_app.shared import matrix_chart
    from crase_core.records import EdgeRecord

    edge = EdgeRecord(citing="a", cited="b", kept=True, delta=0.5, weight=0.5, matrix=[[0.71, 0.2], [0.3, 0.1]],
                      supported=[True, False], scorer="similarity", theta=0.6)
    spec = json.dumps(matrix_chart(edge, 0.6, [("c1", "one"), ("c2", "two")], [("c1", "x"), ("c2", "y")]).to_dict(),
                      ensure_ascii=False)
    assert "claim similarity (MiniLM)" in spec and "entailment" not in spec
