"""The fault suite's registry of fault kinds (placeholder; filled in below)."""

from __future__ import annotations


def pytest_configure(config):
    config.addinivalue_line("markers", "fault_kind(*kinds): the distinct fault kinds this test injects")
