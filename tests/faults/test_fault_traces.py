"""``crase show`` on damaged, hostile or odd trace files: one clear line and exit status 2, never a hang.

A valid trace of the tiny corpus is written once; each case damages a copy and checks the exact
message; the intact trace still shows the same ranked list afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_tools import QUERY, crase, one_error, ranked
from fault_tools import REPO, cli_env, shared_tmp, without_permission_override

from crase_core import trace as trace_io


@pytest.fixture(scope="module")
def good(tiny_corpus_dir, tmp_path_factory) -> tuple[Path, str]:
    """(a valid trace file, the ranked list ``crase show`` prints for it)."""
    from crase_core.cli.main import main

    path = tmp_path_factory.mktemp("trace") / "run.json"
    assert main(["query", QUERY, "--corpus", str(tiny_corpus_dir), "--quiet", "--json", str(path)]) == 0
    return path, ranked(_show_text(path))


def _show_text(path: Path) -> str:
    from crase_core.cli.main import format_trace

    return format_trace(trace_io.load(path))


def _show(capsys, path: Path):
    return crase(capsys, "show", path)


def _data(good) -> dict:
    return json.loads(good[0].read_text(encoding="utf-8"))


def _write(tmp_path: Path, data: object) -> Path:
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(data), encoding="utf-8")
    return p


def _still_good(capsys, good) -> None:
    r = _show(capsys, good[0])
    assert r.code == 0 and ranked(r.out) == good[1]


@pytest.mark.fault_kind("trace-truncated")
def test_truncated_trace(capsys, tmp_path, good):
    p = tmp_path / "cut.json"
    text = good[0].read_text(encoding="utf-8")
    p.write_text(text[: len(text) // 2], encoding="utf-8")
    assert one_error(_show(capsys, p)).startswith("not a JSON trace (")
    _still_good(capsys, good)


@pytest.mark.parametrize("content, message", [
    (b"", "not a JSON trace (Expecting value: line 1 column 1 (char 0))"),
    (b"\xff\xfe\x00garbage", "not a JSON trace (Expecting value: line 1 column 1 (char 0))"),
    (b"[1, 2, 3]", "not a Crase trace (expected a JSON object)"),
], ids=["empty-file", "binary-garbage", "json-array"])
@pytest.mark.fault_kind("trace-not-a-trace")
def test_file_that_is_not_a_trace(capsys, tmp_path, content, message):
    p = tmp_path / "x.json"
    p.write_bytes(content)
    assert one_error(_show(capsys, p)) == message


@pytest.mark.parametrize("version", [4, 0, "1", None, True])
@pytest.mark.fault_kind("trace-unknown-version")
def test_unknown_trace_version(capsys, tmp_path, good, version):
    data = _data(good)
    data["trace_version"] = version
    assert one_error(_show(capsys, _write(tmp_path, data))) == \
        f"trace version {version!r} is not supported (this Crase reads versions 1 to 3)"


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["results"][0].update(score="high"),
     "not a valid Crase trace: results.0.score: Input should be a valid number, unable to parse string as a number"),
    (lambda d: d.update(nodes={"a": 1}), "not a valid Crase trace: nodes: Input should be a valid list"),
    (lambda d: d["results"][0].update(rank=[1]), "not a valid Crase trace: results.0.rank: Input should be a valid "
                                                  "integer"),
], ids=["text-for-number", "object-for-list", "list-for-int"])
@pytest.mark.fault_kind("trace-wrong-type")
def test_field_of_the_wrong_type(capsys, tmp_path, good, mutate, message):
    data = _data(good)
    mutate(data)
    assert one_error(_show(capsys, _write(tmp_path, data))) == message


@pytest.mark.parametrize("field", ["query", "settings", "results"])
@pytest.mark.fault_kind("trace-missing-field")
def test_missing_field(capsys, tmp_path, good, field):
    data = _data(good)
    del data[field]
    assert one_error(_show(capsys, _write(tmp_path, data))) == f"not a valid Crase trace: {field}: Field required"


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
@pytest.mark.fault_kind("trace-non-finite")
def test_non_finite_number_in_a_trace(capsys, tmp_path, good, number):
    text = good[0].read_text(encoding="utf-8")
    score = json.dumps(_data(good)["results"][0]["score"])
    p = tmp_path / "nan.json"
    p.write_text(text.replace(f'"score":{score}', f'"score":{number}', 1), encoding="utf-8")
    assert p.read_text(encoding="utf-8") != text
    assert one_error(_show(capsys, p)) == \
        f"not a valid Crase trace: the number {number} is not finite (a trace holds finite numbers only)"


@pytest.mark.parametrize("number", ["1e999", "-1E+400"])
@pytest.mark.fault_kind("trace-non-finite")
def test_non_finite_number_deep_in_a_trace(capsys, tmp_path, good, number):
    """A number that reads as infinite inside an edge's matrix (the fast parser reads it, validation refuses it):
    the same message, naming the number as written."""
    data = _data(good)
    edge = next(e for e in data["edges"] if e["matrix"] and e["matrix"][0])
    edge["matrix"][0][0] = 12345.678
    p = tmp_path / "deep.json"
    p.write_text(json.dumps(data).replace("12345.678", number, 1), encoding="utf-8")
    assert one_error(_show(capsys, p)) == \
        f"not a valid Crase trace: the number {number} is not finite (a trace holds finite numbers only)"


@pytest.mark.fault_kind("trace-text-the-fast-parser-refuses")
def test_a_title_the_fast_parser_refuses_loads_as_json_reads_it(good, tmp_path):
    """An escaped lone surrogate in a title: pydantic's JSON parser refuses it, ``json`` reads it; the trace loads."""
    data = _data(good)
    data["nodes"][0]["paper"]["title"] = "PLACEHOLDER"
    text = json.dumps(data).replace("PLACEHOLDER", "A \\ud800 title", 1)
    assert trace_io.loads(text).nodes[0].paper.title == "A \ud800 title"


@pytest.mark.fault_kind("trace-over-cap")
def test_trace_over_the_size_cap_is_refused_without_reading(capsys, tmp_path):
    p = tmp_path / "huge.json"
    with open(p, "wb") as f:  # sparse: 1 byte more than the cap, no disk used
        f.truncate(trace_io.MAX_TRACE_BYTES + 1)
    assert one_error(_show(capsys, p)) == (f"cannot read trace {p}: {trace_io.MAX_TRACE_BYTES + 1:,} bytes is more "
                                           f"than the {trace_io.MAX_TRACE_BYTES:,} a trace may have")


@pytest.mark.parametrize("kind", ["directory", "missing"])
@pytest.mark.fault_kind("trace-path-not-a-file")
def test_trace_path_that_is_not_a_file(capsys, tmp_path, kind):
    p = tmp_path if kind == "directory" else tmp_path / "missing.json"
    why = "not a regular file" if kind == "directory" else "No such file or directory"
    assert one_error(_show(capsys, p)) == f"cannot read trace {p}: {why}"


@pytest.mark.fault_kind("trace-unreadable")
def test_unreadable_trace_file(good):
    folder = shared_tmp("trace-perm")
    p = folder / "secret.json"
    p.write_bytes(good[0].read_bytes())
    p.chmod(0o000)
    r = subprocess.run([*without_permission_override(), sys.executable, "-m", "crase_core.cli", "show", str(p)],
                       cwd=str(REPO), env=cli_env(folder), capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", f"crase: error: cannot read trace {p}: Permission denied\n")
    p.chmod(0o644)
    ok = subprocess.run([sys.executable, "-m", "crase_core.cli", "show", str(p)], cwd=str(REPO), env=cli_env(folder),
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and ranked(ok.stdout) == good[1]
    os.unlink(p)


@pytest.mark.fault_kind("trace-old-version")
def test_a_version_1_trace_is_migrated_and_a_version_2_one_is_read_as_written(tmp_path, good):
    """A version-1 trace lacking the knobs added since loads with what its run used (the migration's data);
    the same fields missing from a trace of this version are today's defaults (nothing is migrated)."""
    from crase_core.trace import ROUND3_DEFAULTS, TRACE_VERSION, from_dict

    data = _data(good)
    for name in [*ROUND3_DEFAULTS, "text_matches"]:
        data["settings"].pop(name, None)
    now = from_dict({**data, "trace_version": TRACE_VERSION})
    v2 = from_dict({**data, "trace_version": 2})
    v1 = from_dict({**data, "trace_version": 1})
    assert v1.trace_version == v2.trace_version == now.trace_version == TRACE_VERSION == 3
    assert v1.settings.query_seeds == 0 and v1.settings.semantic_feedback_scope == "all"
    assert v2.settings.query_seeds == 5 and v2.settings.semantic_feedback_scope == "fusion"
    # no run before version 3 kept a top text match without a kept edge; a version-3 trace records its own
    assert v1.settings.text_matches == v2.settings.text_matches == 0 and now.settings.text_matches == 3
