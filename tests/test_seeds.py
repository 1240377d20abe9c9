"""Seed construction: top t of both relevance and recency, smallest t that yields m."""

from __future__ import annotations

from crase_core.paper_source import ScoredPaper
from crase_core.records import Paper
from crase_core.retrieval.seeds import build_seed_set, rank_hits, select_seeds

MONTHS = {"p1": 199801, "p2": 200005, "p3": 199912, "p4": 200101, "p5": 199505, "p6": 200102}


def results(order=("p1", "p2", "p3", "p4", "p5", "p6")):
    return [ScoredPaper(Paper(i, i, month=MONTHS[i], year=MONTHS[i] // 100), 10.0 - n) for n, i in enumerate(order)]


def test_ranks():
    hits = rank_hits(results())
    assert [(h.paper_id, h.relevance_rank, h.recency_rank) for h in hits] == [
        ("p1", 1, 5), ("p2", 2, 3), ("p3", 3, 4), ("p4", 4, 2), ("p5", 5, 6), ("p6", 6, 1)]


def test_smallest_t_that_yields_m():
    hits = rank_hits(results())
    # t = 3 admits only p2; t = 4 admits p2, p3, p4 → for m = 2 the better-relevance two
    seeds, t = select_seeds(hits, 2)
    assert [h.paper_id for h in seeds] == ["p2", "p3"] and t == 4
    seeds, t = select_seeds(hits, 3)
    assert [h.paper_id for h in seeds] == ["p2", "p3", "p4"] and t == 4
    seeds, t = select_seeds(hits, 1)
    assert [h.paper_id for h in seeds] == ["p2"] and t == 3
    seeds, t = select_seeds(hits, 10)  # fewer hits than m: all of them
    assert len(seeds) == 6 and t == 6
    assert select_seeds([], 5) == ([], 0)


def test_union_over_subqueries_remembers_every_origin():
    seeds, records = build_seed_set(["q one", "q two"], [results(), results(("p6", "p2", "p1"))], 2)
    by_id = {s.paper_id: s for s in seeds}
    assert list(by_id) == ["p2", "p3", "p6"]
    assert [(o.subquery_index, o.relevance_rank, o.recency_rank) for o in by_id["p2"].origins] == [(0, 2, 3), (1, 2, 2)]
    assert records[1].seed_ids == ["p6", "p2"] and records[1].t == 2


def test_undated_papers_rank_last_by_recency_in_a_mixed_corpus(tmp_path, monkeypatch):
    """A user's corpus with dated and undated papers: an undated paper is the oldest for the recency rank of
    seed selection, not the newest (its stored month sorts after every date only for the leakage filter)."""
    import json

    from crase_core.retrieval.seeds import rank_hits
    from crase_core.sources.local import LocalSource

    folder = tmp_path / "mixed"
    folder.mkdir()
    rows = [{"id": "d1", "title": "gauge theory anomaly", "abstract": "anomaly of a gauge theory", "year": 2001},
            {"id": "u1", "title": "gauge theory anomaly review", "abstract": "anomaly gauge theory review"},
            {"id": "d2", "title": "anomaly inflow gauge theory", "abstract": "gauge anomaly inflow", "year": 1999}]
    (folder / "papers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "citations.tsv").write_text("")
    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    source = LocalSource.open(folder)
    undated = source.get(["u1"])["u1"]
    assert undated.year is None and undated.month is None
    hits = {h.paper_id: h.recency_rank for h in rank_hits(source.search("gauge theory anomaly", 10))}
    assert set(hits) == {"d1", "u1", "d2"}
    assert hits["d1"] == 1 and hits["d2"] == 2 and hits["u1"] == 3
