"""Corpus loading, the local source and its leakage filter, on a tiny corpus and the embedded one."""

from __future__ import annotations

import gzip
import json

import pytest
from tiny_corpus import TINY_CITATIONS, write_corpus

from crase_core.errors import CorpusError
from crase_core.paper_source import SourceFilter
from crase_core.store.corpus import load_corpus, month_from_id, split_authors


def test_month_from_id():
    assert month_from_id("9711200") == 199711
    assert month_from_id("0201018") == 200201
    assert month_from_id("0704.0001") == 200704
    assert month_from_id("abc") is None
    assert month_from_id("9713001") is None  # month 13


def test_split_authors():
    assert split_authors("Shin'ichi Nojiri and Ichiro Oda") == ("Shin'ichi Nojiri", "Ichiro Oda")
    assert split_authors("A. B, C. D, and E. F") == ("A. B", "C. D", "E. F")
    assert split_authors(["X", " Y "]) == ("X", "Y")


def test_tiny_corpus_loads_and_drops_self_loops(tiny_corpus_dir):
    c = load_corpus(tiny_corpus_dir)
    assert len(c) == 6
    assert c.n_citations == len(TINY_CITATIONS) - 1
    assert c.dropped_edges["self_loops"] == 1
    assert set(c.iter_edges()) == {e for e in TINY_CITATIONS if e[0] != e[1]}
    p = c.papers[c.index["9901001"]]
    assert p.month == 199901 and p.year == 1999 and p.authors == ("A. Author", "B. Writer")


def test_user_corpus_gz_with_unknown_ids_and_months(tmp_path):
    folder = tmp_path / "user"
    folder.mkdir()
    rows = [{"id": "W1", "title": "One", "year": 2010, "month": "2010-03"}, {"id": "W2", "title": "Two", "year": 2011},
            {"id": "W1", "title": "duplicate id, ignored"}]
    with gzip.open(folder / "papers.jsonl.gz", "wt") as f:
        f.write("\n".join(json.dumps(r) for r in rows) + "\n")
    (folder / "citations.tsv").write_text("W2\tW1\nW2\tNOPE\nbroken line\n")
    c = load_corpus(folder)
    assert [p.id for p in c.papers] == ["W1", "W2"]
    assert c.papers[0].month == 201003 and c.papers[1].month == 201112  # year only: December
    assert c.n_citations == 1 and c.dropped_edges["unknown_ids"] == 1 and c.dropped_edges["malformed"] == 1


def test_bad_corpus_folders_give_clear_errors(tmp_path):
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="papers.jsonl"):
        load_corpus(tmp_path / "empty")
    bad = tmp_path / "bad"
    write_corpus(bad)
    (bad / "papers.jsonl").write_text('{"id": "1", "title": "ok"}\n{not json\n')
    with pytest.raises(CorpusError, match="papers.jsonl:2"):
        load_corpus(bad)


def test_search_ranks_by_bm25(tiny_source):
    hits = tiny_source.search("glueball lattice", 10)
    assert [h.paper.id for h in hits][:2] == ["9902001", "0002001"]
    assert all(h.score > 0 for h in hits)
    assert tiny_source.search("zzzz qqqq", 10) == []
    assert len(tiny_source.search("black hole", 2)) == 2


def test_neighbours_and_edges(tiny_source):
    assert tiny_source.references("9901001").ids == ["9801001", "9802001"]
    assert tiny_source.citations("9902001").ids == ["0001001", "0002001"]
    assert tiny_source.references("unknown").ids == []
    assert tiny_source.edges_among(["9901001", "9801001", "9802001"]) == [
        ("9802001", "9801001"), ("9901001", "9801001"), ("9901001", "9802001")]
    assert set(tiny_source.get(["9901001", "nope"])) == {"9901001"}


def test_filter_hides_newer_and_excluded_papers_everywhere(tiny_source):
    f = tiny_source.restricted(SourceFilter(max_month=199912, exclude=frozenset({"9802001"})))
    visible = {"9801001", "9901001", "9902001"}
    assert {h.paper.id for h in f.search("black hole glueball anti-de sitter holography", 10)} <= visible
    assert f.references("9901001").ids == ["9801001"]
    assert f.citations("9902001").ids == []
    assert f.citations("9801001").ids == ["9901001"]
    assert set(f.get(["0001001", "9802001", "9801001"])) == {"9801001"}
    assert f.edges_among(["9901001", "9801001", "9802001", "0001001"]) == [("9901001", "9801001")]
    assert f.references("0001001").ids == []  # a hidden paper has no neighbours


def test_embedded_corpus_facts(hepth_source):
    c = hepth_source.corpus
    assert len(c) == 29_555
    assert c.n_citations == 352_807 - 39
    assert int(c.in_degree()[c.index["9711200"]]) == 2414
    hits = hepth_source.search("The Large N Limit of Superconformal Field Theories and Supergravity", 5)
    assert "9711200" in [h.paper.id for h in hits]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
