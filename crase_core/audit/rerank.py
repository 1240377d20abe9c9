"""Re-rank a saved run without recomputing anything but the ranking: with another ranker, or with auditors' verdicts.

* :func:`rerank` ranks a trace's pruned graph with any registered ranker. The kept nodes, kept edges with
  their weights, the restart distribution (kept seeds, the run's ``personalization`` mode) and the fusion
  with the full-query text score (the run's ``fusion`` settings) are read from the trace, so
  ``rerank(trace, trace.settings.ranker)`` reproduces the run's own order, text floor (``text_floor``),
  anchor text in the restart (the trace's ``restart_hits``) and μ(q) (from the trace's query) included.
* :func:`apply_verdicts` makes a new run from a trace and auditors' keep / prune decisions on some of its
  edges (``crase rerank``, the Audit page): each named edge takes the auditor's decision; the nodes' and
  seeds' fates are decided again from the edges (a node survives with a kept edge, or by its text
  match); the graph is ranked again (restart, walk, fusion, text floor, score parts). Claims, matrices,
  Δ and the other edges' decisions are the parent's: no model call, no cache read. An edge an auditor keeps
  that the pipeline pruned gets weight max(Δ, 1/n)·age(v)^(−β), n its citing claims: the auditor judged
  that the cited paper supports at least one claim of the citing paper, which is Δ ≥ 1/n; an edge an
  auditor prunes gets weight 0. The new run names its ``parent_run_id`` and lists its ``applied_verdicts``.

Pure functions of the trace.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from crase_core.cache import stable_hash
from crase_core.errors import InputError
from crase_core.ranking.pruning import (
    RULE_AUDITOR,
    decide_seed_fates,
    edge_tallies,
    node_prune_reason,
    surviving_nodes,
)
from crase_core.ranking.rankers import get_ranker, ranker_names
from crase_core.records import AppliedVerdict, Counters, EdgeRecord, RankingResult
from crase_core.retrieval.library import mark_in_library
from crase_core.stages.ranking import is_ranking_note, place_nodes, rank_graph, ranked_results, score_parts
from crase_core.trace import RunTrace, check_graph
from crase_core.views.terminal import printable

#: the longest CITING:CITED argument read (two paper ids and a colon)
MAX_EDGE_ARG = 600


@dataclass
class Reranked:
    """One ranker on a trace's kept graph: its own scores (``result``, before fusion), the final order's
    1-based ranks (``ranks``) and scores (``scores``, fused, text floor applied), and the 1-based rank of
    each node by the ranker's own score (``walk_ranks``, ties broken like the fusion's)."""

    ranker: str
    result: RankingResult
    ranks: dict[str, int]
    scores: dict[str, float]
    walk_ranks: dict[str, int]


def _walk_ranks(trace: RunTrace, scores: dict[str, float]) -> dict[str, int]:
    order = {n: i for i, n in enumerate([s.paper_id for s in trace.seeds] + [n.paper.id for n in trace.nodes])}
    items = sorted(scores, key=lambda n: (-scores[n], order.get(n, len(order)), n))
    return {n: i for i, n in enumerate(items, 1)}


def text_candidate_ids(trace: RunTrace) -> list[str]:
    """The nodes the run kept by their text match whatever their edges (``text_match``: the text candidates and
    the question's own top hits, :func:`crase_core.ranking.pruning.text_match_ids`), in V's order."""
    return [n.paper.id for n in trace.nodes if n.text_match]


def rerank(trace: RunTrace, ranker: str) -> Reranked:
    """Rank ``trace``'s kept graph with ``ranker`` (a name in :data:`crase_core.ranking.rankers.REGISTRY`)."""
    get_ranker(ranker)  # an unknown name fails here, before anything else
    check_graph(trace)
    alive = {n.paper.id for n in trace.nodes if n.kept}
    if not alive:
        return Reranked(ranker, RankingResult(ranker, {}), {}, {}, {})
    ranked = rank_graph(ranker, [n.paper.id for n in trace.nodes], alive,
                        text_candidate_ids(trace),
                        ((e.citing, e.cited, e.weight) for e in trace.edges if e.kept), trace.seeds,
                        trace.query_hits, trace.settings, trace.restart_hits, query=trace.query)
    return Reranked(ranker, ranked.ranking, {n: i for i, (n, _) in enumerate(ranked.order, 1)}, dict(ranked.order),
                    _walk_ranks(trace, ranked.ranking.scores))


def rerank_all(trace: RunTrace) -> dict[str, Reranked]:
    """Every registered ranker on the same kept graph, keyed by ranker name."""
    return {name: rerank(trace, name) for name in ranker_names()}


# ---- auditors' verdicts -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EdgeVerdict:
    """An auditor's decision on one edge: keep it or prune it; who decided and how (for the new run's record)."""

    citing: str
    cited: str
    keep: bool
    auditors: tuple[str, ...] = ()
    note: str = ""


def parse_edge(text: str, edges: Iterable[tuple[str, str]]) -> tuple[str, str]:
    """``CITING:CITED`` as an edge of ``edges``; :class:`InputError` for anything else.

    Paper ids may hold a colon themselves, so every split at a colon is tried: exactly one must name an
    edge of the run. Malformed text (no colon, an empty side, control characters, too long) and an edge
    the run does not have get one line that says which.
    """
    shown = printable(text)[:120]
    if len(text) > MAX_EDGE_ARG:
        raise InputError(f"the edge {shown}… is longer than {MAX_EDGE_ARG} characters; expected CITING:CITED")
    if printable(text) != text or any(c.isspace() for c in text):
        raise InputError(f"the edge {shown!r} holds spaces or control characters; expected CITING:CITED")
    cuts = [i for i, c in enumerate(text) if c == ":" and 0 < i < len(text) - 1]
    if not cuts:
        raise InputError(f"malformed edge {shown!r}: expected CITING:CITED (two paper ids joined by a colon)")
    known = set(edges)
    found = [(text[:i], text[i + 1:]) for i in cuts if (text[:i], text[i + 1:]) in known]
    if not found:
        raise InputError(f"the run has no edge {shown} (CITING:CITED; `crase show RUN.json --edges` lists them)")
    if len(found) > 1:
        raise InputError(f"the edge {shown} is ambiguous: it can be read as "
                         + " or ".join(f"{printable(a)} → {printable(b)}" for a, b in found))
    return found[0]


def check_verdicts(verdicts: Sequence[EdgeVerdict]) -> None:
    """:class:`InputError` when one edge is both kept and pruned."""
    decided: dict[tuple[str, str], bool] = {}
    for v in verdicts:
        key = (v.citing, v.cited)
        if decided.get(key, v.keep) != v.keep:
            raise InputError(f"the edge {printable(v.citing)}:{printable(v.cited)} is given as both --prune and --keep")
        decided[key] = v.keep


def auditor_weight(e: EdgeRecord) -> float:
    """The weight of an edge an auditor keeps: max(Δ, 1/n)·age(v)^(−β), n its citing claims (module docstring)."""
    n = max(len(e.supported), len(e.matrix), 1)
    return max(e.delta, 1.0 / n) * e.age_factor


def _who(v: EdgeVerdict) -> str:
    if not v.auditors:
        return "an auditor's verdict"
    names = ", ".join(printable(a) for a in v.auditors)
    return f"the verdict of {names}"


def apply_edge_verdict(e: EdgeRecord, v: EdgeVerdict) -> AppliedVerdict:
    """Set edge ``e``'s decision to the verdict's (module docstring); what was applied."""
    applied = AppliedVerdict(e.citing, e.cited, v.keep, e.kept, list(v.auditors), v.note)
    if v.keep and not e.kept:
        e.kept, e.weight, e.rule = True, auditor_weight(e), RULE_AUDITOR
        e.decision = (f"kept by {_who(v)}: the cited paper supports at least one citing claim; weight "
                      f"max(Δ, 1/n)·age^(−β) = {e.weight:.3g} (the pipeline had: {e.decision})")
    elif not v.keep and e.kept:
        e.kept, e.weight, e.rule = False, 0.0, RULE_AUDITOR
        e.decision = f"pruned by {_who(v)} (the pipeline had: {e.decision})"
    return applied


def refate(trace: RunTrace, audited: Iterable[tuple[str, str]] = ()) -> set[str]:
    """Decide every node's and seed's fate again from the trace's edges (stage 2c's rules); the kept node ids.
    A seed pruned with edges that ``audited`` names (pruned by an auditor) says so."""
    ids = [n.paper.id for n in trace.nodes]
    alive = surviving_nodes(ids, trace.edges, text_candidate_ids(trace))
    degree, kept_degree, rules = edge_tallies(trace.edges)
    for n in trace.nodes:
        n.kept = n.paper.id in alive
        n.prune_reason = "" if n.kept else node_prune_reason(degree[n.paper.id])
        if not n.kept:
            n.score, n.rank = 0.0, None
    decide_seed_fates(trace.seeds, alive, degree, kept_degree, rules,
                      {h.paper_id: h.relevance_rank for h in trace.query_hits})
    by_auditor: Counter[str] = Counter()
    pruned_by_auditor = set(audited)
    for e in trace.edges:
        if not e.kept and (e.citing, e.cited) in pruned_by_auditor:
            by_auditor.update((e.citing, e.cited))
    for seed in trace.seeds:
        if seed.fate == "pruned" and by_auditor[seed.paper_id]:
            seed.fate_reason = (f"pruned: all {degree[seed.paper_id]} of its edges are pruned, "
                                f"{by_auditor[seed.paper_id]} of them by an auditor's verdict")
    return alive


def rerank_trace(trace: RunTrace, alive: set[str]) -> list[str]:
    """Rank ``trace``'s graph again (as stage 3 does) and set its ranking, node scores and results; the
    ranking's warnings."""
    settings = trace.settings
    notes: list[str] = []
    ranked = rank_graph(settings.ranker, [n.paper.id for n in trace.nodes], alive,
                        text_candidate_ids(trace),
                        ((e.citing, e.cited, e.weight) for e in trace.edges if e.kept), trace.seeds,
                        trace.query_hits, settings, trace.restart_hits, notes, query=trace.query)
    place_nodes(trace.nodes, ranked)
    top = [n for n, _ in ranked.order[: settings.k]]
    trace.ranking = ranked.ranking
    trace.results = ranked_results(ranked.order, settings.k, trace.seeds, trace.edges, alive,
                                   {n.paper.id: n.paper.title for n in trace.nodes},
                                   text_candidate_ids(trace), trace.query_hits,
                                   query_restart=settings.personalization == "query" or settings.fusion != "none",
                                   parts=score_parts(ranked, settings.ranker, settings, top, trace.query_hits))
    if trace.library is not None:
        mark_in_library(trace.library.found_ids, trace.nodes, trace.results)
    return notes


def decision_copy(trace: RunTrace) -> RunTrace:
    """A copy of ``trace`` whose decisions can change without touching it: new edge, node, seed and result
    records (every field that re-ranking sets); the papers, claims, matrices and search hits, which it never
    changes, are shared (a deep copy of a 7,000-edge run takes seconds)."""
    return dataclasses.replace(
        trace, edges=[dataclasses.replace(e) for e in trace.edges], nodes=[dataclasses.replace(n) for n in trace.nodes],
        seeds=[dataclasses.replace(s, origins=list(s.origins)) for s in trace.seeds],
        results=[dataclasses.replace(r) for r in trace.results], warnings=list(trace.warnings),
        timings=dict(trace.timings), counters=dataclasses.replace(trace.counters),
        applied_verdicts=list(trace.applied_verdicts))


def apply_verdicts(trace: RunTrace, verdicts: Sequence[EdgeVerdict], now: _dt.datetime | None = None) -> RunTrace:
    """A new run: ``trace`` with ``verdicts`` applied to its edges, fates decided again and the graph ranked
    again (module docstring). ``trace`` itself is not changed. Its edges must be the trace's
    (:class:`InputError` otherwise, or for one edge both kept and pruned)."""
    check_graph(trace)
    check_verdicts(verdicts)
    started = time.perf_counter()
    child = decision_copy(trace)
    by_edge = {(e.citing, e.cited): e for e in child.edges}
    applied = []
    for v in verdicts:
        e = by_edge.get((v.citing, v.cited))
        if e is None:
            raise InputError(f"the run has no edge {printable(v.citing)} → {printable(v.cited)}")
        applied.append(apply_edge_verdict(e, v))
    notes = rerank_trace(child, refate(child, [(a.citing, a.cited) for a in applied if not a.keep]))
    changed = sum(a.keep != a.was_kept for a in applied)
    child.warnings = [w for w in trace.warnings if not is_ranking_note(w)] + notes + [
        f"re-ranked from run {trace.run_id or '(unnamed)'} with {len(applied)} auditor verdict(s) applied "
        f"({changed} changed an edge's decision); claims, matrices and the other edges are the parent run's"]
    child.parent_run_id = trace.run_id
    child.applied_verdicts = applied
    child.counters = Counters()
    child.timings = {"rerank": round(time.perf_counter() - started, 6)}
    child.created_at = (now or _dt.datetime.now(_dt.UTC)).isoformat(timespec="seconds")
    child.run_id = stable_hash([trace.run_id, [(a.citing, a.cited, a.keep) for a in applied]])[:16]
    if trace.recall_estimate is not None:  # the parent's estimate was of the parent's list
        from crase_core.recall.estimate import reestimate

        child.recall_estimate = reestimate(child, trace.recall_estimate)
    return child


@dataclass(frozen=True)
class RankChange:
    """A paper's rank among the kept papers in the parent run and in the re-ranked one (None: not ranked)."""

    paper_id: str
    before: int | None
    after: int | None

    @property
    def moved(self) -> int | None:
        """Places gained (positive) or lost (negative); None when it was not ranked in one of the runs."""
        return None if self.before is None or self.after is None else self.before - self.after


def rank_changes(parent: RunTrace, child: RunTrace) -> list[RankChange]:
    """Every paper in either run's results whose rank changed, the largest moves first (a paper that
    entered or left the ranking first of all)."""
    before = {n.paper.id: n.rank for n in parent.nodes}
    after = {n.paper.id: n.rank for n in child.nodes}
    ids = dict.fromkeys([r.paper_id for r in parent.results] + [r.paper_id for r in child.results])
    changes = [RankChange(pid, before.get(pid), after.get(pid)) for pid in ids if before.get(pid) != after.get(pid)]
    return sorted(changes, key=lambda c: (c.moved is not None, -abs(c.moved or 0), c.after or 10**9, c.paper_id))
