"""``crase corpus import``: OpenAlex works (snapshot and API results), Semantic Scholar datasets files and
papers.jsonl + citations.tsv, from fixtures copied from the documented examples (tests/fixtures/openalex,
tests/fixtures/s2_datasets), and the hep-th corpus exported to both shapes and imported back."""

from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from crase_core.errors import CorpusError
from crase_core.importers.corpus_import import import_corpus
from crase_core.importers.openalex_works import abstract_text, parse_work, short_id
from crase_core.importers.s2_datasets import citation_of, corpus_id, paper_line
from crase_core.sources.local import LocalSource
from crase_core.store import corpus_folder

FIXTURES = Path(__file__).parent / "fixtures"
WORKS = [json.loads(line) for line in (FIXTURES / "openalex" / "works.jsonl").read_text().splitlines()]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _gz(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    return path


def snapshot(root: Path, manifest: bool = True, counts: dict[str, int] | None = None) -> Path:
    """The fixture works in the snapshot layout: the newest partition holds the first two, an older one the
    third and a stale copy of the second (the newest copy must win)."""
    works = root / "works"
    stale = dict(WORKS[1], title="A stale copy from an older partition")
    parts = {"updated_date=2022-01-02/part_000.gz": [WORKS[0], WORKS[1]],
             "updated_date=2022-01-01/part_000.gz": [WORKS[2], stale]}
    for rel, works_in in parts.items():
        _gz(works / rel, [json.dumps(w) for w in works_in])
    if manifest:
        entries = [{"url": f"s3://openalex/data/works/{rel}",
                    "meta": {"content_length": (works / rel).stat().st_size,
                             "record_count": (counts or {}).get(rel, len(w))}} for rel, w in parts.items()]
        (works / "manifest").write_text(json.dumps({"entries": entries}), encoding="utf-8")
    return root


# ---- the pure mappings -------------------------------------------------------------------------------------
def test_the_documented_work_maps_field_by_field():
    rec = parse_work(WORKS[0])
    assert rec is not None and rec.id == "W2741809807"
    assert rec.title.startswith("The state of OA: a large-scale analysis")
    assert rec.abstract == "Despite growing interest in Open Access"
    assert (rec.year, rec.date) == (2018, "2018-02-13")
    assert rec.authors == ("Heather Piwowar", "Jason Priem") and rec.venue == "PeerJ"
    assert rec.doi == "10.7717/peerj.4375" and rec.arxiv == ""
    assert rec.external == {"MAG": "2741809807", "PMID": "29456894", "PMCID": "5815332"}
    assert rec.references == ("W2753353163", "W2785823074", "W2511661767", "W2115339903", "W2031754690")
    assert rec.cited_by_count == 382
    paper = rec.paper()
    assert (paper.year, paper.month, paper.url) == (2018, 201802, "https://doi.org/10.7717/peerj.4375")
    line = rec.line()
    assert line["external_ids"]["OpenAlex"] == "W2741809807" and line["doi"] == "10.7717/peerj.4375"
    other = parse_work(WORKS[2])  # title only as display_name; arXiv from its DOI; no abstract
    assert other is not None and other.title == "Fixture work cited by the state of OA (two)"
    assert other.arxiv == "1706.03762" and other.abstract == "" and other.authors == ()
    assert parse_work(WORKS[1]).venue == "Scientometrics"  # the deprecated host_venue


def test_hostile_work_values_give_empty_fields():
    assert short_id("https://openalex.org/W123") == "W123" and short_id("w5") == "W5"
    for bad in (None, 5, "A123", "https://evil.org/W1", "W1/../x", "W"):
        assert short_id(bad) is None
    assert parse_work({"id": "https://openalex.org/A5048491430"}) is None and parse_work([1]) is None
    assert abstract_text({"b": [1], "a": [0, 10**12, -1, "2", True], "c": "x", 7: [2], "d\x1b[2J": [3]}) == "a b d [2J"
    assert abstract_text({"x": [0], "y": [0]}) == "x"  # a position given twice keeps the first word
    rec = parse_work({"id": "W9", "title": "bad\x00title\nhere", "authorships": [{"author": "x"}, 3],
                      "referenced_works": ["W1", "W1", None, "junk"], "publication_year": True})
    assert rec is not None and rec.title == "bad title here" and rec.references == ("W1",) and rec.year is None


def test_s2_records_map_field_by_field():
    rows = [json.loads(line) for line in (FIXTURES / "s2_datasets" / "papers" / "papers-sample.jsonl").read_text()
            .splitlines()]
    first = paper_line(rows[0])
    assert first["id"] == "223588394" and first["title"] == "Attaching Importance to Mental Quality Education in Clinical Practice"
    assert first["year"] == 2006 and first["date"] == "2006-02-28" and first["authors"] == ["粟毅", "吴亚梅"]
    assert first["doi"] == "10.3760/CMA.J.ISSN.2095-1485.2006.01.019"
    assert first["external_ids"] == {"CorpusId": "223588394", "MAG": "3032046382"}
    assert corpus_id("0012") == "12" and corpus_id(-3) is None and corpus_id(True) is None and corpus_id("1e5") is None
    cites = [json.loads(line) for line in (FIXTURES / "s2_datasets" / "citations" / "citations-sample.jsonl")
             .read_text().splitlines()]
    assert citation_of(cites[0]) is None  # cited paper without a corpus id
    c = citation_of(cites[12])
    assert (c.citing, c.cited, c.intents) == ("207422695", "13960899", ("background",))
    assert c.contexts[0].startswith("Several well-documented chemopreventive compounds")
    assert citation_of({"citingcorpusid": 1, "citedcorpusid": 2, "intents": [["methodology"], ["result", "methodology"]]}
                       ).intents == ("methodology", "result")


# ---- imports ---------------------------------------------------------------------------------------------------
def _edges(corpus) -> set[tuple[str, str]]:
    return set(corpus.iter_edges())


def test_openalex_snapshot_with_manifest(tmp_path, cache):
    res = import_corpus(snapshot(tmp_path / "snap"), tmp_path / "oa", "openalex")
    corpus = corpus_folder.open_or_build(tmp_path / "oa")
    assert [p.id for p in corpus.papers] == ["W2741809807", "W2753353163", "W2785823074"]
    p = corpus.papers[0]
    assert p.title.startswith("The state of OA") and p.year == 2018 and int(corpus.months[0]) == 201802
    assert p.authors == ("Heather Piwowar", "Jason Priem") and p.venue == "PeerJ"
    assert dict(p.external_ids)["DOI"] == "10.7717/peerj.4375"
    assert corpus.papers[1].title == "Fixture work cited by the state of OA (one)"  # the newest copy won
    assert corpus.papers[2].url == "https://arxiv.org/abs/1706.03762"
    assert _edges(corpus) == {("W2741809807", "W2753353163"), ("W2741809807", "W2785823074"),
                              ("W2785823074", "W2753353163")}
    counts = res.report.source_counts
    assert counts["works read"] == 4 and counts["works found twice (the newest partition's copy kept)"] == 1
    assert counts["references read"] == 8 and counts["references to works outside the import (dropped)"] == 4
    assert res.report.dropped_edges["self_loops"] == 1 and res.n_citations == 3
    assert not list(tmp_path.glob(".oa.*"))  # no temporary folder left


def test_openalex_manifest_faults(tmp_path, cache):
    snap = snapshot(tmp_path / "short", counts={"updated_date=2022-01-01/part_000.gz": 5})
    with pytest.raises(CorpusError, match="holds 2 works, its manifest entry says 5"):
        import_corpus(snap, tmp_path / "a", "openalex")
    assert not (tmp_path / "a").exists()
    snap = snapshot(tmp_path / "missing")
    (snap / "works" / "updated_date=2022-01-01" / "part_000.gz").unlink()
    with pytest.raises(CorpusError, match="lists 1 files that are not in"):
        import_corpus(snap, tmp_path / "b", "openalex")
    res = import_corpus(snap, tmp_path / "b", "openalex", manifest=False)  # what is there
    assert res.n_papers == 2


def test_openalex_api_results(tmp_path, cache):
    res = import_corpus(FIXTURES / "openalex" / "works_page.json", tmp_path / "page", "openalex")
    assert res.n_papers == 2 and res.n_citations == 1
    page = json.loads((FIXTURES / "openalex" / "works_page.json").read_text())
    lines = tmp_path / "pages.jsonl"  # JSON lines: one page, then one bare work
    lines.write_text(json.dumps(dict(page, results=[WORKS[0]])) + "\n" + json.dumps(WORKS[2]) + "\n")
    res = import_corpus(lines, tmp_path / "lines", "openalex")
    assert res.n_papers == 2 and res.n_citations == 1


@pytest.mark.parametrize("gzipped", [False, True])
def test_s2_datasets_with_contexts(tmp_path, cache, gzipped):
    src = FIXTURES / "s2_datasets"
    if gzipped:  # as the datasets API ships them: gzip, file names without a suffix
        for name in ("papers", "abstracts", "citations"):
            for f in (src / name).glob("*.jsonl"):
                _gz(tmp_path / "s2" / name / f"{name}-part0", f.read_text().splitlines())
        src = tmp_path / "s2"
    res = import_corpus(src, tmp_path / "s2corpus", "s2")
    source = LocalSource.open(tmp_path / "s2corpus")
    corpus = source.corpus
    assert len(corpus) == 8 and _edges(corpus) == {("207422695", "13960899"), ("3959740", "43038123")}
    ctx, intents = source.contexts("207422695", "13960899")
    assert ctx[0].startswith("Several well-documented chemopreventive compounds") and intents == ["background"]
    ctx, intents = source.contexts("3959740", "43038123")
    assert len(ctx) == 4 and intents == ["background"]
    assert source.contexts("13960899", "207422695") == ([], [])
    p = corpus.papers[corpus.index["207422695"]]
    assert p.abstract == "Chemopreventive compounds interfere with cell cycle regulation." and int(corpus.months[corpus.index["207422695"]]) == 201305
    assert corpus.papers[corpus.index["45302901"]].year is None  # the two-digit year was refused
    counts = res.report.source_counts
    assert counts["citations records read"] == 20 and counts["citations with contexts or intents kept"] == 2
    assert res.report.paper_notes["implausible_years"] == 1


def test_jsonl_import_keeps_the_files_and_their_fingerprint(tmp_path, cache, tiny_corpus_dir):
    res = import_corpus(tiny_corpus_dir, tmp_path / "copy", "jsonl")
    assert (tmp_path / "copy" / "papers.jsonl").read_bytes() == (tiny_corpus_dir / "papers.jsonl").read_bytes()
    assert corpus_folder.open_or_build(tmp_path / "copy").fingerprint == corpus_folder.open_or_build(tiny_corpus_dir).fingerprint
    assert res.report.dropped_edges["self_loops"] == 1


def test_dest_must_be_new(tmp_path, cache, tiny_corpus_dir):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("mine")
    with pytest.raises(CorpusError, match="already exists"):
        import_corpus(tiny_corpus_dir, tmp_path / "taken", "jsonl")
    assert (tmp_path / "taken" / "x").read_text() == "mine"
    (tmp_path / "empty").mkdir()  # an empty folder is fine
    assert import_corpus(tiny_corpus_dir, tmp_path / "empty", "jsonl").n_papers == 6


# ---- hep-th out and back -----------------------------------------------------------------------------------------
def _export_module():
    spec = importlib.util.spec_from_file_location("export_hepth", Path(__file__).parents[1] / "benchmarks" / "export_hepth.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_hepth_subset_exported_and_imported_back_ranks_the_same(tmp_path, cache):
    from crase_core.backends import offline_backend
    from crase_core.pipeline import Engine, run_query
    from crase_core.settings.pipeline import PipelineSettings
    from crase_core.store.corpus import DEFAULT_CORPUS_DIR
    from crase_core.store.termstats import TermStats

    ex = _export_module()
    papers, refs = ex.read_hepth(DEFAULT_CORPUS_DIR, limit=600)
    ids = {p["id"] for p in papers}
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "papers.jsonl").write_text("".join(json.dumps(p) + "\n" for p in papers))
    (plain / "citations.tsv").write_text("".join(f"{u}\t{v}\n" for u in refs if u in ids for v in refs[u]))
    ex.export_openalex(papers, refs, tmp_path / "oa")
    ex.export_s2(papers, refs, tmp_path / "s2")
    base = LocalSource.open(plain)
    results = {fmt: import_corpus(tmp_path / fmt, tmp_path / f"imp-{fmt}", name)
               for fmt, name in (("oa", "openalex"), ("s2", "s2"))}
    imported = {fmt: LocalSource.open(r.dest) for fmt, r in results.items()}
    outside = base.corpus.validation.dropped_edges["unknown_ids"]  # lines to papers after the first 600
    assert results["oa"].report.source_counts["references to works outside the import (dropped)"] == outside
    assert results["s2"].report.source_counts["citations to or from papers outside the import (dropped)"] == outside
    b = base.corpus
    for source in imported.values():
        c = source.corpus
        assert len(c) == len(b) == 600
        assert [ex.back(p.id) for p in c.papers] == [p.id for p in b.papers]
        for pc, pb in zip(c.papers, b.papers, strict=True):
            assert (pc.title, pc.abstract, pc.year, pc.month, pc.authors, pc.url) == (
                pb.title, pb.abstract, pb.year, pb.month, pb.authors, pb.url)
        assert {(ex.back(u), ex.back(v)) for u, v in c.iter_edges()} == set(b.iter_edges())
        assert c.validation.dropped_edges["self_loops"] == b.validation.dropped_edges["self_loops"]
    settings = PipelineSettings()
    for p in papers[::120]:
        want = run_query(p["title"], Engine(base, offline_backend(TermStats.from_index(base.text_index))), settings)
        for source in imported.values():
            got = run_query(p["title"], Engine(source, offline_backend(TermStats.from_index(source.text_index))),
                            settings)
            assert [ex.back(r.paper_id) for r in got.results] == [r.paper_id for r in want.results]
            assert [r.score for r in got.results] == [r.score for r in want.results]
    shutil.rmtree(tmp_path / "oa")
