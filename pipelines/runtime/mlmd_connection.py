"""Where ML Metadata lives for the local runners: a SQLite file or a MySQL/MariaDB server.

One URI names the store (``--mlmd`` of ``pipelines.demo.run_local`` and
``pipelines.planetoid.run_local``):

* ``/path/metadata.sqlite`` or ``sqlite:///path/metadata.sqlite``: a SQLite file
  (the default of every runner);
* ``mysql://USER@HOST[:PORT]/DATABASE``: a MySQL or MariaDB server over TCP
  (port 3306 by default; use ``127.0.0.1``, not ``localhost``, see below);
* ``mysql://USER@/DATABASE?socket=/run/mysqld/mysqld.sock``: the same over a unix socket.

The password never goes on the command line (it would show in ``ps`` and in
shell histories): it is read from the file named by ``--mlmd-password-file`` or
``$GNN_MLMD_PASSWORD_FILE``, else from ``$GNN_MLMD_PASSWORD``. A password inside
the URI is refused.

``prepare(uri, hide_password_in_logs=True)`` is what an entry point calls
before it builds a pipeline:

1. on the entry point's request (``hide_password_in_logs``; process-wide, so
   only a command's ``main`` asks, never library code, and ``prepare`` alone
   leaves logging as it is) it hides the password from every log record of
   the process (:func:`hide_in_logs`; TFX's ``LocalDagRunner`` logs the whole
   connection config, password included, at INFO:
   ``tfx/orchestration/local/local_dag_runner.py``);
2. it checks that the server answers at HOST:PORT and that MLMD can log in,
   and says which of the two failed (MLMD itself reports both as
   ``mysql_real_connect failed: errno: , error:``);
3. it creates MLMD's tables once, retrying while another process creates them
   (ml-metadata aborts a first connection that races another one on an empty
   database: "concurrent connection to the empty database. Please retry", or
   the server reports a deadlock: "try restarting transaction").

Facts behind the rules (ml-metadata 1.16, MariaDB 10.11, measured): with host
``localhost`` the MySQL client ignores the port and uses the socket
``/tmp/mysql.sock`` (tfx#1702); MLMD logs in with ``mysql_native_password``
(MariaDB's default for password accounts; MySQL 8 needs it set per account,
ml-metadata#128); a host together with a socket aborts the process.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import socket
import sys
import threading
import time
import urllib.parse
from typing import Mapping, Optional, Union

from ml_metadata.proto import metadata_store_pb2

#: Environment variable holding the server password.
PASSWORD_ENV = "GNN_MLMD_PASSWORD"
#: Environment variable naming a file whose content is the server password.
PASSWORD_FILE_ENV = "GNN_MLMD_PASSWORD_FILE"
DEFAULT_MYSQL_PORT = 3306
#: What replaces a password in log records.
REDACTED = "****"
#: MLMD errors of two processes creating the tables at once (ml-metadata 1.16 on
#: MariaDB 10.11, measured): retried.
_RETRYABLE = ("concurrent connection to the empty database", "try restarting transaction",
              "Lock wait timeout exceeded")
#: Seconds to wait for the server's TCP handshake.
CONNECT_TIMEOUT_SECONDS = 10.0

_URI_HELP = ("Write the MLMD store as a SQLite path (/path/metadata.sqlite, "
             "sqlite:///path/metadata.sqlite) or as mysql://USER@HOST:PORT/DATABASE "
             "(or mysql://USER@/DATABASE?socket=/path/to/mysqld.sock), with the password in "
             f"${PASSWORD_ENV} or in a file named by --mlmd-password-file / "
             f"${PASSWORD_FILE_ENV}.")

Metadata = Union[str, metadata_store_pb2.ConnectionConfig]


class MlmdConfigError(ValueError):
  """The MLMD URI or its password source is malformed."""


class MlmdConnectionError(ConnectionError):
  """The MLMD server cannot be reached, or MLMD cannot log in to it."""


@dataclasses.dataclass(frozen=True)
class MlmdTarget:
  """A parsed MLMD URI. ``password`` is kept out of ``repr`` and ``describe``."""
  kind: str  # "sqlite" or "mysql"
  path: str = ""
  host: str = ""
  port: int = 0
  socket: str = ""
  database: str = ""
  user: str = ""
  password: str = dataclasses.field(default="", repr=False)
  password_source: str = ""

  def describe(self) -> str:
    """The URI without any secret, for messages and logs."""
    return describe(self.connection_config())

  @property
  def address(self) -> str:
    """Where the server listens: ``HOST:PORT`` or the socket path."""
    return self.socket or f"{self.host}:{self.port}"

  def connection_config(self) -> metadata_store_pb2.ConnectionConfig:
    """The ``ConnectionConfig`` for ``tfx.dsl.Pipeline`` and ``MetadataStore``."""
    config = metadata_store_pb2.ConnectionConfig()
    if self.kind == "sqlite":
      config.sqlite.filename_uri = self.path
      config.sqlite.connection_mode = (
          metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE_OPENCREATE)
      return config
    if self.socket:
      config.mysql.socket = self.socket
    else:
      config.mysql.host = self.host
      config.mysql.port = self.port
    config.mysql.database = self.database
    config.mysql.user = self.user
    config.mysql.password = self.password
    return config


def parse(uri: str, *, password_file: Optional[str] = None,
          environ: Optional[Mapping[str, str]] = None) -> MlmdTarget:
  """Parses an MLMD URI and, for a server, finds its password.

  Args:
    uri: See the module docstring.
    password_file: A file holding the password (one trailing newline is
      dropped). Wins over ``$GNN_MLMD_PASSWORD_FILE`` and ``$GNN_MLMD_PASSWORD``.
    environ: The environment to read (default ``os.environ``).

  Raises:
    MlmdConfigError: naming what is wrong in ``uri`` or the password source.
  """
  environ = os.environ if environ is None else environ
  if not uri or not uri.strip():
    raise MlmdConfigError(f"The MLMD URI is empty. {_URI_HELP}")
  parts = urllib.parse.urlsplit(uri)
  if parts.scheme in ("", "sqlite", "file"):
    path = parts.path if parts.scheme else uri
    if parts.scheme and parts.netloc:
      raise MlmdConfigError(f"MLMD URI {uri!r}: a SQLite URI has no host; write "
                            f"sqlite:///absolute/path.sqlite (three slashes).")
    if not path:
      raise MlmdConfigError(f"MLMD URI {uri!r} names no SQLite file. {_URI_HELP}")
    return MlmdTarget(kind="sqlite", path=os.path.abspath(path))
  if parts.scheme not in ("mysql", "mariadb"):
    raise MlmdConfigError(f"MLMD URI {uri!r}: unknown scheme {parts.scheme!r}. {_URI_HELP}")
  if parts.password is not None:
    raise MlmdConfigError(
        f"MLMD URI {_without_password(uri)!r} holds a password: it would show in the process "
        f"list and in logs. Remove it from the URI and put it in ${PASSWORD_ENV} or in a "
        f"file named by --mlmd-password-file / ${PASSWORD_FILE_ENV}.")
  if not parts.username:
    raise MlmdConfigError(f"MLMD URI {uri!r} names no user: write "
                          f"mysql://USER@HOST:PORT/DATABASE.")
  database = parts.path.lstrip("/")
  if not database or "/" in database:
    raise MlmdConfigError(f"MLMD URI {uri!r}: name one database after the host, as in "
                          f"mysql://{parts.username}@HOST:PORT/DATABASE.")
  query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
  unknown = sorted(set(query) - {"socket"})
  if unknown:
    raise MlmdConfigError(f"MLMD URI {uri!r}: unknown option(s) {unknown}; the only option "
                          f"is ?socket=/path/to/mysqld.sock.")
  sock = query.get("socket", [""])[-1]
  try:
    port = parts.port
  except ValueError as e:
    raise MlmdConfigError(f"MLMD URI {uri!r}: the port is not a number in 1-65535.") from e
  host = parts.hostname or ""
  if sock and host:
    raise MlmdConfigError(
        f"MLMD URI {uri!r} names both a host ({host}) and a socket ({sock}); MLMD takes "
        f"exactly one: mysql://USER@HOST:PORT/DB or mysql://USER@/DB?socket=PATH.")
  if not sock and not host:
    raise MlmdConfigError(f"MLMD URI {uri!r} names neither a host nor ?socket=PATH.")
  if host == "localhost":
    raise MlmdConfigError(
        f"MLMD URI {uri!r}: with host 'localhost' the MySQL client ignores the port and "
        f"connects to the unix socket /tmp/mysql.sock. Write 127.0.0.1 for TCP, or "
        f"mysql://{parts.username}@/{database}?socket=/path/to/mysqld.sock for a socket.")
  password, source = _read_password(password_file, environ)
  return MlmdTarget(kind="mysql", host=host, port=(port or DEFAULT_MYSQL_PORT) if host else 0,
                    socket=sock, database=database, user=urllib.parse.unquote(parts.username),
                    password=password, password_source=source)


def _without_password(uri: str) -> str:
  return re.sub(r"(//[^:/@]*):[^@/]*@", r"\1:" + REDACTED + "@", uri)


def _read_password(password_file: Optional[str],
                   environ: Mapping[str, str]) -> tuple[str, str]:
  """(password, where it came from): the flag's file, $..._FILE's file, $..., or none."""
  for path, source in ((password_file, "--mlmd-password-file"),
                       (environ.get(PASSWORD_FILE_ENV), f"${PASSWORD_FILE_ENV}")):
    if path:
      try:
        with open(path, encoding="utf-8") as f:
          text = f.read()
      except OSError as e:
        raise MlmdConfigError(f"Cannot read the MLMD password file {path!r} (from {source}): "
                              f"{e.strerror}.") from e
      text = text[:-1] if text.endswith("\n") else text
      return text, f"the file {path} ({source})"
  if environ.get(PASSWORD_ENV) is not None:
    return environ[PASSWORD_ENV], f"${PASSWORD_ENV}"
  return "", ""


# ---------------------------------------------------------------------------
# Keeping the password out of logs.

_PROTO_PASSWORD = re.compile(r'(\bpassword:\s*)"(?:[^"\\]|\\.)*"')
_secrets: set[str] = set()
_secrets_lock = threading.Lock()
_base_factory = None


def redact(text: str) -> str:
  """``text`` with the registered passwords and every ``password: "..."`` field masked."""
  text = _PROTO_PASSWORD.sub(r'\1"' + REDACTED + '"', text)
  for secret in _secrets:
    text = text.replace(secret, REDACTED)
  return text


def _redacting_factory(*args, **kwargs) -> logging.LogRecord:
  record = _base_factory(*args, **kwargs)
  try:
    message = record.getMessage()
  except Exception:  # pylint: disable=broad-except  (a bad format string: logging reports it)
    return record
  clean = redact(message)
  if clean != message:
    record.msg, record.args = clean, None
  return record


def hide_in_logs(secret: str) -> None:
  """Masks ``secret`` (and any protobuf ``password:`` field) in every later log record.

  Works on the records themselves (``logging.setLogRecordFactory``), so every
  logger and handler of the process, absl's and TFX's included, sees only the
  masked text, also handlers added later. That is a process-wide setting: an
  entry point installs it (``prepare(..., hide_password_in_logs=True)`` or this
  function), library code does not. The factory it installs wraps the one
  that was set before.
  """
  global _base_factory
  with _secrets_lock:
    if secret:
      _secrets.add(secret)
    if _base_factory is None:
      _base_factory = logging.getLogRecordFactory()
      logging.setLogRecordFactory(_redacting_factory)


# ---------------------------------------------------------------------------
# Checking the server.

def _server_greeting(target: MlmdTarget) -> str:
  """The server version from its handshake packet; raises MlmdConnectionError."""
  try:
    if target.socket:
      conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
      conn.settimeout(CONNECT_TIMEOUT_SECONDS)
      conn.connect(target.socket)
    else:
      conn = socket.create_connection((target.host, target.port), CONNECT_TIMEOUT_SECONDS)
  except OSError as e:
    raise MlmdConnectionError(
        f"Cannot reach the MLMD server of {target.describe()} at {target.address}: "
        f"{e.strerror or e}. Is MySQL/MariaDB running and listening there? Nothing was "
        f"run or published.") from e
  with conn:
    try:
      packet = conn.recv(256)
    except OSError:
      packet = b""
  # MySQL protocol: 3-byte length, sequence id, protocol version 10, version\0.
  if len(packet) < 6 or packet[4] != 10:
    if len(packet) >= 7 and packet[4] == 0xFF:  # an error packet: e.g. host not allowed
      reason = packet[7:].decode("utf-8", "replace")
      reason = reason[6:] if reason.startswith("#") else reason  # "#HY000" SQL state
      raise MlmdConnectionError(
          f"The MLMD server at {target.address} refused the connection: {reason}")
    raise MlmdConnectionError(
        f"{target.address} answers, but not as a MySQL/MariaDB server (no protocol-10 "
        f"handshake). Check the host and port of {target.describe()}.")
  version = packet[5:].split(b"\0", 1)[0].decode("ascii", "replace")
  return version[len("5.5.5-"):] if version.startswith("5.5.5-") else version  # MariaDB's prefix


def connect(target: MlmdTarget, *, attempts: int = 20, wait_seconds: float = 0.5):
  """Opens an MLMD store, creating its tables once; clear errors for a server.

  Args:
    target: A parsed URI (``parse``).
    attempts: Openings tried while another process is creating the tables.
    wait_seconds: Pause between them.

  Returns:
    A ``metadata_store.MetadataStore``.

  Raises:
    MlmdConnectionError: the server is unreachable, or MLMD cannot log in.
  """
  from ml_metadata import metadata_store  # pylint: disable=g-import-not-at-top
  if target.kind == "sqlite":
    os.makedirs(os.path.dirname(target.path) or ".", exist_ok=True)
    return metadata_store.MetadataStore(target.connection_config())
  version = _server_greeting(target)
  for attempt in range(attempts):
    try:
      return metadata_store.MetadataStore(target.connection_config())
    except RuntimeError as e:
      racing = any(marker in str(e) for marker in _RETRYABLE)
      if racing and attempt + 1 < attempts:
        time.sleep(wait_seconds)
        continue
      if racing:
        raise MlmdConnectionError(
            f"MLMD's tables in {target.describe()} stayed half-created after {attempts} "
            f"tries: {e}") from e
      password = (f"the password from {target.password_source}" if target.password_source
                  else f"no password (none in ${PASSWORD_ENV}, ${PASSWORD_FILE_ENV} or "
                       f"--mlmd-password-file)")
      raise MlmdConnectionError(
          f"The MLMD server at {target.address} ({version}) answers, but MLMD could not log "
          f"in as {target.user!r} to database {target.database!r} with {password}. Check "
          f"the password, that the account '{target.user}'@'<this host>' exists with "
          f"mysql_native_password, and that it may create and use the database. Nothing "
          f"was run or published. (MLMD: {redact(str(e)) or type(e).__name__})") from e
  raise AssertionError("unreachable")


def prepare(uri: str, *, password_file: Optional[str] = None,
            hide_password_in_logs: bool = False
            ) -> tuple[MlmdTarget, metadata_store_pb2.ConnectionConfig]:
  """What an entry point does first: parse, hide the password in logs, check, init.

  Args:
    uri: The store (module docstring).
    password_file: File holding the server password (else the environment).
    hide_password_in_logs: Mask a server password in every log record of the
      process from now on (:func:`hide_in_logs`, process-wide): for a command's
      entry point; False leaves logging alone.

  Returns:
    ``(target, connection_config)``: the config goes to ``tfx.dsl.Pipeline``.

  Raises:
    MlmdConfigError, MlmdConnectionError: with what to fix.
  """
  target = parse(uri, password_file=password_file)
  if hide_password_in_logs and target.kind == "mysql":
    hide_in_logs(target.password)
  connect(target)
  return target, target.connection_config()


def prepare_or_exit(uri: str, *, password_file: Optional[str] = None,
                    hide_password_in_logs: bool = False
                    ) -> metadata_store_pb2.ConnectionConfig:
  """``prepare`` for a command-line entry point: on failure, the message and exit code 2."""
  try:
    return prepare(uri, password_file=password_file,
                   hide_password_in_logs=hide_password_in_logs)[1]
  except (MlmdConfigError, MlmdConnectionError) as e:
    print(f"error: {e}", file=sys.stderr)
    raise SystemExit(2) from None


def describe(metadata: Metadata) -> str:
  """Where a store lives, as a URI without the password."""
  if isinstance(metadata, str):
    return metadata
  if metadata.WhichOneof("config") == "sqlite":
    return metadata.sqlite.filename_uri
  mysql = metadata.mysql
  if mysql.socket:
    return f"mysql://{mysql.user}@/{mysql.database}?socket={mysql.socket}"
  return f"mysql://{mysql.user}@{mysql.host}:{mysql.port}/{mysql.database}"


def pipeline_connection_config(metadata: Metadata) -> metadata_store_pb2.ConnectionConfig:
  """A pipeline factory's ``metadata`` argument: a SQLite path or a ``ConnectionConfig``."""
  if isinstance(metadata, metadata_store_pb2.ConnectionConfig):
    return metadata
  if isinstance(metadata, str) and metadata:
    from tfx.orchestration import metadata as tfx_metadata  # pylint: disable=g-import-not-at-top
    return tfx_metadata.sqlite_metadata_connection_config(metadata)
  raise TypeError("metadata must be a SQLite file path or an ml_metadata ConnectionConfig "
                  f"(pipelines.runtime.mlmd_connection.prepare), got {metadata!r}")
