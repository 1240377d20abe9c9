"""Fault injection: a run asks for the claim-similarity scorer (``--support-scorer similarity``) and the on-device
model cannot load. The run does not fail: its edges are scored by word overlap, and the trace's warnings and the
CLI's note say so, with the model's own one-line reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_tools import crase

from crase_core import encoder
from crase_core import trace as trace_io

PAPERS = [
    {"id": "p1", "title": "Tachyon condensation on unstable D-branes",
     "abstract": "The open string tachyon condenses and the unstable D-brane decays into closed strings.",
     "year": 2002},
    {"id": "p2", "title": "Decay of unstable branes",
     "abstract": "Tachyon condensation describes the decay of unstable D-branes in string theory.", "year": 2000},
    {"id": "p3", "title": "Rolling tachyons",
     "abstract": "A rolling tachyon on an unstable brane produces pressureless tachyon matter.", "year": 2001},
]
CITATIONS = [("p1", "p2"), ("p3", "p2"), ("p1", "p3")]


@pytest.fixture(autouse=True)
def fresh_load():
    encoder.forget_loaded()
    yield
    encoder.forget_loaded()


@pytest.fixture
def brane_corpus(capsys, tmp_path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "papers.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PAPERS), encoding="utf-8")
    (src / "citations.tsv").write_text("".join(f"{u}\t{v}\n" for u, v in CITATIONS), encoding="utf-8")
    r = crase(capsys, "corpus", "import", src, tmp_path / "corpus", "--format", "jsonl")
    assert r.code == 0, r.err
    return tmp_path / "corpus"


@pytest.mark.fault_kind("similarity-model-unavailable")
def test_without_the_model_a_similarity_run_falls_back_to_word_overlap_and_says_so(capsys, brane_corpus, tmp_path,
                                                                                    monkeypatch):
    monkeypatch.setenv("CRASE_MINILM_ONNX", str(tmp_path / "gone.onnx"))
    run = tmp_path / "run.json"
    r = crase(capsys, "query", "tachyon condensation unstable D-brane", "--corpus", brane_corpus,
              "--support-scorer", "similarity", "--json", run)
    assert r.code == 0, r.err
    note = ("Note:  claim similarity unavailable (the on-device model's model file is missing: "
            f"{tmp_path / 'gone.onnx'}")
    assert note in r.out and "this run's edges were scored by word overlap (support_scorer word-overlap)" in r.out
    trace = trace_io.load(run)
    assert trace.settings.support_scorer == "similarity"  # what was asked …
    assert trace.edges and {e.scorer for e in trace.edges} == {"offline"}  # … and what decided
    assert not trace.backend["scorer"].startswith("claim-similarity")
    assert any(w.startswith("claim similarity unavailable (") for w in trace.warnings)
    assert all(e.theta == trace.settings.theta_lexical for e in trace.edges)
