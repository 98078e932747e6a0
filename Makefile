# Two commands do all set-up: `make run` and `make test`.
# The Makefile finds a Python >= 3.12 by itself (3.12 preferred): PATH first, then pyenv's
# versions (the pyenv shim of an inactive version fails its check and is skipped).
SHELL := /bin/bash
VENV := .venv
VPY := $(VENV)/bin/python
PORT ?= 7860

define FIND_PYTHON
for c in python3.12 python3.13 python3.14 python3 python; do \
  p=$$(command -v $$c 2>/dev/null) || continue; \
  "$$p" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null && { echo "$$p"; exit 0; }; \
done; \
root=$$(pyenv root 2>/dev/null || echo "$$HOME/.pyenv"); \
for p in $$(ls -d "$$root"/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -V); do \
  "$$p" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null && { echo "$$p"; exit 0; }; \
done; \
exit 1
endef
export FIND_PYTHON

.PHONY: run test venv dev lint format bench clean

$(VPY):
	@py=$$(bash -c "$$FIND_PYTHON") || { \
	  echo "error: Python >= 3.12 not found on PATH or in pyenv's versions." >&2; \
	  echo "       Install it (e.g. 'pyenv install 3.12' or 'apt-get install python3.12') and re-run." >&2; \
	  exit 1; }; \
	echo "using $$py"; "$$py" -m venv $(VENV)

$(VENV)/.installed: $(VPY) requirements.txt
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -r requirements.txt
	$(VPY) -m pip install --quiet --no-deps -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt
	$(VPY) -m pip install --quiet -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed
dev: $(VENV)/.installed-dev

run: venv
	$(VPY) app.py --port $(PORT)

test: dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/pytest

format: dev
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: dev
	$(VPY) bench/engine.py
	$(VPY) bench/graph_ingest.py
	$(VPY) bench/proxy_overhead.py
	$(VPY) bench/rollout_demo.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
