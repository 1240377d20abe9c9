"""The fault suite's count of kinds matches docs/reliability.md: every row names tests that exist and
carry a kind, every kind has a row, the count the document states is the suite's own, and every test
here injects a kind or says it supports the suite."""

from __future__ import annotations

import re

import pytest
from kinds import REPO, by_kind, collect

DOC = REPO / "docs" / "reliability.md"
#: files whose tests are not yet registered (owned by work in flight); remove an entry once its tests carry
#: ``fault_kind`` markers and its rows are in the table
PENDING: set[str] = set()
MINIMUM_KINDS = 120


def _rows() -> list[tuple[str, list[str]]]:
    """(fault cell, test node ids) of every table row; ``…::name`` is a test of the row's previous file."""
    rows = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| ") or line.startswith(("| fault |", "| ---")):
            continue
        cells = line.split(" | ")
        refs, last_file = [], ""
        for ref in re.findall(r"`([^`]*::[^`]*)`", cells[-1]):
            path, _, name = ref.partition("::")
            path = last_file if path in ("", "…", "...") else path
            last_file = path
            refs.append(f"{path}::{name}")
        rows.append((cells[0].removeprefix("| "), refs))
    return rows


@pytest.fixture(scope="module")
def collected() -> dict[str, dict]:
    return collect()


def _matches(ref: str, nodeids: list[str]) -> list[str]:
    return [n for n in nodeids if n == ref or n.startswith(ref + "[")]


@pytest.mark.fault_support
def test_every_row_names_tests_that_exist_and_carry_a_kind(collected):
    nodeids = list(collected)
    for fault, refs in _rows():
        assert refs, f"the row {fault!r} names no test"
        row_kinds: set[str] = set()
        for ref in refs:
            path, _, name = ref.partition("::")
            if path.startswith("tests/faults/"):
                found = _matches(ref, nodeids)
                assert found, f"the row {fault!r} names {ref}, which is not a test of tests/faults"
                row_kinds |= {k for n in found for k in collected[n]["kinds"]}
            else:  # covered by a test outside the fault suite: it must exist, and is not counted here
                assert re.search(rf"^(?:async )?def {re.escape(name.split('[')[0])}\(",
                                 (REPO / path).read_text(encoding="utf-8"), re.M), f"{ref} does not exist"
        in_suite = [r for r in refs if r.startswith("tests/faults/")]
        assert not in_suite or row_kinds, f"the tests of the row {fault!r} carry no fault_kind marker"


@pytest.mark.fault_support
def test_the_table_and_the_suite_count_the_same_kinds(collected):
    kinds = by_kind(collected)
    documented: set[str] = set()
    for _, refs in _rows():
        for ref in refs:
            documented |= {k for n in _matches(ref, list(collected)) for k in collected[n]["kinds"]}
    assert sorted(set(kinds) - documented) == [], "kinds with no row in docs/reliability.md"
    m = re.search(r"\*\*(\d+) distinct fault kinds\*\*", DOC.read_text(encoding="utf-8"))
    assert m, "docs/reliability.md does not state the number of kinds (**N distinct fault kinds**)"
    assert int(m.group(1)) == len(kinds), f"the table says {m.group(1)} kinds; the suite counts {len(kinds)}"
    assert len(kinds) >= MINIMUM_KINDS


@pytest.mark.fault_support
def test_every_fault_test_is_accounted_for(collected):
    unmarked = [n for n, info in collected.items()
                if not info["kinds"] and not info["support"] and n.split("::")[0] not in PENDING]
    assert unmarked == [], ("tests in tests/faults without @pytest.mark.fault_kind(...) (or fault_support); "
                            f"add the kind and its row in docs/reliability.md: {unmarked}")
    both = [n for n, info in collected.items() if info["kinds"] and info["support"]]
    assert both == []
