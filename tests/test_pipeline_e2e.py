"""End to end: the demo pipeline on LocalDagRunner, then ML Metadata is queried.

One pipeline run is shared by the tests of this module (training costs ~30 s).
"""

import json
import os
import subprocess
import sys

import pytest

from pipelines import mlmd_utils
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

TRAIN_STEPS = 60
EPOCHS = 3
PIPELINE = "gnn-e2e"


def _run(demo_data, root):
  from tfx import v1 as tfx
  from pipelines.demo import pipeline as demo_pipeline
  tfx.orchestration.LocalDagRunner().run(demo_pipeline.create_pipeline(
      pipeline_name=PIPELINE, pipeline_root=os.path.join(root, "pipeline_root"),
      examples_dir=demo_data["examples"], graph_schema_dir=demo_data["graph_schema"],
      metadata_path=os.path.join(root, "metadata.sqlite"),
      train_steps=TRAIN_STEPS,
      custom_config={"global_batch_size": 32, "epochs": EPOCHS, "seed": 3,
                     "summarize_every_n_steps": "never"}))
  return os.path.join(root, "metadata.sqlite")


@pytest.fixture(scope="module")
def pipeline_run(demo_data, tmp_path_factory):
  root = str(tmp_path_factory.mktemp("e2e"))
  return {"root": root, "metadata": _run(demo_data, root)}


def _gnn_executions(store):
  return [e for e in store.get_executions()
          if store.get_execution_types_by_id([e.type_id])[0].name.endswith("GnnTrainer")]


def test_model_in_mlmd_with_properties(pipeline_run):
  model = mlmd_utils.latest_artifact(pipeline_run["metadata"], "Model", PIPELINE)
  props = mlmd_utils.custom_properties(model)
  assert props["train_steps"] == TRAIN_STEPS
  assert props["epochs"] == EPOCHS
  assert props["tasks"] == "classification_logits"
  assert props["serving_outputs"] == "logits"
  # Learned something: 3 balanced classes, chance is 1/3.
  assert props["eval_sparse_categorical_accuracy"] > 0.6, props
  assert "train_loss" in props and "eval_loss" in props
  serving = os.path.join(model.uri, "Format-Serving")
  assert os.path.exists(os.path.join(serving, "saved_model.pb"))
  assert not os.path.exists(os.path.join(model.uri, "_staging_Format-Serving"))
  model_run = mlmd_utils.latest_artifact(pipeline_run["metadata"], "ModelRun", PIPELINE)
  metrics = json.load(open(os.path.join(model_run.uri, "metrics.json")))
  assert metrics["steps"] == TRAIN_STEPS and metrics["parity"]["examples"] > 0


def test_lineage_back_to_examples(pipeline_run):
  from ml_metadata.proto import metadata_store_pb2
  store = mlmd_utils.store(pipeline_run["metadata"])
  model = mlmd_utils.latest_artifact(pipeline_run["metadata"], "Model", PIPELINE)
  out_events = [e for e in store.get_events_by_artifact_ids([model.id])
                if e.type == metadata_store_pb2.Event.OUTPUT]
  assert len(out_events) == 1
  trainer_exec = out_events[0].execution_id
  inputs = [e for e in store.get_events_by_execution_ids([trainer_exec])
            if e.type == metadata_store_pb2.Event.INPUT]
  in_types = {store.get_artifact_types_by_id([a.type_id])[0].name: a
              for a in store.get_artifacts_by_id([e.artifact_id for e in inputs])}
  assert {"Examples", "gnn_trainer_component.GraphSchema", "Schema"} <= set(in_types)
  examples = in_types["Examples"]
  producer = [e for e in store.get_events_by_artifact_ids([examples.id])
              if e.type == metadata_store_pb2.Event.OUTPUT][0].execution_id
  producer_type = store.get_execution_types_by_id(
      [store.get_executions_by_id([producer])[0].type_id])[0].name
  assert producer_type.endswith("ImportExampleGen")


RELOAD_SCRIPT = r"""
import json, os, sys
import tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
sig = model.signatures["serving_default"]
records = [r.numpy() for r in tf.data.TFRecordDataset(sys.argv[2])]
out = sig(examples=tf.constant(records))
print(json.dumps({"tfgnn_imported": "tensorflow_gnn" in sys.modules,
                  "inputs": sorted(sig.structured_input_signature[1]),
                  "predictions": {k: v.numpy().tolist() for k, v in out.items()}}))
"""


def test_savedmodel_serves_in_fresh_process_without_tfgnn(pipeline_run):
  import numpy as np
  model = mlmd_utils.latest_artifact(pipeline_run["metadata"], "Model", PIPELINE)
  model_run = mlmd_utils.latest_artifact(pipeline_run["metadata"], "ModelRun", PIPELINE)
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.run(
      [sys.executable, "-c", RELOAD_SCRIPT, os.path.join(model.uri, "Format-Serving"),
       os.path.join(model_run.uri, "parity", "examples.tfrecord")],
      capture_output=True, text=True, env=env, cwd="/", timeout=300, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  got = json.loads(proc.stdout.strip().splitlines()[-1])
  assert got["tfgnn_imported"] is False
  assert got["inputs"] == ["examples"]
  # The training process's in-memory model predicted these on the same examples.
  expected = json.load(open(os.path.join(model_run.uri, "parity", "predictions.json")))
  assert sorted(got["predictions"]) == ["logits"]
  np.testing.assert_allclose(np.array(got["predictions"]["logits"]),
                             np.array(expected["logits"]), atol=1e-5)
  assert np.array(expected["logits"]).shape[1] == 3


def test_serving_does_not_need_labels(pipeline_run, demo_data):
  """Strip every label feature from a request: the model still serves it."""
  import tensorflow as tf
  model = mlmd_utils.latest_artifact(pipeline_run["metadata"], "Model", PIPELINE)
  record = next(iter(tf.data.TFRecordDataset(
      os.path.join(demo_data["examples"], "eval", "data.tfrecord")))).numpy()
  example = tf.train.Example.FromString(record)
  for key in list(example.features.feature):
    if key.endswith("label"):
      del example.features.feature[key]
  sig = tf.saved_model.load(os.path.join(model.uri, "Format-Serving")).signatures["serving_default"]
  out = sig(examples=tf.constant([example.SerializeToString(), record]))
  logits = out["logits"].numpy()
  assert logits.shape == (2, 3)
  assert abs(logits[0] - logits[1]).max() < 1e-5  # the label never influenced outputs


def test_rerun_is_cached(pipeline_run, demo_data):
  _run(demo_data, pipeline_run["root"])
  from ml_metadata.proto import metadata_store_pb2
  store = mlmd_utils.store(pipeline_run["metadata"])
  states = [e.last_known_state for e in sorted(_gnn_executions(store), key=lambda e: e.id)]
  assert states == [metadata_store_pb2.Execution.COMPLETE, metadata_store_pb2.Execution.CACHED]
