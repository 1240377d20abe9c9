"""Stage 2 edge scoring: one n_u × n_v matrix per citation edge (paper Eq. 2).

``EntailmentScorer`` is the interface: a batch of (citing claims, cited
claims) pairs in, one :class:`EdgeMatrix` per pair out. Implementations must
return exactly n_u rows of n_v values in [0, 1], or an ``error``.

:class:`LexicalSupportScorer` is the offline scorer, **word-overlap support**.
It is **not** an entailment model: M_ij is the share of citing claim i's
informative vocabulary that cited claim j contains,

    r_ij = Σ_{t ∈ T_i ∩ T_j} idf(t) / Σ_{t ∈ T_i} idf(t)

(T = set of content stems, idf from the corpus): 0.3 means the cited claim
holds words carrying 30% of the citing claim's IDF weight. It cannot tell
support from contradiction or from mere topical overlap; its name says so.
:data:`WORD_OVERLAP_SUPPORT_THETA` is the share that best separates SciFact's supporting pairs
(:mod:`crase_core.evaluation.scifact`); the pipeline reads its edges at one threshold, θ_lexical
(:data:`crase_core.ranking.pruning.SCORERS`), for ✓ and Δ alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from crase_core.records import Claim, EdgeMatrix
from crase_core.text import content_terms

ClaimPair = tuple[Sequence[Claim], Sequence[Claim]]


class EntailmentScorer(Protocol):
    """Scores many citation edges; one :class:`EdgeMatrix` per (citing, cited) claim-list pair."""

    identity: str

    def score_many(self, pairs: Sequence[ClaimPair]) -> list[EdgeMatrix]: ...


def validate_matrix(matrix: object, n_u: int, n_v: int) -> list[list[float]]:
    """Return ``matrix`` as an n_u × n_v list of floats in [0, 1], or raise ValueError saying why."""
    if not isinstance(matrix, list | tuple | np.ndarray) or len(matrix) != n_u:
        raise ValueError(f"expected {n_u} rows, got {len(matrix) if isinstance(matrix, list | tuple) else type(matrix).__name__}")
    out: list[list[float]] = []
    for i, row in enumerate(matrix):
        if not isinstance(row, list | tuple | np.ndarray) or len(row) != n_v:
            raise ValueError(f"row {i + 1}: expected {n_v} values")
        vals = []
        for x in row:
            if isinstance(x, bool) or not isinstance(x, int | float | np.floating | np.integer):
                raise ValueError(f"row {i + 1}: {x!r} is not a number")
            fx = float(x)
            if not math.isfinite(fx) or fx < 0.0 or fx > 1.0:
                raise ValueError(f"row {i + 1}: {fx} is outside [0, 1]")
            vals.append(fx)
        out.append(vals)
    return out


#: the word-overlap scorer's F1-maximising threshold for "supported" on SciFact's claim–abstract pairs
#: (:func:`~crase_core.evaluation.scifact.calibrate`; benchmarks/eval_scifact.py). A measurement of the scorer: runs
#: read their edges at θ_lexical (crase_core.ranking.pruning), tuned on the dev sets.
WORD_OVERLAP_SUPPORT_THETA = 0.32
#: what the offline scorer's numbers are called wherever they are shown (never "entailment").
WORD_OVERLAP_NAME = "word-overlap support"


class LexicalSupportScorer:
    """Word-overlap support: the IDF-weighted share of the citing claim's terms found in the cited claim.

    Offline, deterministic, no model. See the module docstring for the formula and for what it cannot
    do. ``r0`` (with ``k``) maps the share through the logistic ``1 / (1 + exp(−k (r − r0)))`` instead
    (identity ``lexical-support/v1``, the scale of earlier measurements); by default M_ij is the share
    itself (``word-overlap/v2``).
    """

    def __init__(self, idf: Callable[[str], float], r0: float | None = None, k: float = 30.0):
        self._idf = idf
        self.k = k
        self.r0 = r0
        self.identity = "word-overlap/v2" if r0 is None else f"lexical-support/v1(r0={r0:g},k={k:g})"
        self._terms_cache: dict[str, tuple[tuple[str, ...], tuple[float, ...]]] = {}

    def _terms(self, text: str) -> tuple[tuple[str, ...], tuple[float, ...]]:
        """The claim's distinct content terms (sorted) and their IDF weights, computed once per text."""
        t = self._terms_cache.get(text)
        if t is None:
            terms = tuple(sorted(set(content_terms(text))))
            t = (terms, tuple(self._idf(term) for term in terms))
            if len(self._terms_cache) > 200_000:
                self._terms_cache.clear()
            self._terms_cache[text] = t
        return t

    def calibrate(self, r: np.ndarray) -> np.ndarray:
        """M_ij from the shares r_ij: r itself, or its logistic map when the scorer has an ``r0``."""
        if self.r0 is None:
            return r
        return 1.0 / (1.0 + np.exp(-self.k * (r - self.r0)))

    def raw_recall(self, pairs: Sequence[ClaimPair]) -> list[np.ndarray]:
        """r_ij for every pair (the shares, before any logistic map)."""
        texts: dict[str, int] = {}
        for citing, cited in pairs:
            for c in (*citing, *cited):
                texts.setdefault(c.text, len(texts))
        vocab: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        wts: list[float] = []
        for text, r in texts.items():
            terms, weights = self._terms(text)
            rows.extend([r] * len(terms))
            cols.extend([vocab.setdefault(t, len(vocab)) for t in terms])
            wts.extend(weights)
        shape = (len(texts), max(1, len(vocab)))
        import scipy.sparse as sp  # scoring uncached edges only: a cached run never loads scipy

        weighted = sp.csr_matrix((np.array(wts, dtype=np.float64), (rows, cols)), shape=shape)
        binary = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=shape)
        mass = np.asarray(weighted.sum(axis=1)).ravel()

        # group pairs by citing claim list so each citing paper is one sparse product
        groups: dict[tuple[int, ...], list[int]] = {}
        for p, (citing, _) in enumerate(pairs):
            groups.setdefault(tuple(texts[c.text] for c in citing), []).append(p)
        out: list[np.ndarray] = [np.zeros((0, 0))] * len(pairs)
        for u_rows, members in groups.items():
            v_rows: list[int] = []
            bounds = [0]
            for p in members:
                v_rows.extend(texts[c.text] for c in pairs[p][1])
                bounds.append(len(v_rows))
            u_idx = np.array(u_rows, dtype=np.int64)
            shared = (weighted[u_idx] @ binary[np.array(v_rows, dtype=np.int64)].T).toarray() if v_rows else np.zeros((len(u_rows), 0))
            denom = mass[u_idx][:, None]
            recall = np.divide(shared, denom, out=np.zeros_like(shared), where=denom > 0)
            for k, p in enumerate(members):
                out[p] = recall[:, bounds[k] : bounds[k + 1]]
        return out

    def score_many(self, pairs: Sequence[ClaimPair]) -> list[EdgeMatrix]:
        results = []
        for (citing, cited), r in zip(pairs, self.raw_recall(pairs), strict=True):
            if not citing or not cited:
                results.append(EdgeMatrix([], self.identity, error="a paper of this edge has no claims"))
                continue
            m = np.round(self.calibrate(r), 4)
            results.append(EdgeMatrix(m.tolist(), self.identity))
        return results
