"""End to end, two tasks in one model: a Cora paper's topic (classification) and its citations (node regression).

Planetoid tables with the ``citations`` node property -> GnnTrainer holding the
graph in memory, with ``module_files/planetoid_multitask.py`` (``tasks`` +
``loss_weights`` + the ``ReadoutRootFeatures`` processor) on LocalDagRunner.
Checks per-task metrics in ML Metadata, both test scores through the exported
model with requests that hold no label (the test papers' subgraphs, sampled from
the tables as GraphSampler samples them), and one serving output per task in a
fresh process without TF-GNN. (A model trained on GraphSampler's examples of
Cora: ``test_planetoid.py``.)
"""

import os

import numpy as np
import pytest

from pipelines.runtime import mlmd_utils
from tests import helpers

pytestmark = pytest.mark.slow

PIPELINE = "planetoid-cora-multitask"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  from pipelines.planetoid import run_local
  data_dir = helpers.require_planetoid("cora")
  root = str(tmp_path_factory.mktemp("multitask"))
  result = run_local.run_once(
      dataset="cora", data_dir=data_dir, multitask=True,
      module_file=os.path.join(helpers.REPO_ROOT, "module_files", "planetoid_multitask.py"),
      output_dir=root, seed=0, mode="in_memory",
      custom_config={"epochs": 100, "validation_freq": 10})
  metadata = os.path.join(root, "metadata.sqlite")
  return {"result": result,
          "model": mlmd_utils.latest_artifact(metadata, "Model", PIPELINE),
          "test_examples": os.path.join(root, "in_memory_test_cora")}  # run_once wrote them


def test_both_tasks_learn(run):
  result = run["result"]
  assert result["num_test_examples"] == 1000
  # 7 topics (GCN alone: ~0.8 at 200 epochs).
  assert result["test_accuracy"] >= 0.6, result
  # Predicting the mean log citation count (MAE 0.39) is the bar.
  assert result["test_citations_mae"] < 0.95 * result["test_citations_mae_of_mean"], result
  # GraphEvaluator, on the tables, reads the multi-task export's "citations" output: the same
  # test papers and, at fan-outs covering every neighbour, the same subgraphs.
  assert result["evaluator_citations_mae"] == pytest.approx(result["test_citations_mae"],
                                                            abs=1e-3)
  assert result["evaluator_citations_mae"] < result["evaluator_citations_mae_of_mean"], result


def test_per_task_metrics_in_mlmd(run):
  props = mlmd_utils.custom_properties(run["model"])
  assert props["tasks"] == "topic,citations"
  assert props["serving_outputs"] == "citations,topic"
  for name in ("eval_topic_sparse_categorical_accuracy", "eval_topic_loss",
               "eval_citations_mean_absolute_error", "eval_citations_loss",
               "train_topic_sparse_categorical_accuracy", "eval_loss"):
    assert name in props, (name, sorted(props))
  # The total is the weighted sum of the task losses (weights 1 and 1) plus L2.
  assert props["eval_loss"] >= props["eval_topic_loss"] + props["eval_citations_loss"] - 1e-4
  assert not [k for k in props if "classification_logits" in k or "regression_logits" in k]


def test_one_serving_output_per_task_without_labels_in_fresh_process(run, tmp_path):
  import tensorflow as tf
  from pipelines import serving
  from pipelines.planetoid import pipeline as planetoid_pipeline
  files = serving.split_files(run["test_examples"], "test")
  raw = [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP").take(4)]
  requests = [planetoid_pipeline.without_node_labels(r)[0] for r in raw]
  assert all(b"paper.label" not in r and b"paper.citations" not in r for r in requests)
  saved_model = os.path.join(run["model"].uri, "Format-Serving")
  got = helpers.serve_in_fresh_process(saved_model, requests, str(tmp_path))
  assert got["tfgnn_imported"] is False
  assert sorted(got["outputs"]) == ["citations", "topic"]
  assert np.array(got["outputs"]["topic"]).shape == (4, 7)
  assert np.array(got["outputs"]["citations"]).shape == (4, 1)
  assert sorted(got["embeddings"]) == ["citations/embedding", "topic/embedding"]
