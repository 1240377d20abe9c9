"""Inputs read with a bound before they are parsed: ``--library`` on a device, a FIFO or a folder; BibTeX
nested a million braces deep or holding hundreds of thousands of blocks; a TOML settings file with a key
200,000 parts deep. Each is one line and exit 2 within seconds; the same command with a sane file works."""

from __future__ import annotations

import os
import time

import pytest
from cli_tools import QUERY, crase, one_error
from fault_tools import query, run_cli
from tiny_corpus import write_corpus


def _one_line(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    assert r.stdout == "" and r.stderr.count("\n") == 1 and r.stderr.startswith("crase: error: "), r.stderr[-2000:]
    return r.stderr.strip().removeprefix("crase: error: ")


@pytest.mark.fault_kind("library-device-or-fifo")
@pytest.mark.parametrize("what", ["/dev/zero", "fifo", "folder"])
def test_library_that_is_not_a_regular_file_is_refused_at_once(tmp_path, what):
    """``/dev/zero`` was read whole before the 4 MiB check (MemoryError after 10 s under a 4 GB cap);
    a FIFO with no writer hung the run."""
    corpus = write_corpus(tmp_path / "tiny")
    path = {"/dev/zero": "/dev/zero", "fifo": str(tmp_path / "lib.fifo"), "folder": str(tmp_path)}[what]
    if what == "fifo":
        os.mkfifo(path)
    t = time.monotonic()
    r = query(corpus, tmp_path / "cache", "--library", path, timeout=60)
    assert time.monotonic() - t < 30
    assert _one_line(r) == (f"cannot read the library file {path}: not a regular file (save the BibTeX or the "
                            "list of ids to a file)")
    ok = tmp_path / "lib.bib"
    ok.write_text("@article{a, eprint={hep-th/9801001}}\n")
    again = query(corpus, tmp_path / "cache", "--library", str(ok))
    assert again.returncode == 0 and "Library: 1 papers given" in again.stdout, again.stderr


@pytest.mark.fault_kind("library-bibtex-deep-braces")
def test_bibtex_nested_a_million_braces_deep_is_refused_before_parsing(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    corpus = write_corpus(tmp_path / "tiny")
    bib = tmp_path / "deep.bib"
    n = 1_000_000
    bib.write_text("@article{k,\n title={" + "{" * n + "x" + "}" * n + "}, eprint={hep-th/9801001}}\n")
    t = time.monotonic()
    msg = one_error(crase(capsys, "query", QUERY, "--corpus", corpus, "--library", bib))
    assert time.monotonic() - t < 5  # was 15.8 s in the parser
    assert msg == f"the BibTeX file nests braces {n + 2:,} deep (from line 2); at most 64 levels are read"
    bib.write_text("@article{k, title={{The {AdS/CFT} correspondence}}, eprint={hep-th/9801001}}\n")  # 3 deep: fine
    ok = crase(capsys, "query", QUERY, "--corpus", corpus, "--library", bib)
    assert ok.code == 0 and "Library: 1 papers given" in ok.out


@pytest.mark.fault_kind("library-bibtex-many-blocks")
def test_bibtex_of_300000_broken_blocks_is_refused_before_parsing(capsys, tmp_path, monkeypatch):
    """300,000 ``@a{`` took the parser 42 s and logged two lines per block; now refused by a count."""
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    corpus = write_corpus(tmp_path / "tiny")
    bib = tmp_path / "many.bib"
    bib.write_text("@a{" * 300_000)
    t = time.monotonic()
    msg = one_error(crase(capsys, "query", QUERY, "--corpus", corpus, "--library", bib))
    assert time.monotonic() - t < 5
    assert msg == "the BibTeX file holds 300,000 entries; give at most 5,000 papers"


@pytest.mark.fault_kind("library-bibtex-parser-log-flood")
def test_broken_bibtex_entries_are_listed_once_not_logged_by_the_parser(tmp_path):
    corpus = write_corpus(tmp_path / "tiny")
    bib = tmp_path / "broken.bib"
    bib.write_text("@article{a, title={x}\n@article{b title\n@article{c, eprint={hep-th/9801001}}\n")
    r = query(corpus, tmp_path / "cache", "--library", str(bib))
    assert r.returncode == 0, r.stderr
    assert "WARNING" not in r.stderr and "bibtexparser" not in r.stderr
    assert r.stderr.count("crase: note: library: skipped entry at line") == 2


@pytest.mark.fault_kind("settings-toml-deep-dotted-key")
@pytest.mark.parametrize("shape", ["dotted-key", "table-header", "quoted-parts"])
def test_toml_with_a_key_200000_parts_deep_is_refused_before_parsing(tmp_path, shape):
    """Python's TOML parser is quadratic in a dotted key's depth: this 400 KB file ran for minutes and
    grew to 23 GB. It is refused in linear time, before the parser sees it."""
    corpus = write_corpus(tmp_path / "tiny")
    settings = tmp_path / "deep.toml"
    text = {"dotted-key": "a" + ".a" * 200_000 + " = 1\n", "table-header": "[" + "a." * 200_000 + "a]\n",
            "quoted-parts": '"a".' * 200_000 + "a = 1\n"}[shape]
    settings.write_text(text)
    t = time.monotonic()
    r = query(corpus, tmp_path / "cache", "--config", str(settings), timeout=120)
    assert time.monotonic() - t < 30
    assert _one_line(r) == f"the settings file {settings} has a key 200,001 parts deep; settings keys have at most 32"
    settings.write_text('[pipeline]\nk = 5\n[endpoints.lab]\nbase_url = "http://10.0.0.1:8080/v1"\n')  # dots in strings
    assert query(corpus, tmp_path / "cache", "--config", str(settings)).returncode == 0


@pytest.mark.fault_kind("settings-toml-hostile-strings")
@pytest.mark.parametrize("text", ['"""' + "a" * 900_000, '"\\' * 300_000, "'" * 900_000, '"\\"' * 300_000,
                                  "a" * 900_000, "a.=" * 300_000], ids=["open-triple", "escapes", "quotes",
                                                                         "escaped-quotes", "bare", "empty-parts"])
def test_settings_scan_stays_linear_on_hostile_strings(tmp_path, text):
    """The key-depth scan itself never backtracks (unterminated strings, runs of escapes or quotes): each
    file gets the parser's own one-line error, within seconds."""
    corpus = write_corpus(tmp_path / "tiny")
    settings = tmp_path / "s.toml"
    settings.write_text(text)
    t = time.monotonic()
    r = run_cli("query", QUERY, "--corpus", str(corpus), "--config", str(settings), cache_dir=tmp_path / "cache",
                timeout=120)
    assert time.monotonic() - t < 30
    assert _one_line(r).startswith(f"the settings file {settings} is not valid TOML (")
