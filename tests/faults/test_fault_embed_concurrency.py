"""Several ``crase corpus embed`` of one corpus at once (real processes, the fake OpenAI-compatible server over
real HTTP): one job writes the rows and the file, the others wait for it (saying so) and then find the file up to
date; none dies on rows another job is writing (was: three of four ended in ``internal error (ValueError: mmap
length is greater than file size)``)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_tools import crase
from fault_tools import cli_env

from crase_core.retrieval.semantic import folder_embeddings_file
from crase_core.testing.fake_openai import FakeOpenAI

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.fault_kind("embed-concurrent-jobs")
def test_four_concurrent_embeds_of_one_corpus_wait_for_each_other(capsys, tmp_path, tiny_corpus_dir):
    corpus = tmp_path / "tiny"
    shutil.copytree(tiny_corpus_dir, corpus)
    with FakeOpenAI(latency=0.2) as server:
        args = [sys.executable, "-m", "crase_core.cli", "corpus", "embed", str(corpus), "--base-url",
                server.base_url, "--model", "fake-model", "--batch-size", "1", "--concurrency", "1"]
        env = cli_env(os.environ["CRASE_CACHE_DIR"])
        assert crase(capsys, "corpus", "build", corpus).code == 0  # the store exists: the jobs meet at the rows
        procs = [subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(4)]
        done = [(p.wait(300), *p.communicate()) for p in procs]
        assert [code for code, _, _ in done] == [0, 0, 0, 0], [err for _, _, err in done]
        assert not any("internal error" in err or "Traceback" in err for _, _, err in done)
        outs = [out for _, out, _ in done]
        assert sum(out.startswith("embedded 6 papers") for out in outs) == 1, outs  # one job did the work
        assert sum(": up to date (" in out for out in outs) == 3, outs  # the others waited, then found it done
        assert sum("waiting for it to finish" in err for _, _, err in done) >= 1
        assert not list(folder_embeddings_file(corpus).parent.glob(".partial-*"))
        written = hashlib.sha256(folder_embeddings_file(corpus).read_bytes()).hexdigest()
        alone = tmp_path / "alone" / "tiny"  # the file one job alone writes (the fake's vectors are deterministic)
        shutil.copytree(tiny_corpus_dir, alone)
        r = subprocess.run([*args[:5], str(alone), *args[6:]], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        assert hashlib.sha256(folder_embeddings_file(alone).read_bytes()).hexdigest() == written
    check = crase(capsys, "corpus", "check", corpus)
    assert check.code == 0 and "embeddings.f16.npy: sound" in check.out, check.out + check.err
