"""Builds the pipeline image with podman on a machine without a registry or Docker.

What a user does with ``docker build -f kubeflow/Dockerfile .``, done here with
Debian's podman (root, offline but for the package registries):

* a private podman configuration under one work directory (storage, run
  state, events log; ``runc`` with ``cgroupfs``, ulimits set to the current
  hard limits), so nothing lands in ``/var/lib/containers`` and ``clean``
  removes everything;
* the base images the Dockerfile names, made locally because no registry is
  reachable: ``debian:trixie`` from ``debootstrap`` and a stand-in for
  ``python:3.13-slim-trixie`` (Python in ``/usr/local``, pip, the C headers),
  both carrying the host's extra CA certificates so pip works behind a TLS
  proxy;
* ``podman build --pull=never --network host -f kubeflow/Dockerfile`` of the
  project's own Dockerfile, unchanged.

Command line::

  python -m devtools.containers build  [--workdir build/containers] [--tag ...]
  python -m devtools.containers clean  [--workdir ...]

The Python API (:class:`Podman`, :func:`build_image`) is what
``devtools.run_in_containers`` and ``tests/test_containers.py`` use.
"""

from __future__ import annotations

import argparse
import glob
import os
import resource
import shutil
import subprocess
import sys
import time
from typing import Optional, Sequence

from devtools import REPO_ROOT

DEFAULT_WORKDIR = os.path.join(REPO_ROOT, "build", "containers")
DEFAULT_TAG = "localhost/gnn-trainer:local"
DEFAULT_DOCKERFILE = os.path.join("kubeflow", "Dockerfile")
DEBIAN_IMAGE = "docker.io/library/debian:trixie"
PYTHON_IMAGE = "docker.io/library/python:3.13-slim-trixie"
DEBIAN_MIRROR = os.environ.get("GNN_DEBIAN_MIRROR", "http://deb.debian.org/debian")
#: Where Debian and this machine keep extra CA certificates (a TLS-intercepting proxy's).
HOST_CA_GLOB = "/usr/local/share/ca-certificates/*.crt"
PACKAGES = ("podman", "buildah", "runc", "debootstrap")
#: Directories podman 4.3 creates whatever its configuration says (removed by ``clean``
#: when this run created them).
GLOBAL_DIRS = ("/run/libpod", "/run/containers", "/var/lib/containers", "/run/runc")

# The python:3.13-slim-trixie stand-in: Python where the official image has it
# (/usr/local/bin/python), a site-packages holding only pip, and the C headers.
# Debian's python3-pip is not used: pip then refuses to replace Debian's wheel.
PYTHON_CONTAINERFILE = f"""\
FROM {DEBIAN_IMAGE}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
      python3 python3-venv python3-dev \\
 && rm -rf /var/lib/apt/lists/* \\
 && python3 -m venv /usr/local \\
 && /usr/local/bin/python -m pip --version
ENV LANG=C.UTF-8
CMD ["python3"]
"""


class ContainerError(RuntimeError):
  """podman is missing or cannot run, or a build or run failed."""


def _log(message: str) -> None:
  print(f"containers: {message}", file=sys.stderr, flush=True)


def apt_install(packages: Sequence[str]) -> None:
  """``apt-get install --no-install-recommends``; on failure one ``apt-get update`` and a retry.

  Raises:
    ContainerError: with apt-get's stderr, when the retry fails too.
  """
  env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
  cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
  if subprocess.run(cmd, env=env, capture_output=True, check=False).returncode == 0:
    return
  subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, check=False)
  proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
  if proc.returncode != 0:
    raise ContainerError(f"apt-get install {' '.join(packages)} failed: {proc.stderr[-2000:]}")


class Podman:
  """podman with a private configuration and storage under ``workdir``."""

  def __init__(self, workdir: str = DEFAULT_WORKDIR):
    self.workdir = os.path.abspath(workdir)
    self._created_global = [d for d in GLOBAL_DIRS if not os.path.exists(d)]
    self.env = dict(os.environ)
    self.env.update({
        "CONTAINERS_CONF": os.path.join(self.workdir, "containers.conf"),
        "CONTAINERS_STORAGE_CONF": os.path.join(self.workdir, "storage.conf"),
        "CONTAINERS_REGISTRIES_CONF": os.path.join(self.workdir, "registries.conf"),
        # buildah's own temporary files (layer tarballs) stay in the work dir too.
        "TMPDIR": os.path.join(self.workdir, "tmp"),
    })

  # ----------------------------------------------------------------- setup

  def check_available(self) -> None:
    """Raises ContainerError unless podman can run here (root, binaries)."""
    if os.geteuid() != 0:
      raise ContainerError(
          "podman needs root here (namespaces, overlay mounts); run as root or use Docker.")
    missing = [p for p in PACKAGES if shutil.which(p) is None]
    if missing:
      raise ContainerError(
          f"{', '.join(missing)} not installed: apt-get install {' '.join(PACKAGES)} "
          "(or pass --install to do it).")

  @staticmethod
  def install_packages() -> None:
    """apt-get installs podman, buildah, runc and debootstrap where one is missing."""
    if all(shutil.which(p) for p in PACKAGES):
      return
    _log(f"installing {' '.join(PACKAGES)} with apt-get")
    apt_install(PACKAGES)

  def write_config(self) -> None:
    """Writes containers.conf / storage.conf / registries.conf into the work dir."""
    w = self.workdir
    for sub in ("storage", "run", "tmp", "events"):
      os.makedirs(os.path.join(w, sub), exist_ok=True)
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nofile = 1048576 if nofile == resource.RLIM_INFINITY else nofile
    # runc may not set nproc to the hard limit here (96365: "error setting rlimit type 6:
    # operation not permitted"; 65536 neither); 32768 works and is plenty.
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    nproc = 32768 if nproc == resource.RLIM_INFINITY else min(nproc, 32768)
    # crun fails here ("cgroups in hybrid mode not supported"); runc + cgroupfs works.
    # Without ulimits at the hard limits, runs fail: "setrlimit RLIMIT_NOFILE".
    files = {
        "containers.conf": f"""\
[containers]
default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "{w}/events/events.log"
tmp_dir = "{w}/run/libpod"
static_dir = "{w}/storage/libpod"
volume_path = "{w}/storage/volumes"
""",
        "storage.conf": f"""\
[storage]
driver = "overlay"
graphroot = "{w}/storage"
runroot = "{w}/run/storage"
""",
        # Short names never reach a registry: every image here is local.
        "registries.conf": 'unqualified-search-registries = []\nshort-name-mode = "permissive"\n',
    }
    for name, text in files.items():
      with open(os.path.join(w, name), "w", encoding="utf-8") as fh:
        fh.write(text)

  # ----------------------------------------------------------------- running

  def cmd(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Runs ``podman ARGS`` with the private configuration; output captured."""
    proc = subprocess.run(["podman", *args], env=self.env, capture_output=True, check=False)
    if check and proc.returncode != 0:
      err = proc.stderr.decode(errors="replace")[-4000:]
      raise ContainerError(f"podman {args[0]} failed ({proc.returncode}): {err}")
    return proc

  @staticmethod
  def run_args(mounts: Sequence[str]) -> list[str]:
    """``run`` as every container here runs: removed after, no pull, no network, the
    ``mounts`` at the same path inside."""
    args = ["run", "--rm", "--pull=never", "--network", "none"]
    for path in mounts:
      args += ["-v", f"{path}:{path}"]
    return args

  def image_exists(self, name: str) -> bool:
    return self.cmd("image", "exists", name, check=False).returncode == 0

  def image_size(self, name: str) -> int:
    """Size of an image in bytes, as ``podman image inspect`` reports it."""
    out = self.cmd("image", "inspect", "--format", "{{.Size}}", name).stdout
    return int(out.decode().strip())

  def clean(self) -> None:
    """Removes the work dir, and the global dirs podman made during this run."""
    for mount in _mounts_under(self.workdir):
      subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
    shutil.rmtree(self.workdir, ignore_errors=True)
    for d in self._created_global:
      shutil.rmtree(d, ignore_errors=True)

  # ----------------------------------------------------------------- images

  def make_debian_image(self) -> None:
    """``debian:trixie`` from debootstrap, with the host's extra CA certificates."""
    if self.image_exists(DEBIAN_IMAGE):
      return
    rootfs = os.path.join(self.workdir, "rootfs-trixie")
    shutil.rmtree(rootfs, ignore_errors=True)
    _log(f"debootstrap trixie from {DEBIAN_MIRROR} (about a minute)")
    start = time.time()
    log_path = rootfs + ".log"
    with open(log_path, "wb") as log:
      rc = subprocess.run(["debootstrap", "--variant=minbase", "--include=ca-certificates",
                           "trixie", rootfs, DEBIAN_MIRROR], stdout=log, stderr=log,
                          check=False).returncode
    if rc != 0:
      raise ContainerError(f"debootstrap failed ({rc}); see {log_path}")
    certs = sorted(glob.glob(HOST_CA_GLOB))
    dest = os.path.join(rootfs, "usr", "local", "share", "ca-certificates")
    os.makedirs(dest, exist_ok=True)
    for cert in certs:
      shutil.copy(cert, dest)
    if certs:
      subprocess.run(["chroot", rootfs, "update-ca-certificates"], check=True,
                     capture_output=True)
    shutil.rmtree(os.path.join(rootfs, "var", "cache", "apt", "archives"), ignore_errors=True)
    tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
    proc = subprocess.run(["podman", "import", "--change", 'CMD ["bash"]', "-", DEBIAN_IMAGE],
                          stdin=tar.stdout, env=self.env, capture_output=True, check=False)
    tar.wait()
    if proc.returncode != 0 or tar.returncode != 0:
      raise ContainerError(f"podman import failed: {proc.stderr.decode()[-2000:]}")
    shutil.rmtree(rootfs, ignore_errors=True)
    _log(f"{DEBIAN_IMAGE} made in {time.time() - start:.0f} s ({len(certs)} extra CA certs)")

  def make_python_image(self) -> None:
    """The ``python:3.13-slim-trixie`` stand-in, FROM the local debian:trixie."""
    if self.image_exists(PYTHON_IMAGE):
      return
    start = time.time()
    ctx = os.path.join(self.workdir, "python-image")
    os.makedirs(ctx, exist_ok=True)
    with open(os.path.join(ctx, "Containerfile"), "w", encoding="utf-8") as fh:
      fh.write(PYTHON_CONTAINERFILE)
    self.build(os.path.join(ctx, "Containerfile"), PYTHON_IMAGE, ctx,
               log_path=os.path.join(self.workdir, "python-image.log"))
    _log(f"{PYTHON_IMAGE} stand-in made in {time.time() - start:.0f} s")

  def build(self, dockerfile: str, tag: str, context: str, log_path: str,
            build_args: Sequence[str] = ()) -> None:
    """``podman build --pull=never --network host``; the log goes to ``log_path``."""
    cmd = ["build", "--pull=never", "--network", "host", "-f", dockerfile, "-t", tag]
    for arg in build_args:
      cmd += ["--build-arg", arg]
    with open(log_path, "wb") as log:
      proc = subprocess.run(["podman", *cmd, context], env=self.env, stdout=log,
                            stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
      with open(log_path, encoding="utf-8", errors="replace") as fh:
        tail = fh.read()[-3000:]
      raise ContainerError(f"podman build of {tag} from {dockerfile} failed "
                           f"({proc.returncode}); log {log_path}:\n{tail}")


def _mounts_under(path: str) -> list[str]:
  with open("/proc/self/mounts", encoding="utf-8") as fh:
    points = [line.split()[1] for line in fh]
  return sorted((p for p in points if p == path or p.startswith(path + "/")), reverse=True)


def build_image(podman: Podman, tag: str = DEFAULT_TAG,
                dockerfile: str = DEFAULT_DOCKERFILE, install: bool = False) -> dict:
  """Makes the base images (once) and builds ``dockerfile`` from the repo root.

  Returns:
    ``{"tag", "seconds", "size_bytes", "log"}``.

  Raises:
    ContainerError: if podman cannot run or a step fails (with the log's tail).
  """
  if install:
    podman.install_packages()
  podman.check_available()
  podman.write_config()
  podman.make_debian_image()
  podman.make_python_image()
  log_path = os.path.join(podman.workdir, "image-build.log")
  _log(f"podman build -f {dockerfile} -t {tag} (cold: ~4 min; log {log_path})")
  start = time.time()
  podman.build(os.path.join(REPO_ROOT, dockerfile), tag, REPO_ROOT, log_path)
  seconds = time.time() - start
  size = podman.image_size(tag)
  _log(f"built {tag} in {seconds:.0f} s, {size / 1e9:.2f} GB")
  return {"tag": tag, "seconds": seconds, "size_bytes": size, "log": log_path}


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
  parser.add_argument("action", choices=("build", "clean"))
  parser.add_argument("--workdir", default=DEFAULT_WORKDIR,
                      help="podman's configuration and storage (default: build/containers).")
  parser.add_argument("--tag", default=DEFAULT_TAG)
  parser.add_argument("--dockerfile", default=DEFAULT_DOCKERFILE)
  parser.add_argument("--install", action="store_true",
                      help="apt-get install podman, buildah, runc, debootstrap if missing.")
  args = parser.parse_args(argv)
  podman = Podman(args.workdir)
  if args.action == "clean":
    podman.clean()
    return 0
  try:
    build_image(podman, args.tag, args.dockerfile, install=args.install)
  except ContainerError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  return 0


if __name__ == "__main__":
  sys.exit(main())
