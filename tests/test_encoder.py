"""The on-device semantic model (crase_core/encoder.py): all-MiniLM-L6-v2 as int8 ONNX on onnxruntime, no torch.

Its vectors must be the model's: they are compared with the rows the embedded hep-th corpus ships (made with
sentence-transformers on PyTorch), and the model is loaded once per process."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from crase_core import encoder
from crase_core.encoder import DIM, MAX_TOKENS, load_encoder
from crase_core.retrieval.semantic import embeddings_file
from crase_core.sources.local import open_corpus
from crase_core.store.embedding_files import embed_text, read_embeddings


@pytest.fixture(scope="module")
def enc():
    return load_encoder()


def test_vectors_match_the_shipped_corpus_vectors(enc):
    corpus = open_corpus(None)
    shipped, _ = read_embeddings(embeddings_file(corpus.name, corpus.fingerprint), rows=len(corpus),
                                 fingerprint=corpus.fingerprint)
    rows = [int(i) for i in np.linspace(0, len(corpus) - 1, 24)]
    got = enc.encode([embed_text(corpus.papers[i]) for i in rows])
    cos = (got * shipped[rows].astype(np.float32)).sum(axis=1)
    assert cos.min() >= 0.998, cos.min()
    # and a paper is nearest to itself among the sampled rows, as with the shipped vectors
    sims = got @ shipped[rows].astype(np.float32).T
    assert (sims.argmax(axis=1) == np.arange(len(rows))).all()


def test_rows_are_unit_length_and_in_the_order_given(enc):
    texts = ["a much longer text about tachyon condensation on unstable D-branes in string theory", "short",
             "glueball masses"]
    v = enc.encode(texts)
    assert v.shape == (3, DIM) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    for i, t in enumerate(texts):  # sorting by length inside encode never reorders the output
        assert np.allclose(enc.encode([t])[0], v[i], atol=1e-5)
    assert enc.encode([]).shape == (0, DIM)


def test_odd_texts_get_a_vector_not_an_error(enc):
    huge = "tachyon " * 20_000  # 160,000 characters: cut at the model's 256 tokens
    ctrl = "\x00\x01\x02\x1b\x7f\x0b"
    v = enc.encode([huge, ctrl, "", "чёрных дыр"])
    assert v.shape == (4, DIM) and np.all(np.isfinite(v))
    assert np.allclose(v[0], enc.encode(["tachyon " * MAX_TOKENS])[0], atol=1e-4)
    assert np.allclose(v[1], v[2], atol=1e-5)  # control characters only read as the empty text


def test_the_model_is_loaded_once_per_process(enc):
    assert load_encoder() is enc
    assert enc.model_id.startswith("all-MiniLM-L6-v2/onnx-int8@")


def test_importing_the_library_does_not_load_onnxruntime():
    code = ("import sys, crase_core.encoder, crase_core.pipeline; "
            "print(any(m in sys.modules for m in ('onnxruntime', 'tokenizers', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_the_files_are_the_pinned_ones():
    files = encoder.model_files()
    assert files.model.name == "model.onnx" and files.model.is_file()
    assert files.model_sha256 == encoder.MODEL_SHA256 and files.tokenizer.is_file()
