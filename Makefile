# The two commands of the README: `make demo` and `make test`.
# Both set up the venv of this machine's stack (scripts/stack.sh, docs/stacks.md) on first use:
#   tfx121 (TFX 1.21 / Python 3.13, ./.venv-tfx121) where glibc >= 2.39 and Python 3.13 exist,
#   tfx116 (TFX 1.16 / Python 3.10, ./.venv) otherwise.  Override: make test GNN_STACK=tfx116
SHELL := /bin/bash
ifndef GNN_STACK
GNN_STACK := $(shell ./scripts/stack.sh name)
endif
VENV ?= $(if $(filter tfx116,$(GNN_STACK)),.venv,.venv-$(GNN_STACK))
PY := $(VENV)/bin/python
export TF_USE_LEGACY_KERAS := 1
export TF_CPP_MIN_LOG_LEVEL ?= 2
PYTEST_ARGS ?=
# e.g. make demo DEMO_ARGS='--mlmd mysql://mlmd@127.0.0.1:3306/gnn_demo' (docs/mlmd.md)
DEMO_ARGS ?=
CONTAINER_ARGS ?=

.PHONY: setup demo demo-containers test test-all test-fast test-chroot lint stack clean

setup:
	@GNN_VENV=$(VENV) ./scripts/bootstrap.sh

demo: setup
	$(PY) -m pipelines.demo.run_local $(DEMO_ARGS)

# The demo pipeline compiled for Kubeflow/Vertex and run task by task in the image built from
# kubeflow/Dockerfile with podman (root; installs podman if missing). docs/deployment.md.
demo-containers: setup
	$(PY) -m devtools.run_in_containers --install $(CONTAINER_ARGS)

# `make test` runs this stack's tier (docs/stacks.md, "Test tiers"): every test on the current
# stack (tfx121), the compatibility tier on the legacy one (tfx116: 'compat').
# Tests that change the machine (apt-get, a podman image, a MariaDB server; marker `host`)
# skip with their reason unless GNN_REQUIRE_CONTAINERS / GNN_REQUIRE_MARIADB are 1:
# `make test-all` sets both and runs every test on this stack.
# The tests run on 2 pytest-xdist workers, a test file per worker at a time (module fixtures,
# such as one shared pipeline run, are made once). TEST_WORKERS=1: one process.
TEST_TIER ?= $(if $(filter tfx116,$(GNN_STACK)),compat,)
TEST_WORKERS ?= 2
test: setup
	@start=$$(date +%s); \
	$(PY) -m pytest -v -rs --durations=40 $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile) $(if $(TEST_TIER),-m "$(TEST_TIER)") $(PYTEST_ARGS); \
	rc=$$?; echo "make test: $(GNN_STACK), tier '$(or $(TEST_TIER),every test)': exit $$rc after $$(( $$(date +%s) - start )) s (skipped tests and their reasons: 'short test summary info' above)"; \
	exit $$rc

test-all:
	$(MAKE) test TEST_TIER= GNN_REQUIRE_CONTAINERS=1 GNN_REQUIRE_MARIADB=1

test-fast: setup
	$(PY) -m pytest -v -m "not slow" $(PYTEST_ARGS)

# The package's one linter (pyproject.toml [tool.ruff]); .ci/run fails on any finding.
lint: setup
	$(VENV)/bin/ruff check

# The tfx121 stack's `make test` inside a Debian 13 chroot (root; for machines with glibc < 2.39).
test-chroot:
	./scripts/chroot_ci.sh make test PYTEST_ARGS='$(PYTEST_ARGS)'

stack:
	@./scripts/stack.sh explain; echo "venv: $(VENV)"

clean:
	rm -rf demo_output quickstart_output .pytest_cache
