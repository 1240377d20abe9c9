"""Wiring: turn a :class:`RuntimeConfig` (source + backend choice) into an :class:`Engine`.

Front ends (CLI, Streamlit, evaluation) build engines only through
:func:`build_engine`, so every source and backend is selectable everywhere.
New sources/backends register a factory in ``SOURCE_FACTORIES`` /
``BACKEND_FACTORIES``. Nothing here holds a secret in a way that reaches a
trace: ``RuntimeConfig.describe()`` omits keys.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from .backends import ModelBackend, offline_backend
from .cache import ResultCache
from .errors import InputError
from .pipeline import Engine
from .sources.base import PaperSource, SourceFilter
from .sources.local import LocalSource
from .termstats import TermStats


@dataclass
class RuntimeConfig:
    """Which paper source and model backend a run uses, and their options.

    ``options`` holds backend/source specific settings (for example the model
    endpoint's base URL); factories read what they need from it.
    """

    source: str = "local"
    backend: str = "offline"
    corpus_dir: str | None = None
    use_cache: bool = True
    cache_dir: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, str]:
        return {"source": self.source, "backend": self.backend, "corpus_dir": self.corpus_dir or "embedded"}


@lru_cache(maxsize=4)
def _local_source(corpus_dir: str | None) -> LocalSource:
    return LocalSource.open(corpus_dir)


def local_source(config: RuntimeConfig) -> LocalSource:
    """The local corpus source (opened once per process and corpus folder)."""
    return _local_source(config.corpus_dir or os.environ.get("CRASE_CORPUS"))


def _offline(config: RuntimeConfig, source: PaperSource) -> ModelBackend:
    # IDF from the embedded/local corpus even when papers come from elsewhere
    return offline_backend(TermStats.from_index(local_source(config).text_index))


def _s2(config: RuntimeConfig) -> PaperSource:
    from .sources.semantic_scholar import s2_source  # imported on use: settings in config.options["s2"]

    return s2_source(config)


SOURCE_FACTORIES: dict[str, Callable[[RuntimeConfig], PaperSource]] = {"local": local_source, "s2": _s2}


def _openai(config: RuntimeConfig, source: PaperSource) -> ModelBackend:
    from .llm import backend_from_config  # imported on use: the offline default never loads the client

    return backend_from_config(config, source)


BACKEND_FACTORIES: dict[str, Callable[[RuntimeConfig, PaperSource], ModelBackend]] = {
    "offline": _offline,
    "openai": _openai,
}


def build_engine(config: RuntimeConfig | None = None, source_filter: SourceFilter | None = None) -> Engine:
    """An :class:`Engine` for ``config``; ``source_filter`` hides papers (leakage-free evaluation)."""
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
    return Engine(source=source, backend=backend, cache=cache)
