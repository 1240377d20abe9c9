"""Safe file writes: atomic replace through an unpredictable temp name, never through a link.

Contract of :func:`write_bytes` / :func:`write_text`:

* the data goes to a fresh temp file in the target's folder, created with
  ``O_CREAT | O_EXCL`` under a random name (:func:`tempfile.mkstemp`), so a
  planted ``<target>.tmp`` symlink is never followed nor overwritten;
* the temp file is flushed, fsynced and renamed over the target
  (:func:`os.replace`), so a reader sees the old file or the new one, never a
  half-written one, and concurrent writers never share a temp file;
* a target that exists and is not a regular file (a symlink, a directory, a
  device, a FIFO) is refused with :class:`~crase_core.errors.InputError`:
  it is neither written through nor replaced.

:func:`check_writable` says *before* a long run whether the target could be
written, so a run is not thrown away at its end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from crase_core.errors import InputError

NEW_FILE_MODE = 0o644


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _existing_mode(path: Path) -> int | None:
    """``st_mode`` of ``path`` itself (links not followed), None when absent; refuses non-regular targets."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"refusing to write {path}: it is {_kind(st.st_mode)}, not a regular file")
    return stat.S_IMODE(st.st_mode)


def write_bytes(path: str | os.PathLike[str], data: bytes, mode: int | None = None) -> Path:
    """Atomically replace the regular file ``path`` with ``data`` (see the module docstring).

    Missing parent folders are created. The file keeps the permission bits of
    the file it replaces, else gets ``mode`` (default 0644). Raises
    :class:`InputError` naming the path when it cannot be written.
    """
    target = Path(path)
    old_mode = _existing_mode(target)
    folder = target.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise InputError(f"cannot write {target}: {e.strerror or e}") from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), old_mode if old_mode is not None else (mode if mode is not None else NEW_FILE_MODE))
            os.fsync(f.fileno())
        _existing_mode(target)  # still not a link/device planted meanwhile (os.replace would not follow it anyway)
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(e, OSError):
            raise InputError(f"cannot write {target}: {e.strerror or e}") from None
        raise
    return target


def write_text(path: str | os.PathLike[str], text: str, mode: int | None = None) -> Path:
    """:func:`write_bytes` of ``text`` encoded as UTF-8."""
    return write_bytes(path, text.encode("utf-8"), mode)


def check_writable(path: str | os.PathLike[str]) -> Path:
    """Raise :class:`InputError` unless :func:`write_bytes` could write ``path`` now.

    Checks that the target is absent or a regular file and that its folder (or
    the nearest existing ancestor, which :func:`write_bytes` would create the
    rest under) is a directory where a file can really be created (a temp file
    is created and removed: permission bits alone lie for root and for
    read-only mounts). Returns the path.
    """
    target = Path(path)
    if str(path).endswith(os.sep) or target.name in ("", ".", ".."):
        raise InputError(f"cannot write {path}: give a file name, not a folder")
    _existing_mode(target)
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(f"cannot write {target}: {folder} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".crase-write-check.", dir=folder)
    except OSError as e:
        raise InputError(f"cannot write {target}: {e.strerror or e} ({folder})") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return target


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """True when ``a`` and ``b`` name one existing file, however spelt: the same path (relative, with ``..``),
    a symbolic link to it, or a hard link (one inode). A command that reads ``b`` and writes ``a`` refuses
    then, or its input would be replaced by its output."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def temp_dir_beside(path: str | os.PathLike[str]) -> Path:
    """A fresh, uniquely named empty folder next to ``path`` (for building a folder to publish atomically)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))


def publish_dir(tmp: Path, target: Path) -> bool:
    """Rename the finished folder ``tmp`` to ``target``; True if it won.

    When another process published ``target`` first, ``tmp`` is removed and
    False is returned (the caller then uses the winner's folder).
    """
    try:
        os.rename(tmp, target)
        return True
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if target.is_dir():
            return False
        raise


def remove_dir(path: Path, why: str = "old") -> None:
    """Remove the folder ``path`` so that no reader ever sees it half-deleted: it is renamed aside first
    (``.<name>.<why>-<pid>-<ns>``; processes that mapped its files keep their mapping), then deleted.
    A folder that is already gone is nothing to do."""
    aside = path.with_name(f".{path.name}.{why}-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.rename(path, aside)
    except OSError:
        return
    shutil.rmtree(aside, ignore_errors=True)


@contextlib.contextmanager
def folder_lock(folder: Path, what: str, on_busy: Callable[[], None]) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``folder`` itself (no lock file is made) for the block; closing releases it.

    When another process holds it, ``on_busy()`` is called first: it raises to refuse (an InputError saying
    so), or returns to wait for the other process. ``what`` names the folder in the one-line error when it
    cannot be opened. Without ``fcntl`` (not POSIX) nothing is locked."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as e:
        raise InputError(f"cannot open {what} {folder}: {e.strerror or e}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            on_busy()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
