"""Fault injection: a broken shipped-embeddings file turns semantic feedback off with a warning; nothing is
unpickled, nothing crashes, the search runs on its words (crase_core.semantic)."""

from __future__ import annotations

import numpy as np
import pytest

from crase_core.semantic import embeddings_file, load_embeddings


@pytest.mark.parametrize("content", [b"not a numpy file", b"\x93NUMPY\x01\x00garbage"])
def test_an_unreadable_embeddings_file_turns_the_feedback_off(tmp_path, content, caplog):
    path = tmp_path / "x.f16.npy"
    path.write_bytes(content)
    assert load_embeddings(path, 4) is None
    assert "semantic feedback off" in caplog.text


def test_embeddings_of_the_wrong_shape_or_kind_are_refused(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, (np.ones((3, 2)) / np.sqrt(2)).astype(np.float16))
    assert load_embeddings(path, 4) is None  # 3 rows for 4 papers
    assert load_embeddings(path, 3) is not None
    np.save(path, np.full((3, 2), np.nan, dtype=np.float32))
    assert load_embeddings(path, 3) is None  # not finite
    np.save(path, np.ones((3, 2), dtype=np.float32) * 3)
    assert load_embeddings(path, 3) is None  # not unit length
    np.save(path, np.array([{"a": 1}] * 3, dtype=object), allow_pickle=True)
    assert load_embeddings(path, 3) is None  # never unpickled
    assert load_embeddings(tmp_path / "missing.npy", 3) is None
    assert embeddings_file("hepth", "0123456789abcdef0123").name == "hepth-0123456789abcdef-all-MiniLM-L6-v2.f16.npy"
