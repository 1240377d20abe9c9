"""Claim similarity: the on-device sentence model's judgement of how close two claims are in meaning.

:class:`ClaimSimilarityScorer` is an :class:`~crase_core.evidence.entailment.EntailmentScorer` like the
word-overlap one, and, like it, **not** an entailment model: for citing claim i and cited claim j,

    M_ij = max(0, cos(e(claim_i), e(claim_j)))

with e = all-MiniLM-L6-v2 (:mod:`crase_core.encoder`, unit vectors). It reads paraphrase and shared meaning
that word overlap misses ("decay of the unstable brane" ~ "tachyon condensation"), but it still cannot tell
support from contradiction: a claim and its negation are close. Its name says "similarity" wherever it is
shown. :data:`CLAIM_SIMILARITY_THETA` is its calibrated threshold for "supported" (the F1-maximising θ on
the bundled SciFact claim–abstract pairs, :func:`crase_core.evaluation.scifact.calibrate`).

Claim vectors are computed once per distinct claim text and kept for the process (a bounded map), so an
edge's matrix costs one small matrix product.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from crase_core.evidence.entailment import ClaimPair
from crase_core.records import EdgeMatrix

#: the similarity scorer's calibrated threshold for "supported" (SciFact, full abstracts; see the docstring)
CLAIM_SIMILARITY_THETA = 0.60
#: what its numbers are called wherever they are shown (never "entailment")
CLAIM_SIMILARITY_NAME = "claim similarity (MiniLM)"
#: distinct claim texts whose vectors a scorer keeps
MAX_KEPT = 400_000


class ClaimSimilarityScorer:
    """M_ij = max(0, cosine) of the claims' all-MiniLM-L6-v2 vectors (module docstring).

    ``encoder`` is anything with ``encode(texts) -> (n, d) unit rows`` and a ``model_id`` (the on-device
    :class:`~crase_core.encoder.Encoder`, or a small fake in tests)."""

    def __init__(self, encoder: Any):
        self._encoder = encoder
        self.identity = f"claim-similarity/v1({encoder.model_id})"
        self._vectors: dict[str, np.ndarray] = {}

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Unit rows for ``texts`` (computing only those not seen before)."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if todo:
            if len(self._vectors) + len(todo) > MAX_KEPT:
                self._vectors.clear()
            for t, v in zip(todo, self._encoder.encode(todo), strict=True):
                self._vectors[t] = np.asarray(v, dtype=np.float32)
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])

    def score_many(self, pairs: Sequence[ClaimPair]) -> list[EdgeMatrix]:
        self.vectors([c.text for citing, cited in pairs for c in (*citing, *cited)])  # one batch for all
        out: list[EdgeMatrix] = []
        for citing, cited in pairs:
            if not citing or not cited:
                out.append(EdgeMatrix([], self.identity, error="a paper of this edge has no claims"))
                continue
            u = self.vectors([c.text for c in citing])
            v = self.vectors([c.text for c in cited])
            m = np.clip((u @ v.T).astype(np.float64), 0.0, 1.0)
            out.append(EdgeMatrix(np.round(m, 4).tolist(), self.identity))
        return out
