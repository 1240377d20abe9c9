"""The fault suite counts its own fault kinds.

Every test here names the distinct fault kind(s) it injects with ``@pytest.mark.fault_kind("slug", …)``
(a kind: one hostile input or failure — a parametrised variant of the same fault is the same kind; a
test may cover several kinds, and several tests one kind). A test that checks the suite's machinery or
a fault-free baseline says so with ``@pytest.mark.fault_support``.

At the end of every run over this folder (``pytest tests/faults``, ``--collect-only`` too) the summary
says how many distinct kinds the collected tests cover, and how many of them had a failing test.
``python tests/faults/kinds.py`` prints the count and the kinds. ``test_fault_kinds.py`` checks that the
count and the kinds match docs/reliability.md's table, and that no test here is unaccounted for.

``CRASE_FAULT_KINDS_JSON=FILE``: collection writes ``{node id: {"kinds": [...], "support": bool}}`` to FILE.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
_STATE: dict[str, dict[str, list[str]]] = {"kinds": {}}
_FAILED: set[str] = set()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fault_kind(*kinds): the distinct fault kind(s) this test injects "
                                       "(tests/faults/conftest.py)")
    config.addinivalue_line("markers", "fault_support: a test of the fault suite's machinery or a baseline, "
                                       "not a fault kind")


def item_kinds(item: pytest.Item) -> list[str]:
    """The fault kinds a collected test names (its ``fault_kind`` markers, function and parameters)."""
    return sorted({str(k) for mark in item.iter_markers("fault_kind") for k in mark.args})


def _here(item: pytest.Item) -> bool:
    return Path(str(item.fspath)).resolve().parent == HERE


def pytest_collection_finish(session: pytest.Session) -> None:
    items = [item for item in session.items if _here(item)]
    kinds = {item.nodeid: item_kinds(item) for item in items}
    _STATE["kinds"] = kinds
    out = os.environ.get("CRASE_FAULT_KINDS_JSON")
    if out:
        data = {item.nodeid: {"kinds": kinds[item.nodeid], "support": item.get_closest_marker("fault_support") is not None}
                for item in items}
        Path(out).write_text(json.dumps(data, indent=1), encoding="utf-8")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed:
        _FAILED.add(report.nodeid)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    kinds = _STATE["kinds"]
    if not any(kinds.values()):
        return
    by_kind: dict[str, list[str]] = defaultdict(list)
    for nodeid, ks in kinds.items():
        for k in ks:
            by_kind[k].append(nodeid)
    failing = sorted(k for k, nodes in by_kind.items() if any(n in _FAILED for n in nodes))
    line = f"fault kinds: {len(by_kind)} distinct, injected by {sum(1 for ks in kinds.values() if ks)} tests"
    if failing:
        line += f"; {len(failing)} with a failing test: {', '.join(failing)}"
    terminalreporter.write_sep("-", line)
