"""Semantic feedback (crase_core.retrieval.semantic): hand-checked fusion, the shipped embeddings of the embedded corpus,
and the search stage using them."""

from __future__ import annotations

import numpy as np

from crase_core.paper_source import ScoredPaper
from crase_core.records import Paper
from crase_core.retrieval.semantic import DocEmbeddings, feedback_fuse
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.seeding import search

PAPERS = [Paper("A", "a"), Paper("B", "b"), Paper("C", "c"), Paper("D", "d")]
ROW = {p.id: i for i, p in enumerate(PAPERS)}
# A = (1, 0), B = (0, 1), C = (0.6, 0.8), D = (0.8, 0.6): cos to A is 1, 0, 0.6, 0.8
EMB = DocEmbeddings(np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [0.8, 0.6]], dtype=np.float32))
HITS = [ScoredPaper(PAPERS[0], 10.0), ScoredPaper(PAPERS[1], 6.0)]


def _fused(visible: list[bool], weight: float = 0.5) -> list[tuple[str, float]]:
    out = feedback_fuse(HITS, EMB, ROW, PAPERS, np.array(visible), weight)
    return [(r.paper.id, round(r.score, 6)) for r in out]


def test_the_top_hits_nearest_papers_join_and_the_list_keeps_its_length_and_scale():
    # C = {A, B} ∪ the 2 nearest to A {A, D}; search part s/10 = 1, 0.6, 0; cosine part mm(1, 0, 0.8)
    # fused = 10·(0.5·search + 0.5·cosine): A 10, B 3, D 4 → the best 2
    assert _fused([True] * 4) == [("A", 10.0), ("D", 4.0)]
    # D hidden: the nearest visible are A and C (0.6), w 0.4: A 10, B 10·(0.6·0.6 + 0) = 3.6, C 10·0.4·0.6 = 2.4
    assert _fused([True, True, True, False], weight=0.4) == [("A", 10.0), ("B", 3.6)]
    assert _fused([True, True, True, False], weight=0.8) == [("A", 10.0), ("C", 4.8)]  # C: 10·0.8·0.6; B: 1.2
    assert _fused([True] * 4, weight=0.0) == [("A", 10.0), ("B", 6.0)]  # off: the search's own list
    assert feedback_fuse([], EMB, ROW, PAPERS, np.ones(4, bool), 0.5) == []


def test_a_hidden_paper_never_joins_even_when_it_is_the_nearest(tiny_source):
    from crase_core.evaluation.benchmark import BenchQuery, query_filter
    from crase_core.sources.local import LocalSource

    q = BenchQuery("cit", "black hole microstates anti-de Sitter holography entropy counting",
                   ("9801001",), paper_id="9901001", year=1999)
    hidden = {"9901001", "9902001", "0001001", "0002001"}
    corpus = tiny_source.corpus
    settings = PipelineSettings(semantic_feedback_weight=0.8, proximity_weight=0.0, proximity_window_weight=0.0)
    plain = LocalSource(corpus, tiny_source.text_index, query_filter(q, tiny_source))
    top = search(plain, q.query, settings)[0].paper.id
    rng = np.random.default_rng(0)
    m = rng.normal(size=(len(corpus), 16))
    for pid in hidden:  # every hidden paper sits exactly on the top hit
        m[corpus.index[pid]] = m[corpus.index[top]]
    emb = DocEmbeddings((m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32))
    fused = search(LocalSource(corpus, tiny_source.text_index, query_filter(q, tiny_source), emb), q.query, settings)
    assert fused and fused[0].paper.id == top and not hidden & {r.paper.id for r in fused}
    # the same fusion with everything visible does bring them in (the test can fail)
    unfiltered = search(plain, q.query, settings)
    everything = feedback_fuse(unfiltered, emb, corpus.index, corpus.papers, np.ones(len(corpus), bool), 0.8)
    assert hidden & {r.paper.id for r in everything}


def test_the_embedded_corpus_ships_its_embeddings(hepth_source):
    emb = hepth_source.embeddings
    assert emb is not None, "assets/embeddings/ holds the embedded corpus's MiniLM embeddings"
    assert emb.matrix.shape == (len(hepth_source.corpus), 384) and emb.matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(emb.matrix[:100], axis=1), 1.0, atol=1e-3)
    # a restricted copy (the leakage filter) shares them
    assert hepth_source.restricted(hepth_source.filter).embeddings is emb


def test_a_run_records_whether_semantic_feedback_ran(tiny_source, hepth_source):
    from crase_core.stages.seeding import semantic_feedback_ran

    on = PipelineSettings(semantic_feedback_weight=0.4)
    assert tiny_source.embeddings is None and not semantic_feedback_ran(tiny_source, on)
    assert semantic_feedback_ran(hepth_source, on)
    assert not semantic_feedback_ran(hepth_source, on.replace(semantic_feedback_weight=0.0))
    # without embeddings the search ranks by its words alone: exactly the list without the feedback
    off = on.replace(semantic_feedback_weight=0.0)
    q = "black hole entropy"
    assert [(r.paper.id, r.score) for r in search(tiny_source, q, on.replace(semantic_feedback_scope="all"))] == \
        [(r.paper.id, r.score) for r in search(tiny_source, q, off)]


def test_the_default_fuses_only_the_list_the_final_ranking_reads(hepth_source):
    """Scope "fusion": the seeds and the walk's restart come from the search's own list, the text candidates and
    the fusion from the fused one; the trace says the feedback ran."""
    from crase_core.backends import offline_backend
    from crase_core.pipeline import Engine, run_query

    q = "noncommutative solitons and tachyon condensation"
    engine = Engine(hepth_source, offline_backend(), None)
    on = run_query(q, engine, PipelineSettings())
    off = run_query(q, engine, PipelineSettings(semantic_feedback_weight=0.0))
    assert on.semantic_feedback and not off.semantic_feedback
    assert [s.paper_id for s in on.seeds] == [s.paper_id for s in off.seeds]
    assert on.restart_hits is not None and [h.paper_id for h in on.restart_hits] == \
        [h.paper_id for h in (off.restart_hits or off.query_hits)]
    assert [h.paper_id for h in on.query_hits] != [h.paper_id for h in off.query_hits]
    assert on.query_hits[0].paper_id == off.query_hits[0].paper_id  # the top hit anchors the feedback


def test_opening_a_source_reads_no_embeddings_until_a_query_needs_them(monkeypatch, hepth_source):
    """Opening runs in the app's prefetch thread; the embeddings (an .npy whose header np.load parses with ast)
    are read at first use instead, once, and a restricted copy shares them."""
    from crase_core.retrieval import semantic
    from crase_core.sources import local

    calls = []
    real = semantic.read_embeddings_mapped
    monkeypatch.setattr(semantic, "read_embeddings_mapped", lambda *a, **k: calls.append(a) or real(*a, **k))
    semantic.find_file.cache_clear()
    source = local.LocalSource(hepth_source.corpus, hepth_source.text_index, shipped_embeddings=True)
    restricted = source.restricted(hepth_source.filter)
    assert calls == []
    assert source.embeddings is not None and len(calls) == 1
    assert source.embeddings is restricted.embeddings and len(calls) == 1  # the copy shares the file read once
    assert source.restricted(hepth_source.filter).embeddings is source.embeddings and len(calls) == 1
