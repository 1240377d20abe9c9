#!/usr/bin/env bash
# CI: a normal (non-editable) install works outside the checkout.
#
# Builds the wheel from a clean copy of the checkout, installs it (`pip install`, not -e) into a fresh venv,
# then, from an empty temporary directory:
#   1. checks that every shipped resource (prompts, hep-th corpus and its embeddings, SciFact pairs, UI assets) resolves inside
#      the installed package and loads;
#   2. runs `crase query "noncommutative solitons" --k 5` and checks its ranked list;
#   3. starts `streamlit run app.py` on a free port from a copy of the app side only (app.py + app_pages/ + crase_app/, no
#      crase_core/, prompts/ or assets/ next to it: `streamlit run` puts the script's folder first on sys.path,
#      so a checkout's crase_core would shadow the installed one), checks /_stcore/health, the app page, a
#      full run of app.py (/_stcore/script-health-check) and the graph component's files, then stops it.
# Usage: bash .ci/install_check.sh   (PYTHON=python3.11 to pick the interpreter; KEEP=1 keeps the temp folder)
set -euo pipefail
checkout="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
start=$(date +%s)
tmp="$(mktemp -d "${TMPDIR:-/tmp}/crase-install-check.XXXXXX")"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    if [ "${KEEP:-0}" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
fail() { echo "install check FAILED: $*" >&2; exit 1; }
step() { echo "[install-check +$(( $(date +%s) - start ))s] $*"; }

# --- build and install -----------------------------------------------------------------------------------------
# The build sees what a fresh clone holds (tracked + untracked-but-not-ignored files) and leaves its build/
# and *.egg-info in the copy, not in the checkout.
mkdir -p "$tmp/src" "$tmp/dist" "$tmp/work" "$tmp/app"
if git -C "$checkout" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$checkout" && git ls-files -z -co --exclude-standard \
        | tar --null --ignore-failed-read -T - -cf -) | tar -C "$tmp/src" -xf -
else
    tar -C "$checkout" --exclude=./.venv --exclude=./build --exclude='*.egg-info' -cf - . | tar -C "$tmp/src" -xf -
fi
step "building the wheel"
"$PYTHON" -m venv "$tmp/venv"
py="$tmp/venv/bin/python"
"$py" -m pip wheel -q --no-deps -w "$tmp/dist" "$tmp/src"
wheel=("$tmp/dist"/crase_explorer-*.whl)
[ -f "${wheel[0]}" ] || fail "no wheel built"
step "wheel $(basename "${wheel[0]}"): $(stat -c %s "${wheel[0]}") bytes; installing it with its dependencies"
# dependencies come from pip's configured index/cache; --no-compile skips byte-compiling ~60 packages
"$py" -m pip install -q --no-compile "${wheel[0]}"

# --- 1. shipped resources resolve inside the installed package ------------------------------------------------
cd "$tmp/work"
export CRASE_CACHE_DIR="$tmp/cache" CRASE_RUNS_DIR="$tmp/runs"
unset CRASE_PROMPTS_DIR CRASE_CORPUS PYTHONPATH
step "resources"
"$py" - "$tmp/venv" <<'EOF'
import sys
from pathlib import Path

import crase_core
from crase_core import resources as r
from crase_core.evaluation.scifact import load_pairs
from crase_core.llm.prompts import PROMPT_NAMES, load_prompt

venv, package = Path(sys.argv[1]).resolve(), Path(crase_core.__file__).resolve().parent
assert package.is_relative_to(venv), f"crase_core imported from {package}, not from the venv"
files = [r.prompts_dir() / f"{n}.txt" for n in PROMPT_NAMES] + [
    r.corpus_dir() / "papers.jsonl.gz", r.corpus_dir() / "citations.tsv.gz", r.scifact_pairs_file(),
    r.demo_queries_file(), *(r.graph_component_dir() / f for f in ("index.html", "main.js", "vis-network.min.js")),
    *r.embeddings_dir().glob("hepth-*.f16.npy")]
assert any(f.name.endswith(".f16.npy") for f in files), "the hep-th corpus embeddings are not shipped"
for f in files:
    assert f.is_file() and f.resolve().is_relative_to(package), f"{f} missing or outside {package}"
assert [load_prompt(n).name for n in PROMPT_NAMES] == list(PROMPT_NAMES)
assert len(load_pairs(limit=5)) == 5
from crase_core.sources.local import LocalSource
assert LocalSource.open().embeddings is not None, "the shipped embeddings do not load for the embedded corpus"
from crase_core.encoder import load_encoder, tokenizer_file
assert tokenizer_file().resolve().is_relative_to(package), "the model's tokenizer is not shipped in the package"
assert load_encoder().encode(["tachyon condensation"]).shape == (1, 384), "the on-device model does not run"
print(f"  {len(files)} shipped files under {package}; the on-device model runs")
EOF

# --- 2. the CLI -------------------------------------------------------------------------------------------------
step "crase query"
"$tmp/venv/bin/crase" query "noncommutative solitons" --k 20 --quiet > "$tmp/query.txt" || { cat "$tmp/query.txt"; fail "crase query"; }
ranked=$(grep -cE '^ *[0-9]+\. \[[0-9.]+\] ' "$tmp/query.txt" || true)
[ "$ranked" = 20 ] || { cat "$tmp/query.txt"; fail "expected 20 ranked papers, got $ranked"; }
grep -qE '^Source: +local:hepth@' "$tmp/query.txt" || { cat "$tmp/query.txt"; fail "not the embedded hep-th corpus"; }
# every one of the top 5 is about the query, and the field's founding paper (Gopakumar–Minwalla–Strominger) is in
# the top 20 (the default's rank fusion puts it at 14; the walk alone at 1: docs/benchmarks.md)
on_topic=$(grep -E '^ *[1-5]\. \[' "$tmp/query.txt" | grep -ciE 'non-?commutative' || true)
[ "$on_topic" = 5 ] || { cat "$tmp/query.txt"; fail "only $on_topic of the top 5 are about noncommutative solitons"; }
grep -qE '^ *[0-9]+\. .* — 0003160$' "$tmp/query.txt" || { cat "$tmp/query.txt"; fail "Noncommutative Solitons (hep-th/0003160) not in the top 20"; }
sed -n '/^ *1\. /p' "$tmp/query.txt" | sed 's/^/  /'

# --- 3. the Streamlit app ---------------------------------------------------------------------------------------
cp "$checkout/app.py" "$tmp/app/"
(cd "$checkout" && tar --exclude=__pycache__ -cf - app_pages crase_app) | tar -C "$tmp/app" -xf -
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
step "streamlit run $tmp/app/app.py on port $port"
"$tmp/venv/bin/streamlit" run "$tmp/app/app.py" --server.headless true --server.port "$port" \
    --server.address 127.0.0.1 --server.scriptHealthCheckEnabled true --browser.gatherUsageStats false \
    > "$tmp/streamlit.log" 2>&1 &
server_pid=$!
url="http://127.0.0.1:$port"
for _ in $(seq 1 120); do
    [ "$(curl -fsS "$url/_stcore/health" 2>/dev/null)" = ok ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/streamlit.log"; fail "streamlit exited"; }
    sleep 0.5
done
[ "$(curl -fsS "$url/_stcore/health" 2>/dev/null)" = ok ] || { cat "$tmp/streamlit.log"; fail "/_stcore/health"; }
curl -fsS "$url/" | grep -q '<div id="root">' || fail "the app page did not respond"
# runs app.py (imports every page helper, the Search page with its demo queries) in a server-side session
health=$(curl -sS --max-time 120 "$url/_stcore/script-health-check" || true)
[ "$health" = ok ] || { cat "$tmp/streamlit.log"; fail "app.py did not run: $health"; }
# the graph component (declared by crase_app/shared.py) is served from the installed package
curl -fsS "$url/component/crase_app.shared.crase_graph/index.html" | grep -q 'main.js' || fail "graph component index.html"
curl -fsS -o /dev/null "$url/component/crase_app.shared.crase_graph/vis-network.min.js" || fail "graph component vis-network"
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
step "install check passed in $(( $(date +%s) - start )) s"
