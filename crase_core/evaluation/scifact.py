"""Entailment-scorer evaluation on SciFact claim–abstract pairs.

Each pair (claim c, cited abstract with sentences s_1…s_n, label) becomes one
edge for the scorer: the citing side is the claim alone, the cited side is
one claim per abstract sentence (or the rationale sentences only, with
``evidence_only=True``). The pair's support score is max_j M[0][j] — exactly
the quantity compared with θ in paper Eq. 3. Positive class: SUPPORT;
negative: CONTRADICT and NOT-ENOUGH-INFO. Works for any :class:`EntailmentScorer`.
"""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crase_core.errors import InputError
from crase_core.evidence.entailment import EntailmentScorer, LexicalSupportScorer
from crase_core.records import Claim
from crase_core.resources import scifact_pairs_file
from crase_core.text import content_terms

DEFAULT_PAIRS = scifact_pairs_file()
THRESHOLDS: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(1, 20))
#: the grid the best-F1 threshold is read from (the calibration of :data:`~crase_core.evidence.entailment.WORD_OVERLAP_SUPPORT_THETA`)
FINE_THRESHOLDS: tuple[float, ...] = tuple(round(0.01 * i, 2) for i in range(1, 100))


@dataclass(frozen=True)
class ClaimPair:
    claim_id: int
    claim: str
    doc_id: int
    label: str  # SUPPORT | CONTRADICT | NEI
    sentences: tuple[str, ...]
    evidence: tuple[int, ...]


def load_pairs(path: str | Path | None = None, limit: int | None = None) -> list[ClaimPair]:
    p = Path(path) if path else DEFAULT_PAIRS
    if not p.is_file():
        raise InputError(f"SciFact pairs not found: {p}")
    opener = gzip.open if p.suffix == ".gz" else open
    out: list[ClaimPair] = []
    with opener(p, "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            out.append(ClaimPair(int(r["claim_id"]), r["claim"], int(r["doc_id"]), r["label"],
                                 tuple(r["sentences"]), tuple(r.get("evidence", ()))))
            if limit is not None and len(out) >= limit:
                break
    return out


def domain_idf(pairs: Sequence[ClaimPair]) -> Callable[[str], float]:
    """BM25-style IDF over the pairs' distinct abstracts (the lexical scorer's domain statistics)."""
    docs: dict[int, set[str]] = {}
    for p in pairs:
        if p.doc_id not in docs:
            docs[p.doc_id] = set(content_terms(" ".join(p.sentences)))
    df: Counter[str] = Counter()
    for terms in docs.values():
        df.update(terms)
    n = len(docs)

    def idf(term: str) -> float:
        d = df.get(term, 1)
        return math.log(1.0 + (n - d + 0.5) / (d + 0.5))

    return idf


def support_scores(scorer: EntailmentScorer, pairs: Sequence[ClaimPair], evidence_only: bool = False,
                   batch: int = 64) -> list[float | None]:
    """max_j M[0][j] per pair (None when the scorer failed on that pair)."""
    edges = []
    for p in pairs:
        sents = [p.sentences[i] for i in p.evidence if i < len(p.sentences)] if evidence_only and p.evidence else list(p.sentences)
        citing = [Claim("c1", "EMPIRICAL", p.claim, p.claim)]
        cited = [Claim(f"s{i + 1}", "EMPIRICAL", s, s) for i, s in enumerate(sents)]
        edges.append((citing, cited))
    scores: list[float | None] = []
    for start in range(0, len(edges), batch):
        for em in scorer.score_many(edges[start : start + batch]):
            scores.append(None if em.error or not em.matrix or not em.matrix[0] else max(em.matrix[0]))
    return scores


def classification_metrics(scores: Sequence[float | None], labels: Sequence[str], theta: float) -> dict[str, float]:
    """Precision, recall, F1 of "supported" (score ≥ θ) against label == SUPPORT; failures count as 0."""
    tp = fp = fn = 0
    for s, y in zip(scores, labels, strict=True):
        pred = s is not None and s >= theta
        pos = y == "SUPPORT"
        tp += pred and pos
        fp += pred and not pos
        fn += (not pred) and pos
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"theta": theta, "precision": precision, "recall": recall, "f1": f1, "tp": tp, "fp": fp, "fn": fn}


def best_threshold(scores: Sequence[float | None], labels: Sequence[str],
                   thresholds: Sequence[float] = FINE_THRESHOLDS) -> dict[str, float]:
    """The metrics at the threshold of ``thresholds`` with the highest F1 (the lowest such threshold on a tie)."""
    return max((classification_metrics(scores, labels, t) for t in thresholds), key=lambda r: (r["f1"], -r["theta"]))


def calibrate(scorer: EntailmentScorer, pairs: Sequence[ClaimPair]) -> float:
    """A scorer's calibrated threshold for "supported": the θ of :data:`FINE_THRESHOLDS` that maximises the F1 of
    max_j M[0][j] ≥ θ against SUPPORT (vs CONTRADICT and NOT-ENOUGH-INFO) on claim–full-abstract ``pairs``."""
    return best_threshold(support_scores(scorer, pairs), [p.label for p in pairs])["theta"]


def evaluate_scorer(scorer: EntailmentScorer, pairs: Sequence[ClaimPair], theta: float = 0.75,
                    evidence_only: bool = False, thresholds: Sequence[float] = THRESHOLDS) -> dict[str, Any]:
    """Metrics at θ, the threshold sweep, the best-F1 threshold (:func:`best_threshold`) and mean score per label."""
    scores = support_scores(scorer, pairs, evidence_only)
    labels = [p.label for p in pairs]
    sweep = [classification_metrics(scores, labels, t) for t in thresholds]
    best = best_threshold(scores, labels)
    by_label: dict[str, list[float]] = {}
    for s, y in zip(scores, labels, strict=True):
        if s is not None:
            by_label.setdefault(y, []).append(s)
    return {
        "scorer": scorer.identity,
        "pairs": len(pairs),
        "labels": dict(Counter(labels)),
        "evidence_only": evidence_only,
        "failures": sum(s is None for s in scores),
        "at_theta": classification_metrics(scores, labels, theta),
        "best": best,
        "sweep": sweep,
        "mean_score": {k: sum(v) / len(v) for k, v in sorted(by_label.items())},
    }


def offline_scorer(pairs: Sequence[ClaimPair], **kw: float) -> LexicalSupportScorer:
    """The offline lexical scorer with IDF from the SciFact abstracts (its defaults unless ``kw``)."""
    return LexicalSupportScorer(domain_idf(pairs), **kw)
