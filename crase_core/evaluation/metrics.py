"""Recall@K and MAP@K exactly as the Crase paper defines them (§ Metrics). Pure functions.

For a query q with relevant set Rel(q) and returned list P_q = (p_1, …, p_k):

* Recall@k = Σ_q |P_q[:k] ∩ Rel(q)| / Σ_q |Rel(q)|   (pooled over queries, not averaged);
* AP@k(q) = (1/|Rel(q)|) Σ_{i≤k} Prec@i(q) · y_i,  y_i = 1[p_i ∈ Rel(q)];
* MAP@k = mean over queries of AP@k(q).

Note the AP denominator is |Rel(q)|, not min(k, |Rel(q)|): a query with 40
relevant papers can reach at most AP@5 = 5/40. Queries with an empty relevant
set are rejected when the benchmark is loaded.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

KS: tuple[int, ...] = (5, 10, 20, 30, 40, 50)


def _dedupe(ranked: Sequence[str]) -> list[str]:
    """Keep the first occurrence of each id (a paper listed twice counts once)."""
    return list(dict.fromkeys(ranked))


def recall_hits(ranked: Sequence[str], relevant: Collection[str], k: int) -> int:
    """|P[:k] ∩ Rel|."""
    rel = set(relevant)
    return sum(1 for p in _dedupe(ranked)[:k] if p in rel)


def average_precision(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """AP@k = (1/|Rel|) Σ_{i≤k} Prec@i · y_i (0 when Rel is empty)."""
    rel = set(relevant)
    if not rel:
        return 0.0
    hits = 0
    total = 0.0
    for i, p in enumerate(_dedupe(ranked)[:k], 1):
        if p in rel:
            hits += 1
            total += hits / i
    return total / len(rel)


def per_query_metrics(ranked: Sequence[str], relevant: Collection[str], ks: Iterable[int] = KS) -> dict[str, float]:
    """hits@k and ap@k of one query (in the per-query rows of a run file)."""
    out: dict[str, float] = {}
    for k in ks:
        out[f"hits@{k}"] = recall_hits(ranked, relevant, k)
        out[f"ap@{k}"] = average_precision(ranked, relevant, k)
    return out


def evaluate_rankings(
    rankings: Mapping[str, Sequence[str]], relevant: Mapping[str, Collection[str]], ks: Iterable[int] = KS
) -> dict[str, float]:
    """``recall@k`` and ``map@k`` for every k over the queries of ``relevant`` (a missing ranking = empty list)."""
    ks = tuple(ks)
    qids = list(relevant)
    n_rel = sum(len(set(relevant[q])) for q in qids)
    out: dict[str, float] = {}
    for k in ks:
        hits = sum(recall_hits(rankings.get(q, ()), relevant[q], k) for q in qids)
        out[f"recall@{k}"] = hits / n_rel if n_rel else 0.0
    for k in ks:
        aps = [average_precision(rankings.get(q, ()), relevant[q], k) for q in qids]
        out[f"map@{k}"] = sum(aps) / len(aps) if aps else 0.0
    return out


def aggregate_rows(rows: Sequence[Mapping[str, float]], ks: Iterable[int] = KS) -> dict[str, float]:
    """Summary metrics from per-query rows holding ``n_relevant``, ``hits@k``, ``ap@k``."""
    ks = tuple(ks)
    n_rel = sum(int(r["n_relevant"]) for r in rows)
    out: dict[str, float] = {}
    for k in ks:
        out[f"recall@{k}"] = sum(r[f"hits@{k}"] for r in rows) / n_rel if n_rel else 0.0
    for k in ks:
        out[f"map@{k}"] = sum(r[f"ap@{k}"] for r in rows) / len(rows) if rows else 0.0
    return out
