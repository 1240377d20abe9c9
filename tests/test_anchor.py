"""Anchor-text retrieval (crase_core.retrieval.anchor): exact scores on a hand-built citer matrix, and no hidden
paper's text or id ever reaches the scores or the full-query search."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from crase_core.evaluation.benchmark import BenchQuery, query_filter
from crase_core.retrieval.anchor import anchor_scores
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.seeding import Seeding, search_full_query
from crase_core.store.adjacency import Adjacency
from crase_core.store.termstats import index_idf

# paper 0 is cited by 1 and 2, paper 1 by 2; "quark" is in paper 1, "gluon" in papers 1 and 2
_C = sp.csr_matrix(np.array([[0, 1, 1], [0, 0, 1], [0, 0, 0]], dtype=float))
_R = _C.T.tocsr()
CITERS, REFS = Adjacency(_C.indptr, _C.indices, 3), Adjacency(_R.indptr, _R.indices, 3)
POSTINGS = {"quark": np.array([1]), "gluon": np.array([1, 2])}
IDF = {"quark": 2.0, "gluon": 1.0}


def _scores(visible: list[bool]) -> np.ndarray:
    return anchor_scores("quarks and gluons", lambda t: POSTINGS.get(t, np.zeros(0, dtype=int)),
                         IDF.__getitem__, REFS, CITERS, np.array(visible), smoothing=1.0)


def test_anchor_scores_by_hand():
    # a(0) = 2·1/(2+1) + 1·2/(2+1) = 4/3; a(1) = 2·0/(1+1) + 1·1/(1+1) = 1/2; nobody cites paper 2
    assert _scores([True, True, True]).tolist() == pytest.approx([4 / 3, 0.5, 0.0])


def test_a_hidden_citer_does_not_count_and_a_hidden_paper_scores_zero():
    # paper 2 hidden: a(0) = 2·1/(1+1) + 1·1/(1+1) = 3/2; paper 1's only citer is hidden: 0
    assert _scores([True, True, False]).tolist() == pytest.approx([1.5, 0.0, 0.0])
    # paper 1 hidden: it scores 0, and paper 0 keeps one citer (2, "gluon" only): a(0) = 1·1/(1+1) = 1/2
    assert _scores([True, False, True]).tolist() == pytest.approx([0.5, 0.0, 0.0])


def test_a_term_most_papers_hold_counts_the_same_citers():
    """A term held by most visible papers is counted from the papers that do not hold it (in-degree less
    theirs): the same scores as counting its holders, with hidden papers on either side."""
    rng = np.random.default_rng(4)
    n = 300
    cites = sp.random(n, n, density=0.05, random_state=5, format="csr")  # row v: the papers citing v
    cites.data[:] = 1.0
    refs = cites.T.tocsr()
    citers, refs_adj = Adjacency(cites.indptr, cites.indices, n), Adjacency(refs.indptr, refs.indices, n)
    common, rare = np.sort(rng.choice(n, 240, replace=False)), np.sort(rng.choice(n, 20, replace=False))
    postings = {"common": common, "rare": rare}
    for visible in (np.ones(n, dtype=bool), rng.random(n) < 0.8):
        got = anchor_scores("common rare", postings.__getitem__, {"common": 0.3, "rare": 2.0}.__getitem__,
                            refs_adj, citers, visible, smoothing=2.0)
        dense = cites.toarray() > 0  # dense[v, u]: u cites v
        expected = np.zeros(n)
        for term, idf in (("common", 0.3), ("rare", 2.0)):
            holds = np.zeros(n, dtype=bool)
            holds[postings[term]] = True
            expected += idf * (dense & (holds & visible)[None, :]).sum(axis=1) / ((dense & visible[None, :]).sum(axis=1) + 2.0)
        assert np.allclose(got, np.where(visible, expected, 0.0), rtol=1e-12, atol=0)


# the query comes from 9901001 (1999-01): it and every later paper are hidden (as in test_leakage.py)
Q = BenchQuery("cit", "black hole microstates anti-de Sitter holography entropy counting",
               ("9801001", "9802001"), paper_id="9901001", year=1999)
HIDDEN = {"9901001", "9902001", "0001001", "0002001"}


def test_words_only_hidden_papers_hold_score_nothing(tiny_source):
    # "entanglement", "corrections": only in 0001001; "derive": only in 9901001 and 0001001 (both hidden)
    query = "entanglement corrections derive"
    visible = tiny_source.restricted(query_filter(Q, tiny_source))
    index, corpus = tiny_source.text_index, tiny_source.corpus
    hidden = anchor_scores(query, index.postings_of, index_idf(index), corpus.refs, corpus.cites, visible.visible)
    assert not hidden.any()
    unfiltered = anchor_scores(query, index.postings_of, index_idf(index), corpus.refs, corpus.cites, tiny_source.visible)
    assert unfiltered[corpus.index["9802001"]] > 0  # cited by 9901001 and 0001001: the test can fail


def test_no_hidden_paper_reaches_the_full_query_search_with_anchor_text(tiny_source):
    settings = PipelineSettings(anchor_weight=0.5)
    visible = tiny_source.restricted(query_filter(Q, tiny_source))
    seeding = search_full_query(Q.query, Seeding([], []), visible, settings)
    assert seeding.query_hits and not HIDDEN & {h.paper_id for h in seeding.query_hits}
    assert HIDDEN & {h.paper_id for h in search_full_query(Q.query, Seeding([], []), tiny_source, settings).query_hits}


def test_columns_of_counts_the_transposes_product():
    """The citer counts the scores read: the columns of the given rows of refs, once per row; their bincount is
    the citer matrix times the rows' 0/1 vector."""
    assert REFS.columns_of(np.array([1, 2])).tolist() == [0, 0, 1]  # paper 1 cites 0; paper 2 cites 0 and 1
    assert REFS.columns_of(np.array([0])).tolist() == []  # paper 0 cites nobody
    for rows in ([1], [2], [1, 2], [0, 1, 2]):
        x = np.zeros(3)
        x[rows] = 1.0
        assert np.bincount(REFS.columns_of(np.array(rows)), minlength=3).tolist() == (CITERS @ x).tolist()
