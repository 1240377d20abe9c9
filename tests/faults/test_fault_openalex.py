"""Fault injection for the OpenAlex source against the fake API (real HTTP on 127.0.0.1): busy (429 with and without
Retry-After), failing (5xx), down, slow, trickling, answering garbage (not JSON, nested too deeply, the wrong shape,
Works with unusable ids, hostile inverted indexes and references) or refusing (401/403, 400) — each retried to the
right answer or one line naming OpenAlex and what to do, never the key, in bounded time; degraded answers are used
but never cached."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "fixtures" / "openalex"))
from cli_tools import crase, one_error  # noqa: E402
from fake_openalex import FakeOpenAlex, Fault  # noqa: E402

from crase_core.errors import SourceError  # noqa: E402
from crase_core.sources.openalex import OpenAlexClient, OpenAlexSettings, OpenAlexSource  # noqa: E402

KEY = "oa-FAULT-KEY-77"
QUERY = "open access citations"


@pytest.fixture
def api():
    server = FakeOpenAlex()
    server.start()
    yield server
    server.stop()


def source_for(api: FakeOpenAlex, tmp_path: Path, **kw) -> OpenAlexSource:
    kw.setdefault("max_retries", 2)
    kw.setdefault("backoff_base", 0.05)
    kw.setdefault("timeout", 2.0)
    settings = OpenAlexSettings(base_url=api.base_url, rate=0, cache_dir=str(tmp_path / "oa"), **kw)
    return OpenAlexSource(OpenAlexClient(settings, api_key=KEY))


@pytest.mark.fault_kind("openalex-429-retry-after")
def test_429_with_retry_after_is_waited_for_then_answered(api, tmp_path):
    api.faults.append(Fault("/works", status=429, headers={"Retry-After": "1"}))
    source = source_for(api, tmp_path)
    t = time.monotonic()
    hits = source.search(QUERY, 10)
    assert time.monotonic() - t >= 1.0 and [h.paper.id for h in hits] == api.search_ranking(QUERY)[:10]
    assert source.stats.retries == 1 and len(api.requests) == 2


@pytest.mark.fault_kind("openalex-429-too-long")
def test_a_retry_after_beyond_the_limit_stops_at_once(api, tmp_path):
    api.faults.append(Fault("/works", status=429, headers={"Retry-After": "3600"}))
    with pytest.raises(SourceError) as e:
        source_for(api, tmp_path, max_retry_after=60).search(QUERY, 10)
    assert str(e.value).startswith("OpenAlex: kept answering GET /works with HTTP 429 Too Many Requests; it asks to "
                                   "wait 3600 s (Retry-After), more than the 60 s allowed.")
    assert "--openalex-rate" in str(e.value) and len(api.requests) == 1


@pytest.mark.parametrize("status", [500, 502, 503, 504, 429])
@pytest.mark.fault_kind("openalex-error-status-always")
def test_persistent_failures_are_retried_then_one_line(api, tmp_path, status):
    api.faults.extend(Fault("/works", status=status) for _ in range(3))
    with pytest.raises(SourceError) as e:
        source_for(api, tmp_path).search(QUERY, 10)
    assert f"HTTP {status}" in str(e.value) and "(3 attempts)" in str(e.value) and KEY not in str(e.value)
    assert len(api.requests) == 3


@pytest.mark.fault_kind("openalex-5xx-once", "openalex-drop-mid-body-once")
def test_a_failure_that_passes_is_retried_to_the_right_answer(api, tmp_path):
    api.faults.append(Fault("/works", status=503))
    api.faults.append(Fault("/works", cut_after=20, status=200, raw=b'{"meta": {"count": 3}, "results": []}'))
    hits = source_for(api, tmp_path).search(QUERY, 10)
    assert [h.paper.id for h in hits] == api.search_ranking(QUERY)[:10]


@pytest.mark.parametrize("raw, why", [
    pytest.param(b"<html>rate limited</html>", "is not valid JSON", marks=pytest.mark.fault_kind("openalex-200-not-json")),
    pytest.param(b"[" * 100_000, "is not valid JSON", marks=pytest.mark.fault_kind("openalex-200-not-json")),
    pytest.param(b'{"results": "x", "meta": {}}',
                 "does not have the documented shape (expected an object with a 'meta' object",
                 marks=pytest.mark.fault_kind("openalex-wrong-shape")),
    pytest.param(b'{"meta": {"count": 1}}', "does not have the documented shape",
                 marks=pytest.mark.fault_kind("openalex-wrong-shape")),
])
def test_garbage_answers_stop_with_one_line_and_are_not_cached(api, tmp_path, raw, why):
    api.faults.extend(Fault("/works", status=200, raw=raw) for _ in range(1))
    with pytest.raises(SourceError) as e:
        source_for(api, tmp_path).search(QUERY, 10)
    assert str(e.value).startswith("OpenAlex: ") and why in str(e.value)
    assert [h.paper.id for h in source_for(api, tmp_path).search(QUERY, 10)] == api.search_ranking(QUERY)[:10]


@pytest.mark.fault_kind("openalex-hostile-works")
def test_works_with_unusable_ids_or_hostile_fields_are_dropped_and_the_answer_not_cached(api, tmp_path):
    hub = api.works["W2741809807"]
    hub["referenced_works"] = hub["referenced_works"] + ["../../etc/passwd", "https://openalex.org/W1?x=1", 7]
    hub["abstract_inverted_index"] = {"huge": [10**12], "fine": [0]}
    api.works["W2753353163"]["id"] = "https://openalex.org/../W2753353163"
    source = source_for(api, tmp_path)
    hits = source.search(QUERY, 50)
    ids = [h.paper.id for h in hits]
    assert "W2753353163" not in ids and "W2741809807" in ids
    paper = next(h.paper for h in hits if h.paper.id == "W2741809807")
    assert paper.abstract == ""  # not an inverted index of an abstract: no abstract rather than a fake one
    assert source.references("W2741809807").ids == ["W2511661767", "W2785823074"]
    assert all("/" not in r.path[len("/works") :].strip("/") for r in api.requests)
    before = len(api.requests)
    source_for(api, tmp_path).search(QUERY, 50)  # degraded: used, not cached
    assert len(api.requests) == before + 1


@pytest.mark.fault_kind("openalex-trickle")
def test_a_slow_or_trickling_api_times_out_within_the_bound(api, tmp_path):
    api.faults.extend(Fault("/works", status=200, trickle=0.5, raw=b'{"meta": {}, "results": []}') for _ in range(2))
    t = time.monotonic()
    with pytest.raises(SourceError) as e:
        source_for(api, tmp_path, timeout=1.0, max_retries=1).search(QUERY, 10)
    assert time.monotonic() - t < 10 and "did not answer GET /works within 1 s" in str(e.value)
    assert "--openalex-timeout" in str(e.value)


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.fault_kind("openalex-key-refused")
def test_a_refused_key_stops_and_never_shows_the_key(api, tmp_path, status):
    api.faults.append(Fault("/works", status=status))
    with pytest.raises(SourceError) as e:
        source_for(api, tmp_path).search(QUERY, 10)
    assert f"rejected the API key for GET /works (HTTP {status}). Check OPENALEX_API_KEY" in str(e.value)
    assert KEY not in str(e.value) and len(api.requests) == 1


@pytest.mark.fault_kind("openalex-nothing-listening")
def test_the_cli_with_the_api_down_is_one_line(capsys, tmp_path):
    server = FakeOpenAlex()
    url = server.start()
    server.stop()
    error = one_error(crase(capsys, "query", QUERY, "--source", "openalex", "--openalex-base-url", url,
                            "--openalex-max-retries", "0", "--openalex-cache-dir", tmp_path / "oa", "--quiet"))
    assert error.startswith(f"OpenAlex: could not be reached at {url} (ConnectError") and "--openalex-base-url" in error


@pytest.mark.fault_kind("openalex-neighbour-list-fails")
def test_a_neighbour_list_that_fails_is_skipped_when_asked(api, tmp_path):
    source = source_for(api, tmp_path, on_neighbor_error="skip")
    api.faults.extend(Fault("/works", status=500) for _ in range(3))
    got = source.citations("W2741809807")
    assert got.ids == [] and got.truncated and got.total is None and "skipped" in got.truncation_rule
    assert source.stats.skipped_lists == 1
