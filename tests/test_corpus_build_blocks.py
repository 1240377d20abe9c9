"""The bounded-memory corpus build: block-wise parsing, spilled postings merged block by block and the
vectorised citation reader give, file by file, what a single pass in memory gives.

The reference for the text index is the per-document tokeniser (:func:`document_terms`) fed to the
in-memory :class:`PostingsBuilder` and saved with :func:`save_postings`, i.e. the index as built before;
the reference for the store is a build in one block (one chunk, one merge block).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from crase_core.errors import CorpusError
from crase_core.store import corpus_folder, corpus_store
from crase_core.store.corpus import load_corpus
from crase_core.store.textindex import (
    DocTerms,
    PostingsBuilder,
    PostingsWriter,
    TextIndex,
    document_term_ids,
    document_terms,
    save_postings,
)

# texts that exercise every branch of the tokeniser: TeX commands, numbers, stop words, one-letter words,
# upper case, non-ASCII words (NFC-normalised, dotted capital I lower-cases to two code points), empty text
TRICKY = [
    ("The $\\sigma$-model at 3.14 GeV", "A b c: we SHOW that \\Lambda_{QCD} is 2 and x = 10.5."),
    ("Schrödinger's cat", "İstanbul naïve café — Œuvre; Cyrillic: Квантовая гравитация."),
    ("", ""),
    ("\\", "ends with a backslash \\"),
    ("Glueball glueball GLUEBALL", "glueballs of the lattice"),
]


def _corpus(folder: Path, n: int = 240) -> Path:
    """A corpus of ``n`` papers with a duplicate id, tricky texts, and citation lines of every kind."""
    rng = np.random.default_rng(7)
    words = ["black", "hole", "entropy", "brane", "string", "lattice", "glueball", "gauge", "holography",
             "sitter", "conformal", "duality", "anomaly", "instanton", "soliton", "monopole", "axion"]
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "papers.jsonl", "w", encoding="utf-8") as f:
        for i in range(n):
            title, abstract = TRICKY[i % len(TRICKY)] if i % 11 == 0 else (
                " ".join(rng.choice(words, 4)), " ".join(rng.choice(words, int(rng.integers(0, 30)))))
            f.write(json.dumps({"id": f"P{i:04d}", "year": 1990 + i % 30, "title": title, "abstract": abstract,
                                "authors": f"A. Author{i % 7}"}, ensure_ascii=i % 2 == 0) + "\n")
        f.write(json.dumps({"id": "P0003", "title": "A second record of P0003"}) + "\n")  # first record wins
        f.write("\n")  # a blank line
    lines = [f"P{i:04d}\tP{j:04d}\n" for i in range(n) for j in rng.integers(0, n, 3).tolist()]
    lines[5] = "P0005\tP0005\n"  # a self-loop
    lines[40] = "P0040\tNOPE\n"  # an unknown id: pending
    lines[77] = "only-one-field\n"  # malformed
    lines[120] = " P0120 \t P0001\r\n"  # spaces and CR: stripped (the line-by-line reader)
    lines[200] = "P0200\tP0001\tP0002\n"  # three fields: malformed
    (folder / "citations.tsv").write_text("".join(lines), encoding="utf-8")
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_document_term_ids_equal_document_terms():
    docs = TRICKY + [("Plain title", "with plain words and 42 numbers")] * 3
    terms, ids, lens = document_term_ids(docs)
    assert lens.tolist() == [len(document_terms(t, a)) for t, a in docs]
    assert [terms[i] for i in ids.tolist()] == [w for t, a in docs for w in document_terms(t, a)]
    assert "σ" not in terms and "sigma" in terms and "3.14" in terms and "schr" in terms
    assert lens[2] == 0  # the empty document


def test_block_wise_build_equals_single_pass_file_by_file(tmp_path):
    folder = _corpus(tmp_path / "c")
    single = corpus_store.build(folder, "fp", tmp_path / "one" / "store", "c", index_target=tmp_path / "one" / "idx",
                                chunk_bytes=1 << 30, block_postings=1 << 40)
    blocks = corpus_store.build(folder, "fp", tmp_path / "many" / "store", "c",
                                index_target=tmp_path / "many" / "idx", chunk_bytes=300, block_postings=7)
    assert _files(single) == _files(blocks)
    one, many = _files(tmp_path / "one" / "idx"), _files(tmp_path / "many" / "idx")
    assert one == many and set(one) == {"vocab.npy", "indptr.npy", "docs.npy", "tf.npy", "doc_len.npy", "meta.json"}
    # the index as built before (per-document tokeniser, in-memory builder, np.save): byte for byte
    parsed = load_corpus(folder)
    assert len(parsed) == 240 and parsed.papers[3].title != "A second record of P0003"
    ref = PostingsBuilder()
    ref.add([document_terms(p.title, p.abstract) for p in parsed.papers])
    save_postings(ref.finish(), tmp_path / "ref")
    assert _files(tmp_path / "ref") == many
    # and the store holds the parsed corpus: papers, graph, dropped lines
    store = corpus_store.open_store(blocks)
    assert list(store.papers) == list(parsed.papers)
    assert (store.refs.tocsr() != parsed.refs.tocsr()).nnz == 0 and (store.cites.tocsr() != parsed.cites.tocsr()).nnz == 0
    assert store.dropped_edges == parsed.dropped_edges
    assert store.dropped_edges["malformed"] == 2 and store.dropped_edges["self_loops"] >= 1
    assert ("P0120", "P0001") in set(store.iter_edges())  # the stripped line is an edge
    index = TextIndex.open(tmp_path / "many" / "idx")
    assert np.array_equal(index.scores("glueball lattice"), TextIndex.build(parsed).scores("glueball lattice"))


def test_worker_processes_build_the_same_files(tmp_path):
    folder = _corpus(tmp_path / "c", 400)
    a = corpus_store.build(folder, "fp", tmp_path / "a" / "s", "c", index_target=tmp_path / "a" / "i", workers=1,
                           chunk_bytes=2000)
    b = corpus_store.build(folder, "fp", tmp_path / "b" / "s", "c", index_target=tmp_path / "b" / "i", workers=2,
                           chunk_bytes=2000)
    assert _files(a) == _files(b) and _files(tmp_path / "a" / "i") == _files(tmp_path / "b" / "i")


def test_vectorised_citation_reader_equals_the_line_reader(tmp_path):
    folder = _corpus(tmp_path / "c")
    parsed = load_corpus(folder)
    index = {p.id: i for i, p in enumerate(parsed.papers)}
    arrays = corpus_store._id_arrays(corpus_store.s_array(list(index)))
    fast = corpus_store._read_citations(folder / "citations.tsv", index.get,
                                        corpus_store.SortedIds(arrays["ids_sorted"], arrays["id_order"]))
    slow = corpus_store._read_citations(folder / "citations.tsv", index.get)
    assert np.array_equal(np.sort(fast.rows * 1000 + fast.cols), np.sort(slow.rows * 1000 + slow.cols))
    assert (fast.pending_src, fast.pending_dst) == (slow.pending_src, slow.pending_dst) == (["P0040"], ["NOPE"])
    assert (fast.self_loops, fast.malformed) == (slow.self_loops, slow.malformed)
    assert corpus_store.plain_pairs(b"a\tb\nc\td\n") == ([b"a", b"c"], [b"b", b"d"])
    for bad in (b"a\tb\nc d\te\n", b"a\tb\nc\n", b"a\t\tb\n", b"a\tb\n\n", b"a\tb", "é\tb\n".encode()):
        assert corpus_store.plain_pairs(bad) is None, bad


def test_postings_writer_bounds_its_blocks(tmp_path):
    """The merge reads at most one block of postings (plus one stem prefix bucket) at a time."""
    docs = [(f"title {i}", " ".join(f"w{j}x" for j in range(i % 17))) for i in range(300)]
    writer = PostingsWriter(tmp_path / "w", block_postings=50)
    reads: list[int] = []
    original = writer._read

    def counting(name: str, lo: int, hi: int) -> np.ndarray:
        if name == "term":
            reads.append(hi - lo)
        return original(name, lo, hi)

    writer._read = counting  # type: ignore[method-assign]
    for k in range(0, 300, 40):
        writer.add_doc_terms(DocTerms.of(docs[k:k + 40]))
    fractions: list[float] = []
    writer.finish(on_block=fractions.append)
    assert fractions == sorted(fractions) and len(fractions) > 3
    assert not list((tmp_path / "w").glob("spill-*"))
    ref = PostingsBuilder()
    ref.add_texts(docs)
    save_postings(ref.finish(), tmp_path / "ref")
    assert _files(tmp_path / "ref") == _files(tmp_path / "w")


def test_progress_hook_reports_stages_up_to_done(tmp_path):
    folder = _corpus(tmp_path / "c")
    steps: list[corpus_store.BuildStep] = []
    with corpus_store.reporting(steps.append):
        corpus_store.build(folder, "fp", tmp_path / "s", "c", index_target=tmp_path / "i", chunk_bytes=500)
    stages = [s.stage for s in steps]
    assert stages[0] == "parse" and stages[-1] == "done" and steps[-1].fraction == 1.0
    assert {"parse", "citations", "store", "index", "done"} <= set(stages)
    assert [s.fraction for s in steps] == sorted(s.fraction for s in steps)
    assert sum(s.stage == "parse" for s in steps) > 3  # one per block of papers

    def broken(_: corpus_store.BuildStep) -> None:
        raise RuntimeError("display gone")

    with corpus_store.reporting(broken):  # a failing display does not fail the build
        corpus_store.build(folder, "fp", tmp_path / "s2", "c", index_target=tmp_path / "i2")
    corpus_store.build(folder, "fp", tmp_path / "s3", "c")  # outside the block: no hook, no index folder


def test_bad_line_in_a_later_block_names_its_line(tmp_path):
    folder = _corpus(tmp_path / "c", 80)
    with open(folder / "papers.jsonl", "ab") as f:
        f.write(b'{"id": "X1", "title": "bad \xff byte"}\n')
    with pytest.raises(CorpusError, match=r"papers.jsonl:83: not UTF-8 text \(byte 0xff at column 28\)"):
        corpus_store.build(folder, "fp", tmp_path / "s", "c", index_target=tmp_path / "i", chunk_bytes=200)
    assert not list(tmp_path.glob(".s.*")) and not list(tmp_path.glob(".i.*"))  # temp folders removed


def test_build_engine_reports_the_first_build_only(tmp_path, monkeypatch):
    from crase_core.runtime import RuntimeConfig, build_engine

    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    folder = _corpus(tmp_path / "engine-corpus")
    steps: list[corpus_store.BuildStep] = []
    engine = build_engine(RuntimeConfig(corpus_dir=str(folder)), build_progress=steps.append)
    assert len(engine.source.corpus) == 240  # type: ignore[attr-defined]
    assert steps and steps[-1].stage == "done" and steps[-1].fraction == 1.0
    later: list[corpus_store.BuildStep] = []
    corpus_folder.open_or_build(folder)  # built: opened, nothing to report
    with corpus_store.reporting(later.append):
        corpus_folder.open_or_build(folder)
    assert later == []


def test_store_papers_read_columns_without_building_papers(tmp_path):
    folder = _corpus(tmp_path / "c")
    with open(folder / "papers.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"id": "A1", "title": "t", "arxiv": "hep-th/9901001"}) + "\n")
        f.write(json.dumps({"id": "A2", "title": "u", "arxiv": "0704.0001"}) + "\n")
    store = corpus_store.open_store(corpus_store.build(folder, "fp", tmp_path / "s", "c"))
    parsed = load_corpus(folder)
    assert list(store.papers.texts("title")) == [p.title for p in parsed.papers]  # type: ignore[attr-defined]
    assert list(store.papers.texts("abstract")) == [p.abstract for p in parsed.papers]  # type: ignore[attr-defined]
    assert not store.papers._cache  # type: ignore[attr-defined]
    for window in (1 << 26, 7, 1):  # windows shorter than a record: matches across their ends are found once
        found = store.papers.containing("extra", b'"ARXIV"', window=window)  # type: ignore[attr-defined]
        assert found.tolist() == [240, 241]


def test_library_map_builds_only_papers_with_arxiv_ids(tmp_path, monkeypatch):
    from crase_core.retrieval import library

    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    folder = _corpus(tmp_path / "c")
    with open(folder / "papers.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"id": "A1", "title": "t", "arxiv": "hep-th/9901001"}) + "\n")
    from crase_core.sources.local import LocalSource

    src = LocalSource.open(folder)
    assert library._local_arxiv_map(src) == {"hep-th/9901001": "A1"}
    assert set(src.corpus.papers._cache) == {240}  # type: ignore[attr-defined]


class _Stream:
    def __init__(self, tty: bool):
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, s: str) -> None:
        self.text += s

    def flush(self) -> None:
        pass


def test_cli_progress_bar():
    from crase_core.cli.corpus import ProgressBar

    steps = [corpus_store.BuildStep("parse", f / 100, f"parsed {f * 1000:,} papers") for f in range(0, 70, 7)]
    steps += [corpus_store.BuildStep("index", 0.9, "merging"), corpus_store.BuildStep("done", 1.0, "built c")]
    tty, pipe = _Stream(True), _Stream(False)
    bar, lines = ProgressBar(tty, width=10), ProgressBar(pipe)
    for s in steps:
        bar(s)
        lines(s)
    assert tty.text.endswith("\r[##########] 100% done: built c" + " " * 53 + "\n")
    assert "\r[####......]  42% parse: parsed 42,000 papers" in tty.text
    assert pipe.text.splitlines() == ["crase corpus:   0% parse", "crase corpus:  14% parse", "crase corpus:  21% parse",
                                      "crase corpus:  35% parse", "crase corpus:  42% parse", "crase corpus:  56% parse",
                                      "crase corpus:  63% parse", "crase corpus:  90% index", "crase corpus: 100% done"]


@pytest.mark.parametrize("block", [1, 3, 7, 10_000])
def test_merged_postings_written_block_by_block_equal_the_in_memory_merge(tmp_path, block):
    """``save_merged_postings`` (a corpus merge's index, a block of stems at a time, the first part read from
    its files) writes the files ``save_postings(merge_parts(...))`` writes, byte for byte."""
    from crase_core.store.textindex import (
        PostingsBuilder,
        load_postings,
        merge_parts,
        save_merged_postings,
        save_postings,
    )

    rng = np.random.default_rng(3)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda"]
    parts = []
    for k, n in enumerate((40, 7, 0, 12)):
        builder = PostingsBuilder()
        docs = [(" ".join(rng.choice(words[:6 + k], size=3)), " ".join(rng.choice(words[k:], size=int(rng.integers(0, 40)))))
                for _ in range(n)]
        builder.add_texts(docs)
        parts.append(builder.finish())
    save_postings(parts[0], tmp_path / "first")
    first, _ = load_postings(tmp_path / "first")
    save_postings(merge_parts([first, *parts[1:]]), tmp_path / "memory")
    save_merged_postings([first, *parts[1:]], tmp_path / "blocks", first_folder=tmp_path / "first", block_postings=block)
    for f in sorted((tmp_path / "memory").iterdir()):
        assert (tmp_path / "blocks" / f.name).read_bytes() == f.read_bytes(), f.name
