"""Wiring: turn a :class:`RuntimeConfig` (source + backend choice and their settings) into an :class:`Engine`.

Front ends (CLI, Streamlit, evaluation) build engines only through
:func:`build_engine`, so every source and backend is selectable everywhere.
New sources/backends register a factory in ``SOURCE_FACTORIES`` /
``BACKEND_FACTORIES`` (the ``source``/``backend`` choices of the settings read
these registries). :mod:`crase_core.settings.config` fills a ``RuntimeConfig`` from
defaults, the settings file, the environment and the command line; keys ride
only in fields excluded from ``repr`` and :meth:`RuntimeConfig.describe`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import cast

from crase_core.backends import ModelBackend, offline_backend
from crase_core.cache import ResultCache
from crase_core.errors import InputError
from crase_core.paper_source import PaperSource, SourceFilter
from crase_core.pipeline import Engine
from crase_core.settings.runtime import BACKEND_NAMES, SOURCE_NAMES, RuntimeConfig
from crase_core.sources.local import LocalSource
from crase_core.store import corpus_store
from crase_core.store.termstats import TermStats


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
    from crase_core.sources.semantic_scholar import s2_source  # httpx: imported when a remote source is used

    return cast(PaperSource, s2_source(config.s2, cache_dir=config.cache_dir, api_key=config.s2_api_key))


def _openalex(config: RuntimeConfig) -> PaperSource:
    from crase_core.sources.openalex import openalex_source

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
assert list(SOURCE_FACTORIES) == SOURCE_NAMES and list(BACKEND_FACTORIES) == BACKEND_NAMES, \
    "every source and backend the settings name has a factory here"


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
    if config.recall_calibration:  # a file the user named must be usable: say so before anything runs
        from crase_core.recall.calibration import load_cached

        got = load_cached(Path(config.recall_calibration))
        if isinstance(got, InputError):
            raise got
    source = make_source(config)
    if source_filter is not None and source_filter.active:
        source = source.restricted(source_filter)
    backend = make_backend(config, source)
    cache = ResultCache(os.path.join(config.cache_dir, "results") if config.cache_dir else None) if config.use_cache else None
    return Engine(source=source, backend=backend, cache=cache, deadline_s=config.deadline_s,
                  recall_calibration=config.recall_calibration)
