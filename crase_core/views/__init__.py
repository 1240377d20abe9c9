"""Presenting a run without Streamlit: graph view model, TeX rendering, exports, terminal text."""
