"""How papers and roles look on every page: colours, labels, escaping, short titles, demo queries.

Plain functions (no Streamlit), so they are unit-tested without a browser.
``md_escape`` is what makes paper text safe for Streamlit markdown.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from crase_core.records import NodeRecord
from crase_core.resources import demo_queries_file
from crase_core.views import tex
from crase_core.views.graph_views import PRUNED_EDGE_COLOUR, ROLE_COLOURS, ROLE_LABELS  # noqa: F401 - colours of every page
from crase_core.views.paper_text import (  # noqa: F401 - the app's pages import these from here
    authors_line,
    first_author_surname,
    shorten_words,
    tex_accents,
    tex_plain,
)

DEMO_QUERIES_FILE = demo_queries_file()

def md_escape(text: object) -> str:
    """``text`` as literal Streamlit markdown: HTML escaped, markdown/LaTeX syntax backslashed
    (:func:`crase_core.views.tex.markdown_escape`).

    ``<script>`` comes out as the visible text ``<script>``; ``$x$`` is not typeset;
    ``[a](javascript:…)`` is not a link.
    """
    return tex.markdown_escape(str(text))


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


# --- words, labels and TeX ---------------------------------------------------------------------------






def tex_markdown(text: object, *, in_table: bool = False) -> str:
    """Paper text (title, abstract, claim, citation context) as Streamlit markdown with its TeX rendered:
    :func:`crase_core.views.tex.to_markdown` — every text run escaped (:func:`md_escape`), the only HTML the
    renderer's own sup/sub/b/i/overline marks, so show it with ``unsafe_allow_html=True``. The same
    markdown works in a table cell (``in_table``: ``|`` is escaped everywhere)."""
    return tex.to_markdown(text)




# --- messages of the library, in the app's words ------------------------------------------------------------------
#: what a message of crase_core tells a command-line user to change, and where that is in the app
_APP_WORDS = (
    (re.compile(r": check that the server is running and that --base-url \(host, port and the /v1 path\) is right"),
     ". In this app: start that model server (its address is the endpoint's base_url in this server's settings "
     "file, [endpoints]), or choose another endpoint or the Offline backend under **Run settings → Model backend**."),
    (re.compile(r"\(--source local\)|--source local"), "(Run settings → Paper source: the local corpus)"),
    (re.compile(r"--s2-base-url"), "the Semantic Scholar address ([s2] base_url in this server's settings file)"),
    (re.compile(r"(?:set |that )?--base-url"), "the endpoint's base_url (this server's settings file, [endpoints])"),
    (re.compile(r"--model\b"), "the endpoint's model (this server's settings file)"),
    (re.compile(r"--api-key-env\b"), "the endpoint's api_key_env (this server's settings file)"),
    (re.compile(r"--retry-failures\b"), "Run settings → Retry failures"),
    (re.compile(r"--deadline\b"), "the server's deadline setting"),
)
_UNREACHABLE = "cannot reach the model endpoint"


def app_message(error: object) -> str:
    """A library error as the app says it: command-line flags (``--base-url``…) become the place in the app
    or the settings file where that is set, and a model endpoint that cannot be reached says what to do
    here (start it, or pick another endpoint or the offline backend under Run settings)."""
    text = str(error)
    for pattern, words in _APP_WORDS:
        text = pattern.sub(words, text)
    if _UNREACHABLE in text and "In this app:" not in text:
        text = text.rstrip(". ") + (". In this app: start that model server, or choose another endpoint or the "
                                    "Offline backend under **Run settings → Model backend**.")
    return text

