"""Control characters, escape sequences and bidirectional overrides in titles, authors and abstracts never
reach a BibTeX, RIS or CSV export (reference managers, spreadsheets and terminals act on them)."""

from __future__ import annotations

import csv
import io
import re

import pytest
from cli_tools import crase
from tiny_corpus import TINY_CITATIONS, TINY_PAPERS, write_corpus

from crase_core import trace as trace_io
from crase_core.views.export import to_bibtex, to_csv, to_ris

HOSTILE_TITLE = "Black\x01 hole \x1b]0;pwned\x07entropy\x1b[2J from\x7f \u202eD-branes\x85"
# C0 controls but tab/LF/CR, DEL, C1 controls, bidi embeddings/overrides/isolates
_FORBIDDEN = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _trace(capsys, tmp_path, monkeypatch, title: str, abstract_suffix: str = ""):
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    papers = list(TINY_PAPERS)
    pid, year, _, abstract = papers[0]
    papers[0] = (pid, year, title, abstract + abstract_suffix)
    corpus = write_corpus(tmp_path / title.encode("unicode_escape").hex()[:12], papers, TINY_CITATIONS)
    out = tmp_path / f"{corpus.name}.json"
    r = crase(capsys, "query", "black hole entropy microstates", "--corpus", corpus, "--quiet", "--json", out)
    assert r.code == 0, r.err
    return trace_io.load(out)


@pytest.mark.fault_kind("export-control-characters")
def test_bibtex_ris_and_csv_exports_hold_no_control_characters(capsys, tmp_path, monkeypatch):
    hostile = _trace(capsys, tmp_path, monkeypatch, HOSTILE_TITLE, " \x1b[31mred\x1b[0m\x00 text\x02")
    assert any("\x01" in n.paper.title for n in hostile.nodes)  # the trace keeps the data as it was
    for export in (to_bibtex, to_ris, to_csv):
        text = export(hostile)
        assert not _FORBIDDEN.search(text), (export.__name__, _FORBIDDEN.findall(text))
    assert "title = {Black hole entropy from D-branes}" in to_bibtex(hostile)
    assert "TI  - Black hole entropy from D-branes\r\n" in to_ris(hostile)
    assert "AB  - " in to_ris(hostile) and " red text\r\n" in to_ris(hostile)
    rows = list(csv.DictReader(io.StringIO(to_csv(hostile))))
    assert "Black hole entropy from D-branes" in [r["title"] for r in rows]
