"""Concurrent writers of one output: two ``crase query --json`` runs naming the same file at once.

(Eight first queries on one empty cache: ``test_fault_caches.py``; two evals on one folder:
``test_fault_eval.py``.)
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from cli_tools import QUERY
from fault_tools import REPO, cli_env, shared_tmp

from crase_core import trace as trace_io


@pytest.mark.fault_kind("json-out-two-writers")
def test_two_runs_writing_the_same_trace_file_leave_one_whole_trace(tiny_corpus_dir):
    folder = shared_tmp("two-json")
    out = folder / "run.json"
    queries = [QUERY, "glueball lattice spectrum"]
    procs = [subprocess.Popen([sys.executable, "-m", "crase_core.cli", "query", q, "--corpus", str(tiny_corpus_dir),
                               "--quiet", "--json", str(out)], cwd=str(REPO), env=cli_env(folder / "cache"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for q in queries]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    assert trace_io.load(out).query in queries  # one whole trace (the last rename), never a mix
    assert sorted(p.name for p in folder.iterdir()) == ["cache", "run.json"]  # no temp file left behind
