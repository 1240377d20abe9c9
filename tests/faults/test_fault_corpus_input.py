"""Faults in a corpus given by the user: bad bytes, lone surrogates, truncated gzip, unreadable files, non-Latin text."""

from __future__ import annotations

import gzip
import shutil

import pytest
from fault_tools import query, ranked, run_cli, shared_tmp
from tiny_corpus import write_corpus

from crase_core import trace as trace_io


@pytest.mark.fault_kind("corpus-non-utf8")
def test_non_utf8_line_names_file_line_and_byte(tmp_path):
    corpus = write_corpus(tmp_path / "tiny")
    lines = (corpus / "papers.jsonl").read_bytes().splitlines(keepends=True)
    good = b"".join(lines)
    lines[2] = lines[2].replace(b"Black hole", b"Black \xff hole", 1)
    (corpus / "papers.jsonl").write_bytes(b"".join(lines))
    r = query(corpus, tmp_path / "cache")
    assert r.returncode == 2 and r.stdout == ""
    col = lines[2].index(b"\xff") + 1
    assert r.stderr.strip() == (f"crase: error: {corpus / 'papers.jsonl'}:3: not UTF-8 text (byte 0xff at column "
                                f"{col}); save the file as UTF-8")
    (corpus / "papers.jsonl").write_bytes(good)  # the fault gone
    ok = query(corpus, tmp_path / "cache")
    assert ok.returncode == 0 and ranked(ok.stdout) == ranked(query(write_corpus(tmp_path / "ref"), tmp_path / "c2").stdout)


@pytest.mark.fault_kind("corpus-lone-surrogate")
def test_lone_surrogate_in_a_title_just_works(tmp_path):
    corpus = write_corpus(tmp_path / "tiny")
    text = (corpus / "papers.jsonl").read_text()
    (corpus / "papers.jsonl").write_text(text.replace("Black hole entropy from D-branes",
                                                      "Black hole entropy from D-branes \\ud800", 1))
    out = tmp_path / "run.json"
    r = query(corpus, tmp_path / "cache", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "Black hole entropy from D-branes \ufffd (1998) — 9801001" in r.stdout
    assert trace_io.load(out).node("9801001").paper.title == "Black hole entropy from D-branes \ufffd"
    assert run_cli("show", str(out), cache_dir=tmp_path / "cache").returncode == 0


@pytest.mark.fault_kind("corpus-truncated-gzip")
def test_truncated_gzip_corpus_names_the_file(tmp_path):
    corpus = write_corpus(tmp_path / "tiny")
    raw = (corpus / "papers.jsonl").read_bytes()
    (corpus / "papers.jsonl").unlink()
    packed = gzip.compress(raw * 40)
    (corpus / "papers.jsonl.gz").write_bytes(packed[: len(packed) // 2])
    r = query(corpus, tmp_path / "cache")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith(f"crase: error: {corpus / 'papers.jsonl.gz'}:")
    assert "the gzip file is damaged or truncated" in r.stderr and "download or compress it again" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    (corpus / "papers.jsonl.gz").write_bytes(gzip.compress(raw))  # the fault gone
    ok = query(corpus, tmp_path / "cache")
    assert ok.returncode == 0 and "Black hole entropy from D-branes" in ok.stdout


@pytest.mark.fault_kind("corpus-unreadable-file")
def test_unreadable_corpus_file_names_the_file(tmp_path):
    tmp = shared_tmp("unreadable")
    try:
        corpus = write_corpus(tmp / "tiny")
        (corpus / "papers.jsonl").chmod(0o000)
        r = query(corpus, tmp / "cache", unprivileged=True)
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.strip() == f"crase: error: cannot read {corpus / 'papers.jsonl'}: Permission denied"
        (corpus / "papers.jsonl").chmod(0o644)  # the fault gone
        ok = query(corpus, tmp / "cache", unprivileged=True)
        assert ok.returncode == 0 and "Black hole entropy from D-branes" in ok.stdout
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


CYRILLIC = [
    ("9801001", 1998, "Энтропия чёрных дыр из D-бран",
     "Мы считаем микросостояния экстремальных чёрных дыр. Энтропия согласуется с законом площади."),
    ("9802001", 1998, "Пространство анти-де Ситтера и голография",
     "Теория струн в пространстве анти-де Ситтера дуальна конформной теории поля."),
    ("9901001", 1999, "Микросостояния чёрных дыр в пространстве анти-де Ситтера",
     "Мы изучаем микросостояния чёрных дыр с помощью голографии."),
    ("9902001", 1999, "Решёточное моделирование глюболов", "Спектр глюболов измерен численно."),
]


@pytest.mark.fault_kind("corpus-non-latin-script")
def test_cyrillic_corpus_is_searchable(tmp_path):
    corpus = write_corpus(tmp_path / "ru", CYRILLIC, [("9901001", "9801001"), ("9901001", "9802001")])
    r = run_cli("query", "микросостояния чёрных дыр", "--corpus", str(corpus), "--quiet", cache_dir=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    head = ranked(r.stdout)
    assert "Микросостояния чёрных дыр в пространстве анти-де Ситтера (1999) — 9901001" in head
    assert "9902001" not in head  # the glueball paper shares no word with the query
    again = run_cli("query", "микросостояния чёрных дыр", "--corpus", str(corpus), "--quiet",
                    cache_dir=tmp_path / "cache")  # from the saved index: the same answer
    assert again.returncode == 0 and ranked(again.stdout) == head
