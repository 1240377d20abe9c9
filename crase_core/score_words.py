"""A ranked paper's score in words: what share of the ranking it holds, against the average paper.

PPR (Eq. 6–7) scores are the stationary distribution of the restarting walk: a paper's score is the
share of the walk's time spent on it, so "1.2 % of the walk, 5× the average of 412 papers" is exact.
SALSA and CEP scores are put the same way as a share of their total. With a fusion setting the final
order also uses the full-query text match, so the share is the ranker's (``trace.ranking.scores``), not
the fused number the list is sorted by, and the sentence says so. Pure functions over a trace.
"""

from __future__ import annotations

from .records import RankedPaper
from .trace import RunTrace

RESTART_WORDS = {
    "query": "the walk restarts at papers in proportion to their text match with the whole query",
    "uniform": "the walk restarts at the kept seeds, uniformly",
    "relevance": "the walk restarts at the kept seeds, weighted by their search rank",
}


def score_share(trace: RunTrace, result: RankedPaper) -> tuple[float, float, int]:
    """(share of the ranker's total score, multiple of the average paper's score, papers ranked).

    Uses the ranker's own score of the paper (never the fused score, which is not a share of anything).
    """
    scores = trace.ranking.scores
    total = sum(v for v in scores.values() if v > 0)
    n = len(scores)
    if total <= 0 or n == 0:
        return 0.0, 0.0, n
    share = max(scores.get(result.paper_id, 0.0), 0.0) / total
    return share, share * n, n


def score_sentence(trace: RunTrace, result: RankedPaper) -> str:
    """E.g. ``1.2% of the random walk's time — 5.1× the average of the 412 papers in the pruned graph``."""
    share, multiple, n = score_share(trace, result)
    if n == 0:
        return "no score (nothing was ranked)"
    what = "of the random walk's time" if trace.ranking.ranker == "ppr" else f"of the total {trace.ranking.ranker} score"
    fusion = trace.settings.fusion
    if share == 0:
        sentence = f"none {what} (nothing in the pruned graph leads to it)"
    else:
        sentence = (f"{_share_text(share)} {what} — {_multiple_text(multiple)} the average of the {n:,} papers "
                    "in the pruned graph")
    if fusion != "none":
        how = "that and its" if multiple >= 1 else "its"
        sentence += f"; placed by {how} text match with the whole query ({fusion} fusion)"
    return sentence


def _share_text(share: float) -> str:
    """``1.2%``; a share that would print as 0.0% says how small it is instead."""
    return "under 0.1%" if share < 0.0005 else f"{share:.1%}"


def _multiple_text(multiple: float) -> str:
    return "under 0.1×" if multiple < 0.05 else f"{multiple:.1f}×"


def restart_words(trace: RunTrace) -> str:
    """How the run's walk restarts (the personalization setting, in words)."""
    return RESTART_WORDS.get(trace.settings.personalization, f"restart: {trace.settings.personalization}")
