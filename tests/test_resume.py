"""Kill a GnnTrainer execution with SIGKILL, retry the same pipeline run, check it resumes.

A scenario runs the demo pipeline in a child process under a fixed run id,
SIGKILLs the process group when a point is reached (observed on the file
system), retries the same run id, and checks ML Metadata and the model. One
run is killed at three points in turn (before its first backup, mid-training,
while exporting), each retry resuming from what the killed attempt left.
"""

import glob
import logging
import os
import time

import pytest

from devtools import soak
from pipelines.runtime import mlmd_utils
from tests.helpers import demo_examples_artifact, run_executor

pytestmark = [pytest.mark.slow, pytest.mark.reliability]

PIPELINE = "gnn-resume"
TRAIN_STEPS = soak.TRAIN_STEPS  # 3 epochs x 20 steps, a backup every 5 steps
STEPS_PER_EPOCH = TRAIN_STEPS // soak.EPOCHS


@pytest.fixture(scope="module")
def root(tmp_path_factory):
  return str(tmp_path_factory.mktemp("resume"))


def _start(root, demo_data, run_id, log_path):
  # A seed per run id: otherwise the next scenario's GnnTrainer is a cache hit.
  return soak.start_child(root, demo_data, run_id, log_path, pipeline_name=PIPELINE,
                          config=dict(soak.CONFIG, seed=sum(map(ord, run_id))))


def _point_reached(point, root, run_id, log_path):
  resume = soak.resume_dir(root, run_id)
  has_backup = bool(glob.glob(os.path.join(resume, "**", "checkpoint"), recursive=True))
  if point == "before_first_checkpoint":
    return "GnnTrainer: " in open(log_path).read() and not has_backup
  if point == "mid_epoch":
    return has_backup
  if point == "during_export":
    return bool(glob.glob(os.path.join(root, "pipeline_root", "GnnTrainer", "model", "*",
                                       "_staging_Format-Serving")))
  raise ValueError(point)


#: Where the attempts of one pipeline run are killed, in turn; the next attempt completes.
KILL_POINTS = ("before_first_checkpoint", "mid_epoch", "during_export")


def _backup_is_right(point: str, start: int, step) -> bool:
  """Whether a kill at ``point`` left a backup at ``step`` (the attempt resumed at ``start``)."""
  if point == "before_first_checkpoint":
    return step is None
  if point == "mid_epoch":
    return step is not None and start < step < TRAIN_STEPS
  return step == TRAIN_STEPS  # during_export: training had finished and been backed up


def test_an_execution_killed_at_three_points_resumes_each_time_and_publishes_once(
    root, demo_data):
  """One run's GnnTrainer killed before its first backup, mid-training, then while exporting.

  Each kill hits a retry of the same pipeline run: every retry resumes from the backup the
  killed attempt left and trains only the steps after it; nothing is published until the
  last attempt, which publishes one Model.
  """
  run_id = "run-killed-thrice"
  start = 0  # the step the next attempt must resume from
  for attempt, point in enumerate((*KILL_POINTS, None), start=1):
    log_path = os.path.join(root, f"attempt{attempt}.log")
    proc = _start(root, demo_data, run_id, log_path)
    if point is None:
      assert proc.wait(timeout=900) == 0, open(log_path).read()[-5000:]
    else:
      deadline = time.time() + 900
      while not _point_reached(point, root, run_id, log_path):
        assert proc.poll() is None, (f"attempt {attempt} finished before reaching {point}:\n"
                                     + open(log_path).read()[-3000:])
        assert time.time() < deadline, "timed out waiting for " + point
        time.sleep(0.05)
      soak.kill_group(proc)
      assert soak.run_models(root, run_id) == []  # a killed attempt publishes nothing
    log = open(log_path).read()
    if start:
      assert f"Resuming from checkpoint at step {start}" in log, (attempt, log[-3000:])
    else:
      assert "Resuming from checkpoint" not in log, attempt
    if point in ("during_export", None):
      # What the attempt really trained, counted in its process by a callback of
      # devtools.pipeline_child when its fit ended: only the steps after the backup, in the
      # epochs from the backup's on. An attempt that trains from scratch runs all TRAIN_STEPS.
      assert soak.fits_run(log_path) == [{
          "batches": TRAIN_STEPS - start,
          "epochs": list(range(start // STEPS_PER_EPOCH + 1, soak.EPOCHS + 1))}], (
              f"attempt {attempt} resumed at step {start} and ran {soak.fits_run(log_path)}")
    if point is not None:
      # Where the retry must resume: the optimizer step in the backup this attempt left.
      backup_step = soak.backup_train_step(root, run_id)
      assert _backup_is_right(point, start, backup_step), (point, start, backup_step)
      start = backup_step or 0

  models = soak.run_models(root, run_id)
  assert len(models) == 1, models
  model = models[0]
  props = mlmd_utils.custom_properties(model)
  # What the trainer reports: the run's total steps and where the last attempt resumed.
  assert props["train_steps"] == TRAIN_STEPS
  assert props["resumed_from_step"] == TRAIN_STEPS
  assert "eval_sparse_categorical_accuracy" in props
  # One complete model, no partial directory, resume state cleaned up.
  assert sorted(os.listdir(model.uri)) == ["Format-Serving"]
  assert not os.path.exists(soak.resume_dir(root, run_id))
  served = soak.check_serves(os.path.join(model.uri, "Format-Serving"),
                             os.path.join(demo_data["examples"], "eval", "*"), n=1)
  assert served["ok"], served


def test_new_run_does_not_pick_up_another_runs_checkpoints():
  from gnn_trainer_component.outputs import resume_dir
  a = resume_dir("/root/GnnTrainer/model/7", "2026-11-23T03:00:00", "/m")
  b = resume_dir("/root/GnnTrainer/model/9", "2026-11-23T04:00:00", "/m")
  retry = resume_dir("/root/GnnTrainer/model/8", "2026-11-23T03:00:00", "/m")
  assert a == retry != b
  assert a == "/root/GnnTrainer/.resume/2026-11-23T03_00_00"
  assert resume_dir("/gs/x/model", None, "/m/run/1") == "/m/run/1/backup"


def test_retry_after_publish_only_republishes(tmp_path, demo_data, caplog):
  """A retry of an execution killed after the rename (before MLMD) must not train again.

  It reuses the execution's URIs (TFX reuses the RUNNING execution), finds the
  published model and its recorded properties, and removes whatever is left of
  the resume dir, even a half-deleted one that could not be resumed from.
  """
  uri = demo_examples_artifact(demo_data, str(tmp_path / "examples"))
  first, _ = run_executor(str(tmp_path), examples_uri=uri,
                          graph_schema_dir=demo_data["graph_schema"])
  expected = mlmd_utils.custom_properties(first.mlmd_artifact)
  serving = os.path.join(first.uri, "Format-Serving")
  published_at = os.path.getmtime(os.path.join(serving, "saved_model.pb"))
  # What a kill in the middle of removing the resume dir leaves behind.
  backup = tmp_path / "model_run" / "backup" / "chief"
  backup.mkdir(parents=True)
  (backup / "checkpoint").write_text('model_checkpoint_path: "ckpt-12"\n')
  caplog.clear()
  caplog.set_level(logging.INFO, logger="absl")
  again, _ = run_executor(str(tmp_path), examples_uri=uri,
                          graph_schema_dir=demo_data["graph_schema"])
  assert "was published by an earlier attempt of this execution" in caplog.text
  assert "GnnTrainer phase: train" not in caplog.text
  assert mlmd_utils.custom_properties(again.mlmd_artifact) == expected
  assert expected["epochs"] == 1 and "eval_sparse_categorical_accuracy" in expected
  assert os.path.getmtime(os.path.join(serving, "saved_model.pb")) == published_at
  assert not os.path.exists(tmp_path / "model_run" / "backup")


def test_time_cadence_resume_keeps_the_best_weights(root, demo_data):
  """Default cadence (by time) + restore_best_weights: killed after a backup that
  holds best weights, the retry resumes from that backup with those best weights."""
  run_id = "run-by-time"
  config = {k: v for k, v in soak.CONFIG.items() if k != "backup_every_n_steps"}
  config.update(seed=7, restore_best_weights=True, backup_every_seconds=0.3)
  log1 = os.path.join(root, "by-time-attempt1.log")
  proc = soak.start_child(root, demo_data, run_id, log1, pipeline_name=PIPELINE, config=config)
  resume = soak.resume_dir(root, run_id)
  deadline, seen = time.time() + 900, set()
  # Best weights are written right before the backup they belong to and the
  # older file is removed right after it: a second file name means the
  # backup of the first one is complete.
  while len(seen) < 2:
    seen.update(os.path.basename(p) for p in glob.glob(os.path.join(resume, "best_weights-step*.npz")))
    assert proc.poll() is None, "finished before two backups with best weights:\n" + open(log1).read()[-3000:]
    assert time.time() < deadline, "timed out waiting for backups with best weights"
    time.sleep(0.01)
  soak.kill_group(proc)
  start = soak.backup_train_step(root, run_id)
  assert start is not None and STEPS_PER_EPOCH <= start <= TRAIN_STEPS, start
  assert os.path.exists(os.path.join(resume, f"best_weights-step{start}.npz")), os.listdir(resume)

  log2 = os.path.join(root, "by-time-attempt2.log")
  retry = soak.start_child(root, demo_data, run_id, log2, pipeline_name=PIPELINE, config=config)
  assert retry.wait(timeout=900) == 0, open(log2).read()[-5000:]
  log = open(log2).read()
  assert "best weights so far (epoch" in log, log[-3000:]
  assert "GnnTrainer: restored the best weights (epoch" in log
  assert soak.fits_run(log2)[0]["batches"] == TRAIN_STEPS - start
  models = soak.run_models(root, run_id)
  assert len(models) == 1
  props = mlmd_utils.custom_properties(models[0])
  assert props["train_steps"] == TRAIN_STEPS and props["resumed_from_step"] == start
  assert 1 <= props["exported_epoch"] <= soak.EPOCHS
  assert not os.path.exists(resume)
