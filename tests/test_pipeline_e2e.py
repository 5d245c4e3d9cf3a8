"""End to end: the demo pipeline (ExampleGen -> StatisticsGen -> SchemaGen ->
Transform -> GnnTrainer -> Evaluator -> Pusher) on LocalDagRunner, then ML
Metadata is queried. One pipeline run is shared by the tests of this module.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pipelines.runtime import mlmd_utils
from tests.helpers import assert_demo_lineage, demo_records, read_records

pytestmark = [pytest.mark.slow, pytest.mark.compat]

TRAIN_STEPS = 60
EPOCHS = 3
PIPELINE = "gnn-e2e"


def _run(demo_data, root, min_eval_accuracy=0.6):
  from tfx import v1 as tfx
  from pipelines.demo import pipeline as demo_pipeline
  tfx.orchestration.LocalDagRunner().run(demo_pipeline.create_pipeline(
      pipeline_name=PIPELINE, pipeline_root=os.path.join(root, "pipeline_root"),
      examples_dir=demo_data["examples"], graph_schema_dir=demo_data["graph_schema"],
      metadata=os.path.join(root, "metadata.sqlite"),
      serving_dir=os.path.join(root, "serving"), min_eval_accuracy=min_eval_accuracy,
      train_steps=TRAIN_STEPS,
      custom_config={"global_batch_size": 32, "epochs": EPOCHS, "seed": 3,
                     "summarize_every_n_steps": "never"}))
  return os.path.join(root, "metadata.sqlite")


@pytest.fixture(scope="module")
def pipeline_run(demo_data, tmp_path_factory):
  root = str(tmp_path_factory.mktemp("e2e"))
  return {"root": root, "metadata": _run(demo_data, root)}


def _latest(run, type_name):
  return mlmd_utils.latest_artifact(run["metadata"], type_name, PIPELINE)


def _executions(store, suffix):
  return sorted((e for e in store.get_executions()
                 if store.get_execution_types_by_id([e.type_id])[0].name.endswith(suffix)),
                key=lambda e: e.id)


def test_model_in_mlmd_with_properties(pipeline_run):
  model = _latest(pipeline_run, "Model")
  props = mlmd_utils.custom_properties(model)
  assert props["train_steps"] == TRAIN_STEPS
  assert props["epochs"] == EPOCHS
  assert props["resumed_from_step"] == 0
  assert props["tasks"] == "classification_logits"
  assert props["serving_outputs"] == "logits"
  # Learned something: 3 balanced classes, chance is 1/3.
  assert props["eval_sparse_categorical_accuracy"] > 0.6, props
  assert "train_loss" in props and "eval_loss" in props
  assert os.listdir(model.uri) == ["Format-Serving"]  # no staging or partial dirs
  model_run = _latest(pipeline_run, "ModelRun")
  metrics = json.load(open(os.path.join(model_run.uri, "metrics.json")))
  assert metrics["steps"] == TRAIN_STEPS and metrics["parity"]["examples"] > 0


def test_lineage_back_to_examples(pipeline_run):
  assert_demo_lineage(mlmd_utils.store(pipeline_run["metadata"]), _latest(pipeline_run, "Model"))


RELOAD_SCRIPT = r"""
import json, sys
import tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
out = {"tfgnn_imported": None, "signatures": sorted(model.signatures)}
for name, path in (("serving_default", sys.argv[2]), ("transformed_examples", sys.argv[3]),
                   ("embeddings", sys.argv[2]), ("transformed_embeddings", sys.argv[3])):
  sig = model.signatures[name]
  records = [r.numpy() for r in tf.data.TFRecordDataset(path)]
  if not records:
    continue
  out[name] = {k: v.numpy().tolist() for k, v in sig(examples=tf.constant(records)).items()}
out["tfgnn_imported"] = "tensorflow_gnn" in sys.modules
print(json.dumps(out))
"""


def _structure_key(record):
  """Graph structure (untouched by Transform) identifies an example."""
  import tensorflow as tf
  f = tf.train.Example.FromString(record).features.feature
  return tuple(tuple(f[k].int64_list.value) for k in
               ("nodes/paper.#size", "edges/cites.#source", "edges/cites.#target"))


def _serve_in_fresh_process(model_dir, raw_records, transformed_records, tmp_path):
  import tensorflow as tf
  paths = []
  for name, records in (("raw", raw_records), ("transformed", transformed_records)):
    paths.append(str(tmp_path / f"{name}.tfrecord"))
    with tf.io.TFRecordWriter(paths[-1]) as w:
      for r in records:
        w.write(r)
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.run([sys.executable, "-c", RELOAD_SCRIPT, model_dir, *paths],
                        capture_output=True, text=True, env=env, cwd="/", timeout=300,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


def test_raw_serving_parity_in_fresh_process_without_tfgnn(pipeline_run, demo_data, tmp_path):
  """serving_default on RAW examples == the training-time model on the transformed ones."""
  model = _latest(pipeline_run, "Model")
  model_run = _latest(pipeline_run, "ModelRun")
  transformed = read_records(os.path.join(model_run.uri, "parity", "examples.tfrecord"))
  expected = json.load(open(os.path.join(model_run.uri, "parity", "predictions.json")))
  raw_by_key = {_structure_key(r): r for r in demo_records(demo_data, "eval")}
  raw = [raw_by_key[_structure_key(t)] for t in transformed]
  assert raw[0] != transformed[0]  # really the raw encoding (string venue, raw feat)
  got = _serve_in_fresh_process(os.path.join(model.uri, "Format-Serving"), raw, transformed,
                                tmp_path)
  assert got["tfgnn_imported"] is False
  assert got["signatures"] == ["embeddings", "serving_default", "transformed_embeddings",
                               "transformed_examples"]
  np.testing.assert_allclose(np.array(got["serving_default"]["logits"]),
                             np.array(expected["logits"]), atol=1e-4)
  np.testing.assert_allclose(np.array(got["transformed_examples"]["logits"]),
                             np.array(expected["logits"]), atol=1e-5)
  # The embeddings signature, on raw and on transformed examples, is the trained model's.
  embedded = json.load(open(os.path.join(model_run.uri, "parity", "embeddings.json")))
  np.testing.assert_allclose(np.array(got["embeddings"]["embedding"]),
                             np.array(embedded["embedding"]), atol=1e-4)
  np.testing.assert_allclose(np.array(got["transformed_embeddings"]["embedding"]),
                             np.array(embedded["embedding"]), atol=1e-5)


def test_evaluator_blessed_and_agrees_with_trainer(pipeline_run):
  """TFMA ran the raw-serving model over the whole raw eval split; its accuracy
  equals the trainer's validation accuracy on the transformed split."""
  evaluation = _latest(pipeline_run, "ModelEvaluation")
  metrics = mlmd_utils.tfma_metrics(evaluation.uri)
  props = mlmd_utils.custom_properties(_latest(pipeline_run, "Model"))
  assert metrics["sparse_categorical_accuracy"] == pytest.approx(
      props["eval_sparse_categorical_accuracy"], abs=1e-5)
  for c in range(3):
    assert 0 < metrics[f"recall [classId:{c} topK:1]"] <= 1
  blessing = _latest(pipeline_run, "ModelBlessing")
  assert mlmd_utils.custom_properties(blessing)["blessed"] == 1


def test_pushed_model_serves_raw_examples_in_fresh_process(pipeline_run, demo_data, tmp_path):
  pushed = _latest(pipeline_run, "PushedModel")
  props = mlmd_utils.custom_properties(pushed)
  assert props["pushed"] == 1
  destination = props["pushed_destination"]
  assert destination.startswith(os.path.join(pipeline_run["root"], "serving"))
  raw = demo_records(demo_data, "eval")[:5]
  import tensorflow as tf
  stripped = []
  for r in raw:  # no label of any kind in the request
    ex = tf.train.Example.FromString(r)
    for key in [k for k in ex.features.feature if k.endswith("label")]:
      del ex.features.feature[key]
    stripped.append(ex.SerializeToString())
  got = _serve_in_fresh_process(destination, stripped, [], tmp_path)
  assert got["tfgnn_imported"] is False
  logits = np.array(got["serving_default"]["logits"])
  assert logits.shape == (5, 3)
  model = _latest(pipeline_run, "Model")
  with_labels = _serve_in_fresh_process(os.path.join(model.uri, "Format-Serving"), raw, [],
                                        tmp_path)
  np.testing.assert_allclose(logits, np.array(with_labels["serving_default"]["logits"]),
                             atol=1e-5)  # labels never influence predictions


def test_rerun_is_cached(pipeline_run, demo_data):
  _run(demo_data, pipeline_run["root"])
  from ml_metadata.proto import metadata_store_pb2 as pb
  store = mlmd_utils.store(pipeline_run["metadata"])
  states = [e.last_known_state for e in _executions(store, "GnnTrainer")]
  everything = [(store.get_execution_types_by_id([e.type_id])[0].name.rsplit(".", 1)[-1],
                 pb.Execution.State.Name(e.last_known_state))
                for e in sorted(store.get_executions(), key=lambda e: e.id)]
  assert states == [pb.Execution.COMPLETE, pb.Execution.CACHED], everything


def test_model_below_threshold_is_not_blessed_nor_pushed(pipeline_run, demo_data):
  serving = os.path.join(pipeline_run["root"], "serving")
  before = sorted(os.listdir(serving))
  _run(demo_data, pipeline_run["root"], min_eval_accuracy=0.9999)
  store = mlmd_utils.store(pipeline_run["metadata"])
  from ml_metadata.proto import metadata_store_pb2 as pb
  assert _executions(store, "GnnTrainer")[-1].last_known_state == pb.Execution.CACHED
  blessing = _latest(pipeline_run, "ModelBlessing")
  assert mlmd_utils.custom_properties(blessing)["blessed"] == 0
  pushed = _latest(pipeline_run, "PushedModel")
  assert mlmd_utils.custom_properties(pushed)["pushed"] == 0
  assert sorted(os.listdir(serving)) == before
