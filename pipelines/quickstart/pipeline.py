"""The quickstart pipeline (docs/quickstart.md): from CSV tables of a graph to a pushed model.

Importer (the tables folder as a ``GraphSchema`` artifact) -> GraphSampler ->
GnnTrainer -> Evaluator (TFMA accuracy on the test split, blessing) ->
BulkInferrer (the test split) and Pusher (to ``serving_dir``).

Everything specific to a graph is in the tables folder (``graph_schema.pbtxt``,
the tables it names, ``seeds-{train,eval,test}.csv``) and in the module file
(the model, and the ``SEED_NODE_SET``, ``LABEL`` and ``HOPS`` this pipeline
reads from it).
"""

from __future__ import annotations

import os
import runpy
from typing import Any

import tensorflow_model_analysis as tfma
from tfx import v1 as tfx

from gnn_trainer_component import GnnTrainer
from gnn_trainer_component import GraphSampler
from gnn_trainer_component import GraphSchema
from pipelines import REPO_ROOT

PIPELINE_NAME = "gnn-quickstart"
DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
MODULE_FILE = os.path.join(REPO_ROOT, "module_files", "quickstart.py")
#: Split -> seed table (in the tables folder): the nodes to train on, validate on, test on.
SEEDS = {"train": "seeds-train.csv", "eval": "seeds-eval.csv", "test": "seeds-test.csv"}
#: GnnTrainer's custom_config: 30 passes over the train split, 32 subgraphs per step; the
#: weights of the epoch with the lowest validation loss are exported.
TRAINING = {"global_batch_size": 32, "epochs": 30, "restore_best_weights": True, "seed": 1,
            "summarize_every_n_steps": "never"}


def task_of(module_file: str) -> dict[str, Any]:
  """What the pipeline reads from the module file: ``SEED_NODE_SET``, ``LABEL``, ``HOPS``."""
  module = runpy.run_path(module_file)
  return {name: module[name] for name in ("SEED_NODE_SET", "LABEL", "HOPS")}


def label_feature(task: dict[str, Any]) -> str:
  """The feature of a sampled tf.Example that holds the seed's label."""
  return f"nodes/{task['SEED_NODE_SET']}.{task['LABEL']}"


def eval_config(label_key: str, min_accuracy: float) -> tfma.EvalConfig:
  """TFMA: accuracy of the served logits against ``label_key``; blessed above ``min_accuracy``."""
  return tfma.EvalConfig(
      model_specs=[tfma.ModelSpec(signature_name="serving_default", label_key=label_key,
                                  prediction_key="logits", model_type="tf_generic")],
      slicing_specs=[tfma.SlicingSpec()],
      metrics_specs=[tfma.MetricsSpec(metrics=[
          tfma.MetricConfig(class_name="ExampleCount"),
          tfma.MetricConfig(
              class_name="SparseCategoricalAccuracy",
              threshold=tfma.MetricThreshold(value_threshold=tfma.GenericValueThreshold(
                  lower_bound={"value": min_accuracy}))),
      ])])


def create_pipeline(*, pipeline_root: str, metadata_path: str, serving_dir: str,
                    data_dir: str = DATA_DIR, module_file: str = MODULE_FILE,
                    min_accuracy: float = 0.8) -> tfx.dsl.Pipeline:
  """Builds the quickstart pipeline.

  Args:
    pipeline_root: Folder of every artifact.
    metadata_path: The ML Metadata SQLite file.
    serving_dir: Where Pusher copies a blessed model.
    data_dir: The tables folder: ``graph_schema.pbtxt``, its tables, the seed tables.
    module_file: The GnnTrainer module; it also names ``SEED_NODE_SET``,
      ``LABEL`` and ``HOPS``.
    min_accuracy: The Evaluator blesses (and Pusher pushes) a model whose test
      accuracy is at least this.

  Returns:
    The pipeline, on SQLite ML Metadata, without caching (edited tables are re-read).
  """
  task = task_of(module_file)
  tables = tfx.dsl.Importer(
      source_uri=data_dir, artifact_type=GraphSchema).with_id("graph_tables")
  sampler = GraphSampler(
      graph_schema=tables.outputs["result"], seeds=SEEDS,
      sampling_config={"seed_node_set": task["SEED_NODE_SET"], "hops": task["HOPS"]})
  trainer = GnnTrainer(
      examples=sampler.outputs["examples"],
      graph_schema=sampler.outputs["output_graph_schema"],
      module_file=module_file,
      train_args=tfx.proto.TrainArgs(splits=["train"]),
      eval_args=tfx.proto.EvalArgs(splits=["eval"]),
      custom_config=TRAINING)
  # TFMA reads the label from each example's feature "nodes/<SEED_NODE_SET>.<LABEL>":
  # the seed's, as HOPS never lead back to SEED_NODE_SET (the seed is its only node).
  evaluator = tfx.components.Evaluator(
      examples=sampler.outputs["examples"], model=trainer.outputs["model"],
      example_splits=["test"], eval_config=eval_config(label_feature(task), min_accuracy))
  bulk_inferrer = tfx.components.BulkInferrer(
      examples=sampler.outputs["examples"], model=trainer.outputs["model"],
      model_blessing=evaluator.outputs["blessing"],
      data_spec=tfx.proto.DataSpec(example_splits=["test"]),
      model_spec=tfx.proto.ModelSpec())
  pusher = tfx.components.Pusher(
      model=trainer.outputs["model"], model_blessing=evaluator.outputs["blessing"],
      push_destination=tfx.proto.PushDestination(
          filesystem=tfx.proto.PushDestination.Filesystem(base_directory=serving_dir)))
  return tfx.dsl.Pipeline(
      pipeline_name=PIPELINE_NAME, pipeline_root=pipeline_root,
      components=[tables, sampler, trainer, evaluator, bulk_inferrer, pusher],
      enable_cache=False,
      metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
          metadata_path))
