"""Expansion with hops 1, 1.5, 2 on the tiny corpus (every set checked by hand)."""

from __future__ import annotations

from crase_core.retrieval.neighbourhood import expand


def test_hops_one_keeps_seed_edges_only(tiny_source):
    g = expand(tiny_source, ["9901001"], hops=1)
    assert g.nodes == ["9901001", "0001001", "9801001", "9802001"]
    assert g.edges == [("0001001", "9901001"), ("9901001", "9801001"), ("9901001", "9802001")]
    assert g.hop == {"9901001": 0.0, "9801001": 1.0, "9802001": 1.0, "0001001": 1.0}


def test_hops_one_and_a_half_adds_edges_among_neighbours(tiny_source):
    g = expand(tiny_source, ["9901001"], hops=1.5)
    assert set(g.nodes) == {"9901001", "0001001", "9801001", "9802001"}
    assert g.edges == [("0001001", "9802001"), ("0001001", "9901001"), ("9802001", "9801001"),
                       ("9901001", "9801001"), ("9901001", "9802001")]


def test_hops_two_reaches_neighbours_of_neighbours(tiny_source):
    g = expand(tiny_source, ["9901001"], hops=2)
    assert set(g.nodes) == {"9901001", "0001001", "9801001", "9802001", "9902001"}
    assert ("0001001", "9902001") in g.edges and g.hop["9902001"] == 2.0


def test_neighbor_cap_keeps_most_cited_and_records_rule(tiny_source):
    g = expand(tiny_source, ["9901001"], hops=1.5, neighbor_cap=1)
    # references 9801001 (cited 2×) and 9802001 (2×): tie → by id; citers: only 0001001
    assert set(g.nodes) == {"9901001", "9801001", "0001001"}
    [cut] = g.truncations
    assert (cut.paper_id, cut.relation, cut.total, cut.kept) == ("9901001", "references", 2, 1)
    assert "most-cited" in cut.rule
