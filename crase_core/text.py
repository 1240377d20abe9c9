"""Tokenisation shared by the index, the offline planner and the lexical scorer.

One function, :func:`content_terms`, turns text into lower-case Snowball stems
with English stop words removed, so that a query, a sub-query, a claim and an
abstract are compared on the same terms.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import Stemmer

# ASCII words and numbers exactly as before (so English text tokenises byte-identically), then any other
# run of Unicode letters/digits (Cyrillic, Greek, CJK, accented words: "Schrödinger" → "schr", "ödinger").
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*|\d+(?:\.\d+)?|[^\W\d_][^\W_]*")
_TEX_COMMAND = re.compile(r"\\(?:[a-zA-Z]+|.)")

# English function words plus the question framing of literature-search queries.
STOPWORDS: frozenset[str] = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "aren", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "cannot", "could", "did", "do", "does", "doing", "down", "during", "each", "either", "else", "etc", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "however", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "least", "less", "let", "many", "may", "me", "might", "more", "most", "much", "must", "my", "myself", "neither", "no", "nor", "not", "now", "of", "off", "on", "once", "one", "only", "or", "other", "otherwise", "our", "ours", "ourselves", "out", "over", "own", "per", "rather", "same", "shall", "she", "should", "since", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "though", "through", "thus", "to", "too", "under", "until", "up", "upon", "us", "very", "via", "was", "we", "were", "what", "when", "where", "whether", "which", "while", "who", "whom", "whose", "why", "will", "with", "within", "without", "would", "yet", "you", "your", "yours", "yourself", "yourselves", "paper", "papers", "work", "works", "study", "studies", "article", "research", "literature", "find", "show", "shows", "showing", "shown", "present", "presents", "presented", "propose", "proposes", "proposed", "discuss", "discussed", "consider", "considered", "given", "give", "gives", "using", "use", "used", "uses", "based", "new", "novel", "approach", "recent", "recently", "way", "ways"]
)

_stemmer = Stemmer.Stemmer("english")


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    return _stemmer.stemWord(word)


def words(text: str) -> list[str]:
    """Lower-case word tokens, TeX commands reduced to their names (``\\sigma`` → ``sigma``).

    Words of any script count (NFC-normalised first); on ASCII text the tokens are those of
    ``[A-Za-z][A-Za-z0-9]*|\\d+(\\.\\d+)?``.
    """
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
    text = _TEX_COMMAND.sub(lambda m: " " + m.group(0)[1:] + " ", text)
    return [w.lower() for w in _WORD.findall(text)]


def content_words(text: str) -> list[str]:
    """Words minus stop words and one-letter tokens, in order (duplicates kept)."""
    return [w for w in words(text) if w not in STOPWORDS and (len(w) > 1 or w.isdigit())]


def content_terms(text: str) -> list[str]:
    """Stems of :func:`content_words`, in order (duplicates kept)."""
    return [stem(w) for w in content_words(text)]
