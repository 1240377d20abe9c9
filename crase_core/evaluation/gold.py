"""Benchmarks whose gold papers are named in another id space than the source's (LitSearch: Semantic Scholar
corpus ids ``CorpusId:<n>``, while the ``s2`` source names papers by their ``paperId``)."""

from __future__ import annotations

from collections.abc import Sequence

from crase_core.paper_source import PaperSource

CORPUS_ID = "CorpusId:"


def in_gold_space(ranked: Sequence[str], relevant: Sequence[str], source: PaperSource) -> list[str] | None:
    """``ranked`` (the source's ids) as the benchmark names papers, or None when they already are: when every
    gold id is ``CorpusId:<n>``, each ranked paper's Semantic Scholar corpus id from its external ids (the
    ``s2`` source records ``externalIds.CorpusId``; records seen during the run cost no call), a paper
    without one keeping its own id (it then matches no gold paper)."""
    if not relevant or not all(r.startswith(CORPUS_ID) for r in relevant) or all(r.startswith(CORPUS_ID) for r in ranked):
        return None
    papers = source.get(list(ranked))
    out = []
    for pid in ranked:
        paper = papers.get(pid)
        cid = dict(paper.external_ids).get("CorpusId") if paper is not None else None
        out.append(f"{CORPUS_ID}{cid}" if cid else pid)
    return out
