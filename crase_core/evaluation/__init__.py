"""Benchmark evaluation: metrics, benchmark files, baselines, the harness, reports.

``crase eval`` (see :mod:`.cli`) is the front door; :func:`.harness.run_eval`
is the library entry point.
"""

from crase_core.evaluation.benchmark import BenchQuery, leakage_filter, load_benchmark, query_filter
from crase_core.evaluation.metrics import KS, average_precision, evaluate_rankings, recall_hits

__all__ = ["KS", "BenchQuery", "average_precision", "evaluate_rankings", "leakage_filter", "load_benchmark",
           "query_filter", "recall_hits"]
