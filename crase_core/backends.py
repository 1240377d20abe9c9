"""A model backend = the three model-shaped parts of the pipeline, as one unit.

``offline_backend`` wires the deterministic offline parts that need no model
download: the keyword planner, the extractive claim extractor and the lexical
support scorer, with IDF from the paper source's own index. :func:`with_support_scorer` swaps that scorer for
the on-device claim-similarity one when a run's settings ask for it (``support_scorer = "similarity"``), loading
the model on first use, once per process, and falling back to word overlap (with a warning) when it cannot load.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from crase_core.evidence.claims import ClaimExtractor, ExtractiveClaimExtractor
from crase_core.evidence.entailment import EntailmentScorer, LexicalSupportScorer
from crase_core.records import OFFLINE, SIMILARITY
from crase_core.retrieval.planner import KeywordPlanner, Planner
from crase_core.store.termstats import TermStats


@dataclass
class ModelBackend:
    """Planner + claim extractor + entailment scorer, and a secret-free description.

    ``fallback``: the offline backend that decides what this (paid) backend is not asked, or
    answered unusably (the cascade of :mod:`crase_core.stages.scoring`); None: this backend decides
    everything itself (the offline backend, test doubles).
    """

    name: str
    planner: Planner
    extractor: ClaimExtractor
    scorer: EntailmentScorer
    fallback: ModelBackend | None = None
    #: what ``EdgeRecord.scorer`` records for the edges this backend's own scorer decides when it has no fallback
    #: (``"offline"``: word overlap; ``"similarity"``: the claim-similarity scorer)
    support: str = OFFLINE

    def describe(self) -> dict[str, str]:
        out = {
            "backend": self.name,
            "planner": self.planner.identity,
            "extractor": self.extractor.identity,
            "scorer": self.scorer.identity,
        }
        if self.fallback is not None:
            out["fallback_scorer"] = self.fallback.scorer.identity
        return out

    def close(self) -> None:
        for part in (self.planner, self.extractor, self.scorer, self.fallback):
            closer: Any = getattr(part, "close", None)
            if callable(closer):
                closer()


def offline_backend(stats: TermStats | None = None) -> ModelBackend:
    """The default, fully offline backend (IDF from ``stats`` when given)."""
    idf = stats.idf if stats else (lambda t: 1.0)
    return ModelBackend(
        name="offline",
        planner=KeywordPlanner(idf=stats.idf if stats else None, known=stats.df.__contains__ if stats else None),
        extractor=ExtractiveClaimExtractor(),
        scorer=LexicalSupportScorer(idf=idf),
    )


#: what a run says when it asked for claim similarity and the model could not load ({why}: the one-line reason)
SIMILARITY_FALLBACK_WARNING = ("claim similarity unavailable ({why}); this run's edges were scored by word overlap "
                               "(support_scorer word-overlap)")

_similarity_lock = threading.Lock()
_similarity: dict[int, tuple[Any, EntailmentScorer]] = {}  # id(encoder) → (encoder, its claim-similarity scorer)


def similarity_scorer() -> EntailmentScorer:
    """The process's :class:`~crase_core.evidence.similarity.ClaimSimilarityScorer` on the on-device encoder
    (:func:`~crase_core.encoder.load_encoder`: loaded once per process), made on first use and kept with it, so
    claim vectors are reused by every later run; raises :class:`~crase_core.encoder.EncoderUnavailable` when the
    model cannot load."""
    from crase_core.encoder import load_encoder  # imported on use: a word-overlap run never loads the model
    from crase_core.evidence.similarity import ClaimSimilarityScorer

    enc = load_encoder()
    with _similarity_lock:
        got = _similarity.get(id(enc))
        if got is None or got[0] is not enc:
            _similarity.clear()
            got = _similarity[id(enc)] = (enc, ClaimSimilarityScorer(enc))
        return got[1]


def with_support_scorer(backend: ModelBackend, choice: str,
                        make: Callable[[], EntailmentScorer] | None = None) -> tuple[ModelBackend, str | None]:
    """``backend`` with the offline claim scorer ``choice`` (``PipelineSettings.support_scorer``), and the warning
    the run must show, if any.

    Only the offline backend's own scorer is swapped (a model backend's matrices are the model's; its cascade's
    fallback stays word overlap). ``"similarity"`` uses ``make()`` (default :func:`similarity_scorer`); when it
    raises :class:`~crase_core.encoder.EncoderUnavailable` the backend is returned unchanged with
    :data:`SIMILARITY_FALLBACK_WARNING`."""
    if choice != "similarity" or backend.fallback is not None or backend.name != "offline":
        return backend, None
    from crase_core.encoder import EncoderUnavailable

    try:
        scorer = (make or similarity_scorer)()
    except EncoderUnavailable as e:
        return backend, SIMILARITY_FALLBACK_WARNING.format(why=str(e).rstrip("."))
    return replace(backend, scorer=scorer, support=SIMILARITY), None
