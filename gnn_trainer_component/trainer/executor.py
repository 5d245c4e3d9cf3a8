"""GnnTrainer executor: TFX artifacts in -> TrainerConfig -> runner.run -> artifacts out.

The mapping logic lives in pure modules (``config``, ``splits``,
``module_contract``, ``training``); this file is only TFX glue.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

from absl import logging
import tensorflow as tf
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.utils import io_utils
from tfx.utils import path_utils
from tensorflow_metadata.proto.v0 import schema_pb2

from gnn_trainer_component import graph_schema as graph_schema_lib
from gnn_trainer_component.trainer import config as config_lib
from gnn_trainer_component.trainer import module_contract
from gnn_trainer_component.trainer import splits
from gnn_trainer_component.trainer import training
from gnn_trainer_component.trainer import transform
from gnn_trainer_component.trainer import validation

METRICS_FILE = "metrics.json"
# In model_run: the eval examples of the pre-publish parity check and the
# in-memory model's predictions on them (to re-check serving anywhere later).
PARITY_EXAMPLES_FILE = "parity/examples.tfrecord"
PARITY_PREDICTIONS_FILE = "parity/predictions.json"
# In model_run: the Model's custom properties, written before the export is
# renamed into place, so that a retry after that point only re-publishes.
MODEL_PROPERTIES_FILE = "model_properties.json"
STAGING_DIR = "_staging_Format-Serving"
#: Logged (INFO) at the start of each phase of an execution, e.g.
#: ``GnnTrainer phase: train``; the crash soak (tests/soak.py) kills on them.
PHASE_LOG = "GnnTrainer phase: %s"


def log_phase(name: str) -> None:
  """Logs the start of an execution phase (validate, train, export, parity, publish, done)."""
  logging.info(PHASE_LOG, name)


def make_strategy() -> tf.distribute.Strategy:
  """The distribution strategy for this process.

  Must run before any other TF op (collective ops are configured at start-up):
  ``TF_CONFIG`` with several workers -> MultiWorkerMirroredStrategy; several
  local GPUs -> MirroredStrategy; else the default strategy.
  """
  tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
  cluster = tf_config.get("cluster") or {}
  if sum(len(v) for k, v in cluster.items() if k in ("chief", "worker")) > 1:
    return tf.distribute.MultiWorkerMirroredStrategy()
  if len(tf.config.list_logical_devices("GPU")) > 1:
    return tf.distribute.MirroredStrategy()
  return tf.distribute.get_strategy()


def is_chief() -> bool:
  """True unless TF_CONFIG names this process a non-chief task."""
  tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
  task = tf_config.get("task") or {}
  task_type, index = task.get("type"), int(task.get("index", 0))
  cluster = tf_config.get("cluster") or {}
  if task_type is None:
    return True
  if "chief" in cluster:
    return task_type == "chief"
  return task_type in ("worker", "master") and index == 0


def _read_hparams(input_dict: dict[str, list[types.Artifact]]) -> dict[str, Any]:
  """Hyperparameter values from a HyperParameters artifact (keras-tuner config)."""
  hp = input_dict.get("hyperparameters") or []
  if not hp:
    return {}
  path = io_utils.get_only_uri_in_dir(artifact_utils.get_single_uri(hp))
  data = json.loads(io_utils.read_string_file(path))
  values = data.get("values", data) if isinstance(data, dict) else None
  if not isinstance(values, dict):
    raise ValueError(f"HyperParameters file {path} does not hold a JSON object of values.")
  return values


def _examples_locations(examples: list[types.Artifact]) -> list[splits.ExamplesLocation]:
  return [splits.ExamplesLocation(
      uri=a.uri,
      split_names=artifact_utils.decode_split_names(a.split_names) if a.split_names else [],
      file_format=(a.get_string_custom_property("file_format")
                   if a.has_custom_property("file_format") else None))
          for a in examples]


def _transform_setup(transform_graph_uri: str, raw_graph_schema):
  """Transformed graph schema and the raw-example parser for serving."""
  import tensorflow_transform as tft  # pylint: disable=g-import-not-at-top
  tft_output = tft.TFTransformOutput(transform_graph_uri)
  graph_schema = transform.transformed_graph_schema(
      raw_graph_schema, tft_output.transformed_metadata.schema,
      raw_keys=set(tft_output.raw_feature_spec()))
  logging.info("GnnTrainer: training on Transform output; derived graph schema:\n%s",
               graph_schema)
  return graph_schema, transform.RawGraphParser(
      transform_graph_uri, raw_graph_schema, graph_schema, name="raw_graph_parser")


def _checked_files(locations, split_names, role, graph_schema):
  """Files of the splits, each split read end to end and sampled against the schema."""
  files, compression = splits.resolve_split(locations, split_names, role=role)
  for location in locations:
    for split in split_names:
      validation.check_files(splits.split_files(location, split, role=role), compression,
                             graph_schema, split=split, role=role)
  return files, compression


def _publish(staging: str, final: str) -> None:
  """Moves the staged SavedModel into place (atomic rename where supported)."""
  if tf.io.gfile.exists(final):
    tf.io.gfile.rmtree(final)
  try:
    tf.io.gfile.rename(staging, final)
  except (tf.errors.UnimplementedError, tf.errors.FailedPreconditionError):
    io_utils.copy_dir(staging, final)
    tf.io.gfile.rmtree(staging)


def _model_properties(result: training.TrainingResult,
                      parity: dict[str, Any]) -> dict[str, Any]:
  """The Model's custom properties (name -> int, float or str)."""
  props: dict[str, Any] = {}
  for prefix, metrics in (("train", result.train_metrics), ("eval", result.eval_metrics)):
    for name, value in sorted(metrics.items()):
      props[f"{prefix}_{name}"] = float(value)
  props.update(
      train_steps=int(result.steps), resumed_from_step=int(result.resumed_from_step),
      recoveries=int(result.recoveries), epochs=int(result.epochs),
      tasks=",".join(result.task_names),
      serving_outputs=",".join(sorted(tf.nest.flatten(result.output_names))),
      parity_max_abs_diff=float(parity["max_abs_diff"]))
  return props


def _set_properties(model: types.Artifact, props: dict[str, Any]) -> None:
  for name, value in props.items():
    if isinstance(value, int):
      model.set_int_custom_property(name, value)
    elif isinstance(value, float):
      model.set_float_custom_property(name, value)
    else:
      model.set_string_custom_property(name, str(value))


def _published_properties(serving_dir: str, staging_dir: str,
                          model_run_dir: str) -> Optional[dict[str, Any]]:
  """The Model properties if an earlier attempt of this execution published, else None.

  A retry reuses the execution's output URIs (TFX's launcher reuses a RUNNING
  execution; the KFP launcher keeps a task's URIs). Once the staged export
  has been renamed into place, the model is complete and its properties were
  written before the rename: a retry must not train again or read the
  (possibly half-deleted) resume dir.
  """
  path = os.path.join(model_run_dir, MODEL_PROPERTIES_FILE)
  if (tf.io.gfile.exists(staging_dir) or not tf.io.gfile.exists(serving_dir)
      or not tf.io.gfile.exists(path)):
    return None
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)


def _write_run_files(model_run_dir: str, result: training.TrainingResult,
                     parity: dict[str, Any], parity_examples: list[bytes]) -> None:
  predictions = parity.pop("predictions")
  io_utils.write_string_file(
      os.path.join(model_run_dir, METRICS_FILE),
      json.dumps({"train": result.train_metrics, "eval": result.eval_metrics,
                  "steps": result.steps, "epochs": result.epochs,
                  "parity": parity}, indent=2, sort_keys=True))
  tf.io.gfile.makedirs(os.path.join(model_run_dir, "parity"))
  with tf.io.TFRecordWriter(os.path.join(model_run_dir, PARITY_EXAMPLES_FILE)) as w:
    for record in parity_examples:
      w.write(record)
  io_utils.write_string_file(os.path.join(model_run_dir, PARITY_PREDICTIONS_FILE),
                             json.dumps(predictions))


def resume_dir(model_uri: str, pipeline_run_id: Optional[str], model_run_uri: str) -> str:
  """Where training state is backed up so that a retry can resume.

  Stable across retries of the same node in the same pipeline run, and unique
  per run so a new run never picks it up:
  ``<pipeline_root>/<node_id>/.resume/<pipeline_run_id>``, where the node dir
  comes from TFX's output layout ``<pipeline_root>/<node_id>/model/<execution_id>``.
  Without a run id or that layout (e.g. under the KFP v2 launcher, which retries
  a task with the same output URIs) it is ``<model_run uri>/backup``.
  """
  parent = os.path.dirname(model_uri.rstrip("/"))
  if (pipeline_run_id and os.path.basename(model_uri.rstrip("/")).isdigit()
      and os.path.basename(parent) == "model"):
    safe_run = "".join(c if c.isalnum() or c in "-_." else "_" for c in pipeline_run_id)
    return os.path.join(os.path.dirname(parent), ".resume", safe_run)
  return os.path.join(model_run_uri, "backup")


class Executor(base_executor.BaseExecutor):
  """Runs ``tensorflow_gnn.runner.run`` for GnnTrainer."""

  def Do(self, input_dict: dict[str, list[types.Artifact]],
         output_dict: dict[str, list[types.Artifact]],
         exec_properties: dict[str, Any]) -> None:
    strategy = make_strategy()  # first: before any other TF op
    self._log_startup(input_dict, output_dict, exec_properties)

    model = artifact_utils.get_single_instance(output_dict["model"])
    model_run_dir = artifact_utils.get_single_uri(output_dict["model_run"])
    serving_dir = path_utils.serving_model_dir(model.uri)
    staging_dir = os.path.join(model.uri, STAGING_DIR)
    backup_dir = resume_dir(model.uri, self._context.pipeline_run_id if self._context else None,
                            model_run_dir)
    published = _published_properties(serving_dir, staging_dir, model_run_dir)
    if published is not None:
      logging.info("GnnTrainer: %s was published by an earlier attempt of this execution; "
                   "not training again.", serving_dir)
      _set_properties(model, published)
      if tf.io.gfile.exists(backup_dir):
        tf.io.gfile.rmtree(backup_dir)
      log_phase("done")
      return

    cfg = config_lib.make_trainer_config(
        exec_properties.get("train_args"), exec_properties.get("eval_args"),
        exec_properties.get("custom_config"))
    hparams = _read_hparams(input_dict)
    user_module = module_contract.load_user_module(
        exec_properties.get("module_file"), exec_properties.get("module_path"), hparams)
    raw_graph_schema = graph_schema_lib.read_artifact_schema(
        artifact_utils.get_single_uri(input_dict["graph_schema"]))
    if input_dict.get("schema"):
      schema_file = io_utils.get_only_uri_in_dir(
          artifact_utils.get_single_uri(input_dict["schema"]))
      transform.check_schema_agreement(
          raw_graph_schema, io_utils.parse_pbtxt_file(schema_file, schema_pb2.Schema()),
          schema_file)
    graph_schema, raw_parser = raw_graph_schema, None
    if input_dict.get("transform_graph"):
      graph_schema, raw_parser = _transform_setup(
          artifact_utils.get_single_uri(input_dict["transform_graph"]), raw_graph_schema)
    locations = _examples_locations(input_dict["examples"])
    log_phase("validate")
    train_files, train_comp = _checked_files(locations, cfg.train_splits, "train_args", graph_schema)
    eval_files, eval_comp = _checked_files(locations, cfg.eval_splits, "eval_args", graph_schema)
    base_model_path: Optional[str] = None
    if input_dict.get("base_model"):
      base_model_path = path_utils.serving_model_path(
          artifact_utils.get_single_uri(input_dict["base_model"]))
    logging.info("GnnTrainer: %d train files %s, %d eval files %s, config %s, "
                 "resume dir %s", len(train_files), cfg.train_splits, len(eval_files),
                 cfg.eval_splits, cfg, backup_dir)

    log_phase("train")
    try:
      result = training.train_and_export(
          cfg=cfg, user_module=user_module, graph_schema=graph_schema,
          train_files=train_files, train_compression=train_comp,
          eval_files=eval_files, eval_compression=eval_comp,
          model_dir=model_run_dir, export_dir=staging_dir, strategy=strategy,
          resume_dir=backup_dir, base_model_path=base_model_path, raw_parser=raw_parser)
      if not is_chief():
        # Every worker takes part in the (collective) save; only the chief publishes.
        return
      log_phase("parity")
      parity_examples = training.read_examples(eval_files, eval_comp, cfg.parity_check_examples)
      parity = training.parity_check(
          result.training_model, result.output_names, staging_dir, parity_examples,
          signature=result.parity_signature)
      _write_run_files(model_run_dir, result, parity, parity_examples)
      properties = _model_properties(result, parity)
      io_utils.write_string_file(os.path.join(model_run_dir, MODEL_PROPERTIES_FILE),
                                 json.dumps(properties, indent=2, sort_keys=True))
      log_phase("publish")
      _publish(staging_dir, serving_dir)
    finally:
      if tf.io.gfile.exists(staging_dir):  # never leave a half-written export behind
        tf.io.gfile.rmtree(staging_dir)
    _set_properties(model, properties)
    if tf.io.gfile.exists(backup_dir):
      tf.io.gfile.rmtree(backup_dir)  # published: a retry must not resume any more
    logging.info("GnnTrainer: published %s (metrics: %s)", serving_dir, result.eval_metrics)
    log_phase("done")
