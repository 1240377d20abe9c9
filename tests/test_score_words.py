"""A ranked paper's score in words (result cards, HTML export): exact sentences on a hand-made ranking."""

from __future__ import annotations

from types import SimpleNamespace

from crase_core.views.score_words import score_sentence


def _trace(scores: dict[str, float], fusion: str = "restart-rrf", ranker: str = "salsa") -> SimpleNamespace:
    return SimpleNamespace(ranking=SimpleNamespace(scores=scores, ranker=ranker),
                           settings=SimpleNamespace(fusion=fusion))


def _paper(pid: str) -> SimpleNamespace:
    return SimpleNamespace(paper_id=pid)


def test_share_multiple_and_how_the_fusion_placed_it():
    t = _trace({"a": 0.6, "b": 0.3, "c": 0.1, "d": 0.0})
    assert score_sentence(t, _paper("a")) == (
        "60.0% of the total salsa score — 2.4× the average of the 4 papers in the pruned graph; "
        "placed by that and its text match with the whole query (restart-rrf fusion)")
    # below the average: the text match placed it
    assert score_sentence(t, _paper("c")).endswith("0.4× the average of the 4 papers in the pruned graph; "
                                                   "placed by its text match with the whole query (restart-rrf fusion)")
    assert score_sentence(_trace({"a": 0.6, "b": 0.4}, fusion="none", ranker="ppr"), _paper("b")) == (
        "40.0% of the random walk's time — 0.8× the average of the 2 papers in the pruned graph")


def test_tiny_and_zero_shares_never_print_as_zero_percent():
    scores = {"top": 1.0, "tiny": 0.0002, **{f"p{i}": 0.0 for i in range(10)}}
    t = _trace(scores)
    assert score_sentence(t, _paper("tiny")).startswith(
        "under 0.1% of the total salsa score — under 0.1× the average of the 12 papers")
    assert score_sentence(t, _paper("p3")) == (
        "none of the total salsa score (nothing in the pruned graph leads to it); placed by its text match "
        "with the whole query (restart-rrf fusion)")
