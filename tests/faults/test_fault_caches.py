"""Faults in the on-disk caches: planted pickles, a corrupt or unusable cache, 8 first runs at once."""

from __future__ import annotations

import os
import pickle
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import diskcache
import pytest
from fault_tools import QUERY, cli_env, query, ranked, shared_tmp
from tiny_corpus import TINY_CITATIONS, TINY_PAPERS, write_corpus

from crase_core.store.corpus import fingerprint


class _Payload:
    """Unpickling this runs ``open(marker, "w")``: proof that a cache file was executed."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _clean_answer(corpus: Path, tmp: Path) -> str:
    r = query(corpus, tmp / "clean-cache")
    assert r.returncode == 0, r.stderr
    return ranked(r.stdout)


@pytest.mark.fault_kind("cache-planted-pickle")
def test_planted_pickles_in_every_cache_are_never_executed(tmp_path, monkeypatch):
    corpus = write_corpus(tmp_path / "tiny")
    cache = tmp_path / "cache"
    marker = tmp_path / "EXECUTED"
    evil = pickle.dumps(_Payload(marker))
    fp = fingerprint([corpus / "papers.jsonl", corpus / "citations.tsv"])
    (cache / "corpus").mkdir(parents=True)
    for name in (f"tiny-{fp}-v1.pkl", f"tiny-{fp}-v2.npz"):  # the old pickle cache's name and the new one's
        (cache / "corpus" / name).write_bytes(evil)
    # result and Semantic Scholar caches: a pickled entry planted with diskcache's default (pickling) storage
    for folder in ("results", "s2"):
        with diskcache.Cache(str(cache / folder)) as planted:
            planted.set("planted-key", _Payload(marker))

    monkeypatch.setenv("CRASE_CACHE_DIR", str(cache))
    from crase_core.cache import ResultCache
    from crase_core.sources.local import LocalSource
    from crase_core.sources.s2_http import ResponseCache

    source = LocalSource.open(corpus)
    results = ResultCache(cache / "results", memory_items=0)
    assert results.get_many(["planted-key"]) == {}  # a miss, not a value
    results.close()
    responses = ResponseCache(cache / "s2", 60.0)
    assert responses.get("planted-key") is None
    responses.close()
    assert not marker.exists(), "a planted pickle was executed"
    assert len(source.corpus) == 6 and source.corpus.n_citations == 7
    # the planted files were ignored: the corpus lives in a memory-mapped store beside them, which the next open maps
    from crase_core.store import corpus_store

    stores = [p for p in (cache / "corpus").iterdir() if p.is_dir()]
    assert len(stores) == 1 and corpus_store.verify(stores[0]) == []
    again = corpus_store.open_store(stores[0], fp, "tiny")
    assert list(again.papers) == list(source.corpus.papers)
    # a rerun of the CLI on this cache gives the clean answer
    r = query(corpus, cache)
    assert r.returncode == 0, r.stderr
    assert ranked(r.stdout) == _clean_answer(corpus, tmp_path)
    assert not marker.exists()


@pytest.mark.fault_kind("cache-result-db-corrupt")
def test_corrupt_result_cache_db_is_rebuilt(tmp_path):
    corpus = write_corpus(tmp_path / "tiny")
    cache = tmp_path / "cache"
    (cache / "results").mkdir(parents=True)
    (cache / "results" / "cache.db").write_bytes(os.urandom(8192))
    r = query(corpus, cache)
    assert r.returncode == 0, r.stderr
    assert f"the result cache at {cache / 'results'} is damaged (file is not a database); rebuilding it" in r.stderr
    assert ranked(r.stdout) == _clean_answer(corpus, tmp_path)
    with sqlite3.connect(cache / "results" / "cache.db") as con:  # a real database again
        assert con.execute("SELECT count(*) FROM Cache").fetchone()[0] > 0
    rerun = query(corpus, cache)
    assert rerun.returncode == 0 and "damaged" not in rerun.stderr
    assert re.search(r"cache \d+ hits / 0 misses", rerun.stdout)  # the rebuilt cache serves the whole rerun
    assert ranked(rerun.stdout) == ranked(r.stdout)


@pytest.mark.fault_kind("cache-graph-matrices-corrupt")
@pytest.mark.parametrize("bad", [{"float64": "AAAA"}, {"float64": 7}, "not a dict"])
def test_corrupt_whole_graph_matrices_are_read_edge_by_edge(tmp_path, bad):
    """A graph's matrices kept together (a cached run reads them in one go; issue 31) that do not decode, or hold
    another number of values: the run says so, reads each edge's own entry, gives the clean answer, and keeps the
    matrices together afresh."""
    from crase_core.cache import ResultCache

    corpus = write_corpus(tmp_path / "tiny")
    cache = tmp_path / "cache"
    for _ in range(2):  # scored, then read back edge by edge and kept together
        assert query(corpus, cache).returncode == 0
    with sqlite3.connect(cache / "results" / "cache.db") as con:
        [key] = [k for (k,) in con.execute("SELECT key FROM Cache WHERE key LIKE 'matrices|%'")]
    results = ResultCache(cache / "results")
    results.set_many({key: bad})
    results.close()
    r = query(corpus, cache)
    assert r.returncode == 0, r.stderr
    assert "corrupt cached matrices of this graph; reading them edge by edge" in r.stderr
    assert re.search(r"cache \d+ hits / 0 misses", r.stdout)
    assert ranked(r.stdout) == _clean_answer(corpus, tmp_path)
    again = query(corpus, cache)
    assert again.returncode == 0 and "corrupt" not in again.stderr
    assert ranked(again.stdout) == ranked(r.stdout)


@pytest.mark.fault_kind("cache-dir-is-a-file")
def test_cache_dir_that_is_a_file_runs_without_caching(tmp_path):
    corpus = write_corpus(tmp_path / "tiny")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("precious\n")
    r = query(corpus, blocker)
    assert r.returncode == 0, r.stderr
    assert f"cache folder {blocker} is not usable (File exists); running without the on-disk caches" in r.stderr
    assert "Traceback" not in r.stderr
    assert ranked(r.stdout) == _clean_answer(corpus, tmp_path)
    assert blocker.read_text() == "precious\n"  # nothing written to or over the file
    fixed = query(corpus, tmp_path / "a-dir")  # the fault gone: a normal, cached run
    assert fixed.returncode == 0 and "not usable" not in fixed.stderr
    assert ranked(fixed.stdout) == ranked(r.stdout)


@pytest.mark.fault_kind("cache-dir-read-only")
def test_read_only_cache_folder_runs_without_caching():
    tmp = shared_tmp("ro")
    try:
        _read_only_cache_folder(tmp)
    finally:
        (tmp / "cache").chmod(0o755)
        shutil.rmtree(tmp, ignore_errors=True)


def _read_only_cache_folder(tmp: Path) -> None:
    corpus = write_corpus(tmp / "tiny")
    cache = tmp / "cache"
    cache.mkdir()
    cache.chmod(0o555)
    r = query(corpus, cache, unprivileged=True)
    assert r.returncode == 0, r.stderr
    assert f"the result cache at {cache / 'results'} is unavailable (" in r.stderr
    assert "could not be created); running without it" in r.stderr
    assert "could not cache the parsed corpus" in r.stderr and "using it from memory" in r.stderr
    assert list(cache.iterdir()) == []  # nothing written
    expected = query(corpus, tmp / "cache-rw")
    assert ranked(r.stdout) == ranked(expected.stdout)
    cache.chmod(0o755)  # the fault gone: the same folder works and caches
    again = query(corpus, cache, unprivileged=True)
    assert again.returncode == 0 and "unavailable" not in again.stderr
    assert ranked(again.stdout) == ranked(expected.stdout) and (cache / "results" / "cache.db").is_file()


_STARTER = """
import sys, time
from crase_core import cli
start = float(sys.argv[1])
time.sleep(max(0.0, start - time.time()))
raise SystemExit(cli.main(sys.argv[2:]))
"""


def _synthetic_corpus(folder: Path, n: int = 3000) -> Path:
    """The tiny corpus plus ``n`` filler papers (deterministic): big enough that writing its caches takes a while."""
    rng = random.Random(7)
    words = sorted({w for _, _, t, a in TINY_PAPERS for w in re.findall(r"[a-z]+", f"{t} {a}".lower()) if len(w) > 3})
    papers = list(TINY_PAPERS)
    for i in range(n):
        title = " ".join(rng.sample(words, 6))
        papers.append((f"97{i // 1000 % 12 + 1:02d}{i % 1000:03d}", 1997, title.capitalize(),
                       " ".join(rng.choice(words) for _ in range(60))))
    citations = list(TINY_CITATIONS) + [(papers[rng.randrange(6, len(papers))][0], papers[rng.randrange(6, len(papers))][0])
                                        for _ in range(4 * n)]
    return write_corpus(folder, papers, citations)


@pytest.mark.fault_kind("cache-concurrent-first-queries")
def test_eight_first_queries_at_once_on_an_empty_cache(tmp_path):
    corpus = _synthetic_corpus(tmp_path / "synthetic")
    cache = tmp_path / "cache"  # empty: every process builds the corpus cache, the index and the result cache
    start = time.time() + 6.0  # all eight pass their imports first, then start together
    procs = [subprocess.Popen([sys.executable, "-c", _STARTER, str(start), "query", QUERY, "--corpus", str(corpus),
                               "--quiet"], env=cli_env(cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(8)]
    outs = [p.communicate(timeout=180) for p in procs]
    codes = [p.returncode for p in procs]
    assert codes == [0] * 8, [err[-400:] for _, err in outs]
    expected = _clean_answer(corpus, tmp_path)  # one run alone, on its own cache
    assert all(ranked(out) == expected for out, _ in outs)
    leftovers = [p.name for p in cache.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
    assert len(list((cache / "index").iterdir())) == 1 and len(list((cache / "corpus").iterdir())) == 1
