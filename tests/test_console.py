"""Quiet pipeline console (pipelines/runtime/console.py): fast, no pipeline run.

Fed with the real TFX log texts (the format strings are checked against the
installed TFX sources, so a TFX upgrade that rewords them fails here) and real
Keras verbose=2 lines, through real absl logging; the fd redirection runs in a
child process.
"""

import importlib.util
import logging
import os
import subprocess
import sys
import textwrap

from absl import logging as absl_logging
import pytest

from pipelines.runtime import console
from tests.helpers import REPO_ROOT

# Lines as they appear in a `make demo` log (TFX 1.16, tf_keras 2.16).
KERAS_EPOCH_1 = ("30/30 - 25s - loss: 1.2762 - sparse_categorical_accuracy: 0.5448 - "
                 "val_loss: 0.6507 - val_sparse_categorical_accuracy: 0.7778 - "
                 "25s/epoch - 839ms/step")
KERAS_EPOCH_2 = ("30/30 - 2s - loss: 0.5685 - sparse_categorical_accuracy: 0.8229 - "
                 "val_loss: 0.3552 - val_sparse_categorical_accuracy: 0.9022 - "
                 "2s/epoch - 82ms/step")


class FakeClock:
  def __init__(self):
    self.t = 100.0

  def __call__(self):
    return self.t


@pytest.fixture
def fed():
  """A Progress fed by real absl records: (progress, output chunks, clock)."""
  chunks = []
  clock = FakeClock()
  progress = console.Progress(chunks.append, total=8, clock=clock)
  handler = console._RecordHandler(progress)  # pylint: disable=protected-access
  absl_logger = logging.getLogger("absl")
  absl_logger.addHandler(handler)
  old = absl_logging.get_verbosity()
  absl_logging.set_verbosity(absl_logging.INFO)
  yield progress, chunks, clock
  absl_logger.removeHandler(handler)
  absl_logging.set_verbosity(old)


def _text(chunks):
  return "".join(chunks)


def _tfx_source(module):
  spec = importlib.util.find_spec(module)
  assert spec is not None and spec.origin, module
  with open(spec.origin, encoding="utf-8") as f:
    return f.read()


def test_tfx_messages_matched_exist_in_installed_tfx():
  runner = _tfx_source("tfx.orchestration.local.local_dag_runner")
  launcher = _tfx_source("tfx.orchestration.portable.launcher")
  for fmt in ("'Component %s is running.'", "'Component %s is finished.'",
              "'Skipping component %s.'"):
    assert fmt in runner, fmt
  for fmt in ("'A cached execution %d is used.'", "'Going to run a new execution %d'",
              "'Execution %d failed.'"):
    assert fmt in launcher, fmt
  assert "'Running as an importer node.'" in _tfx_source(
      "tfx.orchestration.portable.importer_node_handler")


def test_components_ran_cached_imported(fed):
  progress, chunks, clock = fed
  log = absl_logging.info
  log("Using deployment config:\n %s", "executor_specs {...}")
  log("Component %s is running.", "ImportExampleGen")
  log("Going to run a new execution: %s", "ExecutionInfo(...)")  # Not the id line.
  log("Going to run a new execution %d", 1)
  clock.t += 3.25
  log("Component %s is finished.", "ImportExampleGen")
  log("Component %s is running.", "graph_schema_importer")
  log("Running as an importer node.")
  clock.t += 0.1
  log("Component %s is finished.", "graph_schema_importer")
  log("Component %s is running.", "StatisticsGen")
  log("A cached execution %d is used.", 3)
  clock.t += 0.5
  log("Component %s is finished.", "StatisticsGen")
  log("Skipping component %s.", "SchemaGen")
  assert _text(chunks).splitlines() == [
      "[1/8] ImportExampleGen ... ran (execution 1) in 3.2 s",
      "[2/8] graph_schema_importer ... imported in 0.1 s",
      "[3/8] StatisticsGen ... cached (execution 3) in 0.5 s",
      "[4/8] SchemaGen ... skipped",
  ]
  assert [(c, s) for c, s, _ in progress.finished] == [
      ("ImportExampleGen", "ran"), ("graph_schema_importer", "imported"),
      ("StatisticsGen", "cached"), ("SchemaGen", "skipped")]


def test_component_line_is_begun_at_start(fed):
  _, chunks, _ = fed
  absl_logging.info("Component %s is running.", "Transform")
  assert _text(chunks) == "[1/8] Transform ..."  # Shown while it runs.


def test_keras_epoch_lines(fed):
  progress, chunks, clock = fed
  absl_logging.info("Component %s is running.", "GnnTrainer")
  absl_logging.info("Going to run a new execution %d", 6)
  for line in ["Epoch 1/5", KERAS_EPOCH_1, "Epoch 2/5", KERAS_EPOCH_2]:
    progress.handle_stdout_line(line)
  clock.t += 40
  absl_logging.info("Component %s is finished.", "GnnTrainer")
  assert _text(chunks).splitlines() == [
      "[1/8] GnnTrainer ...",
      "      epoch 1/5: loss=1.2762 sparse_categorical_accuracy=0.5448 val_loss=0.6507 "
      "val_sparse_categorical_accuracy=0.7778 (25 s)",
      "      epoch 2/5: loss=0.5685 sparse_categorical_accuracy=0.8229 val_loss=0.3552 "
      "val_sparse_categorical_accuracy=0.9022 (2 s)",
      "[1/8] GnnTrainer ... ran (execution 6) in 40.0 s",
  ]


def test_keras_lines_through_absl_and_multitask_keys(fed):
  """With Keras' interactive logging off, its lines arrive as absl records."""
  _, chunks, _ = fed
  absl_logging.info("Epoch 3/10")
  absl_logging.info("5/5 - 1s - loss: 2.1000 - paper/loss: 1.0000 - "
                    "paper/sparse_categorical_accuracy: 2.5000e-04 - val_loss: nan - "
                    "val_paper/loss: 1.1000 - 1s/epoch - 200ms/step")
  assert _text(chunks) == (
      "      epoch 3/10: loss=2.1000 paper/loss=1.0000 paper/sparse_categorical_accuracy="
      "2.5000e-04 val_loss=nan val_paper/loss=1.1000 (1 s)\n")


def test_parse_keras_summary():
  metrics, secs = console.parse_keras_summary(KERAS_EPOCH_2)
  assert secs == 2
  assert metrics == {"loss": "0.5685", "sparse_categorical_accuracy": "0.8229",
                     "val_loss": "0.3552", "val_sparse_categorical_accuracy": "0.9022"}
  assert console.parse_keras_summary("30/30 - 2s - 2s/epoch - 82ms/step") is None
  assert console.parse_keras_summary("Generating ephemeral wheel package") is None


def test_trainer_epoch_line_wins_over_keras(fed):
  """`GnnTrainer epoch %d/%s: %s` (callbacks.py's RunRecorder): one line per epoch.

  Keras calls its ProgbarLogger after the user callbacks, so the trainer's line
  comes first and Keras' summary is then not shown; the duration is measured
  from Keras' "Epoch n/N" header.
  """
  progress, chunks, clock = fed
  absl_logging.info("Component %s is running.", "GnnTrainer")
  absl_logging.info("Resuming from checkpoint at step %d", 30)
  progress.handle_stdout_line("Epoch 2/3")
  clock.t += 2.5
  absl_logging.info("GnnTrainer epoch %d/%s: %s", 2, 3, "loss=0.5685 val_loss=0.3552")
  progress.handle_stdout_line(KERAS_EPOCH_2)
  progress.handle_stdout_line("Epoch 3/3")
  clock.t += 1.25
  absl_logging.info("GnnTrainer epoch %d/%s: %s", 3, "?", "loss=0.4605 val_loss=0.2766")
  progress.handle_stdout_line(KERAS_EPOCH_1)
  absl_logging.info("GnnTrainer epoch %d/%s: %s", 4, "?", "loss=0.4 val_loss=0.2")  # No header.
  assert _text(chunks).splitlines() == [
      "[1/8] GnnTrainer ...",
      "      resuming from the checkpoint at step 30",
      "      epoch 2/3: loss=0.5685 val_loss=0.3552 (2.5 s)",
      "      epoch 3/3: loss=0.4605 val_loss=0.2766 (1.2 s)",
      "      epoch 4/?: loss=0.4 val_loss=0.2",
  ]


def test_keras_line_then_trainer_line_shows_the_epoch_once(fed):
  """Should the order ever be the other way round, an epoch is still shown once."""
  progress, chunks, _ = fed
  absl_logging.info("Component %s is running.", "GnnTrainer")
  progress.handle_stdout_line("Epoch 1/2")
  progress.handle_stdout_line(KERAS_EPOCH_1)
  absl_logging.info("GnnTrainer epoch %d/%s: %s", 1, 2, "loss=1.276 val_loss=0.6507")
  progress.handle_stdout_line("Epoch 2/2")
  progress.handle_stdout_line(KERAS_EPOCH_2)
  absl_logging.info("GnnTrainer epoch %d/%s: %s", 2, 2, "loss=0.5685 val_loss=0.3552")
  lines = _text(chunks).splitlines()
  assert [l for l in lines if "epoch" in l] == [
      "      epoch 1/2: loss=1.2762 sparse_categorical_accuracy=0.5448 val_loss=0.6507 "
      "val_sparse_categorical_accuracy=0.7778 (25 s)",
      "      epoch 2/2: loss=0.5685 val_loss=0.3552 (0.0 s)",
  ]


def test_failure_marks_component(fed):
  progress, chunks, clock = fed
  absl_logging.info("Component %s is running.", "GnnTrainer")
  absl_logging.info("Going to run a new execution %d", 6)
  clock.t += 2
  absl_logging.error("Execution %d failed.", 6)
  progress.fail()
  assert _text(chunks) == "[1/8] GnnTrainer ... FAILED after 2.0 s\n"


def test_verbose_requested(monkeypatch):
  monkeypatch.delenv(console.VERBOSE_ENV, raising=False)
  assert not console.verbose_requested()
  assert console.verbose_requested(True)
  for value, expected in (("1", True), ("yes", True), ("0", False), ("", False)):
    monkeypatch.setenv(console.VERBOSE_ENV, value)
    assert console.verbose_requested() is expected


def test_keras_progbar_output_is_parsed():
  """The real tf_keras ProgbarLogger (verbose=2) through the stdout tap."""
  tf_keras = pytest.importorskip("tf_keras")
  import numpy as np
  chunks = []
  progress = console.Progress(chunks.append)
  real = sys.stdout
  sys.stdout = console._StdoutTap(real, progress.handle_stdout_line)  # pylint: disable=protected-access
  try:
    model = tf_keras.Sequential([tf_keras.layers.Dense(2, input_shape=(3,))])
    model.compile(loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    x = np.zeros((8, 3), np.float32)
    y = np.zeros((8,), np.int64)
    model.fit(x, y, validation_data=(x, y), epochs=2, batch_size=4, verbose=2)
  finally:
    sys.stdout = real
  lines = _text(chunks).splitlines()
  assert len(lines) == 2, lines
  for i, line in enumerate(lines, 1):
    assert line.startswith(f"      epoch {i}/2: loss="), line
    assert " accuracy=" in line and " val_loss=" in line and " val_accuracy=" in line, line


CHILD = textwrap.dedent("""
    import os, subprocess, sys
    from absl import logging
    from pipelines.runtime import console
    logging.set_verbosity(logging.INFO)
    with console.pipeline_console(sys.argv[1], total=2) as con:
      os.write(2, b"C++ style noise on fd 2\\n")
      print("python print noise")
      sys.stderr.write("python stderr noise\\n")
      subprocess.run([sys.executable, "-c", "print('child process noise')"], check=True)
      with con.step("Loading"):
        logging.info("absl noise %d", 1)
      logging.info("Component %s is running.", "Transform")
      logging.info("Going to run a new execution %d", 5)
      logging.info("Component %s is finished.", "Transform")
      logging.info("Component %s is running.", "GnnTrainer")
      print("Epoch 1/1")
      print("3/3 - 1s - loss: 0.5000 - val_loss: 0.6000 - 1s/epoch - 300ms/step")
      if os.environ.get("FAIL"):
        logging.error("Execution %d failed.", 6)
        raise RuntimeError("boom")
      logging.info("Component %s is finished.", "GnnTrainer")
      con.echo("=== summary ===")
    logging.info("after")
    print("done")
    """)


def _run_child(tmp_path, **env):
  log_path = tmp_path / "logs" / "run.log"
  full_env = dict(os.environ, PYTHONPATH=REPO_ROOT, **env)
  full_env.pop(console.VERBOSE_ENV, None)
  full_env.update(env)
  proc = subprocess.run([sys.executable, "-c", CHILD, str(log_path)], capture_output=True,
                        text=True, env=full_env, cwd=REPO_ROOT, timeout=120)
  return proc, log_path


def test_pipeline_console_redirects_everything(tmp_path):
  proc, log_path = _run_child(tmp_path)
  assert proc.returncode == 0, proc.stderr
  lines = proc.stdout.splitlines()
  assert lines[0].startswith("Loading ... done in ")
  assert lines[1].startswith("[1/2] Transform ... ran (execution 5) in ")
  assert lines[2] == "[2/2] GnnTrainer ..."
  assert lines[3] == "      epoch 1/1: loss=0.5000 val_loss=0.6000 (1 s)"
  assert lines[4].startswith("[2/2] GnnTrainer ... done in ")
  assert lines[5:] == ["=== summary ===", "done"]  # Back on the terminal after the block.
  assert "noise" not in proc.stdout + proc.stderr
  log = log_path.read_text()
  for noise in ("C++ style noise on fd 2", "python print noise", "python stderr noise",
                "child process noise", "absl noise 1", "Component Transform is running.",
                "Epoch 1/1", "=== summary ==="):
    assert noise in log, noise


def test_pipeline_console_failure_shows_log_tail(tmp_path):
  proc, log_path = _run_child(tmp_path, FAIL="1")
  assert proc.returncode != 0
  assert "[2/2] GnnTrainer ... FAILED after" in proc.stdout
  assert "Execution 6 failed." in proc.stdout  # From the log tail.
  assert f"Full log: {log_path}" in proc.stdout
  assert "RuntimeError: boom" in proc.stderr  # The traceback reaches the terminal.


def test_pipeline_console_verbose_env(tmp_path):
  proc, log_path = _run_child(tmp_path, **{console.VERBOSE_ENV: "1"})
  assert proc.returncode == 0, proc.stderr
  assert "python print noise" in proc.stdout and "C++ style noise on fd 2" in proc.stderr
  assert "Component Transform is running." in proc.stderr
  assert not log_path.exists()


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-v"]))
