"""Our storage engine side by side with Tantivy: build, open, query, append, merge, memory and dev-set rankings.

On the same corpus folder (a synthetic one made by ``benchmarks/large_corpus.py``'s generator, or the
embedded hep-th corpus), every phase runs in a fresh process and reports its wall time, CPU seconds and
peak RSS (``VmHWM``):

* **build** — ours: ``crase corpus build --workers W`` (corpus store + text index, citation graph
  included); Tantivy: ``papers.jsonl`` parsed by the same ``parse_paper_line`` and fed to an
  ``IndexWriter`` with ``W`` indexing threads, then ``commit`` and ``wait_merging_threads``. Sizes on disk.
* **open** — cold (the index files' pages dropped from the page cache with ``posix_fadvise(DONTNEED)``,
  which touches no other process's files) and warm, each with the first query after it.
* **query** — p50/p95 over a fixed query set, top 50: ranked ids only, then with the 50 papers' title
  and abstract read; RSS after opening, after the queries, and the peak.
* **append** — one batch of ``--append`` papers, then ``--small-appends`` batches of 1,000 (ours:
  ``crase corpus add --no-merge``, one segment each; Tantivy: one ``commit`` each, its merge policy's
  background merges waited for and timed apart), queries after them, then the **merge** (ours:
  ``crase corpus merge``; Tantivy's Python bindings expose no forced merge: its log merge policy merges
  segments of a level once 8 of them accumulate, which the small appends trigger).
* **dev rankings** (``--dev``, hep-th only): ours (the eval harness's ``bm25`` method, leakage filter
  included) against Tantivy out of the box (``en_stem`` on title and abstract), Tantivy with an analyzer
  built to match ours, and Tantivy fed our own stems; top-50 overlap, R@50 and MAP@50 with bootstrap
  intervals and paired permutation p-values; plus our postings scored with Tantivy's constants
  (k1 = 1.2, its one-byte field norms) to show where the remaining difference comes from.

Tantivy is not a dependency of Crase: ``.venv/bin/pip install tantivy==0.27.0`` first. Prints one JSON
object (and writes it to ``--out``). Usage::

    nice -n 10 .venv/bin/python benchmarks/tantivy_compare.py --corpus assets/corpora/hepth --dev
    nice -n 10 .venv/bin/python benchmarks/tantivy_compare.py --papers 500000
    nice -n 10 .venv/bin/python benchmarks/tantivy_compare.py --papers 2500000 --append 0
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import large_corpus  # the synthetic generator and the fresh-process runner (a sibling of this script)
import numpy as np

REPO = Path(__file__).resolve().parents[1]
K = 50
MODES = ("matched", "default", "pretok")


# ---------------------------------------------------------------------------------------------- helpers


def _status(key: str) -> float:
    """VmHWM / VmRSS of this process in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_s() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _pct(xs: Sequence[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(xs) * 1000, q)), 2) if xs else float("nan")


def _dir_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1) if path.is_dir() else 0.0


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def find_file(folder: Path, name: str) -> Path:
    for p in (folder / name, folder / f"{name}.gz"):
        if p.is_file():
            return p
    raise SystemExit(f"no {name}[.gz] in {folder}")


def read_lines(path: Path) -> Iterator[str]:
    opener: Callable[..., Any] = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        yield from f


def evict(paths: Sequence[Path]) -> None:
    """Drop the page-cache pages of every file under ``paths`` (clean pages only; other files untouched)."""
    for root in paths:
        for f in (p for p in Path(root).rglob("*") if p.is_file()):
            fd = os.open(f, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


# ------------------------------------------------------------------------------------------ tantivy side


def analyzer(mode: str) -> Any:
    """The text analyzer of ``mode``: ``matched`` rebuilds ``text.content_terms`` natively (our word regex,
    lower-casing, our stop words plus the one-letter words a–z, Snowball English); ``pretok`` splits our
    own stems on spaces; ``default`` is Tantivy's ``en_stem`` (used for its two fields as registered)."""
    import tantivy

    from crase_core import text

    if mode == "pretok":
        return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()
    if mode == "default":
        return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(tantivy.Filter.remove_long(40))
                .filter(tantivy.Filter.lowercase()).filter(tantivy.Filter.stemmer("english")).build())
    stop = sorted(text.STOPWORDS | {chr(c) for c in range(ord("a"), ord("z") + 1)})
    return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(text._WORD.pattern))
            .filter(tantivy.Filter.lowercase()).filter(tantivy.Filter.custom_stopword(stop))
            .filter(tantivy.Filter.stemmer("english")).build())


def schema(mode: str, positions: bool) -> Any:
    """id (raw, stored), pos (fast: the paper's position in papers.jsonl), month (YYYYMM, indexed + fast),
    the searched text, and the paper's title/abstract/extra as one stored JSON value."""
    import tantivy

    b = tantivy.SchemaBuilder()
    b.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
    b.add_unsigned_field("pos", fast=True)
    b.add_integer_field("month", indexed=True, fast=True)
    opt = "position" if positions else "freq"
    if mode == "default":
        b.add_text_field("title", tokenizer_name="en_stem", index_option=opt)
        b.add_text_field("abstract", tokenizer_name="en_stem", index_option=opt)
    else:
        b.add_text_field("text", tokenizer_name=f"crase_{mode}", index_option=opt)
    b.add_bytes_field("stored", stored=True)
    return b.build()


def open_index(path: Path, mode: str) -> Any:
    import tantivy

    index = tantivy.Index.open(str(path))
    if mode != "default":  # a custom analyzer is not kept in the index: every process registers it
        index.register_tokenizer(f"crase_{mode}", analyzer(mode))
    return index


def _tantivy_docs(folder: Path, start_pos: int, mode: str) -> Iterator[Any]:
    import tantivy

    from crase_core.store.corpus import parse_paper_line
    from crase_core.text import content_terms

    path, seen, pos = find_file(folder, "papers.jsonl"), set(), start_pos
    for lineno, line in enumerate(read_lines(path), 1):
        p = parse_paper_line(line, path, lineno)
        if p is None or p.id in seen:
            continue
        seen.add(p.id)
        doc = tantivy.Document()
        doc.add_text("id", p.id)
        doc.add_unsigned("pos", pos)
        doc.add_integer("month", p.month or 999912)
        if mode == "default":
            doc.add_text("title", p.title)
            doc.add_text("abstract", p.abstract)
        elif mode == "pretok":
            doc.add_text("text", " ".join(content_terms(f"{p.title} {p.title} {p.abstract}")))
        else:
            doc.add_text("text", f"{p.title} {p.title} {p.abstract}")
        extra = [list(p.authors), p.venue, p.url, [list(e) for e in p.external_ids]]
        doc.add_bytes("stored", json.dumps([p.title, p.abstract, extra], ensure_ascii=False).encode())
        pos += 1
        yield doc


def t_build(corpus: str, path: str, mode: str, threads: int, heap_mb: int, positions: bool) -> dict[str, Any]:
    import tantivy

    t0 = time.perf_counter()
    shutil.rmtree(path, ignore_errors=True)
    Path(path).mkdir(parents=True)
    index = tantivy.Index(schema(mode, positions), path=path)
    if mode != "default":
        index.register_tokenizer(f"crase_{mode}", analyzer(mode))
    writer = index.writer(heap_size=heap_mb * 2**20, num_threads=threads)
    n = sum(writer.add_document(d) >= 0 for d in _tantivy_docs(Path(corpus), 0, mode))
    t1 = time.perf_counter()
    writer.commit()
    t2 = time.perf_counter()
    writer.wait_merging_threads()
    t3 = time.perf_counter()
    index.reload()
    return {"papers": n, "feed_s": round(t1 - t0, 2), "commit_s": round(t2 - t1, 2), "merge_wait_s": round(t3 - t2, 2),
            "segments": index.searcher().num_segments, "size_mb": _dir_mb(Path(path))}


def t_append(batch: str, path: str, mode: str, start_pos: int, threads: int, heap_mb: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    index = open_index(Path(path), mode)
    before = index.searcher().num_segments
    writer = index.writer(heap_size=heap_mb * 2**20, num_threads=threads)
    n = sum(writer.add_document(d) >= 0 for d in _tantivy_docs(Path(batch), start_pos, mode))
    writer.commit()
    t1 = time.perf_counter()
    writer.wait_merging_threads()
    t2 = time.perf_counter()
    index.reload()
    return {"papers": n, "append_s": round(t1 - t0, 3), "merge_wait_s": round(t2 - t1, 3),
            "segments_before": before, "segments_after": index.searcher().num_segments}


class TantivySearch:
    """Top-k search over an index of ``mode``, optionally hiding papers after a month and excluded ids."""

    def __init__(self, path: Path, mode: str):
        import tantivy

        self.t, self.mode = tantivy, mode
        self.index = open_index(path, mode)
        self.searcher = self.index.searcher()
        self.schema = self.index.schema
        self.an: Any = analyzer(mode) if mode != "default" else None

    def query(self, q: str, max_month: int | None = None, exclude: Sequence[str] = ()) -> Any:
        t = self.t
        if self.mode == "default":  # what a Tantivy user writes: the query parser over both fields
            clean = "".join(c if c.isalnum() else " " for c in q).lower()
            text_q = self.index.parse_query(clean, ["title", "abstract"])
        else:
            from crase_core.text import content_terms

            terms = content_terms(q) if self.mode == "pretok" else self.an.analyze(q)
            if not terms:
                return None
            text_q = t.Query.boolean_query([(t.Occur.Should, t.Query.term_query(self.schema, "text", s,
                                                                                   index_option="freq"))
                                            for s in terms])
        clauses = [(t.Occur.Must, text_q)]
        if max_month is not None:
            rng = t.Query.range_query(self.schema, "month", t.FieldType.Integer, upper_bound=max_month)
            clauses.append((t.Occur.Must, t.Query.const_score_query(rng, 0.0)))
        clauses += [(t.Occur.MustNot, t.Query.term_query(self.schema, "id", pid)) for pid in exclude]
        return t.Query.boolean_query(clauses) if len(clauses) > 1 else text_q

    def top(self, q: str, k: int = K, max_month: int | None = None, exclude: Sequence[str] = ()) -> list[Any]:
        query = self.query(q, max_month, exclude)
        return [] if query is None else self.searcher.search(query, k, count=False).hits

    def positions(self, hits: list[Any]) -> list[int]:
        return [int(v) for v in self.searcher.fast_field_values("pos", [a for _, a in hits])] if hits else []

    def papers(self, hits: list[Any]) -> list[tuple[str, str]]:
        out = []
        for _, addr in hits:
            title, abstract, _ = json.loads(self.searcher.doc(addr).get_first("stored"))
            out.append((title, abstract))
        return out


# ----------------------------------------------------------------------------------------------- ours


class OurSearch:
    """Top-k over our store and index: ranked positions as ``LocalSource.search`` ranks them, and papers."""

    def __init__(self, corpus: Path):
        from crase_core.sources.local import LocalSource

        self.src = LocalSource.open(corpus)

    def top(self, q: str, k: int = K) -> list[int]:
        scores = self.src.text_index.scores(q)
        hits = np.flatnonzero(scores > 0)
        if hits.size > k:
            hits = hits[np.argpartition(-scores[hits], k - 1)[:k]]
        ids = self.src.corpus.papers.ids_of(hits) if hasattr(self.src.corpus.papers, "ids_of") else \
            [self.src.corpus.papers[i].id for i in hits.tolist()]
        return [i for _, _, i in sorted(zip((-scores[hits]).tolist(), ids, hits.tolist(), strict=True))]

    def papers(self, q: str, k: int = K) -> list[tuple[str, str]]:
        return [(h.paper.title, h.paper.abstract) for h in self.src.search(q, k)]


# ------------------------------------------------------------------------------------- children (phases)


def _timed_queries(top: Callable[[str], Any], full: Callable[[str], Any], queries: Sequence[str]) -> dict[str, Any]:
    for q in queries[:10]:  # warm-up, untimed
        full(q)
    ids_t, full_t = [], []
    for q in queries:
        t0 = time.perf_counter()
        top(q)
        ids_t.append(time.perf_counter() - t0)
    for q in queries:
        t0 = time.perf_counter()
        full(q)
        full_t.append(time.perf_counter() - t0)
    return {"ids_p50_ms": _pct(ids_t, 50), "ids_p95_ms": _pct(ids_t, 95), "ids_mean_ms": round(1000 * statistics.fmean(ids_t), 2),
            "papers_p50_ms": _pct(full_t, 50), "papers_p95_ms": _pct(full_t, 95)}


def child_open(engine: str, corpus: str, path: str, mode: str, query: str) -> dict[str, Any]:
    """Import, open, then the first query (top 50 with papers), each timed; RSS after each."""
    t0 = time.perf_counter()
    if engine == "ours":
        import crase_core.sources.local  # noqa: F401
    else:
        import tantivy  # noqa: F401

        import crase_core.text  # noqa: F401
    t1 = time.perf_counter()
    s: OurSearch | TantivySearch = OurSearch(Path(corpus)) if engine == "ours" else TantivySearch(Path(path), mode)
    t2 = time.perf_counter()
    rss_open = _status("VmRSS")
    n = len(s.papers(query)) if isinstance(s, OurSearch) else len(s.papers(s.top(query)))
    t3 = time.perf_counter()
    return {"import_s": round(t1 - t0, 3), "open_s": round(t2 - t1, 4), "first_query_s": round(t3 - t2, 3),
            "hits": n, "rss_after_open_mb": round(rss_open, 1), "rss_after_query_mb": round(_status("VmRSS"), 1)}


def child_query(engine: str, corpus: str, path: str, mode: str, qfile: str) -> dict[str, Any]:
    sets = json.loads(Path(qfile).read_text())
    s: OurSearch | TantivySearch = OurSearch(Path(corpus)) if engine == "ours" else TantivySearch(Path(path), mode)
    rss0 = _status("VmRSS")
    out: dict[str, Any] = {"rss_after_open_mb": round(rss0, 1)}
    ids: Callable[[str], Any]
    full: Callable[[str], Any]
    if isinstance(s, OurSearch):
        ids, full = s.top, s.papers
    else:
        ts = s

        def ids(q: str) -> list[int]:
            return ts.positions(ts.top(q))

        def full(q: str) -> list[tuple[str, str]]:
            return ts.papers(ts.top(q))
    for name, qs in sets.items():
        out[name] = _timed_queries(ids, full, qs)
    out.update(rss_after_queries_mb=round(_status("VmRSS"), 1), peak_rss_mb=round(_status("VmHWM"), 1))
    return out


def child_postings(corpus: str, path: str, mode: str, stems: list[str]) -> dict[str, Any]:
    """Every paper holding a stem, as corpus positions (what anchor text and the weak-match notice read): ours
    ``postings_of`` (a slice of the mapped postings); Tantivy a term query for all its ``doc_freq`` hits and
    their ``pos`` fast field (its Python bindings expose no postings iterator)."""
    ours, ts = OurSearch(Path(corpus)).src.text_index, TantivySearch(Path(path), mode)
    field = "title" if mode == "default" else "text"
    times: dict[str, list[float]] = {"ours": [], "tantivy": []}
    dfs = []
    for stem in stems:
        t0 = time.perf_counter()
        a = np.asarray(ours.postings_of(stem))
        t1 = time.perf_counter()
        df = ts.searcher.doc_freq(field, stem)
        q = ts.t.Query.term_query(ts.schema, field, stem, index_option="freq")
        b = ts.positions(ts.searcher.search(q, max(df, 1), count=False).hits) if df else []
        t2 = time.perf_counter()
        if len(b) != a.size:
            raise RuntimeError(f"stem {stem!r}: {a.size} postings ours, {len(b)} Tantivy")
        times["ours"].append(t1 - t0)
        times["tantivy"].append(t2 - t1)
        dfs.append(df)
    return {"stems": len(stems), "df_median": statistics.median(dfs), "df_max": max(dfs),
            **{f"{k}_p50_ms": _pct(v, 50) for k, v in times.items()},
            **{f"{k}_max_ms": round(1000 * max(v), 2) for k, v in times.items()}}


CHILDREN: dict[str, Callable[..., dict[str, Any]]] = {"t_build": t_build, "t_append": t_append, "open": child_open,
                                                      "query": child_query, "postings": child_postings}


def run_child(phase: str, *args: Any, nice: bool = False) -> dict[str, Any]:
    """``phase(*args)`` in a fresh process; its result plus wall s, CPU s and peak RSS MB."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, __file__, "_child", phase, json.dumps(args)], capture_output=True, text=True,
                       cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=7200)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{phase} failed ({r.returncode}): {r.stderr[-3000:]}")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    res.update(wall_s=round(wall, 2))
    return res


def _child_main(phase: str, args_json: str) -> int:
    res = CHILDREN[phase](*json.loads(args_json))
    res.update(cpu_s=round(_cpu_s(), 2), peak_rss_mb=round(_status("VmHWM"), 1))
    print(json.dumps(res))
    return 0


# -------------------------------------------------------------------------------------------- phases


class Bench:
    """One comparison run: ``work`` holds the corpus copy, our cache folder and the Tantivy indexes."""

    def __init__(self, corpus: Path, work: Path, workers: int, heap_mb: int, positions: bool):
        self.corpus, self.work, self.workers, self.heap_mb, self.positions = corpus, work, workers, heap_mb, positions
        self.cache = work / "cache"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("CRASE_", "OPENAI_", "S2_"))}
        self.env.update(PYTHONPATH=str(REPO), CRASE_CACHE_DIR=str(self.cache))
        os.environ["CRASE_CACHE_DIR"] = str(self.cache)  # the children open our store from this cache

    def tpath(self, mode: str) -> Path:
        return self.work / f"tantivy-{mode}"

    def ours_build(self) -> dict[str, Any]:
        shutil.rmtree(self.cache, ignore_errors=True)
        load = _load()
        wall, rss, out, err = large_corpus._run(["corpus", "build", str(self.corpus), "--workers", str(self.workers)],
                                                self.env, timeout=7200)
        return {"load": load, "wall_s": round(wall, 1), "cpu_s": large_corpus._cpu(err), "peak_rss_mb": round(rss),
                "store_mb": _dir_mb(self.cache / "corpus"), "index_mb": _dir_mb(self.cache / "index"),
                "result": out.strip()[-300:]}

    def tantivy_build(self, mode: str, positions: bool | None = None, tag: str = "") -> dict[str, Any]:
        load = _load()
        pos = (self.positions or mode == "default") if positions is None else positions
        res = run_child("t_build", str(self.corpus), str(self.tpath(mode + tag)), mode, self.workers, self.heap_mb, pos)
        return {"load": load, "positions": pos, **res}

    def opens(self, mode: str, query: str, repeat: int = 3) -> dict[str, Any]:
        """Cold (files evicted) and warm opens, ``repeat`` each, fresh processes; medians and the runs."""
        out: dict[str, Any] = {"load": _load()}
        for engine, files in (("ours", [self.cache / "corpus", self.cache / "index"]), ("tantivy", [self.tpath(mode)])):
            for kind in ("cold", "warm"):
                runs = []
                for _ in range(repeat):
                    if kind == "cold":
                        evict(files)
                    runs.append(run_child("open", engine, str(self.corpus), str(self.tpath(mode)), mode, query))
                out[f"{engine}_{kind}"] = {k: statistics.median(r[k] for r in runs) for k in
                                           ("import_s", "open_s", "first_query_s", "rss_after_open_mb",
                                            "rss_after_query_mb", "peak_rss_mb")}
        return out

    def queries(self, mode: str, sets: dict[str, list[str]], tag: str = "") -> dict[str, Any]:
        qfile = self.work / f"queries{tag}.json"
        qfile.write_text(json.dumps(sets))
        load = _load()
        return {"load": load, "ours": run_child("query", "ours", str(self.corpus), "", mode, str(qfile)),
                "tantivy": run_child("query", "tantivy", str(self.corpus), str(self.tpath(mode)), mode, str(qfile))}

    def postings(self, mode: str, queries: Sequence[str], k: int = 30) -> dict[str, Any]:
        from crase_core.text import content_terms

        stems = list(dict.fromkeys(t for q in queries for t in content_terms(q)))[:k]
        return {"load": _load(), **run_child("postings", str(self.corpus), str(self.tpath(mode)), mode, stems)}

    def appends(self, mode: str, batches: list[tuple[Path, int]]) -> list[dict[str, Any]]:
        out = []
        for batch, start in batches:
            load = _load()
            wall, rss, stdout, err = large_corpus._run(["corpus", "add", str(self.corpus), str(batch), "--no-merge"],
                                                       self.env)
            ours = {"wall_s": round(wall, 2), "cpu_s": large_corpus._cpu(err), "peak_rss_mb": round(rss)}
            tant = run_child("t_append", str(batch), str(self.tpath(mode)), mode, start, self.workers, self.heap_mb)
            out.append({"load": load, "papers": tant["papers"], "ours": ours, "tantivy": tant})
        return out

    def ours_merge(self) -> dict[str, Any]:
        load = _load()
        wall, rss, stdout, err = large_corpus._run(["corpus", "merge", str(self.corpus)], self.env)
        return {"load": load, "wall_s": round(wall, 2), "cpu_s": large_corpus._cpu(err), "peak_rss_mb": round(rss),
                "store_mb": _dir_mb(self.cache / "corpus"), "index_mb": _dir_mb(self.cache / "index")}


def synthetic_queries(folder: Path, n_papers: int, k: int) -> dict[str, list[str]]:
    """``k`` titles of papers spread evenly over the corpus: their first four words, and whole."""
    wanted = {int(i) for i in np.linspace(0, n_papers - 1, k)}
    titles = [json.loads(line)["title"] for i, line in enumerate(read_lines(find_file(folder, "papers.jsonl"))) if i in wanted]
    return {"four_words": [" ".join(t.split()[:4]) for t in titles], "titles": titles}


def dev_queries() -> dict[str, list[str]]:
    """The dev benchmarks' queries: the 150 citing-paper titles and the 70 LitSearch-style questions."""
    from crase_core.evaluation.benchmark import load_benchmark

    data = REPO.parent / "shared" / "data" / "benchmarks"
    return {"titles": [q.query for q in load_benchmark(data / "hepth_refs_dev.jsonl")],
            "questions": [q.query for q in load_benchmark(data / "hepth_litsearch_dev.jsonl")]}


# ---------------------------------------------------------------------------------------- dev rankings


def _tantivy_norm(lengths: np.ndarray) -> np.ndarray:
    """Tantivy's one-byte field norm of each length, decoded (exact up to 40, then 3 mantissa bits)."""
    b = np.arange(256)
    e = b - 24
    table = np.where(b < 24, b, 24 + np.where(e >> 3 == 0, e & 7, ((e & 7) | 8) << np.maximum((e >> 3) - 1, 0)))
    return table[np.searchsorted(table, lengths, side="right") - 1]


def rescored(src: Any, query: str, k1: float, quantised: bool) -> np.ndarray:
    """BM25 over our (single-part) postings with ``k1`` and, if ``quantised``, Tantivy's field norms and its
    float32 arithmetic (``(k1 + 1) · idf · tf / (tf + k1 (1 − b + b dl / avgdl))``)."""
    from crase_core.text import content_terms

    ti = src.text_index
    (p,) = ti.parts
    n = ti.n_docs
    dl = _tantivy_norm(np.asarray(p.doc_len)) if quantised else np.asarray(p.doc_len)
    f = np.float32 if quantised else np.float64
    avgdl = f(ti.sum_doc_len) / f(n)
    out: Any = np.zeros(n, dtype=f)
    for term in content_terms(query):
        tid = ti.term_id(term)
        if tid is None:
            continue
        lo, hi = int(p.indptr[tid]), int(p.indptr[tid + 1])
        docs, tf = np.asarray(p.docs[lo:hi]), np.asarray(p.tf[lo:hi]).astype(f)
        idf: Any = f(math.log(1 + (n - (hi - lo) + 0.5) / ((hi - lo) + 0.5)))
        norm = f(k1) * (f(1 - 0.75) + f(0.75) * dl[docs].astype(f) / avgdl)
        out[docs] += f(k1 + 1) * idf * tf / (tf + norm)
    return out


def _ranked_ids(src: Any, scores: np.ndarray, k: int = K) -> list[str]:
    scores = np.where(src.visible, scores, 0)
    hits = np.flatnonzero(scores > 0)
    if hits.size > k:
        hits = hits[np.argpartition(-scores[hits], k - 1)[:k]]
    ids = [src.corpus.papers[i].id for i in hits.tolist()]
    return [i for _, i in sorted(zip((-scores[hits]).tolist(), ids, strict=True))]


def dev_rankings(bench: Bench, committed: Path) -> dict[str, Any]:
    """Every dev query ranked by ours, each Tantivy mode and our postings rescored with Tantivy's constants."""
    from crase_core.evaluation.benchmark import leakage_filter, load_benchmark
    from crase_core.evaluation.run_file import run_rows
    from crase_core.sources.local import LocalSource

    data = REPO.parent / "shared" / "data" / "benchmarks"
    src = LocalSource.open(bench.corpus)
    searchers = {m: TantivySearch(bench.tpath(m), m) for m in MODES}
    out: dict[str, Any] = {}
    for name in ("hepth_refs_dev", "hepth_litsearch_dev"):
        qs = load_benchmark(data / f"{name}.jsonl")
        saved = {r["qid"]: r["ranked"] for r in run_rows(committed / name / "bm25")}
        runs: dict[str, dict[str, list[str]]] = {m: {} for m in ("ours", *MODES, "ours-k1.2", "ours-k1.2-norms")}
        for q in qs:
            f = leakage_filter(q)
            s = src.restricted(f) if f else src
            runs["ours"][q.qid] = [h.paper.id for h in s.search(q.query, K)]
            for m, ts in searchers.items():
                hits = ts.top(q.query, K, f.max_month if f else None, sorted(f.exclude) if f else ())
                runs[m][q.qid] = [src.corpus.papers[i].id for i in ts.positions(hits)]
            runs["ours-k1.2"][q.qid] = _ranked_ids(s, rescored(s, q.query, 1.2, False))
            runs["ours-k1.2-norms"][q.qid] = _ranked_ids(s, rescored(s, q.query, 1.2, True))
        same = sum(runs["ours"][q.qid] == saved.get(q.qid) for q in qs)
        pairs = {f"{x} vs {y}": pair_stats(runs[x], runs[y]) for x, y in
                 (("pretok", "ours-k1.2-norms"), ("matched", "pretok"), ("ours", "ours-k1.2"))}
        out[name] = {"queries": len(qs), "ours_equal_to_committed_bm25_rows": same,
                     **compare_runs(runs, {q.qid: set(q.relevant) for q in qs}), "pairs": pairs}
    return out


def pair_stats(a: dict[str, list[str]], b: dict[str, list[str]]) -> dict[str, float]:
    """Mean top-50 / top-10 overlap of two runs and the shares of queries whose top 10 / top 50 are identical."""
    qids = list(a)
    out = {f"overlap@{cut}": round(statistics.fmean(len(set(a[q][:cut]) & set(b[q][:cut])) / max(len(a[q][:cut]), 1)
                                                    for q in qids), 4) for cut in (50, 10)}
    out["same_top10_order"] = round(statistics.fmean(a[q][:10] == b[q][:10] for q in qids), 4)
    out["same_top50_order"] = round(statistics.fmean(a[q] == b[q] for q in qids), 4)
    return out


def compare_runs(runs: dict[str, dict[str, list[str]]], relevant: dict[str, set[str]]) -> dict[str, Any]:
    """R@50 / MAP@50 with 95 % bootstrap intervals per run (the eval report's helpers); against ours: top-50
    and top-10 overlap, the share of identical top-10 and top-50 lists, paired permutation p of hits@50 and
    AP@50 (as the eval report pairs them)."""
    from crase_core.evaluation.metrics import per_query_metrics
    from crase_core.evaluation.report import per_query_values, with_interval
    from crase_core.evaluation.significance import paired_permutation_test

    qids = list(relevant)
    rows = {m: [{"n_relevant": len(relevant[q]), **per_query_metrics(r.get(q, []), relevant[q])} for q in qids]
            for m, r in runs.items()}
    out: dict[str, Any] = {}
    a = {q: runs["ours"][q] for q in qids}
    for m, rs in rows.items():
        entry: dict[str, Any] = {key: [round(x, 4) for x in with_interval(key, rs)] for key in ("recall@50", "map@50")}
        if m != "ours":
            entry.update(pair_stats(a, runs[m]))
            for key in ("recall@50", "map@50"):
                entry[f"p_{key}"] = paired_permutation_test(per_query_values(key, rows["ours"]), per_query_values(key, rs))
        out[m] = entry
    return out


def analyzer_agreement(corpus: Path) -> dict[str, Any]:
    """How many documents the ``matched`` analyzer tokenises exactly as ``document_terms`` does, with examples."""
    from crase_core.sources.local import LocalSource
    from crase_core.store.textindex import document_terms

    src, an = LocalSource.open(corpus), analyzer("matched")
    same, examples = 0, list[dict[str, Any]]()
    for i in range(len(src.corpus)):
        p = src.corpus.papers[i]
        a, b = document_terms(p.title, p.abstract), an.analyze(f"{p.title} {p.title} {p.abstract}")
        same += a == b
        if a != b and len(examples) < 5:
            examples.append({"id": p.id, "ours_only": sorted(set(a) - set(b))[:4], "tantivy_only": sorted(set(b) - set(a))[:4]})
    return {"documents": len(src.corpus), "identical_token_lists": same, "examples": examples}


# ------------------------------------------------------------------------------------------------ main


def prepare(args: argparse.Namespace, work: Path) -> tuple[Path, int, list[tuple[Path, int]], dict[str, Any]]:
    """The corpus folder, its paper count, the append batches (folder, first position) and generation facts."""
    info: dict[str, Any] = {}
    folder = work / "corpus"
    if args.corpus is not None:
        if "build" in args.phases.split(",") or not folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(args.corpus, folder)
        n = sum(1 for line in read_lines(find_file(folder, "papers.jsonl")) if line.strip())
        return folder, n, [], {"corpus": str(args.corpus), "papers": n}
    n = args.papers
    if not (folder / "papers.jsonl").is_file():
        lines, gen_s = large_corpus.generate(folder, n, args.refs)
        info.update(citation_lines=lines, generate_s=round(gen_s, 1))
    batches, start = [], n
    for k, size in enumerate(([args.append] if args.append else []) + [1000] * args.small_appends):
        b = work / f"batch-{k}"
        if not (b / "papers.jsonl").is_file():
            large_corpus.generate(b, size, args.refs, start=start)
        batches.append((b, start))
        start += size
    info["papers"] = n
    return folder, n, batches, info


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "_child":
        return _child_main(sys.argv[2], sys.argv[3])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--papers", type=int, default=500_000, help="synthetic corpus size (ignored with --corpus)")
    ap.add_argument("--corpus", type=Path, default=None, help="a corpus folder instead (e.g. assets/corpora/hepth)")
    ap.add_argument("--refs", type=float, default=12.0)
    ap.add_argument("--workers", type=int, default=2, help="our build workers = Tantivy's indexing threads")
    ap.add_argument("--heap-mb", type=int, default=256, help="Tantivy writer memory budget (all threads)")
    ap.add_argument("--positions", action="store_true", help="Tantivy indexes positions (phrase queries) too")
    ap.add_argument("--queries", type=int, default=100, help="synthetic: titles in the query set")
    ap.add_argument("--append", type=int, default=10_000, help="papers in the first appended batch (0: no appends)")
    ap.add_argument("--small-appends", type=int, default=9, help="then this many batches of 1,000 papers")
    ap.add_argument("--dev", action="store_true", help="dev-set rankings (hep-th corpus only)")
    ap.add_argument("--phases", default="build,open,query,postings,append",
                    help="comma-separated; without build, the --keep folder's builds are reused")
    ap.add_argument("--keep", type=Path, default=None, help="work in this folder and keep it")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = ap.parse_args(argv)
    try:
        import tantivy  # noqa: F401
    except ImportError:
        print("tantivy is not installed: .venv/bin/pip install tantivy==0.27.0", file=sys.stderr)
        return 2
    work = args.keep or Path(tempfile.mkdtemp(prefix="crase-tantivy-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        res = run(args, work)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(res, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import tantivy

    folder, n, batches, res = prepare(args, work)
    bench = Bench(folder, work, args.workers, args.heap_mb, args.positions)
    res.update(tantivy=getattr(tantivy, "__version__", "?"), machine=f"{os.cpu_count()} cores, load {_load()} at start",
               source_files_mb=_dir_mb(folder))
    phases = set(args.phases.split(","))
    if "build" in phases:
        res["build"] = {"ours": bench.ours_build(), "tantivy": bench.tantivy_build("matched")}
    sets = dev_queries() if args.corpus is not None else synthetic_queries(folder, n, args.queries)
    if "open" in phases:
        res["open"] = bench.opens("matched", sets[next(iter(sets))][0])
    if "query" in phases:
        res["query"] = bench.queries("matched", sets)
    if "postings" in phases:
        res["postings"] = bench.postings("matched", [q for qs in sets.values() for q in qs])
    if args.dev:
        if "build" in phases:
            res["build"]["tantivy_default"] = bench.tantivy_build("default")
            res["build"]["tantivy_pretok"] = bench.tantivy_build("pretok")
            res["build"]["tantivy_with_positions"] = bench.tantivy_build("matched", positions=True, tag="-positions")
        res["analyzer_agreement"] = analyzer_agreement(folder)
        res["dev"] = dev_rankings(bench, REPO / "benchmarks" / "results")
    if batches and "append" in phases:
        res["appends"] = bench.appends("matched", batches)
        short = {k: v[: max(20, len(v) // 2)] for k, v in sets.items()}
        res["query_after_appends"] = bench.queries("matched", short, "-after")
        res["merge"] = {"ours": bench.ours_merge()}
        res["query_after_merge"] = bench.queries("matched", short, "-merged")
    return res


if __name__ == "__main__":
    raise SystemExit(main())
