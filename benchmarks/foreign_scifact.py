"""A held-out foreign corpus: SciFact's 5,183 biomedical abstracts, its claims as questions, the default against BM25.

    nice -n 10 .venv/bin/python benchmarks/foreign_scifact.py --scifact DIR [--work DIR] [--sample N] [--seed 0]
        [--workers 1] [--out benchmarks/results/foreign_scifact] [--report-only]

DIR holds the SciFact release's ``corpus.jsonl.gz`` (or ``corpus.jsonl``: ``doc_id``, ``title``, ``sentences``)
and ``claims_train.jsonl`` (``id``, ``claim``, ``cited_doc_ids``, ``evidence``) — SciFact (D. Wadden et al.,
"Fact or Fiction: Verifying Scientific Claims", EMNLP 2020; claims CC BY 4.0, abstracts ODC-By 1.0).

What it does, end to end:

1. writes the abstracts as a corpus folder in the import format of docs/corpus_formats.md
   (``papers.jsonl``: ``id`` = the doc id, ``title``, ``abstract`` = the sentences joined by spaces; SciFact has
   no years and no citations, so every paper is undated and ``citations.tsv`` is empty) and imports it with
   ``crase corpus import --format jsonl``'s importer (the import's report goes to stderr) into ``WORK/corpus``
   (WORK: ``--work``, default
   ``<crase cache>/benchmarks/foreign_scifact``; nothing is written into the repository but the results);
2. writes a question-style benchmark ``WORK/claims.jsonl``: query = the claim, relevant = its cited documents
   (every claim of the train split cites at least one; one without would be skipped); no ``paper_id`` and no
   year (a claim comes from no paper of the corpus), so the leakage filter is off and the whole corpus is
   visible to every query, as for the LitSearch-style dev set. ``--sample N`` keeps a seeded sample of N
   claims instead of all of them;
3. runs the default (``crase eval``'s ``crase`` method, default settings, offline backend) and ``bm25`` through
   the evaluation harness that ``crase eval`` runs (``WORK/runs/<method>/``, resumable), without corpus embeddings (so without semantic
   feedback: ``crase corpus embed`` was not run, as on a freshly imported corpus);
4. writes one run file per method to ``--out`` (``<method>/run.json.gz``, crase_core.evaluation.run_file: the
   harness's pin, summary and per-query rows — hits@k and AP@k, what the intervals and the paired tests read —
   without the ranked lists; the summary's ``scifact`` says what ran on what corpus and benchmark) and prints R@5/R@10/R@50/MAP@50 with 95 % bootstrap intervals and the default against BM25 (Δ and the paired
   permutation p), with crase_core.evaluation.report's tables. ``--report-only`` prints them from ``--out``.

The ranking was never tuned on SciFact. Its claims were used once before, only to calibrate the word-overlap
support threshold (benchmarks/eval_scifact.py, crase_core.evidence.entailment.WORD_OVERLAP_SUPPORT_THETA),
which decides which citation edges count as supported; with no citation edges here it decides nothing.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from crase_core.evaluation.benchmark import load_benchmark  # noqa: E402
from crase_core.evaluation.harness import EvalJob, run_eval  # noqa: E402
from crase_core.evaluation.report import kind_table, paired_table  # noqa: E402
from crase_core.evaluation.run_file import RunFile, is_run, read_run, write_run  # noqa: E402
from crase_core.importers.corpus_import import import_corpus  # noqa: E402
from crase_core.runtime import RuntimeConfig  # noqa: E402
from crase_core.settings.environment import cache_folder  # noqa: E402
from crase_core.settings.pipeline import PipelineSettings  # noqa: E402

METHODS = ("crase", "bm25")
WHAT = {"crase": "the default configuration (crase eval's default method and settings, offline backend)",
        "bm25": "BM25 on the query alone (crase eval --method bm25)"}
METRICS = ("recall@5", "recall@10", "recall@50", "map@50")
OUT = REPO / "benchmarks" / "results" / "foreign_scifact"


def _open(folder: Path, name: str) -> Any:
    gz = folder / f"{name}.gz"
    return gzip.open(gz, "rt", encoding="utf-8") if gz.is_file() else open(folder / name, encoding="utf-8")


def write_corpus_folder(scifact: Path, dest: Path) -> int:
    """SciFact's abstracts as a corpus folder (papers.jsonl + an empty citations.tsv); the number of papers."""
    dest.mkdir(parents=True, exist_ok=True)
    n = 0
    with _open(scifact, "corpus.jsonl") as f, open(dest / "papers.jsonl", "w", encoding="utf-8") as out:
        for line in f:
            doc = json.loads(line)
            out.write(json.dumps({"id": str(doc["doc_id"]), "title": doc["title"],
                                  "abstract": " ".join(s.strip() for s in doc["sentences"])}) + "\n")
            n += 1
    (dest / "citations.tsv").write_text("")
    return n


def write_benchmark(scifact: Path, dest: Path, sample: int | None, seed: int) -> tuple[int, int, int]:
    """The claims as a question benchmark (query = claim, relevant = cited documents); (claims read, claims with
    cited documents, claims written)."""
    with open(scifact / "claims_train.jsonl", encoding="utf-8") as f:
        claims = [json.loads(line) for line in f if line.strip()]
    usable = [c for c in claims if c.get("cited_doc_ids")]
    chosen = usable
    if sample is not None and sample < len(usable):
        chosen = sorted(random.Random(seed).sample(usable, sample), key=lambda c: int(c["id"]))
    with open(dest, "w", encoding="utf-8") as out:
        for c in chosen:
            out.write(json.dumps({"qid": f"scifact-{c['id']}", "query": c["claim"],
                                  "relevant": [str(d) for d in c["cited_doc_ids"]], "kind": "claim"}) + "\n")
    return len(claims), len(usable), len(chosen)


def publish(run: RunFile, out: Path, method: str, info: dict[str, Any]) -> Path:
    """``out/<method>/run.json.gz``: the harness's run file (its pin, summary and per-query rows) without the
    ranked lists, the summary with what ran and on what (``scifact``)."""
    summary = {**run.summary, "scifact": {"what": WHAT[method], **info}}
    (out / method).mkdir(parents=True, exist_ok=True)
    return write_run(out / method, run.config, summary, run.rows, rankings=False)


def report(results: dict[str, RunFile]) -> str:
    """The markdown block: each method's metrics with 95 % bootstrap intervals, then the default against BM25."""
    labelled = [(m, results[m].rows) for m in METHODS if m in results]
    lines = ["95 % bootstrap intervals (1,000 resamples over queries):", "", kind_table(labelled, {}, METRICS)]
    if len(labelled) == 2:
        lines += ["", "The default against BM25 (Δ = default − BM25; paired permutation p):", "",
                  paired_table(labelled[1], [labelled[0]], {}, METRICS)]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scifact", type=Path, help="folder with corpus.jsonl[.gz] and claims_train.jsonl")
    ap.add_argument("--work", type=Path, default=None,
                    help="corpus, benchmark and runs (default: <crase cache>/benchmarks/foreign_scifact)")
    ap.add_argument("--out", type=Path, default=OUT, help="where the per-method result files go")
    ap.add_argument("--sample", type=int, default=None, help="a seeded sample of N claims instead of all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--report-only", action="store_true", help="print the tables from the result files in --out")
    args = ap.parse_args()
    if not args.report_only:
        if args.scifact is None:
            ap.error("--scifact DIR is needed (unless --report-only)")
        work = args.work or cache_folder() / "benchmarks" / "foreign_scifact"
        corpus, imported = work / "corpus", work / "import.json"
        if not corpus.is_dir():
            src = work / "source"
            write_corpus_folder(args.scifact, src)
            result = import_corpus(src, corpus, "jsonl", workers=args.workers)
            print(f"{corpus}: {result.n_papers:,} papers, {result.n_citations:,} citations imported "
                  f"in {result.seconds:.1f} s", file=sys.stderr)
            for line in result.report.lines():  # the import's validation report (all undated, no citations)
                print(line, file=sys.stderr)
            imported.write_text(json.dumps({"papers": result.n_papers, "citations": result.n_citations,
                                            "undated": result.report.paper_notes.get("undated", 0)}))
        bench = work / ("claims.jsonl" if args.sample is None else f"claims-sample{args.sample}-seed{args.seed}.jsonl")
        n_claims, n_usable, n_written = write_benchmark(args.scifact, bench, args.sample, args.seed)
        info = {"corpus": {**json.loads(imported.read_text()), "embeddings": False},
                "benchmark": {"claims": n_claims, "with_cited_docs": n_usable, "queries": n_written,
                              "sample": args.sample, "seed": args.seed if args.sample is not None else None,
                              "relevant": sum(len(q.relevant) for q in load_benchmark(bench))}}
        runtime = RuntimeConfig(corpus_dir=str(corpus))
        for method in METHODS:
            folder = work / "runs" / (method if args.sample is None else f"{method}-sample{args.sample}-seed{args.seed}")
            job = EvalJob(bench=str(bench), out=str(folder), method=method,
                          settings=PipelineSettings.from_preset("default"), runtime=runtime, workers=args.workers)
            run_eval(job)
            run = read_run(folder)
            errors = [r for r in run.rows if r.get("error")]
            if errors:
                print(f"{method}: {len(errors)} queries errored, e.g. {errors[0]['qid']}: {errors[0]['error']}",
                      file=sys.stderr)
            publish(run, args.out, method, info)
    results = {m: read_run(args.out / m) for m in METHODS if is_run(args.out / m)}
    if not results:
        print(f"no result files in {args.out}", file=sys.stderr)
        return 2
    first = next(iter(results.values())).summary.get("scifact", {})
    c, b = first.get("corpus", {}), first.get("benchmark", {})
    print(f"SciFact: {c.get('papers', 0):,} abstracts, {c.get('citations', 0):,} citations, {c.get('undated', 0):,} "
          f"undated; {b.get('queries', 0)} claims as questions ({b.get('relevant', 0)} relevant)\n")
    print(report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
