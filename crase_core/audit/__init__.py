"""Auditors' verdicts and the re-ranking they cause."""
