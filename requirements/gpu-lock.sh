#!/usr/bin/env bash
# The GPU image's lock, requirements/lock-tfx121-py313-gpu.txt (kubeflow/Dockerfile.gpu):
# the current stack's lock plus TensorFlow's CUDA libraries (tensorflow[and-cuda]).
#
#   requirements/gpu-lock.sh compile   regenerate it from requirements/tfx121-py313-gpu.in with
#                                      `uv pip compile`, as the stacks' locks are made
#                                      (docs/stacks.md); every pin the CPU lock has is kept.
#   requirements/gpu-lock.sh check     what .ci/run runs, on a machine of the tfx121 stack
#                                      (Python 3.13, glibc >= 2.39: natively or in its chroot):
#     1. resolves: compiling the .in with the lock as constraints gives exactly the lock's pins
#        (a consistent, complete closure; deterministic: no newer release changes it);
#     2. installs: the whole lock with --no-deps into a throwaway venv, as the image's
#        `pip install --no-deps -r` does (the CUDA wheels through a throwaway cache);
#     3. loads: in that venv TensorFlow imports and every CUDA library its build loads is
#        there, with the CUDA and cuDNN versions it was built with, and loads
#        (gnn_trainer_component.distributed.devices.check_gpu_image(), as the image's build).
#
# uv: the stack venv's (pinned in requirements/installer.txt), else uv on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

in_file=requirements/tfx121-py313-gpu.in
lock=requirements/lock-tfx121-py313-gpu.txt
platform=(--python-version 3.13 --python-platform x86_64-manylinux_2_39)

log() { echo "gpu-lock: $*" >&2; }

uv=""
for cand in .venv-tfx121/bin/uv .venv/bin/uv "$(command -v uv 2>/dev/null || true)"; do
  if [[ -n "$cand" && -x "$cand" ]]; then uv=$cand; break; fi
done
if [[ -z "$uv" ]]; then
  log "no uv found (make setup installs it into the stack's venv: requirements/installer.txt)"
  exit 1
fi

pins() {  # the name==version lines of a requirements file, sorted
  grep -E '^[A-Za-z0-9][A-Za-z0-9._-]*==' "$1" | sed 's/[[:space:]].*//' | sort
}

case "${1:-}" in
  compile)
    tmp=$(mktemp)
    trap 'rm -f "$tmp"' EXIT
    "$uv" pip compile --system-certs --quiet --no-header "${platform[@]}" "$in_file" -o "$tmp"
    {
      echo "# Fully pinned closure of the GPU image (kubeflow/Dockerfile.gpu): the tfx121 lock plus TensorFlow 2.21's CUDA libraries (tensorflow[and-cuda]: the nvidia-* wheels), Linux x86_64, glibc >= 2.39."
      echo "# Regenerate: requirements/gpu-lock.sh compile (uv pip compile ${platform[*]} $in_file; every pin of lock-tfx121-py313.txt kept)."
      echo "# Installed with 'pip install --no-deps -r' by kubeflow/Dockerfile.gpu (no resolver run); .ci/run checks that it resolves, installs and loads (requirements/gpu-lock.sh check)."
      cat "$tmp"
    } >"$lock"
    log "wrote $lock: $(pins "$lock" | wc -l) pins, $(pins "$lock" | grep -c '^nvidia-') of them CUDA wheels"
    ;;
  check)
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    t0=$(date +%s)
    # 1. Resolves: the lock is the closure of the .in, every pin as locked.
    if ! "$uv" pip compile --system-certs --quiet --no-header --no-annotate "${platform[@]}" \
        "$in_file" -c "$lock" -o "$tmp/resolved.txt"; then
      log "$lock does not resolve with $in_file (above): run requirements/gpu-lock.sh compile"
      exit 1
    fi
    if ! diff <(pins "$lock") <(pins "$tmp/resolved.txt") >"$tmp/diff.txt"; then
      cat "$tmp/diff.txt" >&2
      log "$lock is not the closure of $in_file (< lock, > resolved): run requirements/gpu-lock.sh compile"
      exit 1
    fi
    t1=$(date +%s)
    log "1. resolves: $(pins "$lock" | wc -l) pins, the closure of $in_file ($((t1 - t0)) s)"
    # 2. Installs: into a throwaway venv; the CPU lock's wheels come from uv's cache (the
    # stack's own install filled it), the CUDA wheels through a throwaway cache.
    py=$(GNN_STACK=tfx121 ./scripts/stack.sh python)
    "$uv" venv --quiet --python "$py" "$tmp/venv"
    grep -v '^nvidia-' "$lock" >"$tmp/shared.txt"
    pins "$lock" | grep '^nvidia-' >"$tmp/cuda.txt"
    "$uv" pip install --system-certs --quiet --python "$tmp/venv/bin/python" --no-deps \
      -r "$tmp/shared.txt"
    UV_CACHE_DIR="$tmp/cache" "$uv" pip install --system-certs --quiet \
      --python "$tmp/venv/bin/python" --no-deps -r "$tmp/cuda.txt"
    t2=$(date +%s)
    log "2. installs: $(pins "$lock" | wc -l) packages, $(wc -l <"$tmp/cuda.txt") CUDA wheels ($(du -sh "$tmp/venv/lib" | cut -f1) venv) ($((t2 - t1)) s)"
    # 3. Loads: TensorFlow and the CUDA libraries of its build, in that venv. (TensorFlow's
    # log, with its failed cuInit on a machine without a GPU, is shown only on failure.)
    if ! TF_USE_LEGACY_KERAS=1 TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH="$(pwd)" \
        "$tmp/venv/bin/python" -c "import sys
from gnn_trainer_component.distributed import devices
sys.exit(devices.check_gpu_image())" >"$tmp/report.json" 2>"$tmp/load.log"; then
      cat "$tmp/report.json" "$tmp/load.log" >&2
      log "the GPU lock's TensorFlow or CUDA libraries do not load (above)"
      exit 1
    fi
    t3=$(date +%s)
    summary=$("$tmp/venv/bin/python" -c 'import json, sys
r = json.load(open(sys.argv[1]))
build, libs = r["build"], sorted(v for v in r["cuda_libraries"].values() if v)
print("TensorFlow %s (CUDA %s, cuDNN %s) imports; %d CUDA libraries load: %s" % (
    r["tensorflow"], build["cuda_version"], build["cudnn_version"], len(libs), " ".join(libs)))
' "$tmp/report.json")
    log "3. loads: $summary ($((t3 - t2)) s)"
    log "passed in $((t3 - t0)) s"
    ;;
  *)
    echo "usage: requirements/gpu-lock.sh compile|check" >&2
    exit 2
    ;;
esac
