"""Keeping the app's background prefetch thread out of the way of an AppTest's page compile."""

from __future__ import annotations


def join_prefetch_threads(timeout: float = 60.0) -> None:
    """Wait for the app's background engine prefetch (crase_app.shared) of earlier tests to finish.

    The prefetch opens the corpus with ``np.load``, which parses each file's header with ``ast``; CPython 3.11
    keeps one AST recursion counter per interpreter, so that thread and an AppTest compiling a page at the same
    time can fail the compile with "SystemError: AST constructor recursion depth mismatch" (gh-106905). A
    prefetch left running by one test must not overlap the next test's compile."""
    import sys

    shared = sys.modules.get("crase_app.shared")
    if shared is None:
        return
    for thread in list(getattr(shared, "_PREFETCHING", {}).values()):
        thread.join(timeout)
