"""Faults in the memory-mapped corpus store: a truncated file, a flipped byte, a garbage meta.json, a damaged index."""

from __future__ import annotations

from pathlib import Path

import pytest
from fault_tools import query, ranked, run_cli
from tiny_corpus import write_corpus


def _store(cache: Path) -> Path:
    stores = [p for p in (cache / "corpus").iterdir() if p.is_dir()]
    assert len(stores) == 1
    return stores[0]


@pytest.mark.fault_kind("store-truncated-file")
def test_truncated_store_file_is_detected_and_rebuilt(tmp_path):
    corpus = write_corpus(tmp_path / "tiny")
    cache = tmp_path / "cache"
    clean = query(corpus, cache)
    assert clean.returncode == 0, clean.stderr
    victim = _store(cache) / "refs_indices.npy"
    victim.write_bytes(victim.read_bytes()[:-8])  # the last two citations cut off
    r = query(corpus, cache)
    assert r.returncode == 0, r.stderr
    assert "is damaged (refs_indices.npy has 148 bytes, meta.json says 156: truncated or replaced); rebuilding it" in r.stderr
    assert ranked(r.stdout) == ranked(clean.stdout)
    again = query(corpus, cache)  # the rebuilt store is sound: no warning the next time
    assert again.returncode == 0 and "damaged" not in again.stderr


@pytest.mark.fault_kind("store-garbage-meta", "store-flipped-byte")
def test_garbage_meta_is_rebuilt_and_flipped_byte_is_caught_by_check(tmp_path):
    corpus = write_corpus(tmp_path / "tiny")
    cache = tmp_path / "cache"
    assert run_cli("corpus", "build", str(corpus), cache_dir=cache).returncode == 0
    (_store(cache) / "meta.json").write_bytes(b"\x00garbage")
    r = run_cli("corpus", "check", str(corpus), cache_dir=cache)
    assert r.returncode == 0 and "meta.json unreadable (JSONDecodeError)); rebuilding it" in r.stderr
    assert ": sound (6 papers, 7 citations;" in r.stdout
    # a flipped byte inside an array keeps sizes and shapes: open cannot see it, `crase corpus check` does
    title = _store(cache) / "title.bin"
    data = bytearray(title.read_bytes())
    data[3] ^= 0x20
    title.write_bytes(bytes(data))
    bad = run_cli("corpus", "check", str(corpus), cache_dir=cache)
    assert bad.returncode == 2
    assert "is damaged: title.bin: CRC-32 mismatch; delete it and run `crase corpus build` again" in bad.stderr
    assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


@pytest.mark.fault_kind("index-damaged-file")
def test_damaged_index_file_is_rebuilt(tmp_path):
    corpus = write_corpus(tmp_path / "tiny")
    cache = tmp_path / "cache"
    clean = query(corpus, cache)
    index = next((cache / "index").iterdir())
    (index / "docs.npy").write_bytes(b"\x93NUMPY garbage")
    r = query(corpus, cache)
    assert r.returncode == 0, r.stderr
    size = len(b"\x93NUMPY garbage")
    assert f"index at {index} unreadable (docs.npy has {size} bytes, meta.json says " in r.stderr
    assert ": truncated or replaced); rebuilding" in r.stderr
    assert ranked(r.stdout) == ranked(clean.stdout)
