# One command each: `make app` (set up + run the explorer), `make test` (set up + run the tests).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup app test lint bench install-check

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test]"
	touch $@

# setup also builds the embedded corpus's memory-mapped store and text index in the cache (`crase corpus
# build`: several seconds the first time, under a second once built), so the app's first query does not
setup: $(VENV)/.installed
	$(PY) -m crase_core.cli corpus build

app: setup
	$(VENV)/bin/streamlit run app.py

test: setup
	$(PY) -m pytest

lint: setup
	$(VENV)/bin/ruff check .

bench: setup
	$(PY) benchmarks/core_bench.py

install-check:  # pip install . (not editable) into a fresh venv; crase + the app from a temp folder
	bash .ci/install_check.sh
