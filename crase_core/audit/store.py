"""Human audit of edge decisions: verdicts in SQLite, and the paper's Table 5 measures.

An auditor looks at one edge of one run and says whether the pipeline's
decision (kept / pruned) is right: ``agree`` or ``disagree``, with an optional
note. The auditor's own judgement of the edge is then
``keep = kept if agree else not kept``. Per edge, the human label is the
majority of the auditors' judgements (ties have no label).

Measures (Crase paper, Table 5), computed by :func:`summarize`:

* agreement — share of majority-labelled edges where the pipeline's decision equals the majority;
* retained-edge precision — among labelled edges the pipeline kept, share the majority would keep;
* pruned-edge correctness — among labelled edges the pipeline pruned, share the majority would prune;
* unanimous — among edges with ≥ 2 auditors, share where all auditors agree;
* Fleiss' κ — over edges with ≥ 2 auditors, categories keep / prune (:func:`fleiss_kappa`);
* per pair of auditors, agreement and Cohen's κ over the edges both judged (:func:`pairwise_agreement`).

The measures split by who scored each edge (model or lexical scorer) with :func:`summarize_by_scorer`;
:func:`human_decisions` turns verdicts into keep / prune decisions that :mod:`crase_core.audit.rerank` applies.

:class:`AuditStore` is the only part with side effects (one SQLite file).
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import logging
import os
import random
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crase_core.errors import InputError

log = logging.getLogger(__name__)

VERDICTS = ("agree", "disagree")
MAX_NOTE = 2000
MAX_AUDITOR = 80


@dataclass(frozen=True)
class Verdict:
    """One auditor's verdict on one edge decision of one run."""

    run_id: str
    citing: str
    cited: str
    auditor: str
    verdict: str  # "agree" | "disagree"
    pipeline_kept: bool
    note: str = ""
    created_at: str = ""

    @property
    def human_keep(self) -> bool:
        """The auditor's own judgement: keep the edge?"""
        return self.pipeline_kept if self.verdict == "agree" else not self.pipeline_kept


def verdict_from_judgement(keep: bool, pipeline_kept: bool) -> str:
    """A blind auditor's own keep/prune judgement, stored as agreement with the pipeline's decision."""
    return "agree" if keep == pipeline_kept else "disagree"


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float:
    """Fleiss' κ for N items × k categories, ``counts[i][j]`` = raters putting item i in category j.

    κ = (P̄ − P̄ₑ) / (1 − P̄ₑ) with P_i = (Σ_j n_ij² − n_i) / (n_i (n_i − 1)), P̄ the mean of
    P_i, p_j = Σ_i n_ij / Σ_i n_i and P̄ₑ = Σ_j p_j². With the same number of raters per item
    this is Fleiss (1971); items may have different numbers of raters (each ≥ 2), in which case
    p_j pools all ratings. Returns 1.0 when P̄ₑ = 1 (every rating in one category: perfect
    but uninformative agreement). Raises :class:`InputError` on no items or an item with < 2 raters.

    >>> round(fleiss_kappa([[2, 0], [0, 2], [1, 1]]), 4)
    0.3333
    """
    if not counts:
        raise InputError("Fleiss' κ needs at least one item rated by two or more raters")
    width = len(counts[0])
    totals = [0] * width
    p_items: list[float] = []
    n_ratings = 0
    for row in counts:
        if len(row) != width:
            raise InputError("every item needs a count for every category")
        if any(c < 0 for c in row):
            raise InputError("rating counts must be non-negative")
        n = sum(row)
        if n < 2:
            raise InputError("every item needs at least two ratings for Fleiss' κ")
        p_items.append((sum(c * c for c in row) - n) / (n * (n - 1)))
        for j, c in enumerate(row):
            totals[j] += c
        n_ratings += n
    p_bar = sum(p_items) / len(p_items)
    p_e = sum((t / n_ratings) ** 2 for t in totals)
    if p_e >= 1.0:
        return 1.0
    return (p_bar - p_e) / (1.0 - p_e)


@dataclass
class AuditSummary:
    """Table 5 measures over a set of verdicts; ``None`` where the denominator is 0."""

    verdicts: int
    auditors: int
    edges: int
    labelled_edges: int  # edges with a majority (no tie)
    agreement: float | None
    retained_precision: float | None
    retained_n: int
    pruned_correctness: float | None
    pruned_n: int
    multi_rated_edges: int
    unanimous: float | None
    fleiss_kappa: float | None


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def summarize(verdicts: Iterable[Verdict]) -> AuditSummary:
    """The Table 5 measures for ``verdicts`` (one per auditor per edge; later duplicates win)."""
    latest: dict[tuple[str, str, str, str], Verdict] = {}
    for v in verdicts:
        latest[(v.run_id, v.citing, v.cited, v.auditor)] = v
    per_edge: dict[tuple[str, str, str], list[Verdict]] = defaultdict(list)
    for v in latest.values():
        per_edge[(v.run_id, v.citing, v.cited)].append(v)
    labelled = agree = kept_n = kept_ok = pruned_n = pruned_ok = 0
    multi: list[list[int]] = []
    unanimous = 0
    for vs in per_edge.values():
        keep_votes = sum(v.human_keep for v in vs)
        prune_votes = len(vs) - keep_votes
        pipeline_kept = vs[0].pipeline_kept
        if len(vs) >= 2:
            multi.append([keep_votes, prune_votes])
            unanimous += keep_votes == 0 or prune_votes == 0
        if keep_votes == prune_votes:
            continue
        majority_keep = keep_votes > prune_votes
        labelled += 1
        agree += majority_keep == pipeline_kept
        if pipeline_kept:
            kept_n += 1
            kept_ok += majority_keep
        else:
            pruned_n += 1
            pruned_ok += not majority_keep
    return AuditSummary(
        verdicts=len(latest),
        auditors=len({v.auditor for v in latest.values()}),
        edges=len(per_edge),
        labelled_edges=labelled,
        agreement=_ratio(agree, labelled),
        retained_precision=_ratio(kept_ok, kept_n),
        retained_n=kept_n,
        pruned_correctness=_ratio(pruned_ok, pruned_n),
        pruned_n=pruned_n,
        multi_rated_edges=len(multi),
        unanimous=_ratio(unanimous, len(multi)),
        fleiss_kappa=fleiss_kappa(multi) if multi else None,
    )


def summarize_by_scorer(verdicts: Iterable[Verdict], scorers: Mapping[tuple[str, str, str], str],
                        default: str = "offline") -> dict[str, AuditSummary]:
    """The Table 5 measures split by who decided each edge: ``scorers[(run_id, citing, cited)]`` is the
    edge's ``scorer`` in its trace ("model" or "offline"; :func:`edge_scorers` builds it); edges not
    listed count as ``default``. One :class:`AuditSummary` per scorer that has verdicts."""
    groups: dict[str, list[Verdict]] = defaultdict(list)
    for v in verdicts:
        groups[scorers.get((v.run_id, v.citing, v.cited), default)].append(v)
    return {name: summarize(vs) for name, vs in sorted(groups.items())}


def edge_scorers(run_id: str, edges: Iterable[Any]) -> dict[tuple[str, str, str], str]:
    """``(run_id, citing, cited) → scorer`` for a trace's edge records (for :func:`summarize_by_scorer`)."""
    return {(run_id, e.citing, e.cited): getattr(e, "scorer", "offline") for e in edges}


CSV_COLUMNS = ("run_id", "citing", "cited", "auditor", "verdict", "pipeline_decision", "auditor_judgement",
               "note", "created_at")


def verdicts_csv(verdicts: Iterable[Verdict]) -> str:
    """Verdicts as CSV (header ``CSV_COLUMNS``); every text cell guarded by :func:`crase_core.views.export.csv_cell`
    (a cell starting like a spreadsheet formula gets a leading ``'``)."""
    from crase_core.views.export import csv_cell as cell

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for v in verdicts:
        w.writerow([cell(v.run_id), cell(v.citing), cell(v.cited), cell(v.auditor), cell(v.verdict),
                    "kept" if v.pipeline_kept else "pruned", "keep" if v.human_keep else "prune", cell(v.note),
                    cell(v.created_at)])
    return buf.getvalue()


_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    run_id TEXT NOT NULL,
    citing TEXT NOT NULL,
    cited TEXT NOT NULL,
    auditor TEXT NOT NULL,
    verdict TEXT NOT NULL CHECK (verdict IN ('agree', 'disagree')),
    pipeline_kept INTEGER NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    PRIMARY KEY (run_id, citing, cited, auditor)
)
"""


class AuditStore:
    """Verdicts in one SQLite file (default ``<runs dir>/audit.sqlite``); one row per run/edge/auditor.

    A file at ``path`` that is not an SQLite database (damaged, or something else) is never deleted nor
    overwritten: it is renamed to ``<name>.unreadable-<UTC time>`` (``set_aside``), a warning is logged
    and a fresh store is started. A folder or device at ``path`` is an :class:`InputError`.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.set_aside: Path | None = None
        if self.path.exists() and not self.path.is_file():
            raise InputError(f"the audit store {self.path} is not a regular file")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"cannot create the audit store folder {self.path.parent}: {e.strerror or e}") from None
        try:
            self._create()
        except sqlite3.DatabaseError as e:
            if not self.path.is_file() or isinstance(e, sqlite3.OperationalError) and "unable to open" in str(e):
                raise InputError(f"cannot open the audit store {self.path}: {e}") from None
            self.set_aside = self._move_aside()
            log.warning("%s is not a readable audit database (%s); kept it as %s and started a new one",
                        self.path, e, self.set_aside)
            try:
                self._create()
            except sqlite3.DatabaseError as e2:
                raise InputError(f"cannot open the audit store {self.path}: {e2}") from None

    def set_aside_files(self) -> list[Path]:
        """Damaged stores set aside next to this one (``<name>.unreadable-<UTC time>``), oldest first.

        They stay until someone moves them away, so an app can keep saying where the old verdicts are.
        """
        prefix = f"{self.path.name}.unreadable-"
        try:
            found = [p for p in self.path.parent.iterdir()
                     if p.name.startswith(prefix) and not p.name.endswith(("-wal", "-shm"))]
        except OSError:
            return []
        return sorted(found)

    def _create(self) -> None:
        with self._connect() as con:
            con.execute(_SCHEMA)
            con.execute("SELECT count(*) FROM verdicts").fetchone()

    def _move_aside(self) -> Path:
        stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
        aside = self.path.with_name(f"{self.path.name}.unreadable-{stamp}")
        os.replace(self.path, aside)
        for suffix in ("-wal", "-shm"):  # a journal of the damaged file belongs with it, not with the new one
            journal = self.path.with_name(self.path.name + suffix)
            if journal.exists():
                os.replace(journal, aside.with_name(aside.name + suffix))
        return aside

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=10)
        con.execute("PRAGMA journal_mode=WAL")
        return con

    def record(self, run_id: str, citing: str, cited: str, auditor: str, verdict: str, pipeline_kept: bool,
               note: str = "", now: _dt.datetime | None = None) -> Verdict:
        """Insert or replace this auditor's verdict on the edge; raise :class:`InputError` on bad input."""
        auditor = " ".join(str(auditor).split())
        if not auditor:
            raise InputError("enter an auditor name before recording a verdict")
        if len(auditor) > MAX_AUDITOR:
            raise InputError(f"the auditor name is longer than {MAX_AUDITOR} characters")
        if verdict not in VERDICTS:
            raise InputError(f"a verdict is 'agree' or 'disagree' (got {verdict!r})")
        note = str(note or "").strip()
        if len(note) > MAX_NOTE:
            raise InputError(f"the note is longer than {MAX_NOTE} characters")
        if not run_id or not citing or not cited:
            raise InputError("a verdict needs the run and both ends of the edge")
        stamp = (now or _dt.datetime.now(_dt.UTC)).isoformat(timespec="seconds")
        v = Verdict(run_id, citing, cited, auditor, verdict, bool(pipeline_kept), note, stamp)
        with self._connect() as con:
            con.execute(
                "INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (v.run_id, v.citing, v.cited, v.auditor, v.verdict, int(v.pipeline_kept), v.note, v.created_at),
            )
        return v

    def delete(self, run_id: str, citing: str, cited: str, auditor: str) -> None:
        with self._connect() as con:
            con.execute("DELETE FROM verdicts WHERE run_id=? AND citing=? AND cited=? AND auditor=?",
                        (run_id, citing, cited, auditor))

    def verdicts(self, run_id: str | None = None, auditor: str | None = None) -> list[Verdict]:
        """Stored verdicts, optionally of one run and/or one auditor, oldest first."""
        sql = "SELECT run_id, citing, cited, auditor, verdict, pipeline_kept, note, created_at FROM verdicts"
        where, args = [], []
        if run_id is not None:
            where.append("run_id = ?")
            args.append(run_id)
        if auditor is not None:
            where.append("auditor = ?")
            args.append(auditor)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at, rowid"
        with self._connect() as con:
            rows = con.execute(sql, args).fetchall()
        return [Verdict(r[0], r[1], r[2], r[3], r[4], bool(r[5]), r[6], r[7]) for r in rows]

    def verdict_for(self, run_id: str, citing: str, cited: str, auditor: str) -> Verdict | None:
        for v in self.verdicts(run_id, auditor):
            if v.citing == citing and v.cited == cited:
                return v
        return None


# ---- the audit queue, auditor pairs, verdicts as decisions ---------------------------------------------------
def audit_queue(edges: Sequence[Any], n: int, seed: str) -> list[Any]:
    """A fixed random sample of at most ``n`` edges, half kept and half pruned where the run has both
    (the other kind fills the rest), shuffled; the same ``seed`` (the run id) gives the same queue. Pure."""
    rng = random.Random(seed)
    kept = [e for e in edges if e.kept]
    pruned = [e for e in edges if not e.kept]
    take_kept = min(len(kept), n // 2)
    queue = rng.sample(kept, take_kept) + rng.sample(pruned, min(len(pruned), n - take_kept))
    rng.shuffle(queue)
    return queue


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """Cohen's κ of two raters' keep (True) / prune (False) judgements of the same items:
    κ = (p_o − p_e) / (1 − p_e), p_o the share of items they agree on, p_e = Σ_c p_a(c)·p_b(c).
    None when it is undefined (no item, or both raters put every item in one and the same category,
    p_e = 1). :class:`InputError` when the two lists differ in length.

    >>> cohen_kappa([True, True, False, False], [True, False, False, False])
    0.5
    """
    if len(a) != len(b):
        raise InputError("Cohen's κ needs the two raters' judgements of the same items")
    n = len(a)
    if n == 0:
        return None
    p_o = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    p_e = pa * pb + (1 - pa) * (1 - pb)
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1.0 - p_e)


@dataclass(frozen=True)
class PairAgreement:
    """Two auditors over the edges both judged: how many, the share they agree on, Cohen's κ (None: undefined)."""

    first: str
    second: str
    edges: int
    agreement: float
    kappa: float | None


def pairwise_agreement(verdicts: Iterable[Verdict]) -> list[PairAgreement]:
    """Every pair of auditors who judged at least one same edge (same run, citing, cited; each auditor's
    latest verdict), with their agreement on keep / prune and Cohen's κ; pairs by name."""
    latest: dict[tuple[str, str, str, str], Verdict] = {}
    for v in verdicts:
        latest[(v.auditor, v.run_id, v.citing, v.cited)] = v
    by_auditor: dict[str, dict[tuple[str, str, str], bool]] = defaultdict(dict)
    for (who, *edge), v in latest.items():
        by_auditor[who][(edge[0], edge[1], edge[2])] = v.human_keep
    names = sorted(by_auditor)
    out = []
    for i, x in enumerate(names):
        for y in names[i + 1:]:
            common = sorted(by_auditor[x].keys() & by_auditor[y].keys())
            if not common:
                continue
            a = [by_auditor[x][e] for e in common]
            b = [by_auditor[y][e] for e in common]
            out.append(PairAgreement(x, y, len(common), sum(p == q for p, q in zip(a, b, strict=True)) / len(common),
                                     cohen_kappa(a, b)))
    return out


@dataclass(frozen=True)
class HumanDecision:
    """The auditors' keep / prune judgement of one edge of one run (:func:`human_decisions`)."""

    citing: str
    cited: str
    keep: bool
    auditors: tuple[str, ...]
    note: str


def human_decisions(verdicts: Iterable[Verdict], run_id: str,
                    auditor: str | None = None) -> tuple[list[HumanDecision], list[tuple[str, str]]]:
    """(decisions, tied edges) from the verdicts on run ``run_id``: with ``auditor``, that auditor's own
    judgements; without, the majority of every auditor's latest judgement per edge (a tie decides
    nothing and is listed). In the order the edges were first judged."""
    latest: dict[tuple[str, str, str], Verdict] = {}
    for v in verdicts:
        if v.run_id == run_id and (auditor is None or v.auditor == auditor):
            latest[(v.citing, v.cited, v.auditor)] = v
    per_edge: dict[tuple[str, str], list[Verdict]] = {}
    for (citing, cited, _), v in latest.items():
        per_edge.setdefault((citing, cited), []).append(v)
    decisions, ties = [], []
    for (citing, cited), vs in per_edge.items():
        keep = sum(v.human_keep for v in vs)
        prune = len(vs) - keep
        if keep == prune:
            ties.append((citing, cited))
            continue
        side = [v for v in vs if v.human_keep == (keep > prune)]
        how = (f"{auditor}'s judgement" if auditor is not None
               else f"majority of {len(vs)} auditor(s): {max(keep, prune)} to {min(keep, prune)}")
        decisions.append(HumanDecision(citing, cited, keep > prune, tuple(sorted(v.auditor for v in side)), how))
    return decisions, ties
