"""pipelines/runtime/mlmd_connection.py without a database server: URIs, passwords, log masking,
and the errors for a port where no MySQL server listens (real sockets)."""

import logging
import re
import socket
import threading

import pytest

from devtools import mariadb as mariadb_lib
from pipelines.runtime import mlmd_connection as mc


def test_sqlite_uris():
  for uri in ("/tmp/x/metadata.sqlite", "sqlite:///tmp/x/metadata.sqlite"):
    target = mc.parse(uri, environ={})
    assert target.kind == "sqlite" and target.path == "/tmp/x/metadata.sqlite"
    assert target.connection_config().sqlite.filename_uri == "/tmp/x/metadata.sqlite"
  assert mc.parse("rel/m.sqlite", environ={}).path.endswith("/rel/m.sqlite")


def test_mysql_uri_with_password_from_the_environment():
  target = mc.parse("mysql://mlmd@10.0.0.5:3307/gnn", environ={mc.PASSWORD_ENV: "pw"})
  config = target.connection_config()
  assert (config.mysql.host, config.mysql.port, config.mysql.database, config.mysql.user,
          config.mysql.password) == ("10.0.0.5", 3307, "gnn", "mlmd", "pw")
  assert target.describe() == "mysql://mlmd@10.0.0.5:3307/gnn"
  assert "pw" not in repr(target)
  assert mc.parse("mysql://mlmd@db.internal/gnn", environ={}).port == mc.DEFAULT_MYSQL_PORT


def test_mysql_socket_uri():
  target = mc.parse("mysql://mlmd@/gnn?socket=/run/mysqld/mysqld.sock", environ={})
  config = target.connection_config()
  assert config.mysql.socket == "/run/mysqld/mysqld.sock"
  assert not config.mysql.host and not config.mysql.port
  assert target.describe() == "mysql://mlmd@/gnn?socket=/run/mysqld/mysqld.sock"


def test_password_file_wins_and_loses_one_trailing_newline(tmp_path):
  path = tmp_path / "pw"
  path.write_text("from-file\n")
  env = {mc.PASSWORD_ENV: "from-env", mc.PASSWORD_FILE_ENV: "/nonexistent"}
  target = mc.parse("mysql://u@127.0.0.1/db", password_file=str(path), environ=env)
  assert target.password == "from-file" and "--mlmd-password-file" in target.password_source
  target = mc.parse("mysql://u@127.0.0.1/db", environ={mc.PASSWORD_FILE_ENV: str(path),
                                                       mc.PASSWORD_ENV: "from-env"})
  assert target.password == "from-file"
  assert mc.parse("mysql://u@127.0.0.1/db", environ={mc.PASSWORD_ENV: "e"}).password == "e"


def test_missing_password_file_names_the_file():
  with pytest.raises(mc.MlmdConfigError, match=r"/nonexistent/pw.*--mlmd-password-file"):
    mc.parse("mysql://u@127.0.0.1/db", password_file="/nonexistent/pw", environ={})


@pytest.mark.parametrize("uri, message", [
    ("mysql://mlmd:hunter2@127.0.0.1/db", r"holds a password.*GNN_MLMD_PASSWORD"),
    ("mysql://mlmd@localhost:3306/db", r"127\.0\.0\.1"),
    ("mysql://127.0.0.1:3306/db", r"names no user"),
    ("mysql://mlmd@127.0.0.1:3306", r"name one database"),
    ("mysql://mlmd@127.0.0.1:3306/a/b", r"name one database"),
    ("mysql://mlmd@127.0.0.1/db?ssl=1", r"unknown option"),
    ("mysql://mlmd@127.0.0.1/db?socket=/s", r"both a host"),
    ("mysql://mlmd@/db", r"neither a host nor"),
    ("mysql://mlmd@127.0.0.1:99999/db", r"port"),
    ("postgres://mlmd@127.0.0.1/db", r"unknown scheme 'postgres'"),
    ("sqlite://host/x.sqlite", r"three slashes"),
    ("", r"empty"),
])
def test_bad_uris_say_what_to_write(uri, message):
  with pytest.raises(mc.MlmdConfigError, match=message) as info:
    mc.parse(uri, environ={})
  assert "hunter2" not in str(info.value)


def test_redact_masks_raw_and_protobuf_escaped_passwords():
  secret = 'p"w\\x-unit-test'
  target = mc.MlmdTarget(kind="mysql", host="h", port=1, database="d", user="u",
                         password=secret)
  text = str(target.connection_config())  # protobuf text format escapes " and \
  assert secret not in text and "password:" in text
  mc.hide_in_logs(secret)
  assert "unit-test" not in mc.redact(text)
  assert mc.redact(f"raw {secret} end") == f"raw {mc.REDACTED} end"


def test_log_records_of_any_logger_are_masked(caplog):
  secret = "s3cret-for-logging-test"
  mc.hide_in_logs(secret)
  # absl's logger keeps its own level (WARNING once absl logging is set up in the process).
  with caplog.at_level(logging.INFO), caplog.at_level(logging.INFO, logger="absl"):
    logging.getLogger("absl").info("Using connection config:\n %s", f'password: "{secret}"')
    logging.getLogger("some.other").warning("login with %s failed", secret)
  text = "\n".join(r.getMessage() for r in caplog.records)
  assert secret not in text
  assert 'password: "****"' in text and "login with **** failed" in text


def test_nothing_listening_names_host_and_port():
  port = mariadb_lib.free_port()
  target = mc.parse(f"mysql://u@127.0.0.1:{port}/db", environ={})
  with pytest.raises(mc.MlmdConnectionError, match=rf"Cannot reach .*127\.0\.0\.1:{port}"):
    mc.connect(target)


def _mysql_packet(payload: bytes) -> bytes:
  return len(payload).to_bytes(3, "little") + b"\x00" + payload


_HOST_REFUSED = "Host '127.0.0.1' is not allowed to connect to this MariaDB server"


@pytest.mark.parametrize("greeting, message", [
    (b"HTTP/1.1 400 Bad Request\r\n\r\n", r"127\.0\.0\.1:{port} answers, but not as a MySQL"),
    (_mysql_packet(b"\xff" + (1130).to_bytes(2, "little") + _HOST_REFUSED.encode()),
     r"at 127\.0\.0\.1:{port} refused the connection: " + re.escape(_HOST_REFUSED) + "$"),
])
def test_what_a_port_answers_is_named(greeting, message):
  """A listener that is not MySQL, and a MySQL server that refuses this host."""
  listener = socket.socket()
  listener.bind(("127.0.0.1", 0))
  listener.listen(1)
  port = listener.getsockname()[1]

  def answer():
    conn, _ = listener.accept()
    conn.sendall(greeting)
    conn.close()

  thread = threading.Thread(target=answer, daemon=True)
  thread.start()
  try:
    with pytest.raises(mc.MlmdConnectionError, match=message.format(port=port)):
      mc.connect(mc.parse(f"mysql://u@127.0.0.1:{port}/db", environ={}))
  finally:
    thread.join(5)
    listener.close()


def test_sqlite_store_is_created(tmp_path):
  path = str(tmp_path / "sub" / "m.sqlite")
  target, config = mc.prepare(path)
  assert target.kind == "sqlite" and config.sqlite.filename_uri == path
  assert mc.connect(target).get_artifacts() == []
