"""`crase` end to end on the embedded corpus, and every bad input gives one clear line, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def crase(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crase_core.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())


def test_query_and_show_round_trip(tmp_path, hepth_source):
    out = tmp_path / "run.json"
    r = crase("query", "superconformal quantum mechanics of multi-black hole moduli spaces", "--k", "5",
              "--json", str(out))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("Query: superconformal")
    assert sum(1 for ln in lines if ln.startswith("       why: ")) == 5  # indented under its paper
    assert [ln[:5] for ln in lines if ln[3:5] == ". "] == ["  1. ", "  2. ", "  3. ", "  4. ", "  5. "]
    assert any(ln.startswith("Stages:") and "seeds" in ln for ln in lines)
    assert any(ln.startswith("Budget: 1 + |V| + |E| =") for ln in lines)
    assert "plan" in r.stderr and "ranking" in r.stderr  # per-stage progress
    data = json.loads(out.read_text())
    assert data["trace_version"] == 3 and len(data["results"]) == 5
    # second run: everything cached
    r2 = crase("query", "superconformal quantum mechanics of multi-black hole moduli spaces", "--k", "5", "--quiet")
    cost = next(ln for ln in r2.stdout.splitlines() if ln.startswith("Cost:"))
    # the offline backend runs no model: its work is counted as scoring operations, with no tokens
    assert cost.startswith("Cost:   0 scoring operations (offline backend: no model calls, no tokens)")
    assert "0 misses" in cost and " + " not in cost  # no token counts
    shown = crase("show", str(out), "--k", "5")
    assert shown.returncode == 0
    assert shown.stdout.splitlines()[:12] == lines[:12]


def test_settings_flags_reach_the_run(tmp_path, hepth_source):
    out = tmp_path / "r.json"
    r = crase("query", "noncommutative solitons", "--m", "3", "--L", "2", "--hops", "1", "--ranker", "salsa",
              "--theta", "0.6", "--tau", "0.1", "--beta", "0", "--alpha", "0.3", "--k", "7", "--quiet", "--json", str(out))
    assert r.returncode == 0, r.stderr
    s = json.loads(out.read_text())["settings"]
    assert (s["m"], s["L"], s["hops"], s["ranker"], s["theta"], s["tau"], s["beta"], s["alpha"], s["k"]) == (
        3, 2, 1.0, "salsa", 0.6, 0.1, 0.0, 0.3, 7)


def test_preset_and_ranker_parameters_are_recorded(tmp_path, hepth_source):
    out = tmp_path / "p.json"
    r = crase("query", "noncommutative solitons", "--preset", "paper", "--ranker", "cep", "--cep-hop-discount", "0.25",
              "--k", "4", "--quiet", "--json", str(out))
    assert r.returncode == 0, r.stderr
    s = json.loads(out.read_text())["settings"]
    assert (s["preset"], s["personalization"], s["alpha"], s["text_candidates"], s["ranker"], s["cep_hop_discount"],
            s["cep_background_iterations"], s["k"]) == ("paper", "uniform", 0.15, 0, "cep", 0.25, 24, 4)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["query", ""], "the query is empty"),
        (["query", "   \t "], "the query is empty"),
        (["query", "q" * 10_000], "10,000 characters long"),
        (["query", "x", "--hops", "1.5", "--alpha", "1.5"], "alpha must be in (0, 1)"),
        (["query", "x", "--corpus", "/nonexistent/corpus"], "does not exist"),
        (["query", "x", "--backend", "nope"], "unknown backend"),
        (["query", "x", "--source", "nope"], "unknown source"),
        (["show", "/nonexistent/trace.json"], "cannot read trace"),
        (["query", "x", "--beta", "inf"], "--beta must be a finite number"),
        (["query", "x", "--query-power", "inf"], "--query-power must be a finite number"),
        (["query", "x", "--query-power", "1e300"], "--query-power must be in (0, 16]"),
        (["query", "x", "--ranker", "cep", "--alpha", "0.3"], "--alpha does not apply to ranker cep"),
        (["eval", "b.jsonl", "--out", "o", "--ranker", "cep", "--alpha", "0.3"], "--alpha does not apply to ranker cep"),
        (["query", "x", "--preset", "paper", "--query-power", "2"], "does not apply to personalization uniform"),
        (["query", "x", "--config", "/nonexistent/crase.toml"], "cannot read the settings file"),
    ],
)
def test_bad_input_gives_one_clear_line(args, message, hepth_source):
    r = crase(*args)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_corrupt_trace_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = crase("show", str(bad))
    assert r.returncode == 2 and "not a JSON trace" in r.stderr
    bad.write_text(json.dumps({"trace_version": 1, "query": "x"}))
    r = crase("show", str(bad))
    assert r.returncode == 2 and "not a valid Crase trace" in r.stderr and "Traceback" not in r.stderr


def test_no_hits_and_non_ascii(hepth_source):
    r = crase("query", "qwxzv zzyzx", "--quiet")
    assert r.returncode == 0 and "No results." in r.stdout and "no paper matched" in r.stdout
    r = crase("query", "entropía de agujeros negros — black hole entropy 黑洞", "--quiet", "--k", "3")
    assert r.returncode == 0 and r.stdout.count("why:") == 3


def test_help_lists_every_subcommand_without_importing_them():
    """`crase --help` names every subcommand with the line its full parser has, and loads none of the
    pipeline, the store or numpy to do it (what keeps it a few times a bare Python start)."""
    import subprocess
    import sys

    from crase_core.cli.main import COMMANDS, build_parser

    full = build_parser()
    sub = next(a for a in full._actions if a.__class__.__name__ == "_SubParsersAction")
    assert {c.dest: c.help for c in sub._choices_actions} == COMMANDS
    code = ("import sys\nfrom crase_core.cli.main import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('numpy', 'crase_core.pipeline', 'crase_core.store.corpus_store', "
            "'crase_core.settings.config') if m in sys.modules]\nprint('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out and all(name in out for name in COMMANDS)


def test_the_progress_lines_name_the_stage_that_cost_most():
    from crase_core.cli.main import slowest_stage

    assert slowest_stage({"seeds": 0.25, "pruning": 1.5, "ranking": 0.75}) == "in 2.50 s; most in pruning: 1.50 s"
    assert slowest_stage({}) == "no stage ran"


_WITH_HANDLER = ("import atexit, sys\nfrom crase_core.cli import command, main\n"
                 "atexit.register(lambda: print('exit handler ran', file=sys.stderr))\n"
                 "if sys.argv[1] == 'usual':\n    raise SystemExit(main(sys.argv[2:]))\n"
                 "sys.argv = ['crase', *sys.argv[2:]]\ncommand()\n")


@pytest.mark.parametrize(("args", "status"), [(["query", "string duality", "--k", "3"], 0), (["query", "  "], 2)])
def test_a_one_run_command_ends_at_once_with_its_status_output_and_exit_handlers(tiny_corpus_dir, tmp_path, args,
                                                                                  status):
    """``crase query`` skips the interpreter's teardown (issue 31), and loses nothing by it: its exit status,
    every line of its output (through a pipe) and the exit handlers are what the usual exit gives."""
    env = {**os.environ, "CRASE_CACHE_DIR": str(tmp_path / "cache")}
    runs = [subprocess.run([sys.executable, "-c", _WITH_HANDLER, how, *args, "--quiet", "--corpus",
                            str(tiny_corpus_dir)], capture_output=True, text=True, timeout=300, env=env)
            for how in ("usual", "usual", "at-once")]  # the first fills the cache
    usual, at_once = runs[1:]
    assert usual.returncode == at_once.returncode == status, at_once.stderr
    assert usual.stderr.endswith("exit handler ran\n") and at_once.stderr == usual.stderr
    timed = ("Time:", "  done")  # stage times differ from run to run
    lines = [[ln for ln in r.stdout.splitlines() if not ln.startswith(timed)] for r in (usual, at_once)]
    assert lines[0] == lines[1] and (status or len(lines[0]) > 10)
