"""Crase Explorer — the Streamlit front end. Run: ``streamlit run app.py``.

This file is the router only: it registers the pages found in ``app_pages/[0-9]*.py`` with
``st.navigation`` (``0_Search.py`` is the default page), draws the sidebar shared by every page and runs
the page chosen.
"""

from __future__ import annotations

import re
from pathlib import Path

import streamlit as st

from crase_app.corpora import corpus_picker
from crase_app.display import md_escape
from crase_core.gc_pause import gc_deferred
from crase_core.resources import page_icon_file

ROOT = Path(__file__).resolve().parent
PAGE_ICONS = {"search": ":material/search:", "evidence": ":material/hub:", "seeds": ":material/spa:",
              "ranking": ":material/leaderboard:", "audit": ":material/fact_check:", "runs": ":material/history:",
              "benchmark": ":material/straighten:"}


def discover_pages() -> list:
    """One ``st.Page`` per ``app_pages/[0-9]*.py``, in file order; the Search page is the default (at ``/``)."""
    pages = []
    for path in sorted((ROOT / "app_pages").glob("[0-9]*.py")):
        title = re.sub(r"^\d+_", "", path.stem).replace("_", " ")
        icon = next((v for k, v in PAGE_ICONS.items() if k in title.lower()), ":material/description:")
        default = title == "Search"
        pages.append(st.Page(str(path.relative_to(ROOT)), title=title, icon=icon, default=default,
                             url_path="search" if default else None))
    return pages


# the icon is a shipped file: a material or emoji icon makes the browser fetch it from a font server
st.set_page_config(page_title="Crase Explorer", page_icon=str(page_icon_file()), layout="wide")
_pages = discover_pages()
with st.sidebar:
    corpus_picker()  # the corpus every page searches and names (kept in the session across pages)
    # a widget's state is dropped on pages that do not draw it, so the name lives in a plain key
    st.text_input("Auditor name", value=st.session_state.get("auditor", ""), key="auditor_input",
                  help="Your name as recorded with audit verdicts (stored locally).",
                  on_change=lambda: st.session_state.update(auditor=st.session_state["auditor_input"].strip()))
    if st.session_state.get("trace") is not None:
        t = st.session_state["trace"]
        st.caption(f"Open run: {md_escape(t.query[:90])}{'…' if len(t.query) > 90 else ''}")
with gc_deferred():  # collected once after the run (Streamlit's postScriptGC), not several times during it
    st.navigation(_pages).run()
