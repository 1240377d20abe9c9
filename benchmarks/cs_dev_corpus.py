"""A computer-science dev corpus: ACL Anthology workshop papers and the ACL papers they cite (ACL Anthology Network).

    .venv/bin/python benchmarks/cs_dev_corpus.py convert --raw RAW --out DIR   # RAW → DIR/source → DIR/corpus
    .venv/bin/crase corpus embed DIR/corpus                                      # the on-device model
    .venv/bin/crase bench make DIR/corpus --kind refs --min-refs 3 --n 200 --out benchmarks/data/aan_refs_dev.jsonl
    .venv/bin/python benchmarks/cs_dev_corpus.py eval --corpus DIR/corpus --runs crase,bm25,dense,...

So that the question's embedding is not tuned on physics alone (issue 30). RAW holds six files, each checked
against its SHA-256 below before anything is read (benchmarks/data/SOURCES.md says where they come from and the
exact commands that fetch them):

* from the GitHub repository oblivious137/LinkPredictionHomework (commit 19bb0c9, ``data/``; a course data
  set made from the ACL Anthology Network by its author): ``id_list.txt`` (2,503 ACL Anthology workshop papers),
  ``titles.txt``, ``abstracts.txt``, ``authors.txt``, ``known_citings.txt`` (each paper's references: ACL
  Anthology ids, or ``REF…`` for a reference outside the Anthology) — each line ``ID "json string"``, lists
  joined by ``|``, ``\\r`` line ends;
* from the GitHub repository comrank/ComRank (commit 41ad257): ``acl-metadata.txt``, the ACL Anthology
  Network's metadata (``id = {…}``, ``author``, ``title``, ``venue``, ``year`` per paper; 18,041 papers).

The corpus (``papers.jsonl`` + ``citations.tsv`` in the JSONL import format of docs/corpus_formats.md): the
2,503 workshop papers with title, abstract (``<NoAbstract>`` → none; a trailing cut-off "1 Introdu…" removed),
authors and year; and every ACL paper one of them cites that the metadata knows, with title, authors, venue and
year but no abstract (the Network has none). Citations: workshop paper → cited ACL paper (``REF…`` references
and ids the metadata does not know are dropped and counted). Years: the metadata's, else the id's (``W00`` =
2000, ``P98`` = 1998). Every paper is dated by year only, so a leakage filter hides the query paper and every
paper of a later year.

``eval`` runs methods or settings on a benchmark over the corpus (the harness ``crase eval`` runs, resumable,
into ``--work``/runs/NAME) and prints R@K/MAP@K with 95% bootstrap intervals and each run against ``--base``
(paired permutation p; default ``no-dense``, the default without the question's embedding); ``--out`` keeps the
run files (without ranked lists) for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

RAW_FILES: dict[str, str] = {
    "id_list.txt": "c8e9ddfa6429f179dfd8182dbebe043ae71f91969f8ca8a12781288c6c6875d5",
    "titles.txt": "fdada6e74cda8993953d9d29c18f1fc76933f7923828b5070b3f14712be39080",
    "abstracts.txt": "56b809c05ed82093168412e9f6ddad9adde45b76a4b60c325096e2b0b8ebc53c",
    "authors.txt": "492396999ac7e918d9b51771acc41679efebdcf2366931aa195727fe606683e2",
    "known_citings.txt": "1bf4086f9ab0009c4c7d7519a5d7c789123f003b4f63298356731f9baa28add0",
    "acl-metadata.txt": "18270ee8ff9a63c6c4aac54828d3b3500a0b70913ff8a886e65a178bbcb20c33",
}
DEFAULT_BENCH = REPO / "benchmarks" / "data" / "aan_refs_dev.jsonl"
OUT = REPO / "benchmarks" / "results" / "aan_refs_dev"
METRICS = ("recall@5", "recall@20", "recall@50", "map@50")
#: the runs ``eval`` knows: method and settings overrides
DENSE_OFF: dict[str, Any] = {"dense_seed_weight": 0.0, "dense_restart_weight": 0.0, "dense_fusion_weight": 0.0}
RUNS: dict[str, tuple[str, dict[str, Any]]] = {
    "crase": ("crase", {}),
    "no-dense": ("crase", dict(DENSE_OFF)),
    "bm25": ("bm25", {}),
    "dense": ("dense", {}),
    **{f"dense-{use}-{w:g}": ("crase", {**DENSE_OFF, f"dense_{knob}_weight": w})
       for use, knob in (("fusion", "fusion"), ("restart", "restart"), ("seeds", "seed"))
       for w in (0.2, 0.3, 0.4, 0.5, 0.6, 0.8)},
    **{f"dense-seeds-fusion-{w:g}": ("crase", {**DENSE_OFF, "dense_seed_weight": w, "dense_fusion_weight": w}) for w in (0.4, 0.6)},
    **{f"dense-all-{w:g}": ("crase", {"dense_seed_weight": w, "dense_restart_weight": w, "dense_fusion_weight": w})
       for w in (0.4, 0.6)},
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_raw(raw: Path) -> None:
    """Every raw file present with its pinned SHA-256; SystemExit with one line naming the first that is not."""
    for name, want in RAW_FILES.items():
        path = raw / name
        if not path.is_file():
            raise SystemExit(f"cs_dev_corpus: {path} is missing (benchmarks/data/SOURCES.md says how to fetch it)")
        got = sha256(path)
        if got != want:
            raise SystemExit(f"cs_dev_corpus: {path} has SHA-256 {got[:16]}…, expected {want[:16]}…: another file")


def read_homework(path: Path) -> dict[str, str]:
    """``ID "json string"`` lines (``\\r`` or ``\\n`` ends) → {id: string}."""
    out: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").replace("\r", "\n").split("\n"):
        line = line.strip()
        if not line:
            continue
        pid, _, rest = line.partition(" ")
        value = json.loads(rest) if rest else ""
        out[pid] = value if isinstance(value, str) else ""
    return out


def read_metadata(path: Path) -> dict[str, dict[str, str]]:
    """The Network's ``key = {value}`` blocks → {id: {key: value}}."""
    out: dict[str, dict[str, str]] = {}
    cur: dict[str, str] = {}
    for line in path.read_bytes().decode("utf-8", errors="replace").splitlines() + [""]:
        m = re.match(r"(\w+) = \{(.*)\}\s*$", line)
        if m:
            cur[m.group(1)] = m.group(2).strip()
        elif not line.strip() and cur:
            if cur.get("id"):
                out[cur["id"]] = cur
            cur = {}
    return out


def id_year(pid: str) -> int | None:
    """The year in an ACL Anthology id (``W00-1401`` → 2000, ``P98-1013`` → 1998)."""
    m = re.match(r"^[A-Z](\d\d)-\d{4}$", pid)
    if not m:
        return None
    yy = int(m.group(1))
    return 1900 + yy if yy >= 60 else 2000 + yy


def clean_abstract(text: str) -> str:
    """The homework's abstract without ``<NoAbstract>`` or the cut-off start of the introduction after it."""
    text = text.strip()
    if text == "<NoAbstract>":
        return ""
    return re.sub(r"\s+1\.?\s+Intro\w*\s*$", "", text).strip()


def convert(raw: Path, dest: Path) -> dict[str, int]:
    """RAW's files → ``dest/papers.jsonl`` + ``dest/citations.tsv``; counts of what was written and dropped."""
    check_raw(raw)
    ids = [line.strip() for line in (raw / "id_list.txt").read_text(encoding="utf-8").replace("\r", "\n").split("\n")
           if line.strip()]
    titles, abstracts = read_homework(raw / "titles.txt"), read_homework(raw / "abstracts.txt")
    authors, cites = read_homework(raw / "authors.txt"), read_homework(raw / "known_citings.txt")
    meta = read_metadata(raw / "acl-metadata.txt")
    workshop = set(ids)
    edges: list[tuple[str, str]] = []
    counts = {"workshop papers": len(ids), "references": 0, "outside the Anthology (REF…)": 0,
              "Anthology ids the metadata does not know": 0, "self-citations": 0}
    for pid in ids:
        for ref in (cites.get(pid) or "").split("|"):
            if not ref:
                continue
            counts["references"] += 1
            if ref.startswith("REF"):
                counts["outside the Anthology (REF…)"] += 1
            elif ref == pid:
                counts["self-citations"] += 1
            elif ref in workshop or ref in meta:
                edges.append((pid, ref))
            else:
                counts["Anthology ids the metadata does not know"] += 1
    edges = sorted(set(edges))
    cited_only = sorted({v for _, v in edges} - workshop)
    dest.mkdir(parents=True, exist_ok=True)
    with open(dest / "papers.jsonl", "w", encoding="utf-8") as out:
        for pid in ids:
            m = meta.get(pid, {})
            year = int(m["year"]) if m.get("year", "").isdigit() else id_year(pid)
            rec: dict[str, Any] = {"id": pid, "title": titles.get(pid) or m.get("title", ""),
                                   "abstract": clean_abstract(abstracts.get(pid, "")),
                                   "authors": [a for a in (authors.get(pid) or "").split("|") if a],
                                   "venue": m.get("venue") or "ACL Anthology workshop"}
            out.write(json.dumps({**rec, **({"year": year} if year else {})}, ensure_ascii=False) + "\n")
        for pid in cited_only:
            m = meta[pid]
            year = int(m["year"]) if m.get("year", "").isdigit() else id_year(pid)
            rec = {"id": pid, "title": m.get("title", ""), "abstract": "",
                   "authors": [a.strip() for a in m.get("author", "").split(";") if a.strip()],
                   "venue": m.get("venue", "")}
            out.write(json.dumps({**rec, **({"year": year} if year else {})}, ensure_ascii=False) + "\n")
    with open(dest / "citations.tsv", "w", encoding="utf-8") as out:
        for u, v in edges:
            out.write(f"{u}\t{v}\n")
    counts.update({"cited ACL papers (title only)": len(cited_only), "papers": len(ids) + len(cited_only),
                   "citations": len(edges),
                   "workshop papers with an abstract": sum(1 for p in ids if clean_abstract(abstracts.get(p, "")))})
    return counts


def evaluate(args: argparse.Namespace) -> int:
    from crase_core.evaluation.harness import EvalJob, run_eval
    from crase_core.evaluation.report import kind_table, paired_table
    from crase_core.evaluation.run_file import read_run, write_run
    from crase_core.runtime import RuntimeConfig
    from crase_core.settings.pipeline import PipelineSettings

    runtime = RuntimeConfig(corpus_dir=str(args.corpus))
    rows: dict[str, list[dict[str, Any]]] = {}
    for name in args.runs.split(","):
        method, overrides = RUNS[name]
        folder = args.work / "runs" / name
        job = EvalJob(bench=str(args.bench), out=str(folder), method=method,
                      settings=PipelineSettings.from_preset("default", **overrides), runtime=runtime,
                      workers=args.workers, rankings=False)
        if not args.report_only:
            run_eval(job)
        run = read_run(folder)
        rows[name] = run.rows
        if args.out is not None:
            (args.out / name).mkdir(parents=True, exist_ok=True)
            write_run(args.out / name, run.config, run.summary, run.rows, rankings=False)
    labelled = list(rows.items())
    print("95 % bootstrap intervals (1,000 resamples over queries):\n")
    print(kind_table(labelled, {}, METRICS))
    base = args.base if args.base in rows else "crase"
    if base in rows and len(rows) > 1:
        print(f"\nAgainst {base} (Δ = run − {base}; paired permutation p):\n")
        print(paired_table((base, rows[base]), [r for r in labelled if r[0] != base], {}, METRICS))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert", help="RAW → OUT/source (JSONL) → OUT/corpus (imported)")
    c.add_argument("--raw", type=Path, required=True)
    c.add_argument("--out", type=Path, required=True)
    e = sub.add_parser("eval", help="runs on a benchmark over the corpus")
    e.add_argument("--corpus", type=Path, required=True)
    e.add_argument("--bench", type=Path, default=DEFAULT_BENCH)
    e.add_argument("--work", type=Path, default=Path("/tmp/cs_dev"))
    e.add_argument("--out", type=Path, default=None, help="keep the run files here (e.g. " + str(OUT) + ")")
    e.add_argument("--runs", default="crase,bm25", help="comma-separated: " + ",".join(RUNS))
    e.add_argument("--workers", type=int, default=1)
    e.add_argument("--base", default="no-dense", help="the run the others are paired with (default: %(default)s)")
    e.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    if args.cmd == "eval":
        return evaluate(args)
    from crase_core.importers.corpus_import import import_corpus

    counts = convert(args.raw, args.out / "source")
    for k, v in counts.items():
        print(f"{k}: {v:,}")
    result = import_corpus(args.out / "source", args.out / "corpus", "jsonl")
    print(f"{args.out / 'corpus'}: {result.n_papers:,} papers, {result.n_citations:,} citations imported")
    for line in result.report.lines():
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
