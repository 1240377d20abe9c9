"""Pruning and ranking: the pruning rules (each scorer's θ and τ, Δ, weights, fates), the recency-aware walks (PPR,
SALSA), CEP, trails, the fusion with the text search, score parts."""
