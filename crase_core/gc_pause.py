"""Python's automatic garbage collection put off while a run computes (:func:`gc_deferred`).

A full collection walks every live object — in a long-lived process the open runs and the result cache's
in-memory copies (lists of lists: every cached matrix) — and a query allocates fast enough to start several
per run. A run's objects are freed by reference counting, so deferring the collector costs little memory.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_GC_LOCK = threading.Lock()
_gc_holds = 0  # blocks now inside gc_deferred()
_gc_was_enabled = True


@contextlib.contextmanager
def gc_deferred() -> Iterator[None]:
    """Put off automatic garbage collection inside the block: a run (:func:`crase_core.pipeline.run_query` is
    wrapped in it) or an explorer page run (Streamlit then collects once after every script run: its
    ``runner.postScriptGC`` option, on by default). Process-wide and counted, so concurrent runs nest: the
    collector is back on (if it was on) when the last block ends. Usable as a decorator.
    """
    global _gc_holds, _gc_was_enabled
    with _GC_LOCK:
        if _gc_holds == 0:
            _gc_was_enabled = gc.isenabled()
        _gc_holds += 1
        gc.disable()
    try:
        yield
    finally:
        with _GC_LOCK:
            _gc_holds -= 1
            if _gc_holds == 0 and _gc_was_enabled:
                gc.enable()
