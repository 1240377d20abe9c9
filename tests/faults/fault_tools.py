"""Helpers of the fault-injection suite: run the real ``crase`` CLI in a subprocess, as root or not."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
QUERY = "black hole entropy microstates"


def cli_env(cache_dir: Path | str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRASE_", "S2_", "OPENAI_"))}
    env.update(PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1", CRASE_CACHE_DIR=str(cache_dir), **extra)
    return env


def without_permission_override() -> list[str]:
    """A command prefix under which file permission bits bind (root drops CAP_DAC_OVERRIDE/READ_SEARCH)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permission bits cannot be made to bind")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}"]


def run_cli(*args: str, cache_dir: Path | str, timeout: float = 120, unprivileged: bool = False,
            **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m crase_core.cli ARGS`` with its own cache dir; ``unprivileged``: permission bits bind (even for root)."""
    prefix = without_permission_override() if unprivileged else []
    return subprocess.run([*prefix, sys.executable, "-m", "crase_core.cli", *args], cwd=str(REPO),
                          env=cli_env(cache_dir, **env), capture_output=True, text=True, timeout=timeout)


def query(corpus: Path, cache_dir: Path | str, *more: str, **kw) -> subprocess.CompletedProcess[str]:
    return run_cli("query", QUERY, "--corpus", str(corpus), "--quiet", *more, cache_dir=cache_dir, **kw)


def shared_tmp(prefix: str) -> Path:
    """A fresh folder every user can enter (tmp_path is private to root, ``nobody`` could not reach it)."""
    path = Path(tempfile.mkdtemp(prefix=f"crase-fault-{prefix}-"))
    path.chmod(0o755)
    return path


@contextlib.contextmanager
def small_disk(prefix: str, free_kib: int) -> Iterator[Path]:
    """A 1 MiB tmpfs (writable by anyone) filled but for about ``free_kib`` KiB; skips where mounting is not
    allowed. Unmounted and removed afterwards."""
    mnt = shared_tmp(prefix)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        mnt.rmdir()
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.decode().strip()})")
    try:
        mnt.chmod(0o777)
        with contextlib.suppress(OSError), open(mnt / "filler", "wb") as f:
            f.write(b"\0" * ((1024 - free_kib) * 1024))
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
        with contextlib.suppress(OSError):
            mnt.rmdir()


def ranked(stdout: str) -> str:
    """The query, plan and ranked list of ``crase query`` output (without the recall estimate, whose line names
    the corpus, counts, cache figures and timings)."""
    head = stdout.split("\nStages:", 1)[0].split("\nRecall:", 1)[0]
    assert head.startswith("Query:") and re.search(r"^ *1\. \[", head, re.M), stdout
    return head
