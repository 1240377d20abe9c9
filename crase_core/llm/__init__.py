"""Language-model backend for any OpenAI-compatible endpoint (vLLM, llama.cpp server, Ollama, hosted).

Public entry points: :func:`openai_backend` / :func:`backend_from_config`
(registered as backend ``"openai"``), :class:`LLMSettings`, and the CLI helpers
:func:`add_cli_arguments` / :func:`options_from_args`.
"""

from .backend import backend_from_config, openai_backend
from .components import LLMClaimExtractor, LLMEntailmentScorer, LLMPlanner
from .config import LLMSettings, add_cli_arguments, options_from_args

__all__ = [
    "LLMClaimExtractor",
    "LLMEntailmentScorer",
    "LLMPlanner",
    "LLMSettings",
    "add_cli_arguments",
    "backend_from_config",
    "openai_backend",
    "options_from_args",
]
