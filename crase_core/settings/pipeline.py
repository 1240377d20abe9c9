"""The knobs of one pipeline run, each with its default, range or choices and help (field metadata).

``PipelineSettings`` is recorded verbatim in every trace (the ``preset`` it
started from included); it holds no secrets (endpoint credentials live in the
backend's own settings and never reach a trace). Front ends build their flags
and form fields from the :class:`~crase_core.settings.knobs.Knob` of each field
(:mod:`crase_core.settings.config`), so nothing here is listed twice. A ranker's own
parameters are fields too; which ranker reads which is declared in the ranker
declarations (:mod:`crase_core.settings.ranker_knobs`), and a knob that does not apply to the
chosen ranker (or restart mode) is ignored here and refused by the front ends.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from importlib import resources
from typing import Any

from crase_core.errors import InputError
from crase_core.settings.knobs import When, check, knob, spec, specs
from crase_core.settings.ranker_knobs import (
    CEP_BACKGROUND_ITERATIONS,
    CEP_BACKGROUND_RESTART,
    CEP_HOP_DISCOUNT,
    ranker_names,
    rankers_using,
)

#: restart distributions of the walk (``personalization``), with what each means.
RESTART_MODES: dict[str, str] = {
    "query": "every ranked paper ∝ its search score for the full query to the power query_power",
    "uniform": "uniform over the kept seeds (the paper's seed restart)",
    "relevance": "kept seeds ∝ 1/best search rank",
}

#: model calls per query by default (cached answers are free).
DEFAULT_LLM_BUDGET = 200
#: tokens per query by default: below half the Crase paper's 235 K per query.
DEFAULT_LLM_TOKEN_BUDGET = 100_000

#: how stage 3 combines the walk's score with the full-query text score (``fusion``).
FUSION_MODES: dict[str, str] = {
    "none": "the walk's score alone (the paper's ranking)",
    "linear": "(1−λ)·walk/max walk + λ·text/max text",
    "rrf": "weighted reciprocal-rank fusion (1−λ)/(k + walk rank) + λ/(k + text rank)",
    "restart": "(1−λ)·walk/max walk + λ·(text/max text)^γ: the walk mixed with the query restart's shape "
               "(γ = query_power)",
    "restart-rrf": "restart, then reciprocal-rank fusion of that order with the full-query search's own rank: "
                   "(1−μ)/(k + rank) + μ/(k + search rank), μ = text_rank_weight",
}

#: named starting points (one TOML file each in ``presets/``); an explicit flag or form value overrides a
#: preset's value. ``default`` is the declared defaults themselves.
def _load_presets() -> dict[str, dict[str, Any]]:
    folder = resources.files("crase_core.settings").joinpath("presets")
    out: dict[str, dict[str, Any]] = {"default": {}}
    for f in sorted(folder.iterdir(), key=lambda f: f.name):
        if f.name.endswith(".toml"):
            out[f.name.removesuffix(".toml")] = tomllib.loads(f.read_text(encoding="utf-8"))
    return out


PRESETS: dict[str, dict[str, Any]] = _load_presets()

#: what each preset is for and, for ``paper``, what it costs offline: its numbers against the default's on the
#: hep-th dev sets (benchmarks/results/*/{paper,crase}/run.json.gz, the Benchmark page; tests/test_paper_preset.py
#: holds these words to those files)
PRESET_PURPOSE = {
    "default": "this tool's tuned setting, offline or with a model endpoint",
    "paper": "the paper's setting, meant for a model endpoint (--backend openai); offline it ranks far below the "
             "default on the dev sets: questions Recall@5 0.011 vs 0.874, MAP@50 0.038 vs 0.917; citation lists "
             "Recall@5 0.050 vs 0.081, MAP@50 0.114 vs 0.218",
}

#: the pipeline's knobs by stage, in the order the front ends show them (CLI help groups, the app's form, the
#: settings file's ``[pipeline.<stage>]`` tables); :data:`ADVANCED` are folded away in the app's form.
STAGES: dict[str, tuple[str, ...]] = {
    "search": ("L", "L_offline", "m", "search_limit", "query_seeds", "proximity_weight", "proximity_window_weight",
               "semantic_feedback_weight", "semantic_feedback_scope", "dense_seed_weight", "feedback_docs",
               "feedback_terms", "feedback_weight", "anchor_weight"),
    "expansion": ("hops", "neighbor_cap", "text_candidates"),
    "evidence": ("theta", "theta_lexical", "tau", "tau_lexical", "text_matches", "beta", "age_reference_year"),
    "ranking": ("k", "ranker", "alpha", "personalization", "query_power", "anchor_restart_weight",
                "dense_restart_weight", "dense_fusion_weight", "tol", "max_iter",
                "cep_hop_discount", "cep_background_restart", "cep_background_iterations", "fusion",
                "fusion_weight", "text_rank_weight", "text_rank_confidence", "text_rank_specificity", "text_floor",
                "rrf_k"),
    "budget": ("max_model_calls", "llm_budget", "llm_token_budget", "retry_failures"),
}
STAGE_TITLES: dict[str, str] = {
    "search": "Search and seeds (stage 1)",
    "expansion": "Citation neighbourhood (stage 1)",
    "evidence": "Evidence and pruning (stage 2)",
    "ranking": "Ranking and fusion (stage 3)",
    "budget": "Model budget",
}
ADVANCED: frozenset[str] = frozenset({
    "L_offline", "search_limit", "proximity_window_weight", "semantic_feedback_scope", "feedback_docs",
    "feedback_terms", "feedback_weight", "anchor_weight", "neighbor_cap", "age_reference_year",
    "anchor_restart_weight", "dense_seed_weight", "dense_restart_weight", "dense_fusion_weight", "cep_hop_discount",
    "cep_background_restart", "cep_background_iterations",
    "text_rank_confidence", "text_rank_specificity", "text_floor", "rrf_k", "max_model_calls", "retry_failures"})


def _ranker_knob(setting: str) -> When:
    return When("ranker", lambda: rankers_using(setting))


@dataclass(frozen=True)
class PipelineSettings:
    """Parameters of the three stages (defaults from DESIGN.md and the paper)."""

    k: int = knob(50, "Number of papers returned after ranking.", label="k — papers returned", minimum=1,
                  form_max=500)
    m: int = knob(10, "Seeds kept per sub-query (top t of both relevance and recency).",
                  label="m — seeds per sub-query", minimum=1, form_max=50)
    L: int = knob(5, "Maximum number of keyword sub-queries in the research plan when a model plans (the paper's "
                  "planner).", label="L — sub-queries (model planner)", minimum=1, maximum=20)
    L_offline: int = knob(
        1, "Maximum number of sub-queries when an offline planner plans (the keyword planner; the phrase planner); "
        "L is the model planner's.",
        label="L — sub-queries (offline planner)", minimum=1, maximum=20)
    search_limit: int = knob(100, "Results requested from the one search call per sub-query.",
                             label="Search results per sub-query", minimum=1, maximum=1000)
    proximity_weight: float = knob(
        0.4, "w: every search of a local corpus (BM25) is re-scored by term proximity, s + w·s₁·(share of the "
        "query's adjacent word pairs that the paper's title or abstract also has adjacent), s₁ the list's best score "
        "(crase_core.retrieval.proximity; the sequential dependence model's ordered pairs). 0 turns it off.",
        label="w — word-pair proximity in the search", minimum=0.0, maximum=2.0, step=0.05)
    proximity_window_weight: float = knob(
        0.2, "u: the term-proximity re-scoring's unordered part, s₁·u·(share of the query's adjacent word pairs "
        "whose two words occur within 8 words of each other, in either order, in the paper's title or abstract) "
        "(crase_core.retrieval.proximity; the sequential dependence model's unordered window). 0 turns it off.",
        label="u — word-window proximity in the search", minimum=0.0, maximum=2.0, step=0.05)
    semantic_feedback_weight: float = knob(
        0.4, "w_s: every search of a local corpus is fused with the papers whose MiniLM embedding is nearest to its "
        "top hit's, (1 − w_s)·search + w_s·cosine, each min-max normalised (crase_core.retrieval.semantic; vector "
        "pseudo-relevance feedback from shipped corpus embeddings, no model at query time). 0 turns it off; a "
        "corpus without embeddings runs without it.",
        label="w_s — semantic feedback in the search", minimum=0.0, maximum=1.0, step=0.05)
    semantic_feedback_scope: str = knob(
        "fusion", "Which searches get semantic feedback: all (every sub-query's and the question's), question (the "
        "full question's own search only: its seeds, the walk's restart, the text candidates and the fusion) or "
        "fusion (only the list the text candidates, the final fusion and the floor read; seeds and the walk's "
        "restart keep the search's own).",
        label="Semantic feedback in", choices=("all", "question", "fusion"))
    dense_seed_weight: float = knob(
        0.0, "w_q in the seeds: the full question's own search, whose top hits join the seeds (query_seeds), is fused "
        "with the papers whose embedding is nearest the question's, s₁·((1 − w_q)·s/s₁ + w_q·cosine), the cosine "
        "min-max normalised (crase_core.retrieval.dense; the on-device model embeds the question, the corpus needs "
        "embeddings). 0 turns it off.",
        label="w_q — question embedding in the seeds", minimum=0.0, maximum=1.0, step=0.05)
    dense_restart_weight: float = knob(
        0.0, "w_q in the restart: the list the walk restarts from is fused with the papers nearest the question's "
        "embedding, as dense_seed_weight does for the seeds. 0 turns it off.",
        label="w_q — question embedding in the restart", minimum=0.0, maximum=1.0, step=0.05)
    dense_fusion_weight: float = knob(
        0.4, "w_q in the fusion: the list the text candidates, the final fusion and the text floor read is fused with "
        "the papers nearest the question's embedding, as dense_seed_weight does for the seeds. 0 turns it off.",
        label="w_q — question embedding in the fusion", minimum=0.0, maximum=1.0, step=0.05)
    hops: float = knob(1.5, "Expansion radius: 1 (seed–neighbour edges), 1.5 (all edges among V), 2.",
                       label="hops", choices=(1.0, 1.5, 2.0))
    neighbor_cap: int | None = knob(
        None,
        "At most this many references and this many citers per expanded paper enter the graph "
        "(the most-cited are kept); None keeps all.",
        label="Neighbour cap (0 = none)", minimum=1, none_as=0, form_max=100_000,
    )
    theta: float = knob(0.75, "θ: a citing claim is supported when some cited claim's model entailment score is "
                        "≥ θ (Eq. 3), for edges whose matrix a model scored (the paper's method; theta_lexical "
                        "covers the others).",
                        label="θ — support threshold (model-scored edges)", minimum=0.0, maximum=1.0, step=0.05)
    theta_lexical: float = knob(
        0.05, "θ_lexical: θ of Eq. 3 for edges whose matrix the offline word-overlap scorer decided (no model "
        "score: the offline backend, or the model backend's fallback outside its budget): a citing claim is marked "
        "supported, and counts toward Δ, when some cited claim holds at least this share of its informative "
        "(IDF-weighted) words. 0 counts every claim (Δ = 1).",
        label="θ_lexical — word-overlap threshold (word-overlap edges)", minimum=0.0, maximum=1.0, step=0.01)
    tau: float = knob(0.0, "τ: edges whose matrix a model scored are pruned when Δ ≤ τ (Eq. 4); 0 prunes exactly "
                      "the unsupported ones (tau_lexical covers the word-overlap scorer's edges).",
                      label="τ — prune if Δ ≤ τ (model-scored edges)", minimum=0.0, maximum=1.0, max_open=True,
                      step=0.05)
    tau_lexical: float = knob(
        0.0, "τ_lexical: edges whose matrix the offline word-overlap scorer decided are pruned when Δ ≤ τ_lexical: "
        "0 prunes exactly the edges where no citing claim shares enough words (θ_lexical) with a cited claim; "
        "0.35 also those where at most a third do (one claim of 3, 4 or 5).",
        label="τ_lexical — prune if Δ ≤ τ_lexical (word-overlap edges)", minimum=0.0, maximum=1.0, max_open=True,
        step=0.05)
    text_matches: int = knob(
        3, "The question's own top N search hits stay in the ranking by their text match even when pruning leaves "
        "them no kept citation edge (a seed, or any paper of the graph; its reason says so). 0: pruning alone "
        "decides, as in the paper (a node without a kept edge is removed).",
        label="Top text matches kept (0 = off)", minimum=0, maximum=1000, form_max=100)
    beta: float = knob(0.5, "β: age decay exponent in w = Δ·age^(−β) (Eq. 5).", label="β — age decay",
                       minimum=0.0, maximum=10.0, step=0.05, form_max=2.0)
    age_reference_year: int | None = knob(
        None, "Year ages are measured against; None means the current year (the paper's default).",
        label="Age reference year (0 = this year)", minimum=1000, maximum=3000, none_as=0,
    )
    ranker: str = knob("salsa", "Ranker over the pruned graph: salsa (authority of the papers the relevant ones "
                       "cite), ppr (the paper's Personalized PageRank) or cep (contrastive evidence paths).",
                       label="Ranker", choices=ranker_names)
    alpha: float = knob(
        0.5,
        "α: teleport (restart) probability of the walk (Eq. 6); the paper uses 0.15 with seed restarts.",
        label="α — restart probability", minimum=0.0, maximum=1.0, min_open=True, max_open=True, step=0.01,
        when=_ranker_knob("alpha"),
    )
    personalization: str = knob(
        "query",
        "Restart distribution: uniform over kept seeds; relevance (seeds ∝ 1/best search rank); or query "
        "(every ranked paper ∝ its search score for the full query to the power query_power).",
        label="Restart distribution", choices=lambda: tuple(RESTART_MODES),
    )
    query_power: float = knob(16.0, "γ: with personalization=query, restart mass ∝ (full-query search score)^γ.",
                              label="γ — query restart exponent", minimum=0.0, min_open=True, maximum=16.0,
                              step=0.5, form_max=6.0, when=When("personalization", ("query",)))
    text_candidates: int = knob(
        10,
        "Of the top N hits of one search for the full query, those outside the citation graph join the "
        "ranking as text-only candidates (no edges; scored by their restart mass). 0 turns this off.",
        label="Text candidates", minimum=0, maximum=1000, form_max=100,
    )
    feedback_docs: int = knob(
        0, "Pseudo-relevance feedback for the full-query search (RM3-style): the top N papers of the first "
        "search give expansion terms, and a second search for them is blended in (crase_core.retrieval.feedback). "
        "0 turns it off.", label="Feedback papers (0 = off)", minimum=0, maximum=100, form_max=50)
    feedback_terms: int = knob(10, "Expansion terms taken from the feedback papers.", label="Feedback terms",
                               minimum=1, maximum=100, form_max=30)
    feedback_weight: float = knob(0.3, "w: weight of the expansion search in the blended full-query score "
                                  "(1 − w)·s_query/max + w·s_expansion/max.", label="Feedback weight",
                                  minimum=0.0, maximum=1.0, step=0.05)
    anchor_weight: float = knob(
        0.0, "Weight of anchor-text retrieval in the full-query search: a paper also scores by the share of "
        "its citers whose text holds each query term (crase_core.retrieval.anchor; local corpus only). 0 turns it off.",
        label="Anchor-text weight", minimum=0.0, maximum=1.0, step=0.05)
    anchor_restart_weight: float = knob(
        0.1, "Weight of anchor-text retrieval in the walk's restart only: the restart distribution reads the "
        "full-query search blended with the citers' text (crase_core.retrieval.anchor), while the text candidates and "
        "the final fusion keep the plain search. 0 turns it off.", label="Anchor-text weight in the restart",
        minimum=0.0, maximum=1.0, step=0.05)
    query_seeds: int = knob(
        5, "Hybrid seed selection: the full question's own top r search hits by relevance join the seeds "
        "(shown on the Seeds page as one more search row, the question itself). 0 turns it off.",
        label="Seeds from the full question (0 = off)", minimum=0, maximum=100, form_max=50)
    fusion: str = knob(
        "restart-rrf",
        "How the final ranking combines the walk's score with the full-query search score: none (walk "
        "alone), linear (score interpolation), rrf (reciprocal-rank fusion), restart (interpolation with "
        "the query restart's shape) or restart-rrf (restart, then reciprocal-rank fusion with the search's "
        "own ranking, weight text_rank_weight); λ = fusion_weight.",
        label="Fusion with the text score", choices=lambda: tuple(FUSION_MODES),
    )
    fusion_weight: float = knob(0.8, "λ: weight of the text score in the fusion (0 = walk only, 1 = text only).",
                                label="λ — text weight in the fusion", minimum=0.0, maximum=1.0, step=0.05,
                                when=When("fusion", ("linear", "rrf", "restart", "restart-rrf")))
    text_rank_weight: float = knob(
        0.6, "μ: weight of the full-query search's own rank in the final reciprocal-rank fusion of restart-rrf "
        "(0 = the restart fusion's order unchanged).", label="μ — search-rank weight in the final fusion",
        minimum=0.0, maximum=1.0, step=0.05, when=When("fusion", ("restart-rrf",)))
    text_rank_confidence: float = knob(
        0.5, "κ: the search-rank weight follows the full-query search's confidence g = 1 − s₁₀/s₁ (score of "
        "its 10th hit over its first; 1 with fewer than 10 hits): μ(q) = clip(μ + κ·(g − ½), 0, 1). "
        "0 keeps μ fixed.", label="κ — search confidence slope of μ", minimum=-2.0, maximum=2.0, step=0.1,
        when=When("fusion", ("restart-rrf",)))
    text_rank_specificity: float = knob(
        0.5, "η: the search-rank weight also follows the question's specificity s = clip((n − 6)/6, 0, 1), n its "
        "distinct content words (a title or a few keywords: s = 0; a described question of 12+ words: s = 1): "
        "μ(q) = clip(μ + κ·(g − ½) + η·(s − ½), 0, 1). 0 leaves the length out.",
        label="η — question-length slope of μ", minimum=-2.0, maximum=2.0, step=0.1,
        when=When("fusion", ("restart-rrf",)))
    text_floor: int = knob(
        0, "Text floor: the full-query search's top K among the ranked papers are guaranteed a place in the "
        "top k (search rank s is placed no lower than k − K + s). Text candidates outside the citation "
        "graph are ranked only up to text_candidates. 0 turns it off.", label="Text floor K (0 = off)",
        minimum=0, maximum=1000, form_max=100)
    rrf_k: float = knob(10.0, "k of reciprocal-rank fusion: 1/(k + rank); larger k flattens the rank weights.",
                        label="RRF k", minimum=0.0, maximum=10_000.0, step=5.0, form_max=200.0,
                        when=When("fusion", ("rrf", "restart-rrf")))
    tol: float = knob(1e-10, "Power-iteration stop: L1 change between iterations below tol.", minimum=0.0,
                      min_open=True, maximum=1.0, form=False, when=_ranker_knob("tol"))
    max_iter: int = knob(1000, "Power-iteration cap.", minimum=1, maximum=1_000_000, form=False,
                         when=_ranker_knob("max_iter"))
    cep_hop_discount: float = knob(CEP_HOP_DISCOUNT, "CEP λ: each hop of an evidence path multiplies its "
                                   "support by λ (SCI paper, Table 8).", label="CEP λ — hop discount",
                                   minimum=0.0, min_open=True, maximum=1.0, step=0.05,
                                   when=_ranker_knob("cep_hop_discount"))
    cep_background_restart: float = knob(CEP_BACKGROUND_RESTART, "CEP α_b: restart probability of the uniform "
                                         "background walk that calibrates path support.",
                                         label="CEP α_b — background restart", minimum=0.0, min_open=True,
                                         maximum=1.0, step=0.05, when=_ranker_knob("cep_background_restart"))
    cep_background_iterations: int = knob(CEP_BACKGROUND_ITERATIONS, "CEP T_b: steps of the background walk.",
                                          label="CEP T_b — background steps", minimum=0, maximum=10_000,
                                          form_max=200, when=_ranker_knob("cep_background_iterations"))
    max_model_calls: int | None = knob(
        None, "Refuse to run when the uncached model calls would exceed this; None: no cap.",
        label="Model-call cap (0 = none)", minimum=0, none_as=0, step=1000, form_max=10_000_000,
    )
    llm_budget: int | None = knob(
        DEFAULT_LLM_BUDGET,
        "Model calls one query may make at most (every HTTP attempt, retries included; cached answers are "
        "free). The offline components decide everything; the model is asked about the items that matter "
        "most for the ranked list first. Applies to model backends; 0 = no limit.",
        label="Model budget: calls (0 = no limit)", minimum=0, none_as=0, step=50, form_max=100_000,
    )
    llm_token_budget: int | None = knob(
        DEFAULT_LLM_TOKEN_BUDGET,
        "Prompt + completion tokens one query may spend at most (with --llm-budget: whichever is reached "
        "first; reserved per call as an upper bound, so it is never exceeded). 0 = no limit.",
        label="Model budget: tokens (0 = no limit)", minimum=0, none_as=0, step=10_000, form_max=100_000_000,
    )
    retry_failures: bool = knob(
        False, "Ask the model again about items whose cached answer was unusable (cached failures also "
        "expire after a day).", label="Retry cached model failures", form=False,
    )
    preset: str = knob("default", "Named starting point: default, or paper (the paper's configuration: "
                       "PPR with seed restarts, α = 0.15, no text candidates, θ 0.75 for model-scored edges and "
                       "τ 0 for every edge, no question seeds) — " + PRESET_PURPOSE["paper"]
                       + ". Explicit values override it.",
                       label="Preset", choices=lambda: tuple(PRESETS))

    def __post_init__(self) -> None:
        validate_settings(self)

    def replace(self, **changes: Any) -> PipelineSettings:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return PipelineSettings(**values)

    @staticmethod
    def help(name: str) -> str:
        return spec(PipelineSettings, name).knob.help

    def stage(self, name: str) -> dict[str, Any]:
        """The values of the knobs of stage ``name`` (:data:`STAGES`)."""
        return {f: getattr(self, f) for f in STAGES[name]}

    @classmethod
    def from_preset(cls, name: str, **changes: Any) -> PipelineSettings:
        """The settings of preset ``name`` with ``changes`` on top (they win over the preset)."""
        if name not in PRESETS:
            raise InputError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
        return cls(**{**PRESETS[name], **changes, "preset": name})

    def inapplicable(self) -> dict[str, str]:
        """Knobs that do not apply to these settings (field → why), e.g. ``alpha`` under the CEP ranker."""
        out: dict[str, str] = {}
        for s in specs(PipelineSettings):
            w = s.knob.when
            if w is not None and not w.holds(self):
                out[s.name] = (f"does not apply to {w.field} {getattr(self, w.field)}; it is used with "
                               f"{w.field} {', '.join(map(str, w.allowed()))}")
        return out


def validate_settings(s: PipelineSettings) -> None:
    """Raise :class:`InputError` naming the first bad knob (type, non-finite, range, choices)."""
    check(s)
