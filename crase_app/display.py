"""How papers and roles look on every page: colours, labels, escaping, short titles, demo queries.

Plain functions (no Streamlit), so they are unit-tested without a browser.
``md_escape`` is what makes paper text safe for Streamlit markdown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from crase_core import tex
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

def md_escape(text: object) -> str:
    """``text`` as literal Streamlit markdown: HTML escaped, markdown/LaTeX syntax backslashed
    (:func:`crase_core.tex.markdown_escape`).

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


# --- words, labels and TeX ---------------------------------------------------------------------------
def shorten_words(text: str, limit: int = 60) -> str:
    """``text`` on one line, cut at a word boundary to at most ``limit`` characters (``…`` marks a cut).

    Never cuts inside a word unless the first word alone is longer than ``limit``.
    """
    t = " ".join(str(text).split())
    if len(t) <= limit:
        return t
    cut = t[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 3:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-–—") + "…"


def tex_accents(text: str) -> str:
    """Author names with TeX accents as letters (``Ba\\~nados`` → ``Bañados``): :func:`crase_core.tex.to_plain`."""
    return tex.to_plain(text)


def first_author_surname(authors: Sequence[str]) -> str:
    """The first author's family name (``"J. M. Maldacena"`` → ``"Maldacena"``); ``""`` when unknown."""
    for a in authors:
        name = re.sub(r"\(.*", "", tex_accents(str(a)))  # "(Harvard U.)", "(DAMTP" — affiliations
        name = re.sub(r"\s+(?:Jr|Sr|II|III|IV)\.?$", "", " ".join(name.replace("<", " ").replace(">", " ").split()))
        if not name:
            continue
        if "," in name:  # "Maldacena, J."
            return name.split(",", 1)[0].strip()
        return name.replace(".", ". ").split()[-1].strip(".")
    return ""


def tex_markdown(text: object, *, in_table: bool = False) -> str:
    """Paper text (title, abstract, claim, citation context) as Streamlit markdown with its TeX rendered:
    :func:`crase_core.tex.to_markdown` — every text run escaped (:func:`md_escape`), the only HTML the
    renderer's own sup/sub/b/i/overline marks, so show it with ``unsafe_allow_html=True``. The same
    markdown works in a table cell (``in_table``: ``|`` is escaped everywhere)."""
    return tex.to_markdown(text)


def tex_plain(text: object) -> str:
    """Paper text for plain-text places (graph labels, tooltips, table cells): :func:`crase_core.tex.to_plain`,
    TeX in Unicode (``$R^2$`` → ``R²``, ``Ba\\~nados`` → ``Bañados``); never HTML."""
    return tex.to_plain(text)


# --- messages of the library, in the app's words ------------------------------------------------------------------
#: what a message of crase_core tells a command-line user to change, and where that is in the app
_APP_WORDS = (
    (re.compile(r": check that the server is running and that --base-url \(host, port and the /v1 path\) is right"),
     ". In this app: start that model server (its address is the endpoint's base_url in this server's settings "
     "file, [endpoints]), or choose another endpoint or the Offline backend under **Run settings → Model backend**."),
    (re.compile(r"\(--source local\)|--source local"), "(Run settings → Paper source: the embedded hep-th corpus)"),
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

