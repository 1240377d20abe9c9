"""Wiring: turn a :class:`RuntimeConfig` (source + backend choice and their settings) into an :class:`Engine`.

Front ends (CLI, Streamlit, evaluation) build engines only through
:func:`build_engine`, so every source and backend is selectable everywhere.
New sources/backends register a factory in ``SOURCE_FACTORIES`` /
``BACKEND_FACTORIES`` (the ``source``/``backend`` choices of the settings read
these registries). :mod:`crase_core.config` fills a ``RuntimeConfig`` from
defaults, the settings file, the environment and the command line; keys ride
only in fields excluded from ``repr`` and :meth:`RuntimeConfig.describe`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import cast

from crase_core.backends import ModelBackend, offline_backend
from crase_core.cache import ResultCache
from crase_core.errors import InputError
from crase_core.llm.config import LLMSettings
from crase_core.paper_source import PaperSource, SourceFilter
from crase_core.pipeline import Engine
from crase_core.settings import environment
from crase_core.settings.knobs import check, knob
from crase_core.sources.local import LocalSource
from crase_core.sources.openalex import OpenAlexSettings, openalex_source
from crase_core.sources.s2_http import S2Settings
from crase_core.sources.semantic_scholar import s2_source
from crase_core.store import corpus_store
from crase_core.store.termstats import TermStats


@dataclass
class RuntimeConfig:
    """Which paper source and model backend a run uses, with their typed settings.

    ``llm`` configures the ``openai`` backend, ``s2`` the ``s2`` source, ``openalex`` the ``openalex`` source;
    ``s2_api_key`` is the Semantic Scholar key for ``s2.base_url`` and ``openalex_api_key`` the OpenAlex key
    for ``openalex.base_url`` (set by :mod:`crase_core.config` only when that URL is the operator's
    configured one).
    """

    source: str = knob("local", "Paper source.", label="Paper source", choices=lambda: tuple(SOURCE_FACTORIES))
    backend: str = knob("offline", "Model backend (plans sub-queries, extracts claims, scores entailment).",
                        label="Model backend", choices=lambda: tuple(BACKEND_FACTORIES))
    corpus_dir: str | None = knob(None, "Local corpus folder (papers.jsonl + citations.tsv); default: the "
                                  "embedded hep-th corpus.", flag="--corpus", env=environment.CORPUS, metavar="DIR",
                                  form=False)
    use_cache: bool = knob(True, "Read and write the result cache (--no-cache: do not).", flag="--no-cache",
                           form=False)
    cache_dir: str | None = knob(None, "Cache folder (results, corpus index, Semantic Scholar responses); "
                                 "default: the per-user cache dir.", env=environment.CACHE_DIR, metavar="DIR",
                                 form=False)
    deadline_s: float | None = knob(None, "Overall deadline of one run in seconds: past it the run stops at the "
                                    "next stage, batch or external call (each call's own deadline is capped by "
                                    "what is left); None: no deadline.", flag="--deadline", metavar="SECONDS",
                                    minimum=0.0, min_open=True, maximum=604800.0, form=False)
    llm: LLMSettings = field(default_factory=LLMSettings)
    s2: S2Settings = field(default_factory=S2Settings)
    s2_api_key: str | None = field(default=None, repr=False, compare=False)
    openalex: OpenAlexSettings = field(default_factory=OpenAlexSettings)
    openalex_api_key: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        check(self)

    def describe(self) -> dict[str, str]:
        return {"source": self.source, "backend": self.backend, "corpus_dir": self.corpus_dir or "embedded"}


@lru_cache(maxsize=4)
def _local_source(corpus_dir: str | None) -> LocalSource:
    return LocalSource.open(corpus_dir)


def local_source(config: RuntimeConfig) -> LocalSource:
    """The local corpus source (opened once per process and corpus folder)."""
    return _local_source(config.corpus_dir)


def _offline(config: RuntimeConfig, source: PaperSource) -> ModelBackend:
    # IDF from the embedded/local corpus even when papers come from elsewhere
    return offline_backend(TermStats.from_index(local_source(config).text_index))


def _s2(config: RuntimeConfig) -> PaperSource:
    # cast: PaperSource declares external_calls as a plain attribute, the S2 source has a read-only property
    return cast(PaperSource, s2_source(config.s2, cache_dir=config.cache_dir, api_key=config.s2_api_key))


def _openalex(config: RuntimeConfig) -> PaperSource:
    return cast(PaperSource, openalex_source(config.openalex, cache_dir=config.cache_dir,
                                             api_key=config.openalex_api_key))


SOURCE_FACTORIES: dict[str, Callable[[RuntimeConfig], PaperSource]] = {"local": local_source, "s2": _s2,
                                                                       "openalex": _openalex}


def _openai(config: RuntimeConfig, source: PaperSource) -> ModelBackend:
    from crase_core.llm.backend import (
        openai_backend,  # imported on use: the offline default never loads the client
    )

    return openai_backend(config.llm, fallback=_offline(config, source))  # the cascade's offline decisions


BACKEND_FACTORIES: dict[str, Callable[[RuntimeConfig, PaperSource], ModelBackend]] = {
    "offline": _offline,
    "openai": _openai,
}


BuildStep = corpus_store.BuildStep  # what ``build_progress`` receives: stage, fraction (0–1), message


def build_engine(config: RuntimeConfig | None = None, source_filter: SourceFilter | None = None, *,
                 build_progress: Callable[[BuildStep], None] | None = None) -> Engine:
    """An :class:`Engine` for ``config``; ``source_filter`` hides papers (leakage-free evaluation).

    When the local corpus's store must be built first (first use of a corpus folder, or a damaged store),
    ``build_progress`` receives :class:`BuildStep` reports while it is built (in this thread; a stage name,
    the fraction of the build done and a line for people), for a progress bar; an opened store reports
    nothing."""
    with corpus_store.reporting(build_progress):
        return _build_engine(config, source_filter)


def _build_engine(config: RuntimeConfig | None, source_filter: SourceFilter | None) -> Engine:
    config = config or RuntimeConfig()
    try:
        make_source = SOURCE_FACTORIES[config.source]
    except KeyError:
        raise InputError(f"unknown source {config.source!r}; choose one of {', '.join(sorted(SOURCE_FACTORIES))}") from None
    try:
        make_backend = BACKEND_FACTORIES[config.backend]
    except KeyError:
        raise InputError(
            f"unknown backend {config.backend!r}; choose one of {', '.join(sorted(BACKEND_FACTORIES))}"
        ) from None
    source = make_source(config)
    if source_filter is not None and source_filter.active:
        source = source.restricted(source_filter)
    backend = make_backend(config, source)
    cache = ResultCache(os.path.join(config.cache_dir, "results") if config.cache_dir else None) if config.use_cache else None
    return Engine(source=source, backend=backend, cache=cache, deadline_s=config.deadline_s)
