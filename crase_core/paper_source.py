"""The ``PaperSource`` interface every paper source implements.

A source answers four questions: relevance search, references of a paper,
citers of a paper, and paper records by id; plus ``edges_among`` (every
citation u→v with both ends in a set), which the 1.5-hop graph needs and which
each source answers in its cheapest way. A :class:`SourceFilter` hides papers
newer than a month and given ids (leakage-free benchmarks): a filtered source
never returns a hidden paper from any method.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from crase_core.records import Paper


@dataclass(frozen=True)
class SourceFilter:
    """Hide papers with ``month > max_month`` (``YYYYMM``) and the ids in ``exclude``."""

    max_month: int | None = None
    exclude: frozenset[str] = frozenset()

    def hides(self, paper: Paper) -> bool:
        if paper.id in self.exclude:
            return True
        if self.max_month is None:
            return False
        month = paper.month if paper.month is not None else (paper.year * 100 + 12 if paper.year else None)
        return month is None or month > self.max_month

    @property
    def active(self) -> bool:
        return self.max_month is not None or bool(self.exclude)

    def describe(self) -> str:
        parts = []
        if self.max_month is not None:
            parts.append(f"papers after {self.max_month // 100}-{self.max_month % 100:02d} hidden")
        if self.exclude:
            parts.append(f"{len(self.exclude)} paper(s) excluded: {', '.join(sorted(self.exclude)[:5])}")
        return "; ".join(parts) or "none"


@dataclass
class ScoredPaper:
    """A search result: the paper and the source's relevance score.

    ``parts``: the score split by what entered it (:mod:`crase_core.retrieval.text_parts`); ``{}``: all of it is the
    source's own score.
    """

    paper: Paper
    score: float
    parts: dict[str, float] = field(default_factory=dict)


@dataclass
class NeighborList:
    """References or citers of one paper.

    ``total`` is how many the source knows of (None if it does not say);
    ``truncated`` is True when ``ids`` holds fewer than that, because of the
    source's own paging cap, and ``truncation_rule`` then says which it kept. ``contexts``/``intents`` map a neighbour id to the
    citing sentences / intents of that citation, where the source has them.
    """

    ids: list[str]
    total: int | None = None
    truncated: bool = False
    truncation_rule: str = ""  # how the source chose what it returned, when truncated
    contexts: dict[str, list[str]] = field(default_factory=dict)
    intents: dict[str, list[str]] = field(default_factory=dict)


@runtime_checkable
class PaperSource(Protocol):
    """What the pipeline needs from a literature source."""

    #: short identity shown in traces, e.g. ``local:hepth@fca14e40`` or ``s2``.
    name: str
    #: calls made to a remote service so far (0 for a local corpus).
    external_calls: int

    def search(self, query: str, limit: int) -> list[ScoredPaper]:
        """Papers ranked by relevance to ``query`` (best first), at most ``limit``; [] when none match."""
        ...

    def references(self, paper_id: str) -> NeighborList:
        """Papers that ``paper_id`` cites."""
        ...

    def citations(self, paper_id: str) -> NeighborList:
        """Papers that cite ``paper_id``."""
        ...

    def get(self, ids: Sequence[str]) -> dict[str, Paper]:
        """Records for the known, visible ids (unknown ids are absent from the result)."""
        ...

    def edges_among(self, ids: Collection[str]) -> list[tuple[str, str]]:
        """Every citation u→v (u cites v) with u and v both in ``ids``, sorted."""
        ...

    def restricted(self, filter: SourceFilter) -> PaperSource:
        """The same source with ``filter`` applied to every method."""
        ...
