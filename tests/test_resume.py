"""Kill a GnnTrainer execution with SIGKILL, retry the same pipeline run, check it resumes.

Each scenario runs the demo pipeline in a child process under a fixed run id,
SIGKILLs the process group when a point is reached (observed on the file
system), retries the same run id, and checks ML Metadata and the model.
"""

import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from pipelines import mlmd_utils
from tests.conftest import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.reliability]

PIPELINE = "gnn-resume"
TRAIN_STEPS = 60  # 3 epochs x 20 steps, a backup every 5 steps
CONFIG = {"global_batch_size": 16, "epochs": 3, "checkpoint_every_n_steps": 5,
          "summarize_every_n_steps": "never", "parity_check_examples": 8}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
  return str(tmp_path_factory.mktemp("resume"))


def _args(root, demo_data, run_id):
  # A seed per run id: otherwise the next scenario's GnnTrainer is a cache hit.
  config = dict(CONFIG, seed=sum(map(ord, run_id)))
  return json.dumps({"pipeline_name": PIPELINE, "root": root, "run_id": run_id,
                     "examples": demo_data["examples"],
                     "graph_schema": demo_data["graph_schema"],
                     "train_steps": TRAIN_STEPS, "custom_config": config})


def _start(root, demo_data, run_id, log_path):
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
  log = open(log_path, "w")
  return subprocess.Popen([sys.executable, "-m", "tests.pipeline_child",
                           _args(root, demo_data, run_id)],
                          cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                          start_new_session=True)


def _resume_dir(root, run_id):
  return os.path.join(root, "pipeline_root", "GnnTrainer", ".resume", run_id)


def _point_reached(point, root, run_id, log_path):
  resume = _resume_dir(root, run_id)
  has_backup = bool(glob.glob(os.path.join(resume, "**", "checkpoint"), recursive=True))
  if point == "before_first_checkpoint":
    return "GnnTrainer: " in open(log_path).read() and not has_backup
  if point == "mid_epoch":
    return has_backup
  if point == "during_export":
    return bool(glob.glob(os.path.join(root, "pipeline_root", "GnnTrainer", "model", "*",
                                       "_staging_Format-Serving")))
  raise ValueError(point)


def _run_model(root, run_id):
  """The LIVE Models attributed to this pipeline run."""
  from ml_metadata.proto import metadata_store_pb2
  store = mlmd_utils.store(os.path.join(root, "metadata.sqlite"))
  ctx = store.get_context_by_type_and_name("pipeline_run", run_id)
  return [a for a in store.get_artifacts_by_context(ctx.id)
          if a.type == "Model" and a.state == metadata_store_pb2.Artifact.LIVE]


@pytest.mark.parametrize("point", ["before_first_checkpoint", "mid_epoch", "during_export"])
def test_killed_execution_resumes_on_retry(root, demo_data, point):
  run_id = f"run-{point}"
  log1 = os.path.join(root, f"{point}-attempt1.log")
  proc = _start(root, demo_data, run_id, log1)
  deadline = time.time() + 900
  while not _point_reached(point, root, run_id, log1):
    assert proc.poll() is None, f"finished before reaching {point}:\n" + open(log1).read()[-3000:]
    assert time.time() < deadline, "timed out waiting for " + point
    time.sleep(0.05)
  os.killpg(proc.pid, signal.SIGKILL)
  proc.wait()
  assert _run_model(root, run_id) == []  # the killed attempt published nothing

  log2 = os.path.join(root, f"{point}-attempt2.log")
  retry = _start(root, demo_data, run_id, log2)
  assert retry.wait(timeout=900) == 0, open(log2).read()[-5000:]

  models = _run_model(root, run_id)
  assert len(models) == 1, models
  model = models[0]
  props = mlmd_utils.custom_properties(model)
  assert props["train_steps"] == TRAIN_STEPS
  resumed = props["resumed_from_step"]
  log = open(log2).read()
  if point == "before_first_checkpoint":
    assert resumed == 0 and "Resuming from checkpoint" not in log
  else:
    assert 0 < resumed <= TRAIN_STEPS
    assert f"Resuming from checkpoint at step {resumed}" in log
    assert TRAIN_STEPS - resumed < TRAIN_STEPS  # the retry trained fewer steps
  assert "eval_sparse_categorical_accuracy" in props
  # One complete model, no partial directory, resume state cleaned up.
  assert sorted(os.listdir(model.uri)) == ["Format-Serving"]
  assert not os.path.exists(_resume_dir(root, run_id))
  import tensorflow as tf
  sig = tf.saved_model.load(os.path.join(model.uri, "Format-Serving")).signatures["serving_default"]
  record = next(iter(tf.data.TFRecordDataset(
      os.path.join(demo_data["examples"], "eval", "data.tfrecord")))).numpy()
  assert sig(examples=tf.constant([record]))["logits"].shape == (1, 3)


def test_new_run_does_not_pick_up_another_runs_checkpoints():
  from gnn_trainer_component.executor import resume_dir
  a = resume_dir("/root/GnnTrainer/model/7", "2026-11-23T03:00:00", "/m")
  b = resume_dir("/root/GnnTrainer/model/9", "2026-11-23T04:00:00", "/m")
  retry = resume_dir("/root/GnnTrainer/model/8", "2026-11-23T03:00:00", "/m")
  assert a == retry != b
  assert a == "/root/GnnTrainer/.resume/2026-11-23T03_00_00"
  assert resume_dir("/gs/x/model", None, "/m/run/1") == "/m/run/1/backup"
