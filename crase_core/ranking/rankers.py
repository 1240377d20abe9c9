"""The ranker registry: every ranker by name, the pipeline settings it reads, and the one call to rank.

A ranker is registered with the mapping from its keyword parameters to the
:class:`~crase_core.settings.pipeline.PipelineSettings` fields that hold them; the
settings use :func:`rankers_using` to know which knob applies to which ranker
(α to the walks, the ``cep_*`` knobs to CEP), and :func:`rank` passes each
ranker exactly its own parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from crase_core.errors import InputError
from crase_core.ranking.cep import ContrastiveEvidencePaths
from crase_core.ranking.walks import (
    Attribution,
    PersonalizedPageRank,
    PersonalizedSALSA,
    Ranker,
    WeightedGraph,
)
from crase_core.records import RankingResult
from crase_core.settings.ranker_knobs import (
    RANKERS,
    declare_ranker,
    is_ranker_parameter,
    ranker_names,
    ranker_parameters,
    rankers_using,
)

__all__ = ["REGISTRY", "RankerEntry", "attribute", "get_ranker", "is_ranker_parameter", "rank", "ranker_names",
           "ranker_parameters", "rankers_using", "register"]


@dataclass(frozen=True)
class RankerEntry:
    """A registered ranker: the object, a one-line description, ranker keyword → settings field."""

    ranker: Ranker
    description: str
    parameters: Mapping[str, str] = field(default_factory=dict)


_OBJECTS: dict[str, Ranker] = {
    "ppr": PersonalizedPageRank(),
    "salsa": PersonalizedSALSA(),
    "cep": ContrastiveEvidencePaths(),
}
assert tuple(_OBJECTS) == ranker_names(), "every declared ranker has an object, in the same order"

REGISTRY: dict[str, RankerEntry] = {
    name: RankerEntry(obj, RANKERS[name].description, RANKERS[name].parameters) for name, obj in _OBJECTS.items()
}


class RankingSettings(Protocol):
    """What :func:`rank` reads: the ranker's name (its parameters are read by field name)."""

    @property
    def ranker(self) -> str: ...


def register(name: str, ranker: Ranker, description: str, parameters: Mapping[str, str]) -> None:
    """Add a ranker; ``parameters`` maps its keyword arguments to settings fields."""
    declare_ranker(name, description, parameters)
    REGISTRY[name] = RankerEntry(ranker, description, dict(parameters))


def get_ranker(name: str) -> Ranker:
    return _entry(name).ranker


def _entry(name: str) -> RankerEntry:
    try:
        return REGISTRY[name]
    except KeyError:
        raise InputError(f"unknown ranker {name!r}; choose one of {', '.join(REGISTRY)}") from None


def rank(settings: RankingSettings, graph: WeightedGraph, personalization: Mapping[str, float]) -> RankingResult:
    """Rank ``graph`` with ``settings.ranker``, passing it its own parameters from ``settings``."""
    entry = _entry(settings.ranker)
    params: dict[str, Any] = {kw: getattr(settings, name) for kw, name in entry.parameters.items()}
    return entry.ranker.rank(graph, personalization, **params)


def attribute(settings: RankingSettings, graph: WeightedGraph, personalization: Mapping[str, float],
              targets: Sequence[str], paths: int = 3) -> dict[str, Attribution] | None:
    """Where each of ``targets``' scores under ``settings.ranker`` comes from: its split by restart source and
    the strongest paths (the ranker's ``attribute``, with its own parameters); None for a ranker without one."""
    entry = _entry(settings.ranker)
    explain = getattr(entry.ranker, "attribute", None)
    if explain is None:
        return None
    params: dict[str, Any] = {kw: getattr(settings, name) for kw, name in entry.parameters.items()}
    return explain(graph, personalization, targets, paths=paths, **params)
