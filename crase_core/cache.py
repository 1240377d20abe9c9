"""On-disk caches: the result cache (claims, matrices, plans) and derived files.

Result keys are ``kind|identity|sha256(inputs)`` where ``identity`` names the
component that produced the value *and* its prompt/algorithm version (for a
model backend: model name + prompt version), so a change of either misses.
A corrupt or unreadable entry is treated as a miss and overwritten, never
raised to the user; a damaged database is rebuilt; a cache folder that cannot
be used means running without the cache (a warning says so). Values are
stored as JSON (:class:`JsonDisk`): nothing read from the cache is unpickled.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import diskcache
from diskcache.core import EVICTION_POLICY

from crase_core.settings import environment

log = logging.getLogger(__name__)

#: keys per SQLite query when a batch is read (below SQLite's limit on bound parameters)
READ_BATCH = 900
#: the mode of a value JsonDisk keeps inside the database (JSON bytes below diskcache's file size)
INLINE_JSON = diskcache.core.MODE_RAW


def cache_root() -> Path:
    """``$CRASE_CACHE_DIR``, else the per-user cache dir (``~/.cache/crase``).

    Created when missing. When it cannot be (a file is in the way, no permission) a warning says
    so and the path is returned anyway: every cache under it then runs without its disk copy.
    """
    path = environment.cache_folder()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        _warn_once(f"cache folder {path} is not usable ({e.strerror or e}); running without the on-disk caches")
    return path


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning("%s", message)


class JsonDisk(diskcache.Disk):
    """diskcache storage that holds JSON only: values are written as UTF-8 JSON bytes, keys as text.

    Reading never unpickles: an entry stored any other way (an old pickled entry, or one
    planted in ``cache.db``) raises ValueError, which the caches treat as a miss.
    """

    def put(self, key: Any) -> tuple[Any, bool]:
        if not isinstance(key, str):
            raise TypeError("cache keys are strings")
        return super().put(key)

    def get(self, key: Any, raw: bool) -> Any:
        if not raw or not isinstance(key, str):
            raise ValueError("refusing a non-text cache key")
        return key

    def store(self, value: Any, read: bool, key: Any = diskcache.core.UNKNOWN) -> Any:
        if read:
            raise ValueError("file values are not stored in this cache")
        data = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
        return super().store(data, False, key=key)

    def fetch(self, mode: int, filename: Any, value: Any, read: bool) -> Any:
        core = diskcache.core
        if read or mode not in (core.MODE_RAW, core.MODE_BINARY):
            raise ValueError(f"refusing a cache entry stored in mode {mode} (only JSON is read)")
        if mode == core.MODE_RAW and not isinstance(value, bytes | memoryview):
            raise ValueError("refusing a cache entry that is not JSON bytes")
        if mode == core.MODE_BINARY and (not isinstance(filename, str) or os.path.isabs(filename)
                                         or ".." in Path(filename).parts):
            raise ValueError("refusing a cache entry file outside the cache folder")
        data = super().fetch(mode, filename, value, read)
        return json.loads(bytes(data).decode("utf-8"))


def open_disk_cache(directory: Path, what: str, **settings: Any) -> diskcache.Cache | None:
    """A :class:`diskcache.Cache` with :class:`JsonDisk` at ``directory``, or None (with a warning).

    A damaged database (``cache.db`` that is not SQLite, or malformed) is deleted and recreated:
    it only holds derived data. A folder that cannot be created or written gives None, and the
    caller runs without this cache.
    """
    for attempt in (1, 2):
        try:
            return diskcache.Cache(str(directory), disk=JsonDisk, **settings)
        except sqlite3.DatabaseError as e:
            damaged = not isinstance(e, sqlite3.OperationalError) or "malformed" in str(e)
            if damaged and attempt == 1:
                log.warning("the %s at %s is damaged (%s); rebuilding it", what, directory, e)
                for name in ("cache.db", "cache.db-wal", "cache.db-shm"):
                    with contextlib.suppress(OSError):
                        (directory / name).unlink()
                continue
            reason = str(e)
        except OSError as e:
            reason = e.strerror or str(e)
        log.warning("the %s at %s is unavailable (%s); running without it", what, directory, reason)
        return None
    return None


def stable_hash(value: Any) -> str:
    """sha256 of the canonical JSON of ``value`` (sorted keys), hex, 32 chars."""
    blob = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


def result_key(kind: str, identity: str, inputs: Any) -> str:
    return f"{kind}|{identity}|{stable_hash(inputs)}"


def _decode_inline(entries: list[tuple[str, bytes]]) -> Iterator[tuple[str, Any]]:
    """(key, value) of the JSON values kept inside the database, decoded in one go (as one JSON array: a cached
    run reads thousands of small matrices; issue 31); when that fails, one by one, an undecodable entry a miss
    with a warning. What JsonDisk.fetch does, without its calls per entry."""
    if not entries:
        return
    try:
        values = json.loads(b"[" + b",".join(v for _, v in entries) + b"]")
        if len(values) == len(entries):
            yield from zip((k for k, _ in entries), values, strict=True)
            return
    except (ValueError, RecursionError):
        pass
    for key, value in entries:
        try:
            yield key, json.loads(value.decode("utf-8"))
        except (ValueError, RecursionError) as e:  # corrupt entry: a miss
            log.warning("cache entry unreadable, recomputing (%s)", type(e).__name__)


class ResultCache:
    """Batch get/set of JSON-able values over :class:`diskcache.Cache`.

    Batches run inside one SQLite transaction, which is what makes a warm
    query with tens of thousands of edges cheap.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None, size_limit: int = 4 << 30,
                 memory_items: int = 200_000):
        self.directory = Path(directory) if directory else cache_root() / "results"
        self._cache = open_disk_cache(self.directory, "result cache", size_limit=size_limit,
                                      eviction_policy="least-recently-stored")
        self.available = self._cache is not None
        # an in-process LRU in front of the disk: long-lived processes (the app, evaluation) skip SQLite
        self._memory: OrderedDict[str, Any] = OrderedDict()
        self._memory_items = memory_items
        # key → (the in-memory value a reader has checked, what it read from it) (:meth:`mark_checked`): the same
        # object needs no new check
        self._checked: dict[str, Any] = {}

    def _remember(self, key: str, value: Any) -> None:
        if self._memory_items <= 0:
            return
        if self._memory.get(key) is not value:
            self._checked.pop(key, None)  # another value: whatever was checked is gone
        self._memory[key] = value
        self._memory.move_to_end(key)
        while len(self._memory) > self._memory_items:
            old, _ = self._memory.popitem(last=False)
            self._checked.pop(old, None)

    def mark_checked(self, key: str, value: Any, reading: Any = True) -> None:
        """Record that ``value``, this cache's in-memory value of ``key``, passed its reader's checks, and what
        the reader made of it (``reading``: kept for :meth:`checked_reading`)."""
        if self._memory.get(key) is value:
            self._checked[key] = (value, reading)

    def is_checked(self, key: str, value: Any) -> bool:
        """Whether ``value`` is the very object :meth:`mark_checked` recorded for ``key`` (a value replaced since,
        or read again from disk, is another object and is checked again)."""
        return self.checked_reading(key, value) is not None

    def checked_reading(self, key: str, value: Any) -> Any:
        """What the reader made of ``value`` when :meth:`mark_checked` recorded it for ``key``; None unless
        ``value`` is that very object."""
        entry = self._checked.get(key)
        return entry[1] if entry is not None and entry[0] is value else None

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        keys = list(keys)
        if not keys:
            return found
        misses = []
        for key in keys:
            if key in self._memory:
                found[key] = self._memory[key]
            else:
                misses.append(key)
        if not misses:
            return found
        keys = misses
        if self._cache is None:
            return found
        try:
            with self._cache.transact():
                for key, value in self._read(keys):
                    if value is not None:
                        found[key] = value
                        self._remember(key, value)
        except Exception as e:  # the whole cache unreadable: run without it
            log.warning("result cache unavailable (%s); computing everything", type(e).__name__)
        return found

    def _read(self, keys: list[str]) -> Iterator[tuple[str, Any]]:
        """(key, value) of the readable entries of ``keys`` the disk holds: one SQLite query per
        :data:`READ_BATCH` keys (a cached run reads thousands of matrices; issue 31) where the cache
        keeps no statistics and updates nothing on a read (the policy this cache is opened with), else
        one ``get`` per key. An unreadable entry is a miss, with a warning."""
        cache = self._cache
        assert cache is not None
        if cache.statistics or EVICTION_POLICY[cache.eviction_policy]["get"] is not None:
            for key in keys:
                try:
                    yield key, cache.get(key, default=None)
                except Exception as e:  # corrupt entry: a miss
                    log.warning("cache entry unreadable, recomputing (%s)", type(e).__name__)
            return
        for i in range(0, len(keys), READ_BATCH):
            batch = keys[i:i + READ_BATCH]
            rows = cache._sql(
                "SELECT key, mode, filename, value FROM Cache WHERE raw = 1 AND key IN "
                f"({','.join('?' * len(batch))}) AND (expire_time IS NULL OR expire_time > ?)",
                (*batch, time.time())).fetchall()
            inline = [(key, value) for key, mode, filename, value in rows
                      if mode == INLINE_JSON and filename is None and isinstance(value, bytes)]
            yield from _decode_inline(inline)
            for key, mode, filename, value in rows:
                if mode == INLINE_JSON and filename is None and isinstance(value, bytes):
                    continue
                try:
                    yield key, cache.disk.fetch(mode, filename, value, False)
                except Exception as e:  # corrupt entry: a miss
                    log.warning("cache entry unreadable, recomputing (%s)", type(e).__name__)

    def set_many(self, items: dict[str, Any]) -> None:
        if not items:
            return
        for key, value in items.items():
            self._remember(key, value)
        if self._cache is None:
            return
        try:
            with self._cache.transact():
                for key, value in items.items():
                    self._cache.set(key, value)
        except Exception as e:
            log.warning("could not write the result cache (%s); results are not reused", type(e).__name__)

    def contains_many(self, keys: Iterable[str]) -> set[str]:
        present: set[str] = {k for k in keys if k in self._memory} if self._cache is None else set()
        if self._cache is None:
            return present
        try:
            with self._cache.transact():
                for key in keys:
                    if key in self._cache:
                        present.add(key)
        except Exception:
            pass
        return present

    def clear(self) -> None:
        self._memory.clear()
        self._checked.clear()
        if self._cache is not None:
            self._cache.clear()

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()

    def __len__(self) -> int:
        return len(self._cache) if self._cache is not None else len(self._memory)
