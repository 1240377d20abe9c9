"""The question embedded (crase_core.retrieval.dense): hand-checked fusion, the cached question vector, the three
uses in a run on the tiny corpus with a small deterministic encoder, and the fall-back to words."""

from __future__ import annotations

import numpy as np
import pytest

from crase_core.cache import ResultCache
from crase_core.paper_source import ScoredPaper
from crase_core.records import Paper
from crase_core.retrieval.dense import (
    DenseQuestion,
    DenseUnavailable,
    QuestionEmbedder,
    dense_fuse,
    model_name,
    nearest_rows,
)
from crase_core.retrieval.semantic import DocEmbeddings
from crase_core.retrieval.text_parts import BM25, QUESTION_EMBEDDING
from crase_core.settings.pipeline import PipelineSettings
from crase_core.store.embedding_files import Manifest

PAPERS = [Paper("A", "a"), Paper("B", "b"), Paper("C", "c"), Paper("D", "d")]
ROW = {p.id: i for i, p in enumerate(PAPERS)}
COS = np.array([0.2, 0.9, 0.5, -0.1])
HITS = [ScoredPaper(PAPERS[0], 10.0, {BM25: 10.0}), ScoredPaper(PAPERS[1], 6.0, {BM25: 6.0})]


def _dense(visible: list[bool], limit: int = 2) -> DenseQuestion:
    return DenseQuestion(COS, nearest_rows(COS, np.array(visible), limit))


def test_the_questions_nearest_papers_join_and_the_search_keeps_its_scale():
    # nearest 2 = B (0.9), C (0.5); C = {A, B, C}, mm(cos) = A 0, B 1, C 0.3/0.7
    # w 0.5: A 10·(0.5·1 + 0) = 5, B 10·(0.5·0.6 + 0.5·1) = 8, C 10·0.5·3/7 = 2.142857 → best 2: B, A
    out = dense_fuse(HITS, _dense([True] * 4), 0.5, ROW, PAPERS)
    assert [(r.paper.id, round(r.score, 6)) for r in out] == [("B", 8.0), ("A", 5.0)]
    # the parts sum to the score and name the dense share: B = 0.5·6 of BM25 + 5 of the question's embedding
    assert out[0].parts == pytest.approx({BM25: 3.0, QUESTION_EMBEDDING: 5.0})
    assert out[1].parts == pytest.approx({BM25: 5.0})
    # w 0.9: C overtakes A (C 10·0.9·3/7 = 3.857143, A 10·0.1 = 1)
    out = dense_fuse(HITS, _dense([True] * 4), 0.9, ROW, PAPERS)
    assert [(r.paper.id, round(r.score, 6)) for r in out] == [("B", 9.6), ("C", 3.857143)]
    # a hidden paper never joins: B hidden → the nearest visible are C and A
    assert [r.paper.id for r in dense_fuse(HITS, _dense([True, False, True, True]), 0.9, ROW, PAPERS)] == ["B", "C"]
    # off: the search's own list; a search that found nothing stays empty (nearest papers alone are no answer)
    assert dense_fuse(HITS, _dense([True] * 4), 0.0, ROW, PAPERS) == HITS
    assert dense_fuse([], _dense([True] * 4), 0.5, ROW, PAPERS) == []


def test_model_names_compare_without_path_or_quantisation():
    assert model_name("sentence-transformers/all-MiniLM-L6-v2") == model_name("all-minilm-l6-v2-int8.onnx")
    assert model_name("all-MiniLM-L6-v2") != model_name("nomic-embed-text")


def test_the_on_device_model_embeds_a_question_near_its_paper(hepth_source, tmp_path):
    """The real encoder (crase_core.encoder) against the shipped hep-th vectors: a paper's own title is nearest
    its own row among a few others."""
    from crase_core.encoder import EncoderUnavailable, load_encoder

    try:
        load_encoder()
    except EncoderUnavailable as e:
        pytest.skip(str(e))
    emb = hepth_source.embeddings
    corpus = hepth_source.corpus
    e = QuestionEmbedder(ResultCache(tmp_path))
    rows = [corpus.index[p] for p in ("9711200", "9802150", "9905111", "0003160")]
    for row in rows:
        v = e.vector(corpus.papers[row].text, emb.manifest.model, 384)
        assert max(rows, key=lambda r: float(emb.matrix[r] @ v)) == row
        assert float(emb.matrix[row] @ v) > 0.99  # title + abstract: the same text the corpus row embeds


class FakeEncoder:
    """A deterministic stand-in for the on-device model: every text maps to ``vector`` (counted)."""

    def __init__(self, vector, model_id: str = "fake-minilm-int8"):
        self.vector = np.asarray(vector, dtype=np.float32) / np.linalg.norm(vector)
        self.model_id, self.dim, self.calls = model_id, len(vector), 0

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        return np.stack([self.vector for _ in texts])


def test_the_question_vector_is_cached_by_model_and_text(tmp_path):
    enc = FakeEncoder([3.0, 4.0, 0.0, 0.0])
    first = QuestionEmbedder(ResultCache(tmp_path), load=lambda: enc, identity=lambda: "fake")
    v = first.vector("a question", "fake-minilm", 4)
    assert np.allclose(v, [0.6, 0.8, 0.0, 0.0]) and first.loads == 1 and enc.calls == 1

    def no_model():
        raise AssertionError("the cached path must not load the model")

    again = QuestionEmbedder(ResultCache(tmp_path), load=no_model, identity=lambda: "fake")  # a fresh process: same cache folder
    assert np.allclose(again.vector("a question", "fake-minilm", 4), v) and again.loads == 0
    with pytest.raises(AssertionError):  # another question misses (the test can fail), and so does another model
        again.vector("another question", "fake-minilm", 4)
    with pytest.raises(AssertionError):
        QuestionEmbedder(ResultCache(tmp_path), load=no_model, identity=lambda: "fake-2").vector(
            "a question", "fake-minilm", 4)
    # vectors of another model cannot be compared with the question's
    with pytest.raises(DenseUnavailable, match="the corpus vectors are from nomic-embed"):
        QuestionEmbedder(None, load=lambda: enc, identity=lambda: "fake").vector("a question", "nomic-embed", 4)


def test_a_model_that_cannot_load_is_asked_once():
    calls = []

    def broken():
        calls.append(1)
        raise DenseUnavailable("the model file is missing")

    e = QuestionEmbedder(None, load=broken, identity=lambda: "fake")
    for _ in range(2):
        with pytest.raises(DenseUnavailable, match="missing"):
            e.vector("q", "fake-minilm", 4)
    assert len(calls) == 1


GLUE = "9902001"  # the lattice glueball paper: few of the question's words, the question's embedding


def _source(tiny_source):
    from crase_core.sources.local import LocalSource

    corpus = tiny_source.corpus
    m = np.full((len(corpus), 4), 0.1, dtype=np.float32)
    for i in range(len(corpus)):
        m[i, 1 + i % 3] = 1.0
    m[corpus.index[GLUE]] = [1.0, 0.0, 0.0, 0.0]
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    manifest = Manifest("fake-minilm", 4, len(corpus), corpus.name, corpus.fingerprint, "", "minilm")
    return LocalSource(corpus, tiny_source.text_index, embeddings=DocEmbeddings(m, "", manifest),
                       folder=tiny_source.folder)


def _run(source, settings, load):
    from crase_core.backends import offline_backend
    from crase_core.pipeline import Engine, run_query

    engine = Engine(source, offline_backend(), None, embedder=QuestionEmbedder(None, load=load, identity=lambda: "fake"))
    return run_query("black hole entropy in gauge theory", engine, settings)


ON = PipelineSettings(dense_seed_weight=0.5, dense_restart_weight=0.5, dense_fusion_weight=0.5)


def test_a_run_embeds_the_question_once_and_names_its_share(tiny_source):
    src = _source(tiny_source)
    enc = FakeEncoder([1.0, 0.0, 0.0, 0.0])
    off = _run(src, ON.replace(dense_seed_weight=0.0, dense_restart_weight=0.0, dense_fusion_weight=0.0), lambda: enc)
    assert enc.calls == 0 and not off.dense_question and "weights are 0" in off.dense_note
    on = _run(src, ON, lambda: enc)
    assert enc.calls == 1 and on.dense_question and on.dense_note.startswith("question embedded: fake-minilm")
    assert not [w for w in on.warnings if "embedded" in w]
    # the glueball paper is the question's nearest: it climbs the fusion's list and the restart's
    rank = {h.paper_id: h.relevance_rank for h in on.query_hits}
    rank_off = {h.paper_id: h.relevance_rank for h in off.query_hits}
    assert rank[GLUE] < rank_off.get(GLUE, 10**6)
    glue = next(h for h in on.query_hits if h.paper_id == GLUE)
    assert glue.parts.get(QUESTION_EMBEDDING, 0) > 0 and sum(glue.parts.values()) == pytest.approx(glue.score)
    assert on.restart_hits is not None and any(QUESTION_EMBEDDING in h.parts for h in on.restart_hits)
    # the question's seeds come from the fused list: the glueball paper is one of them
    assert GLUE in {s.paper_id for s in on.seeds for o in s.origins if o.kind == "question"}
    # "why this rank" names the dense share of a result's text score
    parts = [p for r in on.results for p in r.score_parts if p.component == QUESTION_EMBEDDING]
    assert parts and all(p.signal == "text" for p in parts)


def test_without_a_model_or_vectors_the_run_ranks_by_words_and_says_so(tiny_source):
    src = _source(tiny_source)
    words = _run(src, ON.replace(dense_seed_weight=0.0, dense_restart_weight=0.0, dense_fusion_weight=0.0),
                 lambda: FakeEncoder([1.0, 0, 0, 0]))

    def broken():
        raise DenseUnavailable("the model file is missing")

    fell = _run(src, ON, broken)
    assert not fell.dense_question
    assert any(w.startswith("question not embedded (ranked by words): the model file is missing") for w in fell.warnings)
    assert [(r.paper_id, r.score) for r in fell.results] == [(r.paper_id, r.score) for r in words.results]
    # a corpus never embedded: words, a note that says how to get vectors, and no warning (nothing fell back)
    plain = _run(tiny_source, ON, lambda: FakeEncoder([1.0, 0, 0, 0]))
    assert not plain.dense_question
    assert plain.dense_note.startswith("question not embedded (ranked by words):")
    assert "crase corpus embed" in plain.dense_note
    assert not [w for w in plain.warnings if "embedded" in w]


FRESH = """
import sys
from crase_core.cli.main import main
code = main(sys.argv[1:])
print("onnxruntime loaded:", "onnxruntime" in sys.modules, file=sys.stderr)
sys.exit(code)
"""


def test_a_repeated_question_in_a_fresh_process_never_loads_the_model(tmp_path, tiny_corpus_dir):
    """End to end on a real corpus folder: `crase corpus embed` on the device, then the same `crase query` in two
    fresh processes; the first embeds the question, the second reads its vector from the result cache and never
    imports onnxruntime. The trace says the question was embedded both times."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    from crase_core.encoder import EncoderUnavailable, load_encoder

    try:
        load_encoder()
    except EncoderUnavailable as e:
        pytest.skip(str(e))
    folder = tmp_path / "tiny"
    shutil.copytree(tiny_corpus_dir, folder)
    env = {**os.environ, "CRASE_CACHE_DIR": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}

    def crase(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", FRESH, *argv], env=env, capture_output=True, text=True,
                              timeout=300)

    r = crase("corpus", "embed", str(folder))
    assert r.returncode == 0, r.stderr
    runs = []
    for i in range(2):
        out = tmp_path / f"run{i}.json"
        r = crase("query", "black hole microstates counted by a dual field theory", "--corpus", str(folder),
                  "--dense-fusion-weight", "0.5", "--json", str(out), "--quiet")
        assert r.returncode == 0, r.stderr
        runs.append((json.loads(out.read_text()), r.stderr))
    (first, err1), (second, err2) = runs
    assert "onnxruntime loaded: True" in err1 and "onnxruntime loaded: False" in err2
    assert first["dense_question"] and second["dense_question"]
    assert [r["paper_id"] for r in first["results"]] == [r["paper_id"] for r in second["results"]]


def test_a_trace_written_before_the_dense_knobs_reads_as_a_run_without_them(tiny_source):
    """A saved run whose settings do not record the question's embedding ran without it: reading it back gives
    0 for every dense weight, whatever today's defaults are."""
    import json

    from crase_core import trace as trace_mod

    t = _run(tiny_source, ON, lambda: FakeEncoder([1.0, 0, 0, 0]))
    data = json.loads(trace_mod.dumps(t))
    assert data["settings"]["dense_fusion_weight"] == 0.5
    for k in trace_mod.DENSE_KNOBS:
        del data["settings"][k]
    old = trace_mod.from_dict(data)
    assert (old.settings.dense_seed_weight, old.settings.dense_restart_weight, old.settings.dense_fusion_weight) == \
        (0.0, 0.0, 0.0)
    assert trace_mod.from_dict(json.loads(trace_mod.dumps(t))).settings.dense_fusion_weight == 0.5
