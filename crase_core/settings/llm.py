"""Settings of an OpenAI-compatible model endpoint, and the operator's allow-list of endpoints.

Every field carries its default, range and help as :class:`~crase_core.settings.knobs.Knob`
metadata; :mod:`crase_core.settings.config` builds the CLI flags from it and loads it
from the settings file and the environment (``CRASE_BASE_URL``, ``CRASE_MODEL``,
``CRASE_PROMPTS_DIR``).

Keys: a key is bound to the endpoint it was configured for and is never sent
anywhere else. ``LLMSettings`` itself resolves only an explicitly named key
source (``api_key_env`` or the ``settings_file`` with an ``api_key`` field);
the default variables ``CRASE_API_KEY`` / ``OPENAI_API_KEY`` belong to the
operator's default endpoint and are attached by :mod:`crase_core.settings.config` only
when the request goes to that endpoint's base URL. :class:`ModelEndpoint` is
one entry of the operator's allow-list (the app offers only these names).
The key is held in a field excluded from ``repr``, from
:meth:`LLMSettings.describe` and from every component ``identity``, and
:func:`redact` scrubs it (and any ``user:password@`` in the base URL) from
any text that leaves this package.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from crase_core.errors import InputError
from crase_core.redaction import redact, redact_url
from crase_core.settings import environment
from crase_core.settings.knobs import check, knob, spec

DEFAULT_BASE_URL = "http://127.0.0.1:8080/v1"
DEFAULT_KEY_ENVS = environment.LLM_KEYS
STRUCTURED_MODES = ("schema", "json_schema", "json_object", "off")
#: ``entailment_prompt`` choices: one call per citing paper (``group``, the default) or per edge (``edge``)
ENTAILMENT_PROMPTS = ("group", "edge")
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

    base_url: str = knob(DEFAULT_BASE_URL, "OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1 "
                         "(operator only: the app offers the configured endpoints by name).",
                         env=environment.BASE_URL, metavar="URL", form=False)
    model: str | None = knob(None, "Model name at the endpoint (default: the one model the server lists).",
                             env=environment.MODEL, form=False)
    api_key_env: str | None = knob(None, "Environment variable holding the API key for this base URL (default: "
                                   "CRASE_API_KEY, then OPENAI_API_KEY, sent only to the configured endpoint).",
                                   metavar="VAR", form=False)
    settings_file: str | None = knob(None, "JSON or TOML file with an api_key field (used when the variable "
                                     "is unset).", flag="--llm-settings", metavar="FILE", form=False)
    temperature: float = knob(0.0, "Sampling temperature.", minimum=0.0, maximum=2.0, form=False)
    concurrency: int = knob(4, "Concurrent model calls.", minimum=1, maximum=256, form=False)
    timeout: float = knob(120.0, "Seconds per model call, in total (connect to last byte).", minimum=0.0, min_open=True, maximum=3600.0,
                          form=False)
    max_retries: int = knob(2, "Retries per item after a failure.", minimum=0, maximum=10, form=False)
    min_concurrency: int = knob(1, "Floor of the adaptive concurrency limit (it halves on HTTP 429/503 and "
                                "grows back to --concurrency on success).", minimum=1, maximum=256, form=False)
    overload_retries: int = knob(6, "Retries of a call the endpoint answered busy (HTTP 429, or 503 with "
                                 "Retry-After), besides --max-retries.", minimum=0, maximum=100, form=False)
    max_retry_wait: float = knob(60.0, "Longest Retry-After wait honoured, in seconds (a longer one fails the "
                                 "call).", minimum=0.0, maximum=3600.0, form=False)
    structured_output: str = knob("schema", "How JSON is requested (schema = llama.cpp-style response_format).",
                                  choices=STRUCTURED_MODES, form=False)
    entailment_prompt: str = knob("group", "How edge matrices are asked: group = one call per citing paper for "
                                  "all its cited papers chosen together (prompt entailment_group; its claims "
                                  "sent once, about half the tokens per edge), edge = one call per edge "
                                  "(prompt entailment).", choices=ENTAILMENT_PROMPTS, form=False)
    prompts_dir: str | None = knob(None, "Folder of prompt files (default: prompts/ of the project).",
                                   env=environment.PROMPTS_DIR, metavar="DIR", form=False)
    fail_fast_after: int = knob(8, "Stop the run after this many failed model calls in a row.", minimum=1,
                                maximum=1000, form=False)
    api_key: str | None = knob(None, "The key itself (never a flag, never shown).", secret=True, cli=False,
                               form=False)

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not re.match(r"^https?://[^/\s]+", self.base_url):
            raise InputError(f"base URL {redact_url(str(self.base_url))!r} is not an http(s) URL "
                             "(example: http://127.0.0.1:8080/v1)")
        self.base_url = self.base_url.rstrip("/")
        check(self)
        if self.model is not None and not str(self.model).strip():
            self.model = None
        if self.api_key is None and (self.api_key_env or self.settings_file):
            self.api_key = resolve_api_key(self.api_key_env, self.settings_file)

    @classmethod
    def from_options(cls, options: dict[str, object]) -> LLMSettings:
        """Build from a plain dict of field values (unknown keys are an error; None means the default)."""
        names = set(cls.__dataclass_fields__)
        unknown = sorted(set(options) - names)
        if unknown:
            raise InputError(f"unknown model endpoint setting(s) {', '.join(unknown)}; valid: {', '.join(sorted(names))}")
        return cls(**{k: v for k, v in options.items() if v is not None})  # type: ignore[arg-type]

    @staticmethod
    def help(name: str) -> str:
        return spec(LLMSettings, name).knob.help

    @property
    def key(self) -> str:
        return self.api_key or PLACEHOLDER_KEY

    def answer_settings(self) -> dict[str, Any]:
        """What shapes the model's answers besides the prompt: the endpoint (its base URL without
        credentials or query string), the model, the temperature and how JSON is asked. The eval pins
        exactly these (``EvalJob.fingerprint``) and every result-cache key names them
        (``cache_identity`` of the model-backed components), so the two always agree."""
        return {"endpoint": redact_url(self.base_url), "model": self.model, "temperature": self.temperature,
                "structured_output": self.structured_output}

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


@dataclass(frozen=True)
class ModelEndpoint:
    """One endpoint the operator allows: its base URL, where its key comes from, its model.

    ``key_envs``: the variables holding this endpoint's key (first set wins; empty: no key);
    ``settings_file``: a JSON/TOML file with an ``api_key`` field, used when no variable is set.
    The key is read when :meth:`settings` builds the backend settings and goes to ``base_url`` only.
    """

    name: str
    base_url: str
    key_envs: tuple[str, ...] = ()
    model: str | None = None
    settings_file: str | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", self.name):
            raise InputError(f"endpoint name {self.name!r} must be 1–64 letters, digits, '.', '_' or '-'")
        if not re.match(r"^https?://[^/\s]+", self.base_url):
            raise InputError(f"endpoint {self.name}: base_url {redact_url(self.base_url)!r} is not an http(s) URL")
        object.__setattr__(self, "base_url", self.base_url.rstrip("/"))
        for var in self.key_envs:
            if not environment.is_variable_name(var):
                raise InputError(f"endpoint {self.name}: {var!r} is not an environment variable name")

    def api_key(self) -> str | None:
        """This endpoint's key (from its variables, else its settings file), or None."""
        key = environment.first(self.key_envs)
        if key is None and self.settings_file:
            key = resolve_api_key(None, self.settings_file)
        return key

    def settings(self, policy: LLMSettings, model: str | None = None) -> LLMSettings:
        """``policy`` (temperature, concurrency, …) aimed at this endpoint, with this endpoint's key only.

        The model: ``model``, else this endpoint's, else None (the one model the server lists).
        """
        return replace(policy, base_url=self.base_url, model=model or self.model,
                       api_key_env=None, settings_file=None, api_key=self.api_key() or "")

    def describe(self) -> str:
        return f"{self.name}: {redact_url(self.base_url)}" + (f" ({self.model})" if self.model else "")


def same_endpoint(a: str, b: str) -> bool:
    """Whether two base URLs name the same endpoint (scheme, host, port and path; trailing / ignored)."""
    def norm(url: str) -> tuple[str, str, int | None, str]:
        try:
            parts = urlsplit(url.strip())
            port = parts.port
        except ValueError:
            return ("", url, None, "")
        default = {"http": 80, "https": 443}.get(parts.scheme.lower())
        return (parts.scheme.lower(), (parts.hostname or "").lower(), port or default, parts.path.rstrip("/"))
    return norm(a) == norm(b) and bool(norm(a)[1])


def resolve_api_key(api_key_env: str | None, settings_file: str | None) -> str | None:
    """The key from ``$api_key_env``, else from the settings file; None if neither is given.

    The default variables are not read here (they belong to the operator's default endpoint:
    see :mod:`crase_core.settings.config`).
    """
    if api_key_env:
        if not environment.is_variable_name(api_key_env):
            raise InputError(f"--api-key-env must name an environment variable (got {api_key_env!r})")
        value = environment.get(api_key_env)
        if value:
            return value
        if not settings_file:
            raise InputError(f"the environment variable {api_key_env} is not set (it should hold the API key)")
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


