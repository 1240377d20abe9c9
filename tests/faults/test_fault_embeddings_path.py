"""A corpus whose embeddings path (``embeddings/embeddings.f16.npy``, or its manifest) is a directory: every query
runs on words and says why in the run (was ``internal error (IsADirectoryError)`` for every query on that corpus);
``crase corpus check`` and ``crase corpus embed`` say it in one line (exit 2) and write nothing over it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_tools import QUERY, crase, one_error

from crase_core import trace as trace_io
from crase_core.retrieval.semantic import folder_embeddings_file
from crase_core.store.embedding_files import manifest_path


def _results(path: Path) -> list[tuple[str, float]]:
    return [(r.paper_id, r.score) for r in trace_io.load(path).results]


@pytest.mark.parametrize("which", ["file", "manifest"])
@pytest.mark.fault_kind("embeddings-path-is-a-directory")
def test_an_embeddings_path_that_is_a_directory_runs_on_words_and_says_so(capsys, llm, tmp_path, tiny_corpus_dir,
                                                                            which):
    corpus = tmp_path / "tiny"
    shutil.copytree(tiny_corpus_dir, corpus)
    words = tmp_path / "words.json"  # the same corpus without embeddings: the run on words alone
    assert crase(capsys, "query", QUERY, "--corpus", corpus, "--quiet", "--json", words).code == 0
    assert crase(capsys, "corpus", "embed", corpus, "--base-url", llm.base_url, "--model", "fake-model").code == 0
    target = folder_embeddings_file(corpus) if which == "file" else manifest_path(folder_embeddings_file(corpus))
    target.unlink()
    target.mkdir()
    where = "the file" if which == "file" else f"its manifest {target.name}"
    why = (f"semantic feedback off: the embeddings {folder_embeddings_file(corpus)} cannot be used: {where} is a "
           "directory (a regular file was expected); ")

    run = tmp_path / "run.json"
    r = crase(capsys, "query", QUERY, "--corpus", corpus, "--quiet", "--json", run)
    assert r.code == 0 and "internal error" not in r.err, r.err
    assert f"Note:  {why}" in r.out
    assert any(w.startswith(why) for w in trace_io.load(run).warnings)  # the run records it
    assert _results(run) == _results(words)  # exactly the run on words

    check = crase(capsys, "corpus", "check", corpus)  # the store is sound (stdout); the embeddings are not
    lines = check.err.strip().splitlines()
    assert check.code == 2 and len(lines) == 1 and lines[0].startswith(f"crase: error: {why}"), check.err
    if which == "file":
        assert why.endswith("; ") and "remove that directory, then write them again" in r.out
        error = one_error(crase(capsys, "corpus", "embed", corpus, "--base-url", llm.base_url, "--model", "m"))
        assert error == (f"{target} is a directory, where the corpus's embeddings file belongs: remove it, then run "
                         "`crase corpus embed` again")
    assert target.is_dir() and not any(target.iterdir())  # nothing written over it or into it
    target.rmdir()
    if which == "manifest":
        return
    assert crase(capsys, "corpus", "embed", corpus, "--base-url", llm.base_url, "--model", "fake-model").code == 0
    back = crase(capsys, "query", QUERY, "--corpus", corpus, "--quiet")
    assert back.code == 0 and "emantic feedback on: fake-model" in back.out, back.out
