"""The OpenAlex source's settings (the ``openalex`` section)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from crase_core.errors import InputError
from crase_core.settings.knobs import check, from_options, knob, spec

PER_PAGE_MAX = 200  # documented: per-page 1…200
OR_MAX = 50  # documented: up to 50 values in one filter's OR (|)

DEFAULT_BASE_URL = "https://api.openalex.org"


@dataclass(frozen=True)
class OpenAlexSettings:
    """Knobs of the OpenAlex source (the ``openalex`` section of :class:`crase_core.config.Settings`).

    The optional API key is not a setting: :mod:`crase_core.config` reads ``$OPENALEX_API_KEY`` and hands it
    only to a client whose base URL is the operator's configured one. ``mailto`` (the polite pool's contact
    address) is sent as a query parameter on every request and kept out of the response cache's key.
    """

    base_url: str = knob(DEFAULT_BASE_URL, "API root, e.g. a proxy or a local replay server.",
                         flag="--openalex-base-url", metavar="URL", form=False)
    mailto: str | None = knob(None, "Contact e-mail for OpenAlex's polite pool (faster, steadier answers).",
                              flag="--openalex-mailto", env="CRASE_OPENALEX_MAILTO", metavar="EMAIL", form=False)
    rate: float = knob(5.0, "Client-side rate limit in requests per second (0: no limit; the API allows 10/s "
                            "and 100,000 a day).", flag="--openalex-rate", minimum=0.0, maximum=100.0, form=False)
    timeout: float = knob(30.0, "Seconds to wait for one HTTP answer before it counts as a timeout (retried).",
                          flag="--openalex-timeout", minimum=0.0, min_open=True, maximum=3600.0, form=False)
    max_retries: int = knob(5, "Retries of one request after 429, 5xx, timeout or connection failure.",
                            flag="--openalex-max-retries", minimum=0, maximum=20, form=False)
    backoff_base: float = knob(1.0, "First retry waits about this many seconds; each later one twice as long "
                                    "(with jitter), at least what Retry-After asks for.",
                               flag="--openalex-backoff-base", minimum=0.0, maximum=3600.0, form=False)
    backoff_max: float = knob(60.0, "Upper bound of one backoff wait in seconds (Retry-After excepted).",
                              flag="--openalex-backoff-max", minimum=0.0, maximum=86400.0, form=False)
    max_retry_after: float = knob(300.0, "A Retry-After longer than this many seconds stops the run instead of "
                                         "waiting.", flag="--openalex-max-retry-after", minimum=0.0, maximum=86400.0,
                                  form=False)
    use_cache: bool = knob(True, "Cache every response on disk so a re-run makes no new calls "
                                 "(--openalex-no-cache: do not read or write the OpenAlex response cache).",
                           flag="--openalex-no-cache", form=False)
    cache_dir: str | None = knob(None, "Response cache folder; None: <crase cache>/openalex.",
                                 flag="--openalex-cache-dir", metavar="DIR", form=False)
    cache_ttl_days: float = knob(30.0, "Cached responses expire after this many days.",
                                 flag="--openalex-cache-days", minimum=0.0, min_open=True, maximum=36500.0,
                                 form=False)
    page_size: int = knob(200, "Works per page of references/citations (API maximum 200).",
                          flag="--openalex-page-size", minimum=1, maximum=PER_PAGE_MAX, form=False)
    max_neighbor_pages: int = knob(3, "Pages fetched per paper and relation; a longer list is cut there (the "
                                      "API's own order) and recorded as truncated in the trace.",
                                   flag="--openalex-max-pages", minimum=1, maximum=50, form=False)
    batch_size: int = knob(OR_MAX, "Ids per lookup request (filter=openalex:A|B|…; API maximum 50).",
                           flag="--openalex-batch-size", minimum=1, maximum=OR_MAX, form=False)
    on_neighbor_error: str = knob("stop", "When references/citations of one paper cannot be fetched after "
                                          "retries: 'stop' the run, or 'skip' that list (recorded as truncated "
                                          "to 0) and continue.", flag="--openalex-on-error",
                                  choices=("stop", "skip"), form=False)

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not self.base_url.startswith(("http://", "https://")):
            raise InputError(f"openalex base_url must be an http(s) URL (got {self.base_url!r})")
        if self.mailto is not None and not re.fullmatch(r"[^@\s&=?#/]{1,64}@[^@\s&=?#/]{1,190}", self.mailto):
            raise InputError(f"openalex mailto must be an e-mail address (got {self.mailto!r})")
        check(self, prefix="openalex ")

    @classmethod
    def from_options(cls, options: dict[str, Any] | OpenAlexSettings | None) -> OpenAlexSettings:
        """Settings from a plain dict (unknown keys are an :class:`InputError` naming the valid ones)."""
        return from_options(cls, options, "OpenAlex")

    @staticmethod
    def help(name: str) -> str:
        return spec(OpenAlexSettings, name).knob.help
