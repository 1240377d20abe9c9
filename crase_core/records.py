"""The data model of a Crase run: papers, claims, plan, seeds, graph, ranking.

Every record is a plain dataclass; :mod:`crase_core.trace` (de)serialises them to
JSON with pydantic's ``TypeAdapter`` so a saved trace loads back into the same
objects. Field names are part of the trace format: change them only with a
trace-version bump.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

ClaimType = Literal["CONTEXTUAL", "METHODOLOGICAL", "EMPIRICAL", "THEORETICAL"]
CLAIM_TYPES: tuple[str, ...] = ("CONTEXTUAL", "METHODOLOGICAL", "EMPIRICAL", "THEORETICAL")


@dataclass(frozen=True)
class Paper:
    """One paper as a source returns it.

    ``month`` is ``YYYYMM`` (e.g. 199711) where known: the leakage filter of the
    citation benchmarks compares it. ``abstract`` is ``""`` when the source has
    none; then claims come from the title only and ``has_abstract`` is False.
    """

    id: str
    title: str
    abstract: str = ""
    year: int | None = None
    month: int | None = None
    authors: tuple[str, ...] = ()
    venue: str = ""
    url: str = ""
    external_ids: tuple[tuple[str, str], ...] = ()
    citation_count: int | None = None

    @property
    def has_abstract(self) -> bool:
        return bool(self.abstract.strip())

    @property
    def text(self) -> str:
        """The text claims are extracted from: title, then abstract."""
        return f"{self.title}. {self.abstract}".strip() if self.has_abstract else self.title


@dataclass(frozen=True)
class Claim:
    """An atomic claim of a paper (paper Eq. 1).

    ``source_phrase`` should be a verbatim span of the paper's text; ``verbatim``
    records whether it is (checked, never assumed).
    """

    id: str
    type: ClaimType
    text: str
    source_phrase: str
    verbatim: bool = True


@dataclass
class Usage:
    """Cost of model work: calls made and tokens reported by the server."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens


@dataclass
class ClaimSet:
    """The claims of one paper, or the reason there are none.

    ``error`` is set when extraction failed (the paper then has no claims and
    every edge touching it scores Δ = 0). ``notes`` lists non-fatal findings
    (repairs, title-only input, non-verbatim source phrases).
    """

    paper_id: str
    claims: list[Claim]
    extractor: str
    title_only: bool = False
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    cached: bool = False
    usage: Usage = field(default_factory=Usage)


@dataclass
class PlanResult:
    """Stage 1 plan: up to L keyword sub-queries for query q."""

    query: str
    subqueries: list[str]
    planner: str
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    cached: bool = False
    usage: Usage = field(default_factory=Usage)


@dataclass
class SeedOrigin:
    """Which sub-query brought a seed, and its ranks in that one result list (1-based)."""

    subquery_index: int
    subquery: str
    relevance_rank: int
    recency_rank: int
    t: int  # the smallest t that yielded the sub-query's m seeds
    # library: the user named this paper (subquery_index -1); question: the full question's own search
    # (query_seeds), recorded as the search row after the sub-queries'
    kind: Literal["search", "library", "question"] = "search"


@dataclass
class Seed:
    """A seed paper with every sub-query that selected it, and its fate after pruning."""

    paper_id: str
    origins: list[SeedOrigin]
    fate: Literal["kept", "pruned", "pending"] = "pending"
    fate_reason: str = ""


@dataclass
class SearchHit:
    """One row of a sub-query's result list, as the source ranked it.

    ``parts`` (the full-query search's hits only; ``{}`` elsewhere and in traces written before it): the
    score split by what entered it, e.g. ``{"BM25": 9.1, "word-pair proximity": 1.2, "semantic feedback":
    3.0}``, values summing to ``score`` (:mod:`crase_core.retrieval.text_parts`).
    """

    paper_id: str
    relevance_rank: int
    recency_rank: int
    score: float
    parts: dict[str, float] = field(default_factory=dict)


@dataclass
class SubQueryResult:
    """The single search of one sub-query: its ranked list and the seeds it gave."""

    index: int
    subquery: str
    hits: list[SearchHit]
    seed_ids: list[str]
    t: int


@dataclass
class EdgeMatrix:
    """Entailment matrix of one citation edge u→v (paper Eq. 2).

    ``matrix[i][j]`` = ent(claim i of u | claim j of v) ∈ [0, 1]; shape n_u × n_v.
    ``error`` is set when scoring failed; the edge then has Δ = 0.
    """

    matrix: list[list[float]]
    scorer: str
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    cached: bool = False
    usage: Usage = field(default_factory=Usage)


#: who decided an edge's matrix (``EdgeRecord.scorer``): a model, or the offline lexical scorer
MODEL, OFFLINE = "model", "offline"


@dataclass
class EdgeRecord:
    """A citation edge u→v (u cites v) with everything that decided its fate."""

    citing: str
    cited: str
    matrix: list[list[float]] = field(default_factory=list)
    # s_i(u,v) of Eq. 3, citing claim i marked supported (✓): max_j M_ij ≥ ``theta``, the one θ of the edge's scorer
    supported: list[bool] = field(default_factory=list)
    delta: float = 0.0  # Δ(u,v), Eq. 4: the share of ``supported``
    age_years: float = 1.0
    age_factor: float = 1.0  # age(v)^(-β)
    weight: float = 0.0  # w(u→v) = Δ·age^(-β), Eq. 5 (0 when pruned)
    kept: bool = False
    decision: str = ""
    error: str | None = None
    cached: bool = False
    contexts: list[str] = field(default_factory=list)  # citing sentences, where the source has them
    intents: list[str] = field(default_factory=list)
    scorer: str = "offline"  # who decided it: "model" (the endpoint's matrix) or "offline" (lexical scorer)
    scorer_reason: str = ""  # why that scorer: the cascade's priority, the budget, or the model's failure
    # the θ that decided s_i (Eq. 3), its scorer's (crase_core.ranking.pruning.SCORERS): settings.theta for a model's
    # matrix, settings.theta_lexical for the offline lexical scorer's (None: not recorded)
    theta: float | None = None
    # which rule decided ``kept`` (crase_core.ranking.pruning: RULE_*); "" in traces from before it was recorded
    rule: str = ""


@dataclass
class NodeRecord:
    """A paper of the evidence graph V."""

    paper: Paper
    role: Literal["seed", "expanded", "text"]  # text: a full-query search hit outside the citation graph
    kept: bool = True
    prune_reason: str = ""
    score: float = 0.0
    rank: int | None = None  # 1-based among kept nodes, None when pruned
    #: kept by its text match whatever its edges: a text candidate, or one of the question's own top hits
    text_match: bool = False
    in_library: bool = False  # the user already has this paper (their ids or BibTeX)

    @property
    def display_role(self) -> str:
        """How views colour the node: seed_kept, seed_pruned, text, expanded or expanded_pruned."""
        if self.role == "seed":
            return "seed_kept" if self.kept else "seed_pruned"
        if self.role == "text":
            return "text"
        return "expanded" if self.kept else "expanded_pruned"


@dataclass
class TrailStep:
    """One edge of an evidence trail, in walk direction (from → to)."""

    source: str
    target: str
    delta: float
    along_citation: bool  # True: source cites target; False: the walk went against the citation


@dataclass
class PathShare:
    """One path of the walk from a restart source to a ranked paper and the part of a score it carries.

    ``nodes`` in walk order (the restart source first, the ranked paper last); ``along[i]`` says whether
    step i follows a citation (``nodes[i]`` cites ``nodes[i + 1]``) or goes against one (SALSA's step back
    from a cited paper to another paper citing it). ``value``: the path's exact term of the walk's sum over
    paths, in the units of the :class:`ScorePart` that holds it (so a part's paths sum to at most its value).
    """

    nodes: list[str]
    along: list[bool]
    value: float


@dataclass
class ScorePart:
    """One additive part of a ranked paper's score (:mod:`crase_core.ranking.score_parts`).

    The parts of a result sum to its ``score``. ``term``: the fusion term the part belongs to, with its
    formula and numbers; ``signal``: what the part measures — ``walk`` (the ranker over the pruned graph),
    ``text`` (the full-query search), ``tie`` (a rank term neither signal scored: ties broken by order) or
    ``floor`` (the text floor's move); ``component``: the walk's restart source or the text score's
    ingredient; ``source``: the restart source's paper id (walk parts); ``paths``: the strongest paths
    carrying a walk part.
    """

    part: str
    value: float
    term: str = ""
    signal: str = ""
    component: str = ""
    source: str | None = None
    paths: list[PathShare] = field(default_factory=list)


@dataclass
class RankedPaper:
    """One row of the answer: a paper, its score, and why it is here.

    ``score_parts`` (:mod:`crase_core.ranking.score_parts`): the score's additive parts, summing to ``score``;
    ``[]`` in traces written before they were recorded.
    """

    paper_id: str
    rank: int
    score: float
    seed: str | None  # the seed the trail starts from (itself when it is a seed)
    trail: list[TrailStep]
    reason: str
    in_library: bool = False  # the user already has this paper (their ids or BibTeX)
    score_parts: list[ScorePart] = field(default_factory=list)


@dataclass
class AppliedVerdict:
    """An auditor's decision a re-ranked run applied (``crase rerank``, the Audit page's "apply my verdicts").

    ``keep``: the decision applied (keep or prune the edge); ``was_kept``: the parent run's decision;
    ``auditors``: who decided it (empty from the command line); ``note``: how it was decided.
    """

    citing: str
    cited: str
    keep: bool
    was_kept: bool
    auditors: list[str] = field(default_factory=list)
    note: str = ""


@dataclass
class Truncation:
    """A neighbour list cut by a cap (the source's or ours), with the rule that picked the survivors."""

    paper_id: str
    relation: Literal["references", "citations"]
    total: int | None
    kept: int
    rule: str


@dataclass
class Budget:
    """Model invocations 1 + |V| + |E| (paper App. A), known before any scoring, and the run's limit.

    ``limit_calls`` / ``limit_tokens``: the per-query model budget (None: no limit); ``planned_calls``
    = min(to_call, limit): the model items the run will ask at most, with their estimated tokens and
    time. What the run spent is in :class:`Counters` (``model_calls`` counts every HTTP attempt).
    """

    total: int
    plan_calls: int
    claim_calls: int
    entailment_calls: int
    cached: int
    to_call: int
    limit_calls: int | None = None
    limit_tokens: int | None = None
    planned_calls: int = 0
    est_prompt_tokens: int = 0
    est_completion_tokens: int = 0
    est_seconds: float = 0.0


@dataclass
class Counters:
    """What a run cost."""

    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    external_calls: int = 0  # calls to the paper source's remote service (0 for the local corpus)
    search_calls: int = 0
    failures: int = 0
    repairs: int = 0
    model_items: int = 0  # model items (plan excluded) this run asked, cached ones excluded
    model_failed: int = 0  # of them unusable: decided offline (cascade) or left without a decision
    model_edges: int = 0  # edges whose decision is the model's (cached answers included)
    budget_refused: int = 0  # HTTP attempts the per-query budget refused


@dataclass
class RankingResult:
    """Scores of every kept node under one ranker."""

    ranker: str
    scores: dict[str, float]
    iterations: int = 0
    converged: bool = True
    residual: float = 0.0
    paths: dict[str, list[str]] = field(default_factory=dict)  # node → supporting path, seed first (CEP)


@dataclass
class TermCount:
    """One content term of the query and how many of the corpus's (visible) papers contain it."""

    term: str  # the stem the index uses
    papers: int
    word: str = ""  # the query's word it came from (shown to the user)


@dataclass
class QueryCoverage:
    """How much the corpus has on a query (:mod:`crase_core.retrieval.query_coverage`).

    ``rare_terms`` are the query's terms in fewer than ``rare_below`` papers; ``best_match_share`` is
    the largest IDF-weighted share of the query's terms that any one paper contains. ``weak`` is the
    verdict, ``notice`` its explanation in words ("" when not weak).
    """

    terms: list[TermCount]
    n_papers: int
    rare_below: int
    rare_terms: list[str]
    best_match_share: float
    weak: bool
    notice: str = ""


@dataclass
class LibraryItem:
    """One paper the user said they have: what they gave, and the corpus paper it matched (if any)."""

    given: str  # the identifier as parsed (``arXiv:hep-th/9711200``, ``doi:10.…``, a corpus id)
    label: str = ""  # where it came from: a BibTeX key or "pasted"
    paper_id: str | None = None  # the matching paper of the source, None when not found
    seed: bool = False  # used as a seed of this run


@dataclass
class RecallEstimate:
    """The run's estimate of its own recall@k: the share of the corpus's relevant papers its top k holds
    (:mod:`crase_core.recall`), with an interval that covered the measured recall for ``level`` of the
    calibration's queries. ``estimate`` is None where no calibration for the run's corpus was found (or it
    does not fit the run); ``note`` then says why."""

    k: int
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    level: float = 0.8
    group: str = ""  # the calibration group the run fell in: "title" or "question"
    calibration: str = ""  # what it was calibrated on, in words (corpus, benchmarks, queries)
    calibration_source: str = ""  # the corpus (a trace's ``source``) the calibration is for
    features: dict[str, float] = field(default_factory=dict)  # what the run knew (crase_core.recall.features)
    drivers: list[str] = field(default_factory=list)  # the features that moved the estimate most, in words
    advice: list[str] = field(default_factory=list)  # what would raise it (where it is low)
    note: str = ""  # why there is no estimate, or what to read it with


@dataclass
class UserLibrary:
    """The user's own papers given to a run (``crase query --library``, the app's library box)."""

    items: list[LibraryItem]
    max_seeds: int = 0  # at most this many found papers became seeds (the rest are only marked)

    @property
    def found_ids(self) -> list[str]:
        return list(dict.fromkeys(i.paper_id for i in self.items if i.paper_id))


@dataclass(frozen=True)
class FusionTerm:
    """One additive term of a node's fused score: its formula with the numbers used (``label``, ``short``
    its name), its ``value``, and the fractions of it that the walk and the text search account for
    (``walk`` + ``text`` = 1; both 0 for a rank term neither scored, whose rank only ties broke).
    A rank term's split is the two signals' shares of the score that rank was taken from."""

    short: str
    label: str
    value: float
    walk: float = 0.0
    text: float = 0.0
