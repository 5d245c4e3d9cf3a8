#!/usr/bin/env bash
# Decides which pinned stack this machine runs and prints facts about it.
#
#   scripts/stack.sh            -> the stack name: tfx121 or tfx116
#   scripts/stack.sh venv       -> its venv dir (.venv-tfx121 / .venv)
#   scripts/stack.sh lock       -> its lock file
#   scripts/stack.sh python     -> the interpreter bootstrap would use (exit 1 if none)
#   scripts/stack.sh explain    -> a human-readable line about the choice
#
# Stacks (docs/stacks.md):
#   tfx121  TFX 1.21 / TF 2.21 / Python 3.13; needs glibc >= 2.39 (ml-metadata and
#           TFDV wheels are manylinux_2_39) and a Python 3.13 interpreter.
#   tfx116  TFX 1.16 / TF 2.16 / Python 3.10; runs on glibc >= 2.31 (e.g. Debian 12).
#
# Choice: $GNN_STACK if set (tfx121|tfx116); otherwise tfx121 when glibc >= 2.39 and a
# Python 3.13 is found, else tfx116. Interpreter discovery (per stack, first hit wins):
# $GNN_PYTHON, pythonX.Y on PATH, $(pyenv root)/versions/X.Y.*, /usr/bin/pythonX.Y,
# `python3` if it is X.Y. Pure bash + one interpreter probe; no side effects.
set -euo pipefail

pyver_of() {  # stack -> X.Y
  case "$1" in
    tfx121) echo 3.13 ;;
    tfx116) echo 3.10 ;;
    *) echo "stack.sh: unknown stack '$1' (GNN_STACK must be tfx121 or tfx116)" >&2; exit 2 ;;
  esac
}

glibc_version() {
  local v
  v=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}') || true
  if [[ -z "$v" ]]; then
    v=$(ldd --version 2>/dev/null | head -n 1 | grep -oE '[0-9]+\.[0-9]+$') || true
  fi
  echo "${v:-0.0}"
}

version_ge() {  # version_ge A B: A >= B (dotted numeric)
  [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" == "$2" ]]
}

py_is() {  # py_is PATH X.Y: PATH runs and is Python X.Y
  [[ -n "$1" && -x "$1" ]] || return 1
  local got
  got=$("$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || return 1
  [[ "$got" == "$2" ]]
}

find_python() {  # find_python X.Y -> path or nothing
  local want=$1 cand
  if [[ -n "${GNN_PYTHON:-}" ]]; then
    if py_is "$GNN_PYTHON" "$want"; then echo "$GNN_PYTHON"; fi
    return 0
  fi
  cand=$(command -v "python$want" 2>/dev/null || true)
  if py_is "$cand" "$want"; then echo "$cand"; return 0; fi
  local roots=()
  if command -v pyenv >/dev/null 2>&1; then roots+=("$(pyenv root)"); fi
  roots+=("${PYENV_ROOT:-$HOME/.pyenv}")
  for root in "${roots[@]}"; do
    cand=$(ls -d "$root"/versions/"$want".*/bin/python"$want" 2>/dev/null | sort -V | tail -n 1 || true)
    if py_is "$cand" "$want"; then echo "$cand"; return 0; fi
  done
  if py_is "/usr/bin/python$want" "$want"; then echo "/usr/bin/python$want"; return 0; fi
  cand=$(command -v python3 2>/dev/null || true)
  if py_is "$cand" "$want"; then echo "$cand"; return 0; fi
  return 0
}

choose_stack() {
  if [[ -n "${GNN_STACK:-}" ]]; then pyver_of "$GNN_STACK" >/dev/null; echo "$GNN_STACK"; return; fi
  if version_ge "$(glibc_version)" 2.39 && [[ -n "$(find_python 3.13)" ]]; then
    echo tfx121
  else
    echo tfx116
  fi
}

stack=$(choose_stack)
case "${1:-name}" in
  name) echo "$stack" ;;
  venv) if [[ "$stack" == tfx116 ]]; then echo .venv; else echo ".venv-$stack"; fi ;;
  lock) if [[ "$stack" == tfx116 ]]; then echo requirements/lock-tfx116-py310.txt;
        else echo requirements/lock-tfx121-py313.txt; fi ;;
  python)
    py=$(find_python "$(pyver_of "$stack")")
    if [[ -z "$py" ]]; then
      echo "stack.sh: stack $stack needs Python $(pyver_of "$stack"); none found. Install it" \
           "(e.g. 'pyenv install $(pyver_of "$stack")') or set GNN_PYTHON=/path/to/python$(pyver_of "$stack")." >&2
      exit 1
    fi
    echo "$py" ;;
  explain)
    how="auto: glibc $(glibc_version)"
    [[ -n "${GNN_STACK:-}" ]] && how="GNN_STACK=$GNN_STACK"
    echo "stack $stack (Python $(pyver_of "$stack"); $how)" ;;
  *) echo "usage: $0 [name|venv|lock|python|explain]" >&2; exit 2 ;;
esac
