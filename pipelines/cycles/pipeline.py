"""Graph-level pipeline: generated graphs -> ImportExampleGen -> GnnTrainer.

The examples (``pipelines.cycles.data``) are whole graphs labelled by their
number of cycles; ``module_files/graph_cycles.py`` classifies or regresses it
(``custom_config["hparams"]["task"]``). :func:`evaluate_graph_model` scores
the exported model on the test split with requests that hold no label.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional

import numpy as np
import tensorflow as tf
from tfx import v1 as tfx

from gnn_trainer_component import GnnTrainer
from gnn_trainer_component import GraphSchema
from pipelines import REPO_ROOT
from pipelines import serving
from pipelines.cycles import data
from pipelines.runtime import mlmd_connection

MODULE = os.path.join(REPO_ROOT, "module_files", "graph_cycles.py")


def create_pipeline(*, pipeline_name: str, pipeline_root: str, examples_dir: str,
                    graph_schema_dir: str, metadata: mlmd_connection.Metadata,
                    custom_config: Mapping[str, Any], module_file: str = MODULE,
                    enable_cache: bool = True) -> tfx.dsl.Pipeline:
  """ImportExampleGen (train / eval / test) and GnnTrainer (trains on train, validates on eval).

  Args:
    pipeline_name: Name in MLMD.
    pipeline_root: Root of all artifacts.
    examples_dir: Folder with ``train/``, ``eval/``, ``test/`` TFRecords (``data.write_data``).
    graph_schema_dir: Folder with ``graph_schema.pbtxt``.
    metadata: Where MLMD lives: a SQLite file, or a ``ConnectionConfig``
      (e.g. a MySQL/MariaDB server: ``pipelines.runtime.mlmd_connection.prepare``).
    custom_config: GnnTrainer custom_config (``hparams`` pick the task).
    module_file: GnnTrainer user module.
    enable_cache: TFX caching.
  """
  example_gen = tfx.components.ImportExampleGen(
      input_base=examples_dir,
      input_config=tfx.proto.Input(splits=[
          tfx.proto.Input.Split(name=split, pattern=f"{split}/*") for split in data.SPLITS]))
  graph_schema = tfx.dsl.Importer(
      source_uri=graph_schema_dir, artifact_type=GraphSchema).with_id("graph_schema_importer")
  trainer = GnnTrainer(
      examples=example_gen.outputs["examples"],
      graph_schema=graph_schema.outputs["result"],
      module_file=module_file,
      custom_config=dict(custom_config))
  return tfx.dsl.Pipeline(
      pipeline_name=pipeline_name,
      pipeline_root=pipeline_root,
      components=[example_gen, graph_schema, trainer],
      enable_cache=enable_cache,
      metadata_connection_config=mlmd_connection.pipeline_connection_config(metadata))


def run_and_evaluate(*, pipeline_name: str, work_dir: str, data_dirs: Mapping[str, str],
                     metadata: mlmd_connection.Metadata, custom_config: Mapping[str, Any]) -> dict:
  """Runs :func:`create_pipeline` on LocalDagRunner and scores its model on ``test``.

  Args:
    pipeline_name: Name in MLMD (the pipeline root is ``<work_dir>/<pipeline_name>``).
    work_dir: Folder for pipeline roots.
    data_dirs: ``data.write_data``'s result.
    metadata: Where MLMD lives: a SQLite file, or a ``ConnectionConfig``
      (e.g. a MySQL/MariaDB server: ``pipelines.runtime.mlmd_connection.prepare``).
    custom_config: GnnTrainer custom_config.

  Returns:
    ``{"serving": SavedModel dir, "examples": Examples uri, "properties": the
    Model's custom properties, "test": evaluate_graph_model's result}``.
  """
  from pipelines.runtime import mlmd_utils  # pylint: disable=g-import-not-at-top
  tfx.orchestration.LocalDagRunner().run(create_pipeline(
      pipeline_name=pipeline_name, pipeline_root=os.path.join(work_dir, pipeline_name),
      examples_dir=data_dirs["examples"], graph_schema_dir=data_dirs["graph_schema"],
      metadata=metadata, custom_config=custom_config))
  model = mlmd_utils.latest_artifact(metadata, "Model", pipeline_name)
  examples = mlmd_utils.latest_artifact(metadata, "Examples", pipeline_name)
  saved_model = os.path.join(model.uri, "Format-Serving")
  return {"serving": saved_model, "examples": examples.uri,
          "properties": mlmd_utils.custom_properties(model),
          "test": evaluate_graph_model(saved_model, examples.uri, "test")}


def without_label(serialized: bytes) -> tuple[bytes, int]:
  """A graph example as a serving request (``context/cycles`` removed) and its label."""
  example = tf.train.Example.FromString(serialized)
  label = example.features.feature.pop(f"context/{data.LABEL}").int64_list.value[0]
  return example.SerializeToString(), label


def evaluate_graph_model(saved_model_dir: str, examples_uri: str, split: str = "test",
                         batch_size: int = 256) -> dict:
  """Scores an exported cycle-count model on a split, with requests that hold no label.

  Returns:
    ``{"num_examples", "accuracy"}`` for a classifier (outputs with one logit
    per class), ``{"num_examples", "mae", "mse", "rounded_accuracy"}`` for a
    regressor (one output per graph; ``rounded_accuracy``: the rounded
    prediction equals the count).
  """
  labels, predictions = [], []
  for batch_labels, outputs in serving.serve_split(
      saved_model_dir, examples_uri, split, batch_size=batch_size, split_request=without_label):
    labels.extend(batch_labels)
    predictions.append(np.reshape(serving.single_output(outputs), [len(batch_labels), -1]))
  labels, predictions = np.array(labels), np.concatenate(predictions)
  if predictions.shape[1] > 1:
    return {"num_examples": len(labels),
            "accuracy": float((predictions.argmax(axis=1) == labels).mean())}
  error = predictions[:, 0] - labels
  return {"num_examples": len(labels), "mae": float(np.abs(error).mean()),
          "mse": float((error ** 2).mean()),
          "rounded_accuracy": float((np.round(predictions[:, 0]) == labels).mean())}
