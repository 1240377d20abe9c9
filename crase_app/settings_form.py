"""The Search page's run-settings form, generated from the settings' field metadata.

Every widget comes from a :class:`crase_core.settings.knobs.Knob` marked for the form
(label, help, range, step, choices from the registries); a knob that does not
apply to the chosen ranker or restart mode is shown disabled. Sources and
backends come from the runtime registries; the model endpoint is chosen by
name among the operator's allowed endpoints (never typed in), so a visitor
cannot make the server call, or send a key to, an address of their choosing.
"""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from crase_core.settings.config import Settings, form_specs, load_settings, with_choices
from crase_core.settings.knobs import Spec, spec
from crase_core.settings.pipeline import (
    ADVANCED,
    PRESET_PURPOSE,
    PRESETS,
    STAGE_TITLES,
    STAGES,
    PipelineSettings,
)
from crase_core.settings.runtime import RuntimeConfig
from crase_core.settings.s2 import S2Settings

SOURCE_LABELS = {"local": "Local corpus (offline)", "s2": "Semantic Scholar Graph API",
                 "openalex": "OpenAlex API"}
BACKEND_LABELS = {"offline": "Offline (word overlap, no model download)", "openai": "OpenAI-compatible endpoint"}
COLUMNS = 4
#: the tabs' short names (all six fit one row at 1440 px; the stage titles caption the rarely changed knobs)
TAB_TITLES = {"search": "Search · seeds", "expansion": "Neighbourhood", "evidence": "Evidence · pruning",
              "ranking": "Ranking · fusion", "budget": "Model budget"}


def operator_settings() -> Settings:
    """The operator's settings (defaults < settings file < environment); read on every rerun."""
    return load_settings()


def _to_widget(s: Spec, value: Any) -> Any:
    return s.knob.none_as if value is None and s.knob.none_as is not None else value


def _from_widget(s: Spec, value: Any) -> Any:
    if s.knob.none_as is not None and value == s.knob.none_as:
        return None
    if s.type is int:
        return int(value)
    if s.type is float:
        return float(value)
    return value


def _widget(container: Any, s: Spec, value: Any, key: str, disabled: bool, help_extra: str = "") -> Any:
    """One input for knob ``s``; ``value`` is its first value (afterwards the widget's state is kept)."""
    if key not in st.session_state:
        st.session_state[key] = value
    value = st.session_state[key]
    k = s.knob
    label, help_text = s.label, k.help + help_extra
    options = k.options()
    if options:
        fmt = (lambda x: f"{x:g}") if s.type is float else (str.upper if s.name == "ranker" else str)
        return container.selectbox(label, options, key=key, help=help_text, disabled=disabled, format_func=fmt)
    if s.type is bool:
        return container.checkbox(label, key=key, help=help_text, disabled=disabled)
    if s.type is float:
        step = k.step or 0.01
        lo = (k.minimum or 0.0) + (step if k.min_open else 0.0)
        hi = k.form_max if k.form_max is not None else k.maximum if k.maximum is not None else lo + 100 * step
        hi = hi - step if k.max_open and k.form_max is None else hi
        hi = max(hi, float(value))
        return container.slider(label, float(lo), float(hi), step=float(step), key=key, help=help_text,
                                disabled=disabled)
    low = k.none_as if k.none_as is not None else k.minimum
    high = k.form_max if k.form_max is not None else k.maximum
    high = max(int(high), int(value)) if high is not None else None
    return container.number_input(label, int(low) if low is not None else None, high, step=int(k.step or 1),
                                  key=key, help=help_text, disabled=disabled)


def _pipeline_key(prefix: str, name: str) -> str:
    return f"{prefix}_{name}"


def _apply_preset(prefix: str) -> None:
    """On a preset change, show that preset's values in every pipeline widget."""
    preset = st.session_state[_pipeline_key(prefix, "preset")]
    values = PipelineSettings.from_preset(preset)
    for s in form_specs(PipelineSettings):
        if s.name != "preset":
            st.session_state[_pipeline_key(prefix, s.name)] = _to_widget(s, getattr(values, s.name))


def pipeline_form(base: PipelineSettings, prefix: str = "set") -> dict[str, Any]:
    """A widget per form knob of :class:`PipelineSettings`, starting from ``base``; returns the values."""
    knobs = form_specs(PipelineSettings)
    preset_spec = spec(PipelineSettings, "preset")
    preset_key = _pipeline_key(prefix, "preset")
    if preset_key not in st.session_state:
        st.session_state[preset_key] = base.preset
    preset = st.selectbox(preset_spec.label, list(PRESETS), key=preset_key, help=preset_spec.knob.help,
                          on_change=_apply_preset, args=(prefix,),
                          format_func=lambda p: "paper (the paper's setting, for a model endpoint)" if p == "paper"
                          else p)
    if preset == "paper":
        purpose = PRESET_PURPOSE["paper"]
        st.warning(purpose[:1].upper() + purpose[1:] + " (Benchmark page).", icon=":material/warning:")
    # the values the widgets hold now (a rerun after a change carries them in session state)
    current = {s.name: _from_widget(s, st.session_state.get(_pipeline_key(prefix, s.name),
                                                           _to_widget(s, getattr(base, s.name))))
               for s in knobs if s.name != "preset"}
    probe = base.replace(**{n: v for n, v in current.items() if n in ("ranker", "personalization")})
    refused = probe.inapplicable()
    values: dict[str, Any] = {"preset": preset}
    by_name = {s.name: s for s in knobs}
    # one tab per stage with its usual knobs; the rarely changed ones of every stage fold into the last tab
    # (tabs draw all their widgets, so a value set in a hidden tab is kept)
    groups = [(TAB_TITLES.get(stage, STAGE_TITLES[stage]),
               [("", [by_name[n] for n in names if n in by_name and n not in ADVANCED])]) for stage, names in STAGES.items()]
    groups.append(("Advanced", [(STAGE_TITLES[stage], [by_name[n] for n in names if n in by_name and n in ADVANCED])
                                      for stage, names in STAGES.items()]))
    for tab, (_, blocks) in zip(st.tabs([title for title, _ in groups]), groups, strict=True):
        with tab:
            for caption, block in blocks:
                if caption and block:
                    st.caption(caption)
                for i, s in enumerate(block):
                    if i % COLUMNS == 0:
                        cols = st.columns(COLUMNS)
                    why = refused.get(s.name)
                    raw = _widget(cols[i % COLUMNS], s, _to_widget(s, getattr(base, s.name)),
                                  _pipeline_key(prefix, s.name), disabled=why is not None,
                                  help_extra=f" (Disabled: {why}.)" if why else "")
                    values[s.name] = _from_widget(s, raw)
    return values


def settings_form(operator: Settings, prefix: str = "set") -> PipelineSettings:
    """The run's pipeline settings from the form (the operator's values as the starting point)."""
    return with_choices(operator, pipeline=pipeline_form(operator.pipeline, prefix)).pipeline


def runtime_form(operator: Settings, prefix: str = "rt", corpus: Any = None) -> dict[str, Any]:
    """Source, backend, the allowed endpoint (by name) and the source's form knobs, as JSON-able choices.

    Pass the result to :func:`crase_core.settings.config.with_choices` (``**choices``) or, as JSON, to
    ``crase_app.shared.get_engine``. ``corpus``: the :class:`~crase_core.views.corpora.CorpusChoice` the local
    source opens (named in its label; its folder goes into the choices).
    """
    labels = dict(SOURCE_LABELS)
    if corpus is not None:
        labels["local"] = f"Local corpus: {corpus.name} (offline)"
    sources = spec(RuntimeConfig, "source").knob.options()
    backends = spec(RuntimeConfig, "backend").knob.options()
    rt = operator.runtime
    c1, c2, c3 = st.columns(3)
    source = c1.selectbox("Paper source", sources, index=sources.index(rt.source) if rt.source in sources else 0,
                          format_func=lambda s: labels.get(s, s), key=f"{prefix}_source",
                          help="Where seeds, references and citers come from. Registered sources: "
                          + ", ".join(sources))
    backend = c2.selectbox("Model backend", backends,
                           index=backends.index(rt.backend) if rt.backend in backends else 0,
                           format_func=lambda b: BACKEND_LABELS.get(b, b), key=f"{prefix}_backend",
                           help="What plans sub-queries, extracts claims and scores entailment. Registered: "
                           + ", ".join(backends))
    choices: dict[str, Any] = {"source": source, "backend": backend}
    if source == "local" and corpus is not None:
        choices["corpus_dir"] = corpus.corpus_dir
    if backend == "openai":
        names = list(operator.endpoints)
        start = names.index(operator.endpoint) if operator.endpoint in names else 0
        endpoints = operator.endpoints
        choices["endpoint"] = c3.selectbox(
            "Model endpoint", names, index=start, key=f"{prefix}_endpoint",
            format_func=lambda n: n + (f" ({endpoints[n].model})" if endpoints[n].model else ""),
            help="The endpoints this server's operator allows (settings file [endpoints]); the API key of an "
                 "endpoint is sent to that endpoint only.")
    if source == "s2":
        s2: dict[str, Any] = {}
        for s in form_specs(S2Settings):
            raw = _widget(st, s, _to_widget(s, getattr(rt.s2, s.name)), f"{prefix}_s2_{s.name}", disabled=False)
            s2[s.name] = _from_widget(s, raw)
        choices["s2"] = s2
    return choices


def choices_json(choices: dict[str, Any]) -> str:
    return json.dumps(choices, sort_keys=True)
