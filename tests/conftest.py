"""Shared fixtures: an isolated cache dir per test session, the embedded corpus, a tiny corpus."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from app_threads import join_prefetch_threads
from tiny_corpus import write_corpus

# Isolate every test session from the user's cache before crase_core reads it.
_SESSION_CACHE = Path(os.environ.get("CRASE_TEST_CACHE_DIR", "")) if os.environ.get("CRASE_TEST_CACHE_DIR") else None


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory):
    root = _SESSION_CACHE or tmp_path_factory.mktemp("crase-cache")
    old = os.environ.get("CRASE_CACHE_DIR")
    os.environ["CRASE_CACHE_DIR"] = str(root)
    yield root
    if old is None:
        os.environ.pop("CRASE_CACHE_DIR", None)
    else:
        os.environ["CRASE_CACHE_DIR"] = old


@pytest.fixture(scope="module", autouse=True)
def _pool_fill_off(request):
    """The tiny test corpora hold fewer than k papers, so the sparse-pool fill
    (``crase_core.stages.expansion.POOL_FILL``) would add to every graph they pin: tests run without it unless
    their module sets ``POOL_FILL_ON = True`` (tests/test_pool_fill.py). Module-scoped, so that module-scoped
    fixtures that run a query see it too."""
    if getattr(request.module, "POOL_FILL_ON", False):
        yield
        return
    from crase_core.stages import expansion

    patch = pytest.MonkeyPatch()
    patch.setattr(expansion, "POOL_FILL", "off")
    yield
    patch.undo()


@pytest.fixture(scope="session")
def hepth_source(_isolated_cache):
    """The embedded hep-th corpus with its BM25 index (built once per session)."""
    from crase_core.sources.local import LocalSource

    return LocalSource.open()


@pytest.fixture(scope="session")
def hepth_engine(hepth_source):
    from crase_core.backends import offline_backend
    from crase_core.cache import ResultCache, cache_root
    from crase_core.pipeline import Engine
    from crase_core.store.termstats import TermStats

    return Engine(hepth_source, offline_backend(TermStats.from_index(hepth_source.text_index)),
                  ResultCache(cache_root() / "results-hepth"))


@pytest.fixture(scope="session")
def tiny_corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("tiny") / "tiny")


@pytest.fixture(scope="session")
def tiny_source(tiny_corpus_dir, _isolated_cache):
    from crase_core.sources.local import LocalSource

    return LocalSource.open(tiny_corpus_dir)


@pytest.fixture
def fake():
    """A fresh local HTTP server replaying the Semantic Scholar Graph API (tests/fixtures/s2/fake_api.py)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "s2"))
    from fake_api import FakeS2

    api = FakeS2()
    api.base_url = api.start()
    yield api
    api.stop()


@pytest.fixture()
def llm():
    """A fake OpenAI-compatible server (crase_core/testing/fake_openai.py) answering at once; stopped after the test."""
    from crase_core.testing.fake_openai import FakeOpenAI

    server = FakeOpenAI(latency=0.0)
    server.start()
    yield server
    server.stop()


@pytest.fixture()
def app_env(tmp_path, monkeypatch):
    """The Streamlit app over the hostile fixture corpus, runs saved in a temp folder (yielded); caches cleared."""
    import streamlit as st

    root = Path(__file__).resolve().parent.parent
    monkeypatch.setenv("CRASE_CORPUS", str(root / "tests" / "fixtures" / "hostile_corpus"))
    monkeypatch.setenv("CRASE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(root)
    st.cache_resource.clear()
    st.cache_data.clear()
    yield tmp_path / "runs"
    st.cache_resource.clear()


@pytest.fixture(autouse=True)
def _no_prefetch_across_tests():
    """A prefetch left running by one test never overlaps the next test's page compile (app_threads)."""
    join_prefetch_threads()
    yield
    join_prefetch_threads()
