"""The OpenAlex source against the fake API (tests/fixtures/openalex, real HTTP on 127.0.0.1): records, search,
references, citers, lookup, edges, the leakage filter, the polite pool, the cache, and a full run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "openalex"))
sys.path.insert(0, str(Path(__file__).parent / "faults"))
from cli_tools import crase  # noqa: E402
from fake_openalex import FakeOpenAlex  # noqa: E402

from crase_core.paper_source import SourceFilter  # noqa: E402
from crase_core.settings.config import load_settings  # noqa: E402
from crase_core.sources.openalex import (  # noqa: E402
    OpenAlexClient,
    OpenAlexSettings,
    OpenAlexSource,
    abstract_from_index,
    paper_from_work,
    short_id,
)

HUB = "W2741809807"


@pytest.fixture
def api():
    server = FakeOpenAlex()
    server.start()
    yield server
    server.stop()


def source_for(api: FakeOpenAlex, tmp_path: Path, key: str = "", **kw) -> OpenAlexSource:
    kw.setdefault("mailto", "crase-tests@example.org")
    settings = OpenAlexSettings(base_url=api.base_url, rate=0, page_size=5, max_neighbor_pages=2,
                                cache_dir=str(tmp_path / "oa"), **kw)
    return OpenAlexSource(OpenAlexClient(settings, api_key=key))


def test_a_documented_work_becomes_a_paper(api):
    p = paper_from_work(api.works[HUB])
    assert p is not None and p.id == HUB
    assert p.title == "The state of OA: a large-scale analysis of the prevalence and impact of Open Access articles"
    assert (p.year, p.month, p.citation_count) == (2018, 201802, 12)
    assert p.authors == ("Heather Piwowar", "Jason Priem", "Vincent Larivière") and p.venue == "PeerJ"
    assert p.url == "https://doi.org/10.7717/peerj.4375"
    assert dict(p.external_ids) == {"DOI": "10.7717/peerj.4375", "MAG": "2741809807", "OpenAlex": HUB}
    assert p.abstract.startswith("Despite growing interest in Open Access (OA) to scholarly literature, there is")
    undated = paper_from_work(api.works["W2511661767"])
    assert undated is not None and (undated.year, undated.month, undated.venue) == (2015, None, "")
    bare = paper_from_work(api.works["W2900000001"])
    assert bare is not None and bare.abstract == "" and not bare.has_abstract


def test_abstracts_are_rebuilt_from_the_inverted_index_by_hand():
    assert abstract_from_index({"a": [0, 2], "b": [1]}) == "a b a"
    assert abstract_from_index({"Despite": [0], "growing": [1], "interest": [2]}) == "Despite growing interest"
    for bad in (None, [], {"a": "0"}, {"a": [-1]}, {"a": [10**9]}, {"a": [True]}, {1: [0]}):
        assert abstract_from_index(bad) == ""


def test_ids_from_answers_are_short_work_ids_or_nothing():
    assert short_id("https://openalex.org/W2741809807") == short_id("W2741809807") == "W2741809807"
    assert short_id("https://openalex.org/w12") == "W12"
    for bad in (None, 12, "", "A5023888391", "W", "W12x", "../W12/..", "W1234567890123", "W12?x=1"):
        assert short_id(bad) is None


def test_search_is_one_request_in_the_apis_order_with_the_polite_pool(api, tmp_path):
    source = source_for(api, tmp_path, key="oa-KEY-1")
    hits = source.search("open access citations", 100)
    assert [h.paper.id for h in hits] == api.search_ranking("open access citations")
    assert [round(h.score, 6) for h in hits[:3]] == [1.0, 0.5, 0.333333]
    (req,) = api.requests
    assert req.path == "/works" and req.params["search"] == "open access citations"
    assert req.params["per-page"] == "100" and req.params["mailto"] == "crase-tests@example.org"
    assert req.params["api_key"] == "oa-KEY-1" and req.params["select"].split(",")[0] == "id"
    # the response cache's key names neither the contact address nor the key: another source hits it
    again = source_for(api, tmp_path, key="another", mailto="someone@example.org")
    assert [h.paper.id for h in again.search("open access citations", 100)] == [h.paper.id for h in hits]
    assert len(api.requests) == 1 and again.external_calls == 0


def test_references_and_citers_with_paging_and_truncation(api, tmp_path):
    source = source_for(api, tmp_path)
    refs = source.references(HUB)
    assert sorted(refs.ids) == sorted(api.refs(HUB)) == ["W2511661767", "W2753353163", "W2785823074"]
    assert refs.total == 3 and not refs.truncated
    assert api.requests[-1].params["filter"] == f"cited_by:{HUB}"
    citers = source.citations(HUB)
    assert citers.ids == api.citers(HUB)[:10] and citers.truncated and citers.total == 13
    assert citers.truncation_rule == ("the first 2 page(s) of 5 in the API's own order "
                                      "(max_neighbor_pages × page_size)")
    assert [r.params["page"] for r in api.requests if r.params.get("filter") == f"cites:{HUB}"] == ["1", "2"]
    n = len(api.requests)
    assert source.citations(HUB).ids == citers.ids and len(api.requests) == n  # remembered in the session
    assert source.references("W999").ids == [] and source.references("not-an-id").total == 0


def test_the_leakage_filter_is_sent_and_applied(api, tmp_path):
    source = source_for(api, tmp_path).restricted(SourceFilter(max_month=201912, exclude=frozenset({"W2753353163"})))
    hits = source.search("open access", 50)
    assert api.requests[-1].params["filter"] == "to_publication_date:2019-12-31"
    want = [w for w in api.search_ranking("open access") if (api.works[w].get("publication_date") or "9999") <= "2019-12-31"
            and w != "W2753353163"]
    assert [h.paper.id for h in hits] == want
    citers = source.citations(HUB)
    assert api.requests[-1].params["filter"] == f"cites:{HUB},to_publication_date:2019-12-31"
    assert citers.ids and all(api.works[c]["publication_date"] <= "2019-12-31" for c in citers.ids)
    assert citers.total is None or citers.total == len(citers.ids)
    assert source.get(["W2753353163"]) == {} and source.references("W2753353163").ids == []


def test_lookup_in_batches_and_unknown_ids(api, tmp_path):
    source = source_for(api, tmp_path, batch_size=2)
    got = source.get([HUB, "W2753353163", "W2785823074", "W424242", "junk"])
    assert set(got) == {HUB, "W2753353163", "W2785823074"}
    lookups = [r for r in api.requests if r.params.get("filter", "").startswith("openalex:")]
    assert [r.params["filter"] for r in lookups] == [f"openalex:{HUB}|W2753353163", "openalex:W2785823074|W424242"]
    assert source.get([HUB]) == {HUB: got[HUB]} and len(api.requests) == 2  # seen: free
    assert source.stats.not_found == 1


def test_edges_among_come_from_referenced_works(api, tmp_path):
    source = source_for(api, tmp_path)
    v = [HUB, "W2753353163", "W2511661767", "W2900000001", "W2031754690"]  # the last: not in OpenAlex's answer
    assert source.edges_among(v) == [
        (HUB, "W2511661767"), (HUB, "W2753353163"), ("W2753353163", "W2511661767"),
        ("W2900000001", HUB), ("W2900000001", "W2753353163")]
    assert len(api.requests) == 1  # one lookup: every record carries referenced_works


def test_a_full_run_through_the_cli(capsys, api, tmp_path):
    r = crase(capsys, "query", "open access citation advantage", "--source", "openalex", "--openalex-base-url",
              api.base_url, "--openalex-mailto", "crase-tests@example.org", "--openalex-rate", "0", "--quiet",
              "--openalex-cache-dir", tmp_path / "oa")
    assert r.code == 0, r.err
    assert f"Source: openalex@{api.base_url}" in r.out and " 1. [" in r.out
    assert f"Semantic feedback off: the source openalex@{api.base_url} has no paper embeddings" in r.out
    assert all(req.params.get("mailto") == "crase-tests@example.org" for req in api.requests)


def test_the_key_goes_only_to_the_configured_api_root(monkeypatch, caplog):
    monkeypatch.setenv("OPENALEX_API_KEY", "oa-SECRET-9")
    assert load_settings().runtime.openalex_api_key == "oa-SECRET-9"
    other = load_settings(explicit={"openalex": {"base_url": "http://127.0.0.1:9"}})
    assert other.runtime.openalex_api_key is None and "not sending the OpenAlex key" in caplog.text
    assert "oa-SECRET-9" not in repr(other.runtime) and other.describe()["openalex"]["api_key"] == "none"


@pytest.mark.parametrize("bad", ["not an address", "a@b&api_key=x", "@example.org"])
def test_mailto_must_be_an_address(bad):
    from crase_core.errors import InputError

    with pytest.raises(InputError, match="openalex mailto must be an e-mail address"):
        OpenAlexSettings(mailto=bad)
