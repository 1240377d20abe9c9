"""Seed-corruption stress test (Crase paper, Appendix K).

For each query the seeds S of the clean run are replaced by |S| corrupted
seeds and stages 2–3 run unchanged (``run_query(..., seeds_override=…)``):

* ``lexical`` — lexically similar distractors: the best BM25 hits for the
  query that are neither relevant nor clean seeds (topically adjacent noise);
* ``random`` — papers drawn uniformly (seeded by the qid, so reproducible)
  from the visible corpus, excluding relevant papers.

The harness reports the corrupted metrics; the retained fraction is
corrupted / clean Recall@50 and MAP@50 (see ``benchmarks/eval_stress.py``).
"""

from __future__ import annotations

import random

import numpy as np

from ..cache import stable_hash
from ..errors import InputError
from ..pipeline import Engine, run_query
from ..settings import PipelineSettings
from .benchmark import BenchQuery
from .methods import MethodOutput, trace_stats


def lexical_distractors(q: BenchQuery, engine: Engine, n: int, exclude: set[str]) -> list[str]:
    """The n best BM25 hits for the query outside ``exclude`` (relevant papers and clean seeds)."""
    hits = engine.source.search(q.query, n + len(exclude) + 50)
    return [h.paper.id for h in hits if h.paper.id not in exclude][:n]


def random_papers(q: BenchQuery, engine: Engine, n: int, exclude: set[str]) -> list[str]:
    """n visible papers drawn uniformly without replacement, seeded by the qid."""
    corpus = getattr(engine.source, "corpus", None)
    visible = getattr(engine.source, "visible", None)
    if corpus is None or visible is None:
        raise InputError("random seed corruption needs a local corpus source")
    pool = [corpus.papers[i].id for i in np.flatnonzero(visible)]
    pool = [p for p in pool if p not in exclude]
    rng = random.Random(int(stable_hash(["corrupt", q.qid]), 16))
    return rng.sample(pool, min(n, len(pool)))


def corrupted_run(q: BenchQuery, engine: Engine, settings: PipelineSettings, mode: str) -> MethodOutput:
    """Run q with its seeds replaced by ``mode`` distractors; stats say how many were injected."""
    clean = run_query(q.query, engine, settings)
    clean_seeds = [s.paper_id for s in clean.seeds]
    exclude = set(q.relevant) | set(clean_seeds)
    if mode == "lexical":
        injected = lexical_distractors(q, engine, len(clean_seeds), exclude)
    elif mode == "random":
        injected = random_papers(q, engine, len(clean_seeds), set(q.relevant))
    else:
        raise InputError(f"seed corruption must be lexical or random (got {mode!r})")
    trace = run_query(q.query, engine, settings, seeds_override=injected)
    stats = trace_stats(trace)
    stats.update({"corruption": mode, "n_clean_seeds": len(clean_seeds), "n_injected": len(injected)})
    return MethodOutput([r.paper_id for r in trace.results], stats, trace)
