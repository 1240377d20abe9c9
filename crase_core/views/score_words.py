"""A ranked paper's score in words: what share of the ranking it holds, against the average paper.

PPR (Eq. 6–7) scores are the stationary distribution of the restarting walk: a paper's score is the
share of the walk's time spent on it, so "1.2 % of the walk, 5× the average of 412 papers" is exact.
SALSA and CEP scores are put the same way as a share of their total. With a fusion setting the final
order also uses the full-query text match, so the share is the ranker's (``trace.ranking.scores``), not
the fused number the list is sorted by, and the sentence says so. :func:`why_line` and :func:`why_text` put a
result's score parts (:mod:`crase_core.ranking.score_parts`) in words. Pure functions over a trace.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from crase_core.records import PathShare, RankedPaper, ScorePart
from crase_core.trace import RunTrace
from crase_core.views.tex import to_plain

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


# ---- why this rank: the score parts in words ---------------------------------------------------------------
SIGNAL_WORDS = {"walk": "walk", "text": "text match", "tie": "tie order", "floor": "text floor"}


def signal_totals(parts: Sequence[ScorePart]) -> dict[str, float]:
    """The parts summed by signal (walk, text, tie, floor), in the order they first appear."""
    out: dict[str, float] = {}
    for p in parts:
        out[p.signal or "other"] = out.get(p.signal or "other", 0.0) + p.value
    return out


def component_totals(parts: Sequence[ScorePart], signal: str) -> list[tuple[str, float, str | None]]:
    """(component, summed value, restart source) of one signal's parts, largest first."""
    total: dict[str, float] = {}
    source: dict[str, str | None] = {}
    for p in parts:
        if p.signal == signal:
            total[p.component] = total.get(p.component, 0.0) + p.value
            source.setdefault(p.component, p.source)
    return sorted(((c, v, source[c]) for c, v in total.items()), key=lambda x: -x[1])


def _pct(value: float, score: float) -> str:
    if score == 0:
        return "–"
    share = value / score
    return "under 1%" if 0 < share < 0.005 else f"{share:.0%}"


def _short(text: str, limit: int = 48) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def source_words(trace: RunTrace, component: str, source: str | None) -> str:
    """A walk component in words: ``restart at “Title…”`` (the paper's title for its id)."""
    if source is None:
        return component.split(") ", 1)[-1] if ") " in component else component
    try:
        title = trace.node(source).paper.title
    except KeyError:
        title = source
    return f"restart at “{_short(to_plain(title))}”"


#: a value shown with 5 decimals that reads 0.00000 carries no weight in the score
NEGLIGIBLE = 5e-6
_NUMBER = {name: re.compile(rf"\b{name} = (\d+)") for name in ("r", "s", "r_t")}


def term_words(short: str, label: str) -> str:
    """A fusion term (:class:`~crase_core.records.FusionTerm` ``short``, ``label``) in plain words, with the
    place it was computed from (``#6``); the formula itself stays in ``label``."""
    def place(name: str) -> str:
        m = _NUMBER[name].search(label)
        return f" (#{m.group(1)})" if m else ""

    words = {
        "fused-rank term": f"its place{place('r')} when the citation walk and the text search are blended: the "
                           "higher the place, the larger this part",
        "search-rank term": f"its place{place('s')} in the text search for the whole question",
        "walk-rank term": f"its place{place('r')} in the citation walk's ranking",
        "text-rank term": f"its place{place('r_t')} in the text search for the whole question",
        "walk score": "its score in the citation walk",
        "walk term": "its citation-walk score, as a share of the best paper's",
        "text term": "its text-search score, as a share of the best paper's",
        "text floor": "a guaranteed place among the text search's top hits",
    }
    return words.get(short, short)


def why_line(trace: RunTrace, result: RankedPaper) -> str:
    """One line: what the score is made of, by signal, with the walk's largest restart source and the text
    score's ingredients; ``""`` when the trace records no parts (written before they were)."""
    parts, score = result.score_parts, result.score
    if not parts:
        return ""
    pieces = []
    for signal, value in signal_totals(parts).items():
        if signal == "walk":
            top = component_totals(parts, "walk")
            lead = (f"; largest source: {source_words(trace, top[0][0], top[0][2])} {_pct(top[0][1], score)}"
                    if top and top[0][2] is not None and value >= 0.1 * score else "")
            pieces.append(f"{_pct(value, score)} walk ({trace.ranking.ranker.upper()}{lead})")
        elif signal == "text":
            inner = ", ".join(f"{c} {_pct(v, score)}" for c, v, _ in component_totals(parts, "text")[:4])
            pieces.append(f"{_pct(value, score)} text match ({inner})")
        elif signal == "floor":
            pieces.append(f"text floor {value:+.4f}")
        else:
            pieces.append(f"{_pct(value, score)} {SIGNAL_WORDS.get(signal, signal)}")
    return f"score {score:.4f} = " + " + ".join(pieces)


def _path_words(path: PathShare) -> str:
    steps = [path.nodes[0]]
    for node, along in zip(path.nodes[1:], path.along, strict=False):
        steps.append(("→ " if along else "⇠ ") + node)
    return " ".join(steps)


def why_text(trace: RunTrace, result: RankedPaper) -> list[str]:
    """The full "why this rank" of one result, line by line (plain text; the caller makes it printable):
    each fusion term with its formula, its parts with their values and shares of the score, each walk
    part's strongest paths, and the check that the parts sum to the score."""
    paper = trace.node(result.paper_id).paper
    lines = [f"Rank {result.rank} · score {result.score:.6f} · {paper.title} ({paper.year or 'n.d.'}) — {paper.id}",
             f"Ranker {trace.ranking.ranker.upper()}, fusion {trace.settings.fusion}; {restart_words(trace)}."]
    if result.reason:  # why it is in the list at all: its trail, its seed, or its text match
        lines.append(f"Why it is here: {result.reason}")
    if not result.score_parts:
        return lines + ["This trace records no score parts (it was written before they were); "
                        "`crase rerank RUN.json --json NEW.json` ranks it again with them."]
    walk = trace.ranking.scores.get(result.paper_id)
    hit = next((h for h in trace.query_hits if h.paper_id == result.paper_id), None)
    lines.append(f"Walk score π = {walk:.6g}" if walk is not None else "No walk score (not in the walk's graph)")
    lines[-1] += (f"; full-query search: rank #{hit.relevance_rank}, score {hit.score:.4g}" if hit is not None
                  else "; not returned by the full-query search")
    lines.append("The score is the sum of these parts:")
    term = None
    for p in result.score_parts:
        if p.term != term:
            term = p.term
            value = sum(x.value for x in result.score_parts if x.term == term)
            lines.append(f"  {p.part.split(' · ')[0]} = {value:.6f}" + (f"   [{term}]" if term else ""))
        where = (f"{source_words(trace, p.component, p.source)} ({p.source})" if p.signal == "walk" and p.source
                 else p.component)
        lines.append(f"    {p.value:>10.6f}  {_pct(p.value, result.score):>8}  {where}")
        for path in p.paths:
            lines.append(f"                 path {_path_words(path)}  carries {path.value:.6f}")
    total = sum(p.value for p in result.score_parts)
    lines.append(f"  parts sum to {total:.6f} (score {result.score:.6f}); → cites, ⇠ back to another paper citing it")
    return lines
