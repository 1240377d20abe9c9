"""Evaluation-only stage replacements for the ablations (seed selection without recency, phrase planner)."""

from __future__ import annotations

import pytest

from crase_core.backends import offline_backend
from crase_core.errors import InputError
from crase_core.evaluation.variants import apply_variant, relevance_seeds
from crase_core.pipeline import Engine, run_query
from crase_core.records import PlanResult
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.seeding import search_seeds


def test_relevance_seeds_are_the_top_m_hits_of_each_sub_query(tiny_source):
    plan = PlanResult("q", ["black hole entropy"], "test")
    settings = PipelineSettings(m=2)
    seeding = relevance_seeds(plan, tiny_source, settings)
    hits = seeding.subquery_results[0].hits
    assert [s.paper_id for s in seeding.seeds] == [h.paper_id for h in hits[:2]]
    assert seeding.subquery_results[0].seed_ids == [h.paper_id for h in hits[:2]]
    # the default's top-t-of-both rule trades relevance for recency on this list: a different seed set
    default = search_seeds(plan, tiny_source, settings)
    assert {s.paper_id for s in default.seeds} != {s.paper_id for s in seeding.seeds}


def test_apply_variant(tiny_source):
    engine = Engine(tiny_source, offline_backend())
    assert apply_variant(None, engine, tiny_source) == (engine, search_seeds)
    assert apply_variant("relevance-seeds", engine, tiny_source)[1] is relevance_seeds
    phrase, seeding = apply_variant("phrase-planner", engine, tiny_source)
    assert phrase.backend.planner.identity == "phrase-planner/v1" and seeding is search_seeds
    assert engine.backend.planner.identity == "keyword-planner/v2"  # the original engine is untouched
    trace = run_query("black hole entropy from D-branes", phrase, PipelineSettings(m=2))
    assert trace.backend["planner"] == "phrase-planner/v1" and trace.plan.subqueries
    assert any(n.startswith("sub-query 1 ") for n in trace.plan.notes)  # each sub-query says what it is for
    with pytest.raises(InputError, match="unknown evaluation variant"):
        apply_variant("nope", engine, tiny_source)
