"""Faults around trace files: planted symlinks, non-regular or unwritable targets, hostile trace input."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from fault_tools import query, ranked, run_cli
from tiny_corpus import write_corpus

from crase_core import trace as trace_io
from crase_core.errors import TraceError


@pytest.fixture
def corpus(tmp_path) -> Path:
    return write_corpus(tmp_path / "tiny")


@pytest.mark.fault_kind("json-out-planted-temp-symlink")
def test_json_output_is_never_written_through_a_planted_temp_symlink(tmp_path, corpus):
    victim = tmp_path / "victim.txt"
    victim.write_text("do not overwrite\n")
    out = tmp_path / "out.json"
    planted = tmp_path / "out.json.tmp"
    planted.symlink_to(victim)
    r = query(corpus, tmp_path / "cache", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "do not overwrite\n"
    assert planted.is_symlink() and os.readlink(planted) == str(victim)  # left alone
    assert out.is_file() and not out.is_symlink()
    # the file holds the run's whole answer: the same as a run written where nothing was planted
    clean = tmp_path / "clean.json"
    assert query(corpus, tmp_path / "cache", "--json", str(clean)).returncode == 0
    got = [r.paper_id for r in trace_io.load(out).results]
    assert got and got == [r.paper_id for r in trace_io.load(clean).results]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.json")] == []  # no temp left behind


@pytest.mark.fault_kind("json-out-symlink-pipe-device")
def test_json_output_refuses_a_symlink_or_pipe_target_before_the_run(tmp_path, corpus):
    victim = tmp_path / "victim.txt"
    victim.write_text("do not overwrite\n")
    link = tmp_path / "link.json"
    link.symlink_to(victim)
    r = query(corpus, tmp_path / "cache", "--json", str(link))
    assert r.returncode == 2
    assert r.stderr.strip() == f"crase: error: refusing to write {link}: it is a symbolic link, not a regular file"
    assert r.stdout == ""  # refused before the run, not after it
    assert victim.read_text() == "do not overwrite\n" and link.is_symlink()
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    r = query(corpus, tmp_path / "cache", "--json", str(fifo))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == f"crase: error: refusing to write {fifo}: it is a pipe, not a regular file"
    assert fifo.is_fifo()  # not replaced by a regular file
    fifo.unlink()  # the fault gone: the same path works
    ok = query(corpus, tmp_path / "cache", "--json", str(fifo))
    assert ok.returncode == 0 and fifo.is_file() and trace_io.load(fifo).query == "black hole entropy microstates"


@pytest.mark.fault_kind("json-out-directory")
def test_json_output_to_a_directory_fails_before_the_run(tmp_path, corpus):
    folder = tmp_path / "outdir"
    folder.mkdir()
    r = query(corpus, tmp_path / "cache", "--json", str(folder))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == f"crase: error: refusing to write {folder}: it is a directory, not a regular file"
    assert list(folder.iterdir()) == [] and not (tmp_path / "outdir.tmp").exists()
    ok = query(corpus, tmp_path / "cache", "--json", str(folder / "run.json"))
    assert ok.returncode == 0 and (folder / "run.json").is_file()


@pytest.mark.fault_kind("show-device-fifo-oversized")
def test_show_refuses_devices_and_pipes_and_caps_the_size(tmp_path, corpus):
    try:
        r = run_cli("show", "/dev/zero", cache_dir=tmp_path / "cache", timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("crase show /dev/zero read forever")
    assert r.returncode == 2
    assert r.stderr.strip() == "crase: error: cannot read trace /dev/zero: not a regular file"
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    r = run_cli("show", str(fifo), cache_dir=tmp_path / "cache", timeout=30)  # no writer: would block forever
    assert r.returncode == 2 and r.stderr.strip() == f"crase: error: cannot read trace {fifo}: not a regular file"
    good = tmp_path / "good.json"
    assert query(corpus, tmp_path / "cache", "--json", str(good)).returncode == 0
    with pytest.raises(TraceError, match=r"bytes is more than the 1,000 a trace may have"):
        trace_io.load(good, max_bytes=1000)
    shown = run_cli("show", str(good), cache_dir=tmp_path / "cache")  # the fault gone: a regular trace shows
    assert shown.returncode == 0 and "Black hole entropy from D-branes" in shown.stdout


@pytest.mark.fault_kind("trace-result-not-a-node")
def test_show_rejects_a_trace_whose_result_is_not_a_node(tmp_path, corpus):
    good = tmp_path / "good.json"
    assert query(corpus, tmp_path / "cache", "--json", str(good)).returncode == 0
    data = json.loads(good.read_text())
    data["results"][0]["paper_id"] = "nope"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    r = run_cli("show", str(bad), cache_dir=tmp_path / "cache")
    assert r.returncode == 2
    assert r.stderr.strip() == ("crase: error: not a valid Crase trace: results.0: paper 'nope' is not among "
                                "the nodes")
    ok = run_cli("show", str(good), cache_dir=tmp_path / "cache")
    assert ok.returncode == 0 and ranked(ok.stdout).startswith("Query: black hole entropy microstates")


@pytest.mark.fault_kind("trace-deeply-nested")
def test_show_rejects_deeply_nested_json(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    r = run_cli("show", str(deep), cache_dir=tmp_path / "cache")
    assert r.returncode == 2
    assert r.stderr.strip() == "crase: error: not a Crase trace (JSON nested too deeply)"
    with pytest.raises(TraceError, match="nested too deeply"):
        trace_io.loads('{"a":' * 100_000 + "1" + "}" * 100_000)
