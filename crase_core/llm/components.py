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

from crase_core.cache import stable_hash
from crase_core.errors import ModelError
from crase_core.evidence.claims import MIN_CLAIMS
from crase_core.evidence.entailment import ClaimPair
from crase_core.llm.client import Endpoint, ItemError, TransientError
from crase_core.llm.parse import (
    OutputError,
    block_id,
    claims_schema,
    decode_json,
    group_schema,
    matrix_schema,
    parse_claims,
    parse_group,
    parse_matrix,
    parse_plan,
    plan_schema,
)
from crase_core.llm.prompts import PromptTemplate, load_prompt, neutralize
from crase_core.llm.spend import BudgetSpent, MeteredUsage, SpendMeter, token_bound
from crase_core.records import Claim, ClaimSet, EdgeMatrix, Paper, PlanResult, Usage
from crase_core.settings.llm import LLMSettings

MAX_ABSTRACT_CHARS = 6000
TOKENS = {"plan": 256, "claims": 1024, "entailment": 512, "entailment_group": 2048}
#: at most this many cited papers per grouped call, and at most :data:`MAX_GROUP_CELLS` scores and
#: :data:`MAX_GROUP_CHARS` characters of cited claims: prompt + answer fit a 4,096-token context (the
#: llama.cpp server of a small local model runs with n_ctx 4096)
MAX_GROUP_EDGES = 8
MAX_GROUP_CELLS = 120
MAX_GROUP_CHARS = 5000
TRANSIENT_PREFIX = "endpoint: "


def _usage(meter: SpendMeter | None) -> Usage:
    return meter.usage() if meter is not None else Usage()


def _plain(usage: Usage) -> Usage:
    return usage.plain() if isinstance(usage, MeteredUsage) else usage


class _ModelComponent:
    """Shared machinery: prompt, identity, and the ask → parse → retry loop.

    ``metered``: the batch methods take a :class:`~crase_core.llm.spend.SpendMeter` (``meter=``) that
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
        #: what results are cached under: the identity and the endpoint, model and settings that shape the
        #: answers (``LLMSettings.answer_settings``), so two endpoints serving one model name never share them
        self.cache_identity = f"{self.identity}|{stable_hash(settings.answer_settings())[:16]}"

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


def group_max_tokens(n_u: int, n_vs: Sequence[int]) -> int:
    """Completion cap of one grouped answer: ≈ 7 tokens per score, 6 per row, 8 per block (digits are single
    tokens for SmolLM2/Llama tokenizers: "0.75, " is 5–6), at most ``TOKENS["entailment_group"]``."""
    need = 16 + sum(8 + n_u * (6 + 7 * n_v) for n_v in n_vs)
    return min(TOKENS["entailment_group"], need)


def group_pairs(pairs: Sequence[ClaimPair], size: int = MAX_GROUP_EDGES, *, max_cells: int = MAX_GROUP_CELLS,
                max_chars: int = MAX_GROUP_CHARS) -> list[list[int]]:
    """Indices of ``pairs`` grouped by citing claim set (same texts in the same order), in first-seen order,
    each group cut into chunks of at most ``size`` pairs, ``max_cells`` scores and ``max_chars`` characters
    of cited claims (a single pair over the limits is a chunk of its own); a pair with an empty side is a
    group of its own."""
    groups: list[list[int]] = []
    open_group: dict[tuple[str, ...], tuple[list[int], list[int]]] = {}  # key → (indices, [cells, chars])
    for i, (citing, cited) in enumerate(pairs):
        if not citing or not cited:
            groups.append([i])
            continue
        key = tuple(c.text for c in citing)
        cells, chars = len(citing) * len(cited), sum(len(c.text) for c in cited)
        g = open_group.get(key)
        if g is None or len(g[0]) >= size or (g[0] and (g[1][0] + cells > max_cells or g[1][1] + chars > max_chars)):
            g = ([], [0, 0])
            groups.append(g[0])
            open_group[key] = g
        g[0].append(i)
        g[1][0] += cells
        g[1][1] += chars
    return groups


def split_usage(usage: Usage, weights: Sequence[int]) -> list[Usage]:
    """One call's usage shared among the edges it decided: the calls on the first edge, the tokens in
    proportion to ``weights`` (their matrix cells); the parts add up to ``usage`` exactly."""
    total = sum(weights) or 1
    parts = [Usage(0, usage.prompt_tokens * w // total, usage.completion_tokens * w // total) for w in weights]
    if parts:
        parts[0].calls = usage.calls
        parts[0].prompt_tokens += usage.prompt_tokens - sum(p.prompt_tokens for p in parts)
        parts[0].completion_tokens += usage.completion_tokens - sum(p.completion_tokens for p in parts)
    return parts


def format_cited_blocks(cited: Sequence[Sequence[Claim]]) -> str:
    """One ``<cited id="Pk">`` block per cited paper, its claims as ``B1 [TYPE] text`` lines (tag-like text in
    the claims neutralised here: the slot is rendered as trusted)."""
    return "\n".join(f'<cited id="{block_id(k)}">\n{neutralize(format_claims(claims, "B"))}\n</cited>'
                     for k, claims in enumerate(cited, 1))


class LLMGroupEntailmentScorer(_ModelComponent):
    """The n_u × n_v matrix of every edge, one call per citing paper for up to :data:`MAX_GROUP_EDGES`
    cited papers (prompt ``entailment_group``): the citing claims and the instructions are sent once.

    Results are per edge, exactly as :class:`LLMEntailmentScorer`'s (same shapes, validated block by
    block): a block that is missing or malformed fails only its own edge; it is asked again, alone with
    the other failed blocks, while retries remain, then recorded as ``model output: …`` (the other edges
    keep their matrices). A transport failure or a budget refusal fails the edges not answered yet.
    A call's usage is shared among its edges (:func:`split_usage`: the call on the first, tokens by cells).
    """

    prompt_name = "entailment_group"
    grouped = True
    group_size = MAX_GROUP_EDGES

    def score_many(self, pairs: Sequence[ClaimPair], meter: SpendMeter | None = None) -> list[EdgeMatrix]:
        pairs = list(pairs)
        groups = group_pairs(pairs, self.group_size)
        answers = self.endpoint.run_batch(
            groups, lambda c, g: self._score_group(c, [pairs[i] for i in g], meter),
            lambda ems: any(_transient(em) for em in ems))
        out: list[EdgeMatrix | None] = [None] * len(pairs)
        for g, ems in zip(groups, answers, strict=True):
            for i, em in zip(g, ems, strict=True):
                out[i] = em
        return [em for em in out if em is not None]

    def render(self, citing: Sequence[Claim], cited: Sequence[Sequence[Claim]]) -> list[dict[str, str]]:
        """The chat messages of one grouped call (citing claims once, one block per cited paper)."""
        shapes = ", ".join(f"{block_id(k)}: {len(citing)} × {len(c)}" for k, c in enumerate(cited, 1))
        return self.template.render(claims_a=format_claims(citing, "A"), cited_blocks=format_cited_blocks(cited),
                                    n_u=len(citing), shapes=shapes, trusted=frozenset({"cited_blocks"}))

    async def _score_group(self, client: openai.AsyncOpenAI, members: Sequence[ClaimPair],
                           meter: SpendMeter | None = None) -> list[EdgeMatrix]:
        usage = _usage(meter)
        citing = members[0][0]
        n_u = len(citing)
        matrices: dict[int, list[list[float]]] = {}
        errors: dict[int, str] = {}
        notes: dict[int, list[str]] = {k: [] for k in range(len(members))}
        for k, (a, b) in enumerate(members):
            if not a or not b:
                errors[k] = "a paper of this edge has no claims"
        todo = [k for k in range(len(members)) if k not in errors]
        problems: dict[int, list[str]] = {k: [] for k in todo}
        tries = self.settings.max_retries + 1
        attempt = 0
        try:
            while todo and attempt < tries:
                attempt += 1
                n_vs = [len(members[k][1]) for k in todo]
                messages = self.render(citing, [members[k][1] for k in todo])
                max_tokens = group_max_tokens(n_u, n_vs)
                if isinstance(usage, MeteredUsage):
                    usage.bound = token_bound(messages, max_tokens)
                    usage.precheck()  # refuse before the client takes a concurrency slot
                answer = await self.endpoint.complete(client, messages, name=self.prompt_name,
                                                      schema=group_schema(n_u, n_vs), max_tokens=max_tokens,
                                                      usage=usage)
                try:
                    value, json_notes = decode_json(answer.content, answer.finish_reason)
                    found, bad, parse_notes = parse_group(value, n_u, n_vs)
                except OutputError as e:
                    found, bad, json_notes, parse_notes = {}, {i: str(e) for i in range(len(todo))}, [], []
                notes[todo[0]].extend(json_notes)
                for i, k in enumerate(todo):
                    notes[k].extend(n for n in parse_notes if n.endswith(f"({block_id(i + 1)})"))
                    if i in found:
                        matrices[k] = found[i]
                        if problems[k]:
                            notes[k].append(f"repaired by retry: attempt {attempt} was usable "
                                            f"(earlier: {'; '.join(problems[k])})")
                    else:
                        problems[k].append(bad[i])
                todo = [k for k in todo if k not in matrices]
            for k in todo:
                errors[k] = f"model output: no usable answer in {attempt} attempt(s): {'; '.join(problems[k])}"
        except TransientError as e:
            errors.update({k: TRANSIENT_PREFIX + str(e) for k in todo})
        except (ItemError, BudgetSpent) as e:
            errors.update({k: str(e) for k in todo})
        plain = _plain(usage)
        if self.endpoint.structured_fallback_note and plain.calls:
            notes[0].append(self.endpoint.structured_fallback_note)
        shares = split_usage(plain, [len(a) * len(b) for a, b in members])
        together = (f"scored in one call with {len(members) - 1} other cited paper(s) of the citing paper "
                    f"(prompt {self.template.version})") if len(members) > 1 else ""
        return [EdgeMatrix(matrices.get(k, []), self.identity, error=errors.get(k),
                           notes=[*notes[k], *([together] if together else [])], usage=shares[k])
                for k in range(len(members))]


def _transient(result: ClaimSet | EdgeMatrix) -> bool:
    return bool(result.error and result.error.startswith(TRANSIENT_PREFIX))
