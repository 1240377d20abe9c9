"""Faults while a corpus store is built block-wise: a spill file truncated or removed under the build
(a full disk, a cleaner), a cache folder that cannot be written. The build stops with OSError, leaves no
temp folder behind, and the query still runs on the corpus parsed into memory (a warning says why)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from tiny_corpus import write_corpus

from crase_core.sources.local import LocalSource
from crase_core.store import corpus_store
from crase_core.store.textindex import PostingsWriter


def _leftovers(root: Path) -> list[str]:
    return [p.name for p in root.rglob("*") if p.name.startswith(".") or p.name.startswith("spill-")]


@pytest.mark.parametrize("damage", ["truncate", "remove"])
@pytest.mark.fault_kind("index-spill-file-damaged")
def test_spill_file_damaged_during_the_build(tmp_path, monkeypatch, caplog, damage):
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    corpus = write_corpus(tmp_path / f"tiny-{damage}")
    finish = PostingsWriter.finish

    def damaged_finish(self: PostingsWriter, *args, **kwargs):
        spill = self.folder / "spill-doc.bin"
        self.close()
        if damage == "truncate":
            spill.write_bytes(spill.read_bytes()[:-8])
        else:
            spill.unlink()
        return finish(self, *args, **kwargs)

    monkeypatch.setattr(PostingsWriter, "finish", damaged_finish)
    with pytest.raises(OSError, match="spill" if damage == "truncate" else "spill-doc.bin"):
        corpus_store.build(corpus, "fp", tmp_path / "cache" / "corpus" / "s", "tiny",
                           index_target=tmp_path / "cache" / "index" / "i")
    assert _leftovers(tmp_path / "cache") == []
    assert not (tmp_path / "cache" / "corpus" / "s").exists()
    with caplog.at_level(logging.WARNING):
        src = LocalSource.open(corpus)  # the query path: parses into memory instead
    assert "could not cache the parsed corpus" in caplog.text
    assert src.corpus.store is None and len(src.corpus) == 6
    assert [h.paper.id for h in src.search("glueball lattice", 1)] == ["9902001"]
    monkeypatch.setattr(PostingsWriter, "finish", finish)  # the fault gone: the next open builds the store
    assert LocalSource.open(corpus).corpus.store is not None


@pytest.mark.fault_kind("corpus-bad-citations")
def test_a_long_unknown_id_does_not_drop_the_other_lines_of_its_block(tmp_path, monkeypatch):
    """A citations block is looked up all at once; one line naming an unknown id longer than every corpus id
    made the whole block miss (the ids' hashes were compared at another width), dropping every edge in it."""
    import json

    from crase_core.store import corpus_folder
    from crase_core.store.corpus import load_corpus

    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "papers.jsonl").write_text("".join(json.dumps({"id": f"p{i}", "title": f"t {i}"}) + "\n"
                                                 for i in range(20)))
    lines = [f"p{i}\tp{i - 1}" for i in range(1, 20)] + ["p3\tan-unknown-id-longer-than-any-paper-id"]
    (folder / "citations.tsv").write_text("\n".join(lines) + "\n")
    store = corpus_folder.open_or_build(folder)
    assert store.n_citations == load_corpus(folder).n_citations == 19
    assert store.validation.dropped_edges["unknown_ids"] == 1
