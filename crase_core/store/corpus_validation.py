"""What a corpus build or import read, kept and dropped, and why: the validation report.

Every ``crase corpus build`` and ``crase corpus import`` fills one :class:`ValidationReport` and prints it
(:meth:`ValidationReport.lines`); a built store keeps it in its ``meta.json`` (``validation``), so it is
shown again for a store that is already built. The rules it reports (docs/corpus_formats.md):

* a record without an id is dropped; a second record with an id already seen is dropped (the first wins);
* a record without a title is kept, shown as ``(untitled ID)``, and counted;
* a year must be written with four digits and lie in 1000 … (this year + 1): any other value (``"99"``,
  ``0``, ``2999``, ``"1998a"``) is refused — the paper is kept as undated — and counted with its line;
  a date (``date``/``month``) must be ``YYYY-MM[-DD]`` (or ``YYYYMM``) under the same rule;
* citation lines: self-loops, lines naming an id that is not in the corpus, duplicates of an earlier line
  and lines that are not ``citing<TAB>cited`` are dropped, each counted;
* direction check: among the kept citations whose two papers have different years, the share that point
  from an older paper to a newer one; most of them doing so means the columns are reversed (a warning).

:func:`direction_counts` is pure; the report is a plain dataclass, saved as JSON.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

#: examples kept per reason (the first ones in file order)
EXAMPLES = 3
#: the direction check warns only when at least this many dated citations point the wrong way
MIN_REVERSED = 10

#: how each counted reason is said (report lines, in this order)
PAPER_REASONS: dict[str, str] = {
    "duplicate_ids": "dropped: duplicate id (the first record wins)",
    "missing_ids": "dropped: no id",
    "missing_titles": "kept without a title (shown as \"(untitled ID)\")",
    "implausible_years": "kept undated: the year or date is not a plausible year (four digits, 1000–{max_year})",
    "implausible_dates": "date refused: not YYYY-MM[-DD] with a plausible year and a month 1–12 (the year is "
                         "used when there is one)",
    "undated": "undated (no year or date; hidden from every dated evaluation query)",
    "year_only": "dated by year only (taken as December of that year)",
}
EDGE_REASONS: dict[str, str] = {
    "self_loops": "dropped: self-citation",
    "unknown_ids": "dropped: an id that is not a paper of the corpus",
    "duplicates": "dropped: duplicate of an earlier line",
    "malformed": "dropped: not citing<TAB>cited",
}


def max_plausible_year() -> int:
    """The latest year a publication can carry: this year + 1 (journals date issues ahead)."""
    return _dt.date.today().year + 1


@dataclass
class ParseNotes:
    """What parsing paper records found, per reason: counts and the first :data:`EXAMPLES` examples
    (``path:line value``). Merged across the blocks of a build in file order (:meth:`merge`)."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def note(self, reason: str, where: str = "") -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        if where:
            shown = self.examples.setdefault(reason, [])
            if len(shown) < EXAMPLES:
                shown.append(where)

    def merge(self, other: ParseNotes) -> None:
        for reason, n in other.counts.items():
            self.counts[reason] = self.counts.get(reason, 0) + n
        for reason, shown in other.examples.items():
            mine = self.examples.setdefault(reason, [])
            mine.extend(shown[: max(0, EXAMPLES - len(mine))])


@dataclass
class ValidationReport:
    """Counts in and out, with reasons, of one corpus build or import (module docstring)."""

    papers_read: int = 0  # records read (blank lines not counted)
    papers_kept: int = 0
    paper_notes: dict[str, int] = field(default_factory=dict)  # reason → count (PAPER_REASONS)
    examples: dict[str, list[str]] = field(default_factory=dict)  # reason → first examples
    citation_lines: int = 0  # non-blank citation lines (or references) read
    citations_kept: int = 0
    dropped_edges: dict[str, int] = field(default_factory=dict)  # reason → count (EDGE_REASONS)
    #: among kept citations whose papers have different known years: citing newer than cited / older
    newer_to_older: int = 0
    older_to_newer: int = 0
    #: what an importer read from its source format (e.g. "works read", "references outside the snapshot")
    source_counts: dict[str, int] = field(default_factory=dict)
    max_year: int = field(default_factory=max_plausible_year)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ValidationReport:
        """The report saved by :meth:`to_dict` (unknown keys ignored; wrong types give an empty report)."""
        r = cls()
        for k in ("papers_read", "papers_kept", "citation_lines", "citations_kept", "newer_to_older",
                  "older_to_newer", "max_year"):
            if isinstance(d.get(k), int):
                setattr(r, k, int(d[k]))
        for k in ("paper_notes", "dropped_edges", "source_counts"):
            v = d.get(k)
            if isinstance(v, dict):
                setattr(r, k, {str(a): int(b) for a, b in v.items() if isinstance(b, int)})
        ex = d.get("examples")
        if isinstance(ex, dict):
            r.examples = {str(a): [str(x) for x in b][:EXAMPLES] for a, b in ex.items() if isinstance(b, list)}
        return r

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def add_notes(self, notes: ParseNotes) -> None:
        for reason, n in notes.counts.items():
            self.paper_notes[reason] = self.paper_notes.get(reason, 0) + n
        for reason, shown in notes.examples.items():
            mine = self.examples.setdefault(reason, [])
            mine.extend(shown[: max(0, EXAMPLES - len(mine))])

    @property
    def reversed_direction(self) -> bool:
        """Most dated citations point from an older paper to a newer one (columns reversed?)."""
        return self.older_to_newer >= MIN_REVERSED and self.older_to_newer > self.newer_to_older

    def warnings(self) -> list[str]:
        """The findings a user should act on, one line each."""
        out: list[str] = []
        if self.reversed_direction:
            out.append(f"most dated citations point from an older paper to a newer one ({self.older_to_newer:,} "
                       f"against {self.newer_to_older:,} the other way): is the citations file reversed? Each line "
                       "must be citing<TAB>cited (the citing paper first)")
        n = self.paper_notes
        if n.get("implausible_years"):
            out.append(f"{n['implausible_years']:,} records carry a year that is not a plausible year "
                       f"({_examples(self.examples.get('implausible_years'))}); they are kept undated. Write "
                       "the full year (1999, not 99)")
        if n.get("missing_titles"):
            out.append(f"{n['missing_titles']:,} records have no title "
                       f"({_examples(self.examples.get('missing_titles'))}); they are kept as \"(untitled ID)\"")
        if self.papers_kept and n.get("undated", 0) * 2 > self.papers_kept:
            out.append(f"{n['undated']:,} of {self.papers_kept:,} papers are undated: an evaluation hides every "
                       "undated paper from a dated query, and cannot run a query from an undated paper")
        unknown = self.dropped_edges.get("unknown_ids", 0)
        if self.citation_lines and unknown * 2 > self.citation_lines:
            out.append(f"{unknown:,} of {self.citation_lines:,} citation lines name an id that is not in the "
                       "corpus: do the two files use the same ids?")
        return out

    def lines(self) -> list[str]:
        """The report as lines for people (counts in and out with reasons, then warnings)."""
        out = [f"papers: {self.papers_read:,} records read, {self.papers_kept:,} kept"]
        for reason, what in PAPER_REASONS.items():
            if self.paper_notes.get(reason):
                ex = self.examples.get(reason)
                out.append(f"  {self.paper_notes[reason]:>10,}  {what.format(max_year=self.max_year)}"
                           + (f" — e.g. {_examples(ex)}" if ex else ""))
        for what, count in self.source_counts.items():
            out.append(f"  {count:>10,}  {what}")
        out.append(f"citations: {self.citation_lines:,} lines read, {self.citations_kept:,} kept")
        for reason, what in EDGE_REASONS.items():
            if self.dropped_edges.get(reason):
                out.append(f"  {self.dropped_edges[reason]:>10,}  {what}")
        dated = self.newer_to_older + self.older_to_newer
        if dated:
            out.append(f"direction: {self.newer_to_older:,} of {dated:,} dated citations point from a newer paper "
                       f"to an older one ({100 * self.newer_to_older / dated:.1f} %)")
        out += [f"warning: {w}" for w in self.warnings()]
        return out


def _examples(shown: Iterable[str] | None) -> str:
    return ", ".join(shown or [])


def direction_counts(rows: np.ndarray, cols: np.ndarray, years: np.ndarray, unknown: int,
                     block: int = 1 << 22) -> tuple[int, int]:
    """(citing newer than cited, citing older than cited) over the citations ``rows[i]`` → ``cols[i]``
    (positions) whose two papers have known, different years (``years[i] == unknown``: not known).
    Computed ``block`` edges at a time. Pure."""
    newer = older = 0
    for lo in range(0, rows.size, block):
        a = years[rows[lo:lo + block]]
        b = years[cols[lo:lo + block]]
        known = (a != unknown) & (b != unknown)
        newer += int((known & (a > b)).sum())
        older += int((known & (a < b)).sum())
    return newer, older
