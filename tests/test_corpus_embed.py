"""``crase corpus embed``: embeddings for any corpus through a real local OpenAI-compatible server (the fake one of
tests/fixtures/llm, real HTTP), incremental after ``crase corpus add``, read back by queries with semantic feedback on."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "faults"))
from cli_tools import QUERY, crase  # noqa: E402
from fault_tools import run_cli  # noqa: E402

from crase_core.retrieval import semantic  # noqa: E402
from crase_core.retrieval.semantic import cache_embeddings_file, folder_embeddings_file  # noqa: E402
from crase_core.sources.local import LocalSource  # noqa: E402
from crase_core.store.embedding_files import manifest_path, read_embeddings, texts_digest  # noqa: E402

NEW_PAPERS = [
    {"id": "0101001", "title": "Black hole entropy and holographic microstates", "year": 2001,
     "abstract": "We count black hole microstates with the dual conformal field theory."},
    {"id": "0101002", "title": "Glueball masses on anisotropic lattices", "year": 2001,
     "abstract": "Lattice gauge theory glueball spectrum."},
]


@pytest.fixture
def corpus(tmp_path, tiny_corpus_dir) -> Path:
    folder = tmp_path / "tiny"
    shutil.copytree(tiny_corpus_dir, folder)
    return folder


def embed(capsys, llm, folder: Path, *more: str):
    return crase(capsys, "corpus", "embed", folder, "--base-url", llm.base_url, "--model", "fake-model",
                 "--batch-size", "2", *more)


def test_embeddings_from_an_endpoint_turn_semantic_feedback_on(capsys, llm, corpus):
    off = crase(capsys, "query", QUERY, "--corpus", corpus, "--quiet")
    assert off.code == 0 and "Semantic feedback off: no embeddings for the corpus tiny" in off.out
    assert f"turn it on with `crase corpus embed {corpus}` (all-MiniLM-L6-v2 on this machine" in off.out
    r = embed(capsys, llm, corpus)
    assert r.code == 0, r.err
    assert r.out.startswith("embedded 6 papers in ") and f"wrote {folder_embeddings_file(corpus)}" in r.out
    source = LocalSource.open(corpus)
    emb = source.embeddings
    assert emb is not None and emb.matrix.shape == (6, 64)
    m = emb.manifest
    assert m is not None and (m.model, m.source, m.base_url, m.count) == ("fake-model", "endpoint", llm.base_url, 6)
    assert m.corpus_fingerprint == source.corpus.fingerprint and m.texts_sha256 == texts_digest(source.corpus.papers, None, 6000)
    # the rows are the endpoint's vectors, normalised, in the corpus's order
    from crase_core.store.embedding_files import embed_text
    from crase_core.testing.fake_openai import hashing_vector
    for i, paper in enumerate(source.corpus.papers):
        v = np.array(hashing_vector(embed_text(paper, 6000), 64))
        assert np.allclose(emb.matrix[i], v / np.linalg.norm(v), atol=2e-3)
    on = crase(capsys, "query", QUERY, "--corpus", corpus, "--quiet")
    assert on.code == 0
    assert (f"Semantic feedback on: fake-model (64 dimensions, from {llm.base_url}), 6 papers (the papers nearest "
            "the top hit join its list)") in on.out
    check = crase(capsys, "corpus", "check", corpus)
    assert check.code == 0 and f"{folder_embeddings_file(corpus)}: sound (fake-model" in check.out
    again = embed(capsys, llm, corpus)
    assert again.code == 0 and "up to date" in again.out and len(llm.embedding_requests()) == 3


def test_appended_papers_get_their_embeddings_by_the_same_command(capsys, llm, corpus, tmp_path):
    assert embed(capsys, llm, corpus).code == 0
    before = folder_embeddings_file(corpus).read_bytes()
    new = tmp_path / "new"
    new.mkdir()
    (new / "papers.jsonl").write_text("".join(json.dumps(p) + "\n" for p in NEW_PAPERS))
    assert crase(capsys, "corpus", "add", corpus, new).code == 0
    grown = LocalSource.open(corpus)
    assert grown.embeddings is None and "it changed or grew since" in grown.semantic.note
    sent = len(llm.embedding_requests())
    r = embed(capsys, llm, corpus)
    assert r.code == 0 and r.out.startswith("embedded 2 papers, 6 reused in "), r.out
    texts = [t for req in llm.embedding_requests()[sent:] for t in req.body["input"]]
    assert [t.split(".")[0] for t in texts] == [p["title"] for p in NEW_PAPERS]  # only the new papers were sent
    emb = LocalSource.open(corpus).embeddings
    assert emb is not None and emb.matrix.shape == (8, 64)
    # the grown file is the one a fresh embedding of the grown corpus writes, byte for byte
    fresh = tmp_path / "fresh"
    shutil.copytree(corpus, fresh, ignore=shutil.ignore_patterns("embeddings"))
    assert embed(capsys, llm, fresh).code == 0
    assert folder_embeddings_file(fresh).read_bytes()[128:] == folder_embeddings_file(corpus).read_bytes()[128:]
    assert folder_embeddings_file(corpus).read_bytes()[128 : len(before)] == before[128:]


def test_a_read_only_corpus_folder_gets_its_embeddings_in_the_cache(llm, corpus, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    assert run_cli("corpus", "build", str(corpus), cache_dir=cache).returncode == 0
    corpus.chmod(0o555)
    try:
        r = run_cli("corpus", "embed", str(corpus), "--base-url", llm.base_url, "--model", "fake-model",
                    cache_dir=cache, unprivileged=True)
        assert r.returncode == 0, r.stderr
        assert "writing them to the cache instead" in r.stderr and not (corpus / "embeddings").exists()
        q = run_cli("query", QUERY, "--corpus", str(corpus), "--quiet", cache_dir=cache, unprivileged=True)
        assert q.returncode == 0 and "Semantic feedback on: fake-model" in q.stdout
    finally:
        corpus.chmod(0o755)
    import os

    old = os.environ.get("CRASE_CACHE_DIR")
    os.environ["CRASE_CACHE_DIR"] = str(cache)
    try:
        path = cache_embeddings_file(corpus)
        assert path.is_file() and manifest_path(path).is_file()
        c = LocalSource.open(corpus).corpus
        assert read_embeddings(path, rows=len(c), fingerprint=c.fingerprint)[0].shape == (6, 64)
    finally:
        if old is not None:
            os.environ["CRASE_CACHE_DIR"] = old


def test_embed_without_flags_runs_the_on_device_model_and_queries_use_it(capsys, corpus):
    """`crase corpus embed DIR` with no flags embeds on this machine (onnxruntime, no torch, no endpoint): the
    shipped format, model all-MiniLM-L6-v2, and a query on the corpus reads the rows back."""
    r = crase(capsys, "corpus", "embed", corpus)
    assert r.code == 0, r.err
    assert r.out.startswith("embedded 6 papers in ") and "papers/s" in r.out
    emb = LocalSource.open(corpus).embeddings
    assert emb is not None and emb.manifest is not None and emb.manifest.model == semantic.MODEL_NAME
    assert emb.matrix.shape == (6, 384) and emb.manifest.source == "minilm"
    assert emb.manifest.extra.get("runtime", "").startswith("onnxruntime")
    assert "torch" not in sys.modules
    from crase_core.encoder import load_encoder
    from crase_core.store.embedding_files import embed_text
    papers = LocalSource.open(corpus).corpus.papers
    direct = load_encoder().encode([embed_text(p) for p in papers])
    assert np.allclose(emb.matrix, direct, atol=2e-3)  # float16 rows of the model's vectors, in corpus order
    again = crase(capsys, "corpus", "embed", corpus)
    assert again.code == 0 and "up to date" in again.out


class FakeMiniLM:
    """Stands in for the bundled model (same identity: source minilm, model all-MiniLM-L6-v2, whole texts),
    vectors from the fake endpoint's hashing, so the reuse of shipped rows can be checked without torch."""

    source, base_url, max_chars, concurrency, batch_size = "minilm", "", None, 1, 8
    model = semantic.MODEL_NAME

    def __init__(self):
        self.texts: list[str] = []

    def embed(self, batches):
        from crase_core.store.embedding_files import normalised_f16
        from crase_core.testing.fake_openai import hashing_vector
        self.texts += [t for b in batches for t in b]
        return [normalised_f16(np.array([hashing_vector(t, 384) for t in b])) for b in batches]


def test_the_shipped_rows_are_reused_after_papers_are_appended(capsys, llm, corpus, tmp_path, monkeypatch):
    """A corpus whose embeddings ship (as the embedded one's do) grows by two papers: `--minilm` embeds those
    two only and keeps the shipped rows for the rest; with nothing new it is up to date and writes nothing."""
    from crase_core.importers.corpus_embed import embed_corpus
    from crase_core.store.embedding_files import Manifest, write_embeddings

    shipped_dir = tmp_path / "assets-embeddings"
    monkeypatch.setattr(semantic, "embeddings_dir", lambda: shipped_dir)
    import crase_core.importers.corpus_embed as ce

    monkeypatch.setattr(ce, "embeddings_dir", lambda: shipped_dir)
    c = LocalSource.open(corpus).corpus
    first = FakeMiniLM()
    rows = first.embed([[p.text for p in c.papers]])[0]
    shipped = semantic.embeddings_file(c.name, c.fingerprint, shipped_dir)
    write_embeddings(shipped, [rows], Manifest(model=semantic.MODEL_NAME, dimension=384, count=len(c),
                                               corpus_name=c.name, corpus_fingerprint=c.fingerprint,
                                               texts_sha256=texts_digest(c.papers), source="minilm"))
    report = embed_corpus(corpus, FakeMiniLM())
    assert report.up_to_date and report.path == shipped and not (corpus / "embeddings").exists()
    new = tmp_path / "new"
    new.mkdir()
    (new / "papers.jsonl").write_text("".join(json.dumps(p) + "\n" for p in NEW_PAPERS))
    assert crase(capsys, "corpus", "add", corpus, new).code == 0
    second = FakeMiniLM()
    report = embed_corpus(corpus, second)
    assert (report.embedded, report.reused) == (2, 6) and len(second.texts) == 2
    grown = LocalSource.open(corpus)
    emb = grown.embeddings
    assert emb is not None and emb.path == str(folder_embeddings_file(corpus)) and emb.matrix.shape == (8, 384)
    assert np.array_equal(emb.matrix[:6], rows.astype(np.float32))
