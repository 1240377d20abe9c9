"""The "why this rank" views: the HTML export's section, the app's parts table, the one-line summary — each
shows every part of the score, escaped (hostile titles from the fixture corpus)."""

from __future__ import annotations

import html
import sys
from pathlib import Path

import pytest

from crase_core.views.html_export import to_html, why_html
from crase_core.views.score_words import signal_totals, why_line

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # crase_app is not part of the installed package
    sys.path.append(str(ROOT))
HOSTILE = ROOT / "tests" / "fixtures" / "hostile_corpus"
QUERY = "holographic entanglement entropy of BTZ black holes"


@pytest.fixture(scope="module")
def hostile_trace():
    from crase_core.backends import offline_backend
    from crase_core.pipeline import Engine, run_query
    from crase_core.sources.local import LocalSource
    from crase_core.store.termstats import TermStats

    source = LocalSource.open(HOSTILE)
    return run_query(QUERY, Engine(source, offline_backend(TermStats.from_index(source.text_index))))


def test_the_html_export_has_a_why_section_with_every_part_escaped(hostile_trace):
    section = why_html(hostile_trace)
    assert section.count("<details") == len(hostile_trace.results) > 0
    assert "<script" not in section.lower()  # the hostile titles are text
    assert html.escape("<script>alert('xss')</script>", quote=True) in section
    for r in hostile_trace.results:
        block = section.split(f'data-paper="{html.escape(r.paper_id, quote=True)}"', 1)[1].split("</details>", 1)[0]
        for p in r.score_parts:
            assert f"<td>{p.value:.5f}</td>" in block
        assert f"the score is {r.score:.5f}" in block
    page = to_html(hostile_trace)
    assert section in page and "@@WHY@@" not in page


def test_a_trace_without_parts_has_no_why_section(hostile_trace):
    import copy

    old = copy.deepcopy(hostile_trace)
    for r in old.results:
        r.score_parts = []
    assert why_html(old) == ""
    assert "Why each paper has its rank" not in to_html(old)
    assert why_line(old, old.results[0]) == ""


def test_why_line_names_each_signal_with_its_share(hostile_trace):
    r = hostile_trace.results[0]
    totals = signal_totals(r.score_parts)
    line = why_line(hostile_trace, r)
    assert line.startswith(f"score {r.score:.4f} = ")
    if "walk" in totals:
        assert f"walk ({hostile_trace.ranking.ranker.upper()}" in line
    if "text" in totals:
        assert "text match (" in line
    assert sum(totals.values()) == pytest.approx(r.score, rel=1e-12)


def test_the_app_parts_table_escapes_titles_and_sums_to_the_score(hostile_trace):
    from crase_app.why import parts_markdown

    for r in hostile_trace.results:
        table = parts_markdown(hostile_trace, r)
        assert "<script>" not in table and "](javascript" not in table
        assert f"**{sum(p.value for p in r.score_parts):.5f}**" in table
        rows = [line for line in table.splitlines() if line.startswith("| ") and "↳" not in line]
        weighty = [p for p in r.score_parts if abs(p.value) >= 5e-6]
        assert len(rows) >= len(weighty) + 2  # header, one row per part that carries weight, the sum
        assert "| 0.00000 |" not in table and "| -0.00000 |" not in table  # no row without weight
        hidden = len(r.score_parts) - len(weighty)
        assert (f"{hidden} part" in table) == (hidden > 0)
        short = parts_markdown(hostile_trace, r, limit=3)
        assert f"**{sum(p.value for p in r.score_parts):.5f}**" in short


def test_terms_in_words_and_formulas_one_click_away(hostile_trace):
    """"Why this rank" in words: each term that carries weight as a sentence with its value and share; the
    formulas with their numbers (the expander's caption) name every term."""
    from crase_app.display import md_escape
    from crase_app.why import formulas_markdown, terms_in_words
    from crase_core.views.score_words import term_words

    assert term_words("fused-rank term", "(1 − μ)/(k + r), r = 6 the rank by the restart fusion (1 − λ)·π/max π "
                      "+ λ·t^γ/max t^γ, μ(q) = 0.6, k = 10") == (
        "its place (#6) when the citation walk and the text search are blended: the higher the place, the "
        "larger this part")
    assert term_words("search-rank term", "μ/(k + s), s = 2 the paper's rank in the full-query search") == (
        "its place (#2) in the text search for the whole question")
    for r in hostile_trace.results:
        words = terms_in_words(r)
        formulas = formulas_markdown(r)
        assert "(1 − μ)" not in words and "max π" not in words  # no formula in the words
        for p in r.score_parts:
            if p.term:
                assert md_escape(p.part.split(" · ")[0]) in formulas
        assert all("of the score)" in line for line in words.splitlines())


def test_a_long_title_never_pushes_out_the_year_and_id(hostile_trace):
    """`crase query`'s list: a title too long for the line is cut, the year and id after it always show."""
    import dataclasses

    from crase_core.cli.main import format_trace

    r = hostile_trace.results[0]
    long_title = "A very long title about holographic entanglement entropy " * 4
    nodes = [dataclasses.replace(n, paper=dataclasses.replace(n.paper, title=long_title)) if n.paper.id == r.paper_id
             else n for n in hostile_trace.nodes]
    text = format_trace(dataclasses.replace(hostile_trace, nodes=nodes), k=1, width=100)
    head = next(line for line in text.splitlines() if line.startswith(f"{r.rank:>3}. ["))
    year = hostile_trace.node(r.paper_id).paper.year
    assert head.endswith(f" ({year or 'n.d.'}) — {r.paper_id}") and len(head) <= 100 and "…" in head
