"""Appended segments read exactly as a store built from the grown files: random corpora appended in one to
three batches (with repeated ids, self-loops, duplicates, malformed lines and citations to ids that arrive
in a later batch) give the same search results and scores, neighbours, leakage filtering, anchor-text
scores, coverage statistics and corpus counts as a full build; a merge gives the full build's files."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from crase_core.paper_source import SourceFilter
from crase_core.retrieval.anchor import anchor_scores
from crase_core.retrieval.query_coverage import coverage_for_source
from crase_core.settings.pipeline import PipelineSettings
from crase_core.sources.local import LocalSource, open_corpus
from crase_core.store import corpus_folder, corpus_store, segments
from crase_core.store.termstats import TermStats, index_idf
from crase_core.store.textindex import TextIndex

WORDS = [
    "black", "hole", "entropy", "brane", "string", "gauge", "lattice", "glueball", "holography", "duality",
    "anomaly", "inflation", "quark", "gluon", "boson", "fermion", "neutrino", "cosmology", "horizon", "soliton",
    "instanton", "monopole", "vortex", "twistor", "supergravity", "matrix", "spectrum", "scattering", "amplitude", "renormalization",
]
QUERIES = ["black hole entropy", "lattice glueball spectrum", "string duality brane", "quark gluon",
           "holography horizon entropy black", "unknownword", "scattering amplitude twistor"]


def _papers(rng: random.Random, ids: list[str]) -> list[str]:
    lines = []
    for pid in ids:
        year = rng.randint(1990, 2005)
        row = {"id": pid, "year": year, "title": " ".join(rng.choices(WORDS, k=rng.randint(2, 6))),
               "abstract": " ".join(rng.choices(WORDS, k=rng.randint(0, 30))), "authors": "A. B"}
        if rng.random() < 0.3:
            row["month"] = f"{year}-{rng.randint(1, 12):02d}"
        lines.append(json.dumps(row) + "\n")
    return lines


def _citations(rng: random.Random, ids: list[str], k: int, unknown: list[str]) -> list[str]:
    lines = []
    for _ in range(k):
        r = rng.random()
        u, v = rng.choice(ids), rng.choice(ids)
        if r < 0.05:
            lines.append(f"{u}\t{u}\n")  # self-loop
        elif r < 0.08:
            lines.append("malformed line\n")
        elif r < 0.2:
            lines.append(f"{u}\t{rng.choice(unknown)}\n" if rng.random() < 0.5 else f"{rng.choice(unknown)}\t{v}\n")
        else:
            lines.append(f"{u}\t{v}\n")
    if lines:
        lines.append(lines[0])  # a duplicate line
    return lines


def _write(folder: Path, papers: list[str], cites: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "papers.jsonl").write_text("".join(papers), encoding="utf-8")
    (folder / "citations.tsv").write_text("".join(cites), encoding="utf-8")
    return folder


def _grow(tmp_path: Path, seed: int, batches: int) -> Path:
    """A corpus folder built with its first part and then ``batches`` appends (no merge)."""
    rng = random.Random(seed)
    n = rng.randint(120, 300)
    all_ids = [f"P{seed}-{i:04d}" if i % 17 else f"ü{i}" for i in range(n)]  # some non-ASCII ids
    cuts = sorted(rng.sample(range(20, n - 5), batches))
    groups = [all_ids[a:b] for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
    base_ids = groups[0]
    later = [i for g in groups[1:] for i in g]
    folder = _write(tmp_path / "corpus", _papers(rng, base_ids),
                    _citations(rng, base_ids, 3 * len(base_ids), later + ["nowhere-1", "nowhere-2"]))
    open_corpus(folder)
    seen = list(base_ids)
    for k, group in enumerate(groups[1:], 1):
        repeated = rng.sample(seen, 2)  # records of ids already in the corpus: the first record wins
        seen += group
        future = [i for g in groups[k + 1:] for i in g] + ["nowhere-3"]
        batch = _write(tmp_path / f"batch{k}", _papers(rng, group + repeated) + ["\n"],
                       _citations(rng, seen, 3 * len(group), future))
        corpus_folder.add_papers(folder, batch, merge_policy=False)
    return folder


def _search(src: LocalSource, q: str) -> list[tuple[str, float]]:
    return [(h.paper.id, h.score) for h in src.search(q, 25)]


@pytest.mark.parametrize(("seed", "batches"), [(1, 1), (2, 2), (3, 3), (4, 3), (5, 1)])
def test_segments_read_as_a_full_build(tmp_path, monkeypatch, seed, batches):
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    folder = _grow(tmp_path, seed, batches)
    grown = LocalSource.open(folder)
    assert len(grown.corpus.segments) == batches
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "fresh"))
    full = LocalSource.open(folder)
    assert not full.corpus.segments
    a, f = grown.corpus, full.corpus
    n = len(f)
    assert len(a) == n and [p.id for p in a.papers] == [p.id for p in f.papers] and list(a.papers) == list(f.papers)
    assert np.array_equal(a.months, f.months) and a.dropped_edges == f.dropped_edges
    assert a.n_citations == f.n_citations and np.array_equal(a.in_degree(), f.in_degree())
    assert all(a.index[p.id] == i for i, p in enumerate(f.papers)) and "nowhere-1" not in a.index
    assert a.papers.ids_of([n - 1, 0, n // 2]) == f.papers.ids_of([n - 1, 0, n // 2])  # type: ignore[attr-defined]
    for i in range(n):
        assert np.array_equal(a.references_of(i), f.references_of(i)), i
        assert np.array_equal(a.citers_of(i), f.citers_of(i)), i
    rng = np.random.default_rng(seed)
    for _ in range(5):
        idx = np.unique(rng.choice(n, size=min(n, 60), replace=False))
        assert sorted(zip(*(x.tolist() for x in a.edges_within(idx)), strict=True)) == \
            sorted(zip(*(x.tolist() for x in f.edges_within(idx)), strict=True))
    vis = rng.random(n) < 0.8
    assert np.array_equal(a.cites @ vis.astype(float), f.cites @ vis.astype(float))
    ai, fi = grown.text_index, full.text_index
    assert TermStats.from_index(ai) == TermStats.from_index(fi)
    for q in QUERIES:
        assert np.array_equal(ai.scores(q), fi.scores(q)), q
        assert _search(grown, q) == _search(full, q), q
        assert coverage_for_source(q, grown) == coverage_for_source(q, full)
        assert np.array_equal(anchor_scores(q, ai.postings_of, index_idf(ai), a.refs, a.cites, vis),
                              anchor_scores(q, fi.postings_of, index_idf(fi), f.refs, f.cites, vis)), q
    # the leakage filter: by month and by excluded ids, whatever part a paper is in
    hidden = [f.papers[i].id for i in (0, n // 2, n - 1)]
    flt = SourceFilter(max_month=int(np.median(f.months)), exclude=frozenset(hidden))
    ga, fa = grown.restricted(flt), full.restricted(flt)
    assert np.array_equal(ga.visible, fa.visible)
    for q in QUERIES:
        assert _search(ga, q) == _search(fa, q), q
    for pid in [p.id for p in f.papers][:: max(1, n // 40)] + hidden:
        assert ga.references(pid) == fa.references(pid) and ga.citations(pid) == fa.citations(pid), pid
        assert ga.in_corpus_citation_count(pid) == fa.in_corpus_citation_count(pid), pid
    some = [p.id for p in f.papers][:: 3]
    assert ga.edges_among(some) == fa.edges_among(some) and ga.get(some).keys() == fa.get(some).keys()
    assert grown.describe().split(";")[0].split("(")[1] == full.describe().split(";")[0].split("(")[1]


def test_merge_of_several_segments_gives_the_full_build_and_keeps_the_fingerprint(tmp_path, monkeypatch):
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    folder = _grow(tmp_path, 7, 3)
    before = open_corpus(folder)
    assert corpus_folder.merge_segments(folder) == {"segments": 3, "papers": len(before)}
    merged = open_corpus(folder)
    assert not merged.segments and merged.fingerprint == before.fingerprint
    assert segments.load_chain(merged).segments == [] and corpus_store.verify(merged.store) == []
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "fresh"))
    full = open_corpus(folder)
    for fa in sorted(full.store.glob("*.npy")):
        a, b = np.load(merged.store / fa.name), np.load(fa)
        assert a.dtype == b.dtype and np.array_equal(a, b), fa.name
    for fa in sorted(full.store.glob("*.bin")):
        assert (merged.store / fa.name).read_bytes() == fa.read_bytes(), fa.name
    mi, fi = TextIndex.for_corpus(merged), TextIndex.for_corpus(full)
    for fa in sorted(fi.path.iterdir()):
        assert (mi.path / fa.name).read_bytes() == fa.read_bytes(), fa.name


def test_merge_policy_folds_segments_when_they_grow(tmp_path, monkeypatch):
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    rng = random.Random(9)
    ids = [f"Q{i:04d}" for i in range(200)]
    folder = _write(tmp_path / "corpus", _papers(rng, ids[:100]), _citations(rng, ids[:100], 200, ["x"]))
    open_corpus(folder)
    counts = []
    for k in range(10):  # ten batches of ten papers: more than a quarter of the papers is in segments at the 4th
        group = ids[100 + 10 * k:110 + 10 * k]
        corpus_folder.add_papers(folder, _write(tmp_path / f"b{k}", _papers(rng, group), []))
        counts.append(len(open_corpus(folder).segments))
    assert counts == [1, 2, 3, 0, 1, 2, 3, 4, 0, 1]  # merged when segments held > 25 % (34/134, 50/170 papers)
    assert len(open_corpus(folder)) == 200


def test_without_the_memo_the_chain_is_found_not_rebuilt(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("CRASE_CACHE_DIR", str(cache))
    folder = _grow(tmp_path, 11, 2)
    grown = open_corpus(folder)
    for memo in (cache / "sources").glob("*.json"):
        memo.unlink()  # as on another machine sharing the cache folder, or after the memo was cleaned

    def no_build(*_a, **_k):
        raise AssertionError("rebuilt")

    monkeypatch.setattr(corpus_store, "build", no_build)
    again = open_corpus(folder)
    assert again.fingerprint == grown.fingerprint and again.segments == grown.segments
    assert list((cache / "sources").glob("*.json"))  # remembered again


def test_a_grown_file_the_chain_does_not_know_is_rebuilt(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("CRASE_CACHE_DIR", str(cache))
    folder = _grow(tmp_path, 12, 1)
    grown = open_corpus(folder)
    with open(folder / "citations.tsv", "a", encoding="utf-8") as f:  # grown by hand, not by `crase corpus add`
        f.write(f"{grown.papers[5].id}\t{grown.papers[1].id}\n")
    again = open_corpus(folder)
    assert not again.segments and again.fingerprint != grown.fingerprint
    assert again.fingerprint == corpus_store.fingerprint([folder / "papers.jsonl", folder / "citations.tsv"])


def test_hepth_with_its_last_percent_appended_ranks_as_the_embedded_corpus(tmp_path, hepth_engine):
    """The embedded corpus minus its last 1 % (295 papers, 4,983 citation lines), built, then grown by a
    segment: every ranked list, score and graph of the pipeline equals that of the embedded corpus's store
    (the dev benchmarks' setting), with and without a leakage filter."""
    import datetime as dt
    import sys

    from crase_core.backends import offline_backend
    from crase_core.cache import ResultCache
    from crase_core.pipeline import Engine, run_query
    from crase_core.store.corpus import DEFAULT_CORPUS_DIR

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from large_corpus import split_corpus

    folder, batch = tmp_path / "hepth", tmp_path / "batch"
    assert split_corpus(DEFAULT_CORPUS_DIR, folder, batch, 0.01) == {"papers": 29260, "append_papers": 295}
    open_corpus(folder)
    corpus_folder.add_papers(folder, batch, merge_policy=False)
    src = LocalSource.open(folder)
    assert len(src.corpus.segments) == 1 and len(src.corpus) == len(hepth_engine.source.corpus)
    grown = Engine(src, offline_backend(TermStats.from_index(src.text_index)), ResultCache(tmp_path / "results"))
    now = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
    flt = SourceFilter(max_month=200206, exclude=frozenset({"0207100"}))
    engines = [(grown, hepth_engine), (Engine(src.restricted(flt), grown.backend, grown.cache),
                                       Engine(hepth_engine.source.restricted(flt), hepth_engine.backend, hepth_engine.cache))]
    assert src.embeddings is None and hepth_engine.source.embeddings is not None
    no_semantic = PipelineSettings(semantic_feedback_weight=0.0, dense_fusion_weight=0.0)
    for a, b in engines:
        for q in ("black hole entropy counting", "tachyon condensation", "noncommutative geometry from strings"):
            # semantic feedback and the question's embedding off: embeddings ship for the embedded corpus's fingerprint
            # only, not the grown one's
            ta, tb = run_query(q, a, no_semantic, now=now), run_query(q, b, no_semantic, now=now)
            assert len(ta.results) >= 10 and len(ta.edges) >= 10
            assert [(r.paper_id, r.score, r.reason) for r in ta.results] == [(r.paper_id, r.score, r.reason) for r in tb.results], q
            assert sorted((e.citing, e.cited, e.weight) for e in ta.edges) == \
                sorted((e.citing, e.cited, e.weight) for e in tb.edges), q
