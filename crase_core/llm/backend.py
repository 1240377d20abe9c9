"""The ``openai`` model backend: planner, extractor and scorer sharing one endpoint.

Registered as ``BACKEND_FACTORIES["openai"]`` in :mod:`crase_core.runtime`, which
passes the typed :class:`LLMSettings` of its configuration (this module knows
nothing of the wiring layer).
"""

from __future__ import annotations

from crase_core.backends import ModelBackend, offline_backend
from crase_core.errors import ModelError
from crase_core.llm.client import Endpoint
from crase_core.llm.components import (
    LLMClaimExtractor,
    LLMEntailmentScorer,
    LLMGroupEntailmentScorer,
    LLMPlanner,
)
from crase_core.settings.llm import LLMSettings


def openai_backend(settings: LLMSettings, fallback: ModelBackend | None = None) -> ModelBackend:
    """A :class:`ModelBackend` on ``settings``; when no model is named, the endpoint's only model is used.

    ``fallback`` decides what the model is not asked (the per-query budget) or answers unusably: the
    cascade of :mod:`crase_core.stages.scoring`. Default: the offline backend with uniform IDF; the
    runtime passes the one with the corpus's IDF. ``settings.entailment_prompt``: ``group`` (default) scores
    the edges of one citing paper in one call (:class:`LLMGroupEntailmentScorer`), ``edge`` one call per edge.
    """
    endpoint = Endpoint(settings)
    if not settings.model:
        models = endpoint.list_models()
        if len(models) != 1:
            listed = ", ".join(models[:10]) or "none"
            raise ModelError(f"name the model with --model: {endpoint.where} serves {len(models)} ({listed})")
        settings.model = models[0]
    return ModelBackend(
        name="openai",
        planner=LLMPlanner(settings, endpoint),
        extractor=LLMClaimExtractor(settings, endpoint),
        scorer=(LLMGroupEntailmentScorer(settings, endpoint) if settings.entailment_prompt == "group"
                else LLMEntailmentScorer(settings, endpoint)),
        fallback=fallback if fallback is not None else offline_backend(),
    )
