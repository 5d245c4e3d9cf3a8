"""An execution's artifacts and parameters -> one frozen :class:`TrainingInputs`, once.

GnnTrainer's executor and every GnnTuner trial train from what :func:`resolve`
returns, as the stock Trainer's modules train from the ``FnArgs`` that TFX's
``fn_args_utils`` builds: the validated ``custom_config``, the user module
(hparams and ``FnArgs`` bound), the graph schema (Transform applied), and the
record files of the splits, each read end to end and sampled against the
schema before any training. Bad input fails here, naming what and where.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Optional, Sequence

from absl import logging
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tfx import types
from tfx.components.trainer import fn_args_utils
from tfx.types import artifact_utils
from tfx.utils import io_utils
from tfx.utils import path_utils
from tensorflow_metadata.proto.v0 import schema_pb2

from gnn_trainer_component import graph_schema as graph_schema_lib
from gnn_trainer_component import outputs
from gnn_trainer_component import spec
from gnn_trainer_component.trainer import config as config_lib
from gnn_trainer_component.trainer import module_contract
from gnn_trainer_component.trainer import splits
from gnn_trainer_component.trainer import transform
from gnn_trainer_component.trainer import validation

Artifacts = dict[str, list[types.Artifact]]


@dataclasses.dataclass(frozen=True)
class TrainingInputs:
  """Everything one training run reads, resolved from the execution's artifacts.

  Built once by :func:`resolve` (as TFX's ``FnArgs`` is for the stock
  Trainer); tests and benchmarks may build it directly.

  Attributes:
    cfg: The validated configuration.
    user_module: The validated user module (hparams and fn_args bound).
    graph_schema: The GraphSchema that parses the training examples.
    train_files, eval_files: TFRecord files of serialized graph tf.Examples.
    train_compression, eval_compression: "GZIP" or None.
    model_run_dir: Where TensorBoard logs and checkpoints go (ModelRun).
    staging_dir: Where the SavedModel is written before publish.
    resume_dir: Where the training state is backed up (``backup_every_*``);
      a backup from an earlier attempt is resumed from. The caller deletes it
      after publishing.
    base_model_path: Optional SavedModel to warm-start from.
    raw_parser: Optional layer parsing serialized *raw* examples into a
      GraphTensor of ``graph_schema``'s spec (Transform applied); then
      ``serving_default`` takes raw examples and a second signature
      ``transformed_examples`` takes training-format ones.
    train_size, eval_size: Records and bytes of the splits (from the
      pre-flight pass); None: unknown (then ``cache: "auto"`` streams).
  """
  cfg: config_lib.TrainerConfig
  user_module: module_contract.UserModule
  graph_schema: tfgnn.GraphSchema
  train_files: Sequence[str]
  train_compression: Optional[str]
  eval_files: Sequence[str]
  eval_compression: Optional[str]
  model_run_dir: str
  staging_dir: str
  resume_dir: str
  base_model_path: Optional[str] = None
  raw_parser: Optional[tf.keras.layers.Layer] = None
  train_size: Optional[validation.DataSize] = None
  eval_size: Optional[validation.DataSize] = None


def single_uri(input_dict: Artifacts, key: str) -> Optional[str]:
  """The URI of an optional single-artifact input, or None."""
  return artifact_utils.get_single_uri(input_dict[key]) if input_dict.get(key) else None


def trainer_config(exec_properties: dict[str, Any]) -> config_lib.TrainerConfig:
  """The validated configuration of an execution (train_args, eval_args, custom_config)."""
  return config_lib.make_trainer_config(
      exec_properties.get(spec.TRAIN_ARGS_KEY), exec_properties.get(spec.EVAL_ARGS_KEY),
      exec_properties.get(spec.CUSTOM_CONFIG_KEY))


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


def module_hparams(cfg: config_lib.TrainerConfig, tuned: dict[str, Any]) -> dict[str, Any]:
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


def _schemas(input_dict: Artifacts):
  """The graph schema to train on and the raw-example parser (with Transform), checked."""
  raw_graph_schema = graph_schema_lib.read_artifact_schema(
      single_uri(input_dict, spec.GRAPH_SCHEMA_KEY))
  schema_uri = single_uri(input_dict, spec.SCHEMA_KEY)
  if schema_uri:
    schema_file = io_utils.get_only_uri_in_dir(schema_uri)
    transform.check_schema_agreement(
        raw_graph_schema, io_utils.parse_pbtxt_file(schema_file, schema_pb2.Schema()),
        schema_file)
  transform_graph_uri = single_uri(input_dict, spec.TRANSFORM_GRAPH_KEY)
  if not transform_graph_uri:
    return raw_graph_schema, None
  import tensorflow_transform as tft  # pylint: disable=g-import-not-at-top
  tft_output = tft.TFTransformOutput(transform_graph_uri)
  graph_schema = transform.transformed_graph_schema(
      raw_graph_schema, tft_output.transformed_metadata.schema,
      raw_keys=set(tft_output.raw_feature_spec()))
  logging.info("GnnTrainer: training on Transform output; derived graph schema:\n%s",
               graph_schema)
  return graph_schema, transform.RawGraphParser(
      transform_graph_uri, raw_graph_schema, graph_schema, name="raw_graph_parser")


def _checked_files(by_split: dict[str, list[str]], compression: Optional[str], role: str,
                   graph_schema: tfgnn.GraphSchema):
  """Files of the splits (listed once), each read end to end and sampled against the schema.

  Returns:
    (files, size): size counts the records and their bytes.
  """
  size = validation.DataSize()
  for split, files in by_split.items():
    size += validation.check_files(files, compression, graph_schema, split=split, role=role)
  return tuple(f for files in by_split.values() for f in files), size


def fn_args(input_dict: Artifacts, output_dict: Artifacts, exec_properties: dict[str, Any],
            *, working_dir: Optional[str] = None) -> fn_args_utils.FnArgs:
  """TFX's ``FnArgs`` of an execution, as the stock Trainer's ``GenericExecutor`` builds them.

  ``fn_args_utils.get_common_fn_args`` (files, steps, schema, transform graph,
  base model, custom_config, data accessor) plus the output folders of
  ``output_dict`` where it has GnnTrainer's ``model`` / ``model_run`` (GnnTuner's
  has not; it passes ``working_dir``) and the HyperParameters artifact's config.
  """
  result = fn_args_utils.get_common_fn_args(input_dict, exec_properties, working_dir)
  result.transform_output = result.transform_graph_path
  result.schema_file = result.schema_path
  if output_dict.get(spec.MODEL_KEY):
    model_uri = artifact_utils.get_single_uri(output_dict[spec.MODEL_KEY])
    result.serving_model_dir = path_utils.serving_model_dir(model_uri)
    result.eval_model_dir = path_utils.eval_model_dir(model_uri)
  if output_dict.get(spec.MODEL_RUN_KEY):
    result.model_run_dir = artifact_utils.get_single_uri(output_dict[spec.MODEL_RUN_KEY])
  hyperparameters_uri = single_uri(input_dict, spec.HYPERPARAMETERS_KEY)
  if hyperparameters_uri:
    result.hyperparameters = json.loads(io_utils.read_string_file(
        io_utils.get_only_uri_in_dir(hyperparameters_uri)))
  return result


def resolve(input_dict: Artifacts, exec_properties: dict[str, Any], *,
            model_run_dir: str, staging_dir: str, backup_dir: str,
            make_fn_args: Callable[[], fn_args_utils.FnArgs]) -> TrainingInputs:
  """Reads, validates and maps every input of an execution, before any training.

  Args:
    input_dict: The execution's input artifacts (GnnTrainer's keys).
    exec_properties: Its parameters (train_args, eval_args, custom_config,
      module_file / module_path).
    model_run_dir, staging_dir, backup_dir: Where training writes.
    make_fn_args: Builds TFX's ``FnArgs`` (:func:`fn_args`); called once the
      splits are known to exist (TFX's split lookup fails with a bare ValueError).

  Raises:
    config_lib.ConfigError, module_contract.ModuleContractError,
    graph_schema_lib.GraphSchemaError, splits.SplitError,
    validation.InputDataError, transform.TransformSchemaError: on bad input, naming
      what and where.
  """
  cfg = trainer_config(exec_properties)
  hparams = module_hparams(cfg, _tuned_hparams(single_uri(input_dict, spec.HYPERPARAMETERS_KEY)))
  locations = _examples_locations(input_dict[spec.EXAMPLES_KEY])
  train_splits, train_comp = splits.resolve_splits(locations, cfg.train_splits, role="train_args")
  eval_splits, eval_comp = splits.resolve_splits(locations, cfg.eval_splits, role="eval_args")
  user_module = module_contract.load_user_module(
      exec_properties.get(spec.MODULE_FILE_KEY), exec_properties.get(spec.MODULE_PATH_KEY),
      hparams, fn_args=make_fn_args())
  graph_schema, raw_parser = _schemas(input_dict)
  outputs.log_phase("validate")
  train_files, train_size = _checked_files(train_splits, train_comp, "train_args", graph_schema)
  eval_files, eval_size = _checked_files(eval_splits, eval_comp, "eval_args", graph_schema)
  base_model_uri = single_uri(input_dict, spec.BASE_MODEL_KEY)
  inputs = TrainingInputs(
      cfg=cfg, user_module=user_module, graph_schema=graph_schema,
      train_files=train_files, train_compression=train_comp,
      eval_files=eval_files, eval_compression=eval_comp,
      model_run_dir=model_run_dir, staging_dir=staging_dir, resume_dir=backup_dir,
      base_model_path=path_utils.serving_model_path(base_model_uri) if base_model_uri else None,
      raw_parser=raw_parser, train_size=train_size, eval_size=eval_size)
  logging.info("GnnTrainer: %d train files %s (%d examples), %d eval files %s (%d examples), "
               "config %s, hparams %s, resume dir %s", len(train_files), cfg.train_splits,
               train_size.records, len(eval_files), cfg.eval_splits, eval_size.records, cfg,
               dict(user_module.hparams), backup_dir)
  return inputs
