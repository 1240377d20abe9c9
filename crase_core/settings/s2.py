"""The Semantic Scholar source's settings (the ``s2`` section) and where its key comes from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from crase_core.errors import InputError
from crase_core.settings import environment
from crase_core.settings.knobs import check, from_options, knob, spec

DEFAULT_BASE_URL = "https://api.semanticscholar.org/graph/v1"


API_KEY_ENV = environment.S2_KEYS


@dataclass(frozen=True)
class S2Settings:
    """Knobs of the Semantic Scholar source (the ``s2`` section of :class:`crase_core.config.Settings`).

    The API key is not a setting: :mod:`crase_core.config` reads it from
    ``$S2_API_KEY`` (or ``$SEMANTIC_SCHOLAR_API_KEY``) and hands it only to a
    client whose base URL is the operator's configured one, so no settings
    object, trace or export can carry it. ``base_url`` is an operator knob
    (settings file or ``--s2-base-url``), never offered in the app's form.
    """

    base_url: str = knob(DEFAULT_BASE_URL, "Graph API root, e.g. a proxy or a local replay server.",
                         flag="--s2-base-url", metavar="URL", form=False)
    rate: float = knob(1.0, "Client-side rate limit in requests per second (0: no limit). "
                            "1/s is the documented limit for a key; keyless use is shared and may see 429s.",
                       flag="--s2-rate", label="Requests per second", minimum=0.0, maximum=1000.0, step=0.1,
                       form_max=10.0)
    timeout: float = knob(30.0, "Seconds to wait for one HTTP answer before it counts as a timeout (retried).",
                          flag="--s2-timeout", minimum=0.0, min_open=True, maximum=3600.0, form=False)
    max_retries: int = knob(5, "Retries of one request after 429, 5xx, timeout or connection failure.",
                            flag="--s2-max-retries", minimum=0, maximum=20, form=False)
    backoff_base: float = knob(1.0, "First retry waits about this many seconds; each later one twice as long "
                                    "(with ±50 % jitter), at least what Retry-After asks for.",
                               flag="--s2-backoff-base", minimum=0.0, maximum=3600.0, form=False)
    backoff_max: float = knob(60.0, "Upper bound of one backoff wait in seconds (Retry-After excepted).",
                              flag="--s2-backoff-max", minimum=0.0, maximum=86400.0, form=False)
    max_retry_after: float = knob(300.0, "A Retry-After longer than this many seconds stops the run "
                                         "instead of waiting.", flag="--s2-max-retry-after", minimum=0.0,
                                  maximum=86400.0, form=False)
    use_cache: bool = knob(True, "Cache every response on disk so a re-run makes no new calls "
                                 "(--s2-no-cache: do not read or write the Semantic Scholar response cache).",
                           flag="--s2-no-cache", form=False)
    cache_dir: str | None = knob(None, "Response cache folder; None: <crase cache>/s2 ($CRASE_CACHE_DIR).",
                                 flag="--s2-cache-dir", metavar="DIR", form=False)
    cache_ttl_days: float = knob(30.0, "Cached responses expire after this many days.", flag="--s2-cache-days",
                                 minimum=0.0, min_open=True, maximum=36500.0, form=False)
    page_size: int = knob(500, "References/citations per page request (API maximum 1000; halved "
                               "automatically when the API says a page would exceed its 10 MB limit).",
                          flag="--s2-page-size", minimum=1, maximum=1000, form=False)
    max_neighbor_pages: int = knob(4, "Pages fetched per paper and relation; a longer list is cut there "
                                      "(the API's own order) and recorded as truncated in the trace.",
                                   flag="--s2-max-pages", minimum=1, maximum=1000, form=False)
    batch_size: int = knob(500, "Ids per POST /paper/batch call (API maximum 500).", flag="--s2-batch-size",
                           minimum=1, maximum=500, form=False)
    on_neighbor_error: str = knob("stop", "When references/citations of one paper cannot be fetched after "
                                          "retries: 'stop' the run, or 'skip' that list (recorded as "
                                          "truncated to 0) and continue. Key errors always stop.",
                                  flag="--s2-on-error", choices=("stop", "skip"), form=False)

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not self.base_url.startswith(("http://", "https://")):
            raise InputError(f"s2 base_url must be an http(s) URL (got {self.base_url!r})")
        check(self, prefix="s2 ")

    @classmethod
    def from_options(cls, options: dict[str, Any] | S2Settings | None) -> S2Settings:
        """Settings from a plain dict (unknown keys are an :class:`InputError` naming the valid ones)."""
        return from_options(cls, options, "Semantic Scholar")

    @staticmethod
    def help(name: str) -> str:
        return spec(S2Settings, name).knob.help


def api_key_from_env() -> str | None:
    """The key from ``$S2_API_KEY`` or ``$SEMANTIC_SCHOLAR_API_KEY`` (first non-empty), else None."""
    return environment.first(API_KEY_ENV)
