"""Folders of memory-mapped ``.npy`` arrays described by a ``meta.json`` (the corpus store, the text index):
reading the versioned description, and mapping one array checked against it. Nothing is unpickled; a
mismatch is a ValueError naming what is wrong (the caller rebuilds the folder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def read_meta(folder: Path, fmt: str, version: Any, what: str) -> dict[str, Any]:
    """``folder/meta.json`` as a dict, when it is readable and says ``format`` ``fmt`` and ``version``."""
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"meta.json unreadable ({type(e).__name__})") from None
    if not isinstance(meta, dict) or meta.get("format") != fmt or meta.get("version") != version:
        raise ValueError(f"not {what} of this version")
    return meta


def map_npy(path: Path, dtype: str, shape: list[int], size: int) -> np.ndarray:
    """The array in ``path``, memory-mapped, when its file has ``size`` bytes and it has that dtype and shape."""
    if path.stat().st_size != size:
        raise ValueError(f"{path.name} has {path.stat().st_size} bytes, meta.json says {size}: truncated or replaced")
    a = np.load(path, mmap_mode="r", allow_pickle=False)
    if [a.dtype.str, list(a.shape)] != [dtype, shape]:
        raise ValueError(f"{path.name} does not match meta.json")
    return np.asarray(a)  # a plain view of the mapping (np.memmap's indexing is slower)
