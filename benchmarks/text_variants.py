"""More text-relevance ideas, measured on the dev sets (issue 14, round 6).

Each is measured at the text level (no graph), under the harness's per-query leakage filter, against
the project's own BM25 (``bm25`` rows of the harness; the script checks that its own BM25 reproduces them):

1. **Corpus acronym expansion** (``acronyms-w``): acronym definitions mined from the corpus itself,
   "long form (ACRO)" with the acronym's capitals spelling the long form's initials ("anti-de Sitter (AdS)",
   "Wess-Zumino-Witten (WZW)"), kept when seen ``--min-count`` times. A question that spells out a long
   form also searches for its acronym, with weight w: s = BM25(q) + w·BM25(acronyms). ``acronyms-rev-w``
   also expands an acronym in the question to its long form.
2. **Latent semantic indexing** (``lsa``, ``bm25+lsa-w``): a rank-``--lsa-k`` truncated SVD (scipy's
   ``svds``) of the corpus's log-tf·idf matrix (the index's terms, title counted twice); a question is
   folded in (q·V) and scored by cosine. The fusion is (1 − w)·BM25' + w·LSA', each min-max normalised
   over BM25's top ``--depth`` ∪ LSA's top ``--depth`` (as ``dense_hybrid.py``). The SVD is fitted on the
   whole corpus, hidden papers included (like the index's idf; hidden papers never rank).
3. **Semantic feedback at the text level** (``bm25+semantic-feedback-w``): BM25's top 100 fused with the papers
   whose shipped MiniLM embedding is nearest to its top hit's (``crase_core.retrieval.semantic.feedback_fuse``, the
   default pipeline's signal, here without the graph), weight w.
4. **BM25's parameters** (``bm25-t{T}-k{k1}-b{b}``): k1, b and how many times the title counts (1, 2 = the
   index's, 3), on a grid. Changing them changes the BM25 baseline itself.

With ``--pipeline acronyms-W,k1-X,...`` it also runs round 5's default (semantic feedback off, the default
these ideas were measured on) end to end with one change:
acronym expansion at weight W (every local search of the run, sub-queries and the question, is expanded:
the script wraps ``TextIndex.scores``) or BM25's k1 = X (then BM25 alone is rerun with that k1 too), into
``OUT/<bench>/crase-<change>``. Nothing in ``crase_core`` changes.

    .venv/bin/python benchmarks/text_variants.py --out /tmp/text_variants \\
        [--pipeline acronyms-0.5,acronyms-1,k1-0.9,k1-1.2]

Writes ``OUT/text_variants.md``: every run by kind with 95% bootstrap intervals, paired permutation tests
against bm25 (and the pipeline runs against the committed ``round5-default`` rows), and the BM25 grid. Everything
here is tuned on the dev sets. Nothing in ``crase_core`` or the tests imports this file.
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import svds
from text_fusion import interpolate, order_by, overall_table, top_ids

from crase_core.evaluation.benchmark import BenchQuery, load_benchmark, query_filter
from crase_core.evaluation.harness import EvalJob, run_eval
from crase_core.evaluation.metrics import KS, per_query_metrics
from crase_core.evaluation.report import kind_table, paired_table
from crase_core.evaluation.run_file import is_run, run_rows
from crase_core.retrieval.semantic import feedback_fuse
from crase_core.runtime import RuntimeConfig, build_engine, local_source
from crase_core.settings.pipeline import PipelineSettings
from crase_core.store import textindex
from crase_core.store.textindex import TextIndex
from crase_core.text import STOPWORDS, content_terms, content_words, stem

ROOT = Path(__file__).resolve().parent
#: the end-to-end runs change round 5's default (semantic feedback off), the default these ideas were measured on
ROUND5_DEFAULT = PipelineSettings(semantic_feedback_weight=0.0, semantic_feedback_scope="all")
BENCHES = ("hepth_refs_dev", "hepth_litsearch_dev")
Row = dict[str, Any]
Scorer = Callable[[BenchQuery, np.ndarray], np.ndarray]  # (query, visible mask) → a score per paper

# ---- acronyms (pure) ---------------------------------------------------------------------------------------
_DEFINITION = re.compile(r"((?:[A-Za-z][\w'-]*[\s-]+){1,6})\(([A-Z][A-Za-z0-9]{1,7}?)s?\)")


def definitions(text: str) -> Iterable[tuple[str, str]]:
    """(acronym, long form) pairs defined in ``text`` as "long form (ACRO)": the acronym's capitals (at least
    two) are the initials of the long form's last words, stop words in between allowed."""
    for m in _DEFINITION.finditer(text):
        acro = m.group(2)
        letters = [c.lower() for c in acro if c.isupper()]
        if len(letters) < 2:
            continue
        words = [w for w in re.split(r"[\s-]+", m.group(1).strip()) if w]
        chosen: list[str] = []
        j = len(letters) - 1
        for w in reversed(words):
            if j < 0:
                break
            if w[0].lower() == letters[j]:
                j -= 1
            elif w.lower() not in STOPWORDS and w.lower() != "de":
                break
            chosen.append(w)
        if j < 0:
            yield acro.lower(), " ".join(reversed(chosen)).lower()


def acronym_table(texts: Iterable[str], min_count: int) -> dict[tuple[str, ...], str]:
    """Long form (as content stems, at least two) → its most often defined acronym, seen ≥ ``min_count`` times."""
    counts = Counter(d for t in texts for d in definitions(t))
    best: dict[tuple[str, ...], tuple[str, int]] = {}
    for (acro, long), c in counts.items():
        key = tuple(content_terms(long))
        if c >= min_count and len(key) >= 2 and (key not in best or best[key][1] < c):
            best[key] = (acro, c)
    return {k: a for k, (a, _) in best.items()}


def expansions(query: str, table: Mapping[tuple[str, ...], str], reverse: bool) -> list[str]:
    """The acronyms of the long forms ``query`` spells out; with ``reverse`` also the long forms of the
    acronyms it uses."""
    t = content_terms(query)
    out = [a for key, a in table.items()
           if any(tuple(t[i:i + len(key)]) == key for i in range(len(t) - len(key) + 1))]
    if reverse:
        longs = {tuple(content_terms(a)): " ".join(key) for key, a in table.items()}
        out += [longs[(w,)] for w in dict.fromkeys(t) if (w,) in longs]
    return out


# ---- term matrices -------------------------------------------------------------------------------------------
def term_matrix(docs: Sequence[tuple[str, str]], title_times: int, vocab: dict[str, int]) -> sp.csc_matrix:
    """Documents × terms raw counts of the index's tokenisation, the title counted ``title_times`` times."""
    rows: list[int] = []
    cols: list[int] = []
    for j, (title, abstract) in enumerate(docs):
        for w in content_words(" ".join([title] * title_times) + " " + abstract):
            cols.append(vocab.setdefault(stem(w), len(vocab)))
            rows.append(j)
    m = sp.csr_matrix((np.ones(len(cols), np.float32), (rows, cols)), shape=(len(docs), len(vocab)))
    m.sum_duplicates()
    return m.tocsc()


def bm25_scorer(counts: sp.csc_matrix, vocab: Mapping[str, int], k1: float, b: float) -> Scorer:
    """Lucene BM25 over ``counts`` (as crase_core.store.textindex: idf = ln(1 + (N − df + 0.5)/(df + 0.5)))."""
    n = counts.shape[0]
    dl = np.asarray(counts.sum(1)).ravel().astype(np.float64)
    avgdl = dl.mean()
    idf = np.log(1 + (n - np.diff(counts.indptr) + 0.5) / (np.diff(counts.indptr) + 0.5))

    def score(q: BenchQuery, visible: np.ndarray) -> np.ndarray:
        s = np.zeros(n)
        for t in content_terms(q.query):
            tid = vocab.get(t)
            if tid is None or tid >= counts.shape[1]:
                continue
            lo, hi = counts.indptr[tid], counts.indptr[tid + 1]
            d, tf = counts.indices[lo:hi], counts.data[lo:hi].astype(np.float64)
            s[d] += idf[tid] * tf / (tf + k1 * (1 - b + b * dl[d] / avgdl))
        return np.where(visible, s, 0.0)
    return score


def lsa_scorer(counts: sp.csc_matrix, vocab: Mapping[str, int], k: int) -> Scorer:
    """Cosine of the question and each paper in a rank-``k`` LSI space of log(1 + tf)·idf (terms in ≥ 2 papers)."""
    n = counts.shape[0]
    df = np.diff(counts.indptr)
    idf = (np.log(n / np.maximum(df, 1)) * (df >= 2)).astype(np.float32)
    a = counts.tocsr().astype(np.float32)
    a.data = np.log1p(a.data)
    a = sp.csr_matrix(a @ sp.diags(idf))
    norms = np.sqrt(np.asarray(a.multiply(a).sum(1)).ravel())
    a = sp.csr_matrix(sp.diags(1 / np.where(norms > 0, norms, 1)) @ a)
    u, s, vt = svds(a, k=k, random_state=0)
    docs = (u * s).astype(np.float32)
    docs /= np.maximum(np.linalg.norm(docs, axis=1, keepdims=True), 1e-9)

    def score(q: BenchQuery, visible: np.ndarray) -> np.ndarray:
        v = np.zeros(len(idf), np.float32)
        for t in content_terms(q.query):
            if (tid := vocab.get(t)) is not None and tid < len(idf):
                v[tid] += 1
        z = vt @ (np.log1p(v) * idf)
        z /= max(float(np.linalg.norm(z)), 1e-9)
        return np.where(visible, docs @ z, -np.inf)
    return score


# ---- runs ------------------------------------------------------------------------------------------------------
def row_of(q: BenchQuery, method: str, ranked: list[str]) -> Row:
    row: Row = {"qid": q.qid, "method": method, "n_relevant": len(q.relevant)}
    row.update(per_query_metrics(ranked, q.relevant, KS))
    row["ranked"] = ranked
    return row


def text_rows(queries: Sequence[BenchQuery], index: TextIndex, ids: Sequence[str], table: Mapping[tuple[str, ...], str],
              lsa: Scorer, grid: Mapping[str, Scorer], weights: Sequence[float], lsa_weights: Sequence[float],
              depth: int, feedback_weights: Sequence[float] = (0.3, 0.4, 0.5)) -> dict[str, list[Row]]:
    """One row per query for every text-level run (see the module docstring)."""
    runs: dict[str, list[Row]] = {}
    runtime = RuntimeConfig()

    def add(name: str, q: BenchQuery, order: list[int]) -> None:
        runs.setdefault(name, []).append(row_of(q, name, [ids[i] for i in order[:50]]))
    for q in queries:
        source_q: Any = build_engine(runtime, source_filter=query_filter(q, local_source(runtime))).source
        visible = source_q.visible
        lexical = np.where(visible, index.scores(q.query), 0.0).astype(np.float64)
        positive = np.where(lexical > 0, lexical, -np.inf)
        add("bm25 (own)", q, top_ids(positive, ids, 50))
        for reverse, w in itertools.product((False, True), weights):
            extra = expansions(q.query, table, reverse)
            s = lexical + (w * np.where(visible, index.scores(" ".join(extra)), 0.0) if extra else 0.0)
            add(f"acronyms{'-rev' if reverse else ''}-{w:g}", q, top_ids(np.where(s > 0, s, -np.inf), ids, 50))
        if source_q.embeddings is not None:  # semantic feedback (crase_core.retrieval.semantic) on the plain BM25 list
            hits = source_q.search(q.query, 100)
            for w in feedback_weights:
                fused = feedback_fuse(hits, source_q.embeddings, source_q.corpus.index, source_q.corpus.papers,
                                      visible, w)
                runs.setdefault(f"bm25+semantic-feedback-{w:g}", []).append(
                    row_of(q, f"bm25+semantic-feedback-{w:g}", [r.paper.id for r in fused[:50]]))
        semantic = lsa(q, visible)
        ls = top_ids(semantic, ids, depth)
        add("lsa", q, ls)
        lb = top_ids(positive, ids, depth)
        finite = np.where(np.isfinite(semantic), semantic, 0.0)
        for w in lsa_weights:
            add(f"bm25+lsa-{w:g}", q, order_by(interpolate(sorted(set(lb) | set(ls)), lexical, finite, w), ids))
        for name, score in grid.items():
            s = score(q, visible)
            add(name, q, top_ids(np.where(s > 0, s, -np.inf), ids, 50))
    return runs


def pipeline_rows(bench_file: Path, out: Path, table: Mapping[tuple[str, ...], str], spec: str) -> list[Row]:
    """The default pipeline end to end with one lexical change, ``spec``: ``acronyms-W`` (every local search
    expanded by acronyms at weight W) or ``k1-X`` (BM25's k1 = X everywhere, the BM25 baseline included)."""
    kind, value = spec.rsplit("-", 1)
    w = float(value)
    original, k1 = TextIndex.scores, textindex.K1

    def expanded(self: TextIndex, query: str) -> np.ndarray:
        s = original(self, query)
        extra = expansions(query, table, False)
        return s + w * original(self, " ".join(extra)) if extra else s
    if kind == "acronyms":
        TextIndex.scores = expanded  # type: ignore[method-assign]
    elif kind == "k1":
        textindex.K1 = w
    else:
        raise SystemExit(f"--pipeline: unknown change {spec!r} (acronyms-W or k1-X)")
    try:
        rows = []
        for method in ("crase", "bm25") if kind == "k1" else ("crase",):
            folder = out / (f"crase-{spec}" if method == "crase" else f"bm25-{spec}")
            run_eval(EvalJob(bench=str(bench_file), out=str(folder), method=method, settings=ROUND5_DEFAULT),
                     progress=lambda s: print(s, file=sys.stderr))
            rows.append(run_rows(folder))
    finally:
        TextIndex.scores, textindex.K1 = original, k1  # type: ignore[method-assign]
    return [r for rs in rows for r in rs]


def grid_table(runs: Mapping[str, Mapping[str, Sequence[Row]]], kinds: Mapping[str, str]) -> list[str]:
    names = [n for n in next(iter(runs.values())) if n.startswith("bm25-t")]
    lines = ["| title × | k1 | b | refs R@50 | refs MAP@50 | questions R@5 | questions MAP@50 | short MAP@50 | broad MAP@50 |",
             "|---|---|---|---|---|---|---|---|---|"]

    def pooled(rows: Sequence[Row], key: str) -> float:
        return sum(r[key] for r in rows) / max(1, sum(r["n_relevant"] for r in rows))

    def mean_ap(rows: Sequence[Row]) -> float:
        return float(np.mean([r["ap@50"] for r in rows])) if rows else float("nan")
    for name in names:
        t, k1, b = re.match(r"bm25-t(\d)-k([\d.]+)-b([\d.]+)", name).groups()  # type: ignore[union-attr]
        refs = runs.get("hepth_refs_dev", {}).get(name, [])
        qs = runs.get("hepth_litsearch_dev", {}).get(name, [])
        by = {kind: [r for r in qs if kinds.get(r["qid"]) == kind] for kind in ("short", "broad")}
        lines.append(f"| {t} | {k1} | {b} | {pooled(refs, 'hits@50'):.3f} | {mean_ap(refs):.4f} | "
                     f"{pooled(qs, 'hits@5'):.3f} | {mean_ap(qs):.4f} | {mean_ap(by['short']):.4f} | {mean_ap(by['broad']):.4f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(ROOT / "data"))
    ap.add_argument("--out", required=True, help="scratch folder (not benchmarks/results)")
    ap.add_argument("--min-count", type=int, default=3, help="an acronym definition must be seen this often")
    ap.add_argument("--lsa-k", type=int, default=256)
    ap.add_argument("--depth", type=int, default=1000, help="candidates taken from each list for the LSA fusion")
    ap.add_argument("--pipeline", default="", help="comma-separated changes to run end to end: acronyms-W, k1-X")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    source: Any = build_engine(RuntimeConfig()).source
    papers = source.corpus.papers
    docs = [(p.title or "", p.abstract or "") for p in papers]
    ids = [p.id for p in papers]
    table = acronym_table((f"{t} . {a}" for t, a in docs), args.min_count)
    vocab: dict[str, int] = {}
    counts = {t: term_matrix(docs, t, vocab) for t in (1, 2, 3)}
    grid = {f"bm25-t{t}-k{k1:g}-b{b:g}": bm25_scorer(counts[t], vocab, k1, b)
            for t, k1, b in itertools.product((1, 2, 3), (0.9, 1.2, 1.5, 2.0), (0.5, 0.75, 0.9))}
    lsa = lsa_scorer(counts[2], vocab, args.lsa_k)
    md = ["# More text relevance on the dev sets (issue 14, round 6)", "",
          f"{len(table)} acronyms mined from the corpus (each definition seen ≥ {args.min_count} times; long forms "
          f"as the index's stems), e.g. "
          + ", ".join(f"{a.upper()} = {' '.join(k)}" for k, a in list(table.items())[:8]) + ".", ""]
    all_runs: dict[str, dict[str, list[Row]]] = {}
    kinds: dict[str, str] = {}
    for bench in BENCHES:
        bench_file = Path(args.data) / f"{bench}.jsonl"
        queries = load_benchmark(bench_file)
        kinds.update({q.qid: str(q.extra.get("kind", "")) for q in queries})
        folder = out / bench / "bm25"
        run_eval(EvalJob(bench=str(bench_file), out=str(folder), method="bm25"), progress=lambda s: None)
        harness = {r["qid"]: r for r in run_rows(folder)}
        runs: dict[str, list[Row]] = {"bm25": [harness[q.qid] for q in queries]}
        runs.update(text_rows(queries, source.text_index, ids, table, lsa, grid, (0.5, 1.0), (0.1, 0.2, 0.3), args.depth))
        mismatch = sum(r["ranked"] != harness[r["qid"]]["ranked"] for r in runs.pop("bm25 (own)"))
        same_grid = sum(r["ranked"] != harness[r["qid"]]["ranked"] for r in runs["bm25-t2-k1.5-b0.75"])
        all_runs[bench] = runs
        shown = {n: r for n, r in runs.items() if not n.startswith("bm25-t") or n in ("bm25-t2-k0.9-b0.75", "bm25-t1-k0.9-b0.75")}
        reference = ROOT / "results" / bench / "round5-default"
        ref = {r["qid"]: r for r in run_rows(reference)} if is_run(reference) else {}
        pipeline: dict[str, list[Row]] = {}
        for spec in [x for x in args.pipeline.split(",") if x]:
            rows = pipeline_rows(bench_file, out / bench, table, spec)
            for method in ("crase", "bm25"):
                by_q = {r["qid"]: r for r in rows if r["method"] == method}
                if by_q:
                    pipeline[f"{method}-{spec}"] = [by_q[q.qid] for q in queries]
        md += [f"## {bench} ({len(queries)} queries)", "",
               f"Own BM25 top 50 differing from the harness's rows: {mismatch}; the grid's k1 1.5, b 0.75, title × 2 "
               f"(the index's BM25) differing: {same_grid} (of {len(queries)}).", "",
               *overall_table(shown), "", "By kind, 95% bootstrap intervals (1,000 resamples over queries):", "",
               kind_table(list(shown.items()), kinds), "", "Against bm25 (Δ = run − bm25; paired permutation p):", "",
               paired_table(("bm25", runs["bm25"]), [(n, r) for n, r in shown.items() if n != "bm25"], kinds), ""]
        if ref and pipeline:
            crase = [ref[q.qid] for q in queries]
            md += ["End to end, on round 5's default, against its committed rows `round5-default` (Δ = run − "
                   "round5-default; paired permutation p):", "",
                   kind_table([("round5-default", crase), *pipeline.items()], kinds), "",
                   paired_table(("round5-default", crase), list(pipeline.items()), kinds), ""]
    md += ["## BM25's parameters (text level; title × 2, k1 1.5, b 0.75 is the index's BM25)", "",
           *grid_table(all_runs, kinds), ""]
    text = "\n".join(md) + "\n"
    (out / "text_variants.md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
