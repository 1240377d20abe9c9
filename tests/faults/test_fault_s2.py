"""Semantic Scholar faults against the fake Graph API: hostile ids, answers of the wrong shape or degraded."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "fixtures" / "s2"))
from fake_api import FakeS2, Fault  # noqa: E402

from crase_core.errors import SourceError  # noqa: E402
from crase_core.sources.s2_http import S2Client, S2Settings  # noqa: E402
from crase_core.sources.semantic_scholar import SemanticScholarSource  # noqa: E402

HOSTILE_IDS = ("../../etc/x", "a?b=c#d", "..", "x/../../y")
_SAFE_PATH = re.compile(r"/graph/v1/paper/(search|batch|[A-Za-z0-9._:%-]+/(references|citations))")


def make_source(fake: FakeS2, cache: Path) -> SemanticScholarSource:
    opts = {"base_url": fake.base_url, "rate": 0, "backoff_base": 0.01, "max_retries": 0, "cache_dir": str(cache)}
    return SemanticScholarSource(S2Client(S2Settings.from_options(opts), api_key=""))


def _search_ids(fake: FakeS2, cache: Path, q: str = "transformer") -> list[str]:
    return [h.paper.id for h in make_source(fake, cache).search(q, 10)]


@pytest.mark.fault_kind("s2-hostile-ids")
def test_hostile_ids_never_reach_a_request_path(fake, tmp_path):
    expected = _search_ids(fake, tmp_path / "clean")
    assert expected
    template = fake.papers[expected[0]]
    for hid in HOSTILE_IDS:  # papers the API answers with ids that are not ids
        fake.papers[hid] = {**template, "paperId": hid}
    fake.citations.append({"citing": expected[0], "cited": HOSTILE_IDS[0], "contexts": [], "intents": []})
    src = make_source(fake, tmp_path / "s2")
    hits = [h.paper.id for h in src.search("transformer", 10)]
    assert hits == expected  # the hostile records are dropped, the rest is as before
    for pid in hits:
        src.references(pid)
        src.citations(pid)
    src.edges_among(hits)
    for hid in HOSTILE_IDS[:2]:  # ids given directly are percent-encoded into one path segment
        assert src.references(hid).ids == []
    paths = [r.path for r in fake.requests]
    assert all(_SAFE_PATH.fullmatch(p) for p in paths), paths
    assert "/graph/v1/paper/..%2F..%2Fetc%2Fx/references" in paths
    assert "/graph/v1/paper/a%3Fb%3Dc%23d/references" in paths
    assert not any("/etc/" in p or p == "/graph/v1/paper/a" for p in paths)


@pytest.mark.fault_kind("s2-wrong-shape-or-degraded")
def test_wrong_shape_and_degraded_answers_are_not_cached(fake, tmp_path):
    expected = _search_ids(fake, tmp_path / "clean")
    cache = tmp_path / "s2"
    fake.faults.append(Fault("/paper/search", 200, raw=b'{"data": "temporarily unavailable"}'))
    with pytest.raises(SourceError) as err:
        make_source(fake, cache).search("transformer", 10)
    assert str(err.value).startswith("Semantic Scholar: returned an answer to GET /paper/search that does not have "
                                     "the documented shape (expected an object with a 'data' list).")
    assert _search_ids(fake, cache) == expected  # the rerun, the API recovered: the right answer
    # degraded items: used for this run, not cached
    cache2 = tmp_path / "s2-degraded"
    first = fake.papers[expected[0]]
    degraded = {"data": [{"paperId": first["paperId"], "title": first["title"]}, "garbage", {"paperId": 7}]}
    fake.faults.append(Fault("/paper/search", 200, raw=json.dumps(degraded).encode()))
    assert _search_ids(fake, cache2) == [expected[0]]
    n = fake.count("/paper/search")
    assert _search_ids(fake, cache2) == expected  # fetched again (not served from the cache), now complete
    assert fake.count("/paper/search") == n + 1
    assert _search_ids(fake, cache2) == expected and fake.count("/paper/search") == n + 1  # the good one is cached
