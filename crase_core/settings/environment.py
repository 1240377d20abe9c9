"""The one module that reads environment variables (names and lookup).

Everything else asks here: settings fields name their variable in their
metadata (:func:`crase_core.settings.knobs.knob` ``env=``) and :mod:`crase_core.config`
loads them; the few library defaults that fall back to the environment when a
caller passes nothing (the cache root, the corpus folder, the prompts folder)
call :func:`get` with the constants below. Values are stripped; an empty
variable counts as unset.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

CORPUS = "CRASE_CORPUS"
CACHE_DIR = "CRASE_CACHE_DIR"
RUNS_DIR = "CRASE_RUNS_DIR"
EVAL_DIR = "CRASE_EVAL_DIR"
PROMPTS_DIR = "CRASE_PROMPTS_DIR"
BASE_URL = "CRASE_BASE_URL"
MODEL = "CRASE_MODEL"
SETTINGS_FILE = "CRASE_SETTINGS"
#: variables holding the model endpoint's key, first set wins (bound to the operator's default endpoint).
LLM_KEYS = ("CRASE_API_KEY", "OPENAI_API_KEY")
#: variables holding the Semantic Scholar key, first set wins (bound to the configured Graph API root).
S2_KEYS = ("S2_API_KEY", "SEMANTIC_SCHOLAR_API_KEY")
#: variables holding the OpenAlex API key (optional), first set wins (bound to the configured API root).
OPENALEX_KEYS = ("OPENALEX_API_KEY",)

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_variable_name(name: str) -> bool:
    return bool(_NAME.fullmatch(name))


def get(name: str) -> str | None:
    """``$name`` stripped, or None when unset or empty."""
    value = os.environ.get(name, "").strip()
    return value or None


def first(names: Iterable[str]) -> str | None:
    """The first set variable among ``names`` (stripped), else None."""
    for name in names:
        value = get(name)
        if value:
            return value
    return None
