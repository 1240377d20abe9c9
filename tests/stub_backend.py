"""Test doubles for the three model-shaped parts, so a pipeline run's Δ values are fixed by the test.

* :class:`FixedPlanner` returns the sub-queries it was given (at most L);
* :class:`ScriptedExtractor` gives paper ``P`` the claims ``"P c1"``, ``"P c2"``, … (n per paper, default 1);
* :class:`ScriptedScorer` returns, for edge u→v, the matrix the test wrote for ``(u, v)``
  (a ``default`` value fills any edge the test did not list).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from crase_core.backends import ModelBackend
from crase_core.records import Claim, ClaimSet, EdgeMatrix, Paper, PlanResult


class FixedPlanner:
    identity = "fixed-planner/test"

    def __init__(self, subqueries: Sequence[str]):
        self.subqueries = list(subqueries)

    def plan(self, query: str, max_subqueries: int) -> PlanResult:
        return PlanResult(query, self.subqueries[:max_subqueries], self.identity)


class ScriptedExtractor:
    identity = "scripted-extractor/test"

    def __init__(self, n_claims: Mapping[str, int] | None = None):
        self.n_claims = dict(n_claims or {})

    def extract_many(self, papers: Sequence[Paper]) -> list[ClaimSet]:
        out = []
        for p in papers:
            n = self.n_claims.get(p.id, 1)
            claims = [Claim(f"c{i}", "EMPIRICAL", f"{p.id} c{i}", p.title, True) for i in range(1, n + 1)]
            out.append(ClaimSet(p.id, claims, self.identity))
        return out


class ScriptedScorer:
    identity = "scripted-scorer/test"

    def __init__(self, matrices: Mapping[tuple[str, str], list[list[float]]] | None = None, default: float = 1.0):
        self.matrices = dict(matrices or {})
        self.default = default
        self.scored: list[tuple[str, str]] = []

    def score_many(self, pairs: Sequence[tuple[Sequence[Claim], Sequence[Claim]]]) -> list[EdgeMatrix]:
        out = []
        for citing, cited in pairs:
            u, v = citing[0].text.split()[0], cited[0].text.split()[0]
            self.scored.append((u, v))
            m = self.matrices.get((u, v), [[self.default] * len(cited) for _ in citing])
            out.append(EdgeMatrix([list(row) for row in m], self.identity))
        return out


def scripted_backend(subqueries: Sequence[str], matrices: Mapping[tuple[str, str], list[list[float]]] | None = None,
                     n_claims: Mapping[str, int] | None = None, default: float = 1.0) -> ModelBackend:
    return ModelBackend("scripted", FixedPlanner(subqueries), ScriptedExtractor(n_claims),
                        ScriptedScorer(matrices, default))
