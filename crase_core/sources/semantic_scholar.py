"""A :class:`PaperSource` over the Semantic Scholar Graph API v1.

Endpoints and what each method costs (HTTP requests; a cached response costs 0):

* ``search(q, limit)`` — ``GET /paper/search``, exactly **one** request per
  call (the API returns at most 100 results a page; a larger ``limit`` is cut
  to 100, never paged, so stage 1 stays one external call per sub-query).
  Hyphens become spaces (the API documents that hyphenated terms match
  nothing). Score = 1 / (the API's relevance rank). Recency re-ranking is the
  core's job, from ``Paper.month``/``year``.
* ``references(id)`` / ``citations(id)`` — ``GET /paper/{id}/references`` /
  ``/citations`` with offset paging, ``page_size`` a page, at most
  ``max_neighbor_pages`` pages (and never past offset 9,999): a longer list is
  cut there, in the API's order, and returned with ``truncated=True`` and
  ``total`` = the paper's ``referenceCount``/``citationCount``. Each page
  carries the neighbours' full records (so ``get`` of a neighbour is free) and
  the citation ``contexts``/``intents``. Entries without a ``paperId`` (papers
  the API does not know) are skipped and counted in ``stats.unknown_neighbors``.
* ``get(ids)`` — records already seen are free; the rest in
  ``POST /paper/batch`` calls of at most ``batch_size`` (≤ 500) ids.
* ``edges_among(V)`` — u→v for u, v ∈ V from (a) reference and citation lists
  already fetched (seeds: free) and (b) ``POST /paper/batch`` with
  ``fields=references.paperId`` for every other paper of V, packed so that a
  call holds at most ``batch_size`` ids and at most 9,999 references (the
  documented per-call cap, counted from each paper's ``referenceCount``);
  papers with more than 1,000 references use the paged endpoint instead.
  Cost: about max(|V|/500, Σ referenceCount/9,999) requests — typically 3–10
  for a 1,000-paper graph, against |V| requests for per-paper reference lists.

* ``semantic_vectors(ids)`` — the papers' SPECTER2 embeddings (``embedding.specter_v2``: ``{"model",
  "vector"}``, 768 numbers) for semantic feedback (:func:`crase_core.retrieval.semantic.rerank_fuse`): ``POST
  /paper/batch`` with ``fields=embedding.specter_v2`` for the ids not seen before, at most ``batch_size``
  a call — one call per fused search list (the default fuses only the question's own search). A paper
  without a usable vector (``null``, not a list of finite numbers, another length) gets none; a batch the
  API does not answer after its retries means no feedback for that list (the run goes on and says so).

A :class:`SourceFilter` is applied client-side on every method (month =
``YYYYMM`` of ``publicationDate``, else ``year·100 + 12``) and, for search and
citations, also sent to the API as ``publicationDateOrYear=:YYYY-MM`` so the
result pages are not spent on hidden papers (the API's rule keeps a superset
of ours: undated papers count as January of their year).

Errors: every failure is a :class:`SourceError` naming Semantic Scholar and
what to do. The run stops, except that with ``on_neighbor_error='skip'`` a
paper whose neighbour list could not be fetched (after retries) contributes
an empty list marked truncated (recorded in the trace) and the run goes on.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from crase_core.errors import SourceError
from crase_core.paper_source import NeighborList, ScoredPaper, SourceFilter
from crase_core.records import Paper
from crase_core.sources.remote import Relation, RemoteSource
from crase_core.sources.s2_http import (
    S2BadRequest,
    S2Client,
    S2Settings,
    S2Unavailable,
    path_segment,
    valid_paper_id,
)

__all__ = ["S2Settings", "SemanticScholarSource", "paper_from_api", "s2_source"]

log = logging.getLogger(__name__)

#: fields of a paper record (``paperId`` is always returned and is not requested).
PAPER_FIELDS = ("title", "abstract", "year", "publicationDate", "authors", "venue", "externalIds",
                "citationCount", "referenceCount", "url")
SEARCH_PAGE_MAX = 100  # documented: limit must be <= 100
SPECTER_DIM = 768
SPECTER_FIELD = "embedding.specter_v2"  # documented: {"embedding": {"model": "specter_v2", "vector": [768 floats]}}
BATCH_REFERENCES_MAX = 9999  # documented: a batch call returns at most 9999 citations/references
NESTED_REFERENCES_MAX = 1000  # papers with more references are paged through /references instead
OFFSET_CEILING = 9999  # offset + limit never exceeds this (conservative API paging limit)
_DATE = re.compile(r"^(\d{4})-(\d{2})")



def paper_from_api(obj: dict[str, Any]) -> Paper | None:
    """A :class:`Paper` from a Graph API paper object; None when it has no ``paperId``.

    ``month`` comes from ``publicationDate`` (None when absent); ``year`` from
    ``year``, else the date; ``abstract`` is ``""`` when null (claims then come
    from the title and are flagged title-only).
    """
    if not isinstance(obj, dict):
        return None
    pid = obj.get("paperId")
    if not valid_paper_id(pid):  # absent, or not an id (e.g. "../x", "a?b#c"): never used in a path
        return None
    month = None
    date = obj.get("publicationDate")
    if isinstance(date, str) and (m := _DATE.match(date)) and 1 <= int(m.group(2)) <= 12:
        month = int(m.group(1)) * 100 + int(m.group(2))
    year = obj.get("year")
    year = year if isinstance(year, int) and not isinstance(year, bool) and year > 0 else None
    if year is None and month is not None:
        year = month // 100
    authors = tuple(
        str(a["name"]).strip() for a in (obj.get("authors") or [])
        if isinstance(a, dict) and a.get("name") and str(a["name"]).strip()
    )
    ext = obj.get("externalIds") or {}
    external_ids = tuple(sorted((str(k), str(v)) for k, v in ext.items() if v not in (None, ""))) \
        if isinstance(ext, dict) else ()
    cc = obj.get("citationCount")
    title = " ".join(str(obj.get("title") or "").split())
    return Paper(
        id=pid,
        title=title or f"(untitled {pid})",
        abstract=" ".join(str(obj.get("abstract") or "").split()),
        year=year,
        month=month,
        authors=authors,
        venue=str(obj.get("venue") or ""),
        url=str(obj.get("url") or f"https://www.semanticscholar.org/paper/{pid}"),
        external_ids=external_ids,
        citation_count=cc if isinstance(cc, int) and not isinstance(cc, bool) else None,
    )


def specter_vector(obj: Any) -> np.ndarray | None:
    """The unit SPECTER2 vector of a Graph API paper object (``{"embedding": {"model", "vector": [...]}}``), or
    None when it has none that is usable (absent or null, not a list of 768 finite numbers, all zero)."""
    emb = obj.get("embedding") if isinstance(obj, dict) else None
    vector = emb.get("vector") if isinstance(emb, dict) else None
    if not isinstance(vector, list) or len(vector) != SPECTER_DIM:
        return None
    if not all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in vector):
        return None
    v = np.array(vector, dtype=np.float64)
    norm = float(np.linalg.norm(v))
    return (v / norm).astype(np.float32) if norm > 0 else None


def _month_of(paper: Paper) -> int | None:
    return paper.month if paper.month is not None else (paper.year * 100 + 12 if paper.year else None)


@dataclass
class _Fetched:
    """A neighbour list as the API gave it (before any filter)."""

    ids: list[str]
    complete: bool
    contexts: dict[str, list[str]] = field(default_factory=dict)
    intents: dict[str, list[str]] = field(default_factory=dict)
    skipped: bool = False


@dataclass
class _State:
    """What a source and its restricted views share: the client and everything fetched this session."""

    client: S2Client
    papers: dict[str, Paper | None] = field(default_factory=dict)  # None: the API does not know the id
    reference_count: dict[str, int | None] = field(default_factory=dict)
    lists: dict[tuple[str, str, str], _Fetched] = field(default_factory=dict)
    ref_ids: dict[str, list[str]] = field(default_factory=dict)  # references from batch (ids only)
    warned_limit: bool = False
    vectors: dict[str, np.ndarray | None] = field(default_factory=dict)  # SPECTER2 (unit), None: none usable
    #: (hits with a vector, hits, whether the API answered) of the last fused search list
    last_vectors: tuple[int, int, bool] | None = None


class SemanticScholarSource(RemoteSource):
    """Search, references, citations, lookup and edges from the Semantic Scholar Graph API."""

    def __init__(self, client: S2Client, filter: SourceFilter | None = None, _state: _State | None = None):
        self._state = _state or _State(client)
        self.client = self._state.client
        self.filter = filter or SourceFilter()
        self.name = "s2" if self.client.base_url == S2Settings().base_url else f"s2@{self.client.base_url}"

    @classmethod
    def from_settings(cls, settings: S2Settings | dict[str, Any] | None = None,
                      api_key: str | None = None) -> SemanticScholarSource:
        return cls(S2Client(S2Settings.from_options(settings), api_key=api_key))

    # -- bookkeeping --------------------------------------------------------------------------------
    def describe(self) -> str:
        key = "API key set" if self.client.has_key else "no API key (shared keyless limit)"
        return (f"Semantic Scholar Graph API at {self.client.base_url} ({key}, "
                f"{self.client.settings.rate:g} req/s); filter: {self.filter.describe()}")

    def restricted(self, filter: SourceFilter) -> SemanticScholarSource:
        return SemanticScholarSource(self.client, filter, self._state)

    def _date_param(self) -> str:
        mm = self.filter.max_month
        return f":{mm // 100:04d}-{mm % 100:02d}" if mm is not None else ""

    def _remember(self, obj: Any) -> Paper | None:
        paper = paper_from_api(obj)
        if paper is not None:
            self._state.papers[paper.id] = paper
            rc = obj.get("referenceCount")
            if isinstance(rc, int) or paper.id not in self._state.reference_count:
                self._state.reference_count[paper.id] = rc if isinstance(rc, int) else None
        return paper

    # -- search ---------------------------------------------------------------------------------------
    def search(self, query: str, limit: int) -> list[ScoredPaper]:
        """One ``GET /paper/search`` (see the module docstring)."""
        text = " ".join(query.replace("-", " ").split())
        if not text or limit <= 0:
            return []
        n = min(limit, SEARCH_PAGE_MAX)
        if limit > SEARCH_PAGE_MAX and not self._state.warned_limit:
            self._state.warned_limit = True
            log.warning("Semantic Scholar returns at most %d results per search call; using %d (asked %d)",
                        SEARCH_PAGE_MAX, n, limit)
        params: dict[str, Any] = {"query": text, "limit": n, "fields": ",".join(PAPER_FIELDS)}
        if self.filter.max_month is not None:
            params["publicationDateOrYear"] = self._date_param()
        what = "GET /paper/search"
        data = self.client.request("GET", "/paper/search", params)
        if data is None:
            return []
        if not isinstance(data, dict) or not isinstance(data.get("data", []), list):
            raise self.client.malformed(what, "expected an object with a 'data' list")
        out: list[ScoredPaper] = []
        seen: set[str] = set()
        for rank, obj in enumerate(data.get("data") or [], 1):
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

    # -- neighbours -------------------------------------------------------------------------------------
    def _fetch_list(self, paper_id: str, relation: Relation, date_param: str,
                    fields_: Sequence[str]) -> _Fetched:
        key = (paper_id, relation, date_param)
        got = self._state.lists.get(key)
        if got is not None:
            return got
        s = self.client.settings
        nested = "citedPaper" if relation == "references" else "citingPaper"
        path = f"/paper/{path_segment(paper_id)}/{relation}"
        what = f"GET {path}"
        ids: list[str] = []
        fetched = _Fetched(ids, complete=False)
        offset, page_size, pages = 0, s.page_size, 0
        try:
            while True:
                limit = min(page_size, OFFSET_CEILING - offset)
                params: dict[str, Any] = {"fields": ",".join(fields_), "offset": offset, "limit": limit}
                if date_param:
                    params["publicationDateOrYear"] = date_param
                try:
                    data = self.client.request("GET", path, params)
                except S2BadRequest as e:
                    if e.too_large and page_size > 1:
                        page_size //= 2  # the documented 10 MB cap: ask for smaller pages
                        continue
                    raise
                if data is None:  # 404: the API does not know this paper
                    fetched.complete = True
                    break
                if not isinstance(data, dict) or not isinstance(data.get("data", []), list):
                    raise self.client.malformed(what, "expected an object with a 'data' list")
                for item in data.get("data") or []:
                    obj = item.get(nested) if isinstance(item, dict) else None
                    paper = self._remember(obj) if obj else None
                    if paper is None:
                        self.stats.unknown_neighbors += 1
                        continue
                    ids.append(paper.id)
                    contexts = [c for c in (item.get("contexts") or []) if isinstance(c, str) and c.strip()]
                    intents = [str(i) for i in (item.get("intents") or []) if i]
                    if contexts:
                        fetched.contexts.setdefault(paper.id, []).extend(contexts)
                    if intents:
                        fetched.intents.setdefault(paper.id, []).extend(intents)
                pages += 1
                nxt = data.get("next")
                if not isinstance(nxt, int) or nxt <= offset or not data.get("data"):
                    fetched.complete = True
                    break
                if pages >= s.max_neighbor_pages or nxt >= OFFSET_CEILING:
                    break
                offset = nxt
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
        known = self._state.papers.get(paper_id)
        if paper_id in self.filter.exclude or (known is not None and self.filter.hides(known)):
            return NeighborList(ids=[], total=0)
        date_param = self._date_param() if relation == "citations" else ""
        got = self._fetch_list(paper_id, relation, date_param, ("contexts", "intents", *PAPER_FIELDS))
        papers = self._state.papers
        ids = [i for i in got.ids if self._visible(papers.get(i))]
        if got.complete:
            total: int | None = len(ids)
        elif got.skipped:
            total = None
        else:
            record = papers.get(paper_id)
            count = (self._state.reference_count.get(paper_id) if relation == "references"
                     else (record.citation_count if record else None))
            total = max(count, len(ids)) if count is not None and not self.filter.active else None
        keep = set(ids)
        return NeighborList(
            ids=ids, total=total, truncated=not got.complete,
            truncation_rule="" if got.complete else self._truncation_rule(got.skipped),
            contexts={k: v for k, v in got.contexts.items() if k in keep},
            intents={k: v for k, v in got.intents.items() if k in keep},
        )

    # -- lookup -----------------------------------------------------------------------------------------
    def _batch(self, ids: Sequence[str], fields_: Sequence[str]) -> list[Any]:
        what = "POST /paper/batch"
        data = self.client.request("POST", "/paper/batch", {"fields": ",".join(fields_)}, {"ids": list(ids)})
        if not isinstance(data, list) or len(data) != len(ids):
            raise self.client.malformed(what, f"expected a list of {len(ids)} entries (null for unknown ids)")
        return data

    def get(self, ids: Sequence[str]) -> dict[str, Paper]:
        """Records of the known, visible ids; unseen ids cost one batch call per ``batch_size``."""
        papers = self._state.papers
        todo = [i for i in dict.fromkeys(ids) if i not in papers]
        size = self.client.settings.batch_size
        for start in range(0, len(todo), size):
            chunk = todo[start : start + size]
            for pid, obj in zip(chunk, self._batch(chunk, PAPER_FIELDS), strict=True):
                paper = self._remember(obj) if obj else None
                if paper is not None and paper.id != pid:
                    papers[pid] = paper  # an alias id (e.g. DOI:…) resolved to the S2 paperId
                elif paper is None:
                    papers[pid] = None
                    self.stats.not_found += 1
        out: dict[str, Paper] = {}
        for pid in ids:
            paper = papers.get(pid)
            if self._visible(paper):
                out[pid] = paper  # type: ignore[assignment]
        return out

    # -- embeddings (semantic feedback) -----------------------------------------------------------------
    def semantic_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Unit SPECTER2 vectors of the papers ``ids`` that have one (module docstring); unseen ids cost one
        ``POST /paper/batch`` per ``batch_size``. A batch the API does not answer gives no vectors (logged)."""
        state = self._state
        todo = [i for i in dict.fromkeys(ids) if i not in state.vectors]
        size = self.client.settings.batch_size
        answered = True
        for start in range(0, len(todo), size):
            chunk = todo[start : start + size]
            try:
                answer = self._batch(chunk, (SPECTER_FIELD,))
            except SourceError as e:
                log.warning("semantic feedback skipped for this search: %s", e)
                answered = False
                break
            for pid, obj in zip(chunk, answer, strict=True):
                state.vectors[pid] = specter_vector(obj)
        out = {i: v for i in ids if (v := state.vectors.get(i)) is not None}
        state.last_vectors = (len(out), len(set(ids)), answered)
        return out

    def semantic_note(self) -> tuple[bool, str]:
        """(whether the last fused search list was re-ranked by SPECTER2 vectors, one sentence saying so or why not)."""
        last = self._state.last_vectors
        if last is None:
            return False, "semantic feedback off: no search list was fused (nothing asked Semantic Scholar for embeddings)"
        got, n, answered = last
        if not answered:
            return False, ("semantic feedback off: Semantic Scholar did not answer the request for SPECTER2 embeddings "
                           "(the searches ranked by the API's own order); rerun later")
        if got == 0:
            return False, f"semantic feedback off: Semantic Scholar has no SPECTER2 embedding for any of the {n} search hits"
        return True, (f"semantic feedback on: Semantic Scholar's SPECTER2 embeddings ({SPECTER_FIELD}) of {got} of the "
                      f"{n} search hits re-order the fused search list (the API cannot be searched by a vector, so no "
                      "paper joins it; the question itself is not embedded)")

    # -- edges ------------------------------------------------------------------------------------------
    def _reference_batches(self, ids: Sequence[str]) -> list[list[str]]:
        """Pack ids into batch calls of ≤ batch_size ids and ≤ 9,999 references (by referenceCount)."""
        size = self.client.settings.batch_size
        batches: list[list[str]] = []
        current: list[str] = []
        load = 0
        for pid in ids:
            rc = self._state.reference_count.get(pid)
            weight = max(1, rc if rc is not None else NESTED_REFERENCES_MAX)
            if current and (len(current) >= size or load + weight > BATCH_REFERENCES_MAX):
                batches.append(current)
                current, load = [], 0
            current.append(pid)
            load += weight
        if current:
            batches.append(current)
        return batches

    def edges_among(self, ids: Collection[str]) -> list[tuple[str, str]]:
        """Every citation u→v with u, v in ``ids`` (both visible), sorted; cost in the module docstring."""
        visible = set(self.get(sorted(set(ids))))
        state = self._state
        edges: set[tuple[str, str]] = set()
        have_refs: set[str] = set()
        citation_keys = {"", self._date_param()}
        for (pid, relation, date_param), got in state.lists.items():
            if pid not in visible:
                continue
            if relation == "references":
                edges.update((pid, v) for v in got.ids if v in visible)
                if got.complete:
                    have_refs.add(pid)
            elif date_param in citation_keys:
                edges.update((u, pid) for u in got.ids if u in visible)
        for pid in visible:
            if pid in state.ref_ids:
                edges.update((pid, v) for v in state.ref_ids[pid] if v in visible)
                have_refs.add(pid)
        todo = sorted(visible - have_refs)
        big = [p for p in todo if (state.reference_count.get(p) or 0) > NESTED_REFERENCES_MAX]
        small = [p for p in todo if (state.reference_count.get(p) or 0) <= NESTED_REFERENCES_MAX]
        for chunk in self._reference_batches(small):
            for pid, obj in zip(chunk, self._batch(chunk, ("references.paperId",)), strict=True):
                refs: list[str] = []
                for ref in (obj or {}).get("references") or []:
                    rid = ref.get("paperId") if isinstance(ref, dict) else None
                    if valid_paper_id(rid):
                        refs.append(rid)
                    else:
                        self.stats.unknown_neighbors += 1
                state.ref_ids[pid] = refs
                edges.update((pid, v) for v in refs if v in visible)
        for pid in big:
            got = self._fetch_list(pid, "references", "", ("contexts", "intents", *PAPER_FIELDS))
            edges.update((pid, v) for v in got.ids if v in visible)
        return sorted((u, v) for u, v in edges if u != v)


# -- wiring ---------------------------------------------------------------------------------------------
_SHARED: dict[tuple[S2Settings, int], SemanticScholarSource] = {}
_SHARED_MAX = 4


def s2_source(settings: S2Settings, *, cache_dir: str | None = None,
              api_key: str | None = None) -> SemanticScholarSource:
    """The source on ``settings`` with ``api_key`` (None: no key); one per settings and key per process.

    ``cache_dir`` (the run's cache folder; used when the s2 settings name no
    cache folder) puts the response cache in ``<cache_dir>/s2``. The caller
    decides which key goes with which base URL (:mod:`crase_core.settings.config` sends
    the operator's key only to the configured Graph API root). Records fetched
    for one query serve the next.
    """
    if cache_dir and settings.cache_dir is None:
        settings = dataclasses.replace(settings, cache_dir=os.path.join(cache_dir, "s2"))
    slot = (settings, hash(api_key))
    source = _SHARED.get(slot)
    if source is None:
        if len(_SHARED) >= _SHARED_MAX:
            _SHARED.pop(next(iter(_SHARED)))
        source = _SHARED[slot] = SemanticScholarSource(S2Client(settings, api_key=api_key or ""))
    return source
