"""Which ranker reads which setting: the names and parameters of the rankers, as data.

The ranker objects live in :mod:`crase_core.ranking.rankers`; what the settings need of them — the names a
``ranker`` knob may take and, per ranker, the mapping from its keyword parameters to the
:class:`~crase_core.settings.pipeline.PipelineSettings` fields that hold them — is declared here, so the
settings import nothing above them. :func:`crase_core.ranking.rankers.register` adds to both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RankerDeclaration:
    """A ranker's one-line description and its keyword → settings field mapping."""

    description: str
    parameters: Mapping[str, str] = field(default_factory=dict)


_WALK = {"alpha": "alpha", "tol": "tol", "max_iter": "max_iter"}

#: the rankers, in the order the front ends list them.
RANKERS: dict[str, RankerDeclaration] = {
    "ppr": RankerDeclaration("Personalized PageRank (paper Eq. 6–7)", _WALK),
    "salsa": RankerDeclaration("personalised SALSA authority scores", _WALK),
    "cep": RankerDeclaration("Contrastive Evidence Paths (strongest path ÷ background)",
                             {"hop_discount": "cep_hop_discount", "background_restart": "cep_background_restart",
                              "background_iterations": "cep_background_iterations"}),
}

#: CEP's defaults (SCI paper, Table 8): hop discount λ, background restart α_b and steps T_b.
CEP_HOP_DISCOUNT = 0.5
CEP_BACKGROUND_RESTART = 0.5
CEP_BACKGROUND_ITERATIONS = 24


def declare_ranker(name: str, description: str, parameters: Mapping[str, str]) -> None:
    RANKERS[name] = RankerDeclaration(description, dict(parameters))


def ranker_names() -> tuple[str, ...]:
    """Declared ranker names, in declaration order."""
    return tuple(RANKERS)


def ranker_parameters(name: str) -> tuple[str, ...]:
    """The settings fields ranker ``name`` reads (empty for an unknown name)."""
    d = RANKERS.get(name)
    return tuple(d.parameters.values()) if d else ()


def rankers_using(setting: str) -> tuple[str, ...]:
    """Names of the rankers that read the settings field ``setting``."""
    return tuple(n for n, d in RANKERS.items() if setting in d.parameters.values())


def is_ranker_parameter(setting: str) -> bool:
    return any(setting in d.parameters.values() for d in RANKERS.values())
