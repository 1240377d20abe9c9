"""Settings of an OpenAI-compatible model endpoint, and the CLI flags that fill them.

The API key is resolved from the environment (``--api-key-env``, default
``CRASE_API_KEY`` then ``OPENAI_API_KEY``) or from a settings file (JSON or
TOML with an ``api_key`` field). It is held in a field excluded from ``repr``,
from :meth:`LLMSettings.describe` and from every component ``identity``, and
:func:`redact` scrubs it (and any ``user:password@`` in the base URL) from
any text that leaves this package.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..redaction import redact, redact_url

DEFAULT_KEY_ENVS = ("CRASE_API_KEY", "OPENAI_API_KEY")
STRUCTURED_MODES = ("schema", "json_schema", "json_object", "off")
# local servers accept any key; the openai client insists on a non-empty one
PLACEHOLDER_KEY = "no-key"


@dataclass
class LLMSettings:
    """Endpoint, model and request policy of the ``openai`` backend (no secret in ``repr``).

    ``structured_output``: ``schema`` sends ``response_format={"type": "json_object",
    "schema": ...}`` (llama.cpp server, some vLLM builds); ``json_schema`` sends the
    OpenAI ``{"type": "json_schema", ...}`` form; ``json_object`` asks for any JSON;
    ``off`` relies on the prompt's JSON instructions alone. A server that rejects the
    chosen form with HTTP 400 is retried once with ``off`` (noted on the result).
    """

    base_url: str = "http://127.0.0.1:8080/v1"
    model: str | None = None
    api_key_env: str | None = None
    settings_file: str | None = None
    temperature: float = 0.0
    concurrency: int = 4
    timeout: float = 120.0
    max_retries: int = 2
    structured_output: str = "schema"
    prompts_dir: str | None = None
    fail_fast_after: int = 8
    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not re.match(r"^https?://[^/\s]+", self.base_url):
            raise InputError(f"base URL {redact_url(str(self.base_url))!r} is not an http(s) URL "
                             "(example: http://127.0.0.1:8080/v1)")
        self.base_url = self.base_url.rstrip("/")
        checks = [
            (0.0 <= float(self.temperature) <= 2.0, f"temperature must be in [0, 2] (got {self.temperature})"),
            (1 <= int(self.concurrency) <= 256, f"concurrency must be between 1 and 256 (got {self.concurrency})"),
            (0 < float(self.timeout) <= 3600, f"timeout must be in (0, 3600] seconds (got {self.timeout})"),
            (0 <= int(self.max_retries) <= 10, f"max_retries must be between 0 and 10 (got {self.max_retries})"),
            (self.structured_output in STRUCTURED_MODES,
             f"structured_output must be one of {', '.join(STRUCTURED_MODES)} (got {self.structured_output!r})"),
            (int(self.fail_fast_after) >= 1, f"fail_fast_after must be ≥ 1 (got {self.fail_fast_after})"),
        ]
        for ok, message in checks:
            if not ok:
                raise InputError(message)
        if self.model is not None and not str(self.model).strip():
            self.model = None
        if self.api_key is None:
            self.api_key = resolve_api_key(self.api_key_env, self.settings_file)

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> LLMSettings:
        """Build from ``RuntimeConfig.options`` (unknown keys are ignored: other parts read them)."""
        names = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in options.items() if k in names and v is not None}
        return cls(**values)

    @property
    def key(self) -> str:
        return self.api_key or PLACEHOLDER_KEY

    def describe(self) -> dict[str, str]:
        """Secret-free description (base URL without credentials, model, policy)."""
        return {
            "base_url": redact_url(self.base_url),
            "model": self.model or "?",
            "temperature": f"{self.temperature:g}",
            "concurrency": str(self.concurrency),
            "timeout_s": f"{self.timeout:g}",
            "max_retries": str(self.max_retries),
            "structured_output": self.structured_output,
            "api_key": "set" if self.api_key else "none",
        }

    def redact(self, text: str) -> str:
        return redact(text, self.api_key, self.base_url)


def resolve_api_key(api_key_env: str | None, settings_file: str | None) -> str | None:
    """The key from ``$api_key_env`` (or the default variables), else from the settings file; None if absent."""
    if api_key_env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", api_key_env):
            raise InputError(f"--api-key-env must name an environment variable (got {api_key_env!r})")
        value = os.environ.get(api_key_env)
        if value:
            return value.strip()
        if not settings_file:
            raise InputError(f"the environment variable {api_key_env} is not set (it should hold the API key)")
    else:
        for name in DEFAULT_KEY_ENVS:
            if os.environ.get(name):
                return os.environ[name].strip()
    if settings_file:
        path = Path(settings_file).expanduser()
        try:
            raw = path.read_text(encoding="utf-8")
        except OSError as e:
            raise InputError(f"cannot read the settings file {path}: {e.strerror}") from None
        try:
            data = tomllib.loads(raw) if path.suffix.lower() == ".toml" else json.loads(raw)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError):
            # never quote the file: it holds a secret
            raise InputError(f"the settings file {path} is not valid {'TOML' if path.suffix.lower() == '.toml' else 'JSON'}") from None
        key = data.get("api_key") if isinstance(data, dict) else None
        if not isinstance(key, str) or not key.strip():
            raise InputError(f"the settings file {path} has no 'api_key' string")
        return key.strip()
    return None


# --- CLI -----------------------------------------------------------------------------------------


def add_cli_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the endpoint flags of the ``openai`` backend (``--backend`` itself belongs to the CLI)."""
    g = parser.add_argument_group("model endpoint (--backend openai)")
    g.add_argument("--base-url", default=None,
                   help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1 (default: $CRASE_BASE_URL or that)")
    g.add_argument("--model", default=None,
                   help="model name at the endpoint (default: $CRASE_MODEL, else the one model the server lists)")
    g.add_argument("--api-key-env", default=None, metavar="VAR",
                   help="environment variable holding the API key (default: CRASE_API_KEY, then OPENAI_API_KEY)")
    g.add_argument("--llm-settings", default=None, metavar="FILE",
                   help="JSON or TOML file with an api_key field (used when the variable is unset)")
    g.add_argument("--temperature", type=float, default=None, help="sampling temperature (default 0)")
    g.add_argument("--concurrency", type=int, default=None, help="concurrent model calls (default 4)")
    g.add_argument("--timeout", type=float, default=None, help="seconds per model call (default 120)")
    g.add_argument("--max-retries", type=int, default=None, help="retries per item after a failure (default 2)")
    g.add_argument("--structured-output", choices=STRUCTURED_MODES, default=None,
                   help="how JSON is requested (default: schema = llama.cpp-style response_format)")


def options_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """``RuntimeConfig.options`` from parsed flags (never contains the key itself)."""
    env = os.environ
    options: dict[str, Any] = {
        "base_url": getattr(args, "base_url", None) or env.get("CRASE_BASE_URL"),
        "model": getattr(args, "model", None) or env.get("CRASE_MODEL"),
        "api_key_env": getattr(args, "api_key_env", None),
        "settings_file": getattr(args, "llm_settings", None),
        "temperature": getattr(args, "temperature", None),
        "concurrency": getattr(args, "concurrency", None),
        "timeout": getattr(args, "timeout", None),
        "max_retries": getattr(args, "max_retries", None),
        "structured_output": getattr(args, "structured_output", None),
    }
    return {k: v for k, v in options.items() if v is not None}
