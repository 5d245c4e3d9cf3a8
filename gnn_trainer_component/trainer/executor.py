"""GnnTrainer executor: TFX artifacts in -> TrainingInputs -> runner.run -> artifacts out.

``Executor.Do`` reads as resolve -> train -> publish. The mapping logic lives
in pure modules (``config``, ``splits``, ``module_contract``, ``validation``,
``transform``); training in ``training``; the export, parity check and atomic
publish in ``export``; the distribution strategy in ``strategy``. This file is
only TFX glue.
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
from gnn_trainer_component import spec
from gnn_trainer_component.trainer import config as config_lib
from gnn_trainer_component.trainer import custom_job
from gnn_trainer_component.trainer import export
from gnn_trainer_component.trainer import local_cluster
from gnn_trainer_component.trainer import module_contract
from gnn_trainer_component.trainer import splits
from gnn_trainer_component.trainer import strategy as strategy_lib
from gnn_trainer_component.trainer import training
from gnn_trainer_component.trainer import transform
from gnn_trainer_component.trainer import validation

Artifacts = dict[str, list[types.Artifact]]


def _single_uri(input_dict: Artifacts, key: str) -> Optional[str]:
  """The URI of an optional single-artifact input, or None."""
  return artifact_utils.get_single_uri(input_dict[key]) if input_dict.get(key) else None


def _tuned_hparams(hyperparameters_uri: Optional[str]) -> dict[str, Any]:
  """Hyperparameter values from a HyperParameters artifact (keras-tuner config)."""
  if not hyperparameters_uri:
    return {}
  path = io_utils.get_only_uri_in_dir(hyperparameters_uri)
  data = json.loads(io_utils.read_string_file(path))
  values = data.get("values", data) if isinstance(data, dict) else None
  if not isinstance(values, dict):
    raise config_lib.ConfigError(
        f"HyperParameters file {path} does not hold a JSON object of values.")
  return values


def _module_hparams(cfg: config_lib.TrainerConfig, tuned: dict[str, Any]) -> dict[str, Any]:
  """custom_config['hparams'] with a HyperParameters artifact's values on top."""
  hparams = dict(cfg.hparams or {})
  overridden = sorted(k for k in tuned if k in hparams and tuned[k] != hparams[k])
  if overridden:
    logging.info("GnnTrainer: hyperparameters artifact overrides custom_config hparams %s",
                 overridden)
  hparams.update(tuned)
  return hparams


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
  """Files of the splits (listed once), each read end to end and sampled against the schema.

  Returns:
    (files, compression, size): size counts the records and their bytes.
  """
  by_split, compression = splits.resolve_splits(locations, split_names, role=role)
  size = validation.DataSize()
  for split, files in by_split.items():
    size += validation.check_files(files, compression, graph_schema, split=split, role=role)
  return [f for files in by_split.values() for f in files], compression, size


def resume_dir(model_uri: str, pipeline_run_id: Optional[str], model_run_uri: str,
               output_key: str = spec.MODEL_KEY) -> str:
  """Where training state is backed up so that a retry can resume.

  Stable across retries of the same node in the same pipeline run, and unique
  per run so a new run never picks it up:
  ``<pipeline_root>/<node_id>/.resume/<pipeline_run_id>``, where the node dir
  comes from TFX's output layout ``<pipeline_root>/<node_id>/<output_key>/<execution_id>``.
  Without a run id or that layout (e.g. under the KFP v2 launcher, which retries
  a task with the same output URIs) it is ``<model_run uri>/backup``.
  GnnTuner uses it too, with its ``best_hyperparameters`` output and
  ``tuner_results`` in the roles of ``model`` and ``model_run``.
  """
  parent = os.path.dirname(model_uri.rstrip("/"))
  if (pipeline_run_id and os.path.basename(model_uri.rstrip("/")).isdigit()
      and os.path.basename(parent) == output_key):
    safe_run = "".join(c if c.isalnum() or c in "-_." else "_" for c in pipeline_run_id)
    return os.path.join(os.path.dirname(parent), ".resume", safe_run)
  return os.path.join(model_run_uri, "backup")


def resolve_inputs(input_dict: Artifacts, exec_properties: dict[str, Any], *,
                   model_run_dir: str, staging_dir: str,
                   backup_dir: str) -> training.TrainingInputs:
  """Reads, validates and maps every input of an execution, before any training.

  Raises:
    config_lib.ConfigError, module_contract.ModuleContractError,
    graph_schema_lib.GraphSchemaError, splits.SplitError,
    validation.InputDataError, transform.TransformSchemaError: on bad input, naming
      what and where.
  """
  cfg = config_lib.make_trainer_config(
      exec_properties.get(spec.TRAIN_ARGS_KEY), exec_properties.get(spec.EVAL_ARGS_KEY),
      exec_properties.get(spec.CUSTOM_CONFIG_KEY))
  hparams = _module_hparams(
      cfg, _tuned_hparams(_single_uri(input_dict, spec.HYPERPARAMETERS_KEY)))
  user_module = module_contract.load_user_module(
      exec_properties.get(spec.MODULE_FILE_KEY), exec_properties.get(spec.MODULE_PATH_KEY),
      hparams)
  raw_graph_schema = graph_schema_lib.read_artifact_schema(
      _single_uri(input_dict, spec.GRAPH_SCHEMA_KEY))
  schema_uri = _single_uri(input_dict, spec.SCHEMA_KEY)
  if schema_uri:
    schema_file = io_utils.get_only_uri_in_dir(schema_uri)
    transform.check_schema_agreement(
        raw_graph_schema, io_utils.parse_pbtxt_file(schema_file, schema_pb2.Schema()),
        schema_file)
  graph_schema, raw_parser = raw_graph_schema, None
  transform_graph_uri = _single_uri(input_dict, spec.TRANSFORM_GRAPH_KEY)
  if transform_graph_uri:
    graph_schema, raw_parser = _transform_setup(transform_graph_uri, raw_graph_schema)
  locations = _examples_locations(input_dict[spec.EXAMPLES_KEY])
  export.log_phase("validate")
  train_files, train_comp, train_size = _checked_files(
      locations, cfg.train_splits, "train_args", graph_schema)
  eval_files, eval_comp, eval_size = _checked_files(
      locations, cfg.eval_splits, "eval_args", graph_schema)
  base_model_uri = _single_uri(input_dict, spec.BASE_MODEL_KEY)
  inputs = training.TrainingInputs(
      cfg=cfg, user_module=user_module, graph_schema=graph_schema,
      train_files=tuple(train_files), train_compression=train_comp,
      eval_files=tuple(eval_files), eval_compression=eval_comp,
      model_run_dir=model_run_dir, staging_dir=staging_dir, resume_dir=backup_dir,
      base_model_path=path_utils.serving_model_path(base_model_uri) if base_model_uri else None,
      raw_parser=raw_parser, train_size=train_size, eval_size=eval_size)
  logging.info("GnnTrainer: %d train files %s (%d examples), %d eval files %s (%d examples), "
               "config %s, hparams %s, resume dir %s", len(train_files), cfg.train_splits,
               train_size.records, len(eval_files), cfg.eval_splits, eval_size.records, cfg,
               dict(user_module.hparams), backup_dir)
  return inputs


def set_properties(model: types.Artifact, props: dict[str, Any]) -> None:
  """Sets int / float / string custom properties by the values' types."""
  for name, value in props.items():
    if isinstance(value, int):
      model.set_int_custom_property(name, value)
    elif isinstance(value, float):
      model.set_float_custom_property(name, value)
    else:
      model.set_string_custom_property(name, str(value))


def rmtree(path: str) -> None:
  """Removes ``path`` and what is under it, if it exists."""
  if tf.io.gfile.exists(path):
    tf.io.gfile.rmtree(path)


class Executor(base_executor.BaseExecutor):
  """Runs ``tensorflow_gnn.runner.run`` for GnnTrainer."""

  def Do(self, input_dict: Artifacts, output_dict: Artifacts,
         exec_properties: dict[str, Any]) -> None:
    strategy_lib.use_vertex_cluster_spec()
    if strategy_lib.serves_only():
      logging.info("GnnTrainer (%s of a parameter-server cluster): serving; the chief "
                   "trains and publishes.", strategy_lib.task_name())
      strategy_lib.serve()
      return
    job_spec = None
    if strategy_lib.cluster_workers() <= 1:  # not a replica of a multi-worker job
      cfg = config_lib.make_trainer_config(
          exec_properties.get(spec.TRAIN_ARGS_KEY), exec_properties.get(spec.EVAL_ARGS_KEY),
          exec_properties.get(spec.CUSTOM_CONFIG_KEY))
      job_spec = job_spec_of(cfg)
    # The strategy comes first, before any other TF op (not in a job's
    # launcher: its replicas create theirs).
    strategy = strategy_lib.make_strategy() if job_spec is None else None
    self._log_startup(input_dict, output_dict, exec_properties)
    model = artifact_utils.get_single_instance(output_dict[spec.MODEL_KEY])
    model_run_dir = artifact_utils.get_single_uri(output_dict[spec.MODEL_RUN_KEY])
    serving_dir = path_utils.serving_model_dir(model.uri)
    staging_dir = os.path.join(model.uri, export.STAGING_DIR)
    pipeline_run_id = ((self._context.pipeline_run_id if self._context else None)
                       or os.environ.get(custom_job.PIPELINE_RUN_ID_ENV))
    backup_dir = resume_dir(model.uri, pipeline_run_id, model_run_dir)

    properties = export.published_properties(serving_dir, staging_dir, model_run_dir)
    if properties is not None:
      logging.info("GnnTrainer: %s was published by an earlier attempt of this execution; "
                   "not training again.", serving_dir)
    elif strategy is None:
      properties = self._run_job(cfg, input_dict, output_dict,
                                 exec_properties, pipeline_run_id)
    else:
      inputs = resolve_inputs(input_dict, exec_properties, model_run_dir=model_run_dir,
                              staging_dir=staging_dir, backup_dir=backup_dir)
      export.log_phase("train")
      if not strategy_lib.is_chief():
        # Trains and saves with the others (collectives); writes nothing shared.
        training.train_and_export(inputs, strategy)
        logging.info("GnnTrainer (%s): done; the chief publishes.", strategy_lib.task_name())
        return
      try:
        trained = training.train_and_export(inputs, strategy)
        properties = export.publish(
            trained, staging_dir=staging_dir, serving_dir=serving_dir,
            model_run_dir=model_run_dir, eval_files=inputs.eval_files,
            eval_compression=inputs.eval_compression,
            parity_check_examples=inputs.cfg.parity_check_examples)
      finally:
        rmtree(staging_dir)  # never leave a half-written export behind
      logging.info("GnnTrainer: published %s (metrics: %s)", serving_dir, trained.eval_metrics)
    set_properties(model, properties)
    rmtree(backup_dir)  # published: a retry must not resume any more
    export.log_phase("done")

  def custom_job(self, cfg: config_lib.TrainerConfig, input_dict: Artifacts,
                 output_dict: Artifacts, exec_properties: dict[str, Any],
                 pipeline_run_id: Optional[str]) -> dict[str, Any]:
    """The CustomJob whose replicas run this executor on this execution's artifacts."""
    model = artifact_utils.get_single_instance(output_dict[spec.MODEL_KEY])
    vertex = cfg.ai_platform_training_args or {}
    job = custom_job.custom_job(
        job_spec=job_spec_of(cfg),
        display_name=vertex.get("display_name") or custom_job.display_name(
            model.uri, pipeline_run_id),
        executor_class_path=f"{type(self).__module__}.{type(self).__name__}",
        input_dict=input_dict, output_dict=output_dict, exec_properties=exec_properties,
        pipeline_run_id=pipeline_run_id, labels=vertex.get("labels"))
    if vertex.get("encryption_spec"):
      job["encryption_spec"] = vertex["encryption_spec"]
    return job

  def _run_job(self, cfg: config_lib.TrainerConfig, input_dict: Artifacts,
               output_dict: Artifacts, exec_properties: dict[str, Any],
               pipeline_run_id: Optional[str]) -> dict[str, Any]:
    """Runs this execution as a CustomJob (Vertex AI or local); returns the chief's properties.

    The inputs are resolved here first, so bad input fails with its own error
    (ConfigError, InputDataError, ...) before any replica starts.
    """
    model = artifact_utils.get_single_instance(output_dict[spec.MODEL_KEY])
    model_run_dir = artifact_utils.get_single_uri(output_dict[spec.MODEL_RUN_KEY])
    resolve_inputs(input_dict, exec_properties, model_run_dir=model_run_dir,
                   staging_dir=os.path.join(model.uri, export.STAGING_DIR),
                   backup_dir=resume_dir(model.uri, pipeline_run_id, model_run_dir))
    vertex = cfg.ai_platform_training_args
    job = self.custom_job(cfg, input_dict, output_dict, exec_properties, pipeline_run_id)
    if vertex:
      logging.info("GnnTrainer: submitting CustomJob %r to Vertex AI (%s, %s), %d replicas",
                   job["display_name"], vertex["project"], cfg.ai_platform_vertex_region,
                   len(local_cluster.tasks(job["job_spec"])))
      custom_job.run_on_vertex(job, project=vertex["project"],
                               region=cfg.ai_platform_vertex_region)
    else:
      local_cluster.run_job(job, log_dir=os.path.join(model_run_dir, "cluster"))
    serving_dir = path_utils.serving_model_dir(model.uri)
    properties = export.published_properties(
        serving_dir, os.path.join(model.uri, export.STAGING_DIR), model_run_dir)
    if properties is None:
      raise local_cluster.ClusterError(
          f"GnnTrainer job {job['display_name']!r}: every replica finished but the chief "
          f"published nothing in {serving_dir}; see the chief's log"
          f"{'' if vertex else f' in {model_run_dir}/cluster'}.")
    return properties


def job_spec_of(cfg: config_lib.TrainerConfig) -> Optional[dict[str, Any]]:
  """The CustomJob ``job_spec`` this execution launches, or None to train here."""
  if cfg.ai_platform_training_args:
    return cfg.ai_platform_training_args["job_spec"]
  if cfg.local_workers > 1:
    return custom_job.local_job_spec(cfg.local_workers, cfg.local_parameter_servers)
  return None
