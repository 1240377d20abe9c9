"""How papers and roles look on every page: colours, labels, escaping, short titles, demo queries.

Plain functions (no Streamlit), so they are unit-tested without a browser.
``md_escape`` is what makes paper text safe for Streamlit markdown.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from pathlib import Path

from crase_core.records import NodeRecord
from crase_core.resources import demo_queries_file

# --- colours shared by the graph, legends and charts ------------------------------------------------
ROLE_COLOURS: dict[str, str] = {
    "seed_kept": "#2a9d8f",  # teal
    "seed_pruned": "#e76f51",  # burnt orange
    "expanded": "#4f6d9a",  # slate blue
    "expanded_pruned": "#b8bfca",  # grey
    "text": "#9b6bb5",  # muted violet: full-query text match outside the citation graph
}
ROLE_LABELS: dict[str, str] = {
    "seed_kept": "seed, kept",
    "seed_pruned": "seed, pruned",
    "expanded": "expanded (neighbour)",
    "expanded_pruned": "expanded, pruned",
    "text": "text match (outside the graph)",
}
PRUNED_EDGE_COLOUR = "#d08c7f"

DEMO_QUERIES_FILE = demo_queries_file()

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>$:])")


def md_escape(text: object) -> str:
    """``text`` as literal Streamlit markdown: HTML escaped, markdown/LaTeX syntax backslashed.

    ``<script>`` comes out as the visible text ``<script>``; ``$x$`` is not typeset;
    ``[a](javascript:…)`` is not a link.
    """
    s = html.escape(str(text), quote=False)
    return _MD_SPECIAL.sub(r"\\\1", s).replace("\n", " ")


def node_role(node: NodeRecord) -> str:
    """One of ``ROLE_COLOURS``' keys."""
    if node.role == "seed":
        return "seed_kept" if node.kept else "seed_pruned"
    if node.role == "text":
        return "text"
    return "expanded" if node.kept else "expanded_pruned"


def short_title(title: str, limit: int = 60) -> str:
    t = " ".join(title.split())
    return t if len(t) <= limit else t[: limit - 1] + "…"


def authors_line(authors: Sequence[str], limit: int = 3) -> str:
    if not authors:
        return "unknown authors"
    if len(authors) <= limit:
        return ", ".join(authors)
    return ", ".join(authors[:limit]) + f" et al. (+{len(authors) - limit})"


def load_demo_queries(path: Path = DEMO_QUERIES_FILE) -> list[dict[str, str]]:
    """Demo queries shipped with the app: ``[{"label", "query", "source"}]``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return []
    return [d for d in data if isinstance(d, dict) and d.get("query")]
