"""Multi-worker training that really runs: MultiWorkerMirroredStrategy on 127.0.0.1.

Each test starts real replica processes: ``custom_config["local_workers"]``
makes GnnTrainer build the CustomJob it would submit to Vertex AI and
``local_cluster`` runs each replica's container command (``python -m
tfx.scripts.run_executor ...``) with the ``CLUSTER_SPEC``/``TF_CONFIG`` Vertex
AI sets. Nothing is mocked: the collectives, the sharded input, the chief-only
publish are TensorFlow's and ours.
"""

import glob
import json
import os
import re
import time

import pytest

from devtools import soak
from tests.helpers import demo_examples_artifact, demo_records, run_executor, \
    serve_in_fresh_process, write_examples_artifact_dir

pytestmark = [pytest.mark.slow, pytest.mark.distributed]

CONFIG = {"global_batch_size": 16, "epochs": 3, "summarize_every_n_steps": "never",
          "seed": 1, "cache": "memory"}
TRAIN_STEPS = 30  # 3 epochs x 10 steps
#: Same start, same global batches as one process: both warm-start from one
#: base model, and one training file is sharded by record (worker i keeps
#: records i, i+n, ...) without shuffling or dropout, so a global batch of the
#: job holds the same examples as the single process's batch (in the same order:
#: `deterministic` keeps tf.data's parallel maps in order).
SAME_BATCHES = {"shuffle_buffer_size": 0, "hparams": {"dropout": 0.0}, "deterministic": True}
#: Max relative difference of each epoch's training and validation loss, two
#: workers vs one process on the same global batches (measured: equal to 5 digits).
LOSS_RTOL = 1e-3


def _shard_lines(log_dir: str) -> dict:
  """{task: [file lists its training input pipeline read]} from the task logs."""
  out = {}
  for path in glob.glob(os.path.join(log_dir, "*.log")):
    text = open(path, errors="replace").read()
    out[os.path.basename(path)[:-4]] = re.findall(
        r"input pipeline (\d+) of (\d+) reads \d+ of the \d+ files of train_args[^:]*: (\[.*\])",
        text)
  return out


def _examples(tmp_path, demo_data, name, train_files=1) -> str:
  """The demo's examples, its training split in ``train_files`` files (records dealt round)."""
  records = demo_records(demo_data, "train")
  by_split = {"eval": demo_records(demo_data, "eval")}
  examples = str(tmp_path / f"{name}-examples")
  if train_files == 1:
    by_split["train"] = records
    write_examples_artifact_dir(examples, by_split)
  else:
    write_examples_artifact_dir(examples, by_split)
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    os.makedirs(os.path.join(examples, "Split-train"), exist_ok=True)
    for i in range(train_files):
      path = os.path.join(examples, "Split-train",
                          f"data_tfrecord-{i:05d}-of-{train_files:05d}.gz")
      with tf.io.TFRecordWriter(path, options="GZIP") as w:
        for r in records[i::train_files]:
          w.write(r)
  return examples


def _train(tmp_path, demo_data, name, workers, train_files=1, base_model=None,
           train_steps=TRAIN_STEPS, **config):
  examples = _examples(tmp_path, demo_data, name, train_files)
  run_dir = str(tmp_path / name)
  cfg = dict(CONFIG, local_workers=workers, **config)
  model, model_run = run_executor(run_dir, examples_uri=examples,
                                  graph_schema_dir=demo_data["graph_schema"],
                                  train_steps=train_steps, custom_config=cfg,
                                  base_model_uri=base_model)
  return model, model_run


def _history(model_run) -> list:
  with open(os.path.join(model_run.uri, "history.json")) as f:
    return json.load(f)


@pytest.fixture(scope="module")
def single(tmp_path_factory, demo_data):
  """The single-process reference run."""
  tmp = tmp_path_factory.mktemp("single")
  base, _ = _train(tmp, demo_data, "base", 1, train_steps=3, epochs=1)
  return base, _train(tmp, demo_data, "single", 1, base_model=base.uri, **SAME_BATCHES)


def test_three_workers_read_distinct_files_and_only_the_chief_publishes(tmp_path, demo_data):
  model, model_run = _train(tmp_path, demo_data, "three", 3, train_files=6, global_batch_size=18)
  shards = _shard_lines(os.path.join(model_run.uri, "cluster"))
  assert set(shards) == {"chief-0", "worker-0", "worker-1"}, shards
  read = [json.loads(lines[0][2].replace("'", '"')) for lines in shards.values()]
  assert sorted(lines[0][:2] for lines in shards.values()) == [("0", "3"), ("1", "3"), ("2", "3")]
  assert [len(files) for files in read] == [2, 2, 2]
  assert len(set().union(*read)) == 6  # distinct shards, every file read
  # Only the chief wrote into the Model and the ModelRun's run files.
  assert sorted(os.listdir(model.uri)) == ["Format-Serving"]
  assert not glob.glob(os.path.join(model.uri, "**", "*worker*"), recursive=True)
  assert model.get_int_custom_property("train_steps") == TRAIN_STEPS


def _task_pid(task: str):
  """The pid of the running local-job replica ``task`` (e.g. ``"worker:0"``), or None."""
  task_type, index = task.split(":")
  for pid in os.listdir("/proc"):
    if not pid.isdigit():
      continue
    try:
      with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
      if b"tfx.scripts.run_executor" not in argv:
        continue
      with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
    except OSError:
      continue
    config = json.loads(env.get(b"TF_CONFIG", b"{}"))
    if config.get("task") == {"type": task_type, "index": int(index)}:
      return int(pid)
  return None


def test_sigkill_a_worker_then_the_retried_run_resumes_and_publishes_one_model(
    tmp_path, demo_data):
  """The demo pipeline under LocalDagRunner with GnnTrainer on 2 local workers."""
  from pipelines.runtime import mlmd_utils  # pylint: disable=g-import-not-at-top
  root, run_id = str(tmp_path), "mw-kill"
  config = dict(soak.CONFIG, local_workers=2)
  log1 = os.path.join(root, "attempt1.log")
  proc = soak.start_child(root, demo_data, run_id, log1, pipeline_name="gnn-mw", config=config)
  deadline = time.time() + 600
  while True:  # until the job backed up mid-training
    step = soak.backup_train_step(root, run_id)
    if step is not None and step < soak.TRAIN_STEPS and _task_pid("worker:0"):
      break
    assert proc.poll() is None, open(log1).read()[-4000:]
    assert time.time() < deadline, "no backup in time"
    time.sleep(0.05)
  os.kill(_task_pid("worker:0"), 9)
  assert proc.wait(timeout=300) != 0
  log = open(log1).read()
  assert "task worker:0" in log and "was killed by signal 9" in log, log[-4000:]
  assert soak.run_models(root, run_id) == []  # nothing published
  assert _task_pid("chief:0") is None  # the launcher stopped the other task
  backup_step = soak.backup_train_step(root, run_id)
  assert 0 < backup_step < soak.TRAIN_STEPS

  log2 = os.path.join(root, "attempt2.log")
  retry = soak.start_child(root, demo_data, run_id, log2, pipeline_name="gnn-mw", config=config)
  assert retry.wait(timeout=600) == 0, open(log2).read()[-4000:]
  models = soak.run_models(root, run_id)
  assert len(models) == 1, models  # the chief's, recorded once
  props = mlmd_utils.custom_properties(models[0])
  assert props["train_steps"] == soak.TRAIN_STEPS
  assert props["resumed_from_step"] == backup_step
  chief_logs = glob.glob(os.path.join(root, "pipeline_root", "GnnTrainer", "model_run", "*",
                                      "cluster", "chief-0.log"))
  assert any(f"Resuming from checkpoint at step {backup_step}" in open(p).read()
             for p in chief_logs), chief_logs
  assert sorted(os.listdir(models[0].uri)) == ["Format-Serving"]
  assert not os.path.exists(soak.resume_dir(root, run_id))
  served = soak.check_serves(os.path.join(models[0].uri, "Format-Serving"),
                             os.path.join(demo_data["examples"], "eval", "*"), n=1)
  assert served["ok"], served


def test_training_input_through_a_tf_data_service(tmp_path, demo_data):
  from tests import data_service  # pylint: disable=g-import-not-at-top
  examples = demo_examples_artifact(demo_data, str(tmp_path / "examples"))
  with data_service.running(str(tmp_path / "service.log")) as (port, max_tasks):
    model, model_run = run_executor(
        str(tmp_path / "run"), examples_uri=examples, graph_schema_dir=demo_data["graph_schema"],
        train_steps=TRAIN_STEPS, custom_config=dict(
            CONFIG, tf_data_service_address=f"grpc://127.0.0.1:{port}",
            tf_data_service_mode="distributed_epoch"))
    assert max_tasks() >= 1  # the service's worker ran the training input
  history = _history(model_run)
  assert len(history) == 3 and history[-1]["loss"] < history[0]["loss"]
  assert sorted(os.listdir(model.uri)) == ["Format-Serving"]


def test_unreachable_tf_data_service_is_named_and_nothing_is_published(tmp_path, demo_data):
  from gnn_trainer_component.distributed import local_cluster
  from gnn_trainer_component.trainer import input_data  # pylint: disable=g-import-not-at-top
  from tests.helpers import assert_nothing_published  # pylint: disable=g-import-not-at-top
  port = local_cluster.free_ports(1)[0]  # nothing listens there
  examples = demo_examples_artifact(demo_data, str(tmp_path / "examples"))
  with pytest.raises(input_data.DataServiceError, match=f"127.0.0.1:{port}"):
    run_executor(str(tmp_path), examples_uri=examples,
                 graph_schema_dir=demo_data["graph_schema"], train_steps=TRAIN_STEPS,
                 custom_config=dict(CONFIG, tf_data_service_address=f"127.0.0.1:{port}"))
  assert_nothing_published(str(tmp_path))


def test_bad_input_fails_in_the_launcher_before_any_task_starts(tmp_path, demo_data):
  from gnn_trainer_component.trainer import validation  # pylint: disable=g-import-not-at-top
  from tests.helpers import assert_nothing_published  # pylint: disable=g-import-not-at-top
  examples = write_examples_artifact_dir(str(tmp_path / "examples"), {
      "train": [b"not a tf.Example"] * 4, "eval": demo_records(demo_data, "eval")})
  with pytest.raises(validation.InputDataError, match="Split-train"):
    run_executor(str(tmp_path), examples_uri=examples, graph_schema_dir=demo_data["graph_schema"],
                 train_steps=TRAIN_STEPS, custom_config=dict(CONFIG, local_workers=2))
  assert_nothing_published(str(tmp_path))
  assert not os.path.exists(tmp_path / "model_run" / "cluster")  # no task was started


def test_parameter_server_strategy_chief_two_workers_one_ps(tmp_path, demo_data):
  # Two workers update the parameter server asynchronously, each from weights a few steps old.
  # At the demo's learning rate (5e-3) one CI run's loss jumped from 2.9 to 1106 in epoch 3;
  # at 2e-3 every probe run's loss fell epoch by epoch.
  model, model_run = _train(tmp_path, demo_data, "ps", 3, train_files=2,
                            local_parameter_servers=1, hparams={"learning_rate": 2e-3})
  logs = sorted(os.path.basename(p) for p in glob.glob(
      os.path.join(model_run.uri, "cluster", "*.log")))
  assert logs == ["chief-0.log", "ps-0.log", "worker-0.log", "worker-1.log"]
  for task in ("ps-0", "worker-0", "worker-1"):
    text = open(os.path.join(model_run.uri, "cluster", f"{task}.log")).read()
    assert "of a parameter-server cluster): serving" in text, task
  chief = open(os.path.join(model_run.uri, "cluster", "chief-0.log")).read()
  assert "ParameterServerStrategy" in chief
  history = _history(model_run)
  assert len(history) == 3 and history[-1]["loss"] < history[0]["loss"]
  assert model.get_int_custom_property("train_steps") == TRAIN_STEPS
  assert sorted(os.listdir(model.uri)) == ["Format-Serving"]
  out = serve_in_fresh_process(os.path.join(model.uri, "Format-Serving"),
                               demo_records(demo_data, "eval")[:4], str(tmp_path))
  assert out["outputs"]


def test_the_vertex_custom_job_runs_replica_by_replica_and_matches_one_process(
    tmp_path, demo_data, single):
  """The CustomJob GnnTrainer submits for Vertex AI, run here replica by replica.

  ``ai_platform_training_args`` with a chief and one worker pool: each replica runs its
  pool's container command with only Vertex AI's ``CLUSTER_SPEC``; the executor reads
  its cluster from it, trains under MultiWorkerMirroredStrategy, and the chief
  publishes. On the same global batches as one process (SAME_BATCHES), the two
  replicas train the same losses.
  """
  # pylint: disable=g-import-not-at-top
  from tensorflow.python.framework import config as tf_config  # pylint: disable=g-direct-tensorflow-import
  from gnn_trainer_component.distributed import local_cluster
  from gnn_trainer_component.trainer import config as config_lib, launcher, publish
  from tfx.utils import path_utils
  base, (_, single_run) = single
  assert not tf_config.is_op_determinism_enabled()  # the fixture's `deterministic` did not leak
  pool = {"machine_spec": {"machine_type": "n1-standard-4"},
          "container_spec": {"image_uri": "us-docker.pkg.dev/p/r/gnn-trainer:1"}}
  vertex = {"ai_platform_vertex_region": "us-central1", "ai_platform_training_args": {
      "project": "p", "job_spec": {"worker_pool_specs": [dict(pool, replica_count=1),
                                                         dict(pool, replica_count=1)]}}}
  inputs, outputs, props = run_executor(
      str(tmp_path), examples_uri=_examples(tmp_path, demo_data, "vertex"),
      graph_schema_dir=demo_data["graph_schema"], train_steps=TRAIN_STEPS,
      custom_config=dict(CONFIG, **vertex, **SAME_BATCHES), base_model_uri=base.uri,
      run=False)
  cfg = config_lib.make_trainer_config(props["train_args"], props["eval_args"],
                                       props["custom_config"])
  job = launcher.Executor().custom_job(cfg, inputs, outputs, props, "vertex-run")
  log_dir = str(tmp_path / "replicas")
  local_cluster.run_job(job, log_dir=log_dir, with_tf_config=False)
  chief = open(os.path.join(log_dir, "chief-0.log")).read()
  worker = open(os.path.join(log_dir, "worker-0.log")).read()
  for text in (chief, worker):  # one file, two replicas: by record, each its own half
    assert "cluster from CLUSTER_SPEC (no TF_CONFIG)" in text
    assert "train has 1 file(s) for 2 input pipelines" in text
    assert "MultiWorkerMirroredStrategy, 2 replicas in sync): 30 training steps (10 per epoch)" \
        in text
  assert "GnnTrainer (worker 0): done; the chief publishes." in worker
  model, model_run = outputs["model"][0], outputs["model_run"][0]
  one, two = _history(single_run), _history(model_run)
  assert len(one) == len(two) == 3
  for a, b in zip(one, two, strict=True):
    for key in ("loss", "val_loss"):
      assert b[key] == pytest.approx(a[key], rel=LOSS_RTOL), (key, one, two)
  assert two[-1]["loss"] < two[0]["loss"]  # it learns
  assert sorted(os.listdir(model.uri)) == ["Format-Serving"]  # the chief's export only
  published = publish.published_properties(path_utils.serving_model_dir(model.uri),
                                          os.path.join(model.uri, publish.STAGING_DIR),
                                          model_run.uri)  # what the launcher reads
  assert published["train_steps"] == TRAIN_STEPS
  out = serve_in_fresh_process(path_utils.serving_model_path(model.uri),
                               demo_records(demo_data, "eval")[:4], str(tmp_path))
  assert out["outputs"]
