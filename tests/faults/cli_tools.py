"""In-process ``crase`` runs for the fault suite: ``main(argv)`` with stdout/stderr captured.

The CLI's exit status is ``main``'s return value, so most faults need no subprocess; the session's
isolated cache (``tests/conftest.py``) serves every run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from crase_core.cli.main import main

QUERY = "black hole entropy microstates"


@dataclass
class Result:
    code: int
    out: str
    err: str


def crase(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> Result:
    """Run ``crase ARGV`` in this process; the exit status and what it printed."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return Result(code, out, err)


def one_error(r: Result) -> str:
    """The single error line of a refused command (exit 2, nothing on stdout)."""
    assert r.code == 2, (r.code, r.out, r.err)
    assert r.out == "", r.out
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crase: error: "), r.err
    return lines[0].removeprefix("crase: error: ")


def ranked(stdout: str) -> str:
    """The query, plan and ranked list of ``crase query`` output (without the recall estimate, costs and
    timings: the estimate's line names the corpus)."""
    return stdout.split("\nStages:", 1)[0].split("\nRecall:", 1)[0]
