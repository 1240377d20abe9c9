"""A :class:`PaperSource` over the OpenAlex API (``https://api.openalex.org``): 250 M+ works, open, keyless.

Endpoints and what each method costs (HTTP requests; a cached response costs 0), all ``GET /works`` with
``select`` naming the fields read (:data:`WORK_FIELDS`, ``referenced_works`` among them):

* ``search(q, limit)`` — ``search=q&per-page=min(limit, 200)``: exactly **one** request (never paged);
  score = 1 / (the API's relevance rank), as for Semantic Scholar.
* ``references(id)`` — ``filter=cited_by:W…`` (the works in W's ``referenced_works``), ``per-page``
  ``page_size`` (≤ 200), pages ``1…max_neighbor_pages``; ``citations(id)`` — ``filter=cites:W…`` the same
  way. A longer list is cut there, in the API's order, and returned ``truncated`` with ``total`` =
  ``meta.count``. Basic paging (``page=``): the API answers cursor paging without a key with 401.
* ``get(ids)`` — records already seen are free; the rest ``filter=openalex:W1|W2|…``, at most
  ``batch_size`` (≤ 50, the documented OR limit) a request; an id the answer lacks is unknown.
* ``edges_among(V)`` — u→v for u, v ∈ V from each u's ``referenced_works`` (every record carries it), so
  only the papers of V never seen cost a ``get``.

Ids are OpenAlex short ids (``W2741809807``; ``https://openalex.org/W…`` in answers is shortened); an id
read from an answer must match ``W`` + digits before it is used in a filter or path. A :class:`SourceFilter`
is applied client-side on every method (month from ``publication_date``, else ``publication_year·100 +
12``) and, for search and citations, sent as ``to_publication_date:YYYY-MM-DD`` (the month's last day) so
the pages are not spent on hidden works.

HTTP (:class:`OpenAlexClient`, the Semantic Scholar client's machinery): the polite pool's ``mailto`` and the
optional ``api_key`` ride on every request but never in the response cache's key, never in a message; a
client-side rate limit (default 5/s; the documented limit is 10/s and 100,000/day); 429 and 5xx, timeouts
and dropped connections retried with exponential back-off and jitter, ``Retry-After`` honoured (a longer
wait than ``max_retry_after`` stops the run); a total deadline per request; answers over 64 MB refused;
every answer checked against the documented shape (``{"meta": {...}, "results": [Work]}``) before it is
used or cached (JSON on disk, never pickled). Fixtures and shapes: ``tests/fixtures/openalex/``.
"""

from __future__ import annotations

import calendar
import dataclasses
import logging
import os
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from crase_core.importers.openalex_works import authors_of
from crase_core.paper_source import NeighborList, ScoredPaper, SourceFilter
from crase_core.records import Paper
from crase_core.settings.openalex import DEFAULT_BASE_URL, PER_PAGE_MAX, OpenAlexSettings
from crase_core.sources.remote import Relation, RemoteSource
from crase_core.sources.s2_http import S2Client, S2Unavailable

log = logging.getLogger(__name__)

SERVICE = "OpenAlex"
#: the top-level Work fields read (``select`` takes top-level fields only)
WORK_FIELDS = ("id", "doi", "display_name", "title", "publication_year", "publication_date", "authorships",
               "abstract_inverted_index", "primary_location", "ids", "cited_by_count", "referenced_works",
               "referenced_works_count")
PAGING_CEILING = 10_000  # documented: basic paging reads the first 10,000 results
MAX_ABSTRACT_WORDS = 20_000  # an inverted index claiming more positions is not an abstract
_SHORT_ID = re.compile(r"W\d{1,12}")
_DATE = re.compile(r"^(\d{4})-(\d{2})")





def short_id(value: object) -> str | None:
    """``W123`` from ``W123`` or ``https://openalex.org/W123`` (a lower-case ``w`` accepted), else None: nothing
    else — no other host, no path, no query — is taken for a work id."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    for prefix in ("https://openalex.org/", "http://openalex.org/"):
        if text.startswith(prefix):
            text = text[len(prefix):]
            break
    if text[:1] == "w":
        text = "W" + text[1:]
    return text if _SHORT_ID.fullmatch(text) else None


def _work_problem(obj: object) -> bool:
    return not isinstance(obj, dict) or short_id(obj.get("id")) is None


def check_response(method: str, path: str, body: Any, value: Any) -> tuple[str | None, bool]:
    """``(shape problem, degraded)`` of a parsed 200 answer: ``/works`` is ``{"meta": {...}, "results": [Work]}``
    (a Work without a usable ``id`` makes it degraded: used, not cached); ``/works/W…`` is one Work."""
    if path == "/works":
        if not isinstance(value, dict) or not isinstance(value.get("results"), list) \
                or not isinstance(value.get("meta"), dict):
            return "expected an object with a 'meta' object and a 'results' list", False
        return None, any(_work_problem(w) for w in value["results"])
    if path.startswith("/works/"):
        return (None, False) if not _work_problem(value) else ("expected a Work object with an 'id'", False)
    return None, False


class OpenAlexClient(S2Client):
    """The Semantic Scholar client's machinery (rate limit, retries, Retry-After, deadlines, size cap, JSON disk
    cache) for OpenAlex: ``mailto`` and ``api_key`` go on the wire only (never in the cache key)."""

    service = SERVICE
    flag = "--openalex"
    cache_name = "openalex"

    def __init__(self, settings: OpenAlexSettings | None = None, api_key: str | None = None, **kw: Any):
        super().__init__(settings or OpenAlexSettings(), api_key=api_key or "", **kw)
        self.mailto = self.settings.mailto

    def check(self, method: str, path: str, body: Any, value: Any) -> tuple[str | None, bool]:
        return check_response(method, path, body, value)

    def auth_headers(self) -> dict[str, str]:
        return {}

    def wire_params(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        extra = {**({"mailto": self.mailto} if self.mailto else {}),
                 **({"api_key": self._api_key} if self._api_key else {})}
        return {**(params or {}), **extra} if extra else params

    def _busy_hint(self) -> str:
        return ("Wait a minute and re-run, lower the request rate (--openalex-rate), or set --openalex-mailto "
                "(the polite pool) or OPENALEX_API_KEY.")

    def _auth_message(self, status: int, what: str) -> str:
        if self._api_key:
            return (f"rejected the API key for {what} (HTTP {status}). Check OPENALEX_API_KEY, or unset it to use "
                    "the keyless polite pool.")
        return (f"refused {what} without an API key (HTTP {status}). Set OPENALEX_API_KEY to an OpenAlex API key, "
                "or lower what the run asks for (--openalex-max-pages).")


def abstract_from_index(index: object) -> str:
    """The abstract rebuilt from an ``abstract_inverted_index`` (word → positions); "" when absent or not one
    (positions that are not non-negative integers, or more than :data:`MAX_ABSTRACT_WORDS` of them)."""
    if not isinstance(index, dict):
        return ""
    slots: dict[int, str] = {}
    for word, positions in index.items():
        if not isinstance(word, str) or not isinstance(positions, list):
            return ""
        for p in positions:
            if not isinstance(p, int) or isinstance(p, bool) or not 0 <= p < MAX_ABSTRACT_WORDS:
                return ""
            slots[p] = word
        if len(slots) > MAX_ABSTRACT_WORDS:
            return ""
    return " ".join(slots[i] for i in sorted(slots))


def paper_from_work(obj: Any) -> Paper | None:
    """A :class:`Paper` from an OpenAlex Work; None without a usable ``id``. Title: ``display_name``, else
    ``title``; month from ``publication_date``; abstract from ``abstract_inverted_index``; DOI from ``doi``."""
    if not isinstance(obj, dict):
        return None
    pid = short_id(obj.get("id"))
    if pid is None:
        return None
    month = None
    date = obj.get("publication_date")
    if isinstance(date, str) and (m := _DATE.match(date)) and 1 <= int(m.group(2)) <= 12:
        month = int(m.group(1)) * 100 + int(m.group(2))
    year = obj.get("publication_year")
    year = year if isinstance(year, int) and not isinstance(year, bool) and 1000 <= year <= 2999 else None
    if year is None and month is not None:
        year = month // 100
    loc = obj.get("primary_location")
    src = loc.get("source") if isinstance(loc, dict) else None
    venue = src.get("display_name") if isinstance(src, dict) else None
    doi = obj.get("doi")
    doi = doi.removeprefix("https://doi.org/") if isinstance(doi, str) and doi.startswith("https://doi.org/10.") else None
    raw_ids = obj.get("ids")
    ids: dict[str, Any] = raw_ids if isinstance(raw_ids, dict) else {}
    external = [("OpenAlex", pid), *([("DOI", doi)] if doi else [])]
    for key, name in (("mag", "MAG"), ("pmid", "PubMed")):
        value = ids.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            external.append((name, str(value).rsplit("/", 1)[-1]))
    cc = obj.get("cited_by_count")
    title = obj.get("display_name") or obj.get("title")
    title = " ".join(str(title).split()) if isinstance(title, str) else ""
    return Paper(
        id=pid,
        title=title or f"(untitled {pid})",
        abstract=" ".join(abstract_from_index(obj.get("abstract_inverted_index")).split()),
        year=year,
        month=month,
        authors=authors_of(obj),
        venue=" ".join(venue.split()) if isinstance(venue, str) else "",
        url=f"https://doi.org/{doi}" if doi else f"https://openalex.org/{pid}",
        external_ids=tuple(sorted(external)),
        citation_count=cc if isinstance(cc, int) and not isinstance(cc, bool) and cc >= 0 else None,
    )


def _references_of(obj: Any) -> list[str] | None:
    refs = obj.get("referenced_works") if isinstance(obj, dict) else None
    if not isinstance(refs, list):
        return None
    return list(dict.fromkeys(r for r in (short_id(x) for x in refs) if r is not None))


@dataclass
class _Fetched:
    ids: list[str]
    complete: bool
    total: int | None = None
    skipped: bool = False


@dataclass
class _State:
    """What a source and its restricted views share: the client and everything fetched this session."""

    client: OpenAlexClient
    papers: dict[str, Paper | None] = field(default_factory=dict)
    references: dict[str, list[str]] = field(default_factory=dict)  # referenced_works by work
    lists: dict[tuple[str, str, str], _Fetched] = field(default_factory=dict)
    warned_limit: bool = False


class OpenAlexSource(RemoteSource):
    """Search, references, citations, lookup and edges from the OpenAlex API (module docstring)."""

    client: OpenAlexClient

    def __init__(self, client: OpenAlexClient, filter: SourceFilter | None = None, _state: _State | None = None):
        self._state = _state or _State(client)
        self.client = self._state.client
        self.filter = filter or SourceFilter()
        self.name = "openalex" if self.client.base_url == DEFAULT_BASE_URL else f"openalex@{self.client.base_url}"

    def describe(self) -> str:
        pool = "polite pool" if self.client.mailto else "common pool (set --openalex-mailto for the polite pool)"
        key = ", API key set" if self.client.has_key else ""
        return (f"OpenAlex API at {self.client.base_url} ({pool}{key}, {self.client.settings.rate:g} req/s); "
                f"filter: {self.filter.describe()}")

    def restricted(self, filter: SourceFilter) -> OpenAlexSource:
        return OpenAlexSource(self.client, filter, self._state)

    def _date_filter(self) -> str:
        mm = self.filter.max_month
        if mm is None:
            return ""
        year, month = mm // 100, mm % 100
        return f"to_publication_date:{year:04d}-{month:02d}-{calendar.monthrange(year, month)[1]:02d}"

    def _remember(self, obj: Any) -> Paper | None:
        paper = paper_from_work(obj)
        if paper is not None:
            self._state.papers[paper.id] = paper
            refs = _references_of(obj)
            if refs is not None:
                self._state.references[paper.id] = refs
        return paper

    def _works(self, params: dict[str, Any], what: str) -> dict[str, Any]:
        data = self.client.request("GET", "/works", {**params, "select": ",".join(WORK_FIELDS)})
        if data is None:  # a 404 on /works: the API moved
            raise self.client.malformed(what, "the list endpoint answered 404")
        return data

    # -- search ---------------------------------------------------------------------------------------
    def search(self, query: str, limit: int) -> list[ScoredPaper]:
        """One ``GET /works?search=…`` (module docstring)."""
        text = " ".join(query.replace(",", " ").replace("|", " ").split())
        if not text or limit <= 0:
            return []
        n = min(limit, PER_PAGE_MAX)
        if limit > PER_PAGE_MAX and not self._state.warned_limit:
            self._state.warned_limit = True
            log.warning("OpenAlex returns at most %d results per search call; using %d (asked %d)",
                        PER_PAGE_MAX, n, limit)
        params: dict[str, Any] = {"search": text, "per-page": n, "page": 1}
        if self.filter.max_month is not None:
            params["filter"] = self._date_filter()
        data = self._works(params, "GET /works?search")
        out: list[ScoredPaper] = []
        seen: set[str] = set()
        for rank, obj in enumerate(data["results"], 1):
            paper = self._remember(obj)
            if paper is None:
                continue
            if paper.id in seen:
                self.stats.duplicates_dropped += 1
                continue
            seen.add(paper.id)
            if self._visible(paper):
                out.append(ScoredPaper(paper, 1.0 / rank))
        return out

    # -- neighbours --------------------------------------------------------------------------------------
    def _fetch_list(self, paper_id: str, relation: Relation, date_filter: str) -> _Fetched:
        key = (paper_id, relation, date_filter)
        got = self._state.lists.get(key)
        if got is not None:
            return got
        s = self.client.settings
        flt = f"{'cited_by' if relation == 'references' else 'cites'}:{paper_id}"
        if date_filter:
            flt += "," + date_filter
        fetched = _Fetched([], complete=False)
        try:
            for page in range(1, s.max_neighbor_pages + 1):
                if page * s.page_size > PAGING_CEILING:
                    break
                data = self._works({"filter": flt, "per-page": s.page_size, "page": page}, f"GET /works?filter={flt}")
                count = data["meta"].get("count")
                fetched.total = count if isinstance(count, int) and not isinstance(count, bool) else None
                for obj in data["results"]:
                    paper = self._remember(obj)
                    if paper is None:
                        self.stats.unknown_neighbors += 1
                        continue
                    fetched.ids.append(paper.id)
                if len(data["results"]) < s.page_size or (fetched.total is not None and page * s.page_size >= fetched.total):
                    fetched.complete = True
                    break
        except S2Unavailable as e:
            if s.on_neighbor_error != "skip":
                raise
            log.warning("%s; continuing without the %s of %s", e, relation, paper_id)
            self.stats.skipped_lists += 1
            fetched = _Fetched([], complete=False, skipped=True)
        deduped = list(dict.fromkeys(fetched.ids))
        self.stats.duplicates_dropped += len(fetched.ids) - len(deduped)
        fetched.ids = deduped
        if not fetched.complete:
            self.stats.truncated_lists += 1
        self._state.lists[key] = fetched
        return fetched

    def _neighbors(self, paper_id: str, relation: Relation) -> NeighborList:
        pid = short_id(paper_id)
        known = self._state.papers.get(pid) if pid else None
        if pid is None or paper_id in self.filter.exclude or (known is not None and self.filter.hides(known)):
            return NeighborList(ids=[], total=0)
        got = self._fetch_list(pid, relation, self._date_filter() if relation == "citations" else "")
        papers = self._state.papers
        ids = [i for i in got.ids if self._visible(papers.get(i))]
        if got.complete:
            total: int | None = len(ids)
        elif got.skipped or self.filter.active:
            total = None
        else:
            total = max(got.total or 0, len(ids))
        return NeighborList(ids=ids, total=total, truncated=not got.complete,
                            truncation_rule="" if got.complete else self._truncation_rule(got.skipped))

    # -- lookup -------------------------------------------------------------------------------------------
    def get(self, ids: Sequence[str]) -> dict[str, Paper]:
        """Records of the known, visible ids; unseen ids cost one request per ``batch_size``."""
        papers = self._state.papers
        wanted = {i: short_id(i) for i in dict.fromkeys(ids)}
        todo = [sid for sid in dict.fromkeys(v for v in wanted.values() if v) if sid not in papers]
        size = self.client.settings.batch_size
        for start in range(0, len(todo), size):
            chunk = todo[start : start + size]
            data = self._works({"filter": "openalex:" + "|".join(chunk), "per-page": len(chunk), "page": 1},
                               "GET /works?filter=openalex:")
            found = {p.id for p in (self._remember(obj) for obj in data["results"]) if p is not None}
            for sid in chunk:
                if sid not in found:
                    papers[sid] = None
                    self.stats.not_found += 1
        out: dict[str, Paper] = {}
        for pid, short in wanted.items():
            paper = papers.get(short) if short else None
            if self._visible(paper):
                out[pid] = paper  # type: ignore[assignment]
        return out

    # -- edges -----------------------------------------------------------------------------------------------
    def edges_among(self, ids: Collection[str]) -> list[tuple[str, str]]:
        """Every citation u→v with u, v in ``ids`` (both visible), from each u's ``referenced_works``, sorted."""
        visible = set(self.get(sorted(set(ids))))
        refs = self._state.references
        missing = sorted(u for u in visible if u not in refs)
        if missing:  # seen without referenced_works (an answer that lacked it): ask once more, by id
            for u in missing:
                self._state.papers.pop(u, None)
            self.get(missing)
        edges = {(u, v) for u in visible for v in refs.get(u, ()) if v in visible and v != u}
        return sorted(edges)


# -- wiring ---------------------------------------------------------------------------------------------------
_SHARED: dict[tuple[OpenAlexSettings, int], OpenAlexSource] = {}
_SHARED_MAX = 4


def openalex_source(settings: OpenAlexSettings, *, cache_dir: str | None = None,
                    api_key: str | None = None) -> OpenAlexSource:
    """The source on ``settings`` with ``api_key`` (None: none); one per settings and key per process.
    ``cache_dir`` (the run's cache folder) puts the response cache in ``<cache_dir>/openalex`` when the
    settings name no cache folder."""
    if cache_dir and settings.cache_dir is None:
        settings = dataclasses.replace(settings, cache_dir=os.path.join(cache_dir, "openalex"))
    slot = (settings, hash(api_key))
    source = _SHARED.get(slot)
    if source is None:
        if len(_SHARED) >= _SHARED_MAX:
            _SHARED.pop(next(iter(_SHARED)))
        source = _SHARED[slot] = OpenAlexSource(OpenAlexClient(settings, api_key=api_key or ""))
    return source
