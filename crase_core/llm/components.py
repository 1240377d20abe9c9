"""Model-backed planner, claim extractor and entailment scorer (the ``openai`` backend).

Each component renders its prompt file, asks the endpoint for JSON (with a
schema where the server takes one), parses and validates the answer with
:mod:`crase_core.llm.parse`, and on an unusable answer retries up to
``max_retries`` times, showing the model what was wrong. A result that still
fails carries ``error`` (the run goes on); an endpoint that cannot answer at
all raises :class:`ModelError` (the run stops with that message).

``identity`` = ``openai:<model>@<prompt version>+<prompt sha8>`` (plus the
temperature when it is not 0): the pipeline's cache keys include it, so a new
model, a new prompt or a new temperature never reuses an old result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import openai

from ..claims import MIN_CLAIMS
from ..entailment import ClaimPair
from ..errors import ModelError
from ..records import Claim, ClaimSet, EdgeMatrix, Paper, PlanResult, Usage
from ..spend import BudgetSpent, MeteredUsage, SpendMeter, token_bound
from .client import Endpoint, ItemError, TransientError
from .config import LLMSettings
from .parse import (
    OutputError,
    claims_schema,
    decode_json,
    matrix_schema,
    parse_claims,
    parse_matrix,
    parse_plan,
    plan_schema,
)
from .prompts import PromptTemplate, load_prompt

MAX_ABSTRACT_CHARS = 6000
TOKENS = {"plan": 256, "claims": 1024, "entailment": 512}
TRANSIENT_PREFIX = "endpoint: "


def _usage(meter: SpendMeter | None) -> Usage:
    return meter.usage() if meter is not None else Usage()


def _plain(usage: Usage) -> Usage:
    return usage.plain() if isinstance(usage, MeteredUsage) else usage


class _ModelComponent:
    """Shared machinery: prompt, identity, and the ask → parse → retry loop.

    ``metered``: the batch methods take a :class:`~crase_core.spend.SpendMeter` (``meter=``) that
    checks every HTTP attempt, retries included, against the run's budget.
    """

    prompt_name = ""
    metered = True

    def __init__(self, settings: LLMSettings, endpoint: Endpoint, template: PromptTemplate | None = None):
        if not settings.model:
            raise ModelError("no model name: pass --model (or the 'model' option)")
        self.settings = settings
        self.endpoint = endpoint
        self.template = template or load_prompt(self.prompt_name, settings.prompts_dir)
        temp = f",t={settings.temperature:g}" if settings.temperature else ""
        self.identity = f"openai:{settings.model}@{self.template.tag}{temp}"

    async def _ask(
        self,
        client: openai.AsyncOpenAI,
        messages: list[dict[str, str]],
        *,
        schema: dict,
        parse: Callable[[Any, bool], tuple[Any, list[str]]],
        usage: Usage,
        notes: list[str],
    ) -> Any:
        """Ask until ``parse`` accepts an answer (``final`` is True on the last try); OutputError otherwise."""
        conversation = list(messages)
        problems: list[str] = []
        tries = self.settings.max_retries + 1
        for attempt in range(tries):
            if isinstance(usage, MeteredUsage):
                usage.bound = token_bound(conversation, TOKENS[self.prompt_name])
                usage.precheck()  # refuse before the client takes a concurrency slot
            answer = await self.endpoint.complete(client, conversation, name=self.prompt_name, schema=schema,
                                                  max_tokens=TOKENS[self.prompt_name], usage=usage)
            try:
                value, json_notes = decode_json(answer.content, answer.finish_reason)
                result, parse_notes = parse(value, attempt == tries - 1)
            except OutputError as e:
                problems.append(str(e))
                conversation = [
                    *messages,
                    {"role": "assistant", "content": answer.content[:3000]},
                    {"role": "user", "content": f"That answer cannot be used: {e}. Answer again with JSON only, "
                                                "in exactly the shape described."},
                ]
                continue
            if problems:
                notes.append(f"repaired by retry: attempt {attempt + 1} was usable (earlier: {'; '.join(problems)})")
            if self.endpoint.structured_fallback_note and self.endpoint.structured_fallback_note not in notes:
                notes.append(self.endpoint.structured_fallback_note)
            notes.extend(json_notes + parse_notes)
            return result
        raise OutputError(f"no usable answer in {tries} attempt(s): {'; '.join(problems)}")

    def close(self) -> None:
        """Nothing to release: each batch opens and closes its own HTTP client."""


class LLMPlanner(_ModelComponent):
    """Research plan by the model (prompt ``plan``). ModelError when the endpoint is unreachable."""

    prompt_name = "plan"

    def plan(self, query: str, max_subqueries: int, meter: SpendMeter | None = None) -> PlanResult:
        def work(client: openai.AsyncOpenAI, q: str) -> Any:
            return self._plan_one(client, q, max_subqueries, meter)

        result = self.endpoint.run_batch([query], work, lambda r: False)[0]
        if result.error and result.error.startswith(TRANSIENT_PREFIX):
            # a dead endpoint at plan time stops the run: every later stage would fail the same way
            raise ModelError(self.settings.redact(f"planning failed, so the run stops: {result.error[len(TRANSIENT_PREFIX):]}"))
        return result

    async def _plan_one(self, client: openai.AsyncOpenAI, query: str, max_subqueries: int,
                        meter: SpendMeter | None = None) -> PlanResult:
        usage, notes = _usage(meter), list[str]()
        messages = self.template.render(query=query, max_subqueries=max_subqueries)
        try:
            subqueries = await self._ask(
                client, messages, schema=plan_schema(max_subqueries), usage=usage, notes=notes,
                parse=lambda value, final: parse_plan(value, query, max_subqueries),
            )
        except OutputError as e:
            return PlanResult(query, [], self.identity, error=f"model output: {e}", notes=notes, usage=_plain(usage))
        except BudgetSpent as e:
            return PlanResult(query, [], self.identity, error=str(e), notes=notes, usage=_plain(usage))
        except (TransientError, ItemError) as e:
            prefix = TRANSIENT_PREFIX if isinstance(e, TransientError) else ""
            return PlanResult(query, [], self.identity, error=prefix + str(e), notes=notes, usage=_plain(usage))
        return PlanResult(query, subqueries, self.identity, notes=notes, usage=_plain(usage))


class LLMClaimExtractor(_ModelComponent):
    """4–5 typed claims per paper by the model (prompt ``claims``); verbatim-checked."""

    prompt_name = "claims"

    def extract_many(self, papers: Sequence[Paper], meter: SpendMeter | None = None) -> list[ClaimSet]:
        return self.endpoint.run_batch(list(papers), lambda c, p: self._extract_one(c, p, meter), _transient)

    async def _extract_one(self, client: openai.AsyncOpenAI, paper: Paper, meter: SpendMeter | None = None) -> ClaimSet:
        usage, notes = _usage(meter), list[str]()
        if not paper.has_abstract:
            claim = Claim("c1", "CONTEXTUAL", " ".join(paper.title.split()), paper.title, True)
            return ClaimSet(paper.id, [claim], self.identity, title_only=True,
                            notes=["no abstract: the title is the only claim (no model call)"], usage=_plain(usage))
        abstract = paper.abstract
        if len(abstract) > MAX_ABSTRACT_CHARS:
            abstract = abstract[:MAX_ABSTRACT_CHARS]
            notes.append(f"abstract cut to its first {MAX_ABSTRACT_CHARS:,} characters for the prompt")
        messages = self.template.render(title=" ".join(paper.title.split()), abstract=" ".join(abstract.split()))
        try:
            claims = await self._ask(
                client, messages, schema=claims_schema(), usage=usage, notes=notes,
                parse=lambda value, final: parse_claims(value, paper, 1 if final else MIN_CLAIMS),
            )
        except OutputError as e:
            return ClaimSet(paper.id, [], self.identity, error=f"model output: {e}", notes=notes, usage=_plain(usage))
        except TransientError as e:
            return ClaimSet(paper.id, [], self.identity, error=TRANSIENT_PREFIX + str(e), notes=notes,
                            usage=_plain(usage))
        except (ItemError, BudgetSpent) as e:
            return ClaimSet(paper.id, [], self.identity, error=str(e), notes=notes, usage=_plain(usage))
        if len(claims) < MIN_CLAIMS:
            notes.append(f"only {len(claims)} usable claim(s) after {self.settings.max_retries + 1} attempts "
                         f"(the prompt asks for {MIN_CLAIMS}–5)")
        return ClaimSet(paper.id, claims, self.identity, notes=notes, usage=_plain(usage))


def format_claims(claims: Sequence[Claim], letter: str) -> str:
    """``A1 [TYPE] text`` lines, one per claim, in order (the rows/columns of the matrix)."""
    return "\n".join(f"{letter}{i} [{c.type}] {' '.join(c.text.split())}" for i, c in enumerate(claims, 1))


class LLMEntailmentScorer(_ModelComponent):
    """One n_u × n_v matrix per edge in ONE call (prompt ``entailment``)."""

    prompt_name = "entailment"

    def score_many(self, pairs: Sequence[ClaimPair], meter: SpendMeter | None = None) -> list[EdgeMatrix]:
        return self.endpoint.run_batch(list(pairs), lambda c, p: self._score_one(c, p, meter), _transient)

    async def _score_one(self, client: openai.AsyncOpenAI, pair: ClaimPair, meter: SpendMeter | None = None) -> EdgeMatrix:
        citing, cited = pair
        usage, notes = _usage(meter), list[str]()
        if not citing or not cited:
            return EdgeMatrix([], self.identity, error="a paper of this edge has no claims", usage=_plain(usage))
        n_u, n_v = len(citing), len(cited)
        messages = self.template.render(claims_a=format_claims(citing, "A"), claims_b=format_claims(cited, "B"),
                                        n_u=n_u, n_v=n_v)
        try:
            matrix = await self._ask(
                client, messages, schema=matrix_schema(n_u, n_v), usage=usage, notes=notes,
                parse=lambda value, final: parse_matrix(value, n_u, n_v),
            )
        except OutputError as e:
            return EdgeMatrix([], self.identity, error=f"model output: {e}", notes=notes, usage=_plain(usage))
        except TransientError as e:
            return EdgeMatrix([], self.identity, error=TRANSIENT_PREFIX + str(e), notes=notes, usage=_plain(usage))
        except (ItemError, BudgetSpent) as e:
            return EdgeMatrix([], self.identity, error=str(e), notes=notes, usage=_plain(usage))
        return EdgeMatrix(matrix, self.identity, notes=notes, usage=_plain(usage))


def _transient(result: ClaimSet | EdgeMatrix) -> bool:
    return bool(result.error and result.error.startswith(TRANSIENT_PREFIX))
