"""Why a result has its rank, in the app: the score parts (``RankedPaper.score_parts``) as a line and a table.

Everything taken from the trace is escaped (:func:`~crase_app.display.md_escape`): titles and part names
are shown as text, never as markdown or HTML.
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from crase_app.display import md_escape, shorten_words, tex_plain
from crase_core.records import PathShare, RankedPaper, ScorePart
from crase_core.trace import RunTrace
from crase_core.views.score_words import NEGLIGIBLE, source_words, term_words, why_line

#: the help text of every "why" line (constant)
WHY_HELP = ("The score is a sum of parts: the text search's share (BM25, term proximity, semantic feedback) and "
            "the walk's share, split by the restart source it came from. The walk is linear in where it restarts, "
            "so that split is exact; a rank term (reciprocal-rank fusion) is split in the walk score's proportions.")


def why_caption(trace: RunTrace, r: RankedPaper) -> str:
    """The compact "why" line of a result (escaped markdown), or "" for a trace without score parts."""
    line = why_line(trace, r)
    return md_escape(line) if line else ""


def _title(trace: RunTrace, pid: str, limit: int = 40) -> str:
    try:
        return shorten_words(tex_plain(trace.node(pid).paper.title), limit)
    except KeyError:
        return pid


def _path_text(trace: RunTrace, path: PathShare) -> str:
    steps = [f"“{_title(trace, path.nodes[0], 28)}”"]
    for node, along in zip(path.nodes[1:], path.along, strict=False):
        steps.append(("→ " if along else "⇠ ") + f"“{_title(trace, node, 28)}”")
    return " ".join(steps)


def _share(value: float, score: float) -> str:
    return f"{value / score:.1%}" if score else "–"


def _terms(r: RankedPaper) -> list[tuple[str, str, float]]:
    """(name, formula, value) of each fusion term of ``r``, in order."""
    out: dict[str, tuple[str, str, float]] = {}
    for p in r.score_parts:
        if p.term and p.term not in out:
            out[p.term] = (p.part.split(" · ")[0], p.term, sum(x.value for x in r.score_parts if x.term == p.term))
    return list(out.values())


def terms_in_words(r: RankedPaper) -> str:
    """The score's terms that carry weight, one bullet each in plain words with its value and share."""
    lines = [f"- {md_escape(term_words(name, formula)[:1].upper() + term_words(name, formula)[1:])}: "
             f"**{value:.4f}** ({_share(value, r.score)} of the score)"
             for name, formula, value in _terms(r) if abs(value) >= NEGLIGIBLE]
    return "\n".join(lines)


def parts_markdown(trace: RunTrace, r: RankedPaper, limit: int | None = None) -> str:
    """The parts that carry weight (a value that reads 0.00000 is left out, and counted) as a markdown table
    grouped by fusion term: a bold row per term (its name, value and share of the score), then its parts, each
    walk part followed by its strongest paths; ``limit``: the largest parts only, the rest summed in one row."""
    parts: Sequence[ScorePart] = [p for p in r.score_parts if abs(p.value) >= NEGLIGIBLE]
    hidden = len(r.score_parts) - len(parts)
    if limit is not None and len(parts) > limit:
        top = sorted(parts, key=lambda p: -abs(p.value))[:limit]
        rest = [p for p in parts if p not in top]
        parts = [p for p in parts if p in top] + [ScorePart(f"{len(rest)} smaller parts", sum(p.value for p in rest),
                                                            term="", signal="", component=f"{len(rest)} smaller parts")]
    lines = ["| part | value | share |", "|---|---:|---:|"]
    term: str | None = None
    for p in parts:
        if p.term and p.term != term:
            term = p.term
            value = sum(x.value for x in r.score_parts if x.term == term)
            name = p.part.split(" · ")[0]
            lines.append(f"| **{md_escape(name)}** | **{value:.5f}** | **{_share(value, r.score)}** |")
        what = (source_words(trace, p.component, p.source) if p.signal == "walk" and p.source else p.component) or p.part
        if p.signal == "walk" and p.source:
            what = f"{walk_label(trace)} from {what}"
        elif p.signal == "text":
            what = f"text match: {what}"
        lines.append(f"| {md_escape(what)} | {p.value:.5f} | {_share(p.value, r.score)} |")
        for path in p.paths:
            if abs(path.value) >= NEGLIGIBLE:
                lines.append(f"| &nbsp;&nbsp;↳ path {md_escape(_path_text(trace, path))} | {path.value:.5f} | |")
    if hidden:
        lines.append(f"| {hidden} part{'s' if hidden != 1 else ''} under 0.00001 (not shown) | | |")
    total = sum(p.value for p in r.score_parts)
    lines.append(f"| **sum of the parts** (the score is {r.score:.5f}) | **{total:.5f}** | |")
    return "\n".join(lines)


def formulas_markdown(r: RankedPaper) -> str:
    """Each term's formula with the numbers it was computed from (the exact form of :func:`terms_in_words`)."""
    return "  \n".join(f"**{md_escape(name)}** = {md_escape(formula)} = {value:.6f}" for name, formula, value in _terms(r))


def walk_label(trace: RunTrace) -> str:
    return f"walk ({trace.ranking.ranker.upper()})"


def why_details(trace: RunTrace, r: RankedPaper) -> None:
    """The parts table and the terms' formulas (inside the caller's expander or container)."""
    if not r.score_parts:
        st.caption("This run records no score parts (it was saved before they were).")
        return
    words = terms_in_words(r)
    if words:
        st.markdown("The score adds up:\n" + words)
    st.markdown(parts_markdown(trace, r))
    st.caption(formulas_markdown(r))
    st.caption("→ cites · ⇠ back along a citation to another paper citing the same one (SALSA's step). "
               "A path's value is its exact term of the walk's sum over paths. " + WHY_HELP)


def why_block(trace: RunTrace, pid: str) -> None:
    """The node inspector's short "why this rank": the line and the largest parts (results only)."""
    r = next((x for x in trace.results if x.paper_id == pid), None)
    if r is None or not r.score_parts:
        return
    st.markdown(f"**Why rank {r.rank}:** {why_caption(trace, r)}", help=WHY_HELP)
    with st.expander("Score parts"):
        st.markdown(parts_markdown(trace, r, limit=8))
