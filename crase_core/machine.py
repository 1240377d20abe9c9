"""What this machine allows: the processes a command may start.

``--workers`` of ``crase corpus build`` and ``crase eval`` is checked against the cores this process may
run on (``sched_getaffinity``, else ``os.cpu_count()``) times :data:`WORKERS_PER_CORE`: more workers than
that only thrash (each parser or eval worker is a process with its own memory), and a typo such as
``--workers 100000`` would fork-storm the machine.
"""

from __future__ import annotations

import os

from crase_core.errors import InputError

#: at most this many worker processes per usable core
WORKERS_PER_CORE = 4


def usable_cores() -> int:
    """The cores this process may run on (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def max_workers() -> int:
    return usable_cores() * WORKERS_PER_CORE


def check_workers(value: int, flag: str = "--workers") -> int:
    """``value`` when it is in [1, :func:`max_workers`]; InputError naming the range and the machine."""
    top = max_workers()
    if not 1 <= value <= top:
        cores = usable_cores()
        raise InputError(f"{flag} must be in [1, {top}] on this machine ({cores} core{'s' * (cores != 1)} × "
                         f"{WORKERS_PER_CORE}) (got {value})")
    return value
