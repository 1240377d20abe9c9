"""Support-scorer evaluation on SciFact claim–abstract pairs (assets/scifact/claim_doc_pairs.jsonl.gz): the
offline word-overlap support scorer, with --similarity the claim-similarity scorer (MiniLM on this machine), and with --llm the model backend's entailment scorer.

    .venv/bin/python benchmarks/eval_scifact.py [--out benchmarks/results/scifact] [--theta 0.32]
        [--r0 0.11338 ...] [--similarity] [--llm]   # --r0: also the logistic (v1) scale; --llm: the model backend's scorer

For each scorer: precision / recall / F1 of "supported" (max_j M[0][j] ≥ θ) against SUPPORT vs
CONTRADICT + NOT-ENOUGH-INFO, at θ and over a threshold sweep, on full abstracts and on the rationale
sentences, and the best-F1 threshold on a 0.01 grid (the word-overlap scorer's calibrated threshold,
crase_core.evidence.entailment.WORD_OVERLAP_SUPPORT_THETA, is that threshold on full abstracts). Writes
OUT/scifact.json and OUT/report.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from crase_core.evaluation.scifact import evaluate_scorer, load_pairs, offline_scorer
from crase_core.evidence.entailment import WORD_OVERLAP_SUPPORT_THETA


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "scifact"))
    ap.add_argument("--theta", type=float, default=WORD_OVERLAP_SUPPORT_THETA)
    ap.add_argument("--r0", type=float, action="append", default=None,
                    help="also the word-overlap scorer through the logistic map of this r0 (k 30; the v1 scale)")
    ap.add_argument("--llm", action="store_true", help="also evaluate the openai backend's scorer (needs its settings)")
    ap.add_argument("--similarity", action="store_true",
                    help="also the claim-similarity scorer (all-MiniLM-L6-v2 on this machine, crase_core.encoder)")
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    pairs = load_pairs(limit=args.limit)
    scorers = [offline_scorer(pairs), *(offline_scorer(pairs, r0=r0) for r0 in args.r0 or [])]
    if args.similarity:
        from crase_core.encoder import load_encoder
        from crase_core.evidence.similarity import ClaimSimilarityScorer

        scorers.append(ClaimSimilarityScorer(load_encoder()))
    if args.llm:
        from crase_core.runtime import RuntimeConfig, build_engine

        scorers.append(build_engine(RuntimeConfig(backend="openai")).backend.scorer)
    results = []
    for scorer in scorers:
        for evidence_only in (False, True):
            results.append(evaluate_scorer(scorer, pairs, args.theta, evidence_only))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scifact.json").write_text(json.dumps(results, indent=2))
    lines = ["# Support scorers on SciFact", "",
             f"{len(pairs)} claim–abstract pairs ({results[0]['labels']}); positive = SUPPORT, negative = "
             "CONTRADICT or NOT-ENOUGH-INFO; score = max over cited sentences (paper Eq. 3).", "",
             f"| scorer | cited side | P@θ={args.theta:g} | R@θ | F1@θ | best θ (0.01 grid) | best F1 | mean score S / C / NEI |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        t, b, ms = r["at_theta"], r["best"], r["mean_score"]
        lines.append(f"| {r['scorer']} | {'rationale sentences' if r['evidence_only'] else 'full abstract'} | "
                     f"{t['precision']:.3f} | {t['recall']:.3f} | {t['f1']:.3f} | {b['theta']:.2f} | {b['f1']:.3f} | "
                     f"{ms.get('SUPPORT', 0):.3f} / {ms.get('CONTRADICT', 0):.3f} / {ms.get('NEI', 0):.3f} |")
    lines += ["", "Threshold sweep (full abstract):", "", "| scorer | " + " | ".join(f"{x['theta']:.2f}" for x in results[0]["sweep"]) + " |",
              "|---" * (len(results[0]["sweep"]) + 1) + "|"]
    for r in results:
        if not r["evidence_only"]:
            lines.append(f"| {r['scorer']} F1 | " + " | ".join(f"{x['f1']:.3f}" for x in r["sweep"]) + " |")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
