"""The embedded hep-th corpus written out as OpenAlex and Semantic Scholar publish theirs, and imported back.

    .venv/bin/python benchmarks/export_hepth.py --out DIR [--limit N] [--check] [--benches refs,litsearch]

writes

* ``DIR/openalex/works/updated_date=2003-12-31/part_000.gz`` … (JSON lines in OpenAlex's Work schema, 5,000 works
  a part) and ``DIR/openalex/works/manifest`` (Redshift manifest JSON with each part's record count);
* ``DIR/s2/papers/part-000.jsonl.gz``, ``DIR/s2/abstracts/…``, ``DIR/s2/citations/…`` (the datasets API's records).

Ids: OpenAlex work ``W1`` + the arXiv number (``9711200`` → ``W19711200``), S2 corpus id ``1`` + the number
(``19711200``): both keep the ids' order and every digit. Each Work has ``title``/``display_name``,
``publication_year``, ``publication_date`` (``YYYY-MM-01`` of the id's month), ``authorships``, the arXiv DOI
(``10.48550/arXiv.hep-th/9711200``), ``abstract_inverted_index`` (the abstract's words at their positions) and
``referenced_works`` (its citation lines, self-citations included: the build drops and counts them).

With ``--check`` both are imported (``crase corpus import``) into ``DIR/imported-openalex`` and
``DIR/imported-s2`` and every query of the dev benchmarks is run on each, ids mapped, with the embedded
corpus's shipped embeddings (same papers in the same order, so semantic feedback runs as on the embedded
corpus); the rankings are compared with the committed rows of ``benchmarks/results/<bench>/crase``. Prints
one JSON object (import times, counts, mismatches); exit status 1 when any ranking differs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from crase_core.store.corpus import DEFAULT_CORPUS_DIR, month_from_id, split_authors

REPO = Path(__file__).resolve().parents[1]

PART = 5000
PARTITION = "updated_date=2003-12-31"
BENCHES = {"refs": "hepth_refs_dev", "litsearch": "hepth_litsearch_dev"}


def openalex_id(pid: str) -> str:
    return f"W1{pid}"


def s2_id(pid: str) -> int:
    return int(f"1{pid}")


def back(new_id: str) -> str:
    """The hep-th id of an exported id (either format)."""
    return new_id[2:] if new_id.startswith("W1") else new_id[1:]


def read_hepth(folder: Path, limit: int | None = None) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    papers: list[dict[str, Any]] = []
    with gzip.open(folder / "papers.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            papers.append(json.loads(line))
            if limit is not None and len(papers) >= limit:
                break
    refs: dict[str, list[str]] = defaultdict(list)
    with gzip.open(folder / "citations.tsv.gz", "rt", encoding="utf-8") as f:
        for line in f:
            u, _, v = line.rstrip("\n").partition("\t")
            refs[u].append(v)
    return papers, refs


def inverted_index(text: str) -> dict[str, list[int]] | None:
    if not text:
        return None
    index: dict[str, list[int]] = {}
    for pos, word in enumerate(text.split(" ")):
        index.setdefault(word, []).append(pos)
    return index


def _date(p: dict[str, Any]) -> str | None:
    month = month_from_id(p["id"])
    return f"{month // 100:04d}-{month % 100:02d}-01" if month else None


def work(p: dict[str, Any], refs: list[str]) -> dict[str, Any]:
    """One hep-th paper as an OpenAlex Work (the fields the Work object documents; see the module docstring)."""
    wid = f"https://openalex.org/{openalex_id(p['id'])}"
    doi = f"https://doi.org/10.48550/arXiv.{p['arxiv']}"
    return {
        "id": wid, "doi": doi, "title": p["title"], "display_name": p["title"],
        "publication_year": p.get("year"), "publication_date": _date(p),
        "ids": {"openalex": wid, "doi": doi},
        "language": "en", "type": "article", "type_crossref": "posted-content",
        "primary_location": {"is_oa": True, "landing_page_url": f"https://arxiv.org/abs/{p['arxiv']}",
                             "pdf_url": f"https://arxiv.org/pdf/{p['arxiv']}", "version": "submittedVersion",
                             "source": {"id": "https://openalex.org/S4306400194", "display_name": "arXiv (Cornell University)",
                                        "type": "repository"}},
        "authorships": [{"author_position": "first" if i == 0 else "middle",
                         "author": {"id": None, "display_name": name, "orcid": None},
                         "institutions": [], "raw_author_name": name}
                        for i, name in enumerate(split_authors(p.get("authors")))],
        "cited_by_count": 0, "is_retracted": False, "is_paratext": False,
        "abstract_inverted_index": inverted_index(p.get("abstract") or ""),
        "referenced_works": [f"https://openalex.org/{openalex_id(r)}" for r in dict.fromkeys(refs)],
        "updated_date": "2003-12-31T00:00:00.000000", "created_date": "2003-12-31",
    }


def _parts(items: Iterator[bytes], folder: Path, name: str, suffix: str) -> list[tuple[Path, int]]:
    folder.mkdir(parents=True, exist_ok=True)
    written: list[tuple[Path, int]] = []
    batch: list[bytes] = []

    def flush() -> None:
        path = folder / f"{name}{len(written):03d}{suffix}"
        with gzip.open(path, "wb", compresslevel=6) as f:
            f.write(b"".join(batch))
        written.append((path, len(batch)))
        batch.clear()
    for item in items:
        batch.append(item)
        if len(batch) >= PART:
            flush()
    if batch or not written:
        flush()
    return written


def export_openalex(papers: list[dict[str, Any]], refs: dict[str, list[str]], out: Path) -> Path:
    works = out / "works"
    lines = (json.dumps(work(p, refs.get(p["id"], [])), ensure_ascii=False).encode() + b"\n" for p in papers)
    parts = _parts(lines, works / PARTITION, "part_", ".gz")
    entries = [{"url": f"s3://openalex/data/works/{PARTITION}/{p.name}",
                "meta": {"content_length": p.stat().st_size, "record_count": n}} for p, n in parts]
    manifest = {"entries": entries, "meta": {"content_length": sum(e["meta"]["content_length"] for e in entries),
                                             "record_count": sum(n for _, n in parts)}}
    (works / "manifest").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return out


def s2_paper(p: dict[str, Any]) -> dict[str, Any]:
    cid = s2_id(p["id"])
    return {"corpusid": cid,
            "externalids": {"ACL": None, "DBLP": None, "ArXiv": p["arxiv"], "MAG": None, "CorpusId": str(cid),
                            "PubMed": None, "DOI": f"10.48550/arXiv.{p['arxiv']}", "PubMedCentral": None},
            "url": None, "title": p["title"],
            "authors": [{"authorId": None, "name": a} for a in split_authors(p.get("authors"))],
            "venue": "", "publicationvenueid": None, "year": p.get("year"), "referencecount": None,
            "citationcount": None, "influentialcitationcount": None, "isopenaccess": True, "s2fieldsofstudy": None,
            "publicationtypes": None, "publicationdate": _date(p), "journal": None, "updated": "2003-12-31T00:00:00.000Z"}


def export_s2(papers: list[dict[str, Any]], refs: dict[str, list[str]], out: Path) -> Path:
    known = {p["id"] for p in papers}
    _parts((json.dumps(s2_paper(p), ensure_ascii=False).encode() + b"\n" for p in papers), out / "papers", "part-",
           ".jsonl.gz")
    _parts((json.dumps({"corpusid": s2_id(p["id"]),
                        "openaccessinfo": {"externalids": {"MAG": None, "ACL": None, "DOI": None, "PubMedCentral": None,
                                                           "ArXiv": p["arxiv"]}, "license": None, "url": None,
                                           "status": None},
                        "abstract": p.get("abstract") or None, "updated": "2003-12-31T00:00:00.000Z"},
                       ensure_ascii=False).encode() + b"\n" for p in papers), out / "abstracts", "part-", ".jsonl.gz")
    _parts((json.dumps({"citingcorpusid": str(s2_id(u)), "citedcorpusid": str(s2_id(v)), "isinfluential": False,
                        "contexts": None, "intents": None, "updated": "2003-12-31T00:00:00.000Z"}).encode() + b"\n"
            for u in refs if u in known for v in refs[u]), out / "citations", "part-", ".jsonl.gz")
    return out


# ---- the check ----------------------------------------------------------------------------------------------
def _import(src: Path, dest: Path, fmt: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "crase_core.cli", "corpus", "import", str(src), str(dest), "--format",
                        fmt], cwd=str(REPO), capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"import {fmt} failed: {r.stderr.strip()}")
    return {"seconds": round(time.perf_counter() - t0, 1), "report": r.stdout.strip().splitlines()}


def check(dest: Path, fmt: str, benches: list[str], data: Path) -> dict[str, Any]:
    """Run every dev query on the imported corpus ``dest`` (ids mapped) and compare with the committed rows."""
    from crase_core.evaluation.benchmark import BenchQuery, load_benchmark
    from crase_core.evaluation.harness import EvalJob, evaluate_query
    from crase_core.evaluation.run_file import run_rows
    from crase_core.retrieval import semantic
    from crase_core.runtime import RuntimeConfig
    from crase_core.sources import local

    emb = semantic.load_embeddings(semantic.embeddings_file("hepth", "fca14e40e654ab16"), 29555)
    local.shipped_embeddings = lambda name, fp, rows: emb if rows == 29555 else None  # type: ignore[assignment]
    to_new = openalex_id if fmt == "openalex" else (lambda pid: str(s2_id(pid)))
    runtime = RuntimeConfig(corpus_dir=str(dest))
    out: dict[str, Any] = {}
    for name in benches:
        bench = BENCHES[name]
        committed = {r["qid"]: r for r in run_rows(REPO / "benchmarks" / "results" / bench / "crase")}
        job = EvalJob(bench=str(data / f"{bench}.jsonl"), out="", runtime=runtime)
        same = differ = 0
        first: list[str] = []
        for q in load_benchmark(data / f"{bench}.jsonl"):
            mapped = BenchQuery(q.qid, q.query, tuple(to_new(r) for r in q.relevant),
                                to_new(q.paper_id) if q.paper_id else None, q.year, q.extra)
            row = evaluate_query(job, mapped)
            ranked = [back(r) for r in row["ranked"]]
            if ranked == committed[q.qid]["ranked"] and not row.get("error"):
                same += 1
            else:
                differ += 1
                first.append(q.qid)
        out[bench] = {"identical": same, "different": differ, "first_different": first[:5]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS_DIR)
    ap.add_argument("--limit", type=int, default=None, help="only the first N papers (a quick export)")
    ap.add_argument("--check", action="store_true", help="import both back and compare every dev ranking")
    ap.add_argument("--benches", default="refs,litsearch")
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "benchmarks")
    args = ap.parse_args()
    t0 = time.perf_counter()
    papers, refs = read_hepth(args.corpus, args.limit)
    export_openalex(papers, refs, args.out / "openalex")
    export_s2(papers, refs, args.out / "s2")
    result: dict[str, Any] = {"papers": len(papers), "export_s": round(time.perf_counter() - t0, 1)}
    if args.check:
        benches = [b for b in args.benches.split(",") if b]
        for fmt in ("openalex", "s2"):
            dest = args.out / f"imported-{fmt}"
            result[fmt] = {"import": _import(args.out / fmt, dest, fmt)}
            result[fmt].update(check(dest, fmt, benches, args.data))
    print(json.dumps(result, indent=2))
    bad = any(v.get("different") for fmt in ("openalex", "s2") for v in result.get(fmt, {}).values()
              if isinstance(v, dict))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
