"""Corpus folders with missing, empty, duplicated, dangling, odd or damaged content.

Each case writes the tiny corpus with one fault, runs ``crase query`` on it (in process) and checks
the exact outcome: a one-line error naming the file (and line) with exit status 2, or the same
ranked list as the clean corpus where the fault is harmless; then the clean corpus still answers.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from cli_tools import QUERY, crase, one_error, ranked
from tiny_corpus import TINY_CITATIONS, TINY_PAPERS, write_corpus


def _run(capsys, corpus: Path, query: str = QUERY):
    return crase(capsys, "query", query, "--corpus", corpus, "--quiet")


@pytest.fixture
def clean_ranked(capsys, tiny_corpus_dir) -> str:
    r = _run(capsys, tiny_corpus_dir)
    assert r.code == 0, r.err
    return ranked(r.out)


def _same_list(out: str, clean: str) -> None:
    """The ranked lines match the clean corpus's (the ``Source:`` name differs with the files' hash)."""
    assert ranked(out) == clean


@pytest.mark.parametrize("remove, message", [
    ("papers.jsonl", "{d} has no papers.jsonl or papers.jsonl.gz (a corpus folder holds papers.jsonl and "
                     "citations.tsv)"),
    ("citations.tsv", "{d} has no citations.tsv or citations.tsv.gz (a corpus folder holds papers.jsonl and "
                      "citations.tsv)"),
], ids=["no-papers-file", "no-citations-file"])
@pytest.mark.fault_kind("corpus-missing-file")
def test_missing_corpus_file_is_named(capsys, tmp_path, remove, message, clean_ranked, tiny_corpus_dir):
    d = write_corpus(tmp_path / "c")
    (d / remove).unlink()
    assert one_error(_run(capsys, d)) == message.format(d=d)
    write_corpus(d)  # the fault gone
    _same_list(_run(capsys, d).out, clean_ranked)


@pytest.mark.fault_kind("corpus-missing-folder")
def test_missing_corpus_folder_is_named(capsys, tmp_path):
    assert one_error(_run(capsys, tmp_path / "nowhere")) == f"corpus folder {tmp_path / 'nowhere'} does not exist"


@pytest.mark.fault_kind("corpus-empty-papers")
def test_empty_papers_file_is_refused(capsys, tmp_path):
    d = write_corpus(tmp_path / "c")
    (d / "papers.jsonl").write_text("\n\n", encoding="utf-8")
    assert one_error(_run(capsys, d)) == f"{d / 'papers.jsonl'} holds no papers"


@pytest.mark.fault_kind("corpus-empty-citations")
def test_empty_citations_file_runs_on_the_text_matches(capsys, tmp_path):
    """No citation at all: the walk has an edgeless graph (it raised a dtype error on it once) and the list is
    the question's own text matches, kept whatever their edges."""
    d = write_corpus(tmp_path / "c", citations=[])
    r = _run(capsys, d)
    assert r.code == 0, r.err
    m = re.search(r"\|V\| 4 / \|E\| 0 → kept (\d) nodes / 0 edges → (\d) results", r.out)
    assert m and m[1] == m[2] and int(m[1]) >= 3, r.out  # at least the top 3 text matches
    assert "— 9801001" in r.out.split("2. [")[0]


@pytest.mark.fault_kind("corpus-duplicate-ids")
def test_duplicate_paper_ids_first_record_wins(capsys, tmp_path, clean_ranked):
    dup = [*TINY_PAPERS, ("9801001", 2024, "An impostor record", "glueball glueball")]
    d = write_corpus(tmp_path / "c", papers=dup)
    r = _run(capsys, d)
    assert r.code == 0, r.err
    _same_list(r.out, clean_ranked)
    assert "impostor" not in r.out


@pytest.mark.parametrize("extra", [[("9801001", "7777777"), ("8888888", "9802001")], [("9802001", "9802001")],
                                   [("9801001", "9802001\textra")]],
                         ids=["citation-to-unknown-id", "self-citation", "three-columns"])
@pytest.mark.fault_kind("corpus-bad-citations")
def test_dangling_or_malformed_citations_are_dropped(capsys, tmp_path, clean_ranked, extra):
    d = write_corpus(tmp_path / "c", citations=[*TINY_CITATIONS, *extra])
    r = _run(capsys, d)
    assert r.code == 0, r.err
    _same_list(r.out, clean_ranked)


@pytest.mark.parametrize("year, arxiv, shown", [("nineteen", None, "n.d."), (-5, None, "n.d."), (None, None, "n.d."),
                                                (0, None, "n.d."), ("99", None, "n.d."),
                                                ("nineteen", "hep-th/9902001", "1999"), (None, "hep-th/9902001", "1999")],
                         ids=["text", "negative", "null", "zero", "two-digit", "text-with-arxiv", "null-with-arxiv"])
@pytest.mark.fault_kind("corpus-unusable-year")
def test_unusable_year_makes_an_undated_paper(capsys, tmp_path, year, arxiv, shown):
    """A year that is no plausible year is refused; the id alone does not date a paper (a seven-digit id is an
    arXiv number only when it agrees with the record's year), its arXiv identifier does."""
    d = write_corpus(tmp_path / "c")
    lines = (d / "papers.jsonl").read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[3])  # 9902001, a glueball paper
    rec["year"] = year
    if arxiv:
        rec["arxiv"] = arxiv
    lines[3] = json.dumps(rec)
    (d / "papers.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = _run(capsys, d, "lattice glueball spectrum")
    assert r.code == 0, r.err
    assert f"Lattice simulation of gauge theory glueballs ({shown}) — 9902001" in r.out


@pytest.mark.fault_kind("corpus-huge-abstract")
def test_huge_abstract_is_indexed(capsys, tmp_path):
    big = "We measure the glueball spectrum. " * 30_000  # ~1 MB
    d = write_corpus(tmp_path / "c", papers=[*TINY_PAPERS, ("0003001", 2000, "Glueball masses at scale", big)],
                     citations=[*TINY_CITATIONS, ("0003001", "9902001")])
    r = _run(capsys, d, "glueball spectrum")
    assert r.code == 0, r.err
    assert "Glueball masses at scale (2000) — 0003001" in r.out


@pytest.mark.parametrize("transform", ["blank-lines", "crlf"])
@pytest.mark.fault_kind("corpus-blank-lines-crlf")
def test_blank_lines_and_crlf_give_the_same_answer(capsys, tmp_path, clean_ranked, transform):
    d = write_corpus(tmp_path / "c")
    for name in ("papers.jsonl", "citations.tsv"):
        text = (d / name).read_text(encoding="utf-8")
        text = text.replace("\n", "\n\n  \n") if transform == "blank-lines" else text.replace("\n", "\r\n")
        (d / name).write_bytes(text.encode("utf-8"))
    r = _run(capsys, d)
    assert r.code == 0, r.err
    _same_list(r.out, clean_ranked)


@pytest.mark.fault_kind("corpus-byte-order-mark")
def test_byte_order_mark_is_accepted(capsys, tmp_path, clean_ranked):
    d = write_corpus(tmp_path / "c")
    for name in ("papers.jsonl", "citations.tsv"):
        (d / name).write_bytes(b"\xef\xbb\xbf" + (d / name).read_bytes())
    r = _run(capsys, d)
    assert r.code == 0, r.err
    _same_list(r.out, clean_ranked)


@pytest.mark.fault_kind("corpus-record-without-id")
def test_record_without_id_is_dropped_and_reported(capsys, tmp_path, clean_ranked):
    d = write_corpus(tmp_path / "c")
    with open(d / "papers.jsonl", "a", encoding="utf-8") as f:
        f.write('{"title": "no id"}\n')
    r = _run(capsys, d)
    assert r.code == 0, r.err
    _same_list(r.out, clean_ranked)
    from crase_core.store import corpus_folder

    report = corpus_folder.open_or_build(d).validation
    assert report.paper_notes["missing_ids"] == 1 and report.examples["missing_ids"] == ["papers.jsonl:7"]


@pytest.mark.parametrize("line, why", [
    ('{"id": ', "not a paper record (Expecting value: line 2 column 1 (char 8))"),
    ('["a", "list"]', "not a paper record (expected a JSON object)"),
], ids=["invalid-json-line", "not-an-object"])
@pytest.mark.fault_kind("corpus-bad-record")
def test_bad_record_names_file_and_line(capsys, tmp_path, clean_ranked, line, why):
    d = write_corpus(tmp_path / "c")
    with open(d / "papers.jsonl", "a", encoding="utf-8") as f:
        f.write(line + "\n")
    assert one_error(_run(capsys, d)) == f"{d / 'papers.jsonl'}:7: {why}"
    shutil.rmtree(d)
    _same_list(_run(capsys, write_corpus(d)).out, clean_ranked)
