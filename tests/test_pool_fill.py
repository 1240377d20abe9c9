"""Sparse citation graphs (issue 23): when the expansion yields fewer than k candidates the pool is filled — a
second citation hop, then full-query search hits — and the run says so; a full pool is never touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crase_core.audit.rerank import apply_verdicts
from crase_core.backends import offline_backend
from crase_core.pipeline import Engine, run_query
from crase_core.settings.pipeline import PipelineSettings
from crase_core.sources.local import LocalSource
from crase_core.stages import expansion

POOL_FILL_ON = True  # tests/conftest.py turns the fill off elsewhere

WORDS = ["lattice", "gauge", "string", "brane", "entropy", "horizon", "spinor", "anomaly", "moduli", "flux"]


def chain_corpus(folder: Path, n: int = 40) -> Path:
    """A sparse corpus: paper i cites paper i−1 only (a chain), every title shares the word "duality"."""
    folder.mkdir(parents=True, exist_ok=True)
    papers = [{"id": f"p{i:03d}", "title": f"duality and {WORDS[i % 10]} number {i}", "year": 1990 + i // 4,
               "abstract": f"We study duality with {WORDS[i % 10]} and {WORDS[(i + 3) % 10]}."} for i in range(n)]
    (folder / "papers.jsonl").write_text("".join(json.dumps(p) + "\n" for p in papers))
    (folder / "citations.tsv").write_text("".join(f"p{i:03d}\tp{i - 1:03d}\n" for i in range(1, n)))
    return folder


@pytest.fixture
def sparse(tmp_path, monkeypatch):
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    return LocalSource.open(chain_corpus(tmp_path / "chain"))


SETTINGS = PipelineSettings(k=20, m=2, query_seeds=1, text_candidates=2)


def _run(source, mode, monkeypatch, settings=SETTINGS):
    monkeypatch.setattr(expansion, "POOL_FILL", mode)
    return run_query("duality lattice gauge", Engine(source, offline_backend()), settings)


def test_a_sparse_pool_is_filled_to_k_and_the_run_says_so(sparse, monkeypatch):
    off = _run(sparse, "off", monkeypatch)
    assert len(off.results) < 20 and not any("sparse citation graph" in w for w in off.warnings)
    for mode in ("text", "hop+text"):
        t = _run(sparse, mode, monkeypatch)
        assert len(t.results) == 20
        note = next(w for w in t.warnings if w.startswith("sparse citation graph"))
        assert "papers to rank, fewer than k = 20" in note and "(20 to rank)" in note
    hop = _run(sparse, "hop", monkeypatch)
    base = {n.paper.id for n in off.nodes}
    added = {n.paper.id for n in hop.nodes} - base
    assert added and "papers two citation hops from the seeds" in next(w for w in hop.warnings if "sparse" in w)
    # every hop-2 paper cites or is cited by a hop-1 paper (a chain: ids next to the first ring)
    first_ring = {n.paper.id for n in off.nodes} - {s.paper_id for s in off.seeds}
    for pid in added:
        i = int(pid[1:])
        assert {f"p{i - 1:03d}", f"p{i + 1:03d}"} & first_ring


def test_a_full_pool_is_not_touched(sparse, monkeypatch):
    small_k = SETTINGS.replace(k=3)
    a, b = _run(sparse, "off", monkeypatch, small_k), _run(sparse, "hop+text", monkeypatch, small_k)
    assert [n.paper.id for n in a.nodes] == [n.paper.id for n in b.nodes]
    assert [r.paper_id for r in a.results] == [r.paper_id for r in b.results]
    assert not any("sparse" in w for w in b.warnings)


def test_the_fill_says_when_the_search_has_no_more(sparse, monkeypatch):
    t = _run(sparse, "hop+text", monkeypatch, SETTINGS.replace(k=500))
    note = next(w for w in t.warnings if w.startswith("sparse citation graph"))
    assert "the search found no more" in note and len(t.results) <= 40


def test_text_candidates_off_means_no_text_fill(sparse, monkeypatch):
    t = _run(sparse, "text", monkeypatch, SETTINGS.replace(text_candidates=0))
    assert not {n.paper.id for n in t.nodes} - {n.paper.id for n in _run(sparse, "off", monkeypatch,
                                                                           SETTINGS.replace(text_candidates=0)).nodes}


def test_a_corpus_without_citations_keeps_the_searchs_best_hits(tmp_path, monkeypatch):
    """No citation at all (SciFact-like: abstracts only): every seed is isolated. The fill must keep the seeds —
    the search's best hits — as text candidates, not prune them and add only the hits after them."""
    folder = chain_corpus(tmp_path / "nocites")
    (folder / "citations.tsv").write_text("")
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    source = LocalSource.open(folder)
    settings = SETTINGS.replace(k=10)
    t = _run(source, "text", monkeypatch, settings)
    ranked = [r.paper_id for r in t.results]
    search = [h.paper_id for h in t.query_hits[:10]]  # the run's own full-query search
    assert len(ranked) == 10 and set(ranked) == set(search)  # its top 10, not its hits 11 onwards
    seeds = {s.paper_id for s in t.seeds}
    assert seeds and seeds <= set(ranked)
    assert all(s.fate == "kept" and s.fate_reason.startswith("kept by its text match") for s in t.seeds)
    note = next(w for w in t.warnings if w.startswith("sparse citation graph"))
    assert f"({len(seeds)} of them already in the graph, without a citation there)" in note
    # re-ranking the run (no verdicts) keeps those seeds as text candidates: the same list, the same fates
    child = apply_verdicts(t, [])
    assert [(r.paper_id, r.score) for r in child.results] == [(r.paper_id, r.score) for r in t.results]
    assert [(s.fate, s.fate_reason) for s in child.seeds] == [(s.fate, s.fate_reason) for s in t.seeds]


def test_a_list_that_pruning_leaves_short_is_filled_from_the_search(sparse, monkeypatch):
    """Pruning after the fill removes papers whose every edge it pruned; the list is still filled to k from
    the full-query search (the next hits outside the graph, as text candidates without citations), and the run
    says so. Re-ranking the run (no verdicts) gives the same list."""
    strict = SETTINGS.replace(theta_lexical=0.99, tau_lexical=0.99)  # every word-overlap edge pruned
    t = _run(sparse, "text", monkeypatch, strict)
    assert not any(e.kept for e in t.edges)
    assert len(t.results) == 20
    note = next(w for w in t.warnings if w.startswith("pruning left"))
    assert "fewer than k = 20: added the next" in note and "(20 to rank)" in note
    touched = {x for e in t.edges for x in (e.citing, e.cited)}
    added = [n for n in t.nodes if n.role == "text" and n.paper.id not in touched]
    assert added and all(n.kept for n in added)
    search_order = [h.paper_id for h in t.query_hits]
    assert all(n.paper.id in search_order for n in added)
    child = apply_verdicts(t, [])
    assert [r.paper_id for r in child.results] == [r.paper_id for r in t.results]
    off = _run(sparse, "off", monkeypatch, strict)  # the fill off: no refill either
    assert not any(w.startswith("pruning left") for w in off.warnings) and len(off.results) < 20
