"""The memory-mapped corpus store and its appends, on hand-made corpora whose every number is checked.

An append must give exactly what a full build of the grown files gives (Lucene-style: index-wide BM25
statistics, not per-segment ones), the leakage filter must hide appended papers by month, and a reopen
must map, not parse.
"""

from __future__ import annotations

import json
import mmap
import os
import subprocess
import sys
from pathlib import Path

import bm25s
import numpy as np
import pytest
import scipy.sparse as sp
from tiny_corpus import TINY_CITATIONS, TINY_PAPERS, write_corpus

from crase_core.cli.main import main as cli_main
from crase_core.paper_source import SourceFilter
from crase_core.sources.local import LocalSource, open_corpus
from crase_core.store import corpus as corpus_module
from crase_core.store import corpus_folder, corpus_store, segments
from crase_core.store.corpus import load_corpus
from crase_core.store.textindex import TextIndex, document_terms
from crase_core.text import content_terms

# The base corpus: the tiny corpus's first four papers, a citation to a paper it does not hold yet
# (0001001, added later: a full build of the grown files keeps that edge) and one to a paper never added.
BASE_PAPERS = TINY_PAPERS[:4]
BASE_CITATIONS = [*TINY_CITATIONS[:3], ("9902001", "0001001"), ("9801001", "9999999"), ("9901001", "9802001")]
# The batch: two new papers, a repeated id (first record wins: ignored), a new citation between two old
# papers, new → old, old → new, a self-loop, a malformed line and an unknown id.
NEW_PAPERS = [TINY_PAPERS[4], TINY_PAPERS[5],
              ("9801001", 1998, "A second record of an old id", "Glueball glueball glueball.")]
NEW_CITATIONS = [("9902001", "9801001"), ("0001001", "9901001"), ("0001001", "9802001"), ("9801001", "0002001"),
                 ("0002001", "0002001"), ("0002001", "8888888")]
QUERIES = ["black hole entropy", "glueball lattice glueball", "anti-de Sitter holography", "nothing known here"]


def _write(folder: Path, papers, citations, malformed: bool = False) -> Path:
    write_corpus(folder, papers, citations)
    if malformed:
        with open(folder / "citations.tsv", "a", encoding="utf-8") as f:
            f.write("just-one-field\n")
    return folder


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("CRASE_CACHE_DIR", str(root))
    return root


def _grown(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    base = _write(tmp_path / "grow", BASE_PAPERS, BASE_CITATIONS)
    open_corpus(base)  # builds the store and the index of the base corpus
    new = _write(tmp_path / "batch", NEW_PAPERS, NEW_CITATIONS, malformed=True)
    return base, corpus_folder.add_papers(base, new, merge_policy=False)


def _same_graph(a, b) -> bool:
    a, b = (m if isinstance(m, sp.csr_matrix) else m.tocsr() for m in (a, b))
    return a.shape == b.shape and np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)


def test_append_equals_a_full_build_of_the_grown_files(tmp_path, cache, monkeypatch):
    folder, counts = _grown(tmp_path)
    assert counts == {"papers": 2, "citations": 5, "total_papers": 6, "appended": 1}  # 9902001→0001001 (was pending) + 4 new
    appended = open_corpus(folder)
    assert appended.segments and appended.store == appended.segments[-1]  # a store and one segment
    appended_index = TextIndex.for_corpus(appended)
    assert appended_index.build_seconds == 0.0 and len(appended_index.segments) == 1  # nothing rebuilt
    # the same files built from scratch, in a fresh cache
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "fresh-cache"))
    full = open_corpus(folder)
    full_index = TextIndex.for_corpus(full)
    parsed = load_corpus(folder)
    assert not full.segments and full.fingerprint == parsed.fingerprint
    assert appended.fingerprint not in (full.fingerprint, appended.base_fingerprint)  # chained: it changed
    assert [p.id for p in appended.papers] == ["9801001", "9802001", "9901001", "9902001", "0001001", "0002001"]
    assert list(appended.papers) == list(full.papers) == list(parsed.papers)
    assert appended.papers[0].title == "Black hole entropy from D-branes"  # the first record of an id wins
    assert appended.index["0002001"] == 5 and appended.index.get("9801001") == 0 and "8888888" not in appended.index
    assert np.array_equal(appended.months, full.months)
    for m in ("refs", "cites"):
        assert _same_graph(getattr(appended, m), getattr(full, m)) and _same_graph(getattr(full, m), getattr(parsed, m))
    for i in range(6):
        assert np.array_equal(appended.references_of(i), full.references_of(i))
        assert np.array_equal(appended.citers_of(i), full.citers_of(i))
    assert np.array_equal(appended.in_degree(), full.in_degree())
    edges = sorted(appended.iter_edges())
    assert ("9902001", "0001001") in edges and ("9801001", "0002001") in edges and ("9902001", "9801001") in edges
    assert len(edges) == 8 and appended.n_citations == full.n_citations == 8
    assert appended.dropped_edges == full.dropped_edges == parsed.dropped_edges == {
        "self_loops": 1, "unknown_ids": 2, "duplicates": 1, "malformed": 1}
    src, dst, _ = segments.load_chain(appended).pending()
    assert [x.decode() for x in dst] == ["9999999", "8888888"] and [x.decode() for x in src] == ["9801001", "0002001"]
    merged = appended_index.merged()
    for name in ("vocab", "indptr", "docs", "tf", "doc_len"):
        assert np.array_equal(getattr(merged, name), getattr(full_index.postings, name)), name
    assert appended_index.n_docs == 6 and appended_index.document_frequencies() == full_index.document_frequencies()
    for q in QUERIES:
        assert np.array_equal(appended_index.scores(q), full_index.scores(q)), q
        for t in content_terms(q):
            assert np.array_equal(appended_index.postings_of(t), full_index.postings_of(t)), t
            assert appended_index.df(t) == full_index.df(t)
    # and the scores are bm25s's Lucene BM25, bit for bit
    ref = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    ref.index([document_terms(p.title, p.abstract) for p in parsed.papers], show_progress=False)
    for q in QUERIES:
        terms = [t for t in content_terms(q) if t in ref.vocab_dict]
        expected = ref.get_scores(terms) if terms else np.zeros(len(parsed), dtype=np.float32)
        assert np.array_equal(appended_index.scores(q), expected), q


def test_merge_gives_the_files_of_a_full_build(tmp_path, cache, monkeypatch, capsys):
    folder, _ = _grown(tmp_path)
    appended = open_corpus(folder)
    assert cli_main(["corpus", "merge", str(folder)]) == 0
    assert "grow: merged 1 segments into one store (6 papers;" in capsys.readouterr().out
    merged = open_corpus(folder)
    assert not merged.segments and merged.fingerprint == appended.fingerprint  # caches keyed by it stay valid
    assert [p.name for p in (cache / "corpus").iterdir()] == [merged.store.name]  # segments and old store gone
    assert appended.papers[5].id == "0002001"  # a process that mapped the segments still reads them
    merged_index = TextIndex.for_corpus(merged)
    assert merged_index.build_seconds == 0.0 and not merged_index.segments
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "fresh-cache"))
    full = open_corpus(folder)
    full_index = TextIndex.for_corpus(full)
    for f in sorted(merged.store.iterdir()):  # every file of the store, by value and dtype
        if f.suffix == ".npy":
            a, b = np.load(f), np.load(full.store / f.name)
            assert a.dtype == b.dtype and np.array_equal(a, b), f.name
        elif f.suffix == ".bin":
            assert f.read_bytes() == (full.store / f.name).read_bytes(), f.name
    meta_m, meta_f = (json.loads((s.store / "meta.json").read_text()) for s in (merged, full))
    # the validation report's examples name lines of the file each batch came from, not of the grown file
    ex_m, ex_f = meta_m["validation"].pop("examples"), meta_f["validation"].pop("examples")
    assert set(ex_m) == set(ex_f) and all(len(ex_m[k]) == len(ex_f[k]) for k in ex_m)
    assert meta_m.pop("fingerprint") != meta_f.pop("fingerprint") and meta_m == meta_f
    for f in sorted(merged_index.path.iterdir()):
        assert f.read_bytes() == (full_index.path / f.name).read_bytes(), f.name
    assert cli_main(["corpus", "merge", str(folder)]) == 0
    assert "no segments to merge" in capsys.readouterr().out


def test_append_writes_a_segment_and_rewrites_nothing(tmp_path, cache):
    base = _write(tmp_path / "grow", BASE_PAPERS, BASE_CITATIONS)
    before = open_corpus(base)
    assert before.store is not None and before.store.is_dir()
    old_files = {f: (f.stat().st_mtime_ns, f.read_bytes()) for d in (cache / "corpus", cache / "index")
                 for f in d.rglob("*") if f.is_file()}
    corpus_folder.add_papers(base, _write(tmp_path / "batch", NEW_PAPERS, NEW_CITATIONS), merge_policy=False)
    after = open_corpus(base)
    assert after.fingerprint != before.fingerprint  # result caches and eval pins keyed by it miss
    assert after.base_fingerprint == before.fingerprint and after.segments == (after.store,)
    assert sorted(p.name for p in (cache / "corpus").iterdir()) == sorted([before.store.name, after.store.name])
    assert {f: (f.stat().st_mtime_ns, f.read_bytes()) for f in old_files} == old_files  # no old file touched
    assert len(list((cache / "index").iterdir())) == 1  # the segment holds its own postings
    assert before.papers[4 - 1].id == "9902001" and len(before) == 4  # the old view reads as before


def test_leakage_filter_hides_appended_papers_by_month(tmp_path, cache):
    folder, _ = _grown(tmp_path)
    src = LocalSource.open(folder)
    hidden = src.restricted(SourceFilter(max_month=199912))  # the appended papers are from 2000
    assert [h.paper.id for h in src.search("black hole microstates holographic entanglement", 1)] == ["0001001"]
    found = {h.paper.id for h in hidden.search("black hole microstates holographic entanglement", 10)}
    assert found and not found & {"0001001", "0002001"}
    assert hidden.get(["0001001", "0002001", "9801001"]).keys() == {"9801001"}
    assert "0002001" in src.references("9801001").ids and hidden.references("9801001").ids == []
    assert src.citations("9901001").ids == ["0001001"] and hidden.citations("9901001").ids == []
    assert hidden.edges_among(["9901001", "0001001", "9801001"]) == [("9901001", "9801001")]
    assert hidden.in_corpus_citation_count("9802001") == 1 and src.in_corpus_citation_count("9802001") == 2


def _mapped(a: object) -> bool:
    """True when the array's memory is a file mapping (a view of an ``np.memmap``/``mmap``), not a copy."""
    while a is not None:
        if isinstance(a, (np.memmap, mmap.mmap)):
            return True
        a = getattr(a, "base", None)
    return False


def test_reopen_maps_the_store_and_parses_nothing(tmp_path, cache, monkeypatch):
    folder = write_corpus(tmp_path / "tiny")
    first = open_corpus(folder)

    def no_parsing(*_a, **_k):
        raise AssertionError("the corpus files were read again")

    monkeypatch.setattr(corpus_module, "read_lines", no_parsing)
    monkeypatch.setattr(corpus_folder, "read_lines", no_parsing)
    monkeypatch.setattr(corpus_store, "fingerprint", no_parsing)  # the stat memo spares the hash too
    again = open_corpus(folder)
    assert all(_mapped(a) for a in (again.refs.indices, again.cites.indptr, again.months))
    assert isinstance(again.papers, corpus_store.StorePapers) and isinstance(again.index, corpus_store.IdIndex)
    assert list(again.papers) == list(first.papers) and again.index["9902001"] == 3 and "nope" not in again.index
    assert again.index.get("nope") is None and len(again.index) == 6 and sorted(again.index) == sorted(first.index)
    index = TextIndex.for_corpus(again)
    assert _mapped(index.postings.docs) and index.build_seconds == 0.0


def test_a_changed_file_is_seen_even_with_the_stat_memo(tmp_path, cache):
    folder = write_corpus(tmp_path / "tiny")
    a = open_corpus(folder)
    write_corpus(folder, [*TINY_PAPERS, ("0003001", 2000, "Glueball masses", "We compute glueball masses.")],
                 TINY_CITATIONS)
    b = open_corpus(folder)
    assert len(b) == 7 and b.fingerprint != a.fingerprint and b.fingerprint == load_corpus(folder).fingerprint


_CHILD = """
import sys
from crase_core.sources.local import LocalSource

src = LocalSource.open(sys.argv[1])
print(src.corpus.fingerprint, len(src.search("black hole", 10)))
"""


def test_concurrent_first_builds_publish_one_store(tmp_path):
    folder = write_corpus(tmp_path / "tiny")
    cache = tmp_path / "shared-cache"
    env = {**os.environ, "CRASE_CACHE_DIR": str(cache), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, str(folder)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err[-500:] for _, err in outs]
    results = {out.strip() for out, _ in outs}
    assert len(results) == 1 and results.pop().endswith(" 4")
    assert len(list((cache / "corpus").iterdir())) == 1 and len(list((cache / "index").iterdir())) == 1
    assert [p for p in cache.rglob("*") if p.name.endswith(".tmp")] == []
    store = next((cache / "corpus").iterdir())
    assert corpus_store.verify(store) == []


def test_cli_build_add_check(tmp_path, cache, capsys):
    base = _write(tmp_path / "grow", BASE_PAPERS, BASE_CITATIONS)
    assert cli_main(["corpus", "build", str(base), "--workers", "2"]) == 0
    out = capsys.readouterr()
    assert "grow: 4 papers, 3 citations" in out.out and "crase corpus: built grow: 4 papers" in out.err
    new = _write(tmp_path / "batch", NEW_PAPERS, NEW_CITATIONS)
    assert cli_main(["corpus", "add", str(base), str(new)]) == 0
    assert "added 2 papers and 5 citations to grow (6 papers now)" in capsys.readouterr().out
    assert cli_main(["corpus", "check", str(base)]) == 0
    assert ": sound (6 papers, 8 citations;" in capsys.readouterr().out
    assert len(load_corpus(base)) == 6  # the folder's own files grew


def test_add_refuses_a_bad_batch_before_writing_anything(tmp_path, cache, capsys):
    base = _write(tmp_path / "grow", BASE_PAPERS, BASE_CITATIONS)
    before = (base / "papers.jsonl").read_bytes()
    bad = _write(tmp_path / "bad", NEW_PAPERS, NEW_CITATIONS)
    with open(bad / "papers.jsonl", "a", encoding="utf-8") as f:
        f.write("{not json\n")
    assert cli_main(["corpus", "add", str(base), str(bad)]) == 2
    assert "papers.jsonl:4: not a paper record" in capsys.readouterr().err
    assert (base / "papers.jsonl").read_bytes() == before


def test_gzip_corpus_grows_by_a_gzip_member(tmp_path, cache):
    import gzip

    base = _write(tmp_path / "gz", BASE_PAPERS, BASE_CITATIONS)
    for name in ("papers.jsonl", "citations.tsv"):
        (base / f"{name}.gz").write_bytes(gzip.compress((base / name).read_bytes()))
        (base / name).unlink()
    open_corpus(base)
    corpus_folder.add_papers(base, _write(tmp_path / "batch", NEW_PAPERS, NEW_CITATIONS))
    grown = open_corpus(base)
    assert len(grown) == 6 and grown.n_citations == 8
    # the repeated id 9801001 is not appended (the corpus has it): the last line is the last new paper
    assert json.loads(gzip.decompress((base / "papers.jsonl.gz").read_bytes()).splitlines()[-1])["id"] == "0002001"
