"""Exports of a run: ranked list as BibTeX / RIS / CSV, evidence graph as GraphML, trace as JSON.

Pure functions ``RunTrace -> str``. Nothing here reads secrets: a trace holds
none, and exports only copy paper metadata, scores and edge decisions. Every text a BibTeX, RIS or CSV
export copies goes through :func:`crase_core.views.terminal.printable` first: no control character, escape
sequence or bidirectional override from a title or an abstract reaches a reference manager, a
spreadsheet or a terminal that shows the file.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Iterable

from crase_core import trace as trace_io
from crase_core.errors import InputError
from crase_core.ranking.pruning import score_name
from crase_core.records import Paper, RankedPaper
from crase_core.trace import RunTrace
from crase_core.views.terminal import printable

# BibTeX/LaTeX special characters → their literal-text commands (backslash first, so it is not doubled).
_BIBTEX_ESCAPES: tuple[tuple[str, str], ...] = (
    ("\\", r"\textbackslash{}"),
    ("{", r"\{"),
    ("}", r"\}"),
    ("&", r"\&"),
    ("%", r"\%"),
    ("$", r"\$"),
    ("#", r"\#"),
    ("_", r"\_"),
    ("~", r"\textasciitilde{}"),
    ("^", r"\textasciicircum{}"),
)
_BIBTEX_RE = re.compile("|".join(re.escape(c) for c, _ in _BIBTEX_ESCAPES))
_BIBTEX_MAP = dict(_BIBTEX_ESCAPES)


def bibtex_escape(text: str) -> str:
    """``text`` as literal BibTeX field content: control characters dropped, ``\\ { } & % $ # _ ~ ^``
    escaped, whitespace collapsed."""
    return _BIBTEX_RE.sub(lambda m: _BIBTEX_MAP[m.group(0)], " ".join(printable(text).split()))


def _key(paper: Paper, used: set[str]) -> str:
    first = paper.authors[0] if paper.authors else "anon"
    surname = re.sub(r"[^A-Za-z]", "", first.split()[-1] if first.split() else "anon").lower() or "anon"
    base = f"{surname}{paper.year or ''}_{re.sub(r'[^A-Za-z0-9]', '', paper.id)}"
    key, i = base, 2
    while key in used:
        key, i = f"{base}_{i}", i + 1
    used.add(key)
    return key


def _arxiv_id(paper: Paper) -> str:
    for name, value in paper.external_ids:
        if name.lower() == "arxiv":
            return value
    return ""


def _ranked(trace: RunTrace, k: int | None) -> list[tuple[RankedPaper, Paper]]:
    papers = {n.paper.id: n.paper for n in trace.nodes}
    rows = trace.results[:k] if k else trace.results
    return [(r, papers[r.paper_id]) for r in rows if r.paper_id in papers]


def to_bibtex(trace: RunTrace, k: int | None = None) -> str:
    """The ranked list as BibTeX (``@article`` with a venue, else ``@misc``), rank and score in ``note``."""
    used: set[str] = set()
    out: list[str] = []
    for r, p in _ranked(trace, k):
        kind = "article" if p.venue else "misc"
        fields: list[tuple[str, str]] = [("title", p.title)]
        if p.authors:
            fields.append(("author", " and ".join(p.authors)))
        if p.year:
            fields.append(("year", str(p.year)))
        if p.venue:
            fields.append(("journal", p.venue))
        arxiv = _arxiv_id(p)
        if arxiv:
            fields += [("eprint", arxiv), ("archiveprefix", "arXiv")]
        for name, value in p.external_ids:
            if name.lower() == "doi":
                fields.append(("doi", value))
        if p.url:
            fields.append(("url", p.url))
        fields.append(("note", f"Crase rank {r.rank}, score {r.score:.6g}"))
        body = ",\n".join(f"  {name} = {{{bibtex_escape(value)}}}" for name, value in fields)
        out.append(f"@{kind}{{{_key(p, used)},\n{body}\n}}\n")
    return "\n".join(out)


def _ris_line(tag: str, value: str) -> str:
    return f"{tag}  - {' '.join(printable(value).split())}"


def to_ris(trace: RunTrace, k: int | None = None) -> str:
    """The ranked list as RIS (``JOUR`` with a venue, else ``GEN``); one ``AU`` line per author."""
    lines: list[str] = []
    for r, p in _ranked(trace, k):
        lines.append(_ris_line("TY", "JOUR" if p.venue else "GEN"))
        lines.append(_ris_line("TI", p.title))
        lines += [_ris_line("AU", a) for a in p.authors]
        if p.year:
            lines.append(_ris_line("PY", str(p.year)))
        if p.venue:
            lines.append(_ris_line("JO", p.venue))
        if p.abstract:
            lines.append(_ris_line("AB", p.abstract))
        if p.url:
            lines.append(_ris_line("UR", p.url))
        for name, value in p.external_ids:
            lines.append(_ris_line("DO" if name.lower() == "doi" else "M1", value if name.lower() == "doi" else f"{name}:{value}"))
        lines.append(_ris_line("N1", f"Crase rank {r.rank}, score {r.score:.6g}"))
        lines.append(_ris_line("ID", p.id))
        lines.append("ER  - ")
        lines.append("")
    return "\r\n".join(lines)


CSV_COLUMNS = ("rank", "score", "id", "title", "year", "authors", "venue", "url", "seed", "reason")
#: first characters a spreadsheet reads as the start of a formula (or a cell separator that precedes one).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\ufe62", "\uff0b", "\ufe63", "\uff0d", "\uff20")


def csv_cell(value: object) -> str:
    """A text cell safe to open in a spreadsheet: no control characters, and a leading ``'`` when it
    starts like a formula.

    Applies to every text column of every CSV export (ranked list, audit verdicts).
    Leading whitespace is looked through (``" =1+2"`` is guarded too).
    """
    s = "" if value is None else printable(value)  # control characters dropped (tabs, newlines: spaces)
    return "'" + s if s.lstrip(" ")[:1] in FORMULA_PREFIXES else s


def to_csv(trace: RunTrace, k: int | None = None) -> str:
    """The ranked list as CSV with header ``CSV_COLUMNS``; authors joined by ``"; "``.

    Text cells go through :func:`csv_cell` so spreadsheets do not run them as formulas.
    """
    cell = csv_cell

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r, p in _ranked(trace, k):
        w.writerow([r.rank, f"{r.score:.8g}", cell(p.id), cell(p.title), p.year or "", cell("; ".join(p.authors)),
                    cell(p.venue), cell(p.url), cell(r.seed or ""), cell(r.reason)])
    return buf.getvalue()


# characters XML 1.0 forbids (C0 controls but tab/newline/CR, lone surrogates, U+FFFE/U+FFFF)
_NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(value: object) -> str:
    """``str(value)`` without the characters XML 1.0 cannot hold (so the document always parses)."""
    return _NOT_XML.sub("", str(value))


def to_graphml(trace: RunTrace, include_pruned: bool = True) -> str:
    """The evidence graph as GraphML (networkx): nodes with paper metadata, role, kept, score, rank;
    edges with Δ, age factor, weight, kept, the decision and its rule, the scorer ("model"/"offline") and what its
    numbers are (``score``: "entailment (model)" or "word-overlap support"), the θ Δ was read at
    (:meth:`~crase_core.trace.RunTrace.threshold`), the citing claims and those supported at that θ (Δ's share).
    ``include_pruned=False`` keeps the pruned graph only.
    Every text goes through :func:`xml_text`, so the output is well-formed XML whatever the titles hold."""
    import networkx as nx

    x = xml_text
    g = nx.DiGraph(query=x(trace.query), run_id=x(trace.run_id), ranker=x(trace.ranking.ranker))
    for n in trace.nodes:
        if not include_pruned and not n.kept:
            continue
        p = n.paper
        g.add_node(x(p.id), title=x(p.title), year=p.year or 0, authors=x("; ".join(p.authors)), venue=x(p.venue),
                   url=x(p.url), role=x(n.role), kept=n.kept, score=float(n.score), rank=n.rank or 0,
                   prune_reason=x(n.prune_reason))
    for e in trace.edges:
        if not include_pruned and not e.kept:
            continue
        if x(e.citing) in g and x(e.cited) in g:
            g.add_edge(x(e.citing), x(e.cited), delta=float(e.delta), age_factor=float(e.age_factor),
                       weight=float(e.weight), kept=e.kept, decision=x(e.decision), rule=x(e.rule),
                       scorer=x(e.scorer), score=x(score_name(e.scorer)), theta=float(trace.threshold(e)[1]),
                       citing_claims=len(e.supported), supported_claims=sum(e.supported))
    return "\n".join(nx.generate_graphml(g, encoding="utf-8", prettyprint=True)) + "\n"


def to_json(trace: RunTrace) -> str:
    """The full trace (reopens in the app with :func:`crase_core.trace.loads`)."""
    return trace_io.dumps(trace)


def filename_stem(trace: RunTrace, words: int = 5) -> str:
    """A download file name stem from the query: ``crase-<first words>-<run id>``."""
    tokens: Iterable[str] = re.findall(r"[A-Za-z0-9]+", trace.query.lower())
    stem = "-".join(list(tokens)[:words]) or "run"
    return f"crase-{stem}-{trace.run_id[:8] or 'trace'}"


# ---- the one-page HTML export's bound ---------------------------------------------------------------------------
#: the largest run ``crase export --format html`` writes: its papers (|V|), edges (|E|) and trace file size. A 2-hop
#: run on the embedded corpus (6,477 papers, 122,862 edges, 100 MB) is within it; beyond it the page takes
#: minutes to build and is too large to explore (docs/benchmarks.md has the times).
MAX_HTML_PAPERS = 10_000
MAX_HTML_EDGES = 150_000
MAX_HTML_TRACE_BYTES = 160 << 20
_SMALLER = ("export a smaller run (--hops 1.5, or --neighbor-cap N), or read this one with `crase show RUN.json "
            "--edges`")


def _bound() -> str:
    return (f"at most {MAX_HTML_PAPERS:,} papers and {MAX_HTML_EDGES:,} edges (a trace file of at most "
            f"{MAX_HTML_TRACE_BYTES >> 20:,} MiB)")


def check_html_trace_file(path: str | os.PathLike[str]) -> None:
    """:class:`InputError` when the trace file at ``path`` is larger than the HTML export takes (checked before
    the trace is read, so a huge file is refused at once); a file that cannot be stat'ed is left to the reader."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return
    if size > MAX_HTML_TRACE_BYTES:
        raise InputError(f"{path} is {size / 1e6:,.0f} MB; the HTML export takes runs of {_bound()}: {_SMALLER}")


def check_html_trace(trace: RunTrace) -> None:
    """:class:`InputError` when ``trace`` has more papers or edges than the HTML export takes (:data:`MAX_HTML_PAPERS`,
    :data:`MAX_HTML_EDGES`)."""
    papers, edges = len(trace.nodes), len(trace.edges)
    if papers > MAX_HTML_PAPERS or edges > MAX_HTML_EDGES:
        raise InputError(f"the run has {papers:,} papers and {edges:,} edges; the HTML export takes runs of "
                         f"{_bound()}: {_SMALLER}")
