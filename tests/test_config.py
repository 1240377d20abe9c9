"""The one settings object: precedence, presets, knobs that do not apply, generated flags, layering."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
from pathlib import Path

import pytest

from crase_core import trace as trace_io
from crase_core.errors import InputError
from crase_core.settings.config import (
    Settings,
    add_arguments,
    explicit_values,
    load_settings,
    settings_from_args,
    with_choices,
)
from crase_core.settings.knobs import specs
from crase_core.settings.pipeline import PRESETS, PipelineSettings

ROOT = Path(__file__).resolve().parent.parent
ENV = ("CRASE_SETTINGS", "CRASE_CORPUS", "CRASE_BASE_URL", "CRASE_MODEL", "CRASE_RUNS_DIR", "CRASE_EVAL_DIR",
       "CRASE_PROMPTS_DIR", "CRASE_API_KEY", "OPENAI_API_KEY", "S2_API_KEY", "SEMANTIC_SCHOLAR_API_KEY")
#: every flag the README documents (they must keep working)
README_FLAGS = ["--k 5", "--m 3", "--L 2", "--search-limit 50", "--hops 1", "--neighbor-cap 20", "--ranker salsa",
                "--theta 0.6", "--tau 0.1", "--beta 0", "--alpha 0.3", "--age-reference-year 2001",
                "--personalization query", "--query-power 2", "--text-candidates 5", "--max-model-calls 100",
                "--source local", "--corpus /x", "--backend offline", "--no-cache", "--base-url http://h:1/v1",
                "--model m", "--api-key-env MY_KEY", "--llm-settings f.toml", "--temperature 0.1",
                "--concurrency 2", "--timeout 30", "--max-retries 1", "--structured-output off", "--s2-rate 0.5",
                "--s2-timeout 5", "--s2-base-url http://h:2/graph/v1", "--s2-max-retries 1", "--s2-cache-days 2",
                "--s2-page-size 100", "--s2-max-pages 2", "--s2-on-error skip", "--s2-no-cache", "--preset paper"]


@pytest.fixture()
def clean_env(monkeypatch):
    for var in ENV:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def parse(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(flags))


def test_defaults_file_environment_and_flags_in_that_order(clean_env, tmp_path):
    s = load_settings()
    assert s.pipeline == PipelineSettings() and s.storage == Settings().storage and s.file is None
    assert (s.runtime.source, s.runtime.backend, s.runtime.corpus_dir, s.runtime.llm.base_url, s.runtime.s2) == (
        "local", "offline", None, "http://127.0.0.1:8080/v1", Settings().runtime.s2)
    assert list(s.endpoints) == ["default"] and s.endpoint == "default"
    f = tmp_path / "crase.toml"
    f.write_text('[pipeline]\nalpha = 0.3\nk = 7\n[runtime]\ncorpus_dir = "/from/file"\n'
                 '[llm]\nbase_url = "http://file:1/v1"\nmodel = "file-model"\n[s2]\nrate = 0.25\n')
    s = load_settings(f)
    assert (s.pipeline.alpha, s.pipeline.k, s.runtime.corpus_dir) == (0.3, 7, "/from/file")
    assert (s.runtime.llm.base_url, s.runtime.llm.model, s.runtime.s2.rate) == ("http://file:1/v1", "file-model", 0.25)
    clean_env.setenv("CRASE_CORPUS", "/from/env")
    clean_env.setenv("CRASE_BASE_URL", "http://env:2/v1")
    clean_env.setenv("CRASE_SETTINGS", str(f))  # the file may also come from the environment
    s = load_settings()
    assert (s.runtime.corpus_dir, s.runtime.llm.base_url, s.pipeline.alpha) == ("/from/env", "http://env:2/v1", 0.3)
    s = settings_from_args(parse("--corpus", "/from/flag", "--alpha", "0.2", "--base-url", "http://flag:3/v1"))
    assert (s.runtime.corpus_dir, s.pipeline.alpha, s.pipeline.k, s.runtime.llm.base_url) == (
        "/from/flag", 0.2, 7, "http://flag:3/v1")


def test_every_documented_flag_parses_and_every_cli_knob_has_a_flag(clean_env):
    args = parse(*" ".join(README_FLAGS).split())
    given = explicit_values(args)
    assert sum(len(v) for v in given.values()) == len(README_FLAGS)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = {o for a in parser._actions for o in a.option_strings}
    from crase_core.settings.config import SECTIONS

    for cls in SECTIONS.values():
        for s in specs(cls):
            assert (s.flag in flags) == s.knob.cli, s.name
            assert s.knob.help, s.name


def test_presets_and_explicit_values_win(clean_env, tmp_path):
    paper = settings_from_args(parse("--preset", "paper")).pipeline
    assert (paper.preset, paper.personalization, paper.alpha, paper.text_candidates, paper.ranker) == (
        "paper", "uniform", 0.15, 0, "ppr")
    assert paper == PipelineSettings.from_preset("paper")
    assert dataclasses.replace(paper, preset="default", personalization="query", alpha=0.5, text_candidates=10,
                               ranker="salsa", fusion="restart-rrf", L_offline=1, theta_lexical=0.05, tau_lexical=0.0,
                               text_matches=3,
                               query_seeds=5,
                               proximity_weight=0.4, proximity_window_weight=0.2, anchor_restart_weight=0.1,
                               text_rank_weight=0.6, text_rank_confidence=0.5,
                               text_rank_specificity=0.5, semantic_feedback_weight=0.4,
                               semantic_feedback_scope="fusion") == PipelineSettings()  # exactly
    assert settings_from_args(parse("--preset", "paper", "--alpha", "0.2")).pipeline.alpha == 0.2
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"pipeline": {"preset": "paper", "alpha": 0.3}}))
    assert load_settings(f).pipeline.alpha == 0.3  # the file's own value wins over its preset
    assert settings_from_args(parse("--config", str(f), "--preset", "default")).pipeline.alpha == 0.5
    assert set(PRESETS) == {"default", "paper"}


@pytest.mark.parametrize(("flags", "message"), [
    (["--ranker", "cep", "--alpha", "0.3"], "--alpha does not apply to ranker cep; it is used with ranker ppr, salsa"),
    (["--ranker", "cep", "--max-iter", "5"], "--max-iter does not apply to ranker cep"),
    (["--cep-hop-discount", "0.3"], "--cep-hop-discount does not apply to ranker salsa; it is used with ranker cep"),
    (["--personalization", "uniform", "--query-power", "2"], "--query-power does not apply to personalization uniform"),
    (["--preset", "paper", "--query-power", "2"], "--query-power does not apply to personalization uniform"),
    (["--beta", "inf"], "--beta must be a finite number"),
    (["--query-power", "1e300"], "--query-power must be in (0, 16]"),
    (["--theta", "nan"], "--theta must be a finite number"),
    (["--k", "2.5"], "--k must be a whole number"),
    (["--preset", "nope"], "unknown preset 'nope'; choose one of default, paper"),
])
def test_bad_or_inapplicable_flags_are_refused(clean_env, flags, message):
    with pytest.raises(InputError) as e:
        settings_from_args(parse(*flags))
    assert message in str(e.value)


def test_inapplicable_values_from_a_preset_or_file_are_ignored_not_refused(clean_env, tmp_path):
    s = settings_from_args(parse("--preset", "paper", "--ranker", "cep")).pipeline  # α = 0.15 rides along unused
    # the paper's preset has no fusion with the text score, so the fusion's λ and k do not apply either
    assert s.ranker == "cep" and s.inapplicable().keys() == {"alpha", "tol", "max_iter", "query_power",
                                                             "fusion_weight", "rrf_k", "text_rank_weight",
                                                             "text_rank_confidence", "text_rank_specificity"}
    s = settings_from_args(parse("--ranker", "cep", "--cep-hop-discount", "0.25")).pipeline
    assert s.cep_hop_discount == 0.25


def test_settings_file_errors_name_the_problem(clean_env, tmp_path):
    f = tmp_path / "bad.toml"
    for text, message in [("[pipline]\n", "unknown section(s) pipline"), ("[pipeline]\nalfa = 1\n", "alfa"),
                          ("[pipeline]\nbeta = inf\n", "pipeline.beta must be a finite number"),
                          ("[llm]\napi_key = 'sk-x'\n", "api_key"), ("[pipeline\n", "not valid TOML"),
                          ("[endpoints.x]\nmodel = 'm'\n", "base_url is required")]:
        f.write_text(text)
        with pytest.raises(InputError) as e:
            load_settings(f)
        assert message in str(e.value)


def test_form_choices_accept_only_form_knobs_and_allowed_endpoints(clean_env):
    s = load_settings()
    assert with_choices(s, pipeline={"alpha": 0.2, "preset": "paper"}).pipeline.alpha == 0.2
    assert with_choices(s, pipeline={"preset": "paper"}).pipeline == PipelineSettings.from_preset("paper")
    tuned = dataclasses.replace(s, pipeline=s.pipeline.replace(tol=1e-6, max_iter=50))  # operator-only knobs
    assert with_choices(tuned, pipeline={"alpha": 0.2}).pipeline == tuned.pipeline.replace(alpha=0.2)
    for bad in ({"pipeline": {"tol": 0.1}}, {"s2": {"base_url": "http://evil/"}}, {"endpoint": "elsewhere"}):
        with pytest.raises(InputError):
            with_choices(s, backend="openai", **bad)


def test_old_traces_without_the_new_settings_load_with_defaults(tmp_path, hepth_engine):
    from crase_core.pipeline import run_query

    t = run_query("noncommutative solitons", hepth_engine, PipelineSettings.from_preset("paper", k=3, m=2, L_offline=1))
    data = json.loads(trace_io.dumps(t))
    assert data["settings"]["preset"] == "paper" and data["settings"]["alpha"] == 0.15
    for name in ("preset", "cep_hop_discount", "cep_background_restart", "cep_background_iterations"):
        del data["settings"][name]
    old = trace_io.from_dict(data)
    assert old.settings.preset == "default" and old.settings.cep_hop_discount == 0.5
    assert old.settings.alpha == 0.15 and [r.paper_id for r in old.results] == [r.paper_id for r in t.results]


# --- layering ------------------------------------------------------------------------------------------------
def _imports() -> dict[str, set[str]]:
    """Intra-package imports of crase_core (module → modules it imports), imports inside functions included."""
    pkg = ROOT / "crase_core"
    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
               for p in pkg.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        base = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                parts = base.split(".")[: len(base.split(".")) - max(node.level - 1, 0)] if node.level else []
                root = ".".join(parts + ([node.module] if node.module else []))
                names = [f"{root}.{a.name}" for a in node.names]
            for name in names:
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name and name != mod:
                    graph[mod].add(name)
    return graph


def test_no_import_circles_in_crase_core():
    graph = _imports()
    seen: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(graph[node]):
            if seen.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt])
            elif nxt not in seen:
                visit(nxt, path + [nxt])
        seen[node] = 2

    for m in sorted(graph):
        if m not in seen:
            visit(m, [m])
    assert cycles == []
    assert "crase_core.runtime" not in graph["crase_core.llm.backend"]
    assert "crase_core.cli" not in graph["crase_core.evaluation.cli"]
    assert "crase_core.runtime" not in graph["crase_core.sources.semantic_scholar"]


def test_the_settings_package_is_a_leaf():
    """crase_core.settings imports only itself and the ground floor (errors, redaction): no stage, ranker,
    source or backend, so every front end and every stage can read the settings without a circle."""
    graph = _imports()
    above = {dep for mod, deps in graph.items() if mod.startswith("crase_core.settings") for dep in deps
             if not dep.startswith("crase_core.settings")}
    assert above <= {"crase_core.errors", "crase_core.redaction"}


def test_only_the_settings_package_resolves_environment_fallbacks():
    """Outside crase_core.settings nobody calls environment.get/first: folder defaults go through its
    resolvers (corpus_folder, cache_folder, runs_folder, prompts_folder)."""
    callers = set()
    for path in (ROOT / "crase_core").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("crase_core/settings/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("get", "first") and \
                    isinstance(node.value, ast.Name) and node.value.id == "environment":
                callers.add(rel)
    assert callers == set()


def test_pipeline_knobs_sit_in_stage_tables_of_the_settings_file(clean_env, tmp_path):
    from crase_core.settings.pipeline import STAGES

    named = [n for names in STAGES.values() for n in names]
    assert sorted(named) == sorted(f.name for f in dataclasses.fields(PipelineSettings) if f.name != "preset")
    f = tmp_path / "crase.toml"
    f.write_text('[pipeline]\nk = 7\n[pipeline.ranking]\nranker = "ppr"\nalpha = 0.3\n[pipeline.search]\nm = 4\n')
    s = load_settings(f).pipeline
    assert (s.k, s.ranker, s.alpha, s.m) == (7, "ppr", 0.3, 4)
    assert s.stage("ranking")["alpha"] == 0.3 and set(s.stage("budget")) == set(STAGES["budget"])
    f.write_text('[pipeline.search]\nalpha = 0.3\n')
    with pytest.raises(InputError, match=r"\[pipeline.search\] holds alpha, which is not search settings"):
        load_settings(f)
    f.write_text('[pipeline]\nalpha = 0.2\n[pipeline.ranking]\nalpha = 0.3\n')
    with pytest.raises(InputError, match="alpha given twice"):
        load_settings(f)


def test_only_the_environment_module_reads_environment_variables():
    readers = set()
    for path in (ROOT / "crase_core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv") and \
                    isinstance(node.value, ast.Name) and node.value.id == "os":
                readers.add(path.relative_to(ROOT).as_posix())
    assert readers == {"crase_core/settings/environment.py"}


def test_every_flag_in_the_readme_settings_table_is_a_flag_of_crase_query():
    """The README's one-line-per-knob cheatsheet names real flags, each with the default the flag has."""
    import re

    from crase_core.cli.main import build_parser

    parser = build_parser("query")
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    query = sub.choices["query"]
    known = {opt: a for a in query._actions for opt in a.option_strings}
    table = re.findall(r"^\| `(--[a-z-]+)` \| ([^|]+) \|", (ROOT / "README.md").read_text(encoding="utf-8"), re.M)
    assert len(table) >= 40
    for flag, default in table:
        assert flag in known, f"README names {flag}, which crase query does not have"
        shown = default.strip().split(" ")[0]
        if re.fullmatch(r"[0-9.e-]+", shown):
            assert f"default {shown}" in (known[flag].help or "") or f"default {float(shown):g}" in (known[flag].help or ""), (flag, shown)
