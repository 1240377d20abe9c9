"""Can a user point the local source at a corpus of hundreds of thousands of papers?

Generates a synthetic corpus in the user's format (``papers.jsonl`` +
``citations.tsv``) in a temporary folder — Zipf-distributed vocabulary,
~120-word abstracts, ~``refs`` references per paper to older papers with
preferential attachment (so there are hubs) — then measures, each step on a
fresh cache dir:

* ``load_corpus`` (parse JSONL + TSV, build the CSR graph),
* ``open_corpus`` cold (load + pickle) and warm (pickle load),
* BM25 index build + save (``TextIndex.for_corpus``) and warm load,
* a search, a hub's citations, ``edges_among`` over a 1,000-paper set,
* peak resident memory.

Nothing is kept unless ``--keep DIR`` is given. Usage::

    .venv/bin/python benchmarks/large_corpus.py --papers 300000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _rss_mb() -> float:
    try:
        import psutil

        return psutil.Process().memory_info().rss / 2**20
    except ImportError:  # pragma: no cover
        return float("nan")


def generate(folder: Path, n: int, refs: int, seed: int = 0) -> tuple[int, float]:
    """Write the corpus; return (citation lines, seconds)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "qu", "ph", "st", "gr", "on", "el", "ar"]
    vocab_size = 60_000
    words = []
    for i in range(vocab_size):
        w, j = "", i + 17
        while j:
            w += syllables[j % len(syllables)]
            j //= len(syllables)
        words.append(w)
    words_arr = np.array(words)
    zipf = 1.0 / np.arange(1, vocab_size + 1) ** 1.05
    zipf /= zipf.sum()
    abstract_len = rng.integers(60, 180, size=n)
    title_len = rng.integers(5, 13, size=n)
    total_words = int(abstract_len.sum() + title_len.sum())
    draws = words_arr[rng.choice(vocab_size, size=total_words, p=zipf)]
    pos = 0
    with open(folder / "papers.jsonl", "w", encoding="utf-8") as f:
        for i in range(n):
            title = " ".join(draws[pos : pos + title_len[i]])
            pos += title_len[i]
            abstract = " ".join(draws[pos : pos + abstract_len[i]])
            pos += abstract_len[i]
            year = 1990 + (i * 34) // n
            month = 1 + (i % 12)
            row = {"id": f"P{i:07d}", "title": title, "abstract": abstract if i % 20 else "",
                   "year": year, "month": f"{year}-{month:02d}", "authors": f"Author {i % 9973}, Author {i % 7919}"}
            f.write(json.dumps(row) + "\n")
    lines = 0
    with open(folder / "citations.tsv", "w", encoding="utf-8") as f:
        # preferential attachment to older papers: cited = floor(citing · u^2) favours early (hub) papers
        for i in range(1, n):
            k = min(i, int(rng.poisson(refs)))
            if k == 0:
                continue
            cited = np.unique((i * rng.random(k) ** 2).astype(np.int64))
            f.write("".join(f"P{i:07d}\tP{j:07d}\n" for j in cited))
            lines += len(cited)
    return lines, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--papers", type=int, default=300_000)
    ap.add_argument("--refs", type=float, default=12.0, help="mean references per paper (hep-th: ~12)")
    ap.add_argument("--keep", type=Path, default=None, help="write the corpus here and keep it")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="crase-large-"))
    cache = work / "cache"
    os.environ["CRASE_CACHE_DIR"] = str(cache)  # before crase_core reads it
    from crase_core.corpus import load_corpus
    from crase_core.sources.local import LocalSource, open_corpus
    from crase_core.textindex import TextIndex

    folder = args.keep or work / "corpus"
    results: dict[str, float | int | str] = {"papers": args.papers}
    try:
        lines, gen_s = generate(folder, args.papers, args.refs)
        size_mb = sum(p.stat().st_size for p in folder.iterdir()) / 2**20
        results.update(citation_lines=lines, generate_s=round(gen_s, 1), corpus_mb=round(size_mb, 1))

        t0 = time.perf_counter()
        corpus = load_corpus(folder)
        results["load_corpus_s"] = round(time.perf_counter() - t0, 2)
        results["citations_kept"] = corpus.n_citations
        results["rss_after_load_mb"] = round(_rss_mb())
        del corpus

        t0 = time.perf_counter()
        corpus = open_corpus(folder)
        results["open_corpus_cold_s"] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()
        corpus = open_corpus(folder)
        results["open_corpus_warm_s"] = round(time.perf_counter() - t0, 2)

        t0 = time.perf_counter()
        index = TextIndex.for_corpus(corpus)
        results["index_build_and_save_s"] = round(time.perf_counter() - t0, 2)
        results["index_mb"] = round(index.size_bytes() / 2**20, 1)
        results["rss_after_index_mb"] = round(_rss_mb())
        t0 = time.perf_counter()
        index = TextIndex.for_corpus(corpus)
        results["index_warm_load_s"] = round(time.perf_counter() - t0, 2)

        t0 = time.perf_counter()
        src = LocalSource.open(folder)
        results["local_source_open_warm_s"] = round(time.perf_counter() - t0, 2)
        query = " ".join(corpus.papers[123].title.split()[:4])
        t0 = time.perf_counter()
        hits = src.search(query, 100)
        results["search_s"] = round(time.perf_counter() - t0, 3)
        results["search_hits"] = len(hits)
        hub = corpus.papers[int(np.argmax(corpus.in_degree()))].id
        t0 = time.perf_counter()
        cit = src.citations(hub)
        results["hub_citations_s"] = round(time.perf_counter() - t0, 3)
        results["hub_citers"] = len(cit.ids)
        ids = [p.id for p in corpus.papers[: 1000]]
        t0 = time.perf_counter()
        edges = src.edges_among(ids)
        results["edges_among_1000_s"] = round(time.perf_counter() - t0, 3)
        results["edges_among_1000"] = len(edges)
        results["peak_rss_mb"] = round(_rss_mb())
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            shutil.rmtree(cache, ignore_errors=True)
    json.dump(results, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
