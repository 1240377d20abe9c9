"""The knobs of one pipeline run, each with its default and a description.

``PipelineSettings`` is recorded verbatim in every trace; it holds no secrets
(endpoint credentials live in the backend's own settings and never reach a trace).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

from .errors import InputError

Hops = Literal[1.0, 1.5, 2.0]
RankerName = Literal["ppr", "salsa", "cep"]


def _knob(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class PipelineSettings:
    """Parameters of the three stages (defaults from DESIGN.md and the paper)."""

    k: int = _knob(50, "Number of papers returned after ranking.")
    m: int = _knob(10, "Seeds kept per sub-query (top t of both relevance and recency).")
    L: int = _knob(5, "Maximum number of keyword sub-queries in the research plan.")
    search_limit: int = _knob(100, "Results requested from the one search call per sub-query.")
    hops: float = _knob(1.5, "Expansion radius: 1 (seed–neighbour edges), 1.5 (all edges among V), 2.")
    neighbor_cap: int | None = _knob(
        None,
        "At most this many references and this many citers per expanded paper enter the graph "
        "(the most-cited are kept); None keeps all.",
    )
    theta: float = _knob(0.75, "θ: a citing claim is supported when some cited claim scores ≥ θ (Eq. 3).")
    tau: float = _knob(0.0, "τ: edges with Δ ≤ τ are pruned (Eq. 4); 0 prunes exactly the unsupported ones.")
    beta: float = _knob(0.5, "β: age decay exponent in w = Δ·age^(−β) (Eq. 5).")
    age_reference_year: int | None = _knob(
        None, "Year ages are measured against; None means the current year (the paper's default)."
    )
    ranker: str = _knob("ppr", "Ranker over the pruned graph: ppr, salsa or cep.")
    alpha: float = _knob(
        0.5,
        "α: teleport (restart) probability of the walk (Eq. 6). The paper uses 0.15 with seed restarts; "
        "0.5 measured best with the query restart (docs/benchmarks.md).",
    )
    personalization: str = _knob(
        "query",
        "Restart distribution: uniform over kept seeds; relevance (seeds ∝ 1/best search rank); or query "
        "(every ranked paper ∝ its search score for the full query to the power query_power).",
    )
    query_power: float = _knob(3.0, "γ: with personalization=query, restart mass ∝ (full-query search score)^γ.")
    text_candidates: int = _knob(
        10,
        "Of the top N hits of one search for the full query, those outside the citation graph join the "
        "ranking as text-only candidates (no edges; scored by their restart mass). 0 turns this off.",
    )
    tol: float = _knob(1e-10, "Power-iteration stop: L1 change between iterations below tol.")
    max_iter: int = _knob(1000, "Power-iteration cap.")
    max_model_calls: int | None = _knob(
        None, "Refuse to run when the uncached model calls would exceed this; None: no cap."
    )

    def __post_init__(self) -> None:
        validate_settings(self)

    def replace(self, **changes: Any) -> PipelineSettings:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return PipelineSettings(**values)

    @staticmethod
    def help(name: str) -> str:
        for f in fields(PipelineSettings):
            if f.name == name:
                return str(f.metadata.get("help", ""))
        raise KeyError(name)


def validate_settings(s: PipelineSettings) -> None:
    """Raise :class:`InputError` naming the first out-of-range knob."""
    checks: list[tuple[bool, str]] = [
        (s.k >= 1, f"k must be ≥ 1 (got {s.k})"),
        (s.m >= 1, f"m must be ≥ 1 (got {s.m})"),
        (1 <= s.L <= 20, f"L must be between 1 and 20 (got {s.L})"),
        (1 <= s.search_limit <= 1000, f"search_limit must be between 1 and 1000 (got {s.search_limit})"),
        (s.hops in (1, 1.5, 2), f"hops must be 1, 1.5 or 2 (got {s.hops})"),
        (s.neighbor_cap is None or s.neighbor_cap >= 1, f"neighbor_cap must be ≥ 1 (got {s.neighbor_cap})"),
        (0.0 <= s.theta <= 1.0, f"theta must be in [0, 1] (got {s.theta})"),
        (0.0 <= s.tau < 1.0, f"tau must be in [0, 1) (got {s.tau})"),
        (s.beta >= 0.0, f"beta must be ≥ 0 (got {s.beta})"),
        (0.0 < s.alpha < 1.0, f"alpha must be in (0, 1) (got {s.alpha})"),
        (s.ranker in ("ppr", "salsa", "cep"), f"ranker must be ppr, salsa or cep (got {s.ranker!r})"),
        (
            s.personalization in ("uniform", "relevance", "query"),
            f"personalization must be uniform, relevance or query (got {s.personalization!r})",
        ),
        (s.query_power > 0.0, f"query_power must be > 0 (got {s.query_power})"),
        (0 <= s.text_candidates <= 1000, f"text_candidates must be between 0 and 1000 (got {s.text_candidates})"),
        (s.tol > 0, f"tol must be > 0 (got {s.tol})"),
        (s.max_iter >= 1, f"max_iter must be ≥ 1 (got {s.max_iter})"),
        (
            s.max_model_calls is None or s.max_model_calls >= 0,
            f"max_model_calls must be ≥ 0 (got {s.max_model_calls})",
        ),
        (
            s.age_reference_year is None or 1000 <= s.age_reference_year <= 3000,
            f"age_reference_year looks wrong (got {s.age_reference_year})",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise InputError(message)
