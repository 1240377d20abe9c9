"""A read-only ``str → int`` mapping over a sorted, fixed-width UTF-8 byte array (``S<w>``, memory-mapped or
not): a lookup is one binary search, and nothing is loaded when it is opened. The corpus store's paper ids
and the text index's stems both use it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np


def find_sorted(keys: np.ndarray, key: str) -> int | None:
    """Position of ``key`` in the sorted ``S<w>`` array ``keys``, or None (a key wider than the array's
    width, or ending in NUL, which fixed-width bytes cannot hold, is absent)."""
    b = key.encode("utf-8", "surrogatepass")
    if not keys.size or len(b) > keys.dtype.itemsize or b.endswith(b"\x00"):
        return None
    j = int(np.searchsorted(keys, b))
    return j if j < keys.size and keys[j:j + 1].tolist() == [b] else None


class KeyLookup(Mapping[str, int]):
    """A read-only ``str → int`` mapping defined by :meth:`lookup` (None when absent), :meth:`__len__` and
    :meth:`__iter__`; non-str keys are absent."""

    def lookup(self, key: str) -> int | None:
        raise NotImplementedError

    def get(self, key: str, default: Any = None) -> Any:
        i = self.lookup(key) if isinstance(key, str) else None
        return default if i is None else i

    def __getitem__(self, key: str) -> int:
        i = self.lookup(key) if isinstance(key, str) else None
        if i is None:
            raise KeyError(key)
        return i

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.lookup(key) is not None


class SortedKeys(KeyLookup):
    """Mapping over the sorted array ``keys``; subclasses say what a found position maps to (:meth:`lookup`)."""

    def __init__(self, keys: np.ndarray):
        self.keys_array = keys

    def lookup(self, key: str) -> int | None:
        return find_sorted(self.keys_array, key)

    def __len__(self) -> int:
        return int(self.keys_array.size)

    def __iter__(self) -> Iterator[str]:
        for raw in self.keys_array.tolist():
            yield raw.decode("utf-8", "surrogatepass")
