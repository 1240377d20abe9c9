"""The BM25 index is built once per corpus version and rebuilt when the corpus files change."""

from __future__ import annotations

from tiny_corpus import TINY_CITATIONS, TINY_PAPERS, write_corpus

from crase_core.sources.local import LocalSource


def test_index_rebuilt_only_when_corpus_changes(tmp_path):
    folder = write_corpus(tmp_path / "c")
    a = LocalSource.open(folder)
    b = LocalSource.open(folder)
    assert a.text_index.path == b.text_index.path and b.text_index.build_seconds == 0.0  # loaded, not rebuilt
    papers = [*TINY_PAPERS, ("0003001", 2000, "Glueball masses from holography", "We compute glueball masses.")]
    write_corpus(folder, papers, TINY_CITATIONS)
    c = LocalSource.open(folder)
    assert c.text_index.path != a.text_index.path and c.corpus.fingerprint != a.corpus.fingerprint
    assert [h.paper.id for h in c.search("glueball masses holography", 1)] == ["0003001"]


def test_damaged_index_is_rebuilt(tmp_path):
    folder = write_corpus(tmp_path / "d")
    a = LocalSource.open(folder)
    for f in a.text_index.path.iterdir():
        f.write_bytes(b"garbage")
    b = LocalSource.open(folder)
    assert [h.paper.id for h in b.search("glueball lattice", 1)] == ["9902001"]
