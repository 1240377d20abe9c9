"""The default's pruning of word-overlap edges on the real corpus (issue 22): a typical question gets real prune
decisions, and only the claims the word-overlap scorer supports at its own calibrated threshold are ticked."""

from __future__ import annotations

import datetime as dt

import pytest

from crase_core import trace as trace_io
from crase_core.cli.main import main as cli_main
from crase_core.evidence.entailment import WORD_OVERLAP_SUPPORT_THETA
from crase_core.pipeline import run_query
from crase_core.ranking.affinity import RULE_KEPT, RULE_PRUNED
from crase_core.settings.pipeline import PipelineSettings

QUERY = "tachyon condensation on unstable D-branes"
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def tachyon(hepth_engine):
    return run_query(QUERY, hepth_engine, PipelineSettings(), now=NOW)


def test_the_default_prunes_some_edges_of_a_typical_question(tachyon):
    edges = tachyon.edges
    pruned = [e for e in edges if not e.kept]
    assert len(edges) > 1000
    assert 0.01 <= len(pruned) / len(edges) < 0.5  # a few percent: real decisions, not a gutted graph
    # every edge was decided by the word-overlap rule, and its record says so in words and numbers
    assert {e.rule for e in edges} == {RULE_KEPT, RULE_PRUNED}
    for e in edges:
        assert (e.scorer, e.theta, e.support_theta) == ("offline", 0.05, WORD_OVERLAP_SUPPORT_THETA)
        assert e.delta == pytest.approx(sum(e.covered) / len(e.covered))
        assert e.kept == (e.delta > 0.35)
        assert e.weight == (pytest.approx(e.delta * e.age_factor) if e.kept else 0.0)
        assert "entailment" not in e.decision and e.decision.endswith("at θ_lexical 0.05")
        assert e.decision.startswith("kept: " if e.kept else "pruned: ")
        assert "τ_lexical 0.35" in e.decision
    # the pruned are the edges where at most one citing claim (of 3 to 5) shares words with the cited paper
    assert all(sum(e.covered) <= 1 for e in pruned if len(e.covered) >= 3)


def test_only_claims_supported_at_the_calibrated_threshold_are_ticked(tachyon):
    rows = [(s, max(r)) for e in tachyon.edges for s, r in zip(e.supported, e.matrix, strict=True)]
    assert len(rows) == sum(len(e.supported) for e in tachyon.edges) > 1000
    assert all(s == (best >= WORD_OVERLAP_SUPPORT_THETA) for s, best in rows)
    share = sum(s for s, _ in rows) / len(rows)
    assert 0.0 < share < 0.95
    # a claim can count toward Δ (θ_lexical 0.05) without being ticked supported (0.32), never the reverse
    assert any(c and not s for e in tachyon.edges for c, s in zip(e.covered, e.supported, strict=True))
    assert not any(s and not c for e in tachyon.edges for c, s in zip(e.covered, e.supported, strict=True))


def test_show_edges_names_the_scorer_delta_support_and_rule(tachyon, tmp_path, capsys):
    path = trace_io.save(tachyon, tmp_path / "t.json")
    assert cli_main(["show", str(path), "--edges", "--k", "1"]) == 0
    out = capsys.readouterr().out
    e = next(x for x in tachyon.edges if not x.kept)
    line = (f"  {e.citing} → {e.cited}: [word-overlap support] Δ {e.delta:.3g}, {sum(e.supported)} of "
            f"{len(e.supported)} supported (≥ 0.32); {e.decision}")
    assert line in out.splitlines()
    assert sum(" → " in x and "[word-overlap support]" in x for x in out.splitlines()) == len(tachyon.edges)
