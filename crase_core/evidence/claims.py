"""Stage 2 claim extraction: 4–5 typed atomic claims per paper (paper Eq. 1).

``ClaimExtractor`` is the interface (batch in, batch out, so a model backend
can run its calls concurrently). :class:`ExtractiveClaimExtractor` is the
offline implementation: it does not paraphrase, it *selects* whole abstract
sentences and types them with cue-word rules, so every
claim's ``source_phrase`` is a verbatim span of the paper's text by
construction (and is still checked).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from crase_core.records import Claim, ClaimSet, Paper

MIN_CLAIMS, MAX_CLAIMS = 4, 5


class ClaimExtractor(Protocol):
    """Extracts claims for many papers; one :class:`ClaimSet` per paper, in order."""

    identity: str

    def extract_many(self, papers: Sequence[Paper]) -> list[ClaimSet]: ...


def check_verbatim(claims: list[Claim], source_text: str) -> list[Claim]:
    """Return the claims with ``verbatim`` set by an exact (whitespace-normalised) substring test."""
    norm_source = " ".join(source_text.split()).lower()
    out = []
    for c in claims:
        phrase = " ".join(c.source_phrase.split()).lower()
        ok = bool(phrase) and phrase in norm_source
        out.append(Claim(c.id, c.type, c.text, c.source_phrase, ok))
    return out


# --- sentence splitting -----------------------------------------------------------------------

_ABBREV = {
    "e.g", "i.e", "et al", "etc", "cf", "vs", "eq", "eqs", "ref", "refs", "fig", "figs", "sec", "no", "approx",
    "resp", "viz", "al", "dr", "prof", "st", "ph.d", "vol", "ch", "app",
}
_BOUNDARY = re.compile(r"[.!?](?=\s+[A-Z$\\(\[`'\"]|\s*$)")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) spans of the sentences of ``text`` (end exclusive, trailing punctuation kept)."""
    spans: list[tuple[int, int]] = []
    start = 0
    depth = 0  # inside $...$ math, never split
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "$":
            depth ^= 1
        elif depth == 0 and _BOUNDARY.match(text, i):
            before = text[start:i].rstrip()
            last = re.split(r"\s+", before)[-1].lower() if before else ""
            is_abbrev = last.rstrip(".") in _ABBREV or re.fullmatch(r"[a-z]", last) is not None
            is_initial = re.fullmatch(r"[A-Z]", before[-1:] or "") is not None and (len(before) < 2 or before[-2] in " .")
            if not is_abbrev and not is_initial:
                spans.append((start, i + 1))
                start = i + 1
        i += 1
    if text[start:].strip():
        spans.append((start, n))
    out = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e - s > 0:
            out.append((s, e))
    return out


# --- typing -----------------------------------------------------------------------------------

_EMPIRICAL = re.compile(
    r"\b(numerical(ly)?|simulat\w*|data|experiment\w*|measur\w*|observ\w*|lattice|monte carlo|fit\w*|"
    r"estimat\w*|percent|accura\w*|sample\w*|empirical\w*|benchmark\w*|agree\w* (well )?with)\b|\d+\s*%",
    re.I,
)
_THEORY_VERB = re.compile(
    r"\bwe (also )?(show|prove|derive|find|obtain|argue|demonstrate|conjecture|compute|calculate|establish|"
    r"determine|point out|clarify)\b|\b(it is shown|is shown to|are shown to|turns out|we find that)\b",
    re.I,
)
_METHOD = re.compile(
    r"\bwe (also )?(use|employ|apply|develop|propose|introduce|construct|present|formulate|adopt|study|"
    r"consider|investigate|analy[sz]e|discuss|describe|review|generalize|extend)\b|\b(method|approach|technique|"
    r"formalism|procedure|algorithm|framework|scheme|by means of|ansatz)\b",
    re.I,
)
_THEORY_NOUN = re.compile(
    r"\b(theorem|prove[ns]?|derive[sd]?|impl(y|ies)|equivalen\w*|dual\w*|solution\w*|symmetr\w*|invarian\w*|"
    r"anomal\w*|conjecture|exact\w*|correspond\w*)\b",
    re.I,
)
_CONTEXT = re.compile(
    r"\b(it is (well )?known|has been|have been|recent(ly)?|in the past|motivat\w*|long-standing|"
    r"it was|previously|widely|traditionally|remains? (an )?open)\b",
    re.I,
)
_WE = re.compile(r"\b(we|our|this (paper|letter|note|work|article))\b", re.I)


def classify_claim(sentence: str, position: int) -> str:
    """Cue-word type of an extracted sentence (first matching rule wins; see the rule order below)."""
    if _EMPIRICAL.search(sentence):
        return "EMPIRICAL"
    if _THEORY_VERB.search(sentence):
        return "THEORETICAL"
    if _METHOD.search(sentence):
        return "METHODOLOGICAL"
    if _CONTEXT.search(sentence) or (position == 0 and not _WE.search(sentence)):
        return "CONTEXTUAL"
    if _THEORY_NOUN.search(sentence):
        return "THEORETICAL"
    return "CONTEXTUAL" if not _WE.search(sentence) else "THEORETICAL"


def _salience(sentence: str, position: int) -> float:
    """How contribution-like a sentence is: 'we show/find…' beats background."""
    score = 0.0
    if _THEORY_VERB.search(sentence):
        score += 2.0
    if _METHOD.search(sentence):
        score += 1.0
    if _EMPIRICAL.search(sentence):
        score += 1.0
    if _WE.search(sentence):
        score += 0.5
    if position == 0:
        score += 0.75
    n_words = len(sentence.split())
    if n_words < 6:
        score -= 1.5
    return score


class ExtractiveClaimExtractor:
    """Offline extractor: selects 4–5 whole abstract sentences, typed by cue words.

    Not a paraphraser and not a language model: a claim's text is its source
    sentence with whitespace normalised (never a clause cut from one). A claim is always a sentence of the
    abstract: a short abstract gives fewer claims, never the title as one of them. Papers whose abstract is empty get the title
    as their only claim (``title_only``, said so in the claim set's notes).
    """

    identity = "extractive-claims/v3"  # v3: whole sentences only (v2 cut short abstracts into clauses)

    def extract_many(self, papers: Sequence[Paper]) -> list[ClaimSet]:
        return [self.extract(p) for p in papers]

    def extract(self, paper: Paper) -> ClaimSet:
        if not paper.has_abstract:
            claim = Claim("c1", classify_claim(paper.title, 0), " ".join(paper.title.split()), paper.title, True)  # type: ignore[arg-type]
            return ClaimSet(paper.id, [claim], self.identity, title_only=True,
                            notes=["no abstract: the title is the only claim"])
        text = paper.abstract
        spans = split_sentences(text)  # whole sentences only: a clause cut from one reads as a broken claim
        spans = [s for s in spans if len(text[s[0] : s[1]].split()) >= 3] or spans
        if len(spans) > MAX_CLAIMS:
            ranked = sorted(
                range(len(spans)),
                key=lambda k: (-_salience(text[spans[k][0] : spans[k][1]], k), k),
            )
            spans = [spans[k] for k in sorted(ranked[:MAX_CLAIMS])]
        notes: list[str] = []
        claims = []
        for n, (s, e) in enumerate(spans, 1):
            phrase = text[s:e]
            claims.append(Claim(f"c{n}", classify_claim(phrase, n - 1), " ".join(phrase.split()), phrase))  # type: ignore[arg-type]
        if len(claims) < MIN_CLAIMS:
            notes.append(f"short abstract: {len(claims)} claim(s)")
        claims = check_verbatim(claims, paper.text)
        return ClaimSet(paper.id, claims, self.identity, notes=notes)
