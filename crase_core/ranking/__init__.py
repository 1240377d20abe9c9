"""Ranking a pruned graph: the recency-aware walks (PPR, SALSA), CEP, trails, edge affinity, score parts."""
