"""``crase rerank`` and ``crase show --why`` on hostile input: malformed CITING:CITED, crafted traces, the new
run's file refused or its write interrupted. Each refusal is one line and exit status 2; nothing is lost (the
parent run and an existing NEW.json are unchanged, no temp file is left behind).
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from cli_tools import QUERY, crase, one_error

from crase_core import trace as trace_io


@pytest.fixture(scope="module")
def run(tiny_corpus_dir, tmp_path_factory) -> Path:
    """A saved run of the tiny corpus with θ_lexical 0.15 and τ_lexical 0 (both kept and pruned edges, and
    results), whatever the default's pruning rule is. θ_lexical 0.15 on word-overlap/v2's scale is the 0.75 of
    lexical-support/v1's logistic one (≥ 15% of a claim's IDF weight shared); 0.75 on v2's scale prunes every
    edge of this corpus."""
    from crase_core.cli.main import main

    path = tmp_path_factory.mktemp("rerank") / "run.json"
    assert main(["query", QUERY, "--corpus", str(tiny_corpus_dir), "--quiet", "--theta-lexical", "0.15",
                 "--tau-lexical", "0", "--json", str(path)]) == 0
    trace = trace_io.load(path)
    assert any(e.kept for e in trace.edges) and any(not e.kept for e in trace.edges) and trace.results
    return path


def _kept_edge(path: Path) -> str:
    e = next(e for e in trace_io.load(path).edges if e.kept)
    return f"{e.citing}:{e.cited}"


def _unchanged(path: Path, before: bytes) -> None:
    assert path.read_bytes() == before
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("edge, message", [
    ("", "malformed edge ''"),
    (":", "malformed edge ':'"),
    ("9802001", "malformed edge '9802001'"),
    ("9802001:", "malformed edge '9802001:'"),
    (":9801001", "malformed edge ':9801001'"),
    ("9802001 :9801001", "holds spaces or control characters"),
    ("9802001:\x1b[2J9801001", "holds spaces or control characters"),
    ("9802001:nope", "the run has no edge 9802001:nope"),
    ("9801001:9802001", "the run has no edge 9801001:9802001"),  # the citation the other way round
    ("9802001:9801001:x", "the run has no edge 9802001:9801001:x"),
    ("a" * 5000 + ":b", "is longer than 600 characters"),
])
@pytest.mark.fault_kind("rerank-malformed-or-unknown-edge")
def test_malformed_or_unknown_edge(capsys, tmp_path, run, edge, message):
    before = run.read_bytes()
    r = crase(capsys, "rerank", run, "--prune", edge, "--json", tmp_path / "new.json")
    assert message in one_error(r)
    assert "\x1b" not in r.err
    assert not (tmp_path / "new.json").exists()
    _unchanged(run, before)


@pytest.mark.fault_kind("rerank-edge-pruned-and-kept")
def test_an_edge_both_pruned_and_kept(capsys, tmp_path, run):
    edge = _kept_edge(run)
    r = crase(capsys, "rerank", run, "--prune", edge, "--keep", edge, "--json", tmp_path / "new.json")
    assert one_error(r) == f"the edge {edge} is given as both --prune and --keep"
    assert not (tmp_path / "new.json").exists()


@pytest.mark.fault_kind("rerank-output-is-the-parent")
def test_the_new_run_over_its_parent_is_refused(capsys, tmp_path, run):
    copy = tmp_path / "run.json"
    copy.write_bytes(run.read_bytes())
    before = copy.read_bytes()
    same = tmp_path / "." / "run.json"
    r = crase(capsys, "rerank", copy, "--prune", _kept_edge(run), "--json", same)
    assert one_error(r).startswith(f"--json {same} is the run being re-ranked")
    _unchanged(copy, before)


@pytest.mark.parametrize("kind", ["folder", "symlink"])
@pytest.mark.fault_kind("json-out-directory", "json-out-symlink-pipe-device")
def test_the_new_run_file_is_not_a_regular_file(capsys, tmp_path, run, kind):
    target = tmp_path / "new.json"
    if kind == "folder":
        target.mkdir()
    else:
        (tmp_path / "elsewhere.json").write_text("keep me", encoding="utf-8")
        target.symlink_to(tmp_path / "elsewhere.json")
    r = crase(capsys, "rerank", run, "--prune", _kept_edge(run), "--json", target)
    assert "not a regular file" in one_error(r)
    if kind == "symlink":
        assert (tmp_path / "elsewhere.json").read_text(encoding="utf-8") == "keep me"


@pytest.mark.parametrize("fault", ["disk full", "interrupted"])
@pytest.mark.fault_kind("rerank-write-interrupted")
def test_an_interrupted_write_of_the_new_run_loses_nothing(capsys, tmp_path, run, monkeypatch, fault):
    """The new run's write fails at fsync (disk full) or is interrupted before its rename (Ctrl-C): an
    existing NEW.json keeps its content, the parent is unchanged and no temp file is left."""
    import crase_core.atomic as atomic

    target = tmp_path / "new.json"
    target.write_text("an earlier re-ranked run", encoding="utf-8")
    before_parent = run.read_bytes()

    def fail(*_a):
        if fault == "disk full":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "fsync" if fault == "disk full" else "replace", fail)
    r = crase(capsys, "rerank", run, "--prune", _kept_edge(run), "--json", target)
    if fault == "disk full":
        assert one_error(r) == f"cannot write {target}: No space left on device"
    else:
        assert r.code == 130 and "interrupted" in r.err
    _unchanged(target, b"an earlier re-ranked run")
    assert run.read_bytes() == before_parent


def _crafted(tmp_path: Path, run: Path, change) -> Path:
    data = json.loads(run.read_text(encoding="utf-8"))
    change(data)
    path = tmp_path / "crafted.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _set_first_edge(**values):
    def change(data):
        data["edges"][0].update(values)
    return change


def _duplicate_node(data):
    data["nodes"].append(data["nodes"][0])


def _parts_not_a_list(data):
    data["results"][0]["score_parts"] = "all of it"


def _nested_paths(data):
    data["results"][0]["score_parts"][0]["paths"] = [{"nodes": [[["x"]]], "along": [], "value": 1.0}]


@pytest.mark.parametrize("change, message", [
    (_set_first_edge(citing="ghost"), "edges.0 (ghost → "),
    (_set_first_edge(cited="\x1b[31mghost"), "joins a paper that is not among the nodes"),
    (_duplicate_node, "two nodes have the same paper id"),
    (_set_first_edge(kept=True, weight=-1.0), "edges.0 has a negative weight"),
    (_parts_not_a_list, "not a valid Crase trace: results.0.score_parts"),
    (_nested_paths, "not a valid Crase trace: results.0.score_parts.0.paths.0.nodes.0"),
])
@pytest.mark.fault_kind("rerank-crafted-trace")
def test_crafted_traces_are_refused(capsys, tmp_path, run, change, message):
    path = _crafted(tmp_path, run, change)
    r = crase(capsys, "rerank", path, "--json", tmp_path / "new.json")
    assert message in one_error(r)
    assert "\x1b" not in r.err
    assert not (tmp_path / "new.json").exists()


@pytest.mark.fault_kind("rerank-crafted-parent-run-id")
def test_a_crafted_parent_run_id_is_only_text(capsys, tmp_path, run):
    """A trace that claims a parent is re-ranked like any other; its child names the claimed id as its parent."""
    path = _crafted(tmp_path, run, lambda d: d.update(parent_run_id="../../etc/passwd\x1b[2J", run_id="p"))
    r = crase(capsys, "rerank", path, "--prune", _kept_edge(run), "--json", tmp_path / "new.json")
    assert r.code == 0, r.err
    assert "\x1b" not in r.out
    assert trace_io.load(tmp_path / "new.json").parent_run_id == "p"


@pytest.mark.fault_kind("rerank-every-edge-pruned")
def test_pruning_every_kept_edge_leaves_a_run_that_says_so(capsys, tmp_path, run):
    trace = trace_io.load(run)
    edges = [f"{e.citing}:{e.cited}" for e in trace.edges if e.kept]
    r = crase(capsys, "rerank", run, "--prune", *edges, "--json", tmp_path / "new.json")
    assert r.code == 0, r.err
    child = trace_io.load(tmp_path / "new.json")
    assert not any(e.kept for e in child.edges)
    # what is left are the papers kept by their text match (the text candidates, the question's top hits)
    assert all(s.fate == "pruned" for s in child.seeds if not child.node(s.paper_id).text_match)
    assert all(s.fate_reason.startswith("kept by its text match") for s in child.seeds
               if child.node(s.paper_id).text_match)
    assert {r.paper_id for r in child.results} == {n.paper.id for n in child.nodes if n.text_match}
    for res in child.results:  # what is left (text candidates) still explains its score
        assert sum(p.value for p in res.score_parts) == pytest.approx(res.score, abs=1e-15)
    show = crase(capsys, "show", tmp_path / "new.json")
    assert show.code == 0
