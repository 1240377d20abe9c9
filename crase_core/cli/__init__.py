"""The ``crase`` command line: :func:`main` parses the arguments and runs one subcommand; :func:`command` is the
program (the ``crase`` script and ``python -m crase_core.cli``)."""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Sequence

#: the commands that make one run (or read one) and end: their process ends without the interpreter's teardown
#: (:func:`command`)
ONE_RUN = frozenset({"query", "show", "rerank", "export"})


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``crase`` with ``argv`` (default: the process's arguments); the exit status."""
    from crase_core.cli.main import main as run

    return run(argv)


def command() -> None:
    """The ``crase`` program: :func:`main` on the process's arguments, then exit with its status.

    Once a one-run command (:data:`ONE_RUN`) has returned, the exit handlers run, the output is flushed and the
    process ends without the interpreter freeing every object one by one (about 40 ms of a cached ``crase query``;
    issue 31): code after :func:`command` in the same process does not run, an exit handler does. Other commands,
    and a command that raises (``--help``, a usage error), end as usual.
    """
    # the implementation itself: importing the submodule ``main`` rebinds this package's name ``main`` to it
    from crase_core.cli.main import main as run
    from crase_core.cli.main import subcommand

    argv = sys.argv[1:]
    one_run = subcommand(argv) in ONE_RUN
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    status = run(argv)
    if not one_run or run_exit_handlers is None:
        raise SystemExit(status)
    run_exit_handlers()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        raise SystemExit(status) from None  # the interpreter's own exit says what went wrong
    os._exit(status)
