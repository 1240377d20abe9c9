"""``crase corpus import`` where the new corpus or its store cannot be written: a read-only parent folder, a full
disk under DEST, a full disk under the cache (small tmpfs). Real processes; each ends in one line and exit status 2
(was ``internal error (PermissionError / OSError 28)``), nothing is left behind, and the import once the fault is
gone works."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from fault_tools import run_cli, small_disk

OPENALEX_PAGE = Path(__file__).parents[1] / "fixtures" / "openalex" / "works_page.json"


def _one_line(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if not ln.startswith("crase corpus:")]
    assert len(lines) == 1 and lines[0].startswith("crase: error: "), r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    return lines[0].removeprefix("crase: error: ")


def _left(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.fault_kind("import-read-only-parent")
def test_import_into_a_read_only_parent_folder(tmp_path, tiny_corpus_dir):
    parent = tmp_path / "corpora"
    parent.mkdir()
    parent.chmod(0o555)
    r = run_cli("corpus", "import", str(tiny_corpus_dir), str(parent / "mine"), "--format", "jsonl",
                cache_dir=tmp_path / "cache", unprivileged=True)
    assert _one_line(r) == (f"cannot import into {parent}/mine: Permission denied: its folder {parent} must be "
                            "writable (the import builds the corpus there and renames it when done); nothing was "
                            "written")
    assert _left(parent) == []
    parent.chmod(0o755)
    ok = run_cli("corpus", "import", str(tiny_corpus_dir), str(parent / "mine"), "--format", "jsonl",
                 cache_dir=tmp_path / "cache")
    assert ok.returncode == 0 and "6 papers" in ok.stdout, ok.stderr


@pytest.mark.parametrize("fmt, src", [("jsonl", None), ("openalex", OPENALEX_PAGE)], ids=["jsonl", "openalex"])
@pytest.mark.parametrize("where", ["dest", "cache"])
@pytest.mark.fault_kind("import-disk-full")
def test_import_onto_a_full_disk(tmp_path, tiny_corpus_dir, fmt, src, where):
    source = str(src or tiny_corpus_dir)
    with small_disk("import-tmpfs", 4 if where == "dest" else 30) as disk:
        dest = disk / "mine" if where == "dest" else tmp_path / "mine"
        cache = disk / "cache" if where == "cache" else tmp_path / "cache"
        r = run_cli("corpus", "import", source, str(dest), "--format", fmt, cache_dir=cache)
        msg = _one_line(r)
        assert msg.startswith(f"cannot import into {dest}: No space left on device") and msg.endswith(
            "; nothing was written (make room, or choose a folder you can write, and run the import again)"), msg
        assert not dest.exists() and not [p for p in dest.parent.iterdir() if p.name.startswith(".mine.")]
        assert _left(disk) == sorted(["filler"] + (["cache"] if where == "cache" else []))
        if where == "cache":  # no half-built store or index left in the cache
            assert [p for p in cache.rglob("*") if not p.is_dir()] == []
        (disk / "filler").unlink()
        ok = run_cli("corpus", "import", source, str(dest), "--format", fmt, cache_dir=cache)
        assert ok.returncode == 0 and f"{dest}: " in ok.stdout, ok.stderr
