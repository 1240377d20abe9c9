"""``crase corpus import --format openalex`` of a synthetic works snapshot: wall time, CPU and peak memory.

    nice -n 10 .venv/bin/python benchmarks/import_bench.py --works 2500000 [--workers 2] [--keep]

Generates a snapshot in OpenAlex's layout (``works/updated_date=…/part_NNN.gz`` of 400,000 works, ``manifest``
with record counts) whose works look like real ones where the importer does work: ``id``, ``doi``, ``title`` and
``display_name``, ``publication_year``/``publication_date``, ``ids`` (mag, doi), ``primary_location`` with its
source, three ``authorships`` with an institution, ``abstract_inverted_index`` of 60–180 words drawn from a Zipf
vocabulary (as ``benchmarks/large_corpus.py``'s abstracts), ``referenced_works`` (~12, preferential attachment
to older works, and ~25 % to works outside the snapshot, as a subset of OpenAlex has), ``concepts``,
``cited_by_count``, ``counts_by_year``, ``type`` and ``updated_date`` — about 2.3 KB of JSON a work. Then runs the
import in a fresh process on a fresh cache folder, in two phases reported apart: conversion (read, parse,
write papers.jsonl/citations.tsv) and the store build that follows. Prints one JSON object: sizes, the
import's wall and CPU seconds (workers included), its own peak RSS and its largest worker's, works per second,
and the load average before it (2 shared cores: a busy machine stretches wall time, not CPU time).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
PART = 400_000
PARTITION = "updated_date=2024-06-01"

_CHILD = """
import atexit, resource, runpy, sys
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
def report():  # an exit handler: a one-run `crase` command ends the process at once after running them
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"CPU {me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime:.2f}", file=sys.stderr)
    print(f"MAXRSS {hwm():.0f} KIDS {kids.ru_maxrss / 1024:.0f}", file=sys.stderr)
atexit.register(report)
sys.argv = ["crase", *sys.argv[1:]]
runpy.run_module("crase_core.cli", run_name="__main__")
"""


def _vocab(n: int = 60_000) -> np.ndarray:
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "qu", "ph", "st", "gr", "on", "el", "ar"]
    words = []
    for i in range(n):
        w, j = "", i + 17
        while j:
            w += syllables[j % len(syllables)]
            j //= len(syllables)
        words.append(w)
    return np.array(words)


def _work(i: int, title: str, abstract: list[str], refs: list[int], rng_year: int) -> str:
    index: dict[str, list[int]] = {}
    for pos, w in enumerate(abstract):
        index.setdefault(w, []).append(pos)
    wid = f"https://openalex.org/W{i + 1}"
    month = 1 + i % 12
    work = {
        "id": wid, "doi": f"https://doi.org/10.5555/synthetic.{i + 1}", "title": title, "display_name": title,
        "publication_year": rng_year, "publication_date": f"{rng_year}-{month:02d}-{1 + i % 28:02d}",
        "ids": {"openalex": wid, "doi": f"https://doi.org/10.5555/synthetic.{i + 1}", "mag": 2000000000 + i},
        "language": "en", "type": "article", "type_crossref": "journal-article",
        "primary_location": {"is_oa": bool(i % 3), "landing_page_url": f"https://doi.org/10.5555/synthetic.{i + 1}",
                             "source": {"id": f"https://openalex.org/S{4000 + i % 900}",
                                        "display_name": f"Journal of Synthetic Studies {i % 900}", "type": "journal"},
                             "version": "publishedVersion"},
        "authorships": [{"author_position": p, "author": {"id": f"https://openalex.org/A{(i * 7 + k) % 5_000_000}",
                                                          "display_name": f"Author {(i * 7 + k) % 99991}"},
                         "institutions": [{"id": f"https://openalex.org/I{k}", "display_name": f"Institute {k}",
                                           "country_code": "US", "type": "education"}]}
                        for k, p in enumerate(("first", "middle", "last"))],
        "cited_by_count": (i * 13) % 400,
        "concepts": [{"id": f"https://openalex.org/C{c}", "display_name": f"Concept {c}", "level": 1,
                      "score": 0.5} for c in (i % 50, i % 77)],
        "counts_by_year": [{"year": 2023, "cited_by_count": i % 9}, {"year": 2022, "cited_by_count": i % 5}],
        "abstract_inverted_index": index,
        "referenced_works": [f"https://openalex.org/W{r + 1}" for r in refs],
        "is_retracted": False, "is_paratext": False, "updated_date": "2024-06-01T00:00:00.000000",
    }
    return json.dumps(work)


def generate(root: Path, n: int, refs: float = 12.0, seed: int = 0) -> dict[str, float]:
    """The snapshot of ``n`` works under ``root/works``; (files, bytes, seconds)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    vocab = _vocab()
    zipf = 1.0 / np.arange(1, vocab.size + 1) ** 1.05
    zipf /= zipf.sum()
    folder = root / "works" / PARTITION
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for part, lo in enumerate(range(0, n, PART)):
        hi = min(n, lo + PART)
        path = folder / f"part_{part:03d}.gz"
        with gzip.open(path, "wt", encoding="utf-8", compresslevel=3) as f:
            for block in range(lo, hi, 20_000):
                end = min(hi, block + 20_000)
                alen = rng.integers(60, 180, size=end - block)
                tlen = rng.integers(5, 13, size=end - block)
                draws = vocab[rng.choice(vocab.size, size=int(alen.sum() + tlen.sum()), p=zipf)].tolist()
                pos = 0
                lines = []
                for k, i in enumerate(range(block, end)):
                    title = " ".join(draws[pos:pos + tlen[k]])
                    pos += tlen[k]
                    abstract = draws[pos:pos + alen[k]] if i % 20 else []
                    pos += alen[k]
                    k_refs = min(i, int(rng.poisson(refs)))
                    cited = np.unique((i * rng.random(k_refs) ** 2).astype(np.int64)).tolist() if k_refs else []
                    outside = [n + 10 * i + j for j in range(int(rng.poisson(refs / 3)))]  # works not in the snapshot
                    lines.append(_work(i, title, abstract, cited + outside, 1990 + (i * 34) // n))
                f.write("\n".join(lines) + "\n")
        entries.append({"url": f"s3://openalex/data/works/{PARTITION}/{path.name}",
                        "meta": {"content_length": path.stat().st_size, "record_count": hi - lo}})
    (root / "works" / "manifest").write_text(json.dumps({"entries": entries}), encoding="utf-8")
    size = sum(e["meta"]["content_length"] for e in entries)
    return {"files": len(entries), "gz_bytes": size, "seconds": round(time.perf_counter() - t0, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--works", type=int, default=250_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temp folder, removed after)")
    ap.add_argument("--keep", action="store_true", help="keep the snapshot and the imported corpus")
    args = ap.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="crase-import-bench-"))
    out: dict[str, object] = {"works": args.works, "workers": args.workers}
    snap = work / "snapshot"
    if not (snap / "works" / "manifest").is_file():
        out["generate"] = generate(snap, args.works)
    dest, cache = work / "imported", work / "cache"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(REPO), CRASE_CACHE_DIR=str(cache))
    out["load_before"] = round(os.getloadavg()[0], 1)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", _CHILD, "corpus", "import", str(snap), str(dest), "--format", "openalex",
                        "--workers", str(args.workers)], env=env, capture_output=True, text=True, cwd=str(REPO))
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        print(r.stderr[-3000:], file=sys.stderr)
        return 1
    tail = r.stderr.rsplit("CPU ", 1)[1]
    m = re.search(r"MAXRSS (\d+) KIDS (\d+)", tail)
    build = re.search(r"built imported: [\d,]+ papers in ([\d.]+) s", r.stderr)
    build_s = float(build.group(1)) if build else None
    out.update({
        "import_wall_s": round(wall, 1), "import_cpu_s": float(tail.split()[0]),
        "of_which_store_build_s": build_s,
        "conversion_s": round(wall - build_s, 1) if build_s else None,
        "peak_rss_mb": int(m.group(1)) if m else None, "largest_worker_rss_mb": int(m.group(2)) if m else None,
        "works_per_s": round(args.works / wall), "load_after": round(os.getloadavg()[0], 1),
        "corpus_mb": round(sum(f.stat().st_size for f in dest.rglob("*") if f.is_file()) / 2**20, 1),
        "summary": r.stdout.splitlines()[0],
    })
    print(json.dumps(out, indent=2))
    if not args.keep and args.dir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
