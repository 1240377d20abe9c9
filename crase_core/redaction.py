"""Secrets out of text: URL credentials, bearer tokens, API keys; and a logging filter that applies it.

:func:`redact` scrubs one known key and base URL (what a component knows it
holds); :func:`mask_secrets` needs no knowledge and masks what looks like a
secret anywhere: ``scheme://user:password@`` userinfo, ``Bearer …`` tokens,
``sk-…`` keys, ``x-api-key``/``api_key``/``token``/``password`` values in
headers, query strings and ``key=value`` text. :class:`SecretFilter` applies
:func:`mask_secrets` to every log record (message, arguments, traceback);
:func:`install_log_filter` puts it on the root handlers (the CLI does so, and
an app can too).
"""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit, urlunsplit

MASK = "***"

_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s'\"<>]*@")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{4,}")
_SK_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{8,}")
_NAMED = re.compile(
    r"(?i)\b((?:x-)?api[-_]?key|access[-_]?token|auth[-_]?token|token|secret|password|passwd|authorization)"
    r"(['\"]?\s*[:=]\s*['\"]?)(?!\*\*\*|(?i:bearer)\b)([^\s'\",&;)}\]]+)"
)


def redact_url(url: str) -> str:
    """``url`` without ``user:password@`` and without a query string (keys sometimes ride there)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
    except ValueError:
        return "<unparseable URL>"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def mask_secrets(text: str) -> str:
    """``text`` with URL userinfo, bearer tokens, ``sk-`` keys and named key/token/password values masked."""
    text = _USERINFO.sub(lambda m: m.group(1) + MASK + "@", text)
    text = _BEARER.sub(lambda m: m.group(1) + MASK, text)
    text = _SK_KEY.sub("sk-" + MASK, text)
    text = _NAMED.sub(lambda m: m.group(1) + m.group(2) + MASK, text)
    return text


def redact(text: str, api_key: str | None, base_url: str | None = None) -> str:
    """``text`` with the API key, bearer tokens and URL credentials replaced by ``***``."""
    if api_key and len(api_key) >= 4:
        text = text.replace(api_key, MASK)
    if base_url:
        clean = redact_url(base_url)
        if clean != base_url:
            text = text.replace(base_url, clean)
    text = re.sub(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}", r"\1***", text)
    text = re.sub(r"\bsk-[A-Za-z0-9_-]{8,}", "sk-***", text)
    return text


class SecretFilter(logging.Filter):
    """Masks secrets (:func:`mask_secrets`) in a record's formatted message and traceback; drops nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: keep the raw text, masked
            message = f"{record.msg} {record.args}"
        record.msg = mask_secrets(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask_secrets(record.exc_text)
        if record.stack_info:
            record.stack_info = mask_secrets(record.stack_info)
        return True


def install_log_filter(logger: logging.Logger | None = None) -> SecretFilter:
    """Add one :class:`SecretFilter` to every handler of ``logger`` (default: root); idempotent."""
    logger = logger or logging.getLogger()
    secret_filter = SecretFilter()
    for handler in logger.handlers:
        if not any(isinstance(f, SecretFilter) for f in handler.filters):
            handler.addFilter(secret_filter)
    return secret_filter
