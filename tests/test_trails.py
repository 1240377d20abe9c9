"""best_trails on small hand-built graphs: exact trails, directions, Δ, the 1/4 backward penalty."""

from __future__ import annotations

from crase_core.ranking.trails import best_trails
from crase_core.records import EdgeRecord, TrailStep


def edge(u: str, v: str, weight: float, delta: float = 0.5, kept: bool = True) -> EdgeRecord:
    return EdgeRecord(citing=u, cited=v, delta=delta, weight=weight if kept else 0.0, kept=kept)


def path(trail: list[TrailStep]) -> list[tuple[str, str, bool, float]]:
    return [(s.source, s.target, s.along_citation, s.delta) for s in trail]


# S1 cites A (w 3, Δ .9) and B (w 1, Δ .4); A and B cite C (w 1 each, Δ .7 / .8); D cites S1 (Δ .6);
# S2 cites C but that edge was pruned; E is cited by nobody and cites nobody kept.
GRAPH = [
    edge("S1", "A", 3.0, 0.9), edge("S1", "B", 1.0, 0.4),
    edge("A", "C", 1.0, 0.7), edge("B", "C", 1.0, 0.8),
    edge("D", "S1", 1.0, 0.6),
    edge("S2", "C", 0.0, 0.0, kept=False),
    edge("E", "F", 0.0, 0.0, kept=False),
]


def test_exact_trails_on_a_small_graph():
    t = best_trails(["S1", "S2"], GRAPH)
    assert set(t) == {"S1", "S2", "A", "B", "C", "D"}  # E, F: only pruned edges; unreachable
    assert t["S1"] == [] and t["S2"] == []  # a seed's own trail is empty
    assert path(t["A"]) == [("S1", "A", True, 0.9)]
    assert path(t["B"]) == [("S1", "B", True, 0.4)]
    # C: via A has probability 3/4 · 1, via B 1/4 · 1 → via A; the pruned S2→C edge is never used
    assert path(t["C"]) == [("S1", "A", True, 0.9), ("A", "C", True, 0.7)]
    # D only cites the seed: one step against the citation, carrying that edge's Δ
    assert path(t["D"]) == [("S1", "D", False, 0.6)]


def test_backward_step_costs_a_factor_four():
    # X is reachable along citations with probability p (S → X, S's other out-edges share the rest),
    # or against X's own citation X → S (X's only out-edge, P = 1) at a cost of 1/4.
    # p = 1/8 < 1/4: backwards wins; p = 1/2 > 1/4: forwards wins.
    def graph(n_other: int) -> list[EdgeRecord]:
        return [edge("S", "X", 1.0, 0.1), edge("X", "S", 1.0, 0.2)] + [
            edge("S", f"o{i}", 1.0) for i in range(n_other)]

    assert path(best_trails(["S"], graph(7))["X"]) == [("S", "X", False, 0.2)]  # p = 1/8
    assert path(best_trails(["S"], graph(1))["X"]) == [("S", "X", True, 0.1)]  # p = 1/2


def test_probabilities_multiply_along_the_path():
    # S → A → T: (1/2)(1/2) = 1/4 beats S → B → T: (1/2)(1/3), with weights chosen so both first steps are 1/2
    g = [edge("S", "A", 2.0), edge("S", "B", 2.0), edge("A", "T", 1.0, 0.3), edge("A", "Z", 1.0),
         edge("B", "T", 1.0), edge("B", "Y", 1.0), edge("B", "W", 1.0)]
    assert [(s.source, s.target) for s in best_trails(["S"], g)["T"]] == [("S", "A"), ("A", "T")]
    # make the B route likelier: B → T now has 4 of B's 6 weight units (2/3 > 1/2)
    g2 = g[:4] + [edge("B", "T", 4.0), edge("B", "Y", 1.0), edge("B", "W", 1.0)]
    assert [(s.source, s.target) for s in best_trails(["S"], g2)["T"]] == [("S", "B"), ("B", "T")]


def test_the_likeliest_seed_is_the_trail_start():
    # T is cited by both seeds: S1 → T with 1/3 (S1 has two other out-edges), S2 → T with 1
    g = [edge("S1", "T", 1.0), edge("S1", "a", 1.0), edge("S1", "b", 1.0), edge("S2", "T", 1.0)]
    assert path(best_trails(["S1", "S2"], g)["T"]) == [("S2", "T", True, 0.5)]


def test_no_seed_means_no_trail_and_pruned_seeds_are_skipped():
    assert best_trails([], GRAPH) == {}
    # a seed with no kept edge still has its own (empty) trail, and reaches nothing
    assert best_trails(["S2"], GRAPH) == {"S2": []}


def test_targets_get_the_same_trails_as_a_full_search():
    """The ranking asks only for its top k's trails: the search stops early, the trails are the full search's."""
    full = best_trails(["S1", "S2"], GRAPH)
    assert best_trails(["S1", "S2"], GRAPH, ["C", "A", "E"]) == {"C": full["C"], "A": full["A"]}  # E unreachable
    assert best_trails(["S1", "S2"], GRAPH, ["D"]) == {"D": full["D"]}
    assert best_trails(["S1", "S2"], GRAPH, []) == {}
