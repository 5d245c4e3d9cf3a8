#!/usr/bin/env bash
# Creates the venv of this machine's stack with its pinned lock and installs this package.
#
# Stack choice (scripts/stack.sh, docs/stacks.md): $GNN_STACK=tfx121|tfx116 if set; else
# tfx121 (TFX 1.21 / Python 3.13, venv .venv-tfx121) where glibc >= 2.39 and a Python 3.13
# is found, otherwise tfx116 (TFX 1.16 / Python 3.10, venv .venv).
# $GNN_VENV / $GNN_LOCK / $GNN_PYTHON override the venv dir, lock file and interpreter.
#
# Idempotent: re-running is a no-op unless the lock file or pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."

STACK=$(./scripts/stack.sh name)
EXPLAIN=$(./scripts/stack.sh explain)
export GNN_STACK=$STACK
VENV=${GNN_VENV:-$(./scripts/stack.sh venv)}
LOCK=${GNN_LOCK:-$(./scripts/stack.sh lock)}

stamp="$VENV/.gnn-installed"
want=$(cat "$LOCK" pyproject.toml | sha256sum | cut -d' ' -f1)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi

PY=$(./scripts/stack.sh python)
echo "bootstrap: $EXPLAIN; using $PY ($("$PY" -c 'import platform; print(platform.python_version())'))" >&2
if [[ ! -x "$VENV/bin/python" ]]; then
  "$PY" -m venv "$VENV"
fi
log="$VENV/install.log"
echo "bootstrap: installing the pinned set from $LOCK into $VENV (log: $log)" >&2
start=$(date +%s)
# uv (pinned in requirements/installer.txt) installs the lock's wheels in parallel and
# compiles no bytecode up front: several times faster than pip. pip installs them where uv
# cannot (e.g. a package index configured for pip only).
if "$VENV/bin/pip" install --no-input -r requirements/installer.txt >"$log" 2>&1 \
   && "$VENV/bin/uv" pip install --python "$VENV/bin/python" --system-certs --no-deps \
        -r "$LOCK" >>"$log" 2>&1; then
  installer=uv
else
  echo "bootstrap: uv could not install the lock (log: $log); installing with pip" >&2
  if ! "$VENV/bin/pip" install --no-input --no-deps -r "$LOCK" >>"$log" 2>&1; then
    tail -n 40 "$log" >&2; echo "bootstrap: pip install failed (full log: $log)" >&2; exit 1
  fi
  installer=pip
fi
if ! "$VENV/bin/pip" install --no-input --no-deps --no-build-isolation --config-settings editable_mode=compat -e . >>"$log" 2>&1; then
  tail -n 40 "$log" >&2; echo "bootstrap: installing the package failed (full log: $log)" >&2; exit 1
fi
echo "bootstrap: done in $(( $(date +%s) - start )) s ($installer)" >&2
echo "$want" > "$stamp"
