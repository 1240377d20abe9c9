"""The Streamlit explorer's helpers (presentation only; the pages are in ``pages/``, the library in ``crase_core``).

Kept out of ``pages/`` so that Streamlit never lists a helper module as a page.
"""
