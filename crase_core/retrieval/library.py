"""The user's own papers: arXiv ids / DOIs pasted as text or read from a BibTeX file, matched to a source.

Start from what I know: papers the user names become seeds of the run (see
:class:`crase_core.stages.seeding.LibrarySeeding`) and are marked "already in your library" in the
answer. Parsing is our own (no dependency): a tolerant BibTeX reader that takes ``eprint`` (with
``archivePrefix``), ``arxiv``/``arxivid``, ``doi``, ``url``, ``journal``/``note``/``howpublished``
fields; malformed entries are skipped and reported, never fatal. Identifiers are validated against
strict patterns before any link is built from them (:func:`arxiv_url`, :func:`paper_link`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import quote, urlsplit

import numpy as np

from crase_core.errors import InputError
from crase_core.paper_source import PaperSource
from crase_core.records import LibraryItem, Paper

MAX_LIBRARY_BYTES = 4 << 20  # a pasted list or BibTeX file larger than this is refused
MAX_LIBRARY_ENTRIES = 5000
#: a BibTeX file with more ``@type{`` blocks than this, or braces nested deeper than MAX_BIBTEX_DEPTH, is
#: refused before it is parsed (the parser's time grows with both: 1,000,000 nested braces took 16 s)
MAX_BIBTEX_BLOCKS = 4 * MAX_LIBRARY_ENTRIES
MAX_BIBTEX_DEPTH = 64
# the parser logs every block it cannot read; the library lists them itself (``ParsedLibrary.unreadable``)
logging.getLogger("bibtexparser").setLevel(logging.ERROR)

# arXiv identifiers: new style YYMM.NNNN(N) and old style archive[.SC]/YYMMNNN, optional version
_NEW_ID = re.compile(r"(?<![\d.])(\d{4}\.\d{4,5})(?:v\d+)?(?!\d)")
_OLD_ID = re.compile(r"(?<![\w-])([a-zA-Z][a-zA-Z-]*)(\.[a-zA-Z]{2})?/(\d{7})(?:v\d+)?(?!\d)")
_NEW_EXACT = re.compile(r"^\d{4}\.\d{4,5}$")
_OLD_EXACT = re.compile(r"^[a-z][a-z-]*(?:\.[A-Z]{2})?/\d{7}$")
_DOI = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>{}]+)")
_DOI_EXACT = re.compile(r"^10\.\d{4,9}/[^\s\"<>{}\\]+$")
_SOURCE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")  # anything else: the source's own paper id

Kind = Literal["arxiv", "doi", "id"]


@dataclass(frozen=True)
class LibraryEntry:
    """One identifier the user gave: ``kind`` arxiv (canonical id), doi (lower-case) or id (a source id)."""

    kind: Kind
    value: str
    label: str = "pasted"  # a BibTeX key, or "pasted"

    @property
    def given(self) -> str:
        return {"arxiv": "arXiv:", "doi": "doi:", "id": ""}[self.kind] + self.value


@dataclass
class ParsedLibrary:
    """What a paste or a BibTeX file gave: entries, and what could not be read (for the user to see)."""

    entries: list[LibraryEntry] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    def extend(self, other: ParsedLibrary) -> ParsedLibrary:
        seen = set(self.entries)
        self.entries += [e for e in other.entries if e not in seen and not seen.add(e)]  # type: ignore[func-returns-value]
        self.unreadable += other.unreadable
        return self


# ---- identifiers -----------------------------------------------------------------------------------------
def normalize_arxiv(text: str) -> str | None:
    """The canonical arXiv id in ``text`` (``hep-th/9711200``, ``0704.0001``; version dropped), else None.

    Accepts ``arXiv:`` prefixes and arxiv.org ``abs``/``pdf`` URLs.
    """
    s = text.strip()
    m = _OLD_ID.search(s)
    if m:
        return f"{m.group(1).lower()}{(m.group(2) or '').upper()}/{m.group(3)}"
    m = _NEW_ID.search(s)
    if m:
        return m.group(1)
    return None


def is_arxiv_id(value: str) -> bool:
    """Whether ``value`` is a canonical arXiv id (what :func:`normalize_arxiv` returns)."""
    return bool(_NEW_EXACT.match(value) or _OLD_EXACT.match(value))


def arxiv_url(arxiv_id: str) -> str | None:
    """``https://arxiv.org/abs/<id>`` for a valid canonical id only (nothing else reaches the URL)."""
    return f"https://arxiv.org/abs/{arxiv_id}" if is_arxiv_id(arxiv_id) else None


def normalize_doi(text: str) -> str | None:
    """The DOI in ``text`` (``doi:`` prefix, doi.org URL or bare), lower-cased, trailing punctuation cut."""
    m = _DOI.search(text.strip())
    if not m:
        return None
    doi = m.group(1).rstrip(".,;)]").lower()
    return doi if _DOI_EXACT.match(doi) else None


def paper_arxiv_id(paper: Paper) -> str | None:
    """The paper's arXiv id from its external ids, validated (None when absent or malformed)."""
    for name, value in paper.external_ids:
        if name.lower() == "arxiv":
            aid = normalize_arxiv(value)
            if aid and is_arxiv_id(aid):
                return aid
    return None


def paper_link(paper: Paper) -> str | None:
    """A link to the paper: arXiv abstract page from a validated arXiv id, else https://doi.org/ from a
    validated DOI, else the source's own ``url`` when it is a plain http(s) URL; None otherwise."""
    aid = paper_arxiv_id(paper)
    if aid:
        return arxiv_url(aid)
    for name, value in paper.external_ids:
        if name.lower() == "doi":
            doi = normalize_doi(value)
            if doi:
                return "https://doi.org/" + quote(doi, safe="/:;._-")  # parentheses encoded: safe in markdown links
    return safe_http_url(paper.url)


def safe_http_url(url: str) -> str | None:
    """``url`` when it is an absolute http(s) URL with a host and no whitespace, quotes or brackets."""
    if not url or any(c in url for c in " \t\r\n\"'<>`\\()[]{}") or not url.isascii():
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return url if parts.scheme in ("http", "https") and parts.netloc and "@" not in parts.netloc else None


# ---- pasted identifiers ----------------------------------------------------------------------------------
def _entry(token: str, label: str) -> LibraryEntry | None:
    t = token.strip().strip(",;")
    if not t:
        return None
    low = t.lower()
    if "doi.org/" in low or low.startswith("doi:") or low.startswith("10."):
        doi = normalize_doi(t)
        if doi:
            return LibraryEntry("doi", doi, label)
    aid = normalize_arxiv(t)
    if aid:
        return LibraryEntry("arxiv", aid, label)
    if _SOURCE_ID.match(t):  # e.g. 9711200, the hep-th corpus's id of hep-th/9711200
        return LibraryEntry("id", t, label)
    return None


def _check_size(text: str, what: str) -> None:
    if len(text.encode("utf-8", "surrogatepass")) > MAX_LIBRARY_BYTES:
        raise InputError(f"the {what} is larger than {MAX_LIBRARY_BYTES >> 20} MiB; give at most "
                         f"{MAX_LIBRARY_ENTRIES:,} papers")


def parse_ids(text: str) -> ParsedLibrary:
    """arXiv ids, arXiv URLs, DOIs (bare, ``doi:`` or doi.org URLs) separated by spaces, commas or lines."""
    _check_size(text, "list of identifiers")
    out = ParsedLibrary()
    for token in re.split(r"[\s,;]+", text):
        if not token:
            continue
        e = _entry(token, "pasted")
        if e is None:
            out.unreadable.append(token[:80])
        elif e not in out.entries:
            out.entries.append(e)
        if len(out.entries) > MAX_LIBRARY_ENTRIES:
            raise InputError(f"more than {MAX_LIBRARY_ENTRIES:,} identifiers; give fewer")
    return out


# ---- BibTeX ------------------------------------------------------------------------------------------------
_NAME = re.compile(r"[A-Za-z0-9_:.+-]+")


_BLOCK_START = re.compile(r"@\s*[A-Za-z]+\s*[{(]")


def check_bibtex_shape(text: str) -> None:
    """InputError when the BibTeX ``text`` has more than :data:`MAX_BIBTEX_BLOCKS` blocks or nests braces
    deeper than :data:`MAX_BIBTEX_DEPTH` (a vectorised pass: milliseconds for the 4 MiB the size cap allows)."""
    blocks = sum(1 for _ in _BLOCK_START.finditer(text))
    if blocks > MAX_BIBTEX_BLOCKS:
        raise InputError(f"the BibTeX file holds {blocks:,} entries; give at most {MAX_LIBRARY_ENTRIES:,} papers")
    raw = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    depth = np.cumsum((raw == ord("{")).astype(np.int32) - (raw == ord("}")).astype(np.int32))
    if depth.size and int(depth.max()) > MAX_BIBTEX_DEPTH:
        at = int(np.argmax(depth > MAX_BIBTEX_DEPTH))
        line = int(np.count_nonzero(raw[:at] == ord("\n"))) + 1
        raise InputError(f"the BibTeX file nests braces {int(depth.max()):,} deep (from line {line}); "
                         f"at most {MAX_BIBTEX_DEPTH} levels are read")


def bibtex_entries(text: str) -> Iterator[tuple[str, str, dict[str, str]] | str]:
    """``(type, key, fields)`` per BibTeX entry (field names lower-case, whitespace collapsed), or a
    short error string for a block that could not be read. Parsing is bibtexparser's, after
    :func:`check_bibtex_shape`; a parser failure is an InputError."""
    import bibtexparser  # only a BibTeX library needs it

    check_bibtex_shape(text)
    try:
        library = bibtexparser.parse_string(text)
    except Exception as e:  # the parser raises its own errors on states it did not expect
        raise InputError(f"the BibTeX file could not be read ({type(e).__name__})") from None
    for entry in library.entries:
        fields = {f.key.lower(): " ".join(str(f.value).split()) for f in entry.fields}
        yield entry.entry_type.lower(), entry.key, fields
    for block in library.failed_blocks:
        where = f"line {block.start_line + 1}" if block.start_line is not None else "an unknown line"
        yield f"entry at {where}: could not be read (unbalanced braces or quotes?)"


def _bib_entry(key: str, fields: dict[str, str]) -> LibraryEntry | None:
    label = key or "(no key)"
    prefix = fields.get("archiveprefix", fields.get("eprinttype", "")).lower()
    for name in ("arxiv", "arxivid", "eprint"):
        value = fields.get(name)
        if value and (name != "eprint" or not prefix or prefix == "arxiv"):
            aid = normalize_arxiv(value)
            if aid:
                return LibraryEntry("arxiv", aid, label)
    doi = normalize_doi(fields.get("doi", ""))
    if doi:
        return LibraryEntry("doi", doi, label)
    for name in ("url", "journal", "note", "howpublished", "eprint"):
        value = fields.get(name, "")
        if "arxiv" in value.lower() or name == "eprint":
            aid = normalize_arxiv(value)
            if aid:
                return LibraryEntry("arxiv", aid, label)
        if "doi.org/" in value.lower():
            doi = normalize_doi(value)
            if doi:
                return LibraryEntry("doi", doi, label)
    return None


def parse_bibtex(text: str) -> ParsedLibrary:
    """The arXiv id or DOI of every entry of a BibTeX file; entries without one are listed as unreadable."""
    _check_size(text, "BibTeX file")
    out = ParsedLibrary()
    for item in bibtex_entries(text):
        if isinstance(item, str):
            out.unreadable.append(item)
            continue
        _, key, fields = item
        e = _bib_entry(key, fields)
        if e is None:
            title = fields.get("title", "")[:60]
            out.unreadable.append(f"{key or '(no key)'}: no arXiv id or DOI" + (f" ({title})" if title else ""))
        elif e not in out.entries:
            out.entries.append(e)
        if len(out.entries) > MAX_LIBRARY_ENTRIES:
            raise InputError(f"more than {MAX_LIBRARY_ENTRIES:,} BibTeX entries; give fewer")
    return out


def parse_library(text: str) -> ParsedLibrary:
    """BibTeX when the text holds an ``@type{`` entry, else a list of identifiers."""
    return parse_bibtex(text) if re.search(r"@\s*[A-Za-z]+\s*[{(]", text) else parse_ids(text)


# ---- matching a source -------------------------------------------------------------------------------------
_arxiv_maps: dict[str, dict[str, str]] = {}


def _local_arxiv_map(source: object) -> dict[str, str] | None:
    """canonical arXiv id → paper id over a local corpus (built once per corpus fingerprint)."""
    corpus = getattr(source, "corpus", None)
    fingerprint = getattr(corpus, "fingerprint", None)
    if corpus is None or fingerprint is None:
        return None
    cached = _arxiv_maps.get(fingerprint)
    if cached is None:
        cached = {}
        papers = corpus.papers
        # a store-backed corpus: only the papers whose external ids mention arXiv are built (a scan of one column)
        containing = getattr(papers, "containing", None)
        positions = containing("extra", b'"arxiv"') if containing is not None else range(len(papers))
        for i in positions:
            p = papers[int(i)]
            aid = paper_arxiv_id(p)
            if aid:
                cached.setdefault(aid, p.id)
        _arxiv_maps.clear()
        _arxiv_maps[fingerprint] = cached
    return cached


def resolve(entries: Iterable[LibraryEntry], source: PaperSource) -> list[LibraryItem]:
    """Each entry with the source paper it names (``paper_id`` None when the source does not show it).

    A local corpus is matched by its papers' arXiv ids (and its own ids); another source is asked for
    ``arXiv:<id>`` / ``DOI:<doi>`` aliases (Semantic Scholar resolves them).
    """
    entries = list(entries)
    corpus = getattr(source, "corpus", None)
    is_local = corpus is not None and getattr(corpus, "fingerprint", None) is not None
    # the arXiv map reads every paper that has an arXiv id: built only when an entry is an arXiv id
    local = _local_arxiv_map(source) if is_local and any(e.kind == "arxiv" for e in entries) else None
    corpus_ids = getattr(corpus, "index", {})
    wanted: dict[LibraryEntry, str] = {}
    for e in entries:
        if e.kind == "id":
            wanted[e] = e.value
        elif is_local:
            pid = local.get(e.value) if e.kind == "arxiv" and local is not None else None
            if pid is None and e.kind == "arxiv" and e.value in corpus_ids:
                pid = e.value
            if pid is not None:
                wanted[e] = pid
        else:
            wanted[e] = ("arXiv:" if e.kind == "arxiv" else "DOI:") + e.value
    found = source.get(list(dict.fromkeys(wanted.values()))) if wanted else {}
    items: list[LibraryItem] = []
    for e in entries:
        paper = found.get(wanted.get(e, "")) if e in wanted else None
        items.append(LibraryItem(e.given, e.label, paper.id if paper else None))
    return items


def mark_in_library(ids: Sequence[str] | set[str], nodes: Iterable, results: Iterable) -> None:
    """Set ``in_library`` on the node records and ranked papers whose paper id is in ``ids``."""
    have = set(ids)
    for n in nodes:
        n.in_library = n.paper.id in have
    for r in results:
        r.in_library = r.paper_id in have
