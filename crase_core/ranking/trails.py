"""Evidence trails: the best path from a kept seed to each ranked paper.

"Best" = the path the walk most likely takes: along citations (u→v, the
walk's direction), maximising the product of transition probabilities
P(u→v) = w(u→v)/Σ w(u→·). A paper the walk cannot reach from any seed (for
example one that only *cites* a seed) gets the best path that goes against
citations where it must; each such step costs P(v→u) times a penalty of 1/4,
and the step is marked ``along_citation=False``. Pure functions, and the
reason each ranked paper gives for being in the answer (:func:`explain`).
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence

from crase_core.records import EdgeRecord, Seed, SeedOrigin, TrailStep

BACKWARD_PENALTY = math.log(4.0)


def best_trails(seeds: Sequence[str], edges: Iterable[EdgeRecord],
                targets: Collection[str] | None = None) -> dict[str, list[TrailStep]]:
    """Trail (list of steps, [] for a seed itself) for every node reachable from a kept seed; with ``targets``,
    for those of them the walk reaches (the search stops once all are settled: the same trails, sooner).

    Example: a seed ``s`` citing ``a`` (w 0.5) and ``b`` (w 1.5) gives ``a`` the one-step trail s→a.

    >>> from crase_core.records import EdgeRecord
    >>> e = [EdgeRecord("s", "a", delta=0.5, weight=0.5, kept=True), EdgeRecord("s", "b", delta=1, weight=1.5, kept=True)]
    >>> [(t.source, t.target) for t in best_trails(["s"], e)["a"]]
    [('s', 'a')]
    """
    kept = [e for e in edges if e.kept and e.weight > 0]
    out_w: dict[str, float] = defaultdict(float)
    for e in kept:
        out_w[e.citing] += e.weight
    # adjacency as plain tuples (neighbour, cost, edge index, along the citation); steps are built per trail
    adj: dict[str, list[tuple[str, float, int, bool]]] = defaultdict(list)
    log = math.log
    for i, e in enumerate(kept):
        cost = -log(e.weight / out_w[e.citing])
        adj[e.citing].append((e.cited, cost, i, True))
        adj[e.cited].append((e.citing, cost + BACKWARD_PENALTY, i, False))
    dist: dict[str, float] = {}
    prev: dict[str, tuple[str, int, bool] | None] = {}
    heap: list[tuple[float, int, str]] = []
    for order, s in enumerate(seeds):
        if s not in dist:
            dist[s] = 0.0
            prev[s] = None
            heapq.heappush(heap, (0.0, order, s))
    counter = len(seeds)
    done: set[str] = set()
    wanted = None if targets is None else set(targets)
    inf = math.inf
    while heap:
        d, _, u = heapq.heappop(heap)
        if u in done:
            continue
        done.add(u)
        if wanted is not None:
            wanted.discard(u)
            if not wanted:
                break
        for v, cost, i, along in adj.get(u, ()):
            nd = d + cost
            if nd < dist.get(v, inf) - 1e-15:
                dist[v] = nd
                prev[v] = (u, i, along)
                counter += 1
                heapq.heappush(heap, (nd, counter, v))
    trails: dict[str, list[TrailStep]] = {}
    for node in (done if targets is None else [t for t in targets if t in done]):
        steps: list[TrailStep] = []
        cur = node
        while (link := prev[cur]) is not None:
            parent, i, along = link
            e = kept[i]
            steps.append(TrailStep(e.citing, e.cited, e.delta, True) if along
                         else TrailStep(e.cited, e.citing, e.delta, False))
            cur = parent
        trails[node] = list(reversed(steps))
    return trails


# ---- why a paper is in the answer ----------------------------------------------------------------------
RESTART_ONLY_REASON = "reached only through restarts (no path from a kept seed)"


def origin_text(o: SeedOrigin) -> str:
    """Where one seed origin comes from, in words: a sub-query (ρ number and text), the question's own
    search, or the user's library; with the ranks there."""
    if o.kind == "library":
        return "your library"
    where = "the question's own search" if o.kind == "question" else f"sub-query {o.subquery_index + 1} “{o.subquery}”"
    return f"{where} (relevance #{o.relevance_rank}, recency #{o.recency_rank})"


def seed_reason(seed: Seed) -> str:
    """A seed's reason: the sub-query that ranked it best, with its two ranks there (or: the user's library)."""
    searched = [o for o in seed.origins if o.kind != "library"]
    if not searched:
        return "seed from your library (a paper you already have)"
    o = min(searched, key=lambda o: o.relevance_rank)
    extra = f" (+{len(searched) - 1} more sub-queries)" if len(searched) > 1 else ""
    if len(searched) < len(seed.origins):
        extra += "; also in your library"
    return f"seed from {origin_text(o)}{extra}"


def trail_reason(trail: Sequence[TrailStep], titles: Mapping[str, str]) -> str:
    """A reached paper's reason: its trail from a seed, with the Δ of each step (titles shortened)."""
    def short(pid: str) -> str:
        t = titles.get(pid, pid)
        return t if len(t) <= 60 else t[:57] + "…"

    first = trail[0]
    if len(trail) == 1:
        verb = "cited by" if first.along_citation else "cites"
        return f"{verb} seed “{short(first.source)}” (Δ {first.delta:.2f})"
    parts = [f"seed “{short(first.source)}”"]
    for step in trail:
        arrow = "→" if step.along_citation else "←"
        parts.append(f"{arrow} (Δ {step.delta:.2f}) “{short(step.target)}”")
    return f"{len(trail)} steps: " + " ".join(parts)


def text_kept_note(text_rank: int) -> str:
    """What keeps a paper without a kept citation edge in the ranking: its text match."""
    return (f"kept by its text match (#{text_rank} of the question's own search) although no citation edge of "
            "it was kept")


def text_candidate_reason(text_rank: int, query_restart: bool = True, edgeless: bool = False) -> str:
    """A text candidate's reason (a full-query hit no trail from a kept seed reaches); ``edgeless``: it has no
    kept citation edge, so its text match alone keeps it.

    Under the query restart its score is its restart mass; under a seed restart it has none, so the
    reason says it is ranked only by what the walk brings it.
    """
    how = ("scored by its full-query text relevance (the query restart and rank fusion)" if query_restart
           else "the seed restart gives it no mass, so only citations from the graph can score it")
    what = ("kept by its text match although no citation edge of it was kept" if edgeless
            else "a text candidate no trail from a kept seed reaches")
    return f"text match #{text_rank} for the full query ({what}; {how})"


def explain(paper_id: str, trail: list[TrailStep] | None, seed: Seed | None, text_rank: int | None,
            titles: Mapping[str, str], query_restart: bool = True,
            edgeless: bool = False) -> tuple[str, str | None, list[TrailStep]]:
    """(reason, the seed the trail starts from, trail) of one ranked paper.

    A seed explains itself (empty trail); a text candidate without a trail by its full-query rank
    (``text_rank``, None when it is not one); any other paper by its trail, or as reached only
    through the walk's restarts when no trail reaches it. ``query_restart``: whether the walk restarts
    by full-query relevance (personalization ``query``). ``edgeless``: the paper has no kept citation edge,
    so a paper with a ``text_rank`` is there by its text match alone, and the reason says so.
    """
    if seed is not None:
        if edgeless and text_rank is not None:
            return f"{text_kept_note(text_rank)}; {seed_reason(seed)}", paper_id, []
        return seed_reason(seed), paper_id, []
    if text_rank is not None and not trail:
        return text_candidate_reason(text_rank, query_restart, edgeless), None, []
    if trail:
        return trail_reason(trail, titles), trail[0].source, trail
    return RESTART_ONLY_REASON, None, []
