"""The OpenAlex live source on Works whose list fields are not lists (fake API, real HTTP on 127.0.0.1): a Work
whose ``authorships`` is a number, ``true``, null, a string or an object costs that paper its authors, not the
run (was: ``TypeError: 'int' object is not iterable`` ended the whole query). The live source reads authors
with the importer's own tolerant mapping (:func:`crase_core.importers.openalex_works.authors_of`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "fixtures" / "openalex"))
from cli_tools import crase  # noqa: E402
from fake_openalex import FakeOpenAlex  # noqa: E402

from crase_core import trace as trace_io  # noqa: E402
from crase_core.importers.openalex_works import parse_work  # noqa: E402
from crase_core.sources.openalex import OpenAlexClient, OpenAlexSettings, OpenAlexSource  # noqa: E402

QUERY = "open access citations"
VICTIM = "W3000000001"  # the search's first hit


@pytest.fixture
def api():
    server = FakeOpenAlex()
    server.start()
    yield server
    server.stop()


@pytest.mark.parametrize("value", [7, True, None, "Heather Piwowar", {"author": {"display_name": "X"}},
                                   [3, None, {"author": 5}, {"author": {"display_name": "Kept Name"}}]])
@pytest.mark.fault_kind("openalex-authorships-not-a-list")
def test_a_work_whose_authorships_is_not_a_list_costs_its_authors_not_the_run(api, tmp_path, value):
    other = api.works["W3000000002"]["authorships"]
    api.works[VICTIM]["authorships"] = value
    settings = OpenAlexSettings(base_url=api.base_url, rate=0, cache_dir=str(tmp_path / "oa"))
    hits = OpenAlexSource(OpenAlexClient(settings)).search(QUERY, 10)
    papers = {h.paper.id: h.paper for h in hits}
    assert [h.paper.id for h in hits] == api.search_ranking(QUERY)[:10]  # every paper is there
    want = ("Kept Name",) if isinstance(value, list) else ()
    assert papers[VICTIM].authors == want  # only the entries that are authors
    assert papers["W3000000002"].authors == tuple(a["author"]["display_name"] for a in other)
    record = parse_work(api.works[VICTIM])  # the importer reads the same Work to the same authors
    assert record is not None and record.authors == want


@pytest.mark.fault_kind("openalex-authorships-not-a-list")
def test_the_live_query_answers_with_a_work_whose_authorships_is_a_number(capsys, api, tmp_path):
    api.works[VICTIM]["authorships"] = 7
    out = tmp_path / "run.json"
    r = crase(capsys, "query", QUERY, "--source", "openalex", "--openalex-base-url", api.base_url,
              "--openalex-cache-dir", tmp_path / "oa", "--quiet", "--json", out)
    assert r.code == 0, r.err
    assert "internal error" not in r.err
    trace = trace_io.load(out)
    assert trace.node(VICTIM).paper.authors == ()
    assert any(n.paper.authors for n in trace.nodes)  # the other papers keep theirs
