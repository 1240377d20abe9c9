"""Benchmark files (JSONL) and the leakage-free protocol of the citation benchmarks.

One query a line: ``qid`` (string, unique), ``query`` (string), ``relevant``
(non-empty list of paper ids); optional ``paper_id`` (the paper the query
comes from) and ``year``. Other keys are kept in ``extra``. A line that is
not JSON or lacks a field stops the load with the line's number; a line whose
text is not valid Unicode (bytes that are not UTF-8, a lone surrogate such as
``"\ud800"``) is kept as a query with a ``problem``: the evaluation records an
error row for it and goes on.

Protocol (``../shared/data/README.md``): when a query comes from paper P, P
and every paper whose month is later than P's are invisible to search,
expansion and ranking. The month of a hep-th id is its ``YYMM`` prefix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..sources.base import SourceFilter


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


def month_of_id(paper_id: str) -> int | None:
    """``YYYYMM`` of a hep-th style id (``YYMM###``, e.g. 9711200 → 199711); None when it is not one."""
    pid = paper_id.strip()
    if len(pid) != 7 or not pid.isdigit():
        return None
    yy, mm = int(pid[:2]), int(pid[2:4])
    if not 1 <= mm <= 12:
        return None
    year = 1900 + yy if yy >= 90 else 2000 + yy
    return year * 100 + mm


def leakage_filter(q: BenchQuery, paper_month: int | None = None) -> SourceFilter | None:
    """The SourceFilter hiding q's paper and everything after its month; None for a query with no paper.

    ``paper_month`` overrides the month derived from the id (sources whose ids do not encode one).
    Raises :class:`InputError` when the month cannot be determined: hiding only the query paper would
    leave the papers after it visible, i.e. leak the future into the answer.
    """
    if not q.paper_id:
        return None
    month = paper_month if paper_month is not None else month_of_id(q.paper_id)
    if month is None:
        raise InputError(f"query {q.qid}: the month of paper {q.paper_id!r} cannot be determined from its id "
                         "(hep-th style YYMM###); refusing to run it without the leakage filter")
    return SourceFilter(max_month=month, exclude=frozenset({q.paper_id}))


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
