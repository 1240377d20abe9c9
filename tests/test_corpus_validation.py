"""The validation report of `crase corpus build` (issue 23's frictions with a hand-converted CiteSeer corpus).

Each corpus here is small enough to count by hand; every test names the friction it pins down.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from crase_core.store import corpus_folder
from crase_core.store.corpus import UNDATED_MONTH, load_corpus, parse_date, parse_year
from crase_core.store.corpus_validation import ValidationReport, direction_counts


def _write(folder: Path, papers: list[dict], lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "papers.jsonl").write_text("".join(json.dumps(p) + "\n" for p in papers), encoding="utf-8")
    (folder / "citations.tsv").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return folder


def _papers(n: int, first_year: int = 1990) -> list[dict]:
    return [{"id": f"p{i:02d}", "title": f"Paper number {i}", "year": first_year + i} for i in range(n)]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _both(folder: Path) -> tuple[ValidationReport, ValidationReport]:
    """The report of a store build and of the in-memory parse (they must agree)."""
    return corpus_folder.open_or_build(folder).validation, load_corpus(folder).validation


def test_reversed_citation_columns_are_reported(tmp_path, cache):
    # citing<TAB>cited written the wrong way round: every line names the older paper first
    folder = _write(tmp_path / "rev", _papers(12), [f"p{i:02d}\tp{j:02d}" for i in range(12) for j in range(i + 1, 12)
                                                     if (i + j) % 3 == 0])
    for report in _both(folder):
        assert report.older_to_newer == report.citations_kept == 22 and report.newer_to_older == 0
        assert report.reversed_direction
        assert any("reversed" in w for w in report.warnings())
    # the same lines the right way round: no warning
    ok = _write(tmp_path / "ok", _papers(12), [f"p{j:02d}\tp{i:02d}" for i in range(12) for j in range(i + 1, 12)
                                                if (i + j) % 3 == 0])
    store, parsed = _both(ok)
    assert store.newer_to_older == 22 and not store.reversed_direction and not store.warnings()
    assert parsed == store


def test_dropped_citation_lines_are_counted_with_reasons(tmp_path, cache):
    lines = ["p05\tp01", "p05\tp02", "p05\tp02",  # one duplicate
             "p03\tp03", "p04\tp04",  # two self-loops
             "p05\tnope", "zz\tp01", "zz\tyy",  # three unknown ids
             "not a citation line"]  # one malformed
    folder = _write(tmp_path / "c", _papers(6), lines)
    store, parsed = _both(folder)
    assert store == parsed
    assert store.citation_lines == 9 and store.citations_kept == 2
    assert store.dropped_edges == {"self_loops": 2, "unknown_ids": 3, "duplicates": 1, "malformed": 1}
    text = "\n".join(store.lines())
    assert "9 lines read, 2 kept" in text
    assert "2  dropped: self-citation" in text and "3  dropped: an id that is not a paper" in text


def test_a_two_digit_year_is_not_the_year_99(tmp_path, cache):
    papers = [{"id": "a", "title": "Short year", "year": "99"}, {"id": "b", "title": "Int short year", "year": 99},
              {"id": "c", "title": "Fine", "year": 1999}, {"id": "d", "title": "Future", "year": 2999},
              {"id": "e", "title": "Junk", "year": "1998a"}]
    folder = _write(tmp_path / "y", papers, [])
    for corpus in (corpus_folder.open_or_build(folder), load_corpus(folder)):
        years = {p.id: p.year for p in corpus.papers}
        assert years == {"a": None, "b": None, "c": 1999, "d": None, "e": None}
        assert int(corpus.months[corpus.index["a"]]) == UNDATED_MONTH
        report = corpus.validation
        assert report.paper_notes["implausible_years"] == 4
        assert report.examples["implausible_years"][0] == "papers.jsonl:1 year '99'"
        assert any("plausible year" in w and "1999, not 99" in w for w in report.warnings())


def test_a_record_without_a_title_is_reported(tmp_path, cache):
    papers = [{"id": "a", "title": "", "year": 2001}, {"id": "b", "year": 2002}, {"id": "c", "title": "Ok", "year": 2003}]
    folder = _write(tmp_path / "t", papers, [])
    store, parsed = _both(folder)
    assert store == parsed and store.paper_notes["missing_titles"] == 2
    assert store.examples["missing_titles"] == ["papers.jsonl:1 id 'a'", "papers.jsonl:2 id 'b'"]
    assert any("no title" in w for w in store.warnings())


def test_duplicate_and_missing_ids_are_counted(tmp_path, cache):
    papers = [{"id": "a", "title": "First"}, {"id": "a", "title": "Second"}, {"title": "No id"}, {"id": "", "title": "x"}]
    folder = _write(tmp_path / "d", papers, [])
    store, parsed = _both(folder)
    assert store == parsed
    assert store.papers_read == 4 and store.papers_kept == 1
    assert store.paper_notes["duplicate_ids"] == 1 and store.paper_notes["missing_ids"] == 2
    assert corpus_folder.open_or_build(folder).papers[0].title == "First"


def test_a_seven_digit_id_gives_a_month_only_when_it_agrees_with_the_year(tmp_path, cache):
    # CiteSeer-style numeric ids are not arXiv numbers: "1203456" must not date a 1999 paper to March 2012
    papers = [{"id": "1203456", "title": "Numeric id", "year": 1999},
              {"id": "9905123", "title": "hep-th style id", "year": 1999},
              {"id": "x1", "title": "arXiv field", "arxiv": "hep-th/9711200"},
              {"id": "x2", "title": "date field wins", "year": 2004, "date": "2004-03-17", "arxiv": "0401.0001"}]
    folder = _write(tmp_path / "m", papers, [])
    for corpus in (corpus_folder.open_or_build(folder), load_corpus(folder)):
        months = {p.id: int(corpus.months[i]) for i, p in enumerate(corpus.papers)}
        assert months == {"1203456": 199912, "9905123": 199905, "x1": 199711, "x2": 200403}
        assert corpus.papers[corpus.index["x1"]].year == 1997


def test_year_and_date_rules():
    assert parse_year(1999) == (1999, False) and parse_year("2003") == (2003, False)
    assert parse_year(None) == (None, False) and parse_year("") == (None, False)
    for bad in ("99", 99, 0, 2999, "1998a", True, 1999.5, [1999]):
        assert parse_year(bad) == (None, True), bad
    assert parse_date("2017-05-12") == (201705, False) and parse_date("2017-05") == (201705, False)
    assert parse_date(201705) == (201705, False) and parse_date("2017-05-12T10:00:00") == (201705, False)
    for bad in ("2017-13", "2017-00-01", "17-05", "May 2017", "0099-01", "2017-05-40"):
        assert parse_date(bad)[1], bad


def test_direction_counts_by_hand():
    years = np.array([2000, 2001, 2002, -(2**31)], dtype=np.int32)
    rows, cols = np.array([2, 2, 0, 1, 3]), np.array([0, 1, 1, 1, 0])
    assert direction_counts(rows, cols, years, -(2**31), block=2) == (2, 1)  # 1→1 same year, 3 undated


def test_build_prints_the_report(tmp_path, cache, capsys):
    from crase_core.cli.main import main

    folder = _write(tmp_path / "cli", [{"id": "a", "title": "A", "year": "99"}, {"id": "b", "title": "B", "year": 2000}],
                    ["a\tb", "b\tb", "a\tzz"])
    for _ in range(2):  # the second build finds the store built and prints the same report from it
        assert main(["corpus", "build", str(folder)]) == 0
        out, err = capsys.readouterr()
        assert "papers: 2 records read, 2 kept" in out
        assert "citations: 3 lines read, 1 kept" in out
        assert "1  dropped: self-citation" in out and "1  dropped: an id that is not a paper" in out
        assert "warning:" in err and "1999, not 99" in err
