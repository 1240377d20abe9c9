"""Fresh-process ``crase query`` time with and without the question embedded (issue 30: a repeated question
must not get slower: its vector comes from the result cache, the model is never loaded).

    .venv/bin/python benchmarks/dense_query_time.py [--runs 5] [--query "..."]

Each row is the median wall time of ``--runs`` fresh processes (``crase query Q --quiet``) over the embedded
corpus, with the user's cache folder (``--scratch``: a new one, whose corpus store is built first):

* ``words``: the question not embedded (every dense weight 0), repeated — today's path;
* ``embedded, first``: the default (the question embedded), a question new to the cache each start (the model
  loads and embeds it; the run's claims and matrices are mostly cached);
* ``embedded, repeated``: the default, the same question again (its vector is cached).

Also prints whether the repeated run imported onnxruntime (it must not). The machine is shared: the load average
is printed beside the numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

PROBE = ("import sys; from crase_core.cli.main import main; code = main(sys.argv[1:]); "
         "print('onnxruntime' in sys.modules, file=sys.stderr); sys.exit(code)")
DENSE: list[str] = []  # the default: the question embedded into the final fusion's list
WORDS = ["--dense-seed-weight", "0", "--dense-restart-weight", "0", "--dense-fusion-weight", "0"]


def timed(query: str, flags: list[str], env: dict[str, str]) -> tuple[float, bool]:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", PROBE, "query", query, "--quiet", *flags], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    return time.perf_counter() - t, r.stderr.strip().splitlines()[-1] == "True"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--query", default="tachyon condensation on unstable D-branes")
    ap.add_argument("--scratch", action="store_true", help="a new cache folder (the corpus store is built first)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, **({"CRASE_CACHE_DIR": cache} if args.scratch else {})}
        timed(args.query, WORDS, env)  # build the store and fill the run's caches once
        timed(args.query, DENSE, env)
        rows: dict[str, list[float]] = {"words": [], "embedded, first": [], "embedded, repeated": []}
        loaded = {"embedded, first": [], "embedded, repeated": []}
        for i in range(args.runs):
            rows["words"].append(timed(args.query, WORDS, env)[0])
            secs, ort = timed(f"{args.query} {'x' * (i + 1)}", DENSE, env)
            rows["embedded, first"].append(secs)
            loaded["embedded, first"].append(ort)
            secs, ort = timed(args.query, DENSE, env)
            rows["embedded, repeated"].append(secs)
            loaded["embedded, repeated"].append(ort)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min); {args.runs} fresh processes per row")
    for name, secs in rows.items():
        ort = f"  onnxruntime imported in {sum(loaded[name])}/{args.runs}" if name in loaded else ""
        print(f"{name:<22} median {statistics.median(secs):6.2f} s  (min {min(secs):.2f}, max {max(secs):.2f}){ort}")


if __name__ == "__main__":
    main()
