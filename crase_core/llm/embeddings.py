"""Calls to an OpenAI-compatible ``POST /v1/embeddings`` endpoint (llama.cpp's server, vLLM, Ollama, OpenAI):
batches of texts in, one vector per text out, through the chat client's machinery.

Requests go through :class:`~crase_core.llm.client.Endpoint` — the same pooled ``aiohttp`` connections,
adaptive concurrency (HTTP 429/503 halve it, ``Retry-After`` honoured), total per-request timeout, retries
with back-off, run deadline and call budget (``max_calls``, retries included), and the same rules for the
key (sent only to the base URL it is bound to; never in a message). Body: ``{"model", "input": [texts],
"encoding_format": "float"}``; answer: ``{"data": [{"index", "embedding": [floats]}], "usage"}``.

A server that runs a model without a pooling layer (llama-cpp-python's server with a chat model such as
SmolLM2: it has no ``--pooling`` option) answers one vector *per token* for each text, a list of lists; those
are averaged (mean pooling, what llama.cpp's own ``llama-server --pooling mean`` does) and the job records
that it did (:attr:`EmbeddingEndpoint.pooled`).

An answer is used only when it has exactly one finite, non-zero vector of the batch's dimension for every
text (by ``index``, each once); anything else — not JSON, JSON nested too deeply, a missing or repeated
index, NaN, a zero vector, a vector of another length than the ones before — is retried like a transient
failure and, when it persists, stops the job with one line saying what the endpoint sent. A dimension that
changes between batches stops it at once (:class:`~crase_core.errors.ModelError`): vectors of two models
must never end up in one file.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from crase_core.errors import ModelError
from crase_core.llm.client import (
    BudgetError,
    DeadlineError,
    Endpoint,
    ItemError,
    Session,
    TransientError,
    _preview,
)
from crase_core.llm.transport import Response
from crase_core.records import Usage
from crase_core.settings.llm import LLMSettings

log = logging.getLogger(__name__)


@dataclass
class BatchResult:
    """One batch's vectors (rows, in the texts' order, float64), or why there are none."""

    vectors: np.ndarray | None
    error: str = ""
    budget: bool = False  # the call budget or the deadline stopped it (a rerun continues)
    usage: Usage = field(default_factory=Usage)


class EmbeddingEndpoint:
    """Embeddings from ``settings.base_url``'s ``/embeddings`` for ``settings.model`` (required)."""

    def __init__(self, settings: LLMSettings, *, max_calls: int | None = None, deadline: float | None = None,
                 dimension: int | None = None):
        if not settings.model:
            raise ModelError("give the embedding model's name with --model (the server lists its models at "
                             f"{settings.describe()['base_url']}/models)")
        self.settings = settings
        self.endpoint = Endpoint(settings, deadline=deadline, max_calls=max_calls)
        #: the vectors' length: given, else learnt from the first answer and then required of every answer
        self.dimension = dimension
        self.prompt_tokens = 0
        #: texts whose answer was one vector per token, averaged here (mean pooling)
        self.pooled = 0

    @property
    def calls_made(self) -> int:
        return self.endpoint.calls_made

    @property
    def where(self) -> str:
        return self.endpoint.where

    def embed(self, batches: Sequence[Sequence[str]]) -> list[BatchResult]:
        """Every batch embedded (``concurrency`` requests in flight), results in order; a batch that failed
        after its retries has ``error`` set. Raises :class:`ModelError` when every call would fail (the
        endpoint cannot be reached, refuses the key or the model, changes dimension, or fails
        ``fail_fast_after`` batches in a row)."""
        return self.endpoint.run_batch(list(batches), self._one, lambda r: bool(r.error) and not r.budget)

    async def _one(self, session: Session, texts: Sequence[str]) -> BatchResult:
        usage = Usage()
        body = json.dumps({"model": self.settings.model, "input": list(texts), "encoding_format": "float"},
                          ensure_ascii=False).encode("utf-8")
        try:
            vectors = await self.endpoint.post_json(session, "/embeddings", lambda: body, usage,
                                                    lambda r: self._vectors(r, len(texts), usage))
        except (BudgetError, DeadlineError) as e:
            return BatchResult(None, str(e), budget=True, usage=usage)
        except (TransientError, ItemError) as e:
            return BatchResult(None, str(e), usage=usage)
        return BatchResult(vectors, usage=usage)

    def _vectors(self, r: Response, n: int, usage: Usage) -> tuple[np.ndarray | None, str]:
        """The ``n`` vectors of an HTTP 200 answer, or (None, what is wrong: "{n}" stands for the attempts)."""
        where = self.where
        try:
            data = json.loads(r.body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None, (f"the endpoint {where} answered HTTP 200 with a body that is not JSON (or nested too "
                          f"deeply) ({{n}} attempts): {_preview(r.body)}")
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            return None, (f"the endpoint {where} answered HTTP 200 with JSON that is not an embeddings answer (no "
                          f"'data' list) ({{n}} attempts): {_preview(r.body)}; check that it serves /embeddings")
        u = data.get("usage")
        if isinstance(u, dict) and isinstance(u.get("prompt_tokens"), int) and u["prompt_tokens"] >= 0:
            usage.prompt_tokens += u["prompt_tokens"]
            self.prompt_tokens += u["prompt_tokens"]
        rows: list[list[float] | None] = [None] * n
        for pos, item in enumerate(items):
            index = item.get("index", pos) if isinstance(item, dict) else None
            vector = item.get("embedding") if isinstance(item, dict) else None
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n or rows[index] is not None:
                return None, (f"the endpoint {where} answered with an embedding for index {index!r}, not one for each "
                              f"of the {n} texts sent ({{n}} attempts)")
            if not isinstance(vector, list) or not vector:
                return None, (f"the endpoint {where} answered with an embedding that is not a list of numbers "
                              "({n} attempts); ask for encoding_format float")
            if all(isinstance(t, list) for t in vector):  # one vector per token: mean pooling
                pooled = _mean_pool(vector)
                if pooled is None:
                    return None, (f"the endpoint {where} answered with per-token vectors of different lengths or "
                                  "holding something other than numbers ({n} attempts)")
                self.pooled += 1
                vector = pooled
            rows[index] = vector
        if any(row is None for row in rows):
            got = sum(row is not None for row in rows)
            return None, f"the endpoint {where} returned {got} embeddings for {n} texts ({{n}} attempts)"
        lengths = {len(row) for row in rows if row is not None}
        if len(lengths) != 1:
            return None, f"the endpoint {where} returned vectors of different lengths {sorted(lengths)} ({{n}} attempts)"
        dim = lengths.pop()
        if self.dimension is not None and dim != self.dimension:
            raise ModelError(f"the endpoint {where} returned {dim}-dimensional vectors where the embeddings so far "
                             f"have {self.dimension}: one file cannot mix two models; check --model "
                             f"{self.settings.model!r}, or start over with --fresh")
        try:
            matrix = np.array(rows, dtype=np.float64)
        except (ValueError, TypeError):
            return None, f"the endpoint {where} returned vectors holding something other than numbers ({{n}} attempts)"
        if matrix.shape != (n, dim) or not np.all(np.isfinite(matrix)):
            return None, f"the endpoint {where} returned vectors that are not finite numbers (NaN or infinity) ({{n}} attempts)"
        if np.any(np.linalg.norm(matrix, axis=1) == 0):
            return None, f"the endpoint {where} returned an all-zero vector ({{n}} attempts)"
        self.dimension = dim
        return matrix, ""


def _mean_pool(tokens: list[list[Any]]) -> list[float] | None:
    """The average of per-token vectors (equal lengths, numbers), or None when they are not that."""
    lengths = {len(t) for t in tokens}
    if len(lengths) != 1 or not lengths.pop():
        return None
    try:
        matrix = np.array(tokens, dtype=np.float64)
    except (ValueError, TypeError):
        return None
    if matrix.ndim != 2:
        return None
    return [float(x) for x in matrix.mean(axis=0)]
