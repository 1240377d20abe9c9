"""A fresh process loads only what it uses (issue 31): importing the pipeline, and answering a question whose
claims and matrices are cached, load none of the heavy libraries — scipy.sparse, pandas, numpy.f2py, the HTTP
client, pydantic, networkx, the model clients, the on-device model's runtime, multiprocessing. Each is imported
where it is used (an uncached edge scored offline, a remote source, a trace written or read, an export, a BibTeX
library, a corpus import on several processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

#: never loaded by ``import crase_core.pipeline`` nor by a cached ``crase query``
HEAVY = ("scipy", "scipy.sparse", "pandas", "numpy.f2py", "numpy.testing", "httpx", "pydantic", "networkx",
         "openai", "bibtexparser", "pylatexenc", "onnxruntime", "tokenizers", "torch", "sentence_transformers",
         "streamlit", "multiprocessing", "concurrent.futures.process")

_REPORT = f"import json, sys; print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"


def _fresh(code: str, cache: Path) -> list[str]:
    env = {**os.environ, "CRASE_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_pipeline_loads_no_heavy_module(tmp_path):
    assert _fresh("import crase_core.pipeline, crase_core.runtime, crase_core.cli.main\n" + _REPORT, tmp_path) == []


def test_a_cached_query_in_a_fresh_process_loads_no_heavy_module(tiny_corpus_dir, tmp_path):
    """The first run scores its edges (scipy may load then); the second, in a new process, reads them all from
    the cache and loads none of :data:`HEAVY`."""
    run = ("import contextlib, io\nfrom crase_core.cli.main import main\n"
           "with contextlib.redirect_stdout(io.StringIO()):\n"
           f"    assert main(['query', 'string duality', '--quiet', '--corpus', {str(tiny_corpus_dir)!r}]) == 0\n")
    _fresh(run + _REPORT, tmp_path)
    assert _fresh(run + _REPORT, tmp_path) == []
