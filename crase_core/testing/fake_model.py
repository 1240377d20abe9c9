"""A deterministic in-process stand-in for a paid model, for cascade tests and the budget benchmark.

It answers like a model that *disagrees* with the offline scorer near the threshold: its matrix is the
lexical scorer's, shifted per cell by a fixed pseudo-random amount in [-0.4, 0.4] (a hash of the two
claim texts), so the model's decisions differ from the offline ones exactly where the cascade must
spend its budget. Claims are the extractive claims (renamed); the plan is the keyword planner's.
Each item costs one call; tokens are those of the shipped prompt rendered for the item (characters/4,
the usual English BPE ratio) plus a completion sized like a real answer. ``fail`` makes some items
unusable ("model output: …"), like a model that cannot answer them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from crase_core.backends import ModelBackend, offline_backend
from crase_core.llm.components import TOKENS, format_claims
from crase_core.llm.prompts import load_prompt
from crase_core.llm.spend import BudgetSpent, SpendMeter, token_bound
from crase_core.records import Claim, ClaimSet, EdgeMatrix, Paper, PlanResult, Usage
from crase_core.store.termstats import TermStats

SPREAD = 0.4


def _unit(*texts: str) -> float:
    h = hashlib.sha256("\x1f".join(texts).encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def _tokens(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) for m in messages) // 4 + 8 * len(messages)


def _call(meter: SpendMeter | None, messages: list[dict[str, str]], kind: str, completion: int) -> Usage | str:
    """One metered call like the real client makes (the meter may refuse it): its usage, or the refusal."""
    usage = meter.usage() if meter is not None else Usage()
    if meter is not None:
        usage.bound = token_bound(messages, TOKENS[kind])  # type: ignore[attr-defined]
    try:
        usage.calls += 1
    except BudgetSpent as e:
        return str(e)
    usage.prompt_tokens += _tokens(messages)
    usage.completion_tokens += min(completion, TOKENS[kind])
    return usage.plain() if meter is not None else usage  # type: ignore[attr-defined]


class FakeModel:
    """Planner, extractor and scorer in one; ``calls`` counts items asked, ``log`` records them.

    ``metered`` like the ``openai`` components: every call goes through the run's meter.
    """

    metered = True

    def __init__(self, stats: TermStats | None = None, fail: Callable[[str], bool] | None = None,
                 name: str = "fake-model"):
        self.offline = offline_backend(stats)
        self.fail = fail or (lambda key: False)
        self.identity = f"{name}/v1"
        self.calls = 0
        self.log: list[str] = []
        self.templates = {n: load_prompt(n) for n in ("plan", "claims", "entailment")}

    # planner
    def plan(self, query: str, max_subqueries: int, meter: SpendMeter | None = None) -> PlanResult:
        self.calls += 1
        self.log.append("plan")
        p = self.offline.planner.plan(query, max_subqueries)
        msgs = self.templates["plan"].render(query=query, max_subqueries=max_subqueries)
        usage = _call(meter, msgs, "plan", 8 + 6 * len(p.subqueries))
        if isinstance(usage, str):
            return PlanResult(query, [], self.identity, error=usage)
        return PlanResult(query, p.subqueries, self.identity, usage=usage)

    # extractor
    def extract_many(self, papers: Sequence[Paper], meter: SpendMeter | None = None) -> list[ClaimSet]:
        out = []
        for paper, cs in zip(papers, self.offline.extractor.extract_many(list(papers)), strict=True):
            msgs = self.templates["claims"].render(title=paper.title, abstract=paper.abstract)
            completion = sum(len(c.text) + len(c.source_phrase) for c in cs.claims) // 4 + 20 * len(cs.claims)
            usage = _call(meter, msgs, "claims", completion)
            if isinstance(usage, str):
                out.append(ClaimSet(paper.id, [], self.identity, error=usage))
                continue
            self.calls += 1
            self.log.append(f"claims {paper.id}")
            if self.fail(f"claims {paper.id}"):
                out.append(ClaimSet(paper.id, [], self.identity, error="model output: 2 claims, expected 4-5",
                                    usage=usage))
                continue
            claims = [Claim(c.id, c.type, c.text, c.source_phrase, c.verbatim) for c in cs.claims]
            out.append(ClaimSet(paper.id, claims, self.identity, cs.title_only, usage=usage))
        return out

    # scorer
    def score_many(self, pairs: Sequence[tuple[Sequence[Claim], Sequence[Claim]]],
                   meter: SpendMeter | None = None) -> list[EdgeMatrix]:
        out = []
        for (citing, cited), em in zip(pairs, self.offline.scorer.score_many(list(pairs)), strict=True):
            key = f"matrix {citing[0].text[:40] if citing else ''}|{cited[0].text[:40] if cited else ''}"
            msgs = self.templates["entailment"].render(claims_a=format_claims(citing, "A"),
                                                       claims_b=format_claims(cited, "B"),
                                                       n_u=len(citing), n_v=len(cited))
            usage = _call(meter, msgs, "entailment", 6 * len(citing) * len(cited) + 8)
            if isinstance(usage, str):
                out.append(EdgeMatrix([], self.identity, error=usage))
                continue
            self.calls += 1
            self.log.append(key)
            if self.fail(key) or em.error:
                out.append(EdgeMatrix([], self.identity, error="model output: matrix has 3 rows, expected 4",
                                      usage=usage))
                continue
            matrix = [[min(1.0, max(0.0, x + SPREAD * (2 * _unit(a.text, b.text) - 1)))
                       for x, b in zip(row, cited, strict=True)]
                      for row, a in zip(em.matrix, citing, strict=True)]
            out.append(EdgeMatrix(matrix, self.identity, usage=usage))
        return out


def fake_backend(stats: TermStats | None = None, fail: Callable[[str], bool] | None = None,
                 cascade: bool = True) -> tuple[ModelBackend, FakeModel]:
    """A paid-model backend on :class:`FakeModel` (with the offline fallback when ``cascade``)."""
    model = FakeModel(stats, fail)
    backend = ModelBackend("fake", model, model, model, fallback=offline_backend(stats) if cascade else None)
    return backend, model
