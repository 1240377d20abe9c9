"""Worker counts are checked against the machine before a process is started: ``crase corpus build
--workers 100000`` used to fork hundreds of parsers (load ≈ 2,200, a worker OOM-killed), and 0 or -1
were accepted silently."""

from __future__ import annotations

import os

import pytest
from cli_tools import crase, one_error
from tiny_corpus import write_corpus

from crase_core.store import corpus_store

CORES = len(os.sched_getaffinity(0))  # the cores this process may use
TOP = 4 * CORES


def _range_error(value: int) -> str:
    return f"--workers must be in [1, {TOP}] on this machine ({CORES} core{'s' * (CORES != 1)} × 4) (got {value})"


@pytest.mark.fault_kind("corpus-build-workers-out-of-range")
@pytest.mark.parametrize("value", ["100000", "0", "-1"])
def test_corpus_build_refuses_a_worker_count_the_machine_cannot_run(capsys, tmp_path, monkeypatch, value):
    cache = tmp_path / "cache"
    monkeypatch.setenv("CRASE_CACHE_DIR", str(cache))
    real = corpus_store._parsed

    def guarded(path, workers, *a, **k):  # should the check regress, fail here instead of forking 100,000
        assert 1 <= workers <= TOP, f"a build was started with {workers} workers"
        return real(path, workers, *a, **k)

    monkeypatch.setattr(corpus_store, "_parsed", guarded)
    corpus = write_corpus(tmp_path / "tiny")
    assert one_error(crase(capsys, "corpus", "build", corpus, f"--workers={value}")) == _range_error(int(value))
    assert not cache.exists()  # refused before anything was opened or built
    top = crase(capsys, "corpus", "build", corpus, f"--workers={TOP}")  # the bound itself runs
    assert top.code == 0 and "tiny: 6 papers, 7 citations" in top.out, top.err
