#!/usr/bin/env bash
# Runs a command (default: `make test`) on the tfx121 stack (TFX 1.21 / TF 2.21 / Python 3.13)
# inside a Debian 13 (trixie) chroot, for hosts whose glibc is too old for it (< 2.39).
#
#   sudo scripts/chroot_ci.sh                      # make test
#   sudo scripts/chroot_ci.sh make test PYTEST_ARGS='-m "not slow"'
#   sudo scripts/chroot_ci.sh make demo            # DEMO_OUTPUT_DIR is passed through
#
# Needs root (debootstrap, mount, chroot). The root filesystem is built once with
#   debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,python3-dev,g++,
#     ca-certificates,make trixie $GNN_CHROOT_DIR
# into $GNN_CHROOT_DIR, by default a machine-wide cache outside the checkout
# (/var/cache/gnn-trainer-component/chroot-trixie, so a new clone on the same machine reuses it),
# and reused while its ready marker names the same suite and packages (otherwise, or when the
# folder is missing, it is rebuilt). Runs sharing one root take turns (flock on $ROOT.lock).
# Mounted for the run, and always unmounted afterwards (trap), in reverse order: /proc, /dev
# (+ a private tmpfs on /dev/shm), this checkout at /w/p, ../shared at /w/shared (if present) and $PLANETOID_DATA_DIR at
# /w/data/planetoid (if set). The venv lives in the checkout as .venv-tfx121 (git-ignored),
# built by scripts/bootstrap.sh inside the chroot.
#
# Environment: GNN_CHROOT_DIR, GNN_CHROOT_SUITE (trixie), GNN_CHROOT_MIRROR (debootstrap's
# default if unset), GNN_STACK (tfx121), GNN_CA_BUNDLE (host CA bundle copied in for pip).
# Passed into the chroot: CI, GNN_REQUIRE_DATA, PLANETOID_DATA_DIR (translated), DEMO_OUTPUT_DIR,
# PYTEST_ADDOPTS, TF_CPP_MIN_LOG_LEVEL, PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_DEFAULT_TIMEOUT,
# http(s)_proxy/no_proxy. The exit code is the command's.
set -euo pipefail
cd "$(dirname "$0")/.."
CHECKOUT=$(pwd -P)

SUITE=${GNN_CHROOT_SUITE:-trixie}
ROOT=${GNN_CHROOT_DIR:-/var/cache/gnn-trainer-component/chroot-$SUITE}
STACK=${GNN_STACK:-tfx121}
PKGS=python3,python3-venv,python3-pip,python3-dev,g++,ca-certificates,make
READY="$ROOT/.gnn-chroot-ready"
INNER=/w/p
if [[ $# -eq 0 ]]; then set -- make test; fi

log() { echo "chroot_ci: $*" >&2; }

if [[ $(id -u) -ne 0 ]]; then log "needs root (debootstrap, mount, chroot)"; exit 1; fi
mkdir -p "$ROOT"
ROOT=$(cd "$ROOT" && pwd -P)
# One run at a time per root: the mounts below it (and /w/p) are per run.
exec 9>"$ROOT.lock"
if ! flock -n 9; then log "waiting for another run in $ROOT to finish"; flock 9; fi
WANT="suite=$SUITE packages=$PKGS"

mounts_under() {  # mount points at or below $1, deepest first
  awk -v p="$1" '$2 == p || index($2, p "/") == 1 {print $2}' /proc/self/mounts | sort -r
}

MOUNTED=()
cleanup() {
  local rc=$? i
  for (( i=${#MOUNTED[@]}-1; i>=0; i-- )); do
    umount "${MOUNTED[$i]}" 2>/dev/null || umount -l "${MOUNTED[$i]}" 2>/dev/null \
      || log "could not unmount ${MOUNTED[$i]}"
  done
  MOUNTED=()
  local left
  left=$(mounts_under "$ROOT")
  if [[ -n "$left" ]]; then log "still mounted under $ROOT: $left"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

domount() {  # domount TARGET MOUNT-ARGS...
  local target=$1; shift
  mkdir -p "$target"
  mount "$@" "$target"
  MOUNTED+=("$target")
  mount --make-private "$target" 2>/dev/null || true
}

# Leftovers of an interrupted earlier run (only mounts below our own root folder).
for m in $(mounts_under "$ROOT"); do
  log "unmounting leftover $m"; umount "$m" 2>/dev/null || umount -l "$m"
done

# 1. The root filesystem.
if [[ ! -f "$READY" || "$(cat "$READY")" != "$WANT" ]]; then
  if [[ -n "$(mounts_under "$ROOT")" ]]; then log "refusing to rebuild $ROOT: something is mounted below it"; exit 1; fi
  if ! command -v debootstrap >/dev/null 2>&1; then
    log "installing debootstrap"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; } >&2
  fi
  rm -rf --one-file-system "$ROOT"; mkdir -p "$ROOT"
  log "debootstrap $SUITE into $ROOT"
  t0=$(date +%s)
  # shellcheck disable=SC2086
  if ! debootstrap --variant=minbase --include="$PKGS" "$SUITE" "$ROOT" ${GNN_CHROOT_MIRROR:-} \
       >"$ROOT.debootstrap.log" 2>&1; then
    tail -n 30 "$ROOT.debootstrap.log" >&2; log "debootstrap failed (log: $ROOT.debootstrap.log)"; exit 1
  fi
  echo "$WANT" > "$READY"
  log "debootstrap took $(( $(date +%s) - t0 )) s"
else
  log "reusing $ROOT"
fi

# 2. Name resolution and the host's CA bundle (pip on these machines needs it).
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
CA=${GNN_CA_BUNDLE:-${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}}
INNER_CA=/etc/ssl/certs/ca-certificates.crt
if [[ -f "$CA" ]]; then
  cp -L "$CA" "$ROOT/etc/ssl/host-ca-bundle.crt"
  INNER_CA=/etc/ssl/host-ca-bundle.crt
fi

# 3. Mounts.
domount "$ROOT/proc" -t proc proc
domount "$ROOT/dev" --bind /dev
domount "$ROOT/dev/shm" -t tmpfs -o mode=1777,nosuid,nodev tmpfs
domount "$ROOT$INNER" --bind "$CHECKOUT"
SHARED="$(dirname "$CHECKOUT")/shared"
if [[ -d "$SHARED" ]]; then domount "$ROOT/w/shared" --bind "$SHARED"; fi
INNER_DATA=""
if [[ -n "${PLANETOID_DATA_DIR:-}" && -d "$PLANETOID_DATA_DIR" ]]; then
  domount "$ROOT/w/data/planetoid" --bind "$PLANETOID_DATA_DIR"
  INNER_DATA=/w/data/planetoid
fi

# 4. The command, with a clean environment.
envs=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
      TMPDIR=/tmp GNN_STACK="$STACK" TF_USE_LEGACY_KERAS=1
      PIP_CERT="$INNER_CA" SSL_CERT_FILE="$INNER_CA" REQUESTS_CA_BUNDLE="$INNER_CA"
      PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1)
[[ -n "$INNER_DATA" ]] && envs+=(PLANETOID_DATA_DIR="$INNER_DATA")
for v in CI GNN_REQUIRE_DATA GNN_TEST_REPORT DEMO_OUTPUT_DIR PYTEST_ADDOPTS TF_CPP_MIN_LOG_LEVEL PIP_INDEX_URL \
         PIP_EXTRA_INDEX_URL PIP_DEFAULT_TIMEOUT http_proxy https_proxy no_proxy HTTP_PROXY \
         HTTPS_PROXY NO_PROXY; do
  if [[ -n "${!v:-}" ]]; then envs+=("$v=${!v}"); fi
done
log "running in $ROOT:$INNER ($STACK): $*"
t0=$(date +%s)
set +e
chroot "$ROOT" /usr/bin/env -i "${envs[@]}" /bin/bash -c 'cd "$0" && exec "$@"' "$INNER" "$@"
rc=$?
set -e
log "'$*' exited $rc after $(( $(date +%s) - t0 )) s"
exit "$rc"
