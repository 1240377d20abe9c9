"""The Runs page's lineage over crafted run folders: two runs that name each other as parent (a loop no re-ranking
makes) are said in words, not hidden (was: neither shown, without a word); a chain of 1,500 re-ranked runs (a long
stretch of auditing, or a crafted folder) is listed whole (was: RecursionError). The walk is
:func:`crase_core.runs.lineage`; the page shows it (Streamlit's AppTest, no browser)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from crase_core.runs import RunInfo, cycle_text, lineage

ROOT = Path(__file__).resolve().parents[2]
CHAIN = 1500


def _info(run_id: str, parent: str = "", when: str = "2026-01-01T00:00:00") -> RunInfo:
    return RunInfo(name=f"r-{run_id}", path=Path(f"r-{run_id}.json"), query="q", created_at=when, run_id=run_id,
                   source="local", backend="offline", counts={"edges": 4, "edges_kept": 3}, parent_run_id=parent,
                   verdicts_applied=1 if parent else 0)


def _stamp(i: int) -> str:
    return f"2026-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}"


@pytest.mark.fault_kind("lineage-cycle")
def test_two_runs_that_name_each_other_as_parent_are_said_in_words():
    runs = [_info("aaaa", "bbbb"), _info("bbbb", "aaaa"), _info("cccc", "aaaa", "2026-01-02T00:00:00"),
            _info("root"), _info("kid", "root")]
    rows = lineage(runs)
    assert [(r.depth, r.run_id, r.cycle) for r in rows] == [
        (0, "root", ()), (1, "kid", ()),
        (0, "bbbb", ("bbbb", "aaaa")),  # the loop, ancestor first: aaaa is re-ranked from bbbb, bbbb from aaaa
        (1, "cccc", ()),  # what hangs off the loop is still listed
    ]
    assert cycle_text(rows[2]) == ("2 runs are each re-ranked from the one before them, in a loop (bbbb → aaaa → "
                                   "bbbb): no re-ranking makes a loop (their sidecar files were crafted or edited), "
                                   "so none of them is the first of its line")
    (alone,) = lineage([_info("self", "self")])
    assert cycle_text(alone).startswith("run self names itself as the run it was re-ranked from")


@pytest.mark.fault_kind("lineage-long-chain")
def test_a_chain_of_1500_runs_is_listed_whole_without_recursion():
    runs = [_info(f"r{i:05d}", f"r{i - 1:05d}" if i else "", _stamp(i)) for i in range(CHAIN)]
    assert sys.getrecursionlimit() < CHAIN  # a recursive walk would overflow here
    rows = lineage(list(reversed(runs)))
    assert [(r.depth, r.run_id) for r in rows] == [(i, f"r{i:05d}") for i in range(CHAIN)]


def _write_run(folder: Path, info: RunInfo) -> None:
    (folder / f"{info.name}.json").write_text("{}", encoding="utf-8")  # listing reads the sidecar only
    (folder / f"{info.name}.meta.json").write_text(json.dumps({
        "query": info.query, "created_at": info.created_at, "run_id": info.run_id, "source": info.source,
        "backend": info.backend, "counts": info.counts, "outcome": info.run_id, "parent_run_id": info.parent_run_id,
        "verdicts_applied": info.verdicts_applied}), encoding="utf-8")


@pytest.mark.fault_kind("lineage-cycle", "lineage-long-chain")
def test_the_runs_page_shows_a_loop_and_a_long_chain(tmp_path, monkeypatch):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    runs = tmp_path / "runs"
    runs.mkdir()
    for info in [_info("loopA", "loopB"), _info("loopB", "loopA"),
                 *(_info(f"c{i:05d}", f"c{i - 1:05d}" if i else "", _stamp(i)) for i in range(CHAIN))]:
        _write_run(runs, info)
    monkeypatch.setenv("CRASE_RUNS_DIR", str(runs))
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    st.cache_resource.clear()
    st.cache_data.clear()
    page = AppTest.from_file(str(ROOT / "app_pages" / "5_Runs.py"), default_timeout=120).run()
    assert not page.exception, page.exception
    text = "\n".join(m.value for m in page.markdown).replace("\\", "")  # without Markdown's escapes
    assert "- ⚠ 2 runs are each re-ranked from the one before them, in a loop (loopB → loopA → loopB)" in text
    assert "`c00000`" in text and f"generation {CHAIN - 1} · " in text  # the whole chain, its last run too
    assert text.count("- → ") == CHAIN - 1
