"""Fault injection for ``crase corpus embed`` against the fake OpenAI-compatible server's ``/v1/embeddings`` (real
HTTP on 127.0.0.1): an endpoint that is down, slow, busy, failing, or answering garbage — NaN, vectors of another
length, broken or absurdly nested JSON, a 40 MB body — ends the job with one line (exit 2) or is retried to a
correct file; an interrupted job (the call budget, a SIGKILL, a torn row, a crash between the two renames) keeps
its finished rows, resumes where it stopped, and never leaves a file that a query would use half-made.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cli_tools import QUERY, Result, crase
from fault_tools import cli_env

from crase_core.retrieval.semantic import folder_embeddings_file
from crase_core.testing.fake_openai import FakeOpenAI

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def corpus(tmp_path, tiny_corpus_dir) -> Path:
    folder = tmp_path / "tiny"
    shutil.copytree(tiny_corpus_dir, folder)
    return folder


def one_error(r: Result) -> str:
    """The one error line of a failed job (exit 2, nothing on stdout; progress lines before it on stderr)."""
    assert r.code == 2 and r.out == "", (r.code, r.out, r.err)
    lines = r.err.strip().splitlines()
    errors = [line for line in lines if line.startswith("crase: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], r.err
    assert all(line.startswith(("crase corpus: ", "crase: error: ")) for line in lines), r.err
    return errors[0].removeprefix("crase: error: ")


def embed(capsys, server: FakeOpenAI, folder: Path, *more: str):
    return crase(capsys, "corpus", "embed", folder, "--base-url", server.base_url, "--model", "fake-model",
                 "--batch-size", "2", "--max-retries", "1", *more)


def file_hash(folder: Path) -> str:
    return hashlib.sha256(folder_embeddings_file(folder).read_bytes()).hexdigest()


def reference(capsys, llm: FakeOpenAI, tmp_path: Path, tiny_corpus_dir: Path) -> str:
    """The SHA-256 of the file a clean run writes (the fake server's vectors are deterministic)."""
    clean = tmp_path / "clean" / "tiny"
    shutil.copytree(tiny_corpus_dir, clean)
    assert embed(capsys, llm, clean).code == 0
    return file_hash(clean)


def no_feedback(capsys, folder: Path) -> None:
    r = crase(capsys, "query", QUERY, "--corpus", folder, "--quiet")
    assert r.code == 0 and "Semantic feedback off: no embeddings for the corpus tiny" in r.out, r.out


@pytest.mark.fault_kind("embed-endpoint-down")
def test_an_endpoint_that_is_down_is_one_line(capsys, corpus):
    with FakeOpenAI() as server:
        url = server.base_url
    r = crase(capsys, "corpus", "embed", corpus, "--base-url", url, "--model", "m")
    assert one_error(r).startswith(f"cannot reach the model endpoint {url} (ConnectionRefusedError")
    assert not folder_embeddings_file(corpus).exists()


@pytest.mark.parametrize("kind, why", [
    pytest.param("500", "answered HTTP 500", marks=pytest.mark.fault_kind("embed-5xx-always")),
    pytest.param("emb_nan", "returned vectors that are not finite numbers (NaN or infinity)",
                 marks=pytest.mark.fault_kind("embed-nan-vectors")),
    pytest.param("bad_json_body", "answered HTTP 200 with a body that is not JSON",
                 marks=pytest.mark.fault_kind("embed-200-not-json")),
    pytest.param("emb_deep", "a body that is not JSON (or nested too deeply)",
                 marks=pytest.mark.fault_kind("embed-200-not-json")),
    pytest.param("emb_missing", "returned 1 embeddings for 2 texts", marks=pytest.mark.fault_kind("embed-missing-vectors")),
    pytest.param("wrong_shape_body", "JSON that is not an embeddings answer (no 'data' list)",
                 marks=pytest.mark.fault_kind("embed-wrong-shape")),
    pytest.param("emb_huge", "the answer is 41,943,052 bytes (the limit is 32 MiB)",
                 marks=pytest.mark.fault_kind("embed-answer-over-cap")),
    pytest.param("drop_mid_body", "the connection to", marks=pytest.mark.fault_kind("embed-drop-mid-body-always")),
])
def test_a_persistent_bad_answer_stops_the_job_with_one_line_and_writes_nothing(capsys, llm, corpus, kind, why):
    llm.add(kind, count=-1, path="/embeddings")
    error = one_error(embed(capsys, llm, corpus))
    assert error.startswith("embedding stopped after 0 of 6 papers: ") and why in error, error
    assert error.endswith("The 0 are kept: rerun the same command to continue")
    assert not folder_embeddings_file(corpus).exists()
    no_feedback(capsys, corpus)


@pytest.mark.parametrize("kind", ["500", "503", "429", "emb_nan", "bad_json_body", "emb_deep", "emb_missing",
                                  "drop", "drop_mid_body"])
@pytest.mark.fault_kind("embed-fault-once")
def test_a_passing_fault_is_retried_to_the_same_file(capsys, llm, corpus, tmp_path, tiny_corpus_dir, kind):
    want = reference(capsys, llm, tmp_path, tiny_corpus_dir)
    llm.add(kind, count=1, path="/embeddings", retry_after="0" if kind in ("429", "503") else None)
    r = embed(capsys, llm, corpus)
    assert r.code == 0, r.err
    assert llm.counts.get(kind) == 1 and file_hash(corpus) == want


@pytest.mark.fault_kind("embed-slow-first-byte")
def test_a_slow_endpoint_times_out_per_request(capsys, llm, corpus):
    llm.add("slow_first_byte", count=-1, path="/embeddings", delay=5.0)
    t = time.monotonic()
    error = one_error(embed(capsys, llm, corpus, "--timeout", "0.5", "--concurrency", "1"))
    assert time.monotonic() - t < 30
    assert "no complete answer from" in error and "within 0.5 s (2 attempts)" in error


@pytest.mark.fault_kind("embed-trickle")
def test_a_trickling_endpoint_is_cut_at_the_timeout(capsys, llm, corpus):
    llm.add("trickle", count=-1, path="/embeddings", delay=0.2)
    t = time.monotonic()
    error = one_error(embed(capsys, llm, corpus, "--timeout", "1", "--concurrency", "1", "--max-retries", "0"))
    assert time.monotonic() - t < 20 and "within 1 s (1 attempts)" in error


@pytest.mark.fault_kind("embed-dimension-changes")
def test_vectors_of_another_length_stop_the_job_at_once(capsys, llm, corpus):
    """A dimension that changes between batches (the endpoint swapped models) must never mix in one file."""
    llm.add("emb_wrong_dim", count=-1, path="/embeddings")
    first = embed(capsys, llm, corpus, "--concurrency", "1", "--max-calls", "1")  # one batch at 65 dimensions
    assert first.code == 2
    llm.clear()
    error = one_error(embed(capsys, llm, corpus, "--concurrency", "1"))
    assert "the embedder returned 64-dimensional vectors where the ones before have 65; rerun with --fresh" in error
    assert not folder_embeddings_file(corpus).exists()
    assert embed(capsys, llm, corpus, "--fresh").code == 0  # --fresh starts over with one model


@pytest.mark.fault_kind("embed-key-for-another-url")
def test_a_key_refused_is_one_line_and_never_printed(capsys, llm, corpus, monkeypatch):
    monkeypatch.setenv("EMB_KEY", "sk-secret-123")
    r = embed(capsys, llm, corpus, "--api-key-env", "EMB_KEY")
    assert r.code == 0 and llm.embedding_requests()[0].headers.get("authorization") == "Bearer sk-secret-123"
    monkeypatch.setenv("CRASE_API_KEY", "sk-default-456")  # the default endpoint's key: not for this URL
    folder_embeddings_file(corpus).unlink()
    r = embed(capsys, llm, corpus)
    assert r.code == 0 and "sk-" not in r.err + r.out
    assert llm.embedding_requests()[-1].headers.get("authorization") == "Bearer no-key"


# --- interruptions --------------------------------------------------------------------------------------------

@pytest.mark.fault_kind("embed-budget-runs-out")
def test_the_call_budget_stops_the_job_and_the_rerun_continues(capsys, llm, corpus, tmp_path, tiny_corpus_dir):
    want = reference(capsys, llm, tmp_path, tiny_corpus_dir)
    before = len(llm.embedding_requests())
    error = one_error(embed(capsys, llm, corpus, "--batch-size", "1", "--concurrency", "1", "--max-calls", "2"))
    assert error.startswith("embedding stopped after 2 of 6 papers: ") and "budget of 2 model calls" in error
    assert len(llm.embedding_requests()) - before == 2
    assert not folder_embeddings_file(corpus).exists()
    no_feedback(capsys, corpus)  # the partial rows are never read by a query
    r = embed(capsys, llm, corpus, "--batch-size", "1", "--concurrency", "1")
    assert r.code == 0 and "resuming: 2 papers were embedded by an interrupted run" in r.err
    texts = [t for req in llm.embedding_requests()[before + 2 :] for t in req.body["input"]]
    assert len(texts) == 4  # only the 4 papers not embedded before
    assert file_hash(corpus) == want
    assert not list(folder_embeddings_file(corpus).parent.glob(".partial-*"))


@pytest.mark.fault_kind("embed-torn-last-row", "embed-damaged-partial-rows")
def test_a_torn_last_row_is_cut_and_rows_that_fail_a_check_start_over(capsys, llm, corpus, tmp_path,
                                                                       tiny_corpus_dir):
    want = reference(capsys, llm, tmp_path, tiny_corpus_dir)
    embed(capsys, llm, corpus, "--batch-size", "1", "--concurrency", "1", "--max-calls", "3")
    (partial,) = folder_embeddings_file(corpus).parent.glob(".partial-*")
    rows = partial / "rows.f16"
    with open(rows, "ab") as f:
        f.write(b"\x00\x3c\x00")  # a crash mid-row: three bytes of a fourth row
    r = embed(capsys, llm, corpus)
    assert r.code == 0 and "resuming: 3 papers" in r.err and file_hash(corpus) == want
    # rows that are not unit vectors (a damaged partial file) are thrown away, not written into the result
    shutil.rmtree(corpus / "embeddings")
    embed(capsys, llm, corpus, "--batch-size", "1", "--concurrency", "1", "--max-calls", "3")
    (partial,) = folder_embeddings_file(corpus).parent.glob(".partial-*")
    (partial / "rows.f16").write_bytes(np.full((3, 64), 7.0, dtype="<f2").tobytes())
    r = embed(capsys, llm, corpus)
    assert r.code == 0 and "fail a check" in r.err and file_hash(corpus) == want


@pytest.mark.fault_kind("embed-crash-between-renames")
def test_a_crash_between_the_two_renames_leaves_a_file_no_query_uses(capsys, llm, corpus):
    assert embed(capsys, llm, corpus).code == 0
    path = folder_embeddings_file(corpus)
    data = bytearray(path.read_bytes())
    data[-2:] = b"\x00\x3c"  # the .npy of a later run, renamed before its manifest was: the checksum is the old one
    path.write_bytes(bytes(data))
    r = crase(capsys, "query", QUERY, "--corpus", corpus, "--quiet")
    assert r.code == 0 and "its bytes do not match the SHA-256 its manifest records" in r.out
    assert embed(capsys, llm, corpus).code == 0  # the next run writes a sound file again (nothing reusable)
    assert crase(capsys, "corpus", "check", corpus).code == 0


@pytest.mark.fault_kind("embed-killed-mid-job")
def test_a_killed_job_resumes_and_writes_the_same_file(capsys, corpus, tmp_path, tiny_corpus_dir):
    """SIGKILL in the middle of the job (after its first round is on disk): the rerun embeds the rest only."""
    with FakeOpenAI(latency=0.3) as server:
        want = reference(capsys, server, tmp_path, tiny_corpus_dir)
        args = [sys.executable, "-m", "crase_core.cli", "corpus", "embed", str(corpus), "--base-url",
                server.base_url, "--model", "fake-model", "--batch-size", "1", "--concurrency", "1"]
        env = cli_env(os.environ["CRASE_CACHE_DIR"])
        proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        partial_dir = folder_embeddings_file(corpus).parent
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(p.stat().st_size for p in partial_dir.glob(".partial-*/rows.f16")):
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        assert not folder_embeddings_file(corpus).exists()
        done = sum(p.stat().st_size for p in partial_dir.glob(".partial-*/rows.f16")) // 128
        assert 1 <= done < 6
        r = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert f"resuming: {done} papers" in r.stderr
        assert file_hash(corpus) == want


@pytest.mark.fault_kind("embed-bad-options")
def test_bad_options_are_refused_before_anything_runs(capsys, corpus):
    assert "say which embedder" in one_error(crase(capsys, "corpus", "embed", corpus, "--minilm", "--base-url",
                                                   "http://127.0.0.1:9/v1"))
    for flag, value in (("--batch-size", "0"), ("--concurrency", "100000"), ("--max-chars", "1"),
                        ("--max-calls", "0"), ("--deadline", "-1")):
        error = one_error(crase(capsys, "corpus", "embed", corpus, "--base-url", "http://127.0.0.1:9/v1",
                                "--model", "m", flag, value))
        assert flag in error
    assert "give the embedding model's name with --model" in one_error(
        crase(capsys, "corpus", "embed", corpus, "--base-url", "http://127.0.0.1:9/v1"))
    assert "is not an http(s) URL" in one_error(crase(capsys, "corpus", "embed", corpus, "--base-url", "file:///x",
                                                     "--model", "m"))
