"""Hostile input to ``crase corpus import``: truncated gzip, broken JSON lines, huge lines, a manifest pointing
outside the folder, missing files, duplicate ids, an interrupted import. Every fault exits 2 with one line
naming the file (and line), and DEST is all or nothing: it appears only when the import succeeded."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fault_tools import REPO, cli_env, run_cli

WORKS = [json.loads(line) for line in (REPO / "tests" / "fixtures" / "openalex" / "works.jsonl").read_text().splitlines()]


def _part(path: Path, lines: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb") as f:
        f.write(b"".join(lines))
    return path


def _snapshot(root: Path, lines: list[bytes] | None = None) -> Path:
    _part(root / "works" / "updated_date=2022-01-02" / "part_000.gz",
          lines if lines is not None else [json.dumps(w).encode() + b"\n" for w in WORKS])
    return root


def _import(src: Path, dest: Path, cache: Path, fmt: str = "openalex", *more: str) -> subprocess.CompletedProcess[str]:
    return run_cli("corpus", "import", str(src), str(dest), "--format", fmt, *more, cache_dir=cache)


def _nothing_left(dest: Path) -> None:
    assert not dest.exists()
    assert not [p for p in dest.parent.iterdir() if p.name.startswith(f".{dest.name}.")]  # no temp folder


@pytest.mark.fault_kind("import-truncated-gzip")
def test_truncated_gzip_part(tmp_path):
    part = _snapshot(tmp_path / "snap") / "works" / "updated_date=2022-01-02" / "part_000.gz"
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])
    r = _import(tmp_path / "snap", tmp_path / "dest", tmp_path / "cache")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert f"{part}:" in r.stderr and "the gzip file is damaged or truncated" in r.stderr and "download it again" in r.stderr
    _nothing_left(tmp_path / "dest")


@pytest.mark.fault_kind("import-broken-json-line")
def test_broken_json_line_names_file_and_line(tmp_path):
    lines = [json.dumps(WORKS[0]).encode() + b"\n", b'{"id": "https://openalex.org/W1", "title": "cut her\n']
    snap = _snapshot(tmp_path / "snap", lines)
    r = _import(snap, tmp_path / "dest", tmp_path / "cache")
    part = snap / "works" / "updated_date=2022-01-02" / "part_000.gz"
    assert r.returncode == 2 and f"{part}:2: not a JSON line" in r.stderr and "Traceback" not in r.stderr
    _nothing_left(tmp_path / "dest")


@pytest.mark.fault_kind("import-huge-line")
def test_huge_line_is_refused_not_read_into_memory(tmp_path):
    snap = _snapshot(tmp_path / "snap", [json.dumps(WORKS[0]).encode() + b"\n", b'{"id": "' + b"W" * (65 << 20)])
    r = _import(snap, tmp_path / "dest", tmp_path / "cache")
    assert r.returncode == 2 and ":2: a line longer than 64 MB is not a record" in r.stderr
    _nothing_left(tmp_path / "dest")


@pytest.mark.parametrize("url", ["s3://openalex/data/works/../../secret/part_000.gz", "/etc/passwd",
                                 "file:///etc/hostname", "s3://openalex/data/works/updated_date=2022-01-02/../../../x.gz",
                                 "updated_date=2022-01-02/part_000.gz/../../../secret/part_000.gz"])
@pytest.mark.fault_kind("import-manifest-outside-the-folder")
def test_a_manifest_pointing_outside_the_folder_reads_nothing_there(tmp_path, url):
    snap = _snapshot(tmp_path / "snap")
    secret = _part(tmp_path / "snap" / "secret" / "part_000.gz",  # valid works that must never be imported
                   [json.dumps(dict(WORKS[1], id="https://openalex.org/W999", title="SECRET")).encode() + b"\n"])
    entries = [{"url": "s3://openalex/data/works/updated_date=2022-01-02/part_000.gz", "meta": {"record_count": 3}},
               {"url": url, "meta": {"record_count": 1}}]
    (snap / "works" / "manifest").write_text(json.dumps({"entries": entries}))
    r = _import(snap, tmp_path / "dest", tmp_path / "cache")
    assert r.returncode == 2 and "the manifest lists 1 files that are not in" in r.stderr
    _nothing_left(tmp_path / "dest")
    ok = _import(snap, tmp_path / "dest", tmp_path / "cache", "openalex", "--no-manifest")
    assert ok.returncode == 0, ok.stderr
    assert b"SECRET" not in (tmp_path / "dest" / "papers.jsonl").read_bytes() and secret.is_file()


@pytest.mark.fault_kind("import-damaged-manifest")
def test_damaged_manifest(tmp_path):
    snap = _snapshot(tmp_path / "snap")
    (snap / "works" / "manifest").write_text('{"entries": [{"url": 5}]}')
    r = _import(snap, tmp_path / "dest", tmp_path / "cache")
    assert r.returncode == 2 and "an entry without a 'url'" in r.stderr
    (snap / "works" / "manifest").write_bytes(b"\xff\x00not json")
    r = _import(snap, tmp_path / "dest", tmp_path / "cache")
    assert r.returncode == 2 and "not a readable manifest" in r.stderr and "--no-manifest" in r.stderr
    _nothing_left(tmp_path / "dest")


@pytest.mark.fault_kind("import-missing-files")
def test_missing_files(tmp_path):
    (tmp_path / "empty").mkdir()
    r = _import(tmp_path / "empty", tmp_path / "d1", tmp_path / "cache")
    assert r.returncode == 2 and "holds no OpenAlex works" in r.stderr
    (tmp_path / "s2" / "abstracts").mkdir(parents=True)
    r = _import(tmp_path / "s2", tmp_path / "d2", tmp_path / "cache", "s2")
    assert r.returncode == 2 and "the papers dataset is required" in r.stderr
    r = _import(tmp_path / "nowhere", tmp_path / "d3", tmp_path / "cache", "jsonl")
    assert r.returncode == 2 and "does not exist" in r.stderr
    (tmp_path / "jl").mkdir()
    r = _import(tmp_path / "jl", tmp_path / "d4", tmp_path / "cache", "jsonl")
    assert r.returncode == 2 and "has no papers.jsonl" in r.stderr
    for d in ("d1", "d2", "d3", "d4"):
        _nothing_left(tmp_path / d)


@pytest.mark.fault_kind("import-duplicate-ids", "import-record-without-id")
def test_duplicate_ids_keep_the_first_and_are_counted(tmp_path):
    src = tmp_path / "s2"
    rec = {"corpusid": 5, "title": "First", "year": 2001, "authors": []}
    (src / "papers").mkdir(parents=True)
    (src / "papers" / "a.jsonl").write_text("\n".join(json.dumps(r) for r in (
        rec, dict(rec, title="Second"), {"corpusid": 6, "title": "Other", "year": 2002}, {"title": "no id"})) + "\n")
    (src / "citations").mkdir()
    (src / "citations" / "c.jsonl").write_text(json.dumps({"citingcorpusid": "6", "citedcorpusid": "5"}) + "\n")
    r = _import(src, tmp_path / "dest", tmp_path / "cache", "s2")
    assert r.returncode == 0, r.stderr
    assert "papers found twice (the first kept)" in r.stdout and "papers records without a corpusid (dropped)" in r.stdout
    titles = [json.loads(x)["title"] for x in (tmp_path / "dest" / "papers.jsonl").read_text().splitlines()]
    assert titles == ["First", "Other"]


@pytest.mark.fault_kind("import-hostile-text")
def test_hostile_text_is_one_line_and_never_reaches_the_terminal(tmp_path):
    bad = dict(WORKS[0], title="evil\x1b[2J\x07title\nwith a break", abstract_inverted_index={"\x1b]0;pwn\x07": [0]})
    r = _import(_snapshot(tmp_path / "snap", [json.dumps(bad).encode() + b"\n"]), tmp_path / "dest", tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    rec = json.loads((tmp_path / "dest" / "papers.jsonl").read_text())
    assert "\x1b" not in rec["title"] and "\n" not in rec["title"] and "\x1b" not in rec["abstract"]
    assert "\x1b" not in r.stdout + r.stderr


@pytest.mark.fault_kind("import-dest-exists")
def test_dest_that_exists_is_left_alone(tmp_path):
    dest = tmp_path / "dest"
    dest.write_text("a file of mine")
    r = _import(_snapshot(tmp_path / "snap"), dest, tmp_path / "cache")
    assert r.returncode == 2 and "already exists" in r.stderr and dest.read_text() == "a file of mine"


def _big_source(path: Path, n: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", compresslevel=1) as f:
        for i in range(n):
            f.write(json.dumps({"id": f"https://openalex.org/W{i + 1}", "title": f"Work {i} on topic {i % 97}",
                                "publication_year": 2000 + i % 20,
                                "abstract_inverted_index": {f"word{j}": [j] for j in range(40)},
                                "referenced_works": [f"https://openalex.org/W{max(1, i - j)}" for j in range(1, 8)]})
                    + "\n")
    return path


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
@pytest.mark.fault_kind("import-interrupted")
def test_an_interrupted_import_leaves_no_dest(tmp_path, sig):
    src = _big_source(tmp_path / "big" / "works.jsonl.gz", 40_000)
    dest, cache = tmp_path / "dest", tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, "-m", "crase_core.cli", "corpus", "import", str(src), str(dest), "--format",
                             "openalex", "--workers", "1"], cwd=str(REPO), env=cli_env(cache),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not [p for p in tmp_path.iterdir() if p.name.startswith(".dest.")] and time.monotonic() < deadline:
        time.sleep(0.05)  # wait until it is converting into its temporary folder
    time.sleep(0.3)
    os.kill(proc.pid, sig)
    proc.communicate(timeout=60)
    assert proc.returncode != 0 and not dest.exists()
    if sig != signal.SIGKILL:  # a process that can clean up removes its temporary folder
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".dest.")]
    r = run_cli("corpus", "import", str(src), str(dest), "--format", "openalex", cache_dir=cache, timeout=300)
    assert r.returncode == 0, r.stderr  # the same import, run again, completes
    assert "40,000 papers" in r.stdout
