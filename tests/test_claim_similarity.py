"""The claim-similarity scorer (crase_core/evidence/similarity.py): M_ij = max(0, cos) of claim vectors."""

from __future__ import annotations

import numpy as np

from crase_core.evidence.similarity import CLAIM_SIMILARITY_THETA, ClaimSimilarityScorer
from crase_core.records import Claim


class TableEncoder:
    """Vectors from a table (unit rows), counting the texts it was asked for."""

    model_id = "table"

    def __init__(self, table: dict[str, list[float]]):
        self.table = {k: np.asarray(v, dtype=np.float32) / np.linalg.norm(v) for k, v in table.items()}
        self.asked: list[str] = []

    def encode(self, texts):
        self.asked += list(texts)
        return np.stack([self.table[t] for t in texts])


def claims(*texts: str) -> list[Claim]:
    return [Claim(f"c{i + 1}", "EMPIRICAL", t, t) for i, t in enumerate(texts)]


def test_matrix_is_the_clipped_cosine_of_claim_vectors():
    enc = TableEncoder({"a": [1, 0], "b": [0, 1], "c": [1, 1], "d": [-1, 0]})
    scorer = ClaimSimilarityScorer(enc)
    (m,) = scorer.score_many([(claims("a", "b"), claims("c", "d"))])
    assert m.error is None and m.scorer == "claim-similarity/v1(table)"
    # cos(a, c) = cos(b, c) = 1/√2 ≈ 0.7071; cos(a, d) = −1 → 0; cos(b, d) = 0
    assert m.matrix == [[0.7071, 0.0], [0.7071, 0.0]]


def test_each_distinct_claim_is_embedded_once():
    enc = TableEncoder({"a": [1, 0], "b": [0, 1]})
    scorer = ClaimSimilarityScorer(enc)
    scorer.score_many([(claims("a"), claims("b")), (claims("b"), claims("a", "b"))])
    scorer.score_many([(claims("a"), claims("a"))])
    assert sorted(enc.asked) == ["a", "b"]


def test_an_edge_without_claims_is_an_error_not_a_zero_row():
    scorer = ClaimSimilarityScorer(TableEncoder({"a": [1, 0]}))
    (m,) = scorer.score_many([([], claims("a"))])
    assert m.error and m.matrix == []


def test_with_the_real_model_a_paraphrase_is_supported_and_an_unrelated_claim_is_not():
    from crase_core.encoder import load_encoder

    scorer = ClaimSimilarityScorer(load_encoder())
    citing = claims("The open string tachyon condenses and the unstable D-brane decays.")
    cited = claims("Tachyon condensation describes the decay of unstable D-branes in string theory.",
                   "We measure the glueball spectrum on anisotropic lattices.")
    (m,) = scorer.score_many([(citing, cited)])
    assert m.matrix[0][0] >= CLAIM_SIMILARITY_THETA > m.matrix[0][1]
