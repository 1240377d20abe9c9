"""The run's overall deadline (``--deadline``, ``Engine.deadline_s``): checked before every stage and
between batches, capping every external call; past it the run stops naming the stage, and the work
it finished is in the cache, so the rerun resumes from it and gives the answer of an unbounded run."""

from __future__ import annotations

import time

import pytest
from stub_backend import ScriptedExtractor, ScriptedScorer, scripted_backend

from crase_core import deadline
from crase_core.cache import ResultCache
from crase_core.deadline import Deadline, DeadlineExceeded
from crase_core.pipeline import Engine, run_query
from crase_core.settings.pipeline import PipelineSettings

SETTINGS = PipelineSettings(m=3, L=2)


class SlowScorer(ScriptedScorer):
    def score_many(self, pairs):
        time.sleep(0.6)
        return super().score_many(pairs)


class SlowExtractor(ScriptedExtractor):
    def extract_many(self, papers):
        time.sleep(0.6)
        return super().extract_many(papers)


def _engine(tiny_source, cache, deadline_s=None, scorer=None, extractor=None) -> Engine:
    backend = scripted_backend(["black hole", "entropy"])
    if scorer is not None:
        backend.scorer = scorer
    if extractor is not None:
        backend.extractor = extractor
    return Engine(tiny_source, backend, ResultCache(cache), deadline_s=deadline_s)


@pytest.mark.fault_kind("deadline-nested")
def test_deadline_clock_and_cap():
    now = [100.0]
    d = Deadline(10.0, clock=lambda: now[0])
    assert d.remaining() == 10.0 and not d.expired() and d.cap(30.0) == 10.0 and d.cap(2.0) == 2.0
    now[0] = 109.5
    d.check("seeds")
    assert d.remaining() == pytest.approx(0.5) and d.stage == "seeds"
    now[0] = 110.0
    with pytest.raises(DeadlineExceeded, match="in stage 'expansion'"):
        d.check("expansion")
    with pytest.raises(DeadlineExceeded):
        d.cap(1.0)
    unbounded = Deadline(None)
    assert unbounded.remaining() is None and unbounded.cap(7.0) == 7.0 and not unbounded.expired()
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            Deadline(bad)


@pytest.mark.fault_kind("deadline-nested")
def test_an_earlier_outer_deadline_wins_and_none_adds_nothing():
    assert deadline.current() is None and deadline.remaining() is None and deadline.call_budget(5.0) == 5.0
    with deadline.running(2.0) as outer:
        assert deadline.current() is outer and deadline.call_budget(30.0) <= 2.0
        with deadline.running(60.0) as inner:
            assert inner is outer  # a later inner deadline cannot extend the run
        with deadline.running(None) as same:
            assert same is outer
        with deadline.running(0.5) as tighter:
            assert tighter is not outer and deadline.call_budget(30.0) <= 0.5
        assert deadline.current() is outer
    assert deadline.current() is None


@pytest.mark.parametrize("slow, stage", [("extractor", "claims"), ("scorer", "entailment")])
@pytest.mark.fault_kind("deadline-during-a-batch")
def test_run_past_its_deadline_stops_between_batches_and_resumes(tiny_source, tmp_path, slow, stage):
    parts = {slow: SlowScorer() if slow == "scorer" else SlowExtractor()}
    unbounded = run_query("black hole entropy", _engine(tiny_source, tmp_path / "ref"), SETTINGS)
    cut = _engine(tiny_source, tmp_path / "rc", deadline_s=0.3, **parts)
    t0 = time.monotonic()
    with pytest.raises(DeadlineExceeded) as err:
        run_query("black hole entropy", cut, SETTINGS)
    assert time.monotonic() - t0 < 1.5
    assert str(err.value) == (f"the run stopped at its deadline of 0.3 s (--deadline) in stage '{stage}'; work "
                              "finished so far is kept in the cache, so rerunning (with a longer --deadline) resumes "
                              "from it")
    assert deadline.current() is None  # nothing leaks out of the run
    again = run_query("black hole entropy", _engine(tiny_source, tmp_path / "rc", deadline_s=30.0), SETTINGS)
    assert [(r.paper_id, r.score) for r in again.results] == [(r.paper_id, r.score) for r in unbounded.results]
    assert again.counters.cache_hits > 0  # the batch finished before the deadline was not paid for twice
    assert again.counters.model_calls < unbounded.counters.model_calls


@pytest.mark.fault_kind("deadline-over-at-start")
def test_deadline_is_checked_before_the_first_stage(tiny_source, tmp_path):
    engine = _engine(tiny_source, tmp_path / "rc", deadline_s=1e-9)
    with pytest.raises(DeadlineExceeded, match="in stage 'plan'"):
        run_query("black hole entropy", engine, SETTINGS)
