"""Language-model backend for any OpenAI-compatible endpoint (vLLM, llama.cpp server, Ollama, hosted).

Public entry points: :func:`openai_backend` (registered as backend ``"openai"``
by :mod:`crase_core.runtime`), :class:`LLMSettings` and :class:`ModelEndpoint`
(the operator's allowed endpoints). The CLI flags are generated from the
settings' field metadata by :mod:`crase_core.settings.config`. The settings load
without the HTTP client; the backend and its components load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from crase_core.settings.llm import LLMSettings, ModelEndpoint

if TYPE_CHECKING:  # the types of the lazily loaded names
    from crase_core.llm.backend import openai_backend
    from crase_core.llm.components import (
        LLMClaimExtractor,
        LLMEntailmentScorer,
        LLMGroupEntailmentScorer,
        LLMPlanner,
    )

_LAZY = {
    "openai_backend": ".backend",
    "LLMClaimExtractor": ".components",
    "LLMEntailmentScorer": ".components",
    "LLMGroupEntailmentScorer": ".components",
    "LLMPlanner": ".components",
}

__all__ = ["LLMClaimExtractor", "LLMEntailmentScorer", "LLMGroupEntailmentScorer", "LLMPlanner", "LLMSettings", "ModelEndpoint",
           "openai_backend"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
