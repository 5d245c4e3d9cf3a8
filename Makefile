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
# e.g. make demo DEMO_ARGS='--mlmd mysql://mlmd@127.0.0.1:3306/gnn_demo' (README: MLMD on a server)
DEMO_ARGS ?=
CONTAINER_ARGS ?=

.PHONY: setup demo demo-containers test test-fast test-chroot stack clean

setup:
	@GNN_VENV=$(VENV) ./scripts/bootstrap.sh

demo: setup
	$(PY) -m pipelines.demo.run_local $(DEMO_ARGS)

# The demo pipeline compiled for Kubeflow/Vertex and run task by task in the image built from
# deploy/Dockerfile with podman (root; installs podman if missing). deploy/README.md.
demo-containers: setup
	$(PY) -m deploy.run_in_containers --install $(CONTAINER_ARGS)

test: setup
	$(PY) -m pytest -v -rs --durations=15 $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m pytest -v -m "not slow" $(PYTEST_ARGS)

# The tfx121 stack's `make test` inside a Debian 13 chroot (root; for machines with glibc < 2.39).
test-chroot:
	./scripts/chroot_ci.sh make test PYTEST_ARGS='$(PYTEST_ARGS)'

stack:
	@./scripts/stack.sh explain; echo "venv: $(VENV)"

clean:
	rm -rf demo_output .pytest_cache
