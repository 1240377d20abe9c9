"""``crase eval --workers 2`` opens the corpus once: the parent opens it before forking, and the workers
read the same file mappings (pages shared, not copied; no second open)."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest
from tiny_corpus import write_corpus

from crase_core import runtime
from crase_core.runtime import RuntimeConfig, build_engine


def _smaps_entry(path_suffix: str) -> dict[str, int]:
    """This process's /proc/self/smaps fields (kB) for the mapping of the file ending in ``path_suffix``."""
    fields: dict[str, int] = {}
    current = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5:  # a mapping's header line
            current = line.endswith(path_suffix)
            continue
        if current and line.endswith(" kB"):
            key, value = line.split(":", 1)
            fields[key] = fields.get(key, 0) + int(value.split()[0])
    return fields


def _in_worker(corpus_dir: str) -> tuple[int, int, dict[str, int]]:
    before = runtime._local_source.cache_info().misses
    engine = build_engine(RuntimeConfig(corpus_dir=corpus_dir))  # what every eval query does in a worker
    corpus = engine.source.corpus  # type: ignore[attr-defined]
    int(corpus.refs.indices.sum())  # read the graph
    return before, runtime._local_source.cache_info().misses, _smaps_entry("refs_indices.npy")


@pytest.mark.skipif(not Path("/proc/self/smaps").exists() or "fork" not in mp.get_all_start_methods(),
                    reason="needs Linux /proc and fork")
def test_eval_workers_share_the_parents_mapped_corpus(tmp_path, monkeypatch):
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    folder = str(write_corpus(tmp_path / "shared-corpus"))
    engine = build_engine(RuntimeConfig(corpus_dir=folder))  # the harness does this before forking its pool
    int(engine.source.corpus.refs.indices.sum())  # type: ignore[attr-defined]
    opened = runtime._local_source.cache_info().misses
    with mp.get_context("fork").Pool(2) as pool:
        results = pool.map(_in_worker, [folder, folder])
    for before, after, smaps in results:
        assert before == after == opened  # no worker opened the corpus again
        assert smaps.get("Rss", 0) > 0  # the store file is mapped in the worker ...
        shared = smaps.get("Shared_Clean", 0) + smaps.get("Shared_Dirty", 0)  # dirty: the page cache not yet written back
        assert shared == smaps["Rss"] and smaps["Pss"] < smaps["Rss"], smaps  # every page shared, none copied
        assert smaps.get("Private_Clean", 0) == smaps.get("Private_Dirty", 0) == smaps.get("Anonymous", 0) == 0
