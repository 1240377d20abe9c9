"""On-disk caches: the result cache (claims, matrices, plans) and derived files.

Result keys are ``kind|identity|sha256(inputs)`` where ``identity`` names the
component that produced the value *and* its prompt/algorithm version (for a
model backend: model name + prompt version), so a change of either misses.
A corrupt or unreadable entry is treated as a miss and overwritten, never
raised to the user.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import diskcache
import platformdirs

from . import environment

log = logging.getLogger(__name__)


def cache_root() -> Path:
    """``$CRASE_CACHE_DIR``, else the per-user cache dir (``~/.cache/crase``)."""
    root = environment.get(environment.CACHE_DIR) or platformdirs.user_cache_dir("crase")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def stable_hash(value: Any) -> str:
    """sha256 of the canonical JSON of ``value`` (sorted keys), hex, 32 chars."""
    blob = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


def result_key(kind: str, identity: str, inputs: Any) -> str:
    return f"{kind}|{identity}|{stable_hash(inputs)}"


class ResultCache:
    """Batch get/set of JSON-able values over :class:`diskcache.Cache`.

    Batches run inside one SQLite transaction, which is what makes a warm
    query with tens of thousands of edges cheap.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None, size_limit: int = 4 << 30,
                 memory_items: int = 200_000):
        self.directory = Path(directory) if directory else cache_root() / "results"
        self._cache = diskcache.Cache(str(self.directory), size_limit=size_limit, eviction_policy="least-recently-stored")
        # an in-process LRU in front of the disk: long-lived processes (the app, evaluation) skip SQLite
        self._memory: OrderedDict[str, Any] = OrderedDict()
        self._memory_items = memory_items

    def _remember(self, key: str, value: Any) -> None:
        if self._memory_items <= 0:
            return
        self._memory[key] = value
        self._memory.move_to_end(key)
        while len(self._memory) > self._memory_items:
            self._memory.popitem(last=False)

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
        try:
            with self._cache.transact():
                for key in keys:
                    try:
                        value = self._cache.get(key, default=None)
                    except Exception as e:  # corrupt entry: a miss
                        log.warning("cache entry unreadable, recomputing (%s)", type(e).__name__)
                        value = None
                    if value is not None:
                        found[key] = value
                        self._remember(key, value)
        except Exception as e:  # the whole cache unreadable: run without it
            log.warning("result cache unavailable (%s); computing everything", type(e).__name__)
        return found

    def set_many(self, items: dict[str, Any]) -> None:
        if not items:
            return
        for key, value in items.items():
            self._remember(key, value)
        try:
            with self._cache.transact():
                for key, value in items.items():
                    self._cache.set(key, value)
        except Exception as e:
            log.warning("could not write the result cache (%s); results are not reused", type(e).__name__)

    def contains_many(self, keys: Iterable[str]) -> set[str]:
        present: set[str] = set()
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
        self._cache.clear()

    def close(self) -> None:
        self._cache.close()

    def __len__(self) -> int:
        return len(self._cache)
