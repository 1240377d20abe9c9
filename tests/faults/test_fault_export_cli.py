"""``crase export`` on hostile arguments and traces: ``--out`` naming the run itself (however spelt: the same path,
``./``, ``..``, a symbolic link, a hard link), a crafted trace whose edge names a paper that is not a node, and a
trace too large to export. Each refusal is one line and exit status 2; the run is unchanged, nothing is written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_tools import QUERY, crase, one_error

from crase_core import trace as trace_io
from crase_core.errors import TraceError


@pytest.fixture(scope="module")
def run(tiny_corpus_dir, tmp_path_factory) -> Path:
    from crase_core.cli.main import main

    path = tmp_path_factory.mktemp("export") / "run.json"
    assert main(["query", QUERY, "--corpus", str(tiny_corpus_dir), "--quiet", "--json", str(path)]) == 0
    return path


def _copy(tmp_path: Path, run: Path) -> Path:
    copy = tmp_path / "run.json"
    copy.write_bytes(run.read_bytes())
    return copy


def _nothing_else(folder: Path, *keep: str) -> None:
    assert sorted(p.name for p in folder.iterdir()) == sorted(keep)


@pytest.mark.parametrize("spelling", ["same", "dot", "dotdot", "symlink", "hardlink"])
@pytest.mark.fault_kind("export-over-its-run")
def test_export_over_its_own_run_is_refused(capsys, tmp_path, run, monkeypatch, spelling):
    copy = _copy(tmp_path, run)
    before = copy.read_bytes()
    monkeypatch.chdir(tmp_path)
    out = {"same": copy, "dot": Path("./run.json"), "dotdot": tmp_path / ".." / tmp_path.name / "run.json",
           "symlink": tmp_path / "page.html", "hardlink": tmp_path / "page.html"}[spelling]
    if spelling == "symlink":
        out.symlink_to(copy)
    elif spelling == "hardlink":
        os.link(copy, out)
    r = crase(capsys, "export", "run.json" if spelling == "dot" else copy, "--format", "html", "--out", out)
    assert one_error(r) == (f"--out {out} is the run being exported; write the page to another file (the run is "
                            "kept as it is)")
    assert copy.read_bytes() == before
    _nothing_else(tmp_path, "run.json", *(["page.html"] if spelling in ("symlink", "hardlink") else []))
    ok = crase(capsys, "export", copy, "--out", tmp_path / "run.html")  # the fault gone: the page is written
    assert ok.code == 0 and (tmp_path / "run.html").read_text(encoding="utf-8").startswith("<!doctype html>")


@pytest.mark.fault_kind("export-edge-to-unknown-paper")
def test_a_trace_whose_edge_names_no_node_is_not_a_valid_trace(capsys, tmp_path, run):
    data = json.loads(run.read_text(encoding="utf-8"))
    data["edges"][0]["citing"] = "ghost\x1b[31m"
    crafted = tmp_path / "crafted.json"
    crafted.write_text(json.dumps(data), encoding="utf-8")
    want = (f"not a valid Crase trace: edges.0 (ghost → {data['edges'][0]['cited']}) joins a paper that is not "
            "among the nodes")
    for command in (["export", crafted, "--out", tmp_path / "page.html"],
                    ["rerank", crafted, "--json", tmp_path / "new.json"], ["show", crafted]):
        assert one_error(crase(capsys, *command)) == want, command  # one check, one message, every reader
    _nothing_else(tmp_path, "crafted.json")
    with pytest.raises(TraceError):
        trace_io.load(crafted)


def _padded(tmp_path: Path, run: Path, size: int) -> Path:
    """The run's trace followed by spaces up to ``size`` bytes: still a valid trace, as large as a huge run's."""
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:
        f.write(run.read_bytes())
        f.truncate(size)  # a sparse tail of zero bytes …
    with open(path, "r+b") as f:  # … made spaces (JSON whitespace), a block at a time
        f.seek(run.stat().st_size)
        block = b" " * (1 << 20)
        left = size - run.stat().st_size
        while left > 0:
            left -= f.write(block[: min(left, len(block))])
    return path


@pytest.mark.fault_kind("export-huge-trace")
def test_a_trace_file_larger_than_the_export_takes_is_refused_before_it_is_read(capsys, tmp_path, run,
                                                                                 monkeypatch):
    """A 269 MB trace (the probe's 100,000 papers and 400,000 edges took over 300 s and did not finish) is refused
    at once, naming the size that works; the trace is never parsed and no page is written."""
    from crase_core.views.export import MAX_HTML_TRACE_BYTES

    huge = _padded(tmp_path, run, 269_000_000)
    assert huge.stat().st_size > MAX_HTML_TRACE_BYTES
    assert trace_io.load(huge).run_id == trace_io.load(run).run_id  # a valid trace (only its size is at fault)

    def never(*_a, **_k):
        raise AssertionError("the trace was read")

    monkeypatch.setattr(trace_io, "load", never)
    r = crase(capsys, "export", huge, "--out", tmp_path / "page.html")
    assert one_error(r) == (f"{huge} is 269 MB; the HTML export takes runs of at most 10,000 papers and 150,000 "
                            "edges (a trace file of at most 160 MiB): export a smaller run (--hops 1.5, or "
                            "--neighbor-cap N), or read this one with `crase show RUN.json --edges`")
    _nothing_else(tmp_path, "huge.json")


@pytest.mark.fault_kind("export-huge-trace")
def test_a_run_with_more_papers_than_the_export_takes_is_refused(capsys, tmp_path, run):
    """10,001 papers (a 7 MB trace: under the file bound) are refused once read, before any layout."""
    data = json.loads(run.read_text(encoding="utf-8"))
    node = data["nodes"][-1]
    data["nodes"] += [{**node, "paper": {**node["paper"], "id": f"X{i}"}, "rank": None, "kept": False}
                      for i in range(10_001 - len(data["nodes"]))]
    big = tmp_path / "big.json"
    big.write_text(json.dumps(data), encoding="utf-8")
    r = crase(capsys, "export", big, "--out", tmp_path / "page.html")
    assert one_error(r).startswith(f"the run has 10,001 papers and {len(data['edges'])} edges; the HTML export takes "
                                   "runs of at most 10,000 papers and 150,000 edges")
    _nothing_else(tmp_path, "big.json")
    data["nodes"] = data["nodes"][:10_000]  # at the bound: the page is written
    big.write_text(json.dumps(data), encoding="utf-8")
    assert crase(capsys, "export", big, "--out", tmp_path / "page.html").code == 0
