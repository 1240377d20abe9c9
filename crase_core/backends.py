"""A model backend = the three model-shaped parts of the pipeline, as one unit.

``offline_backend`` wires the deterministic offline parts that need no model
download: the keyword planner, the extractive claim extractor and the lexical
support scorer, with IDF from the paper source's own index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from crase_core.evidence.claims import ClaimExtractor, ExtractiveClaimExtractor
from crase_core.evidence.entailment import EntailmentScorer, LexicalSupportScorer
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
