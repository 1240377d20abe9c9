"""Semantic Scholar Datasets records → paper records and citations: pure mappings for
``crase corpus import --format s2``.

The datasets API (https://api.semanticscholar.org/api-docs/datasets) ships each dataset as JSON-lines files
(gzip), one record a line, field names in lower case:

* ``papers``: ``corpusid`` (int) → id (the corpus id as a decimal string); ``title``; ``year``;
  ``publicationdate`` (``YYYY-MM-DD`` or null) → date; ``authors[].name``; ``venue``, else ``journal.name``;
  ``externalids`` (``DOI``, ``ArXiv``, ``MAG``, ``PubMed``, ``PubMedCentral``, ``DBLP``, ``ACL``) → doi, arxiv
  and external ids; ``citationcount``; ``url``.
* ``abstracts``: ``corpusid``, ``abstract`` (text or null).
* ``citations``: ``citingcorpusid``, ``citedcorpusid`` (strings or ints; null when the cited paper has no
  corpus id), ``isinfluential``, ``contexts`` (citing sentences, or null), ``intents`` (a list of labels — or
  of lists of labels, one per context — or null).

Nothing here reads a file; wrong types give an empty field, never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from crase_core.importers.openalex_works import obj, one_line

#: contexts kept per citation (the dataset's own lists are short; a hostile one is cut)
MAX_CONTEXTS = 50
_EXTERNAL = (("MAG", "MAG"), ("PubMed", "PMID"), ("PubMedCentral", "PMCID"), ("DBLP", "DBLP"), ("ACL", "ACL"))


def corpus_id(value: object) -> str | None:
    """A corpus id as a decimal string (``215416146``) from an int or a digit string; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value) if value >= 0 else None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit() and len(value.strip()) <= 20:
        return str(int(value.strip()))
    return None


def paper_line(row: object) -> dict[str, Any] | None:
    """The ``papers.jsonl`` record (without its abstract) of one ``papers`` record; None without a corpus id."""
    if not isinstance(row, Mapping):
        return None
    pid = corpus_id(row.get("corpusid"))
    if pid is None:
        return None
    rec: dict[str, Any] = {"id": pid, "title": one_line(row.get("title"))}
    year = row.get("year")
    if isinstance(year, int | str) and not isinstance(year, bool):
        rec["year"] = year
    if isinstance(row.get("publicationdate"), str):
        rec["date"] = row["publicationdate"]
    authors = row.get("authors")
    rec["authors"] = [n for n in (one_line(a.get("name"), 300) for a in (authors[:1000] if isinstance(authors, list)
                                                                       else []) if isinstance(a, Mapping)) if n]
    journal = obj(row.get("journal"))
    venue = one_line(row.get("venue"), 500) or one_line(journal.get("name"), 500)
    if venue:
        rec["venue"] = venue
    ext = obj(row.get("externalids"))
    arxiv, doi = one_line(ext.get("ArXiv"), 200), one_line(ext.get("DOI"), 500)
    if arxiv:
        rec["arxiv"] = arxiv
    if doi:
        rec["doi"] = doi
    url = one_line(row.get("url"), 500)
    if url.startswith("https://www.semanticscholar.org/") and not arxiv and not doi:
        rec["url"] = url
    extra = {"CorpusId": pid}
    for key, name in _EXTERNAL:
        v = ext.get(key)
        text = str(v) if isinstance(v, int) and not isinstance(v, bool) else one_line(v, 200)
        if text:
            extra[name] = text
    rec["external_ids"] = extra
    return rec


def abstract_of(row: object) -> tuple[str, str] | None:
    """(corpus id, abstract) of one ``abstracts`` record with a non-empty abstract, else None."""
    if not isinstance(row, Mapping):
        return None
    pid = corpus_id(row.get("corpusid"))
    text = one_line(row.get("abstract"), 100_000)
    return (pid, text) if pid is not None and text else None


@dataclass(frozen=True)
class Citation:
    """One ``citations`` record: citing → cited, with its contexts and intents (possibly empty)."""

    citing: str
    cited: str
    contexts: tuple[str, ...] = ()
    intents: tuple[str, ...] = ()


def _intents(value: object) -> tuple[str, ...]:
    """The intent labels, flattened (a list per context, or one list), in first-seen order, without repeats."""
    out: list[str] = []
    items = value[:MAX_CONTEXTS] if isinstance(value, list) else []
    for item in items:
        for label in item[:10] if isinstance(item, list) else [item]:
            text = one_line(label, 100)
            if text and text not in out:
                out.append(text)
    return tuple(out)


def citation_of(row: object) -> Citation | None:
    """The :class:`Citation` of one ``citations`` record; None when either corpus id is missing."""
    if not isinstance(row, Mapping):
        return None
    citing, cited = corpus_id(row.get("citingcorpusid")), corpus_id(row.get("citedcorpusid"))
    if citing is None or cited is None:
        return None
    raw = row.get("contexts")
    contexts = tuple(t for t in (one_line(c, 5000) for c in (raw[:MAX_CONTEXTS] if isinstance(raw, list) else []))
                     if t)
    return Citation(citing, cited, contexts, _intents(row.get("intents")))
