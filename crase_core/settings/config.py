"""One typed, nested settings object, loaded from defaults < settings file < environment < explicit values.

:class:`Settings` has five sections, each a dataclass whose fields carry their
default, range or choices, help, environment variable and flag as
:class:`~crase_core.settings.knobs.Knob` metadata:

* ``pipeline`` — :class:`~crase_core.settings.pipeline.PipelineSettings` (recorded in traces);
* ``openalex`` — :class:`~crase_core.sources.openalex.OpenAlexSettings` (``--source openalex``);
* ``runtime`` — :class:`~crase_core.settings.runtime.RuntimeConfig`: source, backend, corpus,
  cache, and inside it ``llm`` (:class:`~crase_core.settings.llm.LLMSettings`) and
  ``s2`` (:class:`~crase_core.sources.s2_http.S2Settings`);
* ``storage`` — :class:`StorageSettings` (where the app keeps runs and reads reports);
* ``endpoints`` — the operator's allow-list of model endpoints
  (:class:`~crase_core.settings.llm.ModelEndpoint`), ``default`` first.

Settings file (``--config FILE`` or ``$CRASE_SETTINGS``), TOML or JSON, one table
per section plus ``[endpoints.NAME]`` tables::

    [pipeline]
    preset = "paper"
    [pipeline.ranking]          # a pipeline knob may also sit in its stage's table
    ranker = "salsa"
    [runtime]
    backend = "openai"
    [llm]
    base_url = "http://127.0.0.1:8080/v1"
    [endpoints.hosted]
    base_url = "https://api.example.org/v1"
    api_key_env = "HOSTED_KEY"
    model = "some-model"

Keys are never settings: the model key comes from the variable an endpoint
names (the default endpoint: ``CRASE_API_KEY``, then ``OPENAI_API_KEY``) and is
attached only when the request goes to that endpoint's base URL; the Semantic
Scholar key (``S2_API_KEY`` / ``SEMANTIC_SCHOLAR_API_KEY``) only to the
configured Graph API root. A command line that names ``--api-key-env`` or
``--llm-settings`` binds that key to its ``--base-url`` explicitly.

:func:`add_arguments` generates the CLI flags from the metadata (choices from
the registries), :func:`settings_from_args` resolves them (an explicit flag that
does not apply, e.g. ``--alpha`` with ``--ranker cep``, is refused), and
:func:`with_choices` applies a visitor's form values over the operator's
settings (only knobs marked for the form, endpoints only by name).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from crase_core.errors import InputError
from crase_core.settings import environment
from crase_core.settings.knobs import Spec, check_value, coerce, knob, spec, specs
from crase_core.settings.llm import DEFAULT_KEY_ENVS, LLMSettings, ModelEndpoint, same_endpoint
from crase_core.settings.openalex import OpenAlexSettings
from crase_core.settings.pipeline import PRESETS, STAGE_TITLES, STAGES, PipelineSettings
from crase_core.settings.runtime import RuntimeConfig
from crase_core.settings.s2 import S2Settings

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "default"
#: the largest settings file read (a cap, so /dev/zero or a huge file cannot hang or exhaust memory).
MAX_SETTINGS_BYTES = 1 << 20
#: a TOML key or table header with more parts than this is refused before parsing: Python's TOML parser
#: takes time quadratic in a dotted key's depth (``a.a.….a = 1``, 200,000 deep: minutes and gigabytes)
MAX_TOML_KEY_DEPTH = 32
# strings and comments (left out of the key scan); maximal runs of key characters (linear: no overlap)
_TOML_NOT_KEYS = re.compile(  # every alternative matches once started (an unterminated string runs to its end)
    r'"""(?:\\[\s\S]?|[^\\])*?(?:"""|\Z)|\'\'\'[\s\S]*?(?:\'\'\'|\Z)'
    r'|"(?:\\[\s\S]?|[^"\\\n])*(?:"|$)|\'[^\'\n]*(?:\'|$)|#[^\n]*', re.M)
_TOML_KEY_RUN = re.compile(r"[A-Za-z0-9_\-. \t]+")


@dataclass(frozen=True)
class StorageSettings:
    """Folders the app uses besides the cache."""

    runs_dir: str | None = knob(None, "Folder of saved runs and audit verdicts; default: <cache dir>/runs.",
                                env=environment.RUNS_DIR, cli=False, form=False)
    eval_dir: str | None = knob(None, "Folder the Benchmark page reads reports from; default: "
                                "benchmarks/results.", env=environment.EVAL_DIR, cli=False, form=False)


#: section name → settings class (the order of the CLI groups and of the settings file's tables).
SECTIONS: dict[str, type] = {
    "pipeline": PipelineSettings,
    "runtime": RuntimeConfig,
    "llm": LLMSettings,
    "s2": S2Settings,
    "openalex": OpenAlexSettings,
    "storage": StorageSettings,
}
GROUP_TITLES = {
    "pipeline": "pipeline settings",
    "runtime": "source and model backend",
    "llm": "model endpoint (--backend openai; operator only)",
    "s2": "Semantic Scholar source (--source s2; key from $S2_API_KEY)",
    "openalex": "OpenAlex source (--source openalex; optional key from $OPENALEX_API_KEY)",
}


@dataclass(frozen=True)
class Settings:
    """Everything a run needs, resolved. ``endpoints`` is the operator's allow-list (name → endpoint)."""

    pipeline: PipelineSettings = field(default_factory=PipelineSettings)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    storage: StorageSettings = field(default_factory=StorageSettings)
    endpoints: Mapping[str, ModelEndpoint] = field(default_factory=dict)
    endpoint: str | None = None  # the allowed endpoint the model backend uses (None: an operator-given URL)
    file: str | None = None  # the settings file read, if any

    def describe(self) -> dict[str, Any]:
        """Secret-free summary: every resolved knob except secrets, endpoints by name and URL."""
        out: dict[str, Any] = {}
        for name, obj in (("pipeline", self.pipeline), ("runtime", self.runtime), ("llm", self.runtime.llm),
                          ("s2", self.runtime.s2), ("openalex", self.runtime.openalex), ("storage", self.storage)):
            out[name] = {s.name: getattr(obj, s.name) for s in specs(type(obj)) if not s.knob.secret}
        out["llm"]["api_key"] = "set" if self.runtime.llm.api_key else "none"
        out["llm"]["base_url"] = self.runtime.llm.describe()["base_url"]
        out["s2"]["api_key"] = "set" if self.runtime.s2_api_key else "none"
        out["openalex"]["api_key"] = "set" if self.runtime.openalex_api_key else "none"
        out["endpoints"] = {n: e.describe() for n, e in self.endpoints.items()}
        out["endpoint"] = self.endpoint
        return out


Values = dict[str, dict[str, Any]]


# --- loading ---------------------------------------------------------------------------------------------

def toml_key_depth(text: str) -> int:
    """The most parts of any dotted key or table header of the TOML ``text`` (strings and comments left
    out; a quoted part counts as one): linear time, a few regular-expression passes."""
    bare = _TOML_NOT_KEYS.sub("q", text)  # a string or comment stands for one key part
    return 1 + max((m.group().count(".") for m in _TOML_KEY_RUN.finditer(bare)
                    if bare[m.end():m.end() + 1] in ("=", "]")), default=0)


def read_settings_file(path: str | Path) -> tuple[Values, dict[str, dict[str, Any]]]:
    """(section values, endpoint tables) of a TOML/JSON settings file; unknown names are an error."""
    p = Path(path).expanduser()
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))  # a FIFO cannot block
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise InputError(f"cannot read the settings file {p}: not a regular file")
            data_bytes = f.read(MAX_SETTINGS_BYTES + 1)
    except OSError as e:
        raise InputError(f"cannot read the settings file {p}: {e.strerror or e}") from None
    if len(data_bytes) > MAX_SETTINGS_BYTES:
        raise InputError(f"the settings file {p} is larger than {MAX_SETTINGS_BYTES >> 10} KiB; "
                         "is it the right file?")
    try:
        raw = data_bytes.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data_bytes[: e.start].count(b"\n") + 1
        raise InputError(f"the settings file {p} is not UTF-8 text (byte 0x{data_bytes[e.start]:02x} on "
                         f"line {line}); save it as UTF-8") from None
    toml = p.suffix.lower() == ".toml"
    if toml:
        depth = toml_key_depth(raw)
        if depth > MAX_TOML_KEY_DEPTH:
            raise InputError(f"the settings file {p} has a key {depth:,} parts deep; settings keys have at most "
                             f"{MAX_TOML_KEY_DEPTH}")
    try:
        data = tomllib.loads(raw) if toml else json.loads(raw)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"the settings file {p} is not valid TOML ({e})") from None
    except json.JSONDecodeError as e:
        raise InputError(f"the settings file {p} is not valid JSON ({e.msg} at line {e.lineno}, "
                         f"column {e.colno})") from None
    except RecursionError:
        raise InputError(f"the settings file {p} is nested too deeply") from None
    if not isinstance(data, dict):
        raise InputError(f"the settings file {p} must hold a table of sections")
    unknown = sorted(set(data) - set(SECTIONS) - {"endpoints"})
    if unknown:
        raise InputError(f"the settings file {p} has unknown section(s) {', '.join(unknown)}; "
                         f"valid: {', '.join([*SECTIONS, 'endpoints'])}")
    values: Values = {}
    for section, cls in SECTIONS.items():
        table = data.get(section, {})
        if not isinstance(table, dict):
            raise InputError(f"the settings file {p}: [{section}] must be a table")
        if section == "pipeline":
            table = _flatten_stages(table, p)
        names = {s.name: s for s in specs(cls) if not s.knob.secret}
        bad = sorted(set(table) - set(names))
        if bad:
            raise InputError(f"the settings file {p}: unknown [{section}] setting(s) {', '.join(bad)}; "
                             f"valid: {', '.join(names)}")
        values[section] = {k: coerce(names[k], v, f"{section}.{k}") for k, v in table.items()}
        for k, v in values[section].items():
            check_value(names[k], v, f"the settings file {p}: {section}.{k}")
    endpoints = data.get("endpoints", {})
    if not isinstance(endpoints, dict) or not all(isinstance(v, dict) for v in endpoints.values()):
        raise InputError(f"the settings file {p}: [endpoints.NAME] entries must be tables")
    return values, endpoints


def _flatten_stages(table: dict[str, Any], p: Path) -> dict[str, Any]:
    """``[pipeline]`` with its ``[pipeline.<stage>]`` tables (:data:`STAGES`) merged in: each stage table may
    hold only its own stage's knobs, and a knob may be given once."""
    out = {k: v for k, v in table.items() if not (k in STAGES and isinstance(v, dict))}
    for stage, sub in table.items():
        if stage not in STAGES or not isinstance(sub, dict):
            continue
        bad = sorted(set(sub) - set(STAGES[stage]))
        if bad:
            raise InputError(f"the settings file {p}: [pipeline.{stage}] holds {', '.join(bad)}, which "
                             f"{'is' if len(bad) == 1 else 'are'} not {stage} settings; its knobs: "
                             f"{', '.join(STAGES[stage])}")
        twice = sorted(set(sub) & set(out))
        if twice:
            raise InputError(f"the settings file {p}: {', '.join(twice)} given twice ([pipeline] and "
                             f"[pipeline.{stage}])")
        out.update(sub)
    return out


def environment_values() -> Values:
    """The values the environment sets (each knob's ``env`` variable), by section."""
    out: Values = {}
    for section, cls in SECTIONS.items():
        for s in specs(cls):
            if s.knob.env:
                raw = environment.get(s.knob.env)
                if raw is not None:
                    out.setdefault(section, {})[s.name] = coerce(s, raw, f"${s.knob.env}")
    return out


def _endpoint(name: str, table: Mapping[str, Any]) -> ModelEndpoint:
    allowed = {"base_url", "api_key_env", "model", "settings_file"}
    bad = sorted(set(table) - allowed)
    if bad:
        raise InputError(f"endpoint {name}: unknown setting(s) {', '.join(bad)}; valid: {', '.join(sorted(allowed))}")
    if not isinstance(table.get("base_url"), str):
        raise InputError(f"endpoint {name}: base_url is required")
    key_env = table.get("api_key_env")
    return ModelEndpoint(name=name, base_url=table["base_url"], key_envs=(str(key_env),) if key_env else (),
                         model=table.get("model") or None, settings_file=table.get("settings_file") or None)


def load_settings(path: str | Path | None = None, *, explicit: Values | None = None,
                  endpoint: str | None = None) -> Settings:
    """Resolve every section: defaults < settings file < environment < ``explicit`` (flags, by section).

    ``path`` defaults to ``$CRASE_SETTINGS``. Pipeline values: defaults < the preset < the file's
    ``[pipeline]`` < explicit values; an explicit ``preset`` starts over from defaults + that preset
    (the file's ``[pipeline]`` values are then not used). ``endpoint`` picks an allowed endpoint by
    name for the model backend. Explicit pipeline values that do not apply (``alpha`` under the CEP
    ranker) raise :class:`InputError`.
    """
    explicit = explicit or {}
    file = str(path) if path else environment.get(environment.SETTINGS_FILE)
    file_values, endpoint_tables = read_settings_file(file) if file else ({}, {})
    env_values = environment_values()

    def layered(section: str, *, with_explicit: bool = True) -> dict[str, Any]:
        return {**file_values.get(section, {}), **env_values.get(section, {}),
                **(explicit.get(section, {}) if with_explicit else {})}

    pipeline = _pipeline(file_values.get("pipeline", {}), explicit.get("pipeline", {}))
    operator_llm = LLMSettings(**{**layered("llm", with_explicit=False), "api_key": ""})
    endpoints = {DEFAULT_ENDPOINT: ModelEndpoint(
        DEFAULT_ENDPOINT, operator_llm.base_url,
        (operator_llm.api_key_env,) if operator_llm.api_key_env else DEFAULT_KEY_ENVS,
        model=operator_llm.model, settings_file=operator_llm.settings_file)}
    for name, table in endpoint_tables.items():
        if name == DEFAULT_ENDPOINT:
            raise InputError(f"endpoint name {DEFAULT_ENDPOINT!r} is reserved for the [llm] section's base_url")
        endpoints[name] = _endpoint(name, table)
    llm, chosen = _llm(layered("llm"), explicit.get("llm", {}), endpoints, endpoint)
    s2 = S2Settings(**layered("s2"))
    operator_s2 = S2Settings(**layered("s2", with_explicit=False))
    s2_key = environment.first(environment.S2_KEYS)
    if s2_key and not same_endpoint(s2.base_url, operator_s2.base_url):
        log.warning("not sending the Semantic Scholar key to %s: it is configured for %s", s2.base_url,
                    operator_s2.base_url)
        s2_key = None
    openalex = OpenAlexSettings(**layered("openalex"))
    openalex_key = environment.first(environment.OPENALEX_KEYS)
    operator_openalex = OpenAlexSettings(**layered("openalex", with_explicit=False))
    if openalex_key and not same_endpoint(openalex.base_url, operator_openalex.base_url):
        log.warning("not sending the OpenAlex key to %s: it is configured for %s", openalex.base_url,
                    operator_openalex.base_url)
        openalex_key = None
    runtime = RuntimeConfig(**layered("runtime"), llm=llm, s2=s2, s2_api_key=s2_key, openalex=openalex,
                            openalex_api_key=openalex_key)
    return Settings(pipeline=pipeline, runtime=runtime, storage=StorageSettings(**layered("storage")),
                    endpoints=endpoints, endpoint=chosen, file=file)


def _pipeline(file_values: Mapping[str, Any], explicit: Mapping[str, Any]) -> PipelineSettings:
    preset = explicit.get("preset")
    if preset is not None:  # a preset named on the command line replaces the file's pipeline values
        base = _preset_values(preset)
    else:
        preset = file_values.get("preset", "default")
        base = {**_preset_values(preset), **file_values}
    settings = PipelineSettings(**{**base, **explicit, "preset": preset})
    refused = settings.inapplicable()
    for name in explicit:
        if name in refused:
            raise InputError(f"{spec(PipelineSettings, name).flag} {refused[name]}")
    return settings


def _preset_values(name: str) -> dict[str, Any]:
    if name not in PRESETS:
        raise InputError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    return dict(PRESETS[name])


def _llm(values: dict[str, Any], explicit: Mapping[str, Any], endpoints: Mapping[str, ModelEndpoint],
         endpoint: str | None) -> tuple[LLMSettings, str | None]:
    """The backend's settings with the key its base URL is allowed to receive, and the endpoint used."""
    if endpoint is not None:
        if endpoint not in endpoints:
            raise InputError(f"unknown endpoint {endpoint!r}; the operator allows: {', '.join(endpoints)}")
        policy = LLMSettings(**{**values, "base_url": endpoints[endpoint].base_url, "api_key_env": None,
                                "settings_file": None, "api_key": ""})
        return endpoints[endpoint].settings(policy, model=explicit.get("model")), endpoint
    if explicit.get("api_key_env") or explicit.get("settings_file"):
        return LLMSettings(**values), None  # the operator binds this key to this URL on the command line
    settings = LLMSettings(**{**values, "api_key_env": None, "settings_file": None, "api_key": ""})
    for name, ep in endpoints.items():
        if same_endpoint(ep.base_url, settings.base_url):
            return replace(settings, api_key=ep.api_key() or "", model=settings.model or ep.model), name
    if environment.first(DEFAULT_KEY_ENVS):
        log.warning("not sending the API key to %s: it is configured for %s (name its variable with "
                    "--api-key-env to send it there)", settings.describe()["base_url"],
                    endpoints[DEFAULT_ENDPOINT].describe())
    return settings, None


# --- command line ------------------------------------------------------------------------------------------

def _dest(section: str, name: str) -> str:
    return f"{section}__{name}"


def _flag_help(s: Spec) -> str:
    k = s.knob
    parts = [k.help.rstrip(".")]
    rng = k.describe_range()
    if rng:
        parts.append(rng)
    if s.default is not None and s.type is not bool:
        parts.append(f"default {s.default:g}" if isinstance(s.default, float) else f"default {s.default}")
    if k.env:
        parts.append(f"${k.env}")
    if k.when is not None:
        parts.append(f"only with {k.when.field} {'/'.join(map(str, k.when.allowed()))}")
    return "; ".join(parts).replace("%", "%%")


def add_arguments(parser: argparse.ArgumentParser,
                  sections: tuple[str, ...] = ("pipeline", "runtime", "llm", "s2", "openalex"),
                  ) -> None:
    """Add one flag per CLI knob of ``sections`` (help, range, choices and default from the metadata),
    plus ``--config FILE`` and ``--endpoint NAME``. Flags left out keep their lower-precedence value."""
    top = parser.add_argument_group("settings")
    top.add_argument("--config", metavar="FILE", default=None,
                     help="settings file (TOML or JSON, one table per section; default $CRASE_SETTINGS)")
    top.add_argument("--endpoint", metavar="NAME", default=None,
                     help="use the model endpoint NAME from the settings file's [endpoints] (or 'default')")
    for section, title, group_specs in _flag_groups(sections):
        group = parser.add_argument_group(title)
        for s in group_specs:
            dest = _dest(section, s.name)
            if s.type is bool:
                group.add_argument(s.flag, dest=dest, action="store_const", const=not s.default,
                                   default=argparse.SUPPRESS, help=_flag_help(s))
                continue
            options = s.knob.options()
            metavar = "{" + ",".join(f"{o:g}" if isinstance(o, float) else str(o) for o in options) + "}" \
                if options else s.knob.metavar or {int: "N", float: "X"}.get(s.type, "TEXT")
            group.add_argument(s.flag, dest=dest, default=argparse.SUPPRESS, metavar=metavar, help=_flag_help(s))


def _flag_groups(sections: tuple[str, ...]) -> list[tuple[str, str, list[Spec]]]:
    """(section, help title, its CLI knobs) in help order; the pipeline's knobs split by stage."""
    out: list[tuple[str, str, list[Spec]]] = []
    for section in sections:
        cli = [s for s in specs(SECTIONS[section]) if s.knob.cli]
        if section != "pipeline":
            out.append((section, GROUP_TITLES.get(section, section), cli))
            continue
        by_name = {s.name: s for s in cli}
        staged = {n for names in STAGES.values() for n in names}
        out.append((section, "pipeline: preset", [s for s in cli if s.name not in staged]))
        for stage, names in STAGES.items():
            out.append((section, f"pipeline: {STAGE_TITLES[stage].lower()}",
                        [by_name[n] for n in names if n in by_name]))
    return out


def explicit_values(args: argparse.Namespace) -> Values:
    """The flags the user gave, coerced to their fields' types, by section (errors name the flag)."""
    out: Values = {}
    given = vars(args)
    for section, cls in SECTIONS.items():
        for s in specs(cls):
            dest = _dest(section, s.name)
            if dest in given:
                value = coerce(s, given[dest], s.flag)
                check_value(s, value, s.flag)
                out.setdefault(section, {})[s.name] = value
    return out


def settings_from_args(args: argparse.Namespace) -> Settings:
    """:class:`Settings` from parsed flags (see :func:`add_arguments`) over file, environment and defaults."""
    return load_settings(getattr(args, "config", None), explicit=explicit_values(args),
                         endpoint=getattr(args, "endpoint", None))


# --- the app's form --------------------------------------------------------------------------------------

def form_specs(cls: type) -> tuple[Spec, ...]:
    """The knobs of ``cls`` a visitor may set in the app's form (operator-only knobs are left out)."""
    return tuple(s for s in specs(cls) if s.knob.form)


def with_choices(settings: Settings, *, pipeline: Mapping[str, Any] | None = None, source: str | None = None,
                 backend: str | None = None, endpoint: str | None = None,
                 s2: Mapping[str, Any] | None = None, corpus_dir: str | None = None) -> Settings:
    """A visitor's form values over the operator's ``settings``.

    Only form knobs are accepted; the model endpoint is chosen by name among ``settings.endpoints``
    (never a URL), and gets only its own key. ``corpus_dir``: the local corpus folder, one the front end
    offered (``crase_core.views.corpora``: the embedded, the operator's or an imported corpus).
    """
    def allowed(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
        names = {s.name for s in form_specs(cls)}
        bad = sorted(set(values) - names)
        if bad:
            raise InputError(f"not settable here: {', '.join(bad)}")
        return dict(values)

    pipe = settings.pipeline
    if pipeline:
        values = allowed(PipelineSettings, pipeline)
        preset = values.pop("preset", pipe.preset)
        pipe = pipe.replace(**{**_preset_values(preset), **values, "preset": preset})  # keeps operator-only knobs
    runtime = settings.runtime
    llm, chosen = runtime.llm, settings.endpoint
    if endpoint is not None:
        if endpoint not in settings.endpoints:
            raise InputError(f"unknown endpoint {endpoint!r}; the operator allows: {', '.join(settings.endpoints)}")
        llm, chosen = settings.endpoints[endpoint].settings(runtime.llm), endpoint
    elif (backend or runtime.backend) == "openai" and chosen is None:
        raise InputError("choose one of the operator's model endpoints")
    s2_settings = replace(runtime.s2, **allowed(S2Settings, s2)) if s2 else runtime.s2
    new_runtime = replace(runtime, source=source or runtime.source, backend=backend or runtime.backend, llm=llm,
                          s2=s2_settings, corpus_dir=corpus_dir or runtime.corpus_dir)
    return replace(settings, pipeline=pipe, runtime=new_runtime, endpoint=chosen)
