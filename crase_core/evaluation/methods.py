"""The methods ``crase eval`` compares: the full pipeline and the baselines of the paper's Table 1.

Every method answers one :class:`BenchQuery` against one (leakage-filtered)
:class:`Engine` and returns a ranked id list plus cost statistics. The graph
baselines share the full pipeline's candidate pool: they rank the nodes of the
same run's evidence graph (same plan, seeds, 1.5-hop expansion; read from the
trace, so the cache makes them cheap) — only the ranking differs.

* ``crase`` — :func:`run_query` with the given settings (ranked ``results``);
* ``bm25`` — the source's relevance search on the query alone (no plan, no graph);
The graph baselines use the paper's pool V = S ∪ refs(S) ∪ citers(S) (text
candidates off), so they match the independent reference numbers' setup.

* ``seeds`` — the seed set S alone, by best search rank over the sub-queries;
* ``ppr-unpruned`` — PPR over the 1.5-hop graph with every edge kept at weight 1, restart uniform over
  the seeds, α = the paper's 0.15 (``PAPER_ALPHA``; recorded in the row's ``ppr_alpha``);
* ``citations`` — nodes of V by in-degree inside the graph (unpruned E);
* ``recency`` — nodes of V newest first (ties by in-degree);
* ``dense`` — cosine similarity of all-MiniLM-L6-v2 embeddings of the query and
  every visible paper (only when the optional model package is installed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import mean
from typing import Any

from crase_core.errors import InputError
from crase_core.evaluation.benchmark import BenchQuery
from crase_core.pipeline import Engine, run_query
from crase_core.ranking.walks import PersonalizedPageRank, WeightedGraph, top_k
from crase_core.retrieval.seeds import recency_key
from crase_core.settings.pipeline import PRESETS, PipelineSettings
from crase_core.stages.seeding import SeedingStage, search_seeds
from crase_core.trace import RunTrace

METHODS: tuple[str, ...] = ("crase", "bm25", "seeds", "ppr-unpruned", "citations", "recency", "dense")
GRAPH_METHODS = frozenset({"crase", "seeds", "ppr-unpruned", "citations", "recency"})
#: the paper's teleport probability, which the ``ppr-unpruned`` baseline runs with whatever the settings say
PAPER_ALPHA: float = float(PRESETS["paper"]["alpha"])


@dataclass
class MethodOutput:
    """A method's ranked ids (best first, ≤ k) and what it cost."""

    ranked: list[str]
    stats: dict[str, Any] = field(default_factory=dict)
    trace: RunTrace | None = None


def trace_stats(trace: RunTrace, recall: bool = True) -> dict[str, Any]:
    """|V|, |E|, kept counts, seeds, citing claims (per edge) and those supported, model calls, cache hits,
    warnings and (``recall``) the recall estimate (:func:`recall_stats`) of one run."""
    return {**(recall_stats(trace) if recall else {}),
        "n_nodes": len(trace.nodes),
        "n_edges": len(trace.edges),
        "n_kept_nodes": sum(n.kept for n in trace.nodes),
        "n_kept_edges": sum(e.kept for e in trace.edges),
        "n_seeds": len(trace.seeds),
        "n_seeds_pruned": sum(s.fate == "pruned" for s in trace.seeds),
        "n_citing_claims": sum(len(e.supported) for e in trace.edges),  # one per citing claim of each edge
        "n_supported_claims": sum(sum(e.supported) for e in trace.edges),  # of them ✓ at the scorer's own θ
        "budget_calls": trace.budget.total,
        "entailment_calls": trace.budget.entailment_calls,
        "model_calls": trace.counters.model_calls,
        "cache_hits": trace.counters.cache_hits,
        "search_calls": trace.counters.search_calls,
        "warnings": list(trace.warnings),
        "semantic_feedback": trace.semantic_feedback,
    }


def recall_stats(trace: RunTrace) -> dict[str, Any]:
    """The run's recall estimate as eval row fields: ``estimated_recall@K`` and ``estimated_recall@K_interval``
    ([lo, hi]) where it has one, ``recall_note`` where not or with a caveat; ``recall_features`` (what
    ``crase bench calibrate`` fits on), ``recall_group`` and ``recall_source`` (the corpus) always."""
    est = trace.recall_estimate
    if est is None:
        return {}
    out: dict[str, Any] = {"recall_features": dict(est.features), "recall_group": est.group,
                           "recall_source": trace.source}
    if est.estimate is not None and est.low is not None and est.high is not None:
        out[f"estimated_recall@{est.k}"] = est.estimate
        out[f"estimated_recall@{est.k}_interval"] = [est.low, est.high]
    if est.note:
        out["recall_note"] = est.note
    return out


def graph_in_degree(trace: RunTrace) -> dict[str, int]:
    """In-degree of every node of V over all (unpruned) edges of E."""
    deg = {n.paper.id: 0 for n in trace.nodes}
    for e in trace.edges:
        deg[e.cited] = deg.get(e.cited, 0) + 1
    return deg


def seed_ranking(trace: RunTrace) -> list[str]:
    """Seeds by best relevance rank over their sub-queries (ties: first seen)."""
    order = sorted(enumerate(trace.seeds), key=lambda x: (min(o.relevance_rank for o in x[1].origins), x[0]))
    return [s.paper_id for _, s in order]


def unpruned_ppr_ranking(trace: RunTrace, alpha: float = 0.15) -> list[str]:
    """PPR over every node and edge of the run's graph, uniform weights, restart uniform over S."""
    nodes = [n.paper.id for n in trace.nodes]
    seeds = [s.paper_id for s in trace.seeds]
    if not nodes or not seeds:
        return []
    g = WeightedGraph(nodes, [(e.citing, e.cited, 1.0) for e in trace.edges])
    r = PersonalizedPageRank().rank(g, {s: 1.0 for s in seeds}, alpha=alpha, tol=1e-10, max_iter=1000)
    return [n for n, _ in top_k(r.scores, len(r.scores), seeds + nodes)]


def citation_ranking(trace: RunTrace) -> list[str]:
    deg = graph_in_degree(trace)
    return sorted(deg, key=lambda n: (-deg[n], n))


def recency_ranking(trace: RunTrace) -> list[str]:
    deg = graph_in_degree(trace)
    month = {n.paper.id: recency_key(n.paper) for n in trace.nodes}
    return sorted(month, key=lambda n: (-month[n], -deg.get(n, 0), n))


def hub_degree(engine: Engine, ids: list[str]) -> float | None:
    """Mean in-corpus citation count of ``ids`` (visible citers only); None when empty or unknown."""
    if not ids:
        return None
    count: Callable[[str], int] | None = getattr(engine.source, "in_corpus_citation_count", None)
    if count is not None:
        return float(mean(count(i) for i in ids))
    papers = engine.source.get(ids)
    vals = [c for i in ids if i in papers and (c := papers[i].citation_count) is not None]
    return float(mean(vals)) if vals else None


def run_method(method: str, q: BenchQuery, engine: Engine, settings: PipelineSettings,
               dense: Any = None, seeding: SeedingStage = search_seeds) -> MethodOutput:
    """Answer ``q`` with ``method`` (see the module docstring); ``dense`` is a DenseIndex for ``dense``;
    ``seeding`` replaces stage 1's seed search for the graph methods (see :mod:`.variants`)."""
    t0 = time.perf_counter()
    k = settings.k
    if method == "bm25":
        hits = engine.source.search(q.query, k)
        out = MethodOutput([h.paper.id for h in hits], {"search_calls": 1, "model_calls": 0})
    elif method == "dense":
        if dense is None:
            raise InputError("the dense baseline needs the optional embedding model (see docs/benchmarks.md)")
        out = MethodOutput(dense.search(q.query, k, engine.source), {"model_calls": 0})
    elif method in GRAPH_METHODS:
        if method != "crase":  # the baselines rank the paper's pool S ∪ N(S): no text candidates
            settings = settings.replace(text_candidates=0, personalization="uniform")
        trace = run_query(q.query, engine, settings, seeding=seeding)
        if method == "crase":
            ranked = [r.paper_id for r in trace.results]
        elif method == "seeds":
            ranked = seed_ranking(trace)
        elif method == "ppr-unpruned":
            ranked = unpruned_ppr_ranking(trace, PAPER_ALPHA)
        elif method == "citations":
            ranked = citation_ranking(trace)
        else:
            ranked = recency_ranking(trace)
        out = MethodOutput(ranked[:k], trace_stats(trace, recall=method == "crase"), trace)
        if method == "ppr-unpruned":
            out.stats.update({"ppr_alpha": PAPER_ALPHA, "ppr_restart": "uniform over the seeds",
                              "ppr_weights": "1 on every edge of E"})
    else:
        raise InputError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    out.stats["wall_s"] = round(time.perf_counter() - t0, 4)
    for cut in (10, 50):
        deg = hub_degree(engine, out.ranked[:cut])
        if deg is not None:
            out.stats[f"hub_degree@{cut}"] = round(deg, 3)
    return out
