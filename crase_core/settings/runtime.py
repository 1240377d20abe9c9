"""Which paper source and model backend a run uses, with their settings (the ``runtime`` section).

The names a ``source`` or ``backend`` may take are data here (:data:`SOURCE_NAMES`, :data:`BACKEND_NAMES`);
:mod:`crase_core.runtime` holds the factory of each and checks that the two lists agree. Keys ride only in
fields excluded from ``repr`` and :meth:`RuntimeConfig.describe`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crase_core.settings import environment
from crase_core.settings.knobs import check, knob
from crase_core.settings.llm import LLMSettings
from crase_core.settings.openalex import OpenAlexSettings
from crase_core.settings.s2 import S2Settings

#: paper sources, in the order the front ends offer them (each has a factory in crase_core.runtime).
SOURCE_NAMES: list[str] = ["local", "s2", "openalex"]
#: model backends, likewise.
BACKEND_NAMES: list[str] = ["offline", "openai"]


@dataclass
class RuntimeConfig:
    """Which paper source and model backend a run uses, with their typed settings.

    ``llm`` configures the ``openai`` backend, ``s2`` the ``s2`` source, ``openalex`` the ``openalex`` source;
    ``s2_api_key`` is the Semantic Scholar key for ``s2.base_url`` and ``openalex_api_key`` the OpenAlex key
    for ``openalex.base_url`` (set by :mod:`crase_core.settings.config` only when that URL is the operator's
    configured one).
    """

    source: str = knob("local", "Paper source.", label="Paper source", choices=lambda: tuple(SOURCE_NAMES))
    backend: str = knob("offline", "Model backend (plans sub-queries, extracts claims, scores entailment).",
                        label="Model backend", choices=lambda: tuple(BACKEND_NAMES))
    corpus_dir: str | None = knob(None, "Local corpus folder (papers.jsonl + citations.tsv); default: the "
                                  "embedded hep-th corpus.", flag="--corpus", env=environment.CORPUS, metavar="DIR",
                                  form=False)
    use_cache: bool = knob(True, "Read and write the result cache (--no-cache: do not).", flag="--no-cache",
                           form=False)
    cache_dir: str | None = knob(None, "Cache folder (results, corpus index, Semantic Scholar responses); "
                                 "default: the per-user cache dir.", env=environment.CACHE_DIR, metavar="DIR",
                                 form=False)
    deadline_s: float | None = knob(None, "Overall deadline of one run in seconds: past it the run stops at the "
                                    "next stage, batch or external call (each call's own deadline is capped by "
                                    "what is left); None: no deadline.", flag="--deadline", metavar="SECONDS",
                                    minimum=0.0, min_open=True, maximum=604800.0, form=False)
    recall_calibration: str | None = knob(None, "Recall calibration file (crase bench calibrate) for the run's "
                                          "recall estimate; default: recall_calibration.json in the corpus "
                                          "folder, else the one shipped for the corpus.", metavar="FILE",
                                          form=False)
    llm: LLMSettings = field(default_factory=LLMSettings)
    s2: S2Settings = field(default_factory=S2Settings)
    s2_api_key: str | None = field(default=None, repr=False, compare=False)
    openalex: OpenAlexSettings = field(default_factory=OpenAlexSettings)
    openalex_api_key: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        check(self)

    def describe(self) -> dict[str, str]:
        return {"source": self.source, "backend": self.backend, "corpus_dir": self.corpus_dir or "embedded"}
