"""gc_deferred: the collector is off inside a run (and an explorer page run), back on after, whatever happens,
counted across threads; a run and a page run nest."""

from __future__ import annotations

import gc
import threading

import pytest

from crase_core.backends import offline_backend
from crase_core.cache import ResultCache
from crase_core.gc_pause import gc_deferred
from crase_core.pipeline import Engine, run_query
from crase_core.settings.pipeline import PipelineSettings
from crase_core.store.termstats import TermStats


@pytest.fixture(autouse=True)
def _collector_on():
    gc.enable()
    yield
    gc.enable()


def test_off_inside_on_after_and_after_an_error():
    with gc_deferred():
        assert not gc.isenabled()
        with gc_deferred():  # nested (a run inside a page run)
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer block still holds it
    assert gc.isenabled()
    with pytest.raises(ValueError), gc_deferred():
        raise ValueError("boom")
    assert gc.isenabled()


def test_a_collector_left_off_stays_off():
    gc.disable()
    with gc_deferred():
        pass
    assert not gc.isenabled()


def test_concurrent_blocks_count():
    """Two threads: the collector comes back only when the last of them leaves."""
    inside, leave_first = threading.Event(), threading.Event()

    def hold():
        with gc_deferred():
            inside.set()
            leave_first.wait(5)

    t = threading.Thread(target=hold)
    t.start()
    inside.wait(5)
    with gc_deferred():
        leave_first.set()
        t.join(5)
        assert not gc.isenabled()  # the other thread left; this block still holds it
    assert gc.isenabled()


def test_a_run_defers_the_collector(tiny_source, tmp_path):
    engine = Engine(tiny_source, offline_backend(TermStats.from_index(tiny_source.text_index)),
                    ResultCache(tmp_path / "rc"))
    seen: list[bool] = []
    trace = run_query("black hole entropy D-branes", engine, PipelineSettings(m=3, L=2),
                      progress=lambda _e: seen.append(gc.isenabled()))
    assert trace.results and seen and not any(seen)
    assert gc.isenabled()
