"""``crase eval --out`` where its files cannot be written: a read-only folder, a folder made read-only before a
resume, a full disk (a small tmpfs), a file-size limit (RLIMIT_FSIZE: EFBIG). Real processes; each ends in one
line and exit status 2 (was ``internal error (PermissionError / OSError 28 / OSError 27)``), no cut or empty file
is left (was: a 0-byte ``map_at_k.png``), what was done is kept, and the rerun once the fault is gone resumes to
the numbers of a clean run."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fault_tools import REPO, cli_env, run_cli, small_disk

LINES = [
    {"qid": "q1", "query": "black hole entropy", "relevant": ["9801001"], "paper_id": "0001001"},
    {"qid": "q2", "query": "glueball lattice", "relevant": ["9902001"]},
]


@pytest.fixture
def place(tmp_path, tiny_corpus_dir) -> Path:
    """A folder with the benchmark and a copy of the tiny corpus."""
    (tmp_path / "bench.jsonl").write_text("".join(json.dumps(x) + "\n" for x in LINES), encoding="utf-8")
    shutil.copytree(tiny_corpus_dir, tmp_path / "corpus")
    return tmp_path


def _eval(place: Path, out: Path, *more: str, unprivileged: bool = False, fsize: int | None = None,
          ) -> subprocess.CompletedProcess[str]:
    """``crase eval`` in a subprocess (permission bits binding even for root with ``unprivileged``; with
    ``fsize``, under that file-size limit in bytes)."""
    args = ["eval", str(place / "bench.jsonl"), "--out", str(out), "--corpus", str(place / "corpus"), *more]
    cache = place / "cache"
    if fsize is None:
        return run_cli(*args, cache_dir=cache, unprivileged=unprivileged)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run([sys.executable, "-m", "crase_core.cli", *args], cwd=str(REPO), env=cli_env(cache),
                          capture_output=True, text=True, timeout=300, preexec_fn=limit)


def _one_line(r: subprocess.CompletedProcess[str]) -> str:
    """The one error line, last on stderr (progress lines before it), of a refused run: exit status 2."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("crase: error: ")]
    assert len(errors) == 1 and r.stderr.splitlines()[-1] == errors[0], r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    return errors[0].removeprefix("crase: error: ")


def _files(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in out.iterdir()} if out.is_dir() else {}


def _no_cut_files(out: Path) -> None:
    sizes = _files(out)
    assert not [n for n, size in sizes.items() if size == 0 or n.endswith(".tmp") or n.startswith(".")], sizes
    for name in ("map_at_k.png", "recall_at_k.png", "hub_degree.png"):
        if name in sizes:
            assert (out / name).read_bytes().startswith(b"\x89PNG") and (out / name).read_bytes()[-8:] == \
                b"IEND\xaeB`\x82", name  # a whole PNG (its IEND chunk), never a cut one


def _numbers(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, r.stderr
    return next(ln for ln in r.stdout.splitlines() if "R@5" in ln)


@pytest.fixture
def clean(place) -> str:
    """The numbers line of a clean run of the benchmark."""
    return _numbers(_eval(place, place / "clean"))


@pytest.mark.fault_kind("eval-out-read-only")
def test_a_read_only_out_folder_is_one_line_before_any_query(place, clean):
    out = place / "ro"
    out.mkdir()
    out.chmod(0o555)
    r = _eval(place, out, unprivileged=True)
    assert _one_line(r) == (f"cannot write {out}/run.json.gz: Permission denied ({out}): the --out folder must be "
                            "writable (its results so far are kept as they are)")
    assert "to run" not in r.stderr  # refused before any query ran
    assert _files(out) == {}
    out.chmod(0o755)
    assert _numbers(_eval(place, out)) == clean


@pytest.mark.fault_kind("eval-out-read-only-on-resume")
def test_a_folder_made_read_only_before_a_resume_keeps_what_it_holds(place, clean):
    out = place / "resume"
    assert _numbers(_eval(place, out)) == clean
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    out.chmod(0o555)
    r = _eval(place, out, unprivileged=True)
    assert _one_line(r).startswith(f"cannot write {out}/run.json.gz: Permission denied")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    out.chmod(0o755)
    again = _eval(place, out)
    assert "2 already done, 0 to run" in again.stderr
    assert _numbers(again) == clean


@pytest.mark.parametrize("free_kib", [4, 12, 40])  # the journal or the run file, or a plot, does not fit
@pytest.mark.fault_kind("eval-out-disk-full")
def test_a_full_disk_is_one_line_and_leaves_no_cut_file(place, clean, free_kib):
    with small_disk("eval-tmpfs", free_kib) as disk:
        out = disk / "out"
        r = _eval(place, out)
        msg = _one_line(r)
        assert msg.startswith(f"cannot write {out}/") and "No space left on device" in msg, msg
        failed = msg.split(":")[0].rsplit("/", 1)[1]
        assert failed in ("journal.jsonl", "run.json.gz", "recall_at_k.png", "map_at_k.png", "hub_degree.png",
                          "report.md"), msg
        assert "and rerun the same command" in msg
        _no_cut_files(out)
        (disk / "filler").unlink()
        again = _eval(place, out)
        if failed != "journal.jsonl":  # the rows were all written: nothing runs again
            assert "2 already done, 0 to run" in again.stderr
        assert _numbers(again) == clean
        _no_cut_files(out)
        assert {"report.md", "map_at_k.png", "recall_at_k.png", "run.json.gz"} <= set(_files(out))


@pytest.mark.parametrize("limit, fails", [(2048, "journal.jsonl"), (8192, ".png")])
@pytest.mark.fault_kind("eval-out-file-size-limit")
def test_a_file_size_limit_is_one_line_and_the_rerun_resumes(place, clean, limit, fails):
    out = place / f"limit-{limit}"
    r = _eval(place, out, fsize=limit)
    msg = _one_line(r)
    assert msg.startswith(f"cannot write {out}/") and "File too large" in msg and fails in msg.split(":")[0], msg
    _no_cut_files(out)
    again = _eval(place, out)
    assert _numbers(again) == clean
    if fails == ".png":  # the run file was written: the rerun only writes the report
        assert "2 already done, 0 to run" in again.stderr
