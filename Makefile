# The two commands of the README: `make demo` and `make test`.
# Both set up ./.venv (Python 3.10 discovery + pinned install) on first use.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export TF_USE_LEGACY_KERAS := 1
export TF_CPP_MIN_LOG_LEVEL ?= 2
PYTEST_ARGS ?=

.PHONY: setup demo test test-fast clean

setup:
	@GNN_VENV=$(VENV) ./scripts/bootstrap.sh

demo: setup
	$(PY) -m pipelines.demo.run_local

test: setup
	$(PY) -m pytest -v -rs --durations=15 $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m pytest -v -m "not slow" $(PYTEST_ARGS)

clean:
	rm -rf demo_output .pytest_cache
