"""The ``crase`` command line: :func:`main` parses the arguments and runs one subcommand."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``crase`` with ``argv`` (default: the process's arguments); the exit status."""
    from crase_core.cli.main import main as run

    return run(argv)
