"""Word overlap vs claim similarity (MiniLM on this machine) vs their mean, on the bundled SciFact pairs, with
95 % bootstrap intervals of each best-F1 and of the paired F1 difference (the θ re-chosen in every resample, so
the interval includes the choice of θ).

    .venv/bin/python benchmarks/scifact_similarity.py [--resamples 1000]

Prints one table (markdown). Positive = SUPPORT; negative = CONTRADICT and NOT-ENOUGH-INFO; a pair's score is
max_j M[0][j] over the abstract's sentences (paper Eq. 3), as crase_core.evaluation.scifact computes it.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from crase_core.encoder import load_encoder
from crase_core.evaluation.scifact import FINE_THRESHOLDS, load_pairs, offline_scorer, support_scores
from crase_core.evidence.similarity import ClaimSimilarityScorer


def best_f1(scores: np.ndarray, pos: np.ndarray) -> tuple[float, float]:
    best = (0.0, 0.0)
    for t in FINE_THRESHOLDS:
        pred = scores >= t
        tp = float(np.sum(pred & pos))
        fp = float(np.sum(pred & ~pos))
        fn = float(np.sum(~pred & pos))
        f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        if f1 > best[0]:
            best = (f1, t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--resamples", type=int, default=1000)
    args = ap.parse_args()
    pairs = load_pairs()
    pos = np.array([p.label == "SUPPORT" for p in pairs])
    t = time.perf_counter()
    words = np.array([s or 0.0 for s in support_scores(offline_scorer(pairs), pairs)])
    sim_scorer = ClaimSimilarityScorer(load_encoder())
    sim = np.array([s or 0.0 for s in support_scores(sim_scorer, pairs, batch=len(pairs))])
    seconds = time.perf_counter() - t
    methods = {"word overlap": words, "claim similarity": sim, "mean of the two": (words + sim) / 2}
    rng = np.random.default_rng(0)
    idx = [rng.integers(0, len(pairs), len(pairs)) for _ in range(args.resamples)]
    print(f"{len(pairs)} SciFact pairs; scores computed in {seconds:.0f} s "
          f"({len(sim_scorer._vectors):,} distinct sentences embedded)\n")
    print("| scorer | best F1 | θ | 95 % interval | F1 − word overlap's | 95 % interval |")
    print("|---|---|---|---|---|---|")
    base_boot = [best_f1(words[i], pos[i])[0] for i in idx]
    for name, s in methods.items():
        f1, theta = best_f1(s, pos)
        boot = [best_f1(s[i], pos[i])[0] for i in idx]
        diff = np.array(boot) - np.array(base_boot)
        lo, hi = np.percentile(boot, [2.5, 97.5])
        dlo, dhi = np.percentile(diff, [2.5, 97.5])
        print(f"| {name} | {f1:.3f} | {theta:.2f} | [{lo:.3f}, {hi:.3f}] | {f1 - best_f1(words, pos)[0]:+.3f} | "
              f"[{dlo:+.3f}, {dhi:+.3f}] |")


if __name__ == "__main__":
    main()
