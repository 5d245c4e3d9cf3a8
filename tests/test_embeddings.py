"""The export's ``embeddings`` signature: which state each task family reads, and that the
published model serves it in a fresh process without TF-GNN, equal to the trained model's."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

from gnn_trainer_component import tasks as gnn_tasks
from gnn_trainer_component.model import embeddings
from gnn_trainer_component.trainer import config as config_lib
from tests.helpers import (assert_nothing_published, demo_examples_artifact, run_executor,
                           serve_in_fresh_process)


def _graph():
  """Two components of 3 and 2 "paper" nodes with states, and link readouts on each."""
  states = tf.constant([[1., 0.], [2., 0.], [3., 0.], [10., 1.], [20., 1.]])
  return tfgnn.GraphTensor.from_pieces(
      node_sets={
          "paper": tfgnn.NodeSet.from_fields(sizes=[3, 2],
                                             features={tfgnn.HIDDEN_STATE: states}),
          "_readout": tfgnn.NodeSet.from_fields(sizes=[1, 1], features={})},
      edge_sets={
          "_readout/source": tfgnn.EdgeSet.from_fields(
              sizes=[1, 1], adjacency=tfgnn.Adjacency.from_indices(
                  ("paper", [0, 3]), ("_readout", [0, 1]))),
          "_readout/target": tfgnn.EdgeSet.from_fields(
              sizes=[1, 1], adjacency=tfgnn.Adjacency.from_indices(
                  ("paper", [2, 4]), ("_readout", [0, 1])))})


class _TaskWithMethod(runner.RootNodeBinaryClassification):
  def embeddings(self, graph):
    return {"twice": 2.0 * tfgnn.gather_first_node(graph, "paper",
                                                    feature_name=tfgnn.HIDDEN_STATE)}


class _CustomTask:
  """A task of the user's own (runner.Task's methods are not what the rule reads)."""


def test_each_task_family_reads_the_state_its_head_reads():
  graph = _graph()
  label = runner.RootNodeLabelFn("paper", feature_name="label")
  got = embeddings.outputs({
      "root": runner.RootNodeMulticlassClassification("paper", num_classes=3, label_fn=label),
      "logits": gnn_tasks.RootNodeLogits("paper", num_classes=2, label_fn=label),
      "graph": runner.GraphMeanSquaredError("paper", label_fn=label),
      "link": gnn_tasks.DotProductLinkPrediction(),
      "custom": _TaskWithMethod("paper", label_fn=label)}, graph, single_task=False)
  assert sorted(got) == ["custom/twice", "graph/embedding", "link/source_embedding",
                         "link/target_embedding", "logits/embedding", "root/embedding"]
  first = [[1., 0.], [10., 1.]]
  np.testing.assert_allclose(got["root/embedding"], first)
  np.testing.assert_allclose(got["logits/embedding"], first)
  np.testing.assert_allclose(got["custom/twice"], 2 * np.array(first))
  np.testing.assert_allclose(got["graph/embedding"], [[2., 0.], [15., 1.]])  # mean pool
  np.testing.assert_allclose(got["link/source_embedding"], first)
  np.testing.assert_allclose(got["link/target_embedding"], [[3., 0.], [20., 1.]])
  single = embeddings.outputs({"t": gnn_tasks.DotProductLinkPrediction()}, graph,
                              single_task=True)
  assert sorted(single) == ["source_embedding", "target_embedding"]


def test_tasks_without_a_rule_are_named():
  tasks = {"ok": runner.RootNodeBinaryClassification(
               "paper", label_fn=runner.RootNodeLabelFn("paper", feature_name="label")),
           "mine": _CustomTask()}
  assert embeddings.unsupported(tasks) == ["mine (_CustomTask)"]


CUSTOM_TASK_MODULE = '''
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner
from module_files.demo_node_classification import model_fn

class MyTask(runner.Task):
  def __init__(self):
    self._inner = runner.RootNodeMulticlassClassification(
        "paper", num_classes=3, label_fn=runner.RootNodeLabelFn("paper", feature_name="label"))
  def preprocess(self, graph):
    return self._inner.preprocess(graph)
  def predict(self, graph):
    return self._inner.predict(graph)
  def losses(self):
    return self._inner.losses()
  def metrics(self):
    return self._inner.metrics()

def task():
  return MyTask()
'''


def test_custom_task_without_a_rule_fails_before_training(demo_data, tmp_path):
  module = tmp_path / "custom_task.py"
  module.write_text(CUSTOM_TASK_MODULE)
  uri = demo_examples_artifact(demo_data, str(tmp_path / "examples"))
  with pytest.raises(config_lib.ConfigError, match=r"MyTask.*embeddings\(graph\).*export_embeddings"):
    run_executor(str(tmp_path), examples_uri=uri, graph_schema_dir=demo_data["graph_schema"],
                 module_file=str(module))
  assert_nothing_published(str(tmp_path))
  assert not os.path.exists(tmp_path / "model_run" / "metrics.json")


@pytest.mark.slow
def test_embeddings_signature_served_in_fresh_process_without_tfgnn(demo_data, tmp_path):
  uri = demo_examples_artifact(demo_data, str(tmp_path / "examples"))
  model, model_run = run_executor(
      str(tmp_path), examples_uri=uri, graph_schema_dir=demo_data["graph_schema"],
      train_steps=8, custom_config={"global_batch_size": 16, "epochs": 1, "seed": 1,
                                    "summarize_every_n_steps": "never",
                                    "parity_check_examples": 8})
  props = json.load(open(os.path.join(model_run.uri, "model_properties.json")))
  assert props["embeddings_outputs"] == "embedding"
  metrics = json.load(open(os.path.join(model_run.uri, "metrics.json")))
  assert metrics["parity"]["embeddings_max_abs_diff"] <= 1e-4
  expected = json.load(open(os.path.join(model_run.uri, "parity", "embeddings.json")))
  records = [r.numpy() for r in tf.data.TFRecordDataset(
      os.path.join(model_run.uri, "parity", "examples.tfrecord"))]
  got = serve_in_fresh_process(os.path.join(model.uri, "Format-Serving"), records,
                               str(tmp_path))
  assert got["tfgnn_imported"] is False
  assert got["signatures"] == ["embeddings", "serving_default"]
  embedding = np.array(got["embeddings"]["embedding"])
  assert embedding.shape[0] == len(records) == 8 and embedding.shape[1] > 3
  np.testing.assert_allclose(embedding, np.array(expected["embedding"]), atol=1e-4)
  # The head is Dense(3) on exactly this state: logits are an affine map of the embedding.
  logits = np.array(got["outputs"]["logits"])
  design = np.concatenate([embedding, np.ones([len(embedding), 1])], axis=1)
  fit, *_ = np.linalg.lstsq(design, logits, rcond=None)
  np.testing.assert_allclose(design @ fit, logits, atol=1e-3)
