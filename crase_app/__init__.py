"""The Streamlit explorer's helpers (presentation only; the pages are in ``app_pages/``, the library in ``crase_core``).

Neither folder is called ``pages/``: Streamlit lists every file of a ``pages/`` folder next to ``app.py`` in the
sidebar until the app's own navigation arrives (helpers included, and the Search page as "app"), so the pages
live in ``app_pages/`` and are registered by ``app.py`` with ``st.navigation`` only.
"""
