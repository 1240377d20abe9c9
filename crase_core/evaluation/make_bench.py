"""``crase bench make DIR --kind refs --out BENCH.jsonl``: a refs-style benchmark from any corpus.

Built like the Crase paper's "arXiv set" and ``hepth_refs_dev``: a paper's title is the query, its
in-corpus references are the ground truth. A paper qualifies when it has a title and a date, was published
in or after ``since`` (when given), and cites at least ``min_refs`` corpus papers dated no later than itself
(a reference dated after the paper, or undated, would be hidden by the leakage filter, so it is left out of
``relevant`` and counted in ``n_hidden_references``). Of the qualifying papers, ``n`` are drawn: the ``n``
smallest SHA-256 of ``"{seed}:{id}"`` — the same corpus and seed give the same benchmark, and adding papers
to the corpus keeps every earlier pick that still qualifies unless a new one ranks before it.

Each line (the benchmark format of :mod:`.benchmark`): ``qid`` (``refs-ID``), ``paper_id``, ``query`` (the
title), ``title``, ``abstract``, ``relevant`` (sorted), ``year``, ``date`` (``YYYY-MM``: the month the corpus dates
the paper by, December of its year when it knows only the year), ``kind`` (``refs``), ``n_references``, ``n_hidden_references``. The leakage fields (``paper_id``,
``year``, ``date``) are filled, so ``crase eval`` hides the paper and everything after it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from crase_core import atomic
from crase_core.errors import InputError
from crase_core.store.corpus import UNDATED_MONTH, Corpus, parse_date, parse_year

KINDS = ("refs",)


@dataclass(frozen=True)
class BenchStats:
    """What :func:`refs_benchmark` found: qualifying papers and the median size of ``relevant``."""

    candidates: int
    drawn: int
    median_relevant: float


def _refs_csr(corpus: Corpus) -> sp.csr_matrix:
    refs = corpus.refs
    return refs.tocsr()


def visible_reference_counts(corpus: Corpus) -> np.ndarray:
    """Per paper, how many of its references are dated no later than it (its month ≥ theirs, both dated). Pure."""
    refs = _refs_csr(corpus)
    months = np.asarray(corpus.months, dtype=np.int64)
    rows = np.repeat(np.arange(len(corpus), dtype=np.int64), np.diff(refs.indptr))
    cols = np.asarray(refs.indices, dtype=np.int64)
    ok = (months[cols] <= months[rows]) & (months[cols] < UNDATED_MONTH)
    return np.bincount(rows[ok], minlength=len(corpus))


def _since_month(since: str | None) -> int:
    if not since:
        return 0
    month, _ = parse_date(since)
    if month is None:
        year, _ = parse_year(since)
        if year is None:
            raise InputError(f"--since {since!r}: give a year (2002) or a month (2002-06)")
        return year * 100 + 1
    return month


def _key(seed: int, pid: str) -> bytes:
    return hashlib.sha256(f"{seed}:{pid}".encode("utf-8", "surrogatepass")).digest()


def refs_benchmark(corpus: Corpus, *, n: int = 150, min_refs: int = 5, since: str | None = None,
                   seed: int = 0) -> tuple[list[dict[str, Any]], BenchStats]:
    """The benchmark lines (module docstring) and what was found. Pure (reads the corpus)."""
    if n < 1 or min_refs < 1:
        raise InputError("--n and --min-refs must be at least 1")
    months = np.asarray(corpus.months, dtype=np.int64)
    counts = visible_reference_counts(corpus)
    ok = (counts >= min_refs) & (months < UNDATED_MONTH) & (months >= _since_month(since))
    cand = np.flatnonzero(ok)
    papers = corpus.papers
    ids_of = getattr(papers, "ids_of", None)
    ids = ids_of(cand) if ids_of is not None else [papers[int(i)].id for i in cand]
    ranked = sorted(zip(ids, cand.tolist(), strict=True), key=lambda t: _key(seed, t[0]))
    lines: list[dict[str, Any]] = []
    refs = _refs_csr(corpus)
    for pid, i in ranked:
        if len(lines) >= n:
            break
        p = papers[i]
        if p.title == f"(untitled {p.id})":
            continue  # no title: no query
        cols = refs.indices[refs.indptr[i]:refs.indptr[i + 1]]
        seen = cols[(months[cols] <= months[i]) & (months[cols] < UNDATED_MONTH)]
        relevant = sorted(ids_of(seen) if ids_of is not None else [papers[int(j)].id for j in seen])
        line: dict[str, Any] = {"qid": f"refs-{pid}", "paper_id": pid, "query": p.title, "title": p.title,
                                "abstract": p.abstract, "relevant": relevant, "year": p.year}
        line["date"] = f"{int(months[i]) // 100:04d}-{int(months[i]) % 100:02d}"
        line.update(kind="refs", n_references=int(cols.size), n_hidden_references=int(cols.size - len(relevant)))
        lines.append(line)
    lines.sort(key=lambda d: d["qid"])
    med = float(statistics.median(len(d["relevant"]) for d in lines)) if lines else 0.0
    return lines, BenchStats(int(cand.size), len(lines), med)


def cmd_bench_make(args: argparse.Namespace) -> int:
    from crase_core.sources.local import open_corpus

    if args.kind not in KINDS:
        raise InputError(f"unknown benchmark kind {args.kind!r}; choose one of {', '.join(KINDS)}")
    folder = Path(args.dir)
    if not folder.is_dir():
        raise InputError(f"corpus folder {folder} does not exist")
    atomic.check_writable(args.out)
    corpus = open_corpus(folder)
    lines, stats = refs_benchmark(corpus, n=args.n, min_refs=args.min_refs, since=args.since, seed=args.seed)
    if not lines:
        raise InputError(f"no paper of {folder} has a title, a date and at least {args.min_refs} in-corpus references "
                         "dated before it" + (f" since {args.since}" if args.since else "")
                         + "; lower --min-refs (or check the corpus's dates and citations: crase corpus build)")
    atomic.write_text(args.out, "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in lines))
    print(f"{args.out}: {stats.drawn:,} refs-style queries from {corpus.name} ({stats.candidates:,} papers qualify: "
          f"≥ {args.min_refs} in-corpus references dated no later than them"
          + (f", published since {args.since}" if args.since else "") + f"; seed {args.seed}); median "
          f"{stats.median_relevant:g} relevant papers a query")
    if stats.drawn < args.n:
        print(f"note: only {stats.drawn:,} of the {args.n:,} asked for qualify")
    return 0


def add_bench_parser(sub: Any) -> None:
    """Register ``crase bench make`` and ``crase bench calibrate`` on the ``crase`` sub-parsers."""
    b = sub.add_parser("bench", help="make benchmark files for crase eval; calibrate the recall estimate")
    bsub = b.add_subparsers(dest="bench_command", required=True)
    m = bsub.add_parser("make", help="a refs-style benchmark from any corpus (a paper's title is the query, its "
                        "in-corpus references are the ground truth)", description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    m.add_argument("dir", help="the corpus folder")
    m.add_argument("--kind", default="refs", choices=KINDS, help="the benchmark kind (refs)")
    m.add_argument("--out", required=True, help="the benchmark file to write (JSON lines)")
    m.add_argument("--n", type=int, default=150, help="queries to draw (default: %(default)s)")
    m.add_argument("--min-refs", type=int, default=5,
                   help="a query paper cites at least this many corpus papers dated no later than it (default: 5)")
    m.add_argument("--since", default=None, help="only papers published in or after this year or month (2002, 2002-06)")
    m.add_argument("--seed", type=int, default=0, help="which deterministic sample (default: 0)")
    m.set_defaults(func=cmd_bench_make)
    from crase_core.evaluation.recall_calibration import add_calibrate_parser

    add_calibrate_parser(bsub)
