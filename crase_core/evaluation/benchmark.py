"""Benchmark files (JSONL) and the leakage-free protocol of the citation benchmarks.

One query a line: ``qid`` (string, unique), ``query`` (string), ``relevant``
(non-empty list of paper ids); optional ``paper_id`` (the paper the query
comes from) and ``year``. Other keys are kept in ``extra``. A line that is
not JSON or lacks a field stops the load with the line's number; a line whose
text is not valid Unicode (bytes that are not UTF-8, a lone surrogate such as
``"\ud800"``) is kept as a query with a ``problem``: the evaluation records an
error row for it and goes on.

Protocol (``benchmarks/data/SOURCES.md``), on any corpus (:func:`query_filter`): when a query comes from paper
P, P and every paper dated after P are invisible to search, expansion and ranking. P's date is the
corpus's (its publication date, else its year — a year alone counts as December of that year, so papers of
the same year stay visible), read from the source, never from the id; when the source has no date for P,
the benchmark line's own ``date`` or ``year``; failing both the query is an error (counted; ``crase eval``
exits non-zero). Dates are compared by month. Undated papers of the corpus are hidden from every dated
query (they cannot be placed before it). A query whose line says ``"kind": "refs"``, or whose text is the
title of a corpus paper that cites at least half of its relevant papers, must name that paper
(``paper_id``): without it the filter would be off and the query would see its own paper.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crase_core.errors import InputError
from crase_core.paper_source import PaperSource, SourceFilter
from crase_core.store.corpus import UNDATED_MONTH, parse_date, parse_year


@dataclass(frozen=True)
class BenchQuery:
    """One benchmark query and its ground truth."""

    qid: str
    query: str
    relevant: tuple[str, ...]
    paper_id: str | None = None
    year: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    problem: str | None = None  # why this line cannot be run (recorded as the query's error row)


def _text_problem(value: Any, where: str) -> tuple[Any, str | None]:
    """``value`` with every string made valid UTF-8 (lone surrogates escaped as ``\\udXXX``) and what was wrong."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value, None
        except UnicodeEncodeError as e:
            bad = value[e.start]
            return (value.encode("utf-8", "backslashreplace").decode("utf-8"),
                    f"{where} holds a lone surrogate (U+{ord(bad):04X} at character {e.start + 1}), not text")
    if isinstance(value, list):
        out, problem = [], None
        for v in value:
            v, p = _text_problem(v, where)
            out.append(v)
            problem = problem or p
        return out, problem
    if isinstance(value, dict):
        fixed, problem = {}, None
        for k, v in value.items():
            v, p = _text_problem(v, f"'{k}'")
            k, pk = _text_problem(k, "a key")
            fixed[k] = v
            problem = problem or p or pk
        return fixed, problem
    return value, None


def leakage_filter(q: BenchQuery, paper_month: int | None) -> SourceFilter | None:
    """The SourceFilter hiding q's paper and everything dated after ``paper_month`` (``YYYYMM``); None for a
    query with no paper. Raises :class:`InputError` when the month is not known: hiding only the query paper
    would leave the papers after it visible, i.e. leak the future into the answer."""
    if not q.paper_id:
        return None
    if paper_month is None or paper_month >= UNDATED_MONTH:
        raise InputError(f"query {q.qid}: the date of paper {q.paper_id!r} is not known (the corpus has none and "
                         "the benchmark line gives no 'date' or 'year'); refusing to run it without the leakage filter")
    return SourceFilter(max_month=paper_month, exclude=frozenset({q.paper_id}))


def line_month(q: BenchQuery) -> int | None:
    """``YYYYMM`` of the benchmark line's own ``date`` (``YYYY-MM[-DD]``), else December of its ``year``."""
    month, _ = parse_date(q.extra.get("date"))
    if month is not None:
        return month
    year, _ = parse_year(q.year)
    return year * 100 + 12 if year is not None else None


def query_month(q: BenchQuery, source: PaperSource) -> int | None:
    """The month the leakage filter hides after: the source's date of q's paper (publication month, else
    December of its year), else the line's own date (:func:`line_month`); None when neither is known."""
    assert q.paper_id
    paper = source.get([q.paper_id]).get(q.paper_id)
    if paper is not None:
        month = paper.month if paper.month is not None else (paper.year * 100 + 12 if paper.year else None)
        if month is not None and month < UNDATED_MONTH:
            return month
    return line_month(q)


def _norm(text: str) -> str:
    return " ".join("".join(ch.lower() if ch.isalnum() else " " for ch in text).split())


def source_paper_of(q: BenchQuery, source: PaperSource, limit: int = 10) -> str | None:
    """The corpus paper a query without ``paper_id`` was evidently taken from: one whose title is the query's
    text and that cites at least half (and at least one) of its relevant papers; None when there is none."""
    if not _norm(q.query):
        return None
    for hit in source.search(q.query, limit):
        if _norm(hit.paper.title) != _norm(q.query):
            continue
        refs = set(source.references(hit.paper.id).ids)
        shared = len(refs & set(q.relevant))
        if shared and 2 * shared >= len(q.relevant):
            return hit.paper.id
    return None


def query_filter(q: BenchQuery, source: PaperSource) -> SourceFilter | None:
    """The leakage filter of ``q`` on ``source`` (the unfiltered source; module docstring), None for a query
    that comes from no paper. :class:`InputError` when its paper cannot be dated, and for a refs-style query
    that names no paper (``"kind": "refs"``, or :func:`source_paper_of` finds its paper)."""
    if q.paper_id:
        return leakage_filter(q, query_month(q, source))
    if q.extra.get("kind") == "refs":
        raise InputError(f"query {q.qid}: a refs-style query ('kind': 'refs') without 'paper_id': the leakage filter "
                         "cannot hide its paper and the future; add the paper's id (crase bench make writes it)")
    found = source_paper_of(q, source) if getattr(source, "text_index", None) is not None else None
    if found is not None:
        raise InputError(f"query {q.qid}: its text is the title of corpus paper {found!r}, which cites its relevant "
                         "papers, but the line names no 'paper_id': without it the leakage filter is off and the "
                         f"query sees its own paper; add \"paper_id\": \"{found}\"")
    return None


def load_benchmark(path: str | Path, limit: int | None = None) -> list[BenchQuery]:
    """Parse a benchmark file; raise :class:`InputError` naming the line of the first bad record."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"benchmark file not found: {p}")
    out: list[BenchQuery] = []
    seen: set[str] = set()
    with open(p, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            problem = None
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                line = raw.decode("utf-8", "replace")
                problem = f"not UTF-8 text (byte 0x{raw[e.start]:02x} at column {e.start + 1})"
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{p.name} line {lineno}: not valid JSON ({e.msg})") from None
            except RecursionError:
                raise InputError(f"{p.name} line {lineno}: JSON nested too deeply") from None
            if not isinstance(rec, dict):
                raise InputError(f"{p.name} line {lineno}: expected a JSON object")
            rec, surrogate = _text_problem(rec, "the record")
            problem = problem or surrogate
            qid, query, relevant = rec.get("qid"), rec.get("query"), rec.get("relevant")
            if not isinstance(qid, str | int) or str(qid) == "":
                raise InputError(f"{p.name} line {lineno}: missing 'qid'")
            if not isinstance(query, str) or not query.strip():
                raise InputError(f"{p.name} line {lineno}: missing or empty 'query'")
            if not isinstance(relevant, list) or not relevant or not all(isinstance(r, str | int) for r in relevant):
                raise InputError(f"{p.name} line {lineno}: 'relevant' must be a non-empty list of paper ids")
            qid = str(qid)
            if qid in seen:
                raise InputError(f"{p.name} line {lineno}: duplicate qid {qid!r}")
            seen.add(qid)
            year = rec.get("year")
            if year is not None and not isinstance(year, int):
                raise InputError(f"{p.name} line {lineno}: 'year' must be an integer")
            pid = rec.get("paper_id")
            extra = {k: v for k, v in rec.items() if k not in ("qid", "query", "relevant", "paper_id", "year")}
            out.append(BenchQuery(qid, query, tuple(dict.fromkeys(str(r) for r in relevant)),
                                  str(pid) if pid is not None else None, year, extra,
                                  f"{p.name} line {lineno}: {problem}; fix the line, then rerun with --fresh"
                                  if problem else None))
            if limit is not None and len(out) >= limit:
                break
    if not out:
        raise InputError(f"{p.name}: no queries")
    return out
