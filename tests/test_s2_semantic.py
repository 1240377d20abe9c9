"""Semantic feedback through the Semantic Scholar source: the API's SPECTER2 vectors (``embedding.specter_v2``,
the documented ``{"model", "vector"}`` object) re-order the fused search list; against the fake API on 127.0.0.1."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "s2"))
from fake_api import FakeS2, Fault, specter_like  # noqa: E402

from crase_core.backends import offline_backend  # noqa: E402
from crase_core.paper_source import ScoredPaper  # noqa: E402
from crase_core.pipeline import Engine, run_query  # noqa: E402
from crase_core.records import Paper  # noqa: E402
from crase_core.retrieval.semantic import rerank_fuse  # noqa: E402
from crase_core.settings.pipeline import PipelineSettings  # noqa: E402
from crase_core.sources.s2_http import S2Client, S2Settings  # noqa: E402
from crase_core.sources.semantic_scholar import SemanticScholarSource, specter_vector  # noqa: E402

QUERY = "transformer attention mechanism"
SETTINGS = PipelineSettings(m=4, L_offline=2, search_limit=20, k=20)


def source_for(fake: FakeS2, tmp_path: Path) -> SemanticScholarSource:
    settings = S2Settings(base_url=fake.base_url, rate=0, page_size=10, max_neighbor_pages=2, max_retries=1,
                          backoff_base=0.0, cache_dir=str(tmp_path / "s2"))
    return SemanticScholarSource(S2Client(settings, api_key=""))


def _p(pid: str) -> Paper:
    return Paper(id=pid, title=pid, abstract="", year=2020)


def test_rerank_fuse_by_hand():
    """s' = s₁((1 − w)s/s₁ + w·mm(cos with the top hit)); C = the list itself (semantic module docstring)."""
    hits = [ScoredPaper(_p("A"), 1.0), ScoredPaper(_p("B"), 0.5), ScoredPaper(_p("C"), 0.25)]
    vec = {"A": np.array([1.0, 0.0]), "B": np.array([0.0, 1.0]), "C": np.array([0.8, 0.6])}
    # cos with A: 1, 0, 0.8 (min-max: the same); fused at w 0.5: A 1.0, B 0.25 + 0 = 0.25, C 0.125 + 0.4 = 0.525
    out = rerank_fuse(hits, vec, 0.5)
    assert [(r.paper.id, round(r.score, 6)) for r in out] == [("A", 1.0), ("C", 0.525), ("B", 0.25)]
    # C without a vector gets the lowest semantic score: 0.125
    out = rerank_fuse(hits, {k: v for k, v in vec.items() if k != "C"}, 0.5)
    assert [(r.paper.id, round(r.score, 6)) for r in out] == [("A", 1.0), ("B", 0.25), ("C", 0.125)]
    assert rerank_fuse(hits, {"B": vec["B"]}, 0.5) == hits  # the top hit has none: unchanged
    assert rerank_fuse(hits, vec, 0.0) == hits


@pytest.mark.parametrize("value", [None, {"model": "specter_v2", "vector": [float("nan")] * 768},
                                   {"model": "specter_v2", "vector": [1.0] * 767}, {"vector": ["a"] * 768},
                                   {"vector": [0.0] * 768}, {"vector": "not a list"}, "x", [1, 2]])
def test_an_unusable_vector_is_none(value):
    assert specter_vector({"paperId": "p", "embedding": value}) is None


def test_specter2_vectors_reorder_the_question_search(fake, tmp_path):
    t = run_query(QUERY, Engine(source_for(fake, tmp_path), offline_backend()), SETTINGS)
    calls = [r for r in fake.requests if r.params.get("fields") == "embedding.specter_v2"]
    assert len(calls) == 1 and t.semantic_feedback
    hits = fake.search_ranking(QUERY)[:20]
    assert calls[0].body == {"ids": hits}  # the question's search hits, once
    with_vector = [h for h in hits if h not in fake.no_embedding]
    assert t.semantic_note == (f"semantic feedback on: Semantic Scholar's SPECTER2 embeddings (embedding.specter_v2) of "
                               f"{len(with_vector)} of the {len(hits)} search hits re-order the fused search list (the "
                               "API cannot be searched by a vector, so no paper joins it; the question itself is not "
                               "embedded)")
    # the fused list is the API's ranking (score 1/rank) fused with the cosines of the fixture's vectors
    papers = {h: _p(h) for h in hits}
    scored = [ScoredPaper(papers[h], 1.0 / (i + 1)) for i, h in enumerate(hits)]
    vectors = {}
    for h in with_vector:
        p = fake.papers[h]
        v = np.array(specter_like(f"{p['title']} {p.get('abstract') or ''}"))
        vectors[h] = v / np.linalg.norm(v)
    want = [r.paper.id for r in rerank_fuse(scored, vectors, SETTINGS.semantic_feedback_weight)]
    assert [h.paper_id for h in t.query_hits] == want != hits
    off = run_query(QUERY, Engine(source_for(fake, tmp_path), offline_backend()),
                    SETTINGS.replace(semantic_feedback_weight=0.0))
    assert [h.paper_id for h in off.query_hits] == hits and not off.semantic_feedback
    assert off.semantic_note.startswith("semantic feedback off (w_s = 0)")
    assert len([r for r in fake.requests if r.params.get("fields") == "embedding.specter_v2"]) == 1


def test_an_embeddings_request_that_fails_leaves_the_run_without_feedback(fake, tmp_path):
    fake.faults.extend(Fault("/paper/batch", status=500) for _ in range(2))  # the first and only retry
    t = run_query(QUERY, Engine(source_for(fake, tmp_path), offline_backend()), SETTINGS)
    assert not t.semantic_feedback and t.results
    assert t.semantic_note.startswith("semantic feedback off: Semantic Scholar did not answer the request for "
                                      "SPECTER2 embeddings")
    assert [h.paper_id for h in t.query_hits] == fake.search_ranking(QUERY)[:20]


def test_garbage_vectors_count_as_none(fake, tmp_path):
    hits = fake.search_ranking(QUERY)[:20]
    for pid in hits:
        fake.embedding_overrides[pid] = {"model": "specter_v2", "vector": [float("nan")] * 768}
    t = run_query(QUERY, Engine(source_for(fake, tmp_path), offline_backend()), SETTINGS)
    assert not t.semantic_feedback
    assert t.semantic_note == f"semantic feedback off: Semantic Scholar has no SPECTER2 embedding for any of the {len(hits)} search hits"
    assert [h.paper_id for h in t.query_hits] == hits
