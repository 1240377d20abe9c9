"""Semantic Scholar source against a real HTTP server on 127.0.0.1 replaying documented API shapes.

The fake API (tests/fixtures/s2/fake_api.py) serves the graph in
tests/fixtures/s2/graph.json; see the README there for the documented fields.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "s2"))
from fake_api import FakeS2, Fault  # noqa: E402

from crase_core.errors import InputError, SourceError  # noqa: E402
from crase_core.paper_source import PaperSource, SourceFilter  # noqa: E402
from crase_core.settings.config import add_arguments, explicit_values, settings_from_args  # noqa: E402
from crase_core.sources.s2_http import (  # noqa: E402
    RateLimiter,
    S2Client,
    S2Settings,
    backoff_delay,
    parse_retry_after,
)
from crase_core.sources.semantic_scholar import (  # noqa: E402
    SemanticScholarSource,
    paper_from_api,
)

SECRET = "s2-TEST-KEY-9f3c1e77d2"



def make_source(fake: FakeS2, tmp_path: Path, key: str | None = None, **settings) -> SemanticScholarSource:
    opts = {"base_url": fake.base_url, "rate": 0, "backoff_base": 0.01, "cache_dir": str(tmp_path / "s2cache"),
            **settings}
    return SemanticScholarSource(S2Client(S2Settings.from_options(opts), api_key=key or ""))


# -- mapping ---------------------------------------------------------------------------------------------
def test_paper_from_api_maps_documented_fields_and_missing_values():
    p = paper_from_api({"paperId": "x1", "title": " A  title ", "abstract": None, "year": None,
                        "publicationDate": "2019-03-05", "authors": [{"authorId": "1", "name": "Ada L."},
                                                                     {"authorId": None, "name": ""}],
                        "venue": None, "externalIds": {"DOI": "10.1/x", "MAG": None, "CorpusId": 7},
                        "citationCount": 12})
    assert p is not None
    assert (p.id, p.title, p.abstract, p.year, p.month) == ("x1", "A title", "", 2019, 201903)
    assert p.authors == ("Ada L.",) and p.venue == "" and not p.has_abstract
    assert p.external_ids == (("CorpusId", "7"), ("DOI", "10.1/x"))
    assert p.url == "https://www.semanticscholar.org/paper/x1" and p.citation_count == 12
    undated = paper_from_api({"paperId": "x2", "title": None, "year": 2014})
    assert (undated.title, undated.year, undated.month) == ("(untitled x2)", 2014, None)
    assert paper_from_api({"paperId": None, "title": "unknown to S2"}) is None


def test_source_satisfies_protocol(fake, tmp_path):
    src = make_source(fake, tmp_path)
    assert isinstance(src, PaperSource)
    assert src.name == f"s2@{fake.base_url}" and src.external_calls == 0


# -- search ----------------------------------------------------------------------------------------------
def test_search_is_one_call_ranked_as_the_api_and_deduplicated(fake, tmp_path):
    fake.duplicate_search_hit = True
    src = make_source(fake, tmp_path)
    hits = src.search("long-document transformers attention survey", 500)
    assert fake.count("/paper/search") == 1 and src.external_calls == 1
    seen = fake.requests[0]
    assert seen.params["limit"] == "100"  # one page, the documented maximum
    assert seen.params["query"] == "long document transformers attention survey"  # hyphens break S2 matching
    assert [h.paper.id for h in hits] == fake.search_ranking("long document transformers attention survey")
    assert [round(h.score, 6) for h in hits[:3]] == [1.0, 0.5, round(1 / 3, 6)]
    assert src.stats.duplicates_dropped == 1
    survey = next(h.paper for h in hits if h.paper.id == "p05")
    assert survey.abstract == "" and not survey.has_abstract and survey.month == 202009


def test_restricted_search_hides_late_and_excluded_papers(fake, tmp_path):
    src = make_source(fake, tmp_path).restricted(SourceFilter(max_month=201912, exclude=frozenset({"p02"})))
    ids = [h.paper.id for h in src.search("transformer attention", 100)]
    assert fake.requests[-1].params["publicationDateOrYear"] == ":2019-12"
    assert ids and "p02" not in ids
    for pid in ids:  # only papers dated (or, undated, whose year ends) on or before 2019-12
        p = fake.papers[pid]
        assert (p["publicationDate"] or f"{p['year']}-12") <= "2019-12-31"
    assert "p10" not in ids  # no year, no date: hidden whenever a cutoff is set


# -- neighbours -------------------------------------------------------------------------------------------
def test_references_skip_unknown_papers_and_carry_contexts(fake, tmp_path):
    src = make_source(fake, tmp_path)
    nl = src.references("p04")
    assert nl.ids == ["p01", "p02", "p03"] and nl.total == 3 and not nl.truncated
    assert src.stats.unknown_neighbors == 1  # the reference without a paperId
    assert nl.contexts["p03"] == ["Sparse Transformer (Child et al., 2019) uses a dilated sliding window of blocks."]
    assert nl.intents["p03"] == ["background", "result"]
    assert "p02" not in nl.contexts  # empty contexts are not invented
    assert src.get(["p03"])["p03"].title == "Generating Long Sequences with Sparse Transformers"
    assert src.external_calls == 1  # the neighbour's record came with the page


def test_citations_are_paged_until_next_is_absent(fake, tmp_path):
    src = make_source(fake, tmp_path, page_size=10, max_neighbor_pages=10)
    nl = src.citations("p01")
    assert [r.params["offset"] for r in fake.requests] == ["0", "10", "20", "30"]
    assert len(nl.ids) == 31 and nl.total == 31 and not nl.truncated
    assert nl.ids == [c["citing"] for c in fake.citers("p01")]


def test_citation_list_cut_by_the_page_cap_is_marked_truncated(fake, tmp_path):
    src = make_source(fake, tmp_path, page_size=10, max_neighbor_pages=2)
    src.search("attention is all you need", 10)  # the record of p01 (citationCount 31)
    nl = src.citations("p01")
    assert len(nl.ids) == 20 and nl.truncated and nl.total == 31
    assert src.stats.truncated_lists == 1 and fake.count("/citations") == 2


def test_page_too_large_is_halved(fake, tmp_path):
    fake.max_page_items = 8
    src = make_source(fake, tmp_path, page_size=20, max_neighbor_pages=10)
    nl = src.citations("p01")
    assert len(nl.ids) == 31 and not nl.truncated
    assert [r.params["limit"] for r in fake.requests] == ["20", "10"] + ["5"] * 7  # 31 citers, 5 a page


def test_unknown_paper_has_no_neighbours(fake, tmp_path):
    src = make_source(fake, tmp_path)
    nl = src.references("nope")
    assert nl.ids == [] and nl.total == 0 and not nl.truncated


def test_restricted_citations_hide_later_citers(fake, tmp_path):
    src = make_source(fake, tmp_path).restricted(SourceFilter(max_month=201912))
    nl = src.citations("p01")
    assert fake.requests[-1].params["publicationDateOrYear"] == ":2019-12"
    assert sorted(nl.ids) == ["p02", "p03"]
    assert src.citations("p04").ids == []  # a hidden paper has no neighbours


# -- batch and edges -------------------------------------------------------------------------------------
def test_get_uses_batches_of_at_most_500_and_drops_unknown_ids(fake, tmp_path):
    src = make_source(fake, tmp_path)
    ids = ["p01", "p05"] + [f"missing{i}" for i in range(598)]
    got = src.get(ids)
    assert sorted(got) == ["p01", "p05"]
    batches = [r for r in fake.requests if r.path.endswith("/paper/batch")]
    assert [len(r.body["ids"]) for r in batches] == [500, 100]
    assert all(r.method == "POST" for r in batches)
    assert "abstract" in batches[0].params["fields"].split(",")
    assert got["p05"].abstract == "" and got["p01"].year == 2017
    src.get(ids)
    assert src.external_calls == 2  # known and unknown ids are both remembered


def test_edges_among_equals_the_graphs_citations_and_costs_one_batch(fake, tmp_path):
    src = make_source(fake, tmp_path)
    src.get(["p04"])  # in a run the seeds' records come from the search
    src.references("p04")
    src.citations("p04")
    v = ["p01", "p02", "p03", "p04", "p05", "p09"]
    before = src.external_calls
    edges = src.edges_among(v)
    expected = sorted(e for e in fake.edge_set() if e[0] in v and e[1] in v)
    assert edges == expected
    assert src.external_calls - before == 1  # p04's references are known; the other five in one batch
    batch = fake.requests[-1]
    assert batch.params["fields"] == "references.paperId" and batch.body["ids"] == ["p01", "p02", "p03", "p05", "p09"]


def test_reference_batches_respect_the_9999_references_cap(fake, tmp_path):
    src = make_source(fake, tmp_path, batch_size=3)
    counts = {"a": 6000, "b": 3000, "c": 999, "d": 1, "e": None, "f": 5, "g": 7, "h": 9000}
    src._state.reference_count.update(counts)
    batches = src._reference_batches(list(counts))
    # a+b+c = 9999 fits; d starts a new call; e (unknown count) is taken as 1000; the 3-id limit cuts after f
    assert batches == [["a", "b", "c"], ["d", "e", "f"], ["g", "h"]]


# -- good API citizen ------------------------------------------------------------------------------------
def test_rate_limiter_spaces_requests(fake, tmp_path):
    src = make_source(fake, tmp_path, rate=20)
    t0 = time.monotonic()
    for pid in ("p01", "p02", "p03", "p04", "p05"):
        src.references(pid)
    assert time.monotonic() - t0 >= 4 * 0.05 - 1e-3  # 5 request starts, at least 1/20 s apart
    times = [r.at for r in fake.requests]
    assert len(times) == 5 and times[-1] - times[0] >= 0.15  # as seen by the server (arrival jitter allowed)
    unlimited = make_source(fake, tmp_path / "u", rate=0)
    t0 = time.monotonic()
    for pid in ("p01", "p02", "p03", "p04", "p05"):
        unlimited.references(pid)
    assert time.monotonic() - t0 < 0.15


def test_rate_limiter_unit():
    clock = [0.0]
    slept: list[float] = []

    def sleep(d: float) -> None:
        slept.append(d)
        clock[0] += d

    lim = RateLimiter(2.0, clock=lambda: clock[0], sleep=sleep)
    assert [lim.wait() for _ in range(3)] == [0.0, 0.5, 0.5]
    clock[0] += 5.0
    assert lim.wait() == 0.0
    assert RateLimiter(0).wait() == 0.0


def test_backoff_and_retry_after_parsing():
    import random

    rng = random.Random(1)
    delays = [backoff_delay(a, 1.0, 10.0, rng) for a in range(6)]
    for a, d in enumerate(delays):
        full = min(10.0, 2.0 ** a)
        assert full * 0.5 <= d <= full
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == pytest.approx(10.0)


def test_429_with_retry_after_is_honoured(fake, tmp_path):
    fake.faults.append(Fault("/paper/search", 429, {"Retry-After": "1"}))
    src = make_source(fake, tmp_path)
    t0 = time.monotonic()
    hits = src.search("transformer", 10)
    assert time.monotonic() - t0 >= 1.0
    assert hits and fake.count("/paper/search") == 2
    assert src.external_calls == 2 and src.stats.retries == 1
    assert fake.requests[1].at - fake.requests[0].at >= 1.0


def test_500_then_success(fake, tmp_path):
    fake.faults += [Fault("/paper/batch", 500), Fault("/paper/batch", 503)]
    src = make_source(fake, tmp_path)
    assert sorted(src.get(["p01", "p02"])) == ["p01", "p02"]
    assert fake.count("/paper/batch") == 3 and src.stats.retries == 2


def test_timeout_then_success_and_timeout_exhausted(fake, tmp_path):
    fake.faults.append(Fault("/references", 200, delay=1.0, raw=b"{}"))
    src = make_source(fake, tmp_path, timeout=0.25, max_retries=1)
    assert src.references("p04").ids == ["p01", "p02", "p03"]
    assert src.stats.retries == 1
    fake.faults += [Fault("/citations", 200, delay=1.0, raw=b"{}") for _ in range(2)]
    with pytest.raises(SourceError) as err:
        src.citations("p04")
    msg = str(err.value)
    assert "Semantic Scholar" in msg and "within 0.25 s" in msg and "--s2-timeout" in msg
    assert "The run stopped" in msg and "(2 attempts)" in msg


def test_timeouts_can_be_skipped_and_are_recorded_as_truncated(fake, tmp_path):
    fake.faults += [Fault("/citations", 503) for _ in range(2)]
    src = make_source(fake, tmp_path, max_retries=1, on_neighbor_error="skip")
    nl = src.citations("p04")
    assert nl.ids == [] and nl.truncated and nl.total is None
    assert src.stats.skipped_lists == 1
    assert src.references("p04").ids == ["p01", "p02", "p03"]  # the run goes on


def test_rate_limit_exhausted_message(fake, tmp_path):
    fake.faults += [Fault("/paper/search", 429) for _ in range(3)]
    src = make_source(fake, tmp_path, max_retries=2)
    with pytest.raises(SourceError) as err:
        src.search("transformer", 10)
    msg = str(err.value)
    assert "HTTP 429" in msg and "--s2-rate" in msg and "S2_API_KEY" in msg and "(3 attempts)" in msg
    assert fake.count("/paper/search") == 3


def test_retry_after_longer_than_allowed_stops_at_once(fake, tmp_path):
    fake.faults.append(Fault("/paper/search", 429, {"Retry-After": "3600"}))
    src = make_source(fake, tmp_path, max_retry_after=10)
    with pytest.raises(SourceError, match="asks to wait 3600 s"):
        src.search("transformer", 10)
    assert fake.count("/paper/search") == 1


def test_no_network(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    src = SemanticScholarSource(S2Client(S2Settings(base_url=f"http://127.0.0.1:{port}/graph/v1", rate=0,
                                                    backoff_base=0, max_retries=1,
                                                    cache_dir=str(tmp_path / "c")), api_key=""))
    with pytest.raises(SourceError) as err:
        src.search("transformer", 10)
    msg = str(err.value)
    assert "could not be reached" in msg and "--source local" in msg and "The run stopped" in msg
    assert src.external_calls == 2


def test_malformed_json_and_wrong_shape(fake, tmp_path):
    fake.faults.append(Fault("/paper/search", 200, raw=b"<html>upstream error</html>"))
    src = make_source(fake, tmp_path)
    with pytest.raises(SourceError, match="Semantic Scholar: returned a response to GET /paper/search that is not valid JSON"):
        src.search("transformer", 10)
    fake.faults.append(Fault("/paper/batch", 200, raw=b'{"data": []}'))
    with pytest.raises(SourceError, match="documented shape"):
        src.get(["p01"])


def test_bad_request_names_the_api_message(fake, tmp_path):
    fake.faults.append(Fault("/paper/search", 400, raw=b'{"error": "Unrecognized or unsupported fields: [x]"}'))
    src = make_source(fake, tmp_path)
    with pytest.raises(SourceError, match=r"HTTP 400: Unrecognized or unsupported fields: \[x\]"):
        src.search("transformer", 10)


# -- the key -----------------------------------------------------------------------------------------------
def test_key_is_sent_and_never_shown(fake, tmp_path, caplog, capsys, monkeypatch):
    monkeypatch.setenv("S2_API_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    src = SemanticScholarSource.from_settings({"base_url": fake.base_url, "rate": 0, "backoff_base": 0.01,
                                               "cache_dir": str(tmp_path / "c")})
    fake.faults.append(Fault("/paper/search", 500, raw=f'{{"error": "bad key {SECRET}"}}'.encode()))
    src.search("transformer", 10)
    assert all(r.headers.get("x-api-key") == SECRET for r in fake.requests)
    assert all(SECRET not in (r.path + str(r.params) + str(r.body)) for r in fake.requests)
    fake.faults.append(Fault("/references", 403, raw=f'{{"error": "Forbidden {SECRET}"}}'.encode()))
    with pytest.raises(SourceError) as err:
        src.references("p01")
    msg = str(err.value)
    assert "rejected the API key" in msg and "S2_API_KEY" in msg and SECRET not in msg
    fake.faults.append(Fault("/paper/search", 400, raw=f'{{"error": "Unacceptable {SECRET}"}}'.encode()))
    with pytest.raises(SourceError) as err2:
        src.search("attention", 10)
    assert SECRET not in str(err2.value) and "***" in str(err2.value)
    out = capsys.readouterr()
    shown = caplog.text + out.out + out.err + repr(src.client) + src.describe() + repr(src.client.settings)
    assert SECRET not in shown
    for f in (tmp_path / "c").rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f


def test_missing_key_403_says_how_to_get_one(fake, tmp_path):
    fake.faults.append(Fault("/paper/search", 403))
    src = make_source(fake, tmp_path)
    with pytest.raises(SourceError, match="without an API key .* Set S2_API_KEY"):
        src.search("transformer", 10)
    assert "x-api-key" not in fake.requests[0].headers


# -- cache ---------------------------------------------------------------------------------------------------
def test_disk_cache_makes_a_rerun_free_and_expires(fake, tmp_path):
    src = make_source(fake, tmp_path)
    src.search("transformer", 10)
    src.citations("p01")
    n = len(fake.requests)
    again = make_source(fake, tmp_path)  # a new process would look the same: a fresh client, same folder
    again.search("transformer", 10)
    again.citations("p01")
    assert again.external_calls == 0 and len(fake.requests) == n and again.stats.cache_hits == 2
    short = make_source(fake, tmp_path / "other", cache_ttl_days=1e-5)  # < 1 s
    short.search("transformer", 10)
    time.sleep(1.1)
    make_source(fake, tmp_path / "other", cache_ttl_days=1e-5).search("transformer", 10)
    assert len(fake.requests) == n + 2  # expired: fetched again


# -- settings and CLI ----------------------------------------------------------------------------------------
def test_settings_validation_and_cli_round_trip():
    with pytest.raises(InputError, match="unknown Semantic Scholar setting"):
        S2Settings.from_options({"rte": 2})
    with pytest.raises(InputError, match="page_size"):
        S2Settings(page_size=5000)
    with pytest.raises(InputError, match="batch_size"):
        S2Settings(batch_size=501)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--s2-rate", "0.5", "--s2-timeout", "12", "--s2-base-url", "http://127.0.0.1:9/graph/v1",
                              "--s2-on-error", "skip", "--s2-no-cache"])
    assert explicit_values(args) == {"s2": {"rate": 0.5, "timeout": 12.0, "base_url": "http://127.0.0.1:9/graph/v1",
                                            "on_neighbor_error": "skip", "use_cache": False}}
    s2 = settings_from_args(args).runtime.s2
    assert (s2.rate, s2.timeout, s2.on_neighbor_error, s2.use_cache) == (0.5, 12.0, "skip", False)
    assert explicit_values(parser.parse_args([])) == {}
    assert settings_from_args(parser.parse_args([])).runtime.s2 == S2Settings()
    with pytest.raises(InputError, match="rate"):
        explicit_values(parser.parse_args(["--s2-rate", "-1"]))
    assert all(S2Settings.help(f) for f in S2Settings.__dataclass_fields__)
