"""Stage 2a: the evidence graph — expand the seeds (see :mod:`crase_core.retrieval.neighbourhood`), drop ids the
source has no record of, and add the full-query text candidates the expansion did not reach."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from crase_core.paper_source import PaperSource
from crase_core.records import Paper, SearchHit, Seed
from crase_core.retrieval.neighbourhood import ExpandedGraph, expand
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.progress import ProgressFn, emit


@dataclass
class Expansion:
    """V and E (``graph``), every node's record, which nodes are seeds and which text candidates."""

    graph: ExpandedGraph
    papers: dict[str, Paper]
    seed_ids: set[str]
    text_ids: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def role(self, paper_id: str) -> Literal["seed", "expanded", "text"]:
        """``seed``, ``text`` (a full-query hit outside the citation graph) or ``expanded``."""
        return "seed" if paper_id in self.seed_ids else "text" if paper_id in self.text_ids else "expanded"


def drop_unknown(graph: ExpandedGraph, papers: dict[str, Paper]) -> list[str]:
    """Remove the nodes without a record in ``papers`` (and their edges) from ``graph``; return them."""
    missing = [n for n in graph.nodes if n not in papers]
    if missing:
        gone = set(missing)
        graph.nodes = [n for n in graph.nodes if n not in gone]
        graph.edges = [(u, v) for u, v in graph.edges if u not in gone and v not in gone]
    return missing


#: how a pool of fewer than k papers is filled (:func:`fill_sparse_pool`): "text" (full-query search hits), "hop"
#: (a second citation hop), "hop+text" or "off"; docs/corpus_formats.md compares them
POOL_FILL = "text"
FILL_MODES = ("text", "hop", "hop+text", "off")


def add_text_candidates(graph: ExpandedGraph, papers: dict[str, Paper], source: PaperSource,
                        query_hits: list[SearchHit], query_papers: dict[str, Paper], seed_ids: set[str],
                        settings: PipelineSettings, limit: int | None = None,
                        returnable: set[str] | None = None) -> list[str]:
    """Add the top ``settings.text_candidates`` full-query hits outside V to V; return their ids. With
    ``limit`` (the sparse-pool fill): the first ``limit`` hits, in search order, that the ranking cannot return
    yet — outside V, or, with ``returnable`` (:func:`rankable`), in V without any citation in E (a seed with no
    reference or citer inside the graph, which isolation pruning would drop although the search ranks it
    first) — those in V become text candidates where they are.

    Their citation edges inside V join E (with hops = 1, only those with a seed at the other end) and
    are scored like any other; the candidates are exempt from isolation pruning (their evidence is the
    text match, recorded in the trace's ``query_hits``).
    """
    in_graph = set(graph.nodes)
    if limit is None:
        text_ids = [h.paper_id for h in query_hits[: settings.text_candidates]
                    if h.paper_id not in in_graph and h.paper_id in query_papers]
    else:
        skip = in_graph if returnable is None else returnable
        text_ids = [h.paper_id for h in query_hits
                    if h.paper_id not in skip and (h.paper_id in query_papers or h.paper_id in papers)][:limit]
    new = [n for n in text_ids if n not in in_graph]
    if text_ids:
        text_set = set(text_ids)
        graph.nodes = graph.nodes + new
        papers.update({n: query_papers[n] for n in new})
        extra = [(u, v) for u, v in source.edges_among(graph.nodes) if u in text_set or v in text_set]
        if settings.hops < 1.5:
            extra = [(u, v) for u, v in extra if u in seed_ids or v in seed_ids]
        graph.edges = sorted(set(graph.edges) | set(extra))
    return text_ids


def second_hop(graph: ExpandedGraph, papers: dict[str, Paper], source: PaperSource,
               settings: PipelineSettings) -> list[str]:
    """Add the references and citers of every first-ring node (hop 1) to V at hop 2, E = every citation within
    the grown V (as ``hops`` = 2 builds it); return the new ids (those the source has a record of)."""
    if settings.hops >= 2:
        return []
    ring = sorted(n for n, h in graph.hop.items() if h == 1.0 and n in papers)
    in_graph = set(graph.nodes)
    found: list[str] = []
    for n in ring:
        nl_refs, nl_cits = source.references(n), source.citations(n)
        for x in list(dict.fromkeys(nl_refs.ids))[: settings.neighbor_cap] + \
                list(dict.fromkeys(nl_cits.ids))[: settings.neighbor_cap]:
            if x not in graph.hop and x not in in_graph:
                graph.hop[x] = 2.0
                found.append(x)
    records = source.get(found)
    new = sorted(x for x in found if x in records)
    for x in set(found) - set(new):
        del graph.hop[x]
    if new:
        papers.update({x: records[x] for x in new})
        graph.nodes = graph.nodes + new
        graph.edges = source.edges_among(graph.nodes)
    return new


def rankable(graph: ExpandedGraph, text_ids: list[str]) -> set[str]:
    """The papers of V the ranking can return: those in a citation of E and the text candidates (a node
    without any edge is pruned as isolated). Pure."""
    return {x for e in graph.edges for x in e} | set(text_ids)


def fill_sparse_pool(graph: ExpandedGraph, papers: dict[str, Paper], source: PaperSource, query_hits: list[SearchHit],
                     query_papers: dict[str, Paper], seed_ids: set[str], settings: PipelineSettings,
                     text_ids: list[str], mode: str | None = None) -> tuple[list[str], list[str], str | None]:
    """When V holds fewer than k papers the ranking can return (:func:`rankable`: a sparse citation graph), fill
    it: ``hop`` adds a second citation hop around the first ring (:func:`second_hop`), then ``text`` adds
    full-query search hits the ranking cannot return yet, in search order, until k can be returned (only where
    text candidates are on: ``text_candidates`` > 0): hits outside V, and hits in V without any citation in E —
    on a corpus without citations those are the seeds, the search's best hits, which would otherwise be pruned
    as isolated while the fill added the hits after them. Returns (papers added by the hop, by the search, the
    warning that says so); nothing changes — and no warning — when k papers can be returned already, there is
    no seed, or ``mode`` is off."""
    k, before = settings.k, len(rankable(graph, text_ids))
    mode = POOL_FILL if mode is None else mode
    if mode == "off" or before >= k or not seed_ids:
        return [], [], None
    hop = second_hop(graph, papers, source, settings) if "hop" in mode else []
    text: list[str] = []
    have = len(rankable(graph, text_ids))
    in_graph = set(graph.nodes)
    if "text" in mode and settings.text_candidates > 0 and have < k:
        text = add_text_candidates(graph, papers, source, query_hits, query_papers, seed_ids, settings,
                                   limit=k - have, returnable=rankable(graph, text_ids))
    after = len(rankable(graph, text_ids + text))
    parts = [f"{len(hop):,} papers two citation hops from the seeds"] if hop else []
    if text:
        already = sum(t in in_graph for t in text)
        parts.append(f"{len(text):,} more full-query search hits as text candidates"
                     + (f" ({already:,} of them already in the graph, without a citation there)" if already else ""))
    note = (f"sparse citation graph: the seeds, their references and citers and the text candidates give "
            f"{before:,} papers to rank, fewer than k = {k}; " + (f"added {' and '.join(parts)} ({after:,} to rank)"
                                                                  if parts else "nothing more to add"))
    if after < k:
        note += f"; the ranked list holds at most {after:,} papers (the search found no more)"
    return hop, text, note


def add_contexts(graph: ExpandedGraph, source: PaperSource) -> None:
    """Citation contexts and intents for the edges of E that the source's lists did not bring, from a source
    that keeps them per edge (a local corpus with ``citation_contexts.jsonl``: ``edge_contexts``)."""
    lookup = getattr(source, "edge_contexts", None)
    if lookup is None:
        return
    missing = [e for e in graph.edges if e not in graph.contexts and e not in graph.intents]
    for edge, (contexts, intents) in lookup(missing).items():
        if contexts:
            graph.contexts[edge] = contexts
        if intents:
            graph.intents[edge] = intents


def expand_seeds(seeds: list[Seed], query_hits: list[SearchHit], query_papers: dict[str, Paper],
                 source: PaperSource, settings: PipelineSettings, progress: ProgressFn | None = None) -> Expansion:
    """Stage 2a: V and E around the seeds (``settings.hops``, ``neighbor_cap``), plus text candidates."""
    emit(progress, "expansion", 0, len(seeds), "fetching references and citers")
    graph = expand(source, [s.paper_id for s in seeds], settings.hops, settings.neighbor_cap)
    papers = source.get(graph.nodes)
    warnings: list[str] = []
    missing = drop_unknown(graph, papers)
    if missing:
        warnings.append(f"{len(missing)} neighbour id(s) had no record at the source and were dropped")
    seed_ids = {s.paper_id for s in seeds}
    text_ids = add_text_candidates(graph, papers, source, query_hits, query_papers, seed_ids, settings)
    _, filled, note = fill_sparse_pool(graph, papers, source, query_hits, query_papers, seed_ids, settings, text_ids)
    text_ids += filled
    if note:
        warnings.append(note)
    add_contexts(graph, source)
    emit(progress, "expansion", len(seeds), len(seeds), f"|V| = {len(graph.nodes)}, |E| = {len(graph.edges)}")
    return Expansion(graph, papers, seed_ids, text_ids, warnings)
