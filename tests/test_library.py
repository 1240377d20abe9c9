"""The user's library: arXiv ids / DOIs / BibTeX parsed, matched to the corpus, seeding the run and marked
"in your library" in the trace (crase_core.retrieval.library, LibrarySeeding, `crase query --library`)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from crase_core.errors import InputError
from crase_core.records import Paper
from crase_core.retrieval.library import (
    LibraryEntry,
    arxiv_url,
    normalize_arxiv,
    normalize_doi,
    paper_link,
    parse_bibtex,
    parse_ids,
    parse_library,
    resolve,
    safe_http_url,
)

QUERY = "superconformal quantum mechanics of multi-black hole moduli spaces"
MALDACENA = "9711200"  # hep-th/9711200 in the embedded corpus


@pytest.mark.parametrize(("text", "expected"), [
    ("hep-th/9711200", "hep-th/9711200"),
    ("arXiv:hep-th/9711200v3", "hep-th/9711200"),
    ("https://arxiv.org/abs/hep-th/9711200", "hep-th/9711200"),
    ("HEP-TH/9711200", "hep-th/9711200"),
    ("math.ag/0301001", "math.AG/0301001"),
    ("https://arxiv.org/pdf/2401.12345v2.pdf", "2401.12345"),
    ("arXiv:0704.0001", "0704.0001"),
    ("0704.00011", "0704.00011"),
    ("not an id", None),
    ("12345.6789", None),
])
def test_normalize_arxiv(text, expected):
    assert normalize_arxiv(text) == expected


def test_links_only_from_validated_ids():
    assert arxiv_url("hep-th/9711200") == "https://arxiv.org/abs/hep-th/9711200"
    assert arxiv_url("hep-th/9711200\" onclick=") is None and arxiv_url("javascript:alert(1)") is None
    p = Paper("9711200", "T", external_ids=(("arXiv", "hep-th/9711200"),), url="javascript:alert(1)")
    assert paper_link(p) == "https://arxiv.org/abs/hep-th/9711200"
    bad = Paper("x", "T", external_ids=(("arXiv", "javascript:alert(1)"),), url="javascript:alert(1)")
    assert paper_link(bad) is None
    assert paper_link(Paper("x", "T", external_ids=(("DOI", "10.1103/PhysRevD.57.1"),))) == \
        "https://doi.org/10.1103/physrevd.57.1"
    assert safe_http_url("https://www.semanticscholar.org/paper/abc") == "https://www.semanticscholar.org/paper/abc"
    for url in ("http://a.b/x\"><script>", "ftp://a.b/x", "https://user@evil/x", "//a.b/x", "https://a b/"):
        assert safe_http_url(url) is None
    assert normalize_doi("https://doi.org/10.1023/A:1026654312961.") == "10.1023/a:1026654312961"


def test_parse_ids_mixed_separators_and_junk():
    parsed = parse_ids("hep-th/9711200, arXiv:0704.0001v2;\n doi:10.1000/ABC https://doi.org/10.1000/abc 9802150 ??? ")
    assert [(e.kind, e.value) for e in parsed.entries] == [
        ("arxiv", "hep-th/9711200"), ("arxiv", "0704.0001"), ("doi", "10.1000/abc"), ("id", "9802150")]
    assert parsed.unreadable == ["???"]


BIB = r"""
@comment{jabref-meta: whatever}
@string{aTMP = "Adv. Theor. Math. Phys."}
@article{Maldacena:1997re,
    author = "Maldacena, Juan Martin",
    title = "{The Large $N$ limit of superconformal field theories and supergravity}",
    eprint = "hep-th/9711200",
    archivePrefix = "arXiv",
    journal = aTMP # " 2",
    year = 1998
}
@misc{broken, title = {an unbalanced {brace}
@article{Witten:1998qj, title={Anti de {Sitter} space and holography}, url={https://arxiv.org/abs/hep-th/9802150v2}}
@article(Gubser, title="Gauge theory correlators", journal="arXiv:hep-th/9802109")
@article{doi_only, doi = {10.1016/S0370-2693(98)00377-3}}
@book{Polchinski, title = {String Theory}}
@misc{other_eprint, eprint = {1234567}, eprinttype = {pubmed}}
"""


def test_parse_bibtex_fields_and_malformed_entries():
    parsed = parse_bibtex(BIB)
    assert [(e.kind, e.value, e.label) for e in parsed.entries] == [
        ("arxiv", "hep-th/9711200", "Maldacena:1997re"),
        ("arxiv", "hep-th/9802150", "Witten:1998qj"),
        ("arxiv", "hep-th/9802109", "Gubser"),
        ("doi", "10.1016/s0370-2693(98)00377-3", "doi_only"),
    ]
    # the @misc entry on line 12 never closes its brace: reported with its line, the entries after it still read
    assert "entry at line 12: could not be read (unbalanced braces or quotes?)" in parsed.unreadable
    assert "Polchinski: no arXiv id or DOI (String Theory)" in parsed.unreadable
    assert any(u.startswith("other_eprint") for u in parsed.unreadable)  # a pubmed eprint is not an arXiv id
    assert parse_library(BIB).entries == parsed.entries
    assert parse_library("hep-th/9711200").entries == [LibraryEntry("arxiv", "hep-th/9711200")]


def test_parse_refuses_oversized_input():
    with pytest.raises(InputError, match="larger than"):
        parse_ids("x" * (5 << 20))


def test_resolve_against_the_embedded_corpus(hepth_source):
    items = resolve(parse_ids("arXiv:hep-th/9711200v1 9802150 gr-qc/9711200 0704.0001").entries, hepth_source)
    assert [(i.given, i.paper_id) for i in items] == [
        ("arXiv:hep-th/9711200", MALDACENA), ("9802150", "9802150"),
        ("arXiv:gr-qc/9711200", None),  # same number, another archive: not the hep-th paper
        ("arXiv:0704.0001", None)]


def test_library_papers_seed_the_run_and_are_marked(hepth_engine):
    from crase_core.pipeline import run_query
    from crase_core.stages.seeding import LibrarySeeding

    plain = run_query(QUERY, hepth_engine)
    lib = parse_ids(f"hep-th/{MALDACENA} gr-qc/0000001 " + plain.results[0].paper_id)
    trace = run_query(QUERY, hepth_engine, seeding=LibrarySeeding(lib.entries))
    assert trace.library is not None
    assert [(i.paper_id, i.seed) for i in trace.library.items] == [
        (MALDACENA, True), (None, False), (plain.results[0].paper_id, True)]
    seed = next(s for s in trace.seeds if s.paper_id == MALDACENA)
    assert [o.kind for o in seed.origins] == ["library"] and seed.fate in ("kept", "pruned")
    assert trace.run_id != plain.run_id
    marked = {n.paper.id for n in trace.nodes if n.in_library}
    assert marked == {MALDACENA, plain.results[0].paper_id}
    assert {r.paper_id for r in trace.results if r.in_library} <= marked
    assert next(r for r in trace.results if r.paper_id == plain.results[0].paper_id).in_library
    assert any("1 of 3 papers are not in this source (arXiv:gr-qc/0000001)" in w for w in trace.warnings)
    if any(r.paper_id == MALDACENA for r in trace.results):
        assert next(r for r in trace.results if r.paper_id == MALDACENA).reason.startswith("seed from your library")
    # the search seeds are all still there, with their own origins
    assert {s.paper_id for s in plain.seeds} <= {s.paper_id for s in trace.seeds}
    # a run without a library is unchanged: same ranked list, same run id, nothing marked
    again = run_query(QUERY, hepth_engine)
    assert [r.paper_id for r in again.results] == [r.paper_id for r in plain.results]
    assert again.run_id == plain.run_id and not any(n.in_library for n in again.nodes)


def test_cli_library_flag(tmp_path, hepth_source):
    bib = tmp_path / "refs.bib"
    bib.write_text(BIB, encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "crase_core.cli", "query", QUERY, "--k", "10", "--quiet",
                        "--library", str(bib)], capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    assert "library: skipped Polchinski: no arXiv id or DOI" in r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("Library:"))
    assert line.startswith("Library: 4 papers given, 3 found in the source (3 used as seeds)")
    r = subprocess.run([sys.executable, "-m", "crase_core.cli", "query", QUERY, "--seed-ids", "???"],
                       capture_output=True, text=True, timeout=120, env=os.environ.copy())
    assert r.returncode == 2 and r.stderr.splitlines() == [
        "crase: note: library: skipped ???", "crase: error: the library holds no arXiv id or DOI that could be read"]


def test_corpus_ids_resolve_without_reading_every_arxiv_paper(tiny_source):
    """A library of the corpus's own ids finds its papers without the arXiv map (which builds every paper
    holding an arXiv id: seconds on a large corpus); an arXiv id still builds it."""
    from crase_core.retrieval import library

    library._arxiv_maps.clear()
    ids = library.parse_ids("9801001 9802001").entries
    items = library.resolve(ids, tiny_source)
    assert [i.paper_id for i in items] == ["9801001", "9802001"] and library._arxiv_maps == {}
    library.resolve(library.parse_ids("hep-th/9801001").entries, tiny_source)
    assert tiny_source.corpus.fingerprint in library._arxiv_maps
