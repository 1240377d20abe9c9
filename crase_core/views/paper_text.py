"""Paper text for plain-text places (graph labels, tooltips, table cells): author lines, short titles, names.

Pure functions on top of the one TeX renderer (:mod:`crase_core.views.tex`); nothing here produces markup.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from crase_core.views.tex import to_plain


def tex_plain(text: object) -> str:
    """Paper text with its TeX in Unicode (``$R^2$`` → ``R²``, ``Ba\\~nados`` → ``Bañados``); never HTML."""
    return to_plain(text)


def tex_accents(text: str) -> str:
    """Author names with TeX accents as letters (``Ba\\~nados`` → ``Bañados``): :func:`crase_core.views.tex.to_plain`."""
    return to_plain(text)


def authors_line(authors: Sequence[str], limit: int = 3) -> str:
    """At most ``limit`` authors, then ``et al. (+N)``; ``unknown authors`` when there are none."""
    if not authors:
        return "unknown authors"
    if len(authors) <= limit:
        return ", ".join(authors)
    return ", ".join(authors[:limit]) + f" et al. (+{len(authors) - limit})"


def shorten_words(text: str, limit: int = 60) -> str:
    """``text`` on one line, cut at a word boundary to at most ``limit`` characters (``…`` marks a cut).

    Never cuts inside a word unless the first word alone is longer than ``limit``.
    """
    t = " ".join(str(text).split())
    if len(t) <= limit:
        return t
    cut = t[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 3:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-–—") + "…"


def first_author_surname(authors: Sequence[str]) -> str:
    """The first author's family name (``"J. M. Maldacena"`` → ``"Maldacena"``); ``""`` when unknown."""
    for a in authors:
        name = re.sub(r"\(.*", "", tex_accents(str(a)))  # "(Harvard U.)", "(DAMTP" — affiliations
        name = re.sub(r"\s+(?:Jr|Sr|II|III|IV)\.?$", "", " ".join(name.replace("<", " ").replace(">", " ").split()))
        if not name:
            continue
        if "," in name:  # "Maldacena, J."
            return name.split(",", 1)[0].strip()
        return name.replace(".", ". ").split()[-1].strip(".")
    return ""
