"""Stage 2 expansion: seeds S → node set V and citation edges E.

* hops = 1: V = S ∪ refs(S) ∪ citers(S); E = citations of V with a seed at one end.
* hops = 1.5 (default): same V; E = every citation u→v with u, v ∈ V.
* hops = 2: V₂ = V ∪ refs/citers of every non-seed node of V; E = every citation within V₂.

With ``neighbor_cap`` set, a paper contributes at most that many references
and that many citers; the survivors are the most cited (citation count as the
source reports it, ties by id) and the cut is recorded as a :class:`Truncation`.
Cuts made by the source itself (API paging caps) are recorded too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from crase_core.paper_source import NeighborList, PaperSource
from crase_core.records import Truncation

CAP_RULE = "kept the {kept} most-cited of {total} {relation} (citation count from the source, ties by id)"


@dataclass
class ExpandedGraph:
    """V (seeds first, then by id), E (sorted), hop distance of each node, cuts, citation contexts."""

    nodes: list[str]
    edges: list[tuple[str, str]]
    hop: dict[str, float]
    truncations: list[Truncation] = field(default_factory=list)
    contexts: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    intents: dict[tuple[str, str], list[str]] = field(default_factory=dict)


def _capped(source: PaperSource, pid: str, relation: str, nl: NeighborList, cap: int | None,
            truncations: list[Truncation]) -> list[str]:
    ids = list(dict.fromkeys(nl.ids))  # de-duplicate, keep order
    if nl.truncated:
        rule = nl.truncation_rule or "the source returned a truncated list"
        truncations.append(Truncation(pid, relation, nl.total, len(ids), rule))  # type: ignore[arg-type]
    if cap is not None and len(ids) > cap:
        papers = source.get(ids)
        ranked = sorted(ids, key=lambda i: (-(papers[i].citation_count or 0) if i in papers else 1, i))
        truncations.append(Truncation(pid, relation, len(ids), cap,  # type: ignore[arg-type]
                                      CAP_RULE.format(kept=cap, total=len(ids), relation=relation)))
        ids = ranked[:cap]
    return ids


def _neighborhood(source: PaperSource, pid: str, cap: int | None, g: ExpandedGraph,
                  seed_edges: set[tuple[str, str]] | None = None) -> list[str]:
    refs = source.references(pid)
    cits = source.citations(pid)
    for nl, forward in ((refs, True), (cits, False)):
        for other, ctx in nl.contexts.items():
            g.contexts[(pid, other) if forward else (other, pid)] = ctx
        for other, intent in nl.intents.items():
            g.intents[(pid, other) if forward else (other, pid)] = intent
    kept_refs = _capped(source, pid, "references", refs, cap, g.truncations)
    kept_cits = _capped(source, pid, "citations", cits, cap, g.truncations)
    if seed_edges is not None:
        seed_edges.update((pid, r) for r in kept_refs)
        seed_edges.update((c, pid) for c in kept_cits)
    return kept_refs + kept_cits


def expand(source: PaperSource, seed_ids: Sequence[str], hops: float = 1.5,
           neighbor_cap: int | None = None) -> ExpandedGraph:
    """Build V and E around ``seed_ids`` (see the module docstring)."""
    g = ExpandedGraph(nodes=[], edges=[], hop={})
    for s in seed_ids:
        g.hop.setdefault(s, 0.0)
    seed_edges: set[tuple[str, str]] = set()
    for s in seed_ids:
        for n in _neighborhood(source, s, neighbor_cap, g, seed_edges):
            g.hop.setdefault(n, 1.0)
    if hops >= 2:
        first_ring = sorted(n for n, h in g.hop.items() if h == 1.0)
        for n in first_ring:
            for nn in _neighborhood(source, n, neighbor_cap, g):
                g.hop.setdefault(nn, 2.0)
    seeds = list(dict.fromkeys(seed_ids))
    seed_set = set(seeds)
    g.nodes = seeds + sorted(n for n in g.hop if n not in seed_set)
    if hops < 1.5:
        # the seeds' own (capped) lists are exactly the seed–neighbour citations: no further source call
        edges = sorted(e for e in seed_edges if e[0] in g.hop and e[1] in g.hop)
    else:
        edges = source.edges_among(g.nodes)
    g.edges = edges
    kept = set(edges)
    g.contexts = {e: c for e, c in g.contexts.items() if e in kept}
    g.intents = {e: c for e, c in g.intents.items() if e in kept}
    return g
