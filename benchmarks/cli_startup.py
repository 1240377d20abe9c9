"""How fast ``crase --help`` answers, side by side with a bare Python start (``python -c "import json"``).

    .venv/bin/python benchmarks/cli_startup.py [--runs 15]

Prints the median wall time of each over ``--runs`` starts and their ratio (issue 24's target: at most 6×).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def median_seconds(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15)
    runs = ap.parse_args().runs
    bare = median_seconds([sys.executable, "-c", "import json"], runs)
    rows = [("python -c 'import json'", bare)]
    for args in (["--help"], ["query", "--help"], ["corpus", "--help"]):
        rows.append((f"crase {' '.join(args)}", median_seconds([sys.executable, "-m", "crase_core.cli", *args], runs)))
    for name, secs in rows:
        print(f"{name:<28} {secs * 1000:8.1f} ms  {secs / bare:5.1f}×")


if __name__ == "__main__":
    main()
