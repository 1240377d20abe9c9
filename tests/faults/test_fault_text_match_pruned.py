"""The question's strongest text match is never lost to pruning (issue 34, item 9; issue 30, item 6).

A corpus in Cyrillic only, made with ``crase corpus import --format jsonl``: the search finds the exact title match
for "чёрных дыр", the word-overlap scorer prunes every citation edge, and the run used to print "No results.".
The question's own top hits stay in the ranking by their text match, and the run says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_tools import crase

from crase_core import trace as trace_io

PAPERS = [
    {"id": "c1", "title": "Энтропия чёрных дыр",
     "abstract": "Мы вычисляем энтропию чёрных дыр в теории струн. Результат совпадает с формулой Бекенштейна.",
     "year": 1998},
    {"id": "c2", "title": "Излучение Хокинга",
     "abstract": "Квантовые поля вблизи горизонта порождают тепловое излучение.", "year": 1996},
    {"id": "c3", "title": "Голографический принцип",
     "abstract": "Число степеней свободы ограничено площадью границы области.", "year": 1997},
    {"id": "c4", "title": "Суперсимметричные калибровочные теории",
     "abstract": "Изучаются дуальности в четырёх измерениях.", "year": 1999},
    {"id": "c5", "title": "Браны и компактификация",
     "abstract": "Рассматриваются D-браны на многообразиях Калаби-Яу.", "year": 1999},
]
CITATIONS = [("c1", "c2"), ("c1", "c3"), ("c3", "c2"), ("c4", "c1"), ("c5", "c4")]


@pytest.fixture
def cyrillic_corpus(capsys, tmp_path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "papers.jsonl").write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in PAPERS),
                                      encoding="utf-8")
    (src / "citations.tsv").write_text("".join(f"{u}\t{v}\n" for u, v in CITATIONS), encoding="utf-8")
    r = crase(capsys, "corpus", "import", src, tmp_path / "corpus", "--format", "jsonl")
    assert r.code == 0, r.err
    return tmp_path / "corpus"


@pytest.mark.fault_kind("query-best-match-every-edge-pruned")
def test_the_exact_title_match_survives_when_every_edge_is_pruned(capsys, cyrillic_corpus, tmp_path):
    run = tmp_path / "run.json"
    r = crase(capsys, "query", "чёрных дыр", "--corpus", cyrillic_corpus, "--json", run)
    assert r.code == 0, r.err
    assert "No results." not in r.out
    assert "  1. [" in r.out and "Энтропия чёрных дыр (1998) — c1" in r.out
    trace = trace_io.load(run)
    assert trace.edges and not any(e.kept for e in trace.edges)  # the fault: every edge pruned
    assert [x.paper_id for x in trace.results][:1] == ["c1"]
    # the reason says what keeps it: its text match, not an edge
    assert "kept by its text match (#1 of the question's own search)" in trace.results[0].reason
    seed = next(s for s in trace.seeds if s.paper_id == "c1")
    assert (seed.fate, seed.fate_reason) == ("kept", "kept by its text match (#1 of the question's own search): all "
                                             "3 of its edges were pruned")
    assert trace.node("c1").text_match and trace.node("c1").kept
    # `crase show --why` and a re-rank with no verdict say and do the same
    why = crase(capsys, "show", run, "--why", "c1")
    assert why.code == 0 and "kept by its text match" in why.out
    again = crase(capsys, "rerank", run, "--json", tmp_path / "again.json")
    assert again.code == 0, again.err
    assert [x.paper_id for x in trace_io.load(tmp_path / "again.json").results] == [x.paper_id for x in trace.results]
