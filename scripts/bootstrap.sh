#!/usr/bin/env bash
# Creates ./.venv with the pinned stack and installs this package into it.
#
# Idempotent: re-running is a no-op unless the lock file or pyproject.toml changed.
# Interpreter discovery order: $GNN_PYTHON, a working `python3.10` on PATH,
# pyenv's $(pyenv root)/versions/3.10.*, /usr/bin/python3.10.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${GNN_VENV:-.venv}
LOCK=${GNN_LOCK:-requirements/lock-tfx116-py310.txt}

find_python() {
  if [[ -n "${GNN_PYTHON:-}" ]]; then echo "$GNN_PYTHON"; return; fi
  if command -v python3.10 >/dev/null 2>&1 && python3.10 -c 'import sys' >/dev/null 2>&1; then
    command -v python3.10; return
  fi
  local roots=()
  if command -v pyenv >/dev/null 2>&1; then roots+=("$(pyenv root)"); fi
  roots+=("${PYENV_ROOT:-$HOME/.pyenv}")
  for root in "${roots[@]}"; do
    local cand
    cand=$(ls -d "$root"/versions/3.10.*/bin/python3.10 2>/dev/null | sort -V | tail -n 1 || true)
    if [[ -n "$cand" && -x "$cand" ]]; then echo "$cand"; return; fi
  done
  if [[ -x /usr/bin/python3.10 ]]; then echo /usr/bin/python3.10; return; fi
  echo "bootstrap: no Python 3.10 found. Install it (e.g. 'pyenv install 3.10') or set GNN_PYTHON=/path/to/python3.10." >&2
  exit 1
}

stamp="$VENV/.gnn-installed"
want=$(cat "$LOCK" pyproject.toml | sha256sum | cut -d' ' -f1)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi

PY=$(find_python)
echo "bootstrap: using $PY ($("$PY" -c 'import platform; print(platform.python_version())'))" >&2
if [[ ! -x "$VENV/bin/python" ]]; then
  "$PY" -m venv "$VENV"
fi
log="$VENV/install.log"
echo "bootstrap: installing the pinned set from $LOCK into $VENV (log: $log)" >&2
start=$(date +%s)
if ! "$VENV/bin/pip" install --no-input --no-deps -r "$LOCK" >"$log" 2>&1; then
  tail -n 40 "$log" >&2; echo "bootstrap: pip install failed (full log: $log)" >&2; exit 1
fi
if ! "$VENV/bin/pip" install --no-input --no-deps --no-build-isolation -e . >>"$log" 2>&1; then
  tail -n 40 "$log" >&2; echo "bootstrap: installing the package failed (full log: $log)" >&2; exit 1
fi
echo "bootstrap: done in $(( $(date +%s) - start )) s" >&2
echo "$want" > "$stamp"
