"""Load a citation corpus: ``papers.jsonl[.gz]`` + ``citations.tsv[.gz]``.

Format (the embedded hep-th corpus, and any user corpus; field by field in docs/corpus_formats.md):

* ``papers.jsonl``: one JSON object a line with ``id`` (required) and ``title`` (a record without one is
  kept as ``(untitled ID)`` and reported), ``abstract``, ``year``, ``date`` or ``month`` (``YYYY-MM[-DD]``
  or ``YYYYMM``), ``authors`` (string or list), ``venue``, ``arxiv``, ``doi``, ``url``, ``external_ids``.
* ``citations.tsv``: ``citing<TAB>cited`` a line.

Self-loops, duplicate edges and edges to unknown ids are dropped (and counted: :mod:`crase_core.store.corpus_validation`).
Dates (:func:`paper_month`): a year must have four digits and be plausible (else it is refused and the paper
is undated); the month is the record's ``date``/``month``, else that of its arXiv identifier (the ``arxiv``
field, or an old-style ``YYMM###`` id whose year is the record's ``year``), else December of its year (so a
leakage filter hides it whenever its month is in doubt); a paper with neither is undated
(:data:`UNDATED_MONTH`, after every date).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from crase_core.errors import CorpusError
from crase_core.records import Paper
from crase_core.resources import corpus_dir
from crase_core.settings import environment
from crase_core.store.adjacency import Adjacency, CitationGraph
from crase_core.store.corpus_validation import (
    ParseNotes,
    ValidationReport,
    direction_counts,
    max_plausible_year,
)

DEFAULT_CORPUS_DIR = corpus_dir("hepth")

_OLD_ARXIV = re.compile(r"^(\d{2})(\d{2})\d{3}$")
_NEW_ARXIV = re.compile(r"^(\d{2})(\d{2})\.\d{4,5}(v\d+)?$")
_AUTHOR_SPLIT = re.compile(r",\s*(?:and\s+)?|\s+and\s+")


def month_from_id(paper_id: str) -> int | None:
    """``YYYYMM`` of an arXiv id (``9711200`` → 199711, ``0704.0001`` → 200704), else None."""
    m = _OLD_ARXIV.match(paper_id) or _NEW_ARXIV.match(paper_id)
    if not m:
        return None
    yy, mm = int(m.group(1)), int(m.group(2))
    if not 1 <= mm <= 12:
        return None
    year = 1900 + yy if yy >= 90 else 2000 + yy
    return year * 100 + mm


#: the stored year of a paper without one
NO_YEAR = -(2**31)
#: ``YYYYMM`` of an undated paper: after every date, so any leakage filter hides it
UNDATED_MONTH = 999912
_DATE = re.compile(r"^(\d{4})-?(\d{2})(?:-(\d{2}))?(?:[T ].*)?$")


def parse_year(value: object) -> tuple[int | None, bool]:
    """(year, refused) of a record's ``year`` value: an int or digit string of four digits in 1000 …
    this year + 1 is a year; nothing (None, "") is (None, False); anything else — ``"99"``, ``0``, ``2999``,
    ``"1998a"``, ``true`` — is refused: (None, True)."""
    if value is None or value == "":
        return None, False
    if isinstance(value, bool):
        return None, True
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        text = value.strip()
    elif isinstance(value, int):
        text = str(value)
    else:
        return None, True
    year = int(text)
    if len(text) != 4 or not 1000 <= year <= max_plausible_year():
        return None, True
    return year, False


def parse_date(value: object) -> tuple[int | None, bool]:
    """(``YYYYMM``, refused) of a record's ``date``/``month`` value: ``"YYYY-MM"``, ``"YYYY-MM-DD"`` (a time
    after it is ignored), ``"YYYYMM"`` or the int ``YYYYMM``, with a plausible year (:func:`parse_year`) and a
    month 1–12; nothing is (None, False); anything else is refused."""
    if value is None or value == "":
        return None, False
    text = str(value).strip() if isinstance(value, int | str) and not isinstance(value, bool) else ""
    m = _DATE.match(text) if text.isascii() else None
    if not m:
        return None, True
    year, refused = parse_year(m.group(1))
    month = int(m.group(2))
    if refused or year is None or not 1 <= month <= 12 or (m.group(3) and not 1 <= int(m.group(3)) <= 31):
        return None, True
    return year * 100 + month, False


def _arxiv_month(row: Mapping[str, Any], pid: str, year: int | None) -> int | None:
    """The month of the record's arXiv identifier: its ``arxiv`` field (``hep-th/9711200``, ``0704.0001``),
    else its id when that is an old-style ``YYMM###`` number whose year is the record's ``year``."""
    arxiv = row.get("arxiv")
    if isinstance(arxiv, str) and arxiv.strip():
        m = month_from_id(arxiv.strip().rsplit("/", 1)[-1])
        if m is not None:
            return m
    m = month_from_id(pid)
    return m if m is not None and year is not None and m // 100 == year else None


def paper_month(row: Mapping[str, Any], pid: str, notes: ParseNotes | None = None,
                where: str = "") -> tuple[int | None, int]:
    """(year, ``YYYYMM``) of a ``papers.jsonl`` record by the rules of the module docstring; refused values
    and the papers dated by year only or not at all are noted in ``notes`` (reasons of
    :mod:`crase_core.store.corpus_validation`)."""
    year, bad_year = parse_year(row.get("year"))
    raw_date = row.get("date") if row.get("date") not in (None, "") else row.get("month")
    month, bad_date = parse_date(raw_date)
    if notes is not None:
        if bad_year:
            notes.note("implausible_years", f"{where} year {str(row.get('year'))[:20]!r}")
        if bad_date:
            notes.note("implausible_dates", f"{where} date {str(raw_date)[:20]!r}")
    if month is None:
        month = _arxiv_month(row, pid, year)
    if year is None and month is not None:
        year = month // 100
    if month is None:
        if year is None:
            if notes is not None:
                notes.note("undated", where)
            return None, UNDATED_MONTH
        if notes is not None:
            notes.note("year_only")
        month = year * 100 + 12
    return year, month


def _external_ids(row: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """``(kind, value)`` pairs of a record: ``arxiv`` first, then ``doi``, then ``external_ids`` (sorted)."""
    out: list[tuple[str, str]] = []
    if row.get("arxiv"):
        out.append(("arXiv", str(row["arxiv"])))
    if row.get("doi"):
        out.append(("DOI", str(row["doi"])))
    extra = row.get("external_ids")
    if isinstance(extra, dict):
        seen = {k for k, _ in out}
        for k in sorted(extra, key=str):
            v = extra[k]
            if str(k) not in seen and isinstance(v, str | int) and not isinstance(v, bool) and str(v).strip():
                out.append((str(k), str(v).strip()))
    return tuple((_clean(k), _clean(v)) for k, v in out)


def split_authors(value: object) -> tuple[str, ...]:
    if isinstance(value, list):
        return tuple(str(a).strip() for a in value if str(a).strip())
    if not value:
        return ()
    return tuple(a.strip() for a in _AUTHOR_SPLIT.split(str(value)) if a.strip())


def _open_text(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _clean(text: str) -> str:
    """``text`` with lone UTF-16 surrogates (``"\\ud800"`` escapes in JSON) replaced by U+FFFD."""
    return text if text.isascii() else _LONE_SURROGATE.sub("\ufffd", text)


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of a UTF-8 (optionally gzip) file; :class:`CorpusError` naming the file
    and line for a file that cannot be read, a damaged or truncated gzip stream, or bytes that are not UTF-8."""
    lineno = 0
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                try:
                    yield lineno, raw.decode("utf-8-sig" if lineno == 1 else "utf-8")  # a BOM is not data
                except UnicodeDecodeError as e:
                    raise CorpusError(f"{path}:{lineno}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column "
                                      f"{e.start + 1}); save the file as UTF-8") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise CorpusError(f"{path}:{lineno + 1}: the gzip file is damaged or truncated ({e}); "
                          "download or compress it again") from None
    except OSError as e:
        raise CorpusError(f"cannot read {path}: {e.strerror or e}") from None


def line_blocks(path: Path, size: int = 1 << 22) -> Iterator[tuple[int, bytes]]:
    """``(number of its first line, bytes)`` of blocks of whole lines (each about ``size`` bytes) of a
    (optionally gzip) file, undecoded; :class:`CorpusError` as :func:`read_lines` for an unreadable file or
    a damaged gzip stream. Decode each line with :func:`decode_line`."""
    lineno = 1
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as f:
            rest = b""
            while True:
                block = f.read(size)
                if not block:
                    if rest:
                        yield lineno, rest
                    return
                block = rest + block
                cut = block.rfind(b"\n")
                if cut < 0:
                    rest = block
                    continue
                data, rest = block[:cut + 1], block[cut + 1:]
                yield lineno, data
                lineno += data.count(b"\n")
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise CorpusError(f"{path}:{lineno}: the gzip file is damaged or truncated ({e}); "
                          "download or compress it again") from None
    except OSError as e:
        raise CorpusError(f"cannot read {path}: {e.strerror or e}") from None


def decode_line(raw: bytes, path: Path, lineno: int) -> str:
    """One line's text as :func:`read_lines` gives it (a BOM on line 1 dropped; CorpusError for bytes that are not UTF-8)."""
    try:
        return raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
    except UnicodeDecodeError as e:
        raise CorpusError(f"{path}:{lineno}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column "
                          f"{e.start + 1}); save the file as UTF-8") from None


def find_file(directory: Path, stem: str) -> Path:
    for name in (f"{stem}.gz", stem):
        if (directory / name).is_file():
            return directory / name
    raise CorpusError(f"{directory} has no {stem} or {stem}.gz (a corpus folder holds papers.jsonl and citations.tsv)")


def hash_range(h: Any, path: Path, start: int = 0, end: int | None = None) -> None:
    """Feed bytes [start, end) of ``path`` (to its end when ``end`` is None; fewer when the file is
    shorter) to the hash ``h``, a block at a time."""
    with open(path, "rb") as f:
        f.seek(start)
        left = None if end is None else end - start
        while left is None or left > 0:
            block = f.read(1 << 22 if left is None else min(left, 1 << 22))
            if not block:
                break
            h.update(block)
            if left is not None:
                left -= len(block)


def fingerprint(paths: Sequence[Path], ends: Sequence[int] | None = None) -> str:
    """The content fingerprint of the corpus files ``paths`` (of each file's first ``ends[i]`` bytes when
    given: the files as they were before an append)."""
    h = hashlib.sha256()
    for i, p in enumerate(paths):
        try:
            hash_range(h, p, 0, None if ends is None else int(ends[i]))
        except OSError as e:
            raise CorpusError(f"cannot read {p}: {e.strerror or e}") from None
    return h.hexdigest()[:16]


def parse_paper_line(line: str, path: Path, lineno: int, notes: ParseNotes | None = None) -> Paper | None:
    """The paper of one ``papers.jsonl`` line; None for a blank line or an empty id; CorpusError naming
    ``path:lineno`` for a line that is not a paper record. What the record lacks or holds that is refused
    (no id, no title, an implausible year or date, no date) is noted in ``notes``."""
    if not line.strip():
        return None
    try:
        row = json.loads(line)
    except (json.JSONDecodeError, RecursionError) as e:
        raise CorpusError(f"{path}:{lineno}: not a paper record ({e})") from None
    if not isinstance(row, dict):
        raise CorpusError(f"{path}:{lineno}: not a paper record (expected a JSON object)")
    pid = _clean(str(row["id"]).strip()) if row.get("id") is not None else ""
    title = _clean(str(row.get("title") or "").strip())
    where = f"{path.name}:{lineno}"
    if not pid:
        if notes is not None:
            notes.note("missing_ids", where)
        return None
    if not title and notes is not None:
        notes.note("missing_titles", f"{where} id {pid[:40]!r}")
    year, month = paper_month(row, pid, notes, where)
    external = _external_ids(row)
    ids = dict(external)
    url = (f"https://arxiv.org/abs/{ids['arXiv']}" if "arXiv" in ids else str(row.get("url") or "")
           or (f"https://doi.org/{ids['DOI']}" if "DOI" in ids else ""))
    return Paper(
        id=pid,
        title=title or f"(untitled {pid})",
        abstract=_clean(str(row.get("abstract") or "").strip()),
        year=year,
        month=month,
        authors=tuple(_clean(a) for a in split_authors(row.get("authors"))),
        venue=_clean(str(row.get("venue") or "")),
        url=_clean(url),
        external_ids=external,
    )


@dataclass
class Corpus:
    """Papers and their citation graph, indexed by position.

    ``refs`` is the CSR adjacency citing → cited, ``cites`` its transpose
    (cited → citing); for a store with appended segments each is a
    :class:`~crase_core.store.segments.GraphUnion` (rows, ``@`` a vector, ``nnz``, ``tocsr()``), so reach
    neighbours through :meth:`references_of`, :meth:`citers_of` and :meth:`edges_within`.
    ``months[i]`` is ``YYYYMM`` of paper i. ``papers`` and ``index`` are a list and a dict for a
    corpus parsed into memory, lazy views over memory-mapped columns for one opened from its store
    (:mod:`crase_core.store.corpus_store`).
    """

    name: str
    papers: Sequence[Paper]
    index: Mapping[str, int]
    months: np.ndarray
    refs: CitationGraph
    cites: CitationGraph
    fingerprint: str
    dropped_edges: dict[str, int] = field(default_factory=dict)
    #: the on-disk store it is memory-mapped from (:mod:`crase_core.store.corpus_store`); None when parsed into memory
    store: Path | None = None
    #: the fingerprint of its first part when it has appended segments (:mod:`crase_core.store.segments`), else None
    base_fingerprint: str | None = None
    #: the folders of its appended segments, in order (each holds its papers, edges and postings)
    segments: tuple[Path, ...] = ()
    #: what the build read, kept and dropped (:class:`~crase_core.store.corpus_validation.ValidationReport`; for a
    #: corpus with appended segments, that of its first part)
    validation: ValidationReport = field(default_factory=ValidationReport)

    def __len__(self) -> int:
        return len(self.papers)

    @property
    def n_citations(self) -> int:
        return int(self.refs.nnz)

    def in_degree(self) -> np.ndarray:
        return self.cites.row_lengths()

    def references_of(self, i: int) -> np.ndarray:
        """Ascending positions of the papers paper ``i`` cites."""
        return self.refs.row(i)

    def citers_of(self, i: int) -> np.ndarray:
        """Ascending positions of the papers that cite paper ``i``."""
        return self.cites.row(i)

    def edges_within(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The citations u→v with both ends in the ascending ``positions``, as (row, col) indexes into it."""
        return self.refs.edges_within(positions)

    def iter_edges(self) -> Iterator[tuple[str, str]]:
        coo = self.refs.tocoo()
        for u, v in zip(coo.row, coo.col, strict=True):
            yield self.papers[u].id, self.papers[v].id


def load_corpus(directory: str | os.PathLike[str] | None = None, name: str | None = None) -> Corpus:
    """Load a corpus folder (default: the embedded hep-th corpus, or ``$CRASE_CORPUS``)."""
    directory = environment.corpus_folder(directory, DEFAULT_CORPUS_DIR)
    if not directory.is_dir():
        raise CorpusError(f"corpus folder {directory} does not exist")
    papers_path = find_file(directory, "papers.jsonl")
    cites_path = find_file(directory, "citations.tsv")

    papers: list[Paper] = []
    index: dict[str, int] = {}
    months: list[int] = []
    notes = ParseNotes()
    read = 0
    for lineno, line in read_lines(papers_path):
        paper = parse_paper_line(line, papers_path, lineno, notes)
        read += bool(line.strip())
        if paper is not None and paper.id in index:
            notes.note("duplicate_ids", f"{papers_path.name}:{lineno} id {paper.id[:40]!r}")
        if paper is None or paper.id in index:
            continue  # blank line; duplicate id: first record wins
        index[paper.id] = len(papers)
        papers.append(paper)
        months.append(paper.month or UNDATED_MONTH)
    if not papers:
        raise CorpusError(f"{papers_path} holds no papers")

    rows: list[int] = []
    cols: list[int] = []
    dropped = {"self_loops": 0, "unknown_ids": 0, "duplicates": 0, "malformed": 0}
    lines = 0
    for _, line in read_lines(cites_path):
        parts = line.rstrip("\n").split("\t")
        lines += bool(line.strip())
        if len(parts) != 2:
            if line.strip():
                dropped["malformed"] += 1
            continue
        u, v = index.get(parts[0].strip()), index.get(parts[1].strip())
        if u is None or v is None:
            dropped["unknown_ids"] += 1
        elif u == v:
            dropped["self_loops"] += 1
        else:
            rows.append(u)
            cols.append(v)
    n = len(papers)
    data = np.ones(len(rows), dtype=np.float32)
    import scipy.sparse as sp  # parsing builds with scipy; the corpus keeps plain arrays (store/adjacency.py)

    refs = sp.csr_matrix((data, (np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64))), shape=(n, n))
    before = len(rows)
    refs.sum_duplicates()
    refs.data[:] = 1.0
    dropped["duplicates"] = before - refs.nnz
    refs.sort_indices()
    cites = refs.T.tocsr()
    cites.sort_indices()
    coo = refs.tocoo()
    years = np.array([NO_YEAR if p.year is None else p.year for p in papers], dtype=np.int32)
    report = ValidationReport(papers_read=read, papers_kept=n, citation_lines=lines, citations_kept=int(refs.nnz),
                              dropped_edges=dict(dropped))
    report.add_notes(notes)
    report.newer_to_older, report.older_to_newer = direction_counts(coo.row, coo.col, years, NO_YEAR)
    return Corpus(
        name=name or directory.name,
        papers=papers,
        index=index,
        months=np.array(months, dtype=np.int32),
        refs=Adjacency(refs.indptr, refs.indices, n),
        cites=Adjacency(cites.indptr, cites.indices, n),
        fingerprint=fingerprint([papers_path, cites_path]),
        dropped_edges=dropped,
        validation=report,
    )
