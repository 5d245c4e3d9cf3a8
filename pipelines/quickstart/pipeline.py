"""The quickstart pipeline (docs/quickstart.md): from CSV tables of a graph to a pushed model.

Importer (the tables folder as a ``GraphSchema`` artifact) -> GraphStatisticsGen ->
GraphValidator (against the last run's statistics; the rest runs only on a valid graph,
``tfx.dsl.Cond``) -> GraphSampler -> GnnTrainer -> GraphEvaluator (accuracy on the test users beside the majority class
and label propagation, blessing) -> BulkInferrer (the test split) and Pusher (to
``serving_dir``); the blessed model's user embeddings -> EmbeddingIndex (users like this
one, gated on recall, latency and churn against the last index it blessed) -> Pusher (to
``index_serving_dir``).

Everything specific to a graph is in the tables folder (``graph_schema.pbtxt``,
the tables it names, ``seeds-{train,eval,test}.csv``) and in the module file
(the model, and the ``SEED_NODE_SET``, ``LABEL`` and ``HOPS`` this pipeline
reads from it).
"""

from __future__ import annotations

import os
import runpy
from typing import Any, Mapping, Optional

from tfx import v1 as tfx

from gnn_trainer_component import EmbeddingIndex
from gnn_trainer_component import GnnTrainer
from gnn_trainer_component import GraphEvaluator
from gnn_trainer_component import GraphInferrer
from gnn_trainer_component import GraphSampler
from gnn_trainer_component import GraphSchema
from gnn_trainer_component.index.component import last_blessed_index
from pipelines import REPO_ROOT
from pipelines.validation import validate_graph

PIPELINE_NAME = "gnn-quickstart"
DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
MODULE_FILE = os.path.join(REPO_ROOT, "module_files", "quickstart.py")
#: Split -> seed table (in the tables folder): the nodes to train on, validate on, test on.
SEEDS = {"train": "seeds-train.csv", "eval": "seeds-eval.csv", "test": "seeds-test.csv"}
#: GnnTrainer's custom_config: 30 passes over the train split (``epochs``), 32 subgraphs per
#: step; the weights of the epoch with the lowest validation loss are exported.
TRAINING = {"global_batch_size": 32, "epochs": 30, "restore_best_weights": True, "seed": 1,
            "summarize_every_n_steps": "never"}
#: EmbeddingIndex's index_config: the users' hidden states compared by cosine, the ten
#: nearest; one query's p99 within 50 ms (a laptop, not a server).
INDEX_CONFIG = {"metric": "cosine", "k": 10, "max_p99_ms": 50.0}


def task_of(module_file: str) -> dict[str, Any]:
  """What the pipeline reads from the module file: ``SEED_NODE_SET``, ``LABEL``, ``HOPS``."""
  module = runpy.run_path(module_file)
  return {name: module[name] for name in ("SEED_NODE_SET", "LABEL", "HOPS")}


def label_feature(task: dict[str, Any]) -> str:
  """The feature of a sampled tf.Example that holds the seed's label."""
  return f"nodes/{task['SEED_NODE_SET']}.{task['LABEL']}"


def eval_config(task: dict[str, Any], min_accuracy: float) -> dict[str, Any]:
  """GraphEvaluator's config: test accuracy, at least ``min_accuracy`` and above every baseline.

  The baselines, on the same test users: the majority class, and label propagation (the
  training users' labels spread over the purchases).
  """
  return {"task": "classification", "label": task["LABEL"],
          "test_seeds": SEEDS["test"], "train_seeds": SEEDS["train"],
          "thresholds": [{"metric": "accuracy", "lower_bound": min_accuracy},
                         {"metric": "accuracy", "min_gain_over_baselines": 0.0}]}


def create_pipeline(*, pipeline_root: str, metadata_path: str, serving_dir: str,
                    index_serving_dir: str, data_dir: str = DATA_DIR,
                    module_file: str = MODULE_FILE, min_accuracy: float = 0.8,
                    epochs: int = TRAINING["epochs"],
                    hparams: Optional[Mapping[str, Any]] = None) -> tfx.dsl.Pipeline:
  """Builds the quickstart pipeline.

  Args:
    pipeline_root: Folder of every artifact.
    metadata_path: The ML Metadata SQLite file.
    serving_dir: Where Pusher copies a blessed model.
    index_serving_dir: Where the second Pusher copies a blessed index of the users.
    data_dir: The tables folder: ``graph_schema.pbtxt``, its tables, the seed tables.
    module_file: The GnnTrainer module; it also names ``SEED_NODE_SET``,
      ``LABEL`` and ``HOPS``.
    min_accuracy: GraphEvaluator blesses (and Pusher pushes) a model whose test
      accuracy is at least this and above every baseline's.
    epochs: Passes over the train split.
    hparams: Overrides of the module's ``HPARAMS`` (e.g. ``{"units": 64}``).

  Returns:
    The pipeline, on SQLite ML Metadata, without caching (edited tables are re-read).
    On a graph GraphValidator finds invalid, nothing after it runs.
  """
  task = task_of(module_file)
  tables = tfx.dsl.Importer(
      source_uri=data_dir, artifact_type=GraphSchema).with_id("graph_tables")
  # The graph's statistics, held to GraphValidator's default bounds and to the last run's.
  validation, graph_is_valid = validate_graph(
      tables, seeds=SEEDS,
      statistics_config={"seed_node_set": task["SEED_NODE_SET"], "label": task["LABEL"]})
  with tfx.dsl.Cond(graph_is_valid):
    trained = _train_and_release(tables, task, module_file=module_file, epochs=epochs,
                                 hparams=hparams, min_accuracy=min_accuracy,
                                 serving_dir=serving_dir, index_serving_dir=index_serving_dir)
  return tfx.dsl.Pipeline(
      pipeline_name=PIPELINE_NAME, pipeline_root=pipeline_root,
      components=[tables, *validation, *trained],
      enable_cache=False,
      metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
          metadata_path))


def _train_and_release(tables, task: dict[str, Any], *, module_file: str, epochs: int,
                       hparams: Optional[Mapping[str, Any]], min_accuracy: float,
                       serving_dir: str, index_serving_dir: str) -> list:
  """GraphSampler -> GnnTrainer -> GraphEvaluator -> BulkInferrer, Pusher; the users' index."""
  sampler = GraphSampler(
      graph_schema=tables.outputs["result"], seeds=SEEDS,
      sampling_config={"seed_node_set": task["SEED_NODE_SET"], "hops": task["HOPS"]})
  trainer = GnnTrainer(
      examples=sampler.outputs["examples"],
      graph_schema=sampler.outputs["output_graph_schema"],
      module_file=module_file,
      train_args=tfx.proto.TrainArgs(splits=["train"]),
      eval_args=tfx.proto.EvalArgs(splits=["eval"]),
      custom_config=dict(TRAINING, epochs=epochs, hparams=dict(hparams or {})))
  # The test users' subgraphs, sampled from the tables as GraphSampler samples them.
  evaluator = GraphEvaluator(
      model=trainer.outputs["model"], graph_schema=tables.outputs["result"],
      sampling_config={"seed_node_set": task["SEED_NODE_SET"], "hops": task["HOPS"]},
      eval_config=eval_config(task, min_accuracy))
  bulk_inferrer = tfx.components.BulkInferrer(
      examples=sampler.outputs["examples"], model=trainer.outputs["model"],
      model_blessing=evaluator.outputs["blessing"],
      data_spec=tfx.proto.DataSpec(example_splits=["test"]),
      model_spec=tfx.proto.ModelSpec())
  pusher = tfx.components.Pusher(
      model=trainer.outputs["model"], model_blessing=evaluator.outputs["blessing"],
      push_destination=tfx.proto.PushDestination(
          filesystem=tfx.proto.PushDestination.Filesystem(base_directory=serving_dir)))
  # Every user's embedding from the blessed model, indexed: users like this one.
  users = GraphInferrer(
      model=trainer.outputs["model"], model_blessing=evaluator.outputs["blessing"],
      graph_schema=tables.outputs["result"],
      sampling_config={"seed_node_set": task["SEED_NODE_SET"], "hops": task["HOPS"]},
      inference_config={"signatures": ["embeddings"]}).with_id("user_embeddings")
  last_index = last_blessed_index("user_index")
  index = EmbeddingIndex(
      embeddings=users.outputs["embeddings"], baseline_index=last_index.outputs["model"],
      index_config=INDEX_CONFIG).with_id("user_index")
  index_pusher = tfx.components.Pusher(
      model=index.outputs["index"], model_blessing=index.outputs["blessing"],
      push_destination=tfx.proto.PushDestination(
          filesystem=tfx.proto.PushDestination.Filesystem(base_directory=index_serving_dir))
  ).with_id("user_index_pusher")
  return [sampler, trainer, evaluator, bulk_inferrer, pusher, users, last_index, index,
          index_pusher]
