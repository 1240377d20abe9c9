"""How papers and roles look on every page: colours, labels, escaping, short titles, demo queries.

Plain functions (no Streamlit), so they are unit-tested without a browser.
``md_escape`` is what makes paper text safe for Streamlit markdown.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from crase_core.graph_views import PRUNED_EDGE_COLOUR, ROLE_COLOURS, ROLE_LABELS  # noqa: F401 - colours of every page
from crase_core.records import NodeRecord
from crase_core.resources import demo_queries_file
from crase_core.tex import (  # noqa: F401 - the app's pages import these from here
    TEX_SEGMENT,
    authors_line,
    first_author_surname,
    safe_tex,
    shorten_words,
    tex_accents,
    tex_plain,
)

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
    """One of ``ROLE_COLOURS``' keys (:attr:`NodeRecord.display_role`, shared with the HTML export)."""
    return node.display_role


def short_title(title: str, limit: int = 60) -> str:
    t = " ".join(title.split())
    return t if len(t) <= limit else t[: limit - 1] + "…"


def load_demo_queries(path: Path = DEMO_QUERIES_FILE) -> list[dict[str, str]]:
    """Demo queries shipped with the app: ``[{"label", "query", "source"}]``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return []
    return [d for d in data if isinstance(d, dict) and d.get("query")]


def tex_markdown(text: object, *, in_table: bool = False) -> str:
    """``text`` as Streamlit markdown with its ``$…$`` math typeset and everything else literal.

    Every part outside a math segment goes through :func:`md_escape`; a math segment is kept only
    when :func:`safe_tex` accepts it (else it is shown as literal text, dollars included). Inside a
    markdown table cell (``in_table``) ``|`` in math becomes ``\\vert``. The result contains no HTML.
    """
    s = str(text).replace("\n", " ")
    out: list[str] = []
    pos = 0
    for m in TEX_SEGMENT.finditer(s):
        math = m.group(1)
        after = s[m.end() : m.end() + 1]
        before = s[m.start() - 1 : m.start()] if m.start() else ""
        # only where remark-math reads a math span: not glued to a digit after, nor escaped before
        if not safe_tex(math) or after.isdigit() or before == "\\":
            continue
        out.append(md_escape(s[pos : m.start()]))
        if in_table:
            math = math.replace("\\|", "\\Vert ").replace("|", "\\vert ")
        out.append(f"${math}$")
        pos = m.end()
    out.append(md_escape(s[pos:]))
    return "".join(out)
