"""Reading a file a user named, with a bound, before anything parses it.

:func:`read_regular` opens without blocking (a FIFO with no writer, a tty), refuses anything that is not
a regular file (``/dev/zero``, a FIFO, a folder) from ``fstat`` on the open descriptor, refuses a file
whose size is over the cap before reading it, and never reads more than the cap plus one byte (a file
that grows while it is read is caught too). Callers turn :class:`Unreadable` into their one-line error.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class Unreadable(OSError):
    """The path names no regular file of at most the cap (``strerror`` says which)."""


class TooLarge(Unreadable):
    """The file is larger than the cap."""


def read_regular(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of the regular file ``path`` (at most ``max_bytes``): :class:`Unreadable` for a device, a
    FIFO, a folder, :class:`TooLarge` for a bigger file; other OSErrors (missing, no permission) as raised."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(Path(path), flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable(0, "not a regular file")
        if st.st_size > max_bytes:
            raise TooLarge(0, f"{st.st_size:,} bytes, more than the {max_bytes:,} allowed")
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            block = os.read(fd, min(left, 1 << 20))
            if not block:
                break
            chunks.append(block)
            left -= len(block)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise TooLarge(0, f"more than the {max_bytes:,} bytes allowed")
    return data
