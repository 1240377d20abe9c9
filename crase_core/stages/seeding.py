"""Stage 1b: seeds — one search per sub-query, seeds by top-t of relevance and recency (see
:mod:`crase_core.retrieval.seeds`), plus one search for the full query (query restart and text candidates).

The per-sub-query part is a :class:`SeedingStage`: :func:`search_seeds` by default; an evaluation can
pass another with the same signature (``crase_core.evaluation.stress`` injects corrupted seeds), and
:class:`LibrarySeeding` adds the papers the user already has. Stage 1b also judges how much the corpus
has on the query (:mod:`crase_core.retrieval.query_coverage`): a weak match is a warning of the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from crase_core.paper_source import PaperSource, ScoredPaper
from crase_core.records import (
    Paper,
    PlanResult,
    QueryCoverage,
    SearchHit,
    Seed,
    SeedOrigin,
    SubQueryResult,
    UserLibrary,
)
from crase_core.retrieval.anchor import anchor_scores
from crase_core.retrieval.dense import (
    DenseQuestion,
    DenseStatus,
    QuestionEmbedder,
    embed_question,
    fuse_for,
    wanted,
)
from crase_core.retrieval.feedback import feedback_terms, interpolate
from crase_core.retrieval.library import LibraryEntry, resolve
from crase_core.retrieval.proximity import rescore
from crase_core.retrieval.query_coverage import coverage_for_source
from crase_core.retrieval.seeds import build_seed_set, rank_hits
from crase_core.retrieval.semantic import Lookup, feedback_fuse, rerank_fuse
from crase_core.retrieval.text_parts import ANCHOR, BM25
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.progress import ProgressFn, emit
from crase_core.store.termstats import index_idf

NO_SEEDS_WARNING = "no paper matched any sub-query: nothing to expand. Try other words or a broader query."


@dataclass
class Seeding:
    """Seeds S, the record of each sub-query's search, and the full-query search (stage 3's restart)."""

    seeds: list[Seed]
    subquery_results: list[SubQueryResult]
    searched: list[tuple[str, list[ScoredPaper]]] = field(default_factory=list)  # (sub-query, its results)
    query_hits: list[SearchHit] = field(default_factory=list)  # the full-query search, ranked
    query_papers: dict[str, Paper] = field(default_factory=dict)  # its papers by id
    search_calls: int = 0
    warnings: list[str] = field(default_factory=list)
    coverage: QueryCoverage | None = None  # how much the corpus has on the query (None: the source cannot say)
    library: UserLibrary | None = None  # the user's papers, when :class:`LibrarySeeding` ran
    feedback: list[str] = field(default_factory=list)  # the full-query search's feedback terms (feedback_docs)
    #: the walk's restart list when it differs from ``query_hits`` (anchor_restart_weight); None: query_hits
    restart_hits: list[SearchHit] | None = None
    semantic_feedback: bool = False  # whether the searches were fused with semantic feedback (crase_core.retrieval.semantic)
    semantic_note: str = ""  # what semantic feedback read, or why it was off and how to turn it on
    dense_question: bool = False  # whether the question was embedded and fused (crase_core.retrieval.dense)
    dense_note: str = ""  # what the question's embedding read, or why the run ranked by words

    @property
    def walk_hits(self) -> list[SearchHit]:
        """The full-query ranking the walk restarts from: ``restart_hits`` when set, else ``query_hits``."""
        return self.restart_hits if self.restart_hits is not None else self.query_hits


def search(source: PaperSource, query: str, settings: PipelineSettings, *, question: bool = False) -> list[ScoredPaper]:
    """The one search call of stage 1b: ``settings.search_limit`` results of ``source`` for ``query``,
    re-scored by term proximity when ``settings.proximity_weight`` or ``proximity_window_weight`` > 0
    (:mod:`crase_core.retrieval.proximity`) and the source searches a local BM25 index (one with a ``text_index``: the
    weights are measured on BM25's score scale; a remote source's own ranking, e.g. Semantic Scholar's,
    is kept as it is), then fused with semantic feedback when ``settings.semantic_feedback_weight`` > 0 and the
    source has embeddings for its corpus (:mod:`crase_core.retrieval.semantic`) — in every search (scope "all"), or only
    in the full question's own (``question``; scope "question"); scope "fusion" fuses none here
    (:func:`search_full_query` does, for the final fusion only)."""
    results = source.search(query, settings.search_limit)
    if getattr(source, "text_index", None) is None:
        return list(results)
    results = [r if r.parts else ScoredPaper(r.paper, r.score, {BM25: r.score}) for r in results]
    results = rescore(query, results, settings.proximity_weight, settings.proximity_window_weight)
    scope = settings.semantic_feedback_scope
    return semantic_fuse(source, results, settings) if scope == "all" or (scope == "question" and question) else results


def semantic_fuse(source: PaperSource, results: list[ScoredPaper], settings: PipelineSettings) -> list[ScoredPaper]:
    """``results`` fused with semantic feedback (weight ``settings.semantic_feedback_weight``) when the weight
    is > 0 and ``source`` has embeddings: a local corpus's (:func:`crase_core.retrieval.semantic.feedback_fuse`, the
    nearest visible papers join), or a remote source's own vectors for its hits (``semantic_vectors``, e.g.
    Semantic Scholar's SPECTER2; :func:`crase_core.retrieval.semantic.rerank_fuse`, the list is re-ordered); else
    ``results``."""
    weight = settings.semantic_feedback_weight
    if weight <= 0 or not results:
        return results
    embeddings = getattr(source, "embeddings", None)
    corpus = getattr(source, "corpus", None)
    if embeddings is not None and corpus is not None:
        return feedback_fuse(results, embeddings, corpus.index, corpus.papers, getattr(source, "visible"),  # noqa: B009
                             weight)
    vectors_of = getattr(source, "semantic_vectors", None)
    if callable(vectors_of):
        return rerank_fuse(results, vectors_of([r.paper.id for r in results]), weight)
    return results


class SeedingStage(Protocol):
    """Seeds for a plan: what :func:`search_seeds` does, or a replacement with the same signature."""

    def __call__(self, plan: PlanResult, source: PaperSource, settings: PipelineSettings,
                 progress: ProgressFn | None) -> Seeding: ...


def search_seeds(plan: PlanResult, source: PaperSource, settings: PipelineSettings,
                 progress: ProgressFn | None = None) -> Seeding:
    """One search of ``settings.search_limit`` results per sub-query; up to m seeds from each. With
    ``query_seeds`` r > 0 also the full question's own search, whose top r join the seeds
    (:func:`add_query_seeds`; :func:`search_full_query` reuses that search)."""
    searched: list[tuple[str, list[ScoredPaper]]] = []
    for i, sq in enumerate(plan.subqueries):
        emit(progress, "seeds", i, len(plan.subqueries), f"searching “{sq}”")
        searched.append((sq, search(source, sq, settings, question=sq == plan.query)))
    seeds, subquery_results = build_seed_set(plan.subqueries, [r for _, r in searched], settings.m)
    seeding = Seeding(seeds, subquery_results, searched, search_calls=len(searched))
    if settings.query_seeds > 0 and plan.query:
        same = [results for sq, results in searched if sq == plan.query]
        if same:
            results = same[0]
        else:
            results = search(source, plan.query, settings, question=True)
            searched.append((plan.query, results))
            seeding.search_calls += 1
        add_query_seeds(plan.query, rank_hits(results), seeding, settings.query_seeds)
    return seeding


def search_full_query(query: str, seeding: Seeding, source: PaperSource, settings: PipelineSettings,
                      dense: DenseQuestion | None = None) -> Seeding:
    """Fill in ``seeding``'s full-query search when the settings use it (query restart, text candidates).

    The full query's search is reused when the seeding stage already made it (a sub-query, or the
    hybrid seeds' search). With ``anchor_restart_weight`` the walk restarts from the search blended
    with anchor text (``Seeding.restart_hits``) while the text candidates and the final fusion keep
    ``query_hits``; with semantic feedback scope "fusion" ``query_hits`` is the semantically fused search and
    the walk restarts from the search's own list (with anchor text when asked). With the question's ``dense``
    scores, the final fusion's list is fused with them at ``dense_fusion_weight`` and the walk's restart list
    at ``dense_restart_weight`` (:mod:`crase_core.retrieval.dense`).
    """
    if settings.personalization != "query" and settings.text_candidates <= 0 and settings.text_floor <= 0:
        return seeding
    same = [results for sq, results in seeding.searched if sq == query]
    if same:
        results = same[0]
    else:
        results = search(source, query, settings, question=True)
        seeding.search_calls += 1
    if settings.feedback_docs > 0 and results:
        results = with_feedback(query, results, source, settings, seeding)
    if settings.anchor_weight > 0:
        results = with_anchor_text(query, results, source, settings.anchor_weight, settings.search_limit)
    # scope "fusion": the text candidates, the fusion and the floor read the semantically fused list, the walk
    # restarts from the search's own
    fused = semantic_fuse(source, results, settings) if settings.semantic_feedback_scope == "fusion" else results
    if dense is not None and settings.dense_fusion_weight > 0:
        fused = fuse_for(source, fused, dense, settings.dense_fusion_weight)
    seeding.query_hits = rank_hits(fused, parts=True)
    seeding.query_papers = {r.paper.id: r.paper for r in fused}
    restart = results
    if settings.anchor_restart_weight > 0:
        restart = with_anchor_text(query, results, source, settings.anchor_restart_weight, settings.search_limit)
    dense_restart = dense is not None and settings.dense_restart_weight > 0
    if dense_restart:
        restart = fuse_for(source, restart, dense, settings.dense_restart_weight)
    if restart is not fused:
        seeding.restart_hits = rank_hits(restart, parts=dense_restart)
        seeding.query_papers.update({r.paper.id: r.paper for r in restart})
    return seeding


def dense_query_seeds(query: str, seeding: Seeding, source: PaperSource, settings: PipelineSettings,
                      dense: DenseQuestion) -> None:
    """The question's own seeds chosen again from its search fused with its ``dense`` scores at
    ``dense_seed_weight`` (:func:`replace_query_seeds`); nothing when the seeding made no question search (no
    question seeds). The sub-queries' searches and seeds, and ``searched``, keep the plain search. Mutates
    ``seeding``."""
    same = [results for sq, results in seeding.searched if sq == query]
    if settings.query_seeds <= 0 or not same:
        return
    fused = fuse_for(source, same[0], dense, settings.dense_seed_weight)
    replace_query_seeds(query, rank_hits(fused), seeding, settings.query_seeds)


def replace_query_seeds(query: str, hits: Sequence[SearchHit], seeding: Seeding, r: int) -> None:
    """``seeding``'s question seeds (the last search row, :func:`add_query_seeds`) replaced by the top ``r`` of
    ``hits``: the question's origins are removed (a seed left without origins is dropped), its row too, and
    :func:`add_query_seeds` adds the new ones. Nothing when the last row is not the question's. Mutates
    ``seeding``."""
    rows = seeding.subquery_results
    index = len(rows) - 1
    if not rows or rows[-1].subquery != query or not any(
            o.kind == "question" and o.subquery_index == index for s in seeding.seeds for o in s.origins):
        return
    kept = []
    for s in seeding.seeds:
        s.origins = [o for o in s.origins if not (o.kind == "question" and o.subquery_index == index)]
        if s.origins:
            kept.append(s)
    seeding.seeds = kept
    rows.pop()
    add_query_seeds(query, hits, seeding, r)


def add_query_seeds(query: str, hits: Sequence[SearchHit], seeding: Seeding, r: int) -> None:
    """Hybrid seed selection: the full question's own top ``r`` hits by relevance join the seeds.

    They are recorded as one more search row of the plan (index = number of sub-queries, the question
    itself as its text, t = r) so that the Seeds page and each seed's reason show where they came from;
    a paper the sub-queries already chose keeps its origins and gains this one. New seeds come after
    the sub-queries' seeds, in relevance order. Mutates ``seeding``.
    """
    index = len(seeding.subquery_results)
    chosen = list(hits[:r])
    by_id = {s.paper_id: s for s in seeding.seeds}
    for h in chosen:
        origin = SeedOrigin(index, query, h.relevance_rank, h.recency_rank, len(chosen), kind="question")
        if h.paper_id in by_id:
            by_id[h.paper_id].origins.append(origin)
        else:
            by_id[h.paper_id] = Seed(h.paper_id, [origin])
            seeding.seeds.append(by_id[h.paper_id])
    seeding.subquery_results.append(SubQueryResult(index, query, list(hits), [h.paper_id for h in chosen],
                                                   len(chosen)))


def with_feedback(query: str, results: list[ScoredPaper], source: PaperSource, settings: PipelineSettings,
                  seeding: Seeding) -> list[ScoredPaper]:
    """``results`` blended with a search for the pseudo-relevance-feedback terms of their top
    ``feedback_docs`` papers (:mod:`crase_core.retrieval.feedback`); idf from the source's index when it has one,
    else 1. ``results`` unchanged when no term qualifies. Counts the extra search in ``seeding``."""
    index = getattr(source, "text_index", None)
    idf = index_idf(index) if index is not None else (lambda _t: 1.0)
    top = [(r.paper, r.score) for r in results[: settings.feedback_docs]]
    terms = feedback_terms(query, top, settings.feedback_terms, idf)
    if not terms:
        return results
    expansion = search(source, " ".join(t.word for t in terms), settings)
    seeding.search_calls += 1
    seeding.feedback = [t.word for t in terms]
    return interpolate(results, expansion, settings.feedback_weight, settings.search_limit)


def with_anchor_text(query: str, results: list[ScoredPaper], source: PaperSource, weight: float,
                     limit: int) -> list[ScoredPaper]:
    """``results`` blended (``weight``) with the anchor-text ranking of the visible corpus, at most
    ``limit`` (:mod:`crase_core.retrieval.anchor`); ``results`` itself for a source without a local corpus and index."""
    corpus, index = getattr(source, "corpus", None), getattr(source, "text_index", None)
    visible = getattr(source, "visible", None)
    if corpus is None or index is None or visible is None:
        return results
    a = anchor_scores(query, index.postings_of, index_idf(index), corpus.refs, corpus.cites, visible)
    hits = np.flatnonzero(a > 0)
    if hits.size > limit:
        hits = hits[np.argpartition(-a[hits], limit - 1)[:limit]]
    ranked = sorted(hits.tolist(), key=lambda i: -float(a[i]))
    anchors = [ScoredPaper(corpus.papers[i], float(a[i])) for i in ranked]
    return interpolate(results, anchors, weight, limit, ANCHOR)


def find_seeds(query: str, plan: PlanResult, source: PaperSource, settings: PipelineSettings,
               progress: ProgressFn | None = None, stage: SeedingStage = search_seeds, *,
               embedder: QuestionEmbedder | None = None) -> Seeding:
    """Stage 1b: ``stage`` for the seeds, then the full-query search; warns when there is no seed. When the
    settings embed the question (:func:`crase_core.retrieval.dense.wanted`), ``embedder`` embeds it once and its
    dense scores are fused into the question's seeds, the walk's restart and the final fusion per their
    weights; a run that wanted it and could not (no corpus vectors, no model) ranks by words and warns."""
    status = (embed_question(query, source, embedder, settings.search_limit) if wanted(settings)
              else DenseStatus(None, "question not embedded: its weights are 0 (dense_seed_weight, "
                                     "dense_restart_weight, dense_fusion_weight)"))
    seeding = stage(plan, source, settings, progress)
    if status.dense is not None and settings.dense_seed_weight > 0:
        dense_query_seeds(query, seeding, source, settings, status.dense)
    seeding = search_full_query(query, seeding, source, settings, status.dense)
    seeding.dense_question, seeding.dense_note = status.dense is not None, status.note
    if status.warning:
        seeding.warnings.append(status.warning)
    emit(progress, "seeds", len(plan.subqueries), len(plan.subqueries), f"{len(seeding.seeds)} seeds")
    if not seeding.seeds:
        seeding.warnings.append(NO_SEEDS_WARNING)
    seeding.coverage = coverage_for_source(query, source)
    if seeding.coverage is not None and seeding.coverage.weak:
        seeding.warnings.insert(0, seeding.coverage.notice)
    seeding.semantic_feedback, seeding.semantic_note, problem = semantic_status(source, settings)
    if problem:
        seeding.warnings.append(problem)
    return seeding


def semantic_feedback_ran(source: PaperSource, settings: PipelineSettings) -> bool:
    """Whether this run's searches were fused with semantic feedback (:func:`semantic_status`)."""
    return semantic_status(source, settings)[0]


def semantic_status(source: PaperSource, settings: PipelineSettings) -> tuple[bool, str, str | None]:
    """(whether the run's searches get semantic feedback, one sentence for the run saying what it reads or why
    it is off and how to turn it on, a warning when an embeddings file was found and refused)."""
    if settings.semantic_feedback_weight <= 0:
        return False, ("semantic feedback off (w_s = 0); --semantic-feedback-weight 0.4 (the default) turns it on "
                       "where the corpus has embeddings"), None
    lookup = getattr(source, "semantic", None)
    if isinstance(lookup, Lookup):
        return lookup.embeddings is not None, lookup.note, lookup.problem
    status = getattr(source, "semantic_note", None)
    if callable(status):
        on, note = status()
        return bool(on), str(note), None
    return False, f"semantic feedback off: the source {source.name} has no paper embeddings", None


#: at most this many of the user's papers become seeds (the rest are only marked "in your library")
MAX_LIBRARY_SEEDS = 50
LIBRARY_SUBQUERY = "your library"


@dataclass(frozen=True)
class LibrarySeeding:
    """A :class:`SeedingStage`: ``base``'s seeds plus the user's papers that the source has.

    Each library paper becomes a seed with a ``kind="library"`` origin (sub-query index −1, its
    position in the user's list as relevance rank), up to ``max_seeds`` of them; a paper that the
    search also found keeps its search origins and gains the library one. ``Seeding.library`` records
    every identifier, the paper it matched and whether it seeded the run; a warning lists what the
    source does not have.
    """

    entries: Sequence[LibraryEntry]
    base: SeedingStage = search_seeds
    max_seeds: int = MAX_LIBRARY_SEEDS

    def __call__(self, plan: PlanResult, source: PaperSource, settings: PipelineSettings,
                 progress: ProgressFn | None) -> Seeding:
        seeding = self.base(plan, source, settings, progress)
        emit(progress, "seeds", len(plan.subqueries), len(plan.subqueries) + 1,
             f"matching {len(self.entries):,} papers of your library")
        items = resolve(self.entries, source)
        found = list(dict.fromkeys(i.paper_id for i in items if i.paper_id))
        chosen = found[: self.max_seeds]
        by_id = {s.paper_id: s for s in seeding.seeds}
        for position, pid in enumerate(chosen, 1):
            origin = SeedOrigin(-1, LIBRARY_SUBQUERY, position, 0, 0, kind="library")
            if pid in by_id:
                by_id[pid].origins.append(origin)
            else:
                by_id[pid] = Seed(pid, [origin])
                seeding.seeds.append(by_id[pid])
        seeded = set(chosen)
        for item in items:
            item.seed = item.paper_id in seeded
        seeding.library = UserLibrary(items, self.max_seeds)
        missing = [i.given for i in items if i.paper_id is None]
        if missing:
            shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8:,} more" if len(missing) > 8 else "")
            seeding.warnings.append(f"your library: {len(missing):,} of {len(items):,} papers are not in this "
                                    f"source ({shown}); they are not part of the run")
        if len(found) > self.max_seeds:
            seeding.warnings.append(f"your library: {len(found):,} papers found; the first {self.max_seeds} "
                                    "seed the run, the others are only marked where they appear")
        return seeding
