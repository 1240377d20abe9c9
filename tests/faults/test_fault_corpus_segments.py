"""Faults in an appended segment of the corpus store: a truncated segment file, a missing first store, a
flipped byte. (Appends that fail or die half-way: test_fault_corpus_append.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from fault_tools import query, ranked, run_cli
from tiny_corpus import TINY_CITATIONS, TINY_PAPERS, write_corpus

from crase_core.store import corpus_store


def _grown(tmp_path: Path) -> tuple[Path, Path, str]:
    """The tiny corpus built from its first four papers plus an appended segment with the last two; the
    clean answer of a query on it."""
    corpus = write_corpus(tmp_path / "tiny", TINY_PAPERS[:4], TINY_CITATIONS[:3])
    batch = write_corpus(tmp_path / "batch", TINY_PAPERS[4:], TINY_CITATIONS[3:])
    cache = tmp_path / "cache"
    assert run_cli("corpus", "build", str(corpus), cache_dir=cache).returncode == 0
    r = run_cli("corpus", "add", str(corpus), str(batch), "--no-merge", cache_dir=cache)
    assert r.returncode == 0, r.stderr
    clean = query(corpus, cache)
    assert clean.returncode == 0, clean.stderr
    return corpus, cache, clean.stdout


def _segment(cache: Path) -> Path:
    segs = [p for p in (cache / "corpus").iterdir() if p.name.endswith(".seg")]
    assert len(segs) == 1
    return segs[0]


@pytest.mark.fault_kind("segment-truncated-file")
def test_truncated_segment_file_is_detected_and_rebuilt(tmp_path):
    corpus, cache, clean = _grown(tmp_path)
    full = query(write_corpus(tmp_path / "whole"), tmp_path / "other-cache")  # the same papers, built in one go
    assert ranked(full.stdout) == ranked(clean)
    victim = _segment(cache) / "ref_src.npy"
    victim.write_bytes(victim.read_bytes()[:-8])
    r = query(corpus, cache)
    assert r.returncode == 0, r.stderr
    assert "is damaged (" in r.stderr and "ref_src.npy has" in r.stderr and "rebuilding it" in r.stderr
    assert ranked(r.stdout) == ranked(clean)
    again = query(corpus, cache)  # a store was built for the grown files: no warning the next time
    assert again.returncode == 0 and "damaged" not in again.stderr and ranked(again.stdout) == ranked(clean)


@pytest.mark.fault_kind("segment-missing-first-store")
def test_missing_first_store_is_rebuilt(tmp_path):
    corpus, cache, clean = _grown(tmp_path)
    first = next(p for p in (cache / "corpus").iterdir() if p.name.endswith(f"-v{corpus_store.VERSION}"))
    corpus_store.remove_store(first)
    r = query(corpus, cache)
    assert r.returncode == 0, r.stderr
    assert f"its first store {first.name} is missing); rebuilding it" in r.stderr
    assert ranked(r.stdout) == ranked(clean)


@pytest.mark.fault_kind("segment-flipped-byte")
def test_flipped_byte_in_a_segment_is_caught_by_check(tmp_path):
    corpus, cache, _ = _grown(tmp_path)
    ok = run_cli("corpus", "check", str(corpus), cache_dir=cache)
    assert ok.returncode == 0 and ": sound (6 papers, 7 citations; 1 appended segments;" in ok.stdout
    title = _segment(cache) / "title.bin"
    data = bytearray(title.read_bytes())
    data[3] ^= 0x20
    title.write_bytes(bytes(data))
    bad = run_cli("corpus", "check", str(corpus), cache_dir=cache)
    assert bad.returncode == 2
    assert f"is damaged: {title.parent.name}/title.bin: CRC-32 mismatch; delete it" in bad.stderr
    assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
