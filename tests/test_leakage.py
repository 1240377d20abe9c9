"""Leakage-proof evaluation: a hidden paper never reaches a search hit, a text candidate, the query
restart, the ranking or the dense baseline; a query whose month is unknown is refused."""

from __future__ import annotations

import numpy as np
import pytest

from crase_core.backends import offline_backend
from crase_core.errors import InputError
from crase_core.evaluation.benchmark import BenchQuery, leakage_filter, query_filter
from crase_core.evaluation.dense import DenseIndex
from crase_core.evaluation.methods import PAPER_ALPHA, run_method
from crase_core.pipeline import Engine, run_query
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.ranking import restart_distribution

# the query comes from 9901001 (1999-01): it and every later paper are hidden
Q = BenchQuery("cit", "black hole microstates anti-de Sitter holography entropy counting",
               ("9801001", "9802001"), paper_id="9901001", year=1999)
HIDDEN = {"9901001", "9902001", "0001001", "0002001"}


def test_a_query_whose_paper_cannot_be_dated_is_refused(tiny_source):
    q = BenchQuery("x", "anything", ("9801001",), paper_id="math/0101001")  # not in the corpus, no date given
    with pytest.raises(InputError, match="date of paper 'math/0101001' is not known"):
        query_filter(q, tiny_source)
    # the benchmark line's own date or year dates a paper the corpus does not have
    dated = BenchQuery("x", "anything", ("9801001",), paper_id="math/0101001", extra={"date": "2001-01-15"})
    assert query_filter(dated, tiny_source).max_month == 200101
    by_year = BenchQuery("x", "anything", ("9801001",), paper_id="math/0101001", year=2001)
    assert query_filter(by_year, tiny_source).max_month == 200112
    # a caller that knows the month may pass it; without one the filter refuses
    f = leakage_filter(q, paper_month=200101)
    assert f is not None and f.max_month == 200101 and f.exclude == frozenset({"math/0101001"})
    with pytest.raises(InputError):
        leakage_filter(q, None)
    assert leakage_filter(BenchQuery("nl", "q", ("1",)), None) is None  # no paper: nothing to hide


def test_month_of_the_query_hides_it_and_everything_later(tiny_source):
    f = query_filter(Q, tiny_source)
    assert f is not None and f.max_month == 199901 and f.exclude == frozenset({"9901001"})


@pytest.mark.parametrize("fusion", ["none", "rrf"])
def test_no_hidden_id_anywhere_in_the_run(tiny_source, fusion):
    source = tiny_source.restricted(query_filter(Q, tiny_source))
    # every text hit may become a candidate; the query restart and the fusion read the full-query search
    settings = PipelineSettings(m=3, k=10, text_candidates=100, personalization="query", fusion=fusion)
    trace = run_query(Q.query, Engine(source, offline_backend()), settings)
    assert trace.query_hits, "the full-query search found visible papers"
    assert not HIDDEN & {h.paper_id for h in trace.query_hits}
    for sr in trace.subquery_results:
        assert not HIDDEN & {h.paper_id for h in sr.hits}
    assert not HIDDEN & {s.paper_id for s in trace.seeds}
    assert not HIDDEN & {n.paper.id for n in trace.nodes}  # text candidates included
    assert not HIDDEN & {x for e in trace.edges for x in (e.citing, e.cited)}
    kept = [n.paper.id for n in trace.nodes if n.kept]
    p = restart_distribution(trace.settings, trace.seeds, set(kept), kept, trace.query_hits)
    assert p and not HIDDEN & set(p)
    assert not HIDDEN & {r.paper_id for r in trace.results}
    # without the filter the same query does reach the hidden papers (the test can fail)
    open_trace = run_query(Q.query, Engine(tiny_source, offline_backend()), settings)
    assert HIDDEN & {h.paper_id for h in open_trace.query_hits}


class _FakeModel:
    """Embeds the query as the unit vector e0."""

    def encode(self, texts, **kw):
        return np.array([[1.0, 0.0, 0.0]] * len(texts), dtype=np.float32)


def test_the_dense_baseline_never_returns_a_hidden_paper(tiny_source):
    source = tiny_source.restricted(query_filter(Q, tiny_source))
    dense = DenseIndex.__new__(DenseIndex)
    dense.model = _FakeModel()
    dense.ids = [p.id for p in tiny_source.corpus.papers]
    # the hidden papers are the closest to the query; the visible ones are orthogonal or further away
    dense.emb = np.array([[1.0, 0.0, 0.0] if pid in HIDDEN else [0.5, 0.5, 0.0] for pid in dense.ids],
                         dtype=np.float32)
    ranked = dense.search(Q.query, 10, source)
    assert ranked and not HIDDEN & set(ranked)
    assert set(ranked) == {pid for pid in dense.ids if pid not in HIDDEN}
    assert set(dense.search(Q.query, 10, tiny_source)) >= HIDDEN  # unfiltered: they come first


def test_ppr_unpruned_runs_the_papers_alpha_and_says_so(tiny_source):
    source = tiny_source.restricted(query_filter(Q, tiny_source))
    out = run_method("ppr-unpruned", Q, Engine(source, offline_backend()), PipelineSettings(m=3, k=10, alpha=0.5))
    assert PAPER_ALPHA == 0.15
    assert out.stats["ppr_alpha"] == 0.15
    assert out.ranked and not HIDDEN & set(out.ranked)


def test_no_hidden_id_anywhere_with_semantic_feedback(tiny_source):
    """The default's semantic feedback (crase_core.retrieval.semantic) on a corpus with embeddings in which every hidden
    paper is the nearest to the top hit: none reaches the fused list, the restart, V or the answer."""
    from crase_core.retrieval.semantic import DocEmbeddings
    from crase_core.sources.local import LocalSource
    from crase_core.stages.seeding import search

    corpus, index = tiny_source.corpus, tiny_source.text_index
    settings = PipelineSettings(m=3, k=10, text_candidates=100, semantic_feedback_weight=0.8)
    top = search(tiny_source.restricted(query_filter(Q, tiny_source)), Q.query, settings)[0].paper.id
    m = np.random.default_rng(1).normal(size=(len(corpus), 8))
    for pid in HIDDEN:
        m[corpus.index[pid]] = m[corpus.index[top]]
    emb = DocEmbeddings((m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32))
    source = LocalSource(corpus, index, query_filter(Q, tiny_source), emb)
    trace = run_query(Q.query, Engine(source, offline_backend()), settings)
    assert trace.semantic_feedback and trace.query_hits
    assert not HIDDEN & {h.paper_id for h in trace.query_hits}
    assert not HIDDEN & {h.paper_id for h in trace.restart_hits or []}
    assert not HIDDEN & {n.paper.id for n in trace.nodes}
    assert not HIDDEN & {r.paper_id for r in trace.results}
    # without the filter the fused list does take them in (the test can fail)
    open_trace = run_query(Q.query, Engine(LocalSource(corpus, index, None, emb), offline_backend()), settings)
    assert HIDDEN & {h.paper_id for h in open_trace.query_hits}
