"""Seed corruption (paper App. K) and the ablation families of ``crase eval --ablation``.

Tiny corpus, plan fixed to "entanglement" (only 0001001) and "supergravity" (only 9802001), so the clean
seeds are [0001001, 9802001]. The query "entanglement supergravity derive" is found by BM25 in 0001001
(entanglement ×2, derive), 9802001 (supergravity, df 1) and 9901001 (derive, df 2; its text is also longer:
41 content terms against 37), so the search order is 0001001, 9802001, 9901001.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from stub_backend import scripted_backend

from crase_core.errors import InputError
from crase_core.evaluation.benchmark import BenchQuery
from crase_core.evaluation.cli import ABLATIONS, ablation_variants
from crase_core.evaluation.harness import EvalJob, settings_for
from crase_core.evaluation.methods import METHODS
from crase_core.evaluation.stress import corrupted_run, lexical_distractors, random_papers
from crase_core.pipeline import Engine
from crase_core.settings.pipeline import PipelineSettings

QUERY = "entanglement supergravity derive"
#: the settings these runs pin: the seeds are the two sub-queries' alone (no seeds from the question's own search)
SEEDS_OF_THE_PLAN = PipelineSettings(query_seeds=0)
ALL_IDS = {"9801001", "9802001", "9901001", "9902001", "0001001", "0002001"}


@pytest.fixture()
def engine(tiny_source):
    return Engine(tiny_source, scripted_backend(["entanglement", "supergravity"]), None)


def test_lexical_distractors_are_the_best_search_hits_outside_the_exclusions(engine):
    q = BenchQuery("q1", QUERY, ("9801001",))
    assert lexical_distractors(q, engine, 1, {"0001001"}) == ["9802001"]
    assert lexical_distractors(q, engine, 5, {"0001001"}) == ["9802001", "9901001"]  # only three hits exist
    assert lexical_distractors(q, engine, 5, set()) == ["0001001", "9802001", "9901001"]
    assert lexical_distractors(q, engine, 5, {"0001001", "9802001", "9901001"}) == []


def test_lexical_corruption_replaces_the_seeds_and_reruns_stages_two_and_three(engine):
    q = BenchQuery("q1", QUERY, ("9801001",))
    out = corrupted_run(q, engine, SEEDS_OF_THE_PLAN, "lexical")
    # exclusions: the relevant 9801001 and the clean seeds 0001001, 9802001 → the one distractor is 9901001
    assert out.stats["corruption"] == "lexical"
    assert out.stats["n_clean_seeds"] == 2 and out.stats["n_injected"] == 1
    t = out.trace
    assert t is not None
    assert [s.paper_id for s in t.seeds] == ["9901001"]
    assert t.seeds[0].origins[0].subquery == "(injected seed)"
    assert "seeds injected by the caller (1 of 1 visible); stage 1 search skipped" in t.warnings
    # the graph is grown from the injected seed: its refs 9801001, 9802001 and its citer 0001001
    assert [n.paper.id for n in t.nodes] == ["9901001", "0001001", "9801001", "9802001"]
    assert [(e.citing, e.cited) for e in t.edges] == [
        ("0001001", "9802001"), ("0001001", "9901001"), ("9802001", "9801001"), ("9901001", "9801001"),
        ("9901001", "9802001")]
    assert t.counters.search_calls == 1  # no seed search; only the full-query search of the query restart
    assert out.ranked == [r.paper_id for r in t.results]


def test_lexical_corruption_never_injects_a_relevant_paper(engine):
    # 9901001 is now relevant: every hit is relevant or a clean seed, so nothing is injected and the run has
    # no seed and no citation graph; only the full query's text candidates (with the default settings) remain
    out = corrupted_run(BenchQuery("q1", QUERY, ("9901001",)), engine, SEEDS_OF_THE_PLAN, "lexical")
    assert out.stats["n_injected"] == 0
    t = out.trace
    assert t is not None and t.seeds == []
    assert "seeds injected by the caller (0 of 0 visible); stage 1 search skipped" in t.warnings
    assert {n.role for n in t.nodes} == {"text"}
    assert set(out.ranked) == {"0001001", "9802001", "9901001"}
    off = corrupted_run(BenchQuery("q1", QUERY, ("9901001",)), engine,
                        SEEDS_OF_THE_PLAN.replace(text_candidates=0, personalization="uniform"), "lexical")
    assert off.ranked == [] and off.trace is not None and off.trace.nodes == []


def test_random_corruption_is_reproducible_and_excludes_the_relevant_papers(engine):
    q = BenchQuery("q7", QUERY, ("9801001", "9802001"))
    a = random_papers(q, engine, 3, set(q.relevant))
    assert a == random_papers(q, engine, 3, set(q.relevant))  # seeded by the qid
    assert len(a) == len(set(a)) == 3 and set(a) <= ALL_IDS - set(q.relevant)
    # asking for more than the pool gives the whole pool (4 papers) once each
    assert sorted(random_papers(q, engine, 10, set(q.relevant))) == sorted(ALL_IDS - set(q.relevant))
    out = corrupted_run(q, engine, SEEDS_OF_THE_PLAN, "random")
    assert out.stats["n_injected"] == out.stats["n_clean_seeds"] == 2
    assert out.trace is not None and not {s.paper_id for s in out.trace.seeds} & set(q.relevant)


def test_unknown_corruption_is_refused(engine):
    with pytest.raises(InputError, match="lexical or random"):
        corrupted_run(BenchQuery("q1", QUERY, ("9801001",)), engine, PipelineSettings(), "adversarial")


# ---- ablation families ---------------------------------------------------------------------------------------

BASE = EvalJob(bench="bench.jsonl", out="out", settings=PipelineSettings(theta=0.6, k=20))


def labels_and(name: str, get):
    return [(label, get(job)) for label, job in ablation_variants(name, BASE)]


#: the knob each family moves along with its own: the word-overlap scorer's θ_lexical (a share of words) with the
#: model's θ, τ_lexical with τ (every edge pruned at one τ)
COMPANION = {"theta": ("theta_lexical", {0.5: 0.02, 0.65: 0.05, 0.75: 0.1, 0.85: 0.15}),
             "tau": ("tau_lexical", {t: t for t in (0.0, 0.2, 0.4, 0.6)})}


@pytest.mark.parametrize(("name", "field", "values"), [
    ("hops", "hops", [1.0, 1.5, 2.0]),
    ("m", "m", [5, 10, 15, 20]),
    ("theta", "theta", [0.5, 0.65, 0.75, 0.85]),
    ("tau", "tau", [0.0, 0.2, 0.4, 0.6]),
    ("beta", "beta", [0.0, 0.5, 1.0]),
    ("ranker", "ranker", ["ppr", "salsa", "cep"]),
])
def test_settings_ablations_change_one_knob_only(name, field, values):
    variants = ablation_variants(name, BASE)
    label = {"theta": lambda v: f"theta={v:g},theta_lexical={COMPANION['theta'][1][v]:g}"}.get(
        name, lambda v: f"{field}={v:g}" if not isinstance(v, str) else f"{field}={v}")
    assert [lab for lab, _ in variants] == [label(v) for v in values]
    for (_, job), v in zip(variants, values, strict=True):
        assert getattr(job.settings, field) == v
        # everything else as in the base job (θ and τ move with the word-overlap scorer's own)
        changed = {field: v}
        if name in COMPANION:
            changed[COMPANION[name][0]] = COMPANION[name][1][v]
        assert job.settings == BASE.settings.replace(**changed)
        assert (job.method, job.age_reference, job.corrupt_seeds, job.bench) == ("crase", "current", None,
                                                                                   "bench.jsonl")


def test_method_and_protocol_ablations():
    assert labels_and("pruning", lambda j: j.method) == [("crase", "crase"), ("ppr-unpruned", "ppr-unpruned")]
    assert labels_and("age", lambda j: j.age_reference) == [("age=current", "current"), ("age=query", "query")]
    assert labels_and("corruption", lambda j: j.corrupt_seeds) == [("clean", None), ("lexical", "lexical"),
                                                                    ("random", "random")]
    expected = [m for m in METHODS if m != "dense"]  # dense only where its model is installed
    from crase_core.evaluation.dense import dense_available

    if dense_available():
        expected = list(METHODS)
    assert labels_and("baselines", lambda j: j.method) == [(m, m) for m in expected]
    for _, job in ablation_variants("baselines", BASE):
        assert job.settings == BASE.settings


def test_every_listed_ablation_has_variants_and_unknown_ones_are_refused():
    for name in ABLATIONS:
        assert len(ablation_variants(name, BASE)) >= 2
    with pytest.raises(InputError, match="unknown ablation"):
        ablation_variants("alpha", BASE)


def test_age_ablation_measures_ages_from_the_query_year():
    q = BenchQuery("q1", QUERY, ("9801001",), paper_id="0003001", year=2000)
    current, query = (job for _, job in ablation_variants("age", BASE))
    assert settings_for(current, q).age_reference_year is None
    assert settings_for(query, q).age_reference_year == 2000
    assert settings_for(query, replace(q, year=None)).age_reference_year is None  # no year: current year
