"""Print the fault kinds the fault suite covers: ``python tests/faults/kinds.py [--list]``.

Collects tests/faults (nothing runs) and counts the distinct ``@pytest.mark.fault_kind`` slugs; with
``--list``, every kind and the tests that inject it. See tests/faults/conftest.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def collect() -> dict[str, dict]:
    """``{node id: {"kinds": [...], "support": bool}}`` of every test under tests/faults (a ``pytest
    --collect-only`` subprocess)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "kinds.json"
        env = {**os.environ, "CRASE_FAULT_KINDS_JSON": str(out)}
        r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                            str(HERE)], cwd=str(REPO), env=env, capture_output=True, text=True, timeout=600)
        if not out.exists():
            raise RuntimeError(f"collecting tests/faults failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        return json.loads(out.read_text(encoding="utf-8"))


def by_kind(collected: dict[str, dict]) -> dict[str, list[str]]:
    """kind → the node ids that inject it, sorted by kind."""
    out: dict[str, list[str]] = defaultdict(list)
    for nodeid, info in collected.items():
        for k in info["kinds"]:
            out[k].append(nodeid)
    return dict(sorted(out.items()))


def main() -> None:
    kinds = by_kind(collect())
    print(f"{len(kinds)} distinct fault kinds in tests/faults")
    if "--list" in sys.argv[1:]:
        for k, nodes in kinds.items():
            print(f"  {k}: {len(nodes)} test(s)")


if __name__ == "__main__":
    main()
