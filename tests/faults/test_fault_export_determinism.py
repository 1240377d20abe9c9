"""The same run exported twice gives the same page. Python salts the hash of text ids per process, and networkx
iterates a small subgraph's nodes (and Louvain its sets of nodes) in a set's order: the cluster views of the
tachyon run came out with other communities' discs and other positions from one ``crase export`` to the next."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crase_core.cli.main import main

TACHYON = "tachyon condensation on unstable D-branes"


@pytest.mark.fault_kind("export-differs-by-hash-seed")
def test_an_export_is_the_same_whatever_the_hash_seed(tmp_path):
    run = tmp_path / "tachyon.json"
    assert main(["query", TACHYON, "--quiet", "--json", str(run)]) == 0
    pages = []
    for seed in ("1", "2"):
        page = tmp_path / f"page-{seed}.html"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        r = subprocess.run([sys.executable, "-m", "crase_core.cli", "export", str(run), "--format", "html",
                            "--out", str(page)], env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        pages.append(Path(page).read_bytes())
    assert pages[0] == pages[1]


_FEATURES = ("import json, sys\nfrom crase_core import trace\nfrom crase_core.recall.features import recall_features\n"
             "print(json.dumps(recall_features(trace.load(sys.argv[1]))))")


@pytest.mark.fault_kind("recall-estimate-differs-by-hash-seed")
def test_the_recall_estimate_of_a_run_is_the_same_whatever_the_hash_seed(tmp_path):
    """The seeds' reference recall was summed in a set's order: the tachyon run's estimate differed in its last
    bits from one process to the next."""
    run = tmp_path / "tachyon.json"
    assert main(["query", TACHYON, "--quiet", "--json", str(run)]) == 0
    outs = set()
    for seed in ("1", "2", "3", "4", "5", "6"):
        r = subprocess.run([sys.executable, "-c", _FEATURES, str(run)], env={**os.environ, "PYTHONHASHSEED": seed},
                           capture_output=True, text=True, timeout=600, check=True)
        outs.add(r.stdout)
    assert len(outs) == 1
