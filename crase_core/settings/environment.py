"""The one module that reads environment variables (names and lookup).

Everything else asks here: settings fields name their variable in their
metadata (:func:`crase_core.settings.knobs.knob` ``env=``) and :mod:`crase_core.settings.config`
loads them; the few library defaults that fall back to the environment when a
caller passes nothing (the cache root, the corpus folder, the prompts folder)
resolve through the folder functions at the end of this module. Values are stripped; an empty
variable counts as unset.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

import platformdirs

CORPUS = "CRASE_CORPUS"
CACHE_DIR = "CRASE_CACHE_DIR"
RUNS_DIR = "CRASE_RUNS_DIR"
EVAL_DIR = "CRASE_EVAL_DIR"
PROMPTS_DIR = "CRASE_PROMPTS_DIR"
BASE_URL = "CRASE_BASE_URL"
MODEL = "CRASE_MODEL"
SETTINGS_FILE = "CRASE_SETTINGS"
#: another all-MiniLM-L6-v2 ONNX file for the on-device model, and its SHA-256 (crase_core.encoder)
MINILM_ONNX = "CRASE_MINILM_ONNX"
MINILM_ONNX_SHA256 = "CRASE_MINILM_ONNX_SHA256"
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


# --- the library's folder defaults: an explicit value, else the variable, else the built-in default -------

def corpus_folder(given: str | os.PathLike[str] | None, default: Path) -> Path:
    """The corpus folder: ``given``, else ``$CRASE_CORPUS``, else ``default`` (the embedded corpus)."""
    return Path(given or get(CORPUS) or default)


def cache_folder() -> Path:
    """The cache root: ``$CRASE_CACHE_DIR``, else the per-user cache dir (``~/.cache/crase``)."""
    return Path(get(CACHE_DIR) or platformdirs.user_cache_dir("crase"))


def runs_folder(cache_root: Path) -> Path:
    """Saved runs: ``$CRASE_RUNS_DIR``, else ``<cache root>/runs``."""
    root = get(RUNS_DIR)
    return Path(root) if root else cache_root / "runs"


def prompts_folder(shipped: Path) -> Path:
    """Prompt files: ``$CRASE_PROMPTS_DIR``, else the shipped ones."""
    env = get(PROMPTS_DIR)
    return Path(env) if env else shipped


def minilm_onnx_override() -> tuple[Path | None, str | None]:
    """Another all-MiniLM-L6-v2 ONNX file for the on-device model (``$CRASE_MINILM_ONNX``) and the SHA-256 the
    user vouches for (``$CRASE_MINILM_ONNX_SHA256``, lower-cased); (None, None) when unset."""
    path = get(MINILM_ONNX)
    sha = get(MINILM_ONNX_SHA256)
    return (Path(path) if path else None), (sha.lower() if sha else None)
