"""Seed-corruption stress test (Crase paper, Appendix K).

For each query the seeds S of the clean run are replaced by |S| corrupted
seeds and stages 2–3 run unchanged (``run_query(..., seeding=InjectedSeeds(…))``):

* ``lexical`` — lexically similar distractors: the best BM25 hits for the
  query that are neither relevant nor clean seeds (topically adjacent noise);
* ``random`` — papers drawn uniformly (seeded by the qid, so reproducible)
  from the visible corpus, excluding relevant papers.

The harness reports the corrupted metrics; the retained fraction is
corrupted / clean Recall@50 and MAP@50 (see ``benchmarks/eval_stress.py``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from crase_core.cache import stable_hash
from crase_core.errors import InputError
from crase_core.evaluation.benchmark import BenchQuery
from crase_core.evaluation.methods import MethodOutput, trace_stats
from crase_core.paper_source import PaperSource
from crase_core.pipeline import Engine, run_query
from crase_core.records import PlanResult, Seed, SeedOrigin
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.progress import ProgressFn
from crase_core.stages.seeding import Seeding


@dataclass(frozen=True)
class InjectedSeeds:
    """A seeding stage (see :class:`crase_core.stages.seeding.SeedingStage`) that makes no search: the
    seeds are ``paper_ids`` in that order, less the ids the source does not show. The plan is still
    made; the trace records the injection in ``warnings``."""

    paper_ids: Sequence[str]

    def __call__(self, plan: PlanResult, source: PaperSource, settings: PipelineSettings,
                 progress: ProgressFn | None) -> Seeding:
        wanted = list(dict.fromkeys(self.paper_ids))
        visible = source.get(wanted)
        injected = [pid for pid in wanted if pid in visible]
        seeds = [Seed(pid, [SeedOrigin(0, "(injected seed)", i, i, len(injected))]) for i, pid in enumerate(injected, 1)]
        warning = (f"seeds injected by the caller ({len(injected)} of {len(self.paper_ids)} visible); "
                   "stage 1 search skipped")
        return Seeding(seeds, [], warnings=[warning])


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
    trace = run_query(q.query, engine, settings, seeding=InjectedSeeds(injected))
    stats = trace_stats(trace)
    stats.update({"corruption": mode, "n_clean_seeds": len(clean_seeds), "n_injected": len(injected)})
    return MethodOutput([r.paper_id for r in trace.results], stats, trace)
