"""The full pipeline through the Semantic Scholar source, against the fake API on 127.0.0.1."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "s2"))
from fake_api import FakeS2  # noqa: E402

from crase_core import trace as trace_io  # noqa: E402
from crase_core.backends import offline_backend  # noqa: E402
from crase_core.cache import ResultCache  # noqa: E402
from crase_core.pipeline import Engine, run_query  # noqa: E402
from crase_core.settings.pipeline import PipelineSettings  # noqa: E402
from crase_core.sources.s2_http import S2Client, S2Settings  # noqa: E402
from crase_core.sources.semantic_scholar import SemanticScholarSource  # noqa: E402

QUERY = "transformer attention mechanism"
SECRET = "s2-PIPELINE-KEY-51ab07"
PAGE, PAGES = 10, 2  # at most 20 citers per paper: the hub p01 (31 citers) is cut



def engine_for(fake: FakeS2, tmp_path: Path, key: str = "") -> Engine:
    settings = S2Settings(base_url=fake.base_url, rate=0, page_size=PAGE, max_neighbor_pages=PAGES,
                          cache_dir=str(tmp_path / "s2"))
    source = SemanticScholarSource(S2Client(settings, api_key=key))
    return Engine(source, offline_backend(), ResultCache(tmp_path / "results"))


def expected_graph(fake: FakeS2, seeds: list[str]) -> tuple[set[str], set[tuple[str, str]]]:
    """V and E computed straight from the fixture: the 1.5-hop graph with the page cap applied."""
    v = set(seeds)
    for s in seeds:
        v.update(c["cited"] for c in fake.refs(s))
        v.update([c["citing"] for c in fake.citers(s)][: PAGE * PAGES])
    return v, {e for e in fake.edge_set() if e[0] in v and e[1] in v}


def test_pipeline_runs_on_the_replayed_graph_and_reruns_for_free(fake, tmp_path):
    # the seeds are the two sub-queries' alone (no seeds from the question's own search): counted by hand below
    settings = PipelineSettings(m=4, L_offline=2, search_limit=20, k=20, query_seeds=0)
    engine = engine_for(fake, tmp_path)
    t = run_query(QUERY, engine, settings)

    # stage 1: exactly one search request per sub-query, ranked as the API ranked
    subqueries = t.plan.subqueries
    assert fake.count("/paper/search") == len(subqueries) == t.counters.search_calls
    for sq in t.subquery_results:
        assert [h.paper_id for h in sq.hits] == fake.search_ranking(sq.subquery)[:20]
        assert set(sq.seed_ids) <= {h.paper_id for h in sq.hits}
    seeds = [s.paper_id for s in t.seeds]
    assert "p01" in seeds  # the hub, whose citer list is cut by the page cap

    # stage 2: V and E are the replayed citations, nothing invented, nothing missed
    v, e = expected_graph(fake, seeds)
    assert {n.paper.id for n in t.nodes} == v
    assert {(x.citing, x.cited) for x in t.edges} == e
    with_context = 0
    for edge in t.edges:
        row = next(c for c in fake.citations if (c["citing"], c["cited"]) == (edge.citing, edge.cited))
        if edge.citing in seeds or edge.cited in seeds:
            assert edge.contexts == row["contexts"] and edge.intents == row["intents"]
            with_context += bool(row["contexts"])
        else:
            assert edge.contexts in ([], row["contexts"])
    assert with_context >= 1
    cut = [x for x in t.truncations if x.paper_id == "p01"]
    assert [(x.relation, x.total, x.kept) for x in cut] == [("citations", 31, 20)]
    assert cut[0].rule == "the first 2 page(s) of 10 in the API's own order (max_neighbor_pages × page_size)"
    assert "p05" in v  # no abstract at the API: claims from the title, flagged
    assert t.claims["p05"].title_only and not t.node("p05").paper.has_abstract

    # cost: every request of the run is counted; the edges needed one batch call, semantic feedback one more
    # (the question's search hits' SPECTER2 embeddings)
    assert t.counters.external_calls == len(fake.requests)
    assert t.source_stats["requests"] == len(fake.requests) and t.source_stats["truncated_lists"] >= 1
    assert fake.count("/paper/batch") == 2
    vectors = [r for r in fake.requests if r.path.endswith("/paper/batch") and r.params["fields"] == "embedding.specter_v2"]
    assert len(vectors) == 1 and t.semantic_feedback
    # by hand: 2 searches + 4 seeds × (references + citations) + 1 more page of p01's citers + 2 batches
    assert seeds == ["p04", "p09", "p01", "p08"] and t.counters.external_calls == 13
    assert t.counters.external_calls == len(subqueries) + fake.count("/references") + fake.count("/citations") + 2

    # a second run (a fresh client on the same caches, as a new process would be) makes no call
    before = len(fake.requests)
    again = run_query(QUERY, engine_for(fake, tmp_path), settings)
    assert again.counters.external_calls == 0 and len(fake.requests) == before
    assert [n.paper.id for n in again.nodes] == [n.paper.id for n in t.nodes]
    assert [(r.paper_id, round(r.score, 12)) for r in again.results] == [(r.paper_id, round(r.score, 12)) for r in t.results]


def test_neighbor_cap_keeps_the_most_cited_citers_of_the_hub(fake, tmp_path):
    t = run_query(QUERY, engine_for(fake, tmp_path), PipelineSettings(m=4, L_offline=2, search_limit=20, neighbor_cap=5))
    fetched = [c["citing"] for c in fake.citers("p01")][: PAGE * PAGES]
    by_count = sorted(fetched, key=lambda i: (-(fake.papers[i]["citationCount"] or 0), i))
    cut = [(x.relation, x.total, x.kept) for x in t.truncations if x.paper_id == "p01"]
    assert cut == [("citations", 31, 20), ("citations", 20, 5)]
    rule = next(x.rule for x in t.truncations if x.paper_id == "p01" and x.kept == 5)
    assert "most-cited" in rule
    node_ids = {n.paper.id for n in t.nodes}
    seeds = {s.paper_id for s in t.seeds}
    kept_citers = {i for i in fetched if i in node_ids}
    # the five most-cited fetched citers are in V; other fetched citers only if another seed brought them
    assert set(by_count[:5]) <= kept_citers
    for i in kept_citers - set(by_count[:5]):
        assert i in seeds or any(i in {c["cited"] for c in fake.refs(s)} | {c["citing"] for c in fake.citers(s)}
                                 for s in seeds - {"p01"})


def test_restricted_run_never_shows_a_later_paper(fake, tmp_path):
    from crase_core.paper_source import SourceFilter

    engine = engine_for(fake, tmp_path)
    engine.source = engine.source.restricted(SourceFilter(max_month=201912))
    t = run_query(QUERY, engine, PipelineSettings(m=4, L_offline=2, search_limit=20))
    assert t.nodes and t.source_filter.startswith("papers after 2019-12 hidden")
    for n in t.nodes:
        p = fake.papers[n.paper.id]
        assert (p["publicationDate"] or f"{p['year']}-12-31") <= "2019-12-31"


def test_key_never_reaches_trace_logs_or_output(fake, tmp_path, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    t = run_query(QUERY, engine_for(fake, tmp_path, key=SECRET), PipelineSettings(m=4, L_offline=2, search_limit=20))
    assert fake.requests and all(r.headers.get("x-api-key") == SECRET for r in fake.requests)
    saved = trace_io.save(t, tmp_path / "trace.json")
    out = capsys.readouterr()
    for text in (trace_io.dumps(t), saved.read_text(encoding="utf-8"), caplog.text, out.out, out.err):
        assert SECRET not in text


def test_build_engine_selects_s2_from_runtime_config(fake, tmp_path, hepth_source):
    from crase_core.runtime import RuntimeConfig, build_engine

    config = RuntimeConfig(source="s2", cache_dir=str(tmp_path),
                           s2=S2Settings(base_url=fake.base_url, rate=0, page_size=PAGE))
    engine = build_engine(config)
    assert isinstance(engine.source, SemanticScholarSource)
    assert engine.source.client.settings.cache_dir == str(tmp_path / "s2")
    assert build_engine(config).source is engine.source  # one source per settings: records are reused
    t = run_query(QUERY, engine, PipelineSettings(m=2, L_offline=2, search_limit=10))
    assert t.source == f"s2@{fake.base_url}" and t.counters.external_calls == len(fake.requests) > 0
