"""Hostile queries, every numeric option at and past its range, and bad settings files.

Each case runs the real ``crase`` command (in process: its exit status is ``main``'s return value)
on the tiny corpus and checks the exact outcome: the one-line message and exit status 2 for a
refusal, that no ``--json`` trace was written, and that the same command once the fault is gone
gives the answer of a clean run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_tools import QUERY, crase, one_error, ranked
from fault_tools import REPO, cli_env, shared_tmp, without_permission_override

from crase_core import trace as trace_io


def _query(capsys, corpus: Path, query: str, *more: str):
    return crase(capsys, "query", query, "--corpus", corpus, "--quiet", *more)


def _baseline(capsys, corpus: Path) -> str:
    r = _query(capsys, corpus, QUERY)
    assert r.code == 0, r.err
    return ranked(r.out)


# ---- queries ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("query, message", [
    ("", "the query is empty: type a literature-search question"),
    ("   \t \n ", "the query is empty: type a literature-search question"),
    ("a" * 2001, "the query is 2,001 characters long; the limit is 2,000. Shorten it to the question itself "
                 "(a title and a sentence or two work best)."),
], ids=["empty", "whitespace-only", "2001-chars"])
@pytest.mark.fault_kind("query-empty", "query-too-long")
def test_unusable_query_is_refused_before_anything_runs(capsys, tmp_path, tiny_corpus_dir, query, message):
    out = tmp_path / "run.json"
    assert one_error(_query(capsys, tiny_corpus_dir, query, "--json", str(out))) == message
    assert not out.exists()
    fixed = _query(capsys, tiny_corpus_dir, QUERY, "--json", str(out))
    assert fixed.code == 0 and trace_io.load(out).query == QUERY


@pytest.mark.fault_kind("query-too-long")
def test_query_of_exactly_the_limit_runs(capsys, tiny_corpus_dir):
    q = ("black hole entropy " * 200)[:2000]
    r = _query(capsys, tiny_corpus_dir, q)
    assert r.code == 0, r.err
    assert r.out.startswith("Query: black hole entropy") and "\n  1. [" in r.out


@pytest.mark.fault_kind("query-control-characters")
def test_nul_and_control_characters_are_removed_from_the_query(capsys, tmp_path, tiny_corpus_dir):
    """NUL, C0 controls and escape sequences never become search words (or reach the terminal)."""
    expected = _baseline(capsys, tiny_corpus_dir)
    out = tmp_path / "run.json"
    r = _query(capsys, tiny_corpus_dir, "black\x00 hole\x01 entropy\x1b[2J microstates\x07", "--json", str(out))
    assert r.code == 0, r.err
    assert ranked(r.out) == expected
    assert trace_io.load(out).query == QUERY  # the trace records the query that ran


@pytest.mark.fault_kind("query-not-utf8")
def test_query_that_is_not_utf8_names_the_byte(tiny_corpus_dir):
    """``crase query $'black \\xff hole'``: one line naming the byte (argv bytes need a real process)."""
    cache = shared_tmp("nonutf8")
    r = subprocess.run([os.fsencode(sys.executable), b"-m", b"crase_core.cli", b"query", b"black \xff hole",
                        b"--corpus", os.fsencode(str(tiny_corpus_dir)), b"--quiet"],
                       cwd=str(REPO), env=cli_env(cache), capture_output=True, timeout=120)
    assert r.returncode == 2 and r.stdout == b""
    assert r.stderr.decode() == ("crase: error: the query is not UTF-8 text (byte 0xff at byte 7); set your "
                                 "terminal to UTF-8 or retype the query\n")
    ok = subprocess.run([sys.executable, "-m", "crase_core.cli", "query", "black hole", "--corpus",
                         str(tiny_corpus_dir), "--quiet"], cwd=str(REPO), env=cli_env(cache),
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "Black hole entropy from D-branes" in ok.stdout


@pytest.mark.parametrize("query", ["the of and", "ثقب أسود ومصفوفة", "חור שחור"],
                         ids=["only-stop-words", "arabic-rtl", "hebrew-rtl"])
@pytest.mark.fault_kind("query-matches-nothing")
def test_query_that_matches_nothing_says_so_and_exits_0(capsys, tiny_corpus_dir, query):
    r = _query(capsys, tiny_corpus_dir, query)
    assert r.code == 0, r.err
    assert f"Query: {query}\n" in r.out
    assert "Note:  no paper matched any sub-query: nothing to expand. Try other words or a broader query." in r.out
    assert "No results." in r.out


@pytest.mark.fault_kind("query-emoji")
def test_emoji_in_a_query_are_ignored_by_search(capsys, tiny_corpus_dir):
    r = _query(capsys, tiny_corpus_dir, "🕳️ black hole entropy microstates 🌌")
    assert r.code == 0, r.err
    assert r.out.startswith("Query: 🕳️ black hole entropy microstates 🌌\n")
    assert ranked(r.out).split("\n", 2)[2] == _baseline(capsys, tiny_corpus_dir).split("\n", 2)[2]


# ---- numeric options ---------------------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--k", "0"], "--k must be ≥ 1 (got 0)"),
    (["--m", "0"], "--m must be ≥ 1 (got 0)"),
    (["--L", "21"], "--L must be in [1, 20] (got 21)"),
    (["--search-limit", "1001"], "--search-limit must be in [1, 1000] (got 1001)"),
    (["--age-reference-year", "999"], "--age-reference-year must be in [1000, 3000] (got 999)"),
], ids=["k=0", "m=0", "L=21", "search-limit=1001", "age-year=999"])
@pytest.mark.fault_kind("option-int-out-of-range")
def test_whole_number_out_of_range(capsys, tmp_path, tiny_corpus_dir, args, message):
    out = tmp_path / "run.json"
    assert one_error(_query(capsys, tiny_corpus_dir, QUERY, *args, "--json", str(out))) == message
    assert not out.exists()


@pytest.mark.parametrize("args, message", [
    (["--theta", "-0.1"], "--theta must be in [0, 1] (got -0.1)"),
    (["--theta", "1.1"], "--theta must be in [0, 1] (got 1.1)"),
    (["--beta", "1e308"], "--beta must be in [0, 10] (got 1e+308)"),
    (["--query-power", "1e308"], "--query-power must be in (0, 16] (got 1e+308)"),
], ids=["theta=-0.1", "theta=1.1", "beta=1e308", "query-power=1e308"])
@pytest.mark.fault_kind("option-float-out-of-range")
def test_number_out_of_range(capsys, tiny_corpus_dir, args, message):
    assert one_error(_query(capsys, tiny_corpus_dir, QUERY, *args)) == message


@pytest.mark.parametrize("args, message", [
    (["--tau", "1"], "--tau must be in [0, 1) (got 1)"),
    (["--alpha", "0"], "--alpha must be in (0, 1) (got 0)"),
    (["--alpha", "1"], "--alpha must be in (0, 1) (got 1)"),
    (["--tol", "0"], "--tol must be in (0, 1] (got 0)"),
], ids=["tau=1", "alpha=0", "alpha=1", "tol=0"])
@pytest.mark.fault_kind("option-open-bound")
def test_open_bound_itself_is_refused(capsys, tiny_corpus_dir, args, message):
    assert one_error(_query(capsys, tiny_corpus_dir, QUERY, *args)) == message


@pytest.mark.fault_kind("option-not-a-choice")
def test_value_not_among_the_choices(capsys, tiny_corpus_dir):
    assert one_error(_query(capsys, tiny_corpus_dir, QUERY, "--hops", "3")) == \
        "--hops must be one of 1, 1.5, 2 (got 3)"
    assert one_error(_query(capsys, tiny_corpus_dir, QUERY, "--ranker", "nope")) == \
        "unknown ranker 'nope'; choose one of ppr, salsa, cep"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "NaN", "Infinity"])
@pytest.mark.fault_kind("option-non-finite")
def test_non_finite_numbers_are_refused_everywhere(capsys, tiny_corpus_dir, value):
    for flag in ("--beta", "--query-power", "--theta", "--deadline"):
        got = one_error(_query(capsys, tiny_corpus_dir, QUERY, f"{flag}={value}"))
        assert got == f"{flag} must be a finite number (got {value!r})"


@pytest.mark.parametrize("args, message", [
    (["--k", "abc"], "--k must be a whole number (got 'abc')"),
    (["--k", "2.5"], "--k must be a whole number (got '2.5')"),
    (["--k="], "--k must be a whole number (got '')"),
    (["--theta", "high"], "--theta must be a number (got 'high')"),
], ids=["text-for-int", "fraction-for-int", "empty", "text-for-float"])
@pytest.mark.fault_kind("option-text-for-number")
def test_text_where_a_number_belongs(capsys, tiny_corpus_dir, args, message):
    assert one_error(_query(capsys, tiny_corpus_dir, QUERY, *args)) == message


@pytest.mark.fault_kind("option-does-not-apply")
def test_option_that_does_not_apply_to_the_ranker(capsys, tiny_corpus_dir):
    assert one_error(_query(capsys, tiny_corpus_dir, QUERY, "--ranker", "cep", "--alpha", "0.3")) == \
        "--alpha does not apply to ranker cep; it is used with ranker ppr, salsa"


@pytest.mark.fault_kind("option-huge-k")
def test_huge_k_returns_every_ranked_paper(capsys, tiny_corpus_dir):
    r = _query(capsys, tiny_corpus_dir, QUERY, "--k", "99999999999999999999999")
    assert r.code == 0, r.err
    assert ranked(r.out) == _baseline(capsys, tiny_corpus_dir)


@pytest.mark.parametrize("value, message", [
    ("0", "--deadline must be in (0, 604800] (got 0)"),
    ("-1", "--deadline must be in (0, 604800] (got -1)"),
    ("1e9", "--deadline must be in (0, 604800] (got 1e+09)"),
])
@pytest.mark.fault_kind("option-deadline-not-positive")
def test_deadline_must_be_a_positive_time(capsys, tiny_corpus_dir, value, message):
    assert one_error(_query(capsys, tiny_corpus_dir, QUERY, f"--deadline={value}")) == message


# ---- settings files ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, content, message", [
    ("bad.toml", b"[pipeline]\nk = \n", "is not valid TOML (Invalid value (at line 2, column 5))"),
    ("bad.json", b'{"pipeline": {"k": 1,}}',
     "is not valid JSON (Expecting property name enclosed in double quotes at line 1, column 22)"),
    ("latin1.toml", b"# caf\xe9\n[pipeline]\nk = 3\n", "is not UTF-8 text (byte 0xe9 on line 1); save it as UTF-8"),
    ("list.json", b"[1, 2]", "must hold a table of sections"),
], ids=["invalid-toml", "invalid-json", "not-utf8", "not-a-table"])
@pytest.mark.fault_kind("settings-unparseable")
def test_settings_file_that_cannot_be_parsed(capsys, tmp_path, tiny_corpus_dir, name, content, message):
    f = tmp_path / name
    f.write_bytes(content)
    got = one_error(_query(capsys, tiny_corpus_dir, QUERY, "--config", str(f)))
    assert got.startswith(f"the settings file {f} ") and got.endswith(message), got
    f.write_text("[pipeline]\nk = 3\n" if name.endswith(".toml") else '{"pipeline": {"k": 3}}', encoding="utf-8")
    fixed = _query(capsys, tiny_corpus_dir, QUERY, "--config", str(f))
    assert fixed.code == 0 and "\n  3. [" in fixed.out and "\n  4. [" not in fixed.out


@pytest.mark.parametrize("content, message", [
    ("[pipline]\nk = 3\n", "has unknown section(s) pipline; valid: pipeline, runtime, llm, s2, openalex, storage, endpoints"),
    ("[pipeline]\nkk = 3\n", ": unknown [pipeline] setting(s) kk; valid: k, m, L,"),
    ("[runtime]\napi_key = 'x'\n", ": unknown [runtime] setting(s) api_key; valid: source,"),
], ids=["unknown-section", "unknown-knob", "secret-is-not-a-setting"])
@pytest.mark.fault_kind("settings-unknown-knob")
def test_settings_file_naming_an_unknown_knob(capsys, tmp_path, tiny_corpus_dir, content, message):
    f = tmp_path / "s.toml"
    f.write_text(content, encoding="utf-8")
    got = one_error(_query(capsys, tiny_corpus_dir, QUERY, "--config", str(f)))
    assert got.startswith(f"the settings file {f}") and message in got, got


@pytest.mark.parametrize("content, message", [
    ('[pipeline]\nk = "abc"\n', "pipeline.k must be a whole number (got 'abc')"),
    ("[pipeline]\nk = 0\n", "the settings file {f}: pipeline.k must be ≥ 1 (got 0)"),
    ("[pipeline]\ntheta = inf\n", "pipeline.theta must be a finite number (got inf)"),
    ("[pipeline]\nhops = 3.0\n", "the settings file {f}: pipeline.hops must be one of 1, 1.5, 2 (got 3)"),
    ("[runtime]\ndeadline_s = -5\n", "the settings file {f}: runtime.deadline_s must be in (0, 604800] (got -5)"),
], ids=["wrong-type", "out-of-range", "non-finite", "not-a-choice", "bad-deadline"])
@pytest.mark.fault_kind("settings-value-out-of-range")
def test_settings_file_value_out_of_range_names_section_and_key(capsys, tmp_path, tiny_corpus_dir, content, message):
    f = tmp_path / "s.toml"
    f.write_text(content, encoding="utf-8")
    assert one_error(_query(capsys, tiny_corpus_dir, QUERY, "--config", str(f))) == message.format(f=f)


@pytest.mark.fault_kind("settings-not-a-regular-file")
def test_settings_file_that_is_not_a_regular_file(capsys, tmp_path, tiny_corpus_dir):
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)  # opening a FIFO for reading would block forever
    for path, why in ((fifo, "not a regular file"), (Path("/dev/zero"), "not a regular file"),
                      (tmp_path, "Is a directory"), (tmp_path / "missing.toml", "No such file or directory")):
        assert one_error(_query(capsys, tiny_corpus_dir, QUERY, "--config", str(path))) == \
            f"cannot read the settings file {path}: {why}"


@pytest.mark.fault_kind("settings-over-cap")
def test_settings_file_larger_than_the_cap(capsys, tmp_path, tiny_corpus_dir):
    f = tmp_path / "huge.toml"
    f.write_text("# " + "x" * (1 << 20) + "\n[pipeline]\nk = 3\n", encoding="utf-8")
    assert one_error(_query(capsys, tiny_corpus_dir, QUERY, "--config", str(f))) == \
        f"the settings file {f} is larger than 1024 KiB; is it the right file?"


# ---- output ---------------------------------------------------------------------------------------------

@pytest.mark.fault_kind("stdout-reader-goes-away")
def test_reader_that_goes_away_ends_the_command_quietly(tiny_corpus_dir):
    """``crase query … | head -1``: status 141 (SIGPIPE), nothing on stderr, the --json trace kept."""
    cache = shared_tmp("pipe")
    out = cache / "run.json"
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line is written
    try:
        r = subprocess.run([sys.executable, "-m", "crase_core.cli", "query", QUERY, "--corpus", str(tiny_corpus_dir),
                            "--quiet", "--json", str(out)], cwd=str(REPO), env=cli_env(cache), stdout=write_end,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert r.returncode == 128 + signal.SIGPIPE
    assert r.stderr == ""  # no error, no traceback, no library chatter (the corpus index was built here)
    assert trace_io.load(out).query == QUERY
    shell = subprocess.run(f"{sys.executable} -m crase_core.cli query '{QUERY}' --corpus {tiny_corpus_dir} --quiet "
                           "| head -1; exit ${PIPESTATUS[0]}", shell=True, executable="/bin/bash", cwd=str(REPO),
                           env=cli_env(cache), capture_output=True, text=True, timeout=120)
    assert shell.stdout == f"Query: {QUERY}\n" and shell.stderr == ""
    assert shell.returncode in (0, 141)  # 0 when all output fitted in the pipe before head exited


@pytest.mark.fault_kind("json-out-read-only-folder")
def test_json_to_a_read_only_folder_fails_before_the_run(tiny_corpus_dir):
    folder = shared_tmp("ro")
    (folder / "out").mkdir()
    (folder / "out").chmod(0o555)
    target = folder / "out" / "run.json"
    r = subprocess.run([*without_permission_override(), sys.executable, "-m", "crase_core.cli", "query", QUERY,
                        "--corpus", str(tiny_corpus_dir), "--json", str(target)], cwd=str(REPO),
                       env=cli_env(folder / "cache"), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"crase: error: cannot write {target}: Permission denied ({folder / 'out'})\n"
    assert os.listdir(folder / "out") == []
