"""Paper-scale and arXiv-scale corpora: build, open, query and grow, each measured in fresh processes.

Generates a synthetic corpus in the user's format (``papers.jsonl`` + ``citations.tsv``) — Zipf
vocabulary, 60–180-word abstracts, ~``refs`` references per paper to older papers with preferential
attachment (hubs) — or uses ``--corpus DIR`` (e.g. the embedded hep-th corpus), plus a batch of
``--append-share`` more papers, then measures on a fresh cache folder:

* ``crase corpus build`` (store + text index; wall time, peak RSS, on-disk sizes),
* opening the built corpus and index in a fresh process (``LocalSource.open``; imports timed apart),
* ``crase query`` for 20 queries drawn from the corpus's own titles, each in a fresh process: wall time
  and peak RSS with a cold result cache, then again with a warm one; stage times from the trace,
* ``crase corpus add`` of the batch (wall, RSS), and an open after it,
* with ``--segments``: appends of 0.1 %, 1 % and 2 % of the corpus as successive segments, then two more
  0.1 % ones (wall, CPU, peak RSS, share of the build's wall each), ``crase query`` after one and after five
  segments (wall, peak RSS), an open after five, and ``crase corpus merge`` of the five,
* ``crase eval --workers 2`` over a few of those queries: each worker's RSS, PSS and the share of its
  resident memory that is shared (the corpus mapped once, its pages shared by the workers),
* the load average (1 min) at the start of every phase, next to its numbers.

Every child's peak RSS is its own ``ru_maxrss``. Prints one JSON object. Usage::

    nice -n 10 .venv/bin/python benchmarks/large_corpus.py --papers 500000
    .venv/bin/python benchmarks/large_corpus.py --corpus assets/corpora/hepth
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

# runs ``python -m crase_core.cli ARGS`` and prints this process's peak RSS (MB) on the last stderr line
_CHILD = """
import atexit, resource, runpy, sys
def hwm():  # this process's own peak RSS (ru_maxrss would carry the parent's across exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
def report():  # an exit handler: `crase query` ends the process at once after running them
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    print(f"CPU {cpu:.2f}", file=sys.stderr)
    print(f"MAXRSS {hwm():.0f}", file=sys.stderr)
atexit.register(report)
sys.argv = ["crase", *sys.argv[1:]]
runpy.run_module("crase_core.cli", run_name="__main__")
"""

_OPEN = """
import sys, time, json
t0 = time.perf_counter()
from crase_core.sources.local import LocalSource
t1 = time.perf_counter()
src = LocalSource.open(sys.argv[1])
t2 = time.perf_counter()
hits = src.search(sys.argv[2], 50)
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "search_s": t3 - t2, "hits": len(hits),
                  "papers": len(src.corpus),
                  "rss_mb": [int(x.split()[1]) / 1024 for x in open("/proc/self/status") if x.startswith("VmHWM:")][0]}))
"""


def generate(folder: Path, n: int, refs: float, seed: int = 0, start: int = 0) -> tuple[int, float]:
    """Write papers ``start … start + n − 1`` (citing only older ones); return (citation lines, seconds)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed + start)
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
    total = start + n
    lines = 0
    with open(folder / "papers.jsonl", "w", encoding="utf-8") as fp, \
            open(folder / "citations.tsv", "w", encoding="utf-8") as fc:
        for lo in range(start, total, 50_000):
            hi = min(total, lo + 50_000)
            abstract_len = rng.integers(60, 180, size=hi - lo)
            title_len = rng.integers(5, 13, size=hi - lo)
            draws = words_arr[rng.choice(vocab_size, size=int(abstract_len.sum() + title_len.sum()), p=zipf)]
            pos = 0
            for k, i in enumerate(range(lo, hi)):
                title = " ".join(draws[pos : pos + title_len[k]])
                pos += title_len[k]
                abstract = " ".join(draws[pos : pos + abstract_len[k]])
                pos += abstract_len[k]
                year = 1990 + (i * 34) // max(total, 1)
                month = 1 + (i % 12)
                row = {"id": f"P{i:07d}", "title": title, "abstract": abstract if i % 20 else "", "year": year,
                       "month": f"{year}-{month:02d}", "authors": f"Author {i % 9973}, Author {i % 7919}"}
                fp.write(json.dumps(row) + "\n")
                # preferential attachment to older papers: cited = floor(citing · u²) favours early (hub) papers
                k_refs = min(i, int(rng.poisson(refs)))
                if k_refs:
                    cited = np.unique((i * rng.random(k_refs) ** 2).astype(np.int64))
                    fc.write("".join(f"P{i:07d}\tP{j:07d}\n" for j in cited))
                    lines += len(cited)
    return lines, time.perf_counter() - t0


def split_corpus(source: Path, folder: Path, batch: Path, share: float) -> dict[str, int]:
    """Copy the corpus ``source`` as ``folder`` minus its last ``share`` of papers, which go to ``batch``
    with the citation lines they start (to be appended)."""
    from crase_core.store.corpus import find_file, read_lines

    lines = [line for _, line in read_lines(find_file(source, "papers.jsonl")) if line.strip()]
    cut = len(lines) - int(len(lines) * share) if share > 0 else len(lines)
    moved = {json.loads(line)["id"] for line in lines[cut:]}
    for d in (folder, batch):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    (folder / "papers.jsonl").write_text("".join(lines[:cut]), encoding="utf-8")
    (batch / "papers.jsonl").write_text("".join(lines[cut:]), encoding="utf-8")
    cites = [line for _, line in read_lines(find_file(source, "citations.tsv"))]
    later = [c for c in cites if c.split("\t", 1)[0] in moved]
    (folder / "citations.tsv").write_text("".join(c for c in cites if c.split("\t", 1)[0] not in moved),
                                          encoding="utf-8")
    (batch / "citations.tsv").write_text("".join(later), encoding="utf-8")
    if share <= 0:
        shutil.rmtree(batch)
    return {"papers": cut, "append_papers": len(lines) - cut}


def _run(args: list[str], env: dict[str, str], timeout: float = 3600) -> tuple[float, float, str, str]:
    """(wall s, peak RSS MB, stdout, stderr) of ``crase ARGS`` in a fresh process (stderr ends with its CPU s)."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", _CHILD, *args], env=env, capture_output=True, text=True,
                       timeout=timeout, cwd=str(REPO))
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"crase {' '.join(args[:2])} failed ({r.returncode}): {r.stderr[-2000:]}")
    rss = float(r.stderr.rsplit("MAXRSS ", 1)[1].split()[0])
    return wall, rss, r.stdout, r.stderr


def _cpu(stderr: str) -> float:
    """CPU seconds (user + system, the process and its workers) a child reported."""
    return round(float(stderr.rsplit("CPU ", 1)[1].split()[0]), 1)


def _dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20 if path.is_dir() else 0.0


def _queries(folder: Path, n_papers: int, k: int = 20) -> list[str]:
    """``k`` queries: the first four title words of papers spread evenly over the corpus."""
    wanted = {int(i) for i in np.linspace(0, n_papers - 1, k)}
    out = []
    from crase_core.store.corpus import find_file, read_lines

    for i, (_, line) in enumerate(read_lines(find_file(folder, "papers.jsonl"))):
        if i in wanted:
            out.append(" ".join(json.loads(line)["title"].split()[:4]))
        if len(out) == k:
            break
    return out


def _median(xs: list[float]) -> float:
    return round(statistics.median(xs), 3) if xs else float("nan")


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _smaps_rollup(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
            key, value = line.split(":", 1)
            out[key] = int(value.split()[0])
    except (OSError, ValueError):
        pass
    return out


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            kids += [int(x) for x in (task / "children").read_text().split()]
    return kids


def eval_sharing(folder: Path, env: dict[str, str], queries: list[str], work: Path) -> dict[str, object]:
    """``crase eval --workers 2`` over ``queries``; every worker's peak RSS and PSS and its shared memory (MB),
    sampled from /proc every 0.1 s (PSS counts a page shared by k processes as 1/k)."""
    bench = work / "bench.jsonl"
    bench.write_text("".join(json.dumps({"qid": f"q{i}", "query": q, "relevant": ["P0000000"]}) + "\n"
                             for i, q in enumerate(queries)), encoding="utf-8")
    out = work / "eval-out"
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "crase_core.cli", "eval", str(bench), "--out", str(out), "--workers",
                             "2", "--corpus", str(folder), "--no-cache", "--fresh"], env=env, cwd=str(REPO),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak: dict[int, dict[str, int]] = {}
    parent: dict[str, int] = {}
    while proc.poll() is None:
        for kid in _children(proc.pid):
            r = _smaps_rollup(kid)
            if r and r.get("Rss", 0) >= peak.get(kid, {}).get("Rss", 0):
                peak[kid] = r
        r = _smaps_rollup(proc.pid)
        if r.get("Rss", 0) >= parent.get("Rss", 0):
            parent = r
        time.sleep(0.1)
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"crase eval failed ({proc.returncode}): {err[-2000:]}")

    def mb(r: dict[str, int], *keys: str) -> float:
        return round(sum(r.get(k, 0) for k in keys) / 1024, 1)

    return {"eval_wall_s": round(time.perf_counter() - t0, 1), "eval_parent_rss_mb": mb(parent, "Rss"),
            "eval_workers": [{"rss_mb": mb(r, "Rss"), "pss_mb": mb(r, "Pss"),
                              "shared_mb": mb(r, "Shared_Clean", "Shared_Dirty"),
                              "private_mb": mb(r, "Private_Clean", "Private_Dirty")} for r in peak.values()]}


def measure(folder: Path, batch: Path | None, cache: Path, workers: int, n_queries: int,
            eval_queries: int = 4) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRASE_", "OPENAI_", "S2_"))}
    env.update(PYTHONPATH=str(REPO), CRASE_CACHE_DIR=str(cache))
    res: dict[str, object] = {"load_at_build": _load()}
    wall, rss, out, err = _run(["corpus", "build", str(folder), "--workers", str(workers)], env)
    res.update(build_s=round(wall, 1), build_cpu_s=_cpu(err), build_peak_rss_mb=round(rss))
    res["store_mb"] = round(_dir_mb(cache / "corpus"), 1)
    res["index_mb"] = round(_dir_mb(cache / "index"), 1)
    res["source_files_mb"] = round(sum(p.stat().st_size for p in folder.iterdir() if p.is_file()) / 2**20, 1)

    queries = _queries(folder, int(out.split(": ", 1)[1].split(" papers")[0].replace(",", "")), n_queries)
    res["load_at_open"] = _load()
    opens = [json.loads(subprocess.run([sys.executable, "-c", _OPEN, str(folder), q], env=env, capture_output=True,
                                       text=True, check=True, cwd=str(REPO)).stdout) for q in queries[:5]]
    res.update(open_s_median=_median([o["open_s"] for o in opens]), import_s_median=_median([o["import_s"] for o in opens]),
               search_s_median=_median([o["search_s"] for o in opens]), open_rss_mb=round(max(o["rss_mb"] for o in opens)))

    res["load_at_queries"] = _load()
    cold, warm, rss_q, stages, sizes = [], [], [], [], []
    trace = cache.parent / "trace.json"
    for q in queries:
        for store in (cold, warm):
            wall, rss, _, _ = _run(["query", q, "--corpus", str(folder), "--quiet", "--json", str(trace)], env)
            store.append(wall)
            rss_q.append(rss)
        saved = json.loads(trace.read_text())
        stages.append(saved["timings"])
        sizes.append((len(saved.get("nodes", [])), len(saved.get("edges", []))))
    res.update(query_wall_s_median_cold=_median(cold), query_wall_s_max_cold=round(max(cold), 2),
               query_wall_s_median_warm=_median(warm), query_wall_s_max_warm=round(max(warm), 2),
               query_peak_rss_mb=round(max(rss_q)))
    if sizes:
        res.update(graph_nodes_median=_median([float(v) for v, _ in sizes]),
                   graph_edges_median=_median([float(e) for _, e in sizes]))
    res["stage_s_median_warm"] = {k: _median([s.get(k, 0.0) for s in stages]) for k in stages[0]} if stages else {}

    res["load_after_queries"] = _load()
    if eval_queries:
        res["load_at_eval"] = _load()
        res.update(eval_sharing(folder, env, queries[:eval_queries], cache.parent))
    if batch is not None:
        res["load_at_append"] = _load()
        wall, rss, out, err = _run(["corpus", "add", str(folder), str(batch)], env)
        res.update(append_s=round(wall, 1), append_cpu_s=_cpu(err), append_peak_rss_mb=round(rss),
                   append_result=out.strip())
        after = json.loads(subprocess.run([sys.executable, "-c", _OPEN, str(folder), queries[0]], env=env,
                                          capture_output=True, text=True, check=True, cwd=str(REPO)).stdout)
        res.update(open_after_append_s=round(after["open_s"], 3), papers_after_append=after["papers"])
        res["store_mb_after_append"] = round(_dir_mb(cache / "corpus"), 1)
    return res


def _query_phase(folder: Path, env: dict[str, str], queries: list[str]) -> dict[str, object]:
    walls, rss = [], []
    for q in queries:
        wall, peak, _, _ = _run(["query", q, "--corpus", str(folder), "--quiet", "--no-cache"], env)
        walls.append(wall)
        rss.append(peak)
    return {"load": _load(), "query_wall_s_median": _median(walls), "query_wall_s_max": round(max(walls), 2),
            "query_peak_rss_mb": round(max(rss))}


def measure_segments(folder: Path, cache: Path, work: Path, n: int, refs: float, build_s: float,
                     queries: list[str]) -> dict[str, object]:
    """Appends of 0.1 %, 1 % and 2 % of ``n`` papers as successive segments, two more of 0.1 %, queries after
    the first and the fifth segment, then a merge; every step in a fresh process, with the load next to it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRASE_", "OPENAI_", "S2_"))}
    env.update(PYTHONPATH=str(REPO), CRASE_CACHE_DIR=str(cache))
    out: dict[str, object] = {}
    appends = []
    total = n
    for k, share in enumerate((0.001, 0.01, 0.02, 0.001, 0.001), 1):
        batch = work / f"segment-batch-{k}"
        shutil.rmtree(batch, ignore_errors=True)
        size = max(1, int(n * share))
        lines, _ = generate(batch, size, refs, start=total)
        total += size
        load = _load()
        wall, rss, stdout, err = _run(["corpus", "add", str(folder), str(batch), "--no-merge"], env)
        appends.append({"segment": k, "papers": size, "citation_lines": lines, "load": load, "wall_s": round(wall, 2),
                        "cpu_s": _cpu(err), "peak_rss_mb": round(rss), "share_of_build": round(wall / build_s, 4),
                        "result": stdout.strip()})
        if k == 1:
            out["after_1_segment"] = _query_phase(folder, env, queries)
    out["appends"] = appends
    out["after_5_segments"] = _query_phase(folder, env, queries)
    opened = json.loads(subprocess.run([sys.executable, "-c", _OPEN, str(folder), queries[0]], env=env,
                                       capture_output=True, text=True, check=True, cwd=str(REPO)).stdout)
    out["open_after_5_segments"] = {"load": _load(), "open_s": round(opened["open_s"], 4),
                                    "search_s": round(opened["search_s"], 3), "rss_mb": opened["rss_mb"]}
    load = _load()
    wall, rss, stdout, err = _run(["corpus", "merge", str(folder)], env)
    out["merge"] = {"load": load, "wall_s": round(wall, 1), "cpu_s": _cpu(err), "peak_rss_mb": round(rss),
                    "result": stdout.strip()}
    out["after_merge"] = _query_phase(folder, env, queries[:3])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--papers", type=int, default=500_000)
    ap.add_argument("--refs", type=float, default=12.0, help="mean references per paper (hep-th: ~12)")
    ap.add_argument("--corpus", type=Path, default=None, help="measure this corpus folder instead (copied first)")
    ap.add_argument("--append-share", type=float, default=0.01, help="batch appended after the build (0: none)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--eval-queries", type=int, default=4, help="queries for the 2-worker `crase eval` (0: skip)")
    ap.add_argument("--keep", type=Path, default=None, help="work in this folder and keep it")
    ap.add_argument("--segments", action="store_true", help="after the build: appends of 0.1/1/2 %% as segments, "
                    "queries after 1 and 5 segments, a merge (synthetic corpora only; skips the other phases' append)")
    ap.add_argument("--reuse-cache", action="store_true", help="with --keep: keep the built store (measure opens "
                    "and queries again without rebuilding)")
    args = ap.parse_args(argv)

    work = args.keep or Path(tempfile.mkdtemp(prefix="crase-large-"))
    work.mkdir(parents=True, exist_ok=True)
    folder, batch, cache = work / "corpus", work / "batch", work / "cache"
    if not args.reuse_cache:
        shutil.rmtree(cache, ignore_errors=True)
    results: dict[str, object] = {}
    try:
        if args.corpus is not None:
            results["corpus"] = str(args.corpus)
            n = None
            if not args.reuse_cache:
                results.update(split_corpus(args.corpus, folder, batch, args.append_share))
        else:
            n = args.papers
            if not (folder / "papers.jsonl").is_file():
                lines, gen_s = generate(folder, n, args.refs)
                results.update(citation_lines=lines, generate_s=round(gen_s, 1))
            results["papers"] = n
        n_batch = int((n or 0) * args.append_share)
        if n is not None and n_batch and not args.reuse_cache:
            shutil.rmtree(batch, ignore_errors=True)
            generate(batch, n_batch, args.refs, start=n)
            results["append_papers"] = n_batch
        has_batch = (batch / "papers.jsonl").is_file() and (n is None or n_batch > 0) and not args.segments
        results.update(measure(folder, batch if has_batch else None, cache, args.workers, args.queries,
                               args.eval_queries))
        if args.segments and n is not None:
            results["segments"] = measure_segments(folder, cache, work, n, args.refs, float(results["build_s"]),
                                                   _queries(folder, n, 5))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    json.dump(results, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
