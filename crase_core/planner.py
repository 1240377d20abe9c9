"""Stage 1 planning: query → up to L keyword sub-queries.

The ``Planner`` interface is shared by the offline planner here and the model
planner (``crase_core.llm``). The offline :class:`KeywordPlanner` is
deterministic and only ever *removes* words from the query, so it cannot add
tasks, methods, data sets or domains (the paper's planning rule):

1. ρ₁ = the query's content words (stop words and question framing removed),
   capped at the ``max_terms`` rarest, in query order;
2. one sub-query per clause of the query (split at punctuation and at
   connectives such as "via", "using", "with", "and"), clauses with the most
   IDF mass first;
3. if fewer than L remain, the rarest 4, then 3, then 2 content words.
Duplicates (same set of stems) are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Protocol

from .records import PlanResult
from .text import content_words, stem

_CLAUSE_SPLIT = re.compile(
    r"[,;:?!()\[\]]|\.\s|\s(?:via|using|through|with|and|or|by|whether|where|while|versus|vs\.?|without|"
    r"such as|including|rather than)\s",
    re.IGNORECASE,
)


class Planner(Protocol):
    """Turns a query into keyword sub-queries."""

    identity: str

    def plan(self, query: str, max_subqueries: int) -> PlanResult: ...


class KeywordPlanner:
    """Deterministic offline planner (see module docstring)."""

    identity = "keyword-planner/v1"

    def __init__(self, idf: Callable[[str], float] | None = None, max_terms: int = 10):
        self._idf = idf or (lambda term: float(len(term)))
        self.max_terms = max_terms

    def _weight(self, word: str) -> float:
        return self._idf(stem(word))

    def _dedupe_words(self, words: list[str]) -> list[str]:
        seen: set[str] = set()
        out = []
        for w in words:
            s = stem(w)
            if s not in seen:
                seen.add(s)
                out.append(w)
        return out

    def _rarest(self, words: list[str], n: int) -> list[str]:
        keep = set(sorted(words, key=lambda w: (-self._weight(w), w))[:n])
        return [w for w in words if w in keep]

    def plan(self, query: str, max_subqueries: int) -> PlanResult:
        words = self._dedupe_words(content_words(query))
        if not words:
            return PlanResult(query=query, subqueries=[], planner=self.identity,
                              notes=["the query has no content words to search for"])
        candidates: list[list[str]] = [self._rarest(words, self.max_terms)]
        clauses = []
        for part in _CLAUSE_SPLIT.split(query):
            cw = self._dedupe_words(content_words(part or ""))
            if cw:
                clauses.append(self._rarest(cw, self.max_terms))
        clauses.sort(key=lambda c: -sum(self._weight(w) for w in c))
        candidates.extend(c for c in clauses if len(c) >= 2 or (len(c) == 1 and len(words) == 1))
        for n in (4, 3, 2):
            if len(words) > n:
                candidates.append(self._rarest(words, n))
        subqueries: list[str] = []
        seen: set[frozenset[str]] = set()
        for cand in candidates:
            key = frozenset(stem(w) for w in cand)
            if key and key not in seen:
                seen.add(key)
                subqueries.append(" ".join(cand))
            if len(subqueries) >= max_subqueries:
                break
        return PlanResult(query=query, subqueries=subqueries, planner=self.identity)
