"""A private MariaDB server for the MLMD-server tests (Debian's ``mariadb-server``).

``MariaDB(base_dir).start()`` installs the package when it is absent (as root,
with apt-get), creates a data directory under ``base_dir``, starts ``mariadbd``
on a free 127.0.0.1 port (and a unix socket in ``base_dir``) and creates the
account MLMD logs in with: ``mlmd``@``127.0.0.1`` with a generated password
(``mysql_native_password``, MariaDB's default for password accounts).
``stop()`` shuts it down; the data directory goes with ``base_dir``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time

from devtools import containers

USER = "mlmd"


class MariaDBUnavailable(RuntimeError):
  """The server cannot be installed or started on this machine."""


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def ensure_installed() -> None:
  """Installs Debian's mariadb-server if ``mariadbd`` is not on PATH (root only)."""
  if shutil.which("mariadbd") and shutil.which("mariadb-install-db"):
    return
  if os.geteuid() != 0 or not shutil.which("apt-get"):
    raise MariaDBUnavailable("mariadbd is not installed and this is not a root Debian "
                             "machine: apt-get install mariadb-server")
  try:
    containers.apt_install(["mariadb-server", "mariadb-client"])
  except containers.ContainerError as e:
    raise MariaDBUnavailable(str(e)) from e


class MariaDB:
  """One private server: ``start``, ``stop``, ``restart``, ``sql``, ``dump``."""

  def __init__(self, base_dir: str):
    self.base_dir = base_dir
    self.datadir = os.path.join(base_dir, "data")
    self.socket = os.path.join(base_dir, "mysqld.sock")
    self.error_log = os.path.join(base_dir, "error.log")
    self.port = free_port()
    # A quote and a backslash: the protobuf text of a ConnectionConfig escapes
    # them, so a log mask that only knows the raw text would miss it.
    self.password = f"pw-{secrets.token_hex(8)}\"q\\b"
    self._proc = None

  def uri(self, database: str) -> str:
    return f"mysql://{USER}@127.0.0.1:{self.port}/{database}"

  def _client(self, program: str, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([program, "--no-defaults", f"--socket={self.socket}", "-u", "root",
                           *args], capture_output=True, text=True, check=False, **kwargs)

  def start(self) -> "MariaDB":
    ensure_installed()
    if not os.path.isdir(self.datadir):
      proc = subprocess.run(
          ["mariadb-install-db", "--no-defaults", f"--datadir={self.datadir}", "--user=root",
           "--auth-root-authentication-method=socket", "--skip-test-db"],
          capture_output=True, text=True, check=False)
      if proc.returncode != 0:
        raise MariaDBUnavailable(f"mariadb-install-db failed: {proc.stderr[-2000:]}")
      fresh = True
    else:
      fresh = False
    self._proc = subprocess.Popen(
        ["mariadbd", "--no-defaults", f"--datadir={self.datadir}", "--user=root",
         f"--port={self.port}", "--bind-address=127.0.0.1", f"--socket={self.socket}",
         f"--pid-file={os.path.join(self.base_dir, 'mysqld.pid')}",
         f"--log-error={self.error_log}", "--skip-log-bin", "--innodb-buffer-pool-size=64M"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while self._client("mariadb-admin", "ping").returncode != 0:
      if self._proc.poll() is not None or time.time() > deadline:
        raise MariaDBUnavailable(f"mariadbd did not start: {self._tail()}")
      time.sleep(0.2)
    if fresh:
      escaped = self.password.replace("\\", "\\\\").replace("'", "\\'")
      self.sql(f"CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED BY '{escaped}'; "
               f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'127.0.0.1';")
    return self

  def _tail(self) -> str:
    try:
      with open(self.error_log, encoding="utf-8", errors="replace") as f:
        return f.read()[-2000:]
    except OSError:
      return "(no error log)"

  def stop(self) -> None:
    if self._proc is None:
      return
    self._client("mariadb-admin", "shutdown")
    try:
      self._proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
      self._proc.kill()
      self._proc.wait()
    self._proc = None

  def restart(self) -> None:
    self.stop()
    self.start()

  def sql(self, statements: str) -> str:
    proc = self._client("mariadb", "-N", "-B", "-e", statements)
    if proc.returncode != 0:
      raise RuntimeError(f"SQL failed ({statements!r}): {proc.stderr}")
    return proc.stdout

  def dump(self, database: str) -> str:
    """The database as SQL text (schema and rows)."""
    proc = self._client("mariadb-dump", "--skip-comments", database)
    if proc.returncode != 0:
      raise RuntimeError(f"mariadb-dump {database} failed: {proc.stderr}")
    return proc.stdout
