"""ML Metadata on a real MariaDB server (devtools/mariadb.py starts one per module).

The demo runner (``python -m pipelines.demo.run_local --mlmd mysql://...``) runs
in its own process, as a user runs it, with the password in
``$GNN_MLMD_PASSWORD``. Scenarios, all on one shared run of two pipelines in two
processes at once on one empty database (the demo, and the demo on its raw examples,
``--no-transform``): each with its lineage; no password in
any output, log, artifact or database row; after a server restart, a rerun in
another process hits the cache. And a server that is down or refuses
the login gives a clear error and nothing is published.

A ``host`` test (docs/stacks.md): it runs only with ``GNN_REQUIRE_MARIADB=1``
(``make test-all``; CI, once, on its native stack: the MLMD client is the same C++
code on both) and skips with that reason otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from devtools import mariadb as mariadb_lib
from pipelines.runtime import mlmd_connection
from pipelines.runtime import mlmd_utils
from tests.helpers import REPO_ROOT, assert_demo_lineage, producer

pytestmark = [pytest.mark.mlmd_server, pytest.mark.host, pytest.mark.slow]

DEMO = "gnn-demo"
#: The pipelines ``demo_run`` runs at once: the demo under its own name and a second one on
#: the raw examples (``--no-transform``), which is the lighter.
PIPELINES = (DEMO, "gnn-demo-b")
#: A pipeline's first run: every component ran (nothing cached).
FIRST_RUN = {
    DEMO: {component: "COMPLETE" for component in (
        "ImportExampleGen", "Importer", "StatisticsGen", "SchemaGen", "Transform", "GnnTrainer",
        "Evaluator", "Pusher")},
    "gnn-demo-b": {component: "COMPLETE" for component in (
        "ImportExampleGen", "Importer", "GnnTrainer", "Evaluator", "Pusher")}}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
  db = mariadb_lib.MariaDB(str(tmp_path_factory.mktemp("mariadb")))
  try:
    db.start()
  except mariadb_lib.MariaDBUnavailable as e:
    # Only reached with GNN_REQUIRE_MARIADB=1 (conftest skips the module otherwise).
    pytest.fail(f"GNN_REQUIRE_MARIADB=1 but MariaDB cannot run here: {e}")
  yield db
  db.stop()
  shutil.rmtree(db.base_dir, ignore_errors=True)


def _config(server, database: str):
  """The ConnectionConfig of a database (not kept in fixtures: pytest prints those)."""
  return mlmd_connection.MlmdTarget(
      kind="mysql", host="127.0.0.1", port=server.port, database=database,
      user=mariadb_lib.USER, password=server.password).connection_config()


def _run_demo(out_dir: str, mlmd_uri: str, password: str, *args: str,
              background: bool = False):
  env = dict(os.environ, DEMO_OUTPUT_DIR=out_dir, GNN_MLMD_PASSWORD=password,
             TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
  env.pop(mlmd_connection.PASSWORD_FILE_ENV, None)
  env.pop("GNN_VERBOSE", None)
  cmd = [sys.executable, "-m", "pipelines.demo.run_local", "--mlmd", mlmd_uri, *args]
  if background:
    return subprocess.Popen(cmd, env=env, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
  return subprocess.run(cmd, env=env, cwd=REPO_ROOT, capture_output=True, text=True,
                        timeout=1200, check=False)


def _ok(proc) -> None:
  assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


@pytest.fixture(scope="module")
def demo_run(server, tmp_path_factory):
  """The demo pipeline twice at once, in two processes, on one empty database ``demo``.

  Both processes create MLMD's tables at the same moment (the concurrency scenario); the
  first, under the demo's own name, is the run the other scenarios read and rerun.
  """
  outs = {name: str(tmp_path_factory.mktemp(name)) for name in PIPELINES}
  procs = {name: _run_demo(outs[name], server.uri("demo"), server.password,
                           "--pipeline-name", name, *([] if name == DEMO else ["--no-transform"]),
                           background=True) for name in PIPELINES}
  runs = {}
  for name, proc in procs.items():
    stdout, stderr = proc.communicate(timeout=1800)
    runs[name] = {"out": outs[name],
                  "proc": subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)}
  for run in runs.values():
    _ok(run["proc"])
  return {**runs[DEMO], "both": runs}


def _run_states(store, pipeline_name: str) -> list[dict]:
  """Per run of the pipeline, oldest first: {component type: execution state}."""
  from ml_metadata.proto import metadata_store_pb2 as pb
  pipeline = store.get_context_by_type_and_name("pipeline", pipeline_name)
  in_pipeline = {e.id for e in store.get_executions_by_context(pipeline.id)}
  runs = []
  for run in sorted(store.get_contexts_by_type("pipeline_run"), key=lambda c: c.id):
    executions = [e for e in store.get_executions_by_context(run.id) if e.id in in_pipeline]
    if executions:
      runs.append({store.get_execution_types_by_id([e.type_id])[0].name.rsplit(".", 1)[-1]:
                   pb.Execution.State.Name(e.last_known_state) for e in executions})
  return runs


def test_demo_pipeline_on_the_server_with_lineage(demo_run, server):
  config = _config(server, "demo")
  store = mlmd_utils.store(config)
  model = mlmd_utils.latest_artifact(config, "Model", DEMO)
  assert_demo_lineage(store, model)
  assert os.listdir(model.uri) == ["Format-Serving"]
  assert model.uri.startswith(demo_run["out"])
  blessing = mlmd_utils.latest_artifact(config, "ModelBlessing", DEMO)
  assert mlmd_utils.custom_properties(blessing)["blessed"] == 1
  pushed = mlmd_utils.latest_artifact(config, "PushedModel", DEMO)
  assert mlmd_utils.custom_properties(pushed)["pushed"] == 1
  # Everything is on the server: no SQLite file was made.
  assert not os.path.exists(os.path.join(demo_run["out"], "metadata.sqlite"))
  assert f"MLMD (MySQL/MariaDB server): {server.uri('demo')}" in demo_run["proc"].stdout
  assert _run_states(store, DEMO) == [FIRST_RUN[DEMO]]


def _files_containing(root: str, needles: list[bytes]) -> list[str]:
  hits = []
  for folder, _, files in os.walk(root):
    for name in files:
      path = os.path.join(folder, name)
      with open(path, "rb") as f:
        data = f.read()
      if any(n in data for n in needles):
        hits.append(path)
  return hits


def test_password_not_in_output_logs_artifacts_or_database(demo_run, server):
  password = server.password
  # The forms a password takes in text: raw, and escaped by protobuf's text format.
  escaped = password.replace("\\", "\\\\").replace('"', '\\"')
  needles = [password.encode(), escaped.encode()]
  for run in demo_run["both"].values():
    proc = run["proc"]
    with open(os.path.join(run["out"], "logs", "run.log"), encoding="utf-8",
              errors="replace") as f:
      log = f.read()
    # The control: TFX did log the connection config (LocalDagRunner, INFO), masked.
    assert "Using connection config" in log
    assert f'password: "{mlmd_connection.REDACTED}"' in log
    for name, text in (("stdout", proc.stdout), ("stderr", proc.stderr), ("log", log)):
      assert password not in text and escaped not in text, f"the password is in {name}"
    assert _files_containing(run["out"], needles) == []
  dump = server.dump("demo")
  assert "GnnTrainer" in dump  # the dump holds the rows
  assert password not in dump and escaped not in dump


def test_rerun_in_another_process_after_a_server_restart_hits_the_cache(demo_run, server):
  """The server restarts between two runs; the rerun, in another process, connects anew and
  every component is a cache hit: still one Model."""
  store = mlmd_utils.store(_config(server, "demo"))
  runs_before = len(_run_states(store, DEMO))
  server.restart()
  _ok(_run_demo(demo_run["out"], server.uri("demo"), server.password))
  store = mlmd_utils.store(_config(server, "demo"))  # a new connection after the restart
  runs = _run_states(store, DEMO)
  assert len(runs) == runs_before + 1
  assert runs[-1]["GnnTrainer"] == "CACHED", runs[-1]
  assert {runs[-1][n] for n in ("ImportExampleGen", "Transform", "Evaluator", "Pusher")} == {
      "CACHED"}, runs[-1]
  pipeline = store.get_context_by_type_and_name("pipeline", DEMO)
  assert [a.type for a in store.get_artifacts_by_context(pipeline.id)].count("Model") == 1


def test_two_pipelines_in_two_processes_at_once_on_an_empty_database(demo_run, server):
  """Both processes created MLMD's tables at the same moment; both succeeded."""
  config = _config(server, "demo")
  store = mlmd_utils.store(config)
  for name, run in demo_run["both"].items():
    model = mlmd_utils.latest_artifact(config, "Model", name)
    assert model.uri.startswith(run["out"])
    assert_demo_lineage(store, model, transform=name == DEMO)
    # Each model's whole lineage stays in its own pipeline and output folder.
    trainer, _ = producer(store, model.id)
    pipeline = store.get_context_by_type_and_name("pipeline", name)
    assert pipeline.id in {c.id for c in store.get_contexts_by_execution(trainer.id)}
    examples = [a for a in store.get_artifacts_by_context(pipeline.id) if a.type == "Examples"]
    assert examples and all(a.uri.startswith(run["out"]) for a in examples)
    assert _run_states(store, name)[0] == FIRST_RUN[name]


def _assert_refused(proc, out: str, *phrases: str) -> None:
  assert proc.returncode == 2, proc.stderr[-3000:]
  for phrase in phrases:
    assert phrase in proc.stderr, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr
  # Nothing ran, nothing was published.
  assert not os.path.exists(os.path.join(out, "pipeline_root"))
  assert not os.path.exists(os.path.join(out, "serving_model"))


def test_server_down_at_start_is_a_clear_error_and_publishes_nothing(server, tmp_path):
  port = mariadb_lib.free_port()  # nothing listens there
  out = str(tmp_path / "down")
  proc = _run_demo(out, f"mysql://{mariadb_lib.USER}@127.0.0.1:{port}/demo", server.password)
  _assert_refused(proc, out, f"127.0.0.1:{port}", "Cannot reach the MLMD server")


def test_planetoid_runner_checks_the_server_too(server, tmp_path):
  port = mariadb_lib.free_port()
  out = str(tmp_path / "planetoid")
  env = dict(os.environ, GNN_MLMD_PASSWORD=server.password, TF_USE_LEGACY_KERAS="1")
  proc = subprocess.run(
      [sys.executable, "-m", "pipelines.planetoid.run_local", "--data_dir", str(tmp_path),
       "--output_dir", out, "--mlmd", f"mysql://{mariadb_lib.USER}@127.0.0.1:{port}/p"],
      env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False)
  _assert_refused(proc, out, f"127.0.0.1:{port}", "Cannot reach the MLMD server")
  assert not os.path.exists(os.path.join(out, "tables_cora"))


def test_wrong_password_is_a_clear_error_and_publishes_nothing(server, tmp_path):
  out = str(tmp_path / "wrong")
  proc = _run_demo(out, server.uri("demo"), "not-the-password")
  _assert_refused(proc, out, f"127.0.0.1:{server.port}", "could not log in as 'mlmd'",
                  "$GNN_MLMD_PASSWORD")
  assert "not-the-password" not in proc.stderr + proc.stdout
