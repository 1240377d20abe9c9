"""``crase eval`` faults: resuming into a folder pinned by another configuration, bad benchmark lines,
two evals on one folder, and unusable options. Each checks the exact message and exit status, that
no row was added where none may be, and that the run once the fault is gone is right."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest
from cli_tools import crase, one_error

from crase_core import machine
from crase_core.evaluation.run_file import read_run, run_rows

LINES = [
    {"qid": "q1", "query": "black hole entropy", "relevant": ["9801001"], "paper_id": "0001001"},
    {"qid": "q2", "query": "glueball lattice", "relevant": ["9902001"]},
]


def _bench(folder: Path, lines: list[str] | None = None) -> Path:
    p = folder / "bench.jsonl"
    p.write_text("".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in (lines or LINES)),
                 encoding="utf-8")
    return p


def _eval(capsys, bench: Path, out: Path, corpus: Path, *more: str | Path):
    return crase(capsys, "eval", bench, "--out", out, "--corpus", corpus, *more)


def _rows(out: Path) -> list[dict]:
    return run_rows(out)


DEAD = "http://127.0.0.1:9/v1"  # nothing listens on the discard port: every model call fails fast


@pytest.mark.fault_kind("eval-resume-other-model")
def test_resume_with_another_model_is_refused_naming_the_model(capsys, tmp_path, tiny_corpus_dir):
    bench, out = _bench(tmp_path), tmp_path / "out"
    a = _eval(capsys, bench, out, tiny_corpus_dir, "--backend", "openai", "--base-url", DEAD, "--model", "model-A",
              "--max-retries", "0")
    assert a.code == 3, a.err  # every query errored: said, and the exit status says so
    assert "2 of 2 queries errored" in a.err
    saved = (out / "run.json.gz").read_bytes()
    assert all("cannot reach the model endpoint" in r["error"] for r in _rows(out))
    b = _eval(capsys, bench, out, tiny_corpus_dir, "--backend", "openai", "--base-url", DEAD, "--model", "model-B",
              "--max-retries", "0")
    msg = one_error(b)
    assert msg.startswith(f"{out} holds results of a different configuration (differs in backend.extractor: "
                          '"openai:model-A@claims-')
    assert 'llm.model: "model-A" → "model-B"' in msg
    assert msg.endswith("use another --out folder or pass --fresh to start over")
    assert (out / "run.json.gz").read_bytes() == saved and not (out / "journal.jsonl").exists()  # nothing added
    fresh = _eval(capsys, bench, out, tiny_corpus_dir, "--backend", "openai", "--base-url", DEAD, "--model", "model-B",
                  "--max-retries", "0", "--fresh")
    assert fresh.code == 3 and read_run(out).config["llm"]["model"] == "model-B"


@pytest.mark.fault_kind("eval-resume-other-endpoint")
def test_resume_with_another_endpoint_names_it_without_credentials(capsys, tmp_path, tiny_corpus_dir):
    bench, out = _bench(tmp_path), tmp_path / "out"
    base = ["--backend", "openai", "--model", "m", "--max-retries", "0"]
    assert _eval(capsys, bench, out, tiny_corpus_dir, *base, "--base-url",
                 "http://user:pw-SECRET@127.0.0.1:9/v1").code == 3
    assert "pw-SECRET" not in json.dumps(read_run(out).config)
    msg = one_error(_eval(capsys, bench, out, tiny_corpus_dir, *base, "--base-url", "http://127.0.0.1:7/v1"))
    assert 'llm.endpoint: "http://127.0.0.1:9/v1" → "http://127.0.0.1:7/v1"' in msg and "pw-SECRET" not in msg


@pytest.mark.fault_kind("eval-resume-other-setting")
def test_resume_with_another_setting_names_it(capsys, tmp_path, tiny_corpus_dir):
    bench, out = _bench(tmp_path), tmp_path / "out"
    first = _eval(capsys, bench, out, tiny_corpus_dir)
    assert first.code == 0
    assert one_error(_eval(capsys, bench, out, tiny_corpus_dir, "--theta", "0.5")) == (
        f"{out} holds results of a different configuration (differs in settings.theta: 0.75 → 0.5); use another "
        "--out folder or pass --fresh to start over")
    again = _eval(capsys, bench, out, tiny_corpus_dir)  # the same configuration resumes: nothing to run
    assert again.code == 0 and again.out == first.out and len(_rows(out)) == 2


@pytest.mark.fault_kind("eval-resume-changed-corpus")
def test_resume_on_a_changed_corpus_names_the_corpus(capsys, tmp_path, tiny_corpus_dir):
    from tiny_corpus import TINY_PAPERS, write_corpus

    from crase_core import runtime

    corpus = write_corpus(tmp_path / "corpus")
    bench, out = _bench(tmp_path), tmp_path / "out"
    assert _eval(capsys, bench, out, corpus).code == 0
    write_corpus(corpus, papers=[*TINY_PAPERS, ("0003001", 2000, "A new glueball paper", "glueball lattice")])
    runtime._local_source.cache_clear()  # what a new process would see
    msg = one_error(_eval(capsys, bench, out, corpus))
    assert "source.corpus: " in msg and "source.name: " in msg


def _gz_run(config: object) -> bytes:
    import gzip

    return gzip.compress(json.dumps({"format": "crase-eval-run", "version": 1, "config": config, "summary": {},
                                     "rows": []}).encode())


@pytest.mark.parametrize("name, content, what", [
    ("config.json", b'{"bench": "bench.jsonl", "method": "crase"}',
     "it was pinned by an older Crase that did not record everything that changes results"),
    ("config.json", b"\x00garbage", "config.json is unreadable"),
    ("run.json.gz", _gz_run({"bench": "bench.jsonl", "method": "crase"}),
     "it was pinned by an older Crase that did not record everything that changes results"),
    ("run.json.gz", b"\x1f\x8b\x08garbage", "run.json.gz is unreadable"),
    ("journal.jsonl", b'{"pin": {"bench": "bench.jsonl"}}\n',
     "it was pinned by an older Crase that did not record everything that changes results"),
], ids=["older-pin", "unreadable-pin", "older-run-file", "damaged-run-file", "older-journal"])
@pytest.mark.fault_kind("eval-old-or-damaged-pin")
def test_folder_with_an_old_or_damaged_pin(capsys, tmp_path, tiny_corpus_dir, name, content, what):
    bench, out = _bench(tmp_path), tmp_path / "out"
    out.mkdir()
    (out / name).write_bytes(content)
    assert one_error(_eval(capsys, bench, out, tiny_corpus_dir)) == (
        f"{out} holds results of a different configuration ({what}); use another --out folder or pass --fresh to "
        "start over")
    assert sorted(p.name for p in out.iterdir()) == [name] and (out / name).read_bytes() == content  # untouched
    assert _eval(capsys, bench, out, tiny_corpus_dir, "--fresh").code == 0 and len(_rows(out)) == 2


@pytest.mark.parametrize("line, error", [
    ('{"qid": "q3", "query": "black \\ud800 hole", "relevant": ["9801001"]}',
     "bench.jsonl line 2: 'query' holds a lone surrogate (U+D800 at character 7), not text; fix the line, then "
     "rerun with --fresh"),
    (b'{"qid": "q3", "query": "black \xff hole", "relevant": ["9801001"]}',
     "bench.jsonl line 2: not UTF-8 text (byte 0xff at column 31); fix the line, then rerun with --fresh"),
], ids=["lone-surrogate", "not-utf8"])
@pytest.mark.fault_kind("eval-bench-bad-text")
def test_bad_text_in_a_benchmark_line_is_an_error_row(capsys, tmp_path, tiny_corpus_dir, line, error):
    bench, out = tmp_path / "bench.jsonl", tmp_path / "out"
    raw = line if isinstance(line, bytes) else line.encode()
    bench.write_bytes(json.dumps(LINES[0]).encode() + b"\n" + raw + b"\n" + json.dumps(LINES[1]).encode() + b"\n")
    r = _eval(capsys, bench, out, tiny_corpus_dir)
    assert r.code == 3, r.err
    assert "1 of 3 queries errored (first: q3: bench.jsonl line 2" in r.err
    rows = {row["qid"]: row for row in _rows(out)}
    assert sorted(rows) == ["q1", "q2", "q3"]
    assert rows["q3"]["error"] == error and rows["q3"]["ranked"] == []
    assert "error" not in rows["q1"] and rows["q1"]["hits@5"] == 1 and rows["q2"]["hits@5"] == 1
    assert read_run(out).summary["errors"] == 1


@pytest.mark.parametrize("lines, message", [
    (['{"qid": "q1", "query": '], "bench.jsonl line 1: not valid JSON (Expecting value)"),
    ([LINES[0], LINES[0]], "bench.jsonl line 2: duplicate qid 'q1'"),
    ([{"qid": "q1", "query": "x", "relevant": []}], "bench.jsonl line 1: 'relevant' must be a non-empty list of "
                                                     "paper ids"),
    (["[" * 100_000 + "]" * 100_000], "bench.jsonl line 1: JSON nested too deeply"),
], ids=["invalid-json", "duplicate-qid", "no-relevant", "deeply-nested"])
@pytest.mark.fault_kind("eval-bench-unusable-line")
def test_unusable_benchmark_line_stops_before_anything_is_written(capsys, tmp_path, tiny_corpus_dir, lines, message):
    out = tmp_path / "out"
    assert one_error(_eval(capsys, _bench(tmp_path, lines), out, tiny_corpus_dir)) == message
    assert not out.exists()


@pytest.mark.fault_kind("eval-bench-missing")
def test_missing_benchmark_file(capsys, tmp_path, tiny_corpus_dir):
    assert one_error(_eval(capsys, tmp_path / "nope.jsonl", tmp_path / "out", tiny_corpus_dir)) == \
        f"benchmark file not found: {tmp_path / 'nope.jsonl'}"


@pytest.mark.fault_kind("eval-out-is-a-file")
def test_out_folder_that_is_a_file(capsys, tmp_path, tiny_corpus_dir):
    out = tmp_path / "out"
    out.write_text("keep me")
    assert one_error(_eval(capsys, _bench(tmp_path), out, tiny_corpus_dir)) == \
        f"cannot create the --out folder {out}: File exists"
    assert out.read_text() == "keep me"


_TOP = machine.max_workers()
_CORES = f"{machine.usable_cores()} core{'s' * (machine.usable_cores() != 1)} × {machine.WORKERS_PER_CORE}"


@pytest.mark.parametrize("args, message", [
    (["--workers", "0"], f"--workers must be in [1, {_TOP}] on this machine ({_CORES}) (got 0)"),
    (["--workers", "100000"], f"--workers must be in [1, {_TOP}] on this machine ({_CORES}) (got 100000)"),
    (["--limit", "0"], "--limit must be ≥ 1 (got 0)"),
])
@pytest.mark.fault_kind("eval-counts-out-of-range")
def test_eval_counts_out_of_range(capsys, tmp_path, tiny_corpus_dir, args, message):
    assert one_error(_eval(capsys, _bench(tmp_path), tmp_path / "out", tiny_corpus_dir, *args)) == message


@pytest.mark.fault_kind("eval-two-on-one-folder")
def test_second_eval_on_the_same_folder_is_refused(capsys, tmp_path, tiny_corpus_dir):
    """While one eval writes DIR (it holds a lock on the folder), another is refused at once; afterwards it
    resumes."""
    bench, out = _bench(tmp_path), tmp_path / "out"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # the first eval, still running
    try:
        assert one_error(_eval(capsys, bench, out, tiny_corpus_dir)) == (
            f"another crase eval is writing {out}; wait for it to finish, or use another --out folder")
        assert not any(out.iterdir())
    finally:
        os.close(fd)
    assert _eval(capsys, bench, out, tiny_corpus_dir).code == 0 and len(_rows(out)) == 2
