"""OpenAlex Work objects → paper records: one pure mapping, shared by the snapshot importer
(``crase corpus import --format openalex``) and any OpenAlex client.

A Work (https://docs.openalex.org/api-entities/works/work-object; the same JSON in the API and the snapshot)
maps field by field:

* ``id`` (``https://openalex.org/W2741809807``) → the short id ``W2741809807`` (:func:`short_id`; anything
  else is no id);
* ``title``, else ``display_name`` → title;
* ``abstract_inverted_index`` (``{word: [positions]}``) → the abstract, words in position order joined by
  one space (:func:`abstract_text`; OpenAlex keeps no plain-text abstract);
* ``publication_year`` → year; ``publication_date`` (``YYYY-MM-DD``) → date (checked by the corpus's rules
  when the record is read: :func:`crase_core.store.corpus.paper_month`);
* ``authorships[].author.display_name`` (else ``raw_author_name``) → authors, in order;
* ``primary_location.source.display_name`` (else the deprecated ``host_venue.display_name``) → venue;
* ``doi`` / ``ids.doi`` → DOI without the ``https://doi.org/`` prefix; arXiv id from ``ids.arxiv``, an
  arXiv DOI (``10.48550/arXiv.…``) or an ``arxiv.org/abs/…`` landing page of a location; ``ids.mag``,
  ``ids.pmid``, ``ids.pmcid`` kept as external ids (``MAG``, ``PMID``, ``PMCID``: the number, without the URL);
* ``referenced_works`` → the short ids it cites (outgoing citations, in order, de-duplicated);
* ``cited_by_count`` → citation count (OpenAlex-wide, not in-corpus).

Nothing here reads a file or the network; hostile values (wrong types, huge position lists, control
characters) give an empty field, never an exception, and bounded work (:data:`MAX_ABSTRACT_WORDS`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from crase_core.records import Paper
from crase_core.store.corpus import parse_date, parse_year

#: an abstract longer than this many word positions is cut there (a real one has a few hundred)
MAX_ABSTRACT_WORDS = 20_000
_SHORT_ID = re.compile(r"^(?:https?://(?:www\.)?openalex\.org/)?([Ww]\d{1,20})$")
_DOI_PREFIX = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:)", re.IGNORECASE)
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(.+)$", re.IGNORECASE)
_ARXIV_URL = re.compile(r"^https?://(?:www\.|export\.)?arxiv\.org/(?:abs|pdf)/([^?#]+?)(?:v\d+)?(?:\.pdf)?$",
                        re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def short_id(value: object) -> str | None:
    """``W2741809807`` for ``https://openalex.org/W2741809807``, ``W2741809807`` or ``w2741809807``; None for
    anything that is not a work id."""
    if not isinstance(value, str):
        return None
    m = _SHORT_ID.match(value.strip())
    return "W" + m.group(1)[1:] if m else None


def obj(value: object) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def one_line(value: object, limit: int = 10_000) -> str:
    """A string field as one line of text (control characters and line breaks become spaces), else ""."""
    if not isinstance(value, str):
        return ""
    return " ".join(_CONTROL.sub(" ", value[:limit]).split())


def abstract_text(inverted: object) -> str:
    """The abstract of an ``abstract_inverted_index``: each word at each of its positions, in position order,
    joined by single spaces (a position given twice keeps the first word listed; positions past
    :data:`MAX_ABSTRACT_WORDS` are dropped). "" for anything that is not such an index."""
    if not isinstance(inverted, Mapping):
        return ""
    at: dict[int, str] = {}
    for word, positions in inverted.items():
        if not isinstance(word, str) or not isinstance(positions, list):
            continue
        w = one_line(word, 1000)
        if not w:
            continue
        for p in positions[:MAX_ABSTRACT_WORDS]:
            if isinstance(p, int) and not isinstance(p, bool) and 0 <= p < MAX_ABSTRACT_WORDS:
                at.setdefault(p, w)
    return " ".join(at[p] for p in sorted(at))


def doi_of(work: Mapping[str, Any]) -> str:
    """The work's DOI without its resolver prefix (``10.7717/peerj.4375``), else ""."""
    ids = obj(work.get("ids"))
    for value in (work.get("doi"), ids.get("doi")):
        text = one_line(value, 500)
        if text:
            return _DOI_PREFIX.sub("", text)
    return ""


def _locations(work: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found: list[Mapping[str, Any]] = []
    for key in ("primary_location", "best_oa_location"):
        if isinstance(work.get(key), Mapping):
            found.append(work[key])
    locs = work.get("locations")
    if isinstance(locs, list):
        found.extend(loc for loc in locs[:100] if isinstance(loc, Mapping))
    return found


def arxiv_of(work: Mapping[str, Any], doi: str = "") -> str:
    """The work's arXiv id (``hep-th/9711200``, ``1706.03762``) from ``ids.arxiv``, an arXiv DOI or an
    ``arxiv.org`` landing page, else ""."""
    ids = obj(work.get("ids"))
    given = one_line(ids.get("arxiv"), 200)
    if given:
        m = _ARXIV_URL.match(given)
        return m.group(1) if m else given.removeprefix("arXiv:").removeprefix("arxiv:")
    m = _ARXIV_DOI.match(doi or doi_of(work))
    if m:
        return m.group(1)
    for loc in _locations(work):
        m = _ARXIV_URL.match(one_line(loc.get("landing_page_url"), 500))
        if m:
            return m.group(1)
    return ""


def authors_of(work: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of ``authorships[].author.display_name`` (else ``raw_author_name``), in order, at most 1,000;
    an ``authorships`` that is not a list (a number, ``true``, null) or entries that are not objects give no
    name, never an exception. Shared by the importer and the live source
    (:func:`crase_core.sources.openalex.paper_from_work`)."""
    out: list[str] = []
    ships = work.get("authorships")
    for a in ships[:1000] if isinstance(ships, list) else []:
        if not isinstance(a, Mapping):
            continue
        author = obj(a.get("author"))
        name = one_line(author.get("display_name"), 300) or one_line(a.get("raw_author_name"), 300)
        if name:
            out.append(name)
    return tuple(out)


def _venue(work: Mapping[str, Any]) -> str:
    loc = work.get("primary_location")
    if isinstance(loc, Mapping) and isinstance(loc.get("source"), Mapping):
        name = one_line(loc["source"].get("display_name"), 500)
        if name:
            return name
    host = work.get("host_venue")
    return one_line(host.get("display_name"), 500) if isinstance(host, Mapping) else ""


def referenced_ids(work: Mapping[str, Any], limit: int = 100_000) -> tuple[str, ...]:
    """Short ids of ``referenced_works``, in order, without repeats (values that are no work id skipped)."""
    refs = work.get("referenced_works")
    if not isinstance(refs, list):
        return ()
    out = (short_id(r) for r in refs[:limit])
    return tuple(dict.fromkeys(r for r in out if r))


@dataclass(frozen=True)
class WorkRecord:
    """One Work, mapped (module docstring). ``year``/``date`` are as OpenAlex gave them (checked later)."""

    id: str
    title: str
    abstract: str = ""
    year: object = None
    date: object = None
    authors: tuple[str, ...] = ()
    venue: str = ""
    doi: str = ""
    arxiv: str = ""
    external: dict[str, str] = field(default_factory=dict)
    references: tuple[str, ...] = ()
    cited_by_count: int | None = None

    def line(self) -> dict[str, Any]:
        """The ``papers.jsonl`` record (docs/corpus_formats.md)."""
        rec: dict[str, Any] = {"id": self.id, "title": self.title}
        if self.year is not None:
            rec["year"] = self.year
        if self.date is not None:
            rec["date"] = self.date
        rec["authors"] = list(self.authors)
        if self.venue:
            rec["venue"] = self.venue
        if self.arxiv:
            rec["arxiv"] = self.arxiv
        if self.doi:
            rec["doi"] = self.doi
        if not self.arxiv and not self.doi:
            rec["url"] = f"https://openalex.org/{self.id}"
        rec["external_ids"] = {"OpenAlex": self.id, **self.external}
        rec["abstract"] = self.abstract
        return rec

    def paper(self) -> Paper:
        """The record as a :class:`~crase_core.records.Paper` (year and month by the corpus's rules)."""
        year, _ = parse_year(self.year)
        month, _ = parse_date(self.date)
        if year is None and month is not None:
            year = month // 100
        if month is None and year is not None:
            month = year * 100 + 12
        ext = ([("arXiv", self.arxiv)] if self.arxiv else []) + ([("DOI", self.doi)] if self.doi else [])
        url = (f"https://arxiv.org/abs/{self.arxiv}" if self.arxiv else f"https://doi.org/{self.doi}" if self.doi
               else f"https://openalex.org/{self.id}")
        return Paper(id=self.id, title=self.title or f"(untitled {self.id})", abstract=self.abstract, year=year,
                     month=month, authors=self.authors, venue=self.venue, url=url,
                     external_ids=(*ext, ("OpenAlex", self.id), *sorted(self.external.items())),
                     citation_count=self.cited_by_count)


def parse_work(work: object) -> WorkRecord | None:
    """The :class:`WorkRecord` of one Work object, or None when it has no work id (module docstring)."""
    if not isinstance(work, Mapping):
        return None
    wid = short_id(work.get("id"))
    if wid is None:
        return None
    ids = obj(work.get("ids"))
    doi = doi_of(work)
    external = {}
    for key, name in (("mag", "MAG"), ("pmid", "PMID"), ("pmcid", "PMCID")):
        value = ids.get(key)
        text = str(value) if isinstance(value, int) and not isinstance(value, bool) else one_line(value, 200)
        text = text.rstrip("/").rsplit("/", 1)[-1]  # https://pubmed.ncbi.nlm.nih.gov/29456894 → 29456894
        if text:
            external[name] = text
    year = work.get("publication_year")
    date = work.get("publication_date")
    cited = work.get("cited_by_count")
    return WorkRecord(
        id=wid,
        title=one_line(work.get("title")) or one_line(work.get("display_name")),
        abstract=abstract_text(work.get("abstract_inverted_index")),
        year=year if isinstance(year, int | str) and not isinstance(year, bool) else None,
        date=date if isinstance(date, str) else None,
        authors=authors_of(work),
        venue=_venue(work),
        doi=doi,
        arxiv=arxiv_of(work, doi),
        external=external,
        references=referenced_ids(work),
        cited_by_count=cited if isinstance(cited, int) and not isinstance(cited, bool) else None,
    )
