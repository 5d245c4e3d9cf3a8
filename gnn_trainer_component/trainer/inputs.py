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
from typing import Any, Callable, Mapping, Optional, Sequence

from absl import logging
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tfx import types
from tfx.components.trainer import fn_args_utils
from tfx.types import artifact_utils
from tfx.utils import io_utils
from tfx.utils import path_utils
from tensorflow_metadata.proto.v0 import schema_pb2

from gnn_trainer_component import embeddings
from gnn_trainer_component import graph_schema as graph_schema_lib
from gnn_trainer_component import outputs
from gnn_trainer_component import process
from gnn_trainer_component import spec
from gnn_trainer_component.distributed import strategy as strategy_lib
from gnn_trainer_component.in_memory import inputs as in_memory_inputs
from gnn_trainer_component.in_memory import link_pairs
from gnn_trainer_component.in_memory import retrieval
from gnn_trainer_component.trainer import config as config_lib
from gnn_trainer_component.trainer import export
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
    graph: The graph in memory, when the execution has no ``examples``:
      training samples subgraphs around the seeds of its splits on the fly
      (then there are no files, and the sizes count seeds).
    retrieval_splits: Held-out link splits whose positives are ranked against
      every node after training (``custom_config["retrieval_splits"]``).
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
  graph: Optional[in_memory_inputs.GraphInput] = None
  retrieval_splits: tuple[str, ...] = ()

  def parity_examples(self, n: int) -> list[bytes]:
    """``n`` serialized validation examples (read, or sampled from the graph)."""
    if self.graph is not None:
      return self.graph.serialized_examples(self.cfg.eval_splits, n)
    return export.read_examples(self.eval_files, self.eval_compression, n)


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
  import tensorflow_transform as tft  # Imported here: loaded only with a Transform graph.
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


def _graph_fn_args(input_dict: Artifacts, exec_properties: dict[str, Any],
                   working_dir: Optional[str]) -> fn_args_utils.FnArgs:
  """``get_common_fn_args``'s FnArgs for the graph in memory: no files, no data accessor."""
  cfg = trainer_config(exec_properties)
  schema_uri = single_uri(input_dict, spec.SCHEMA_KEY)
  base_model = (artifact_utils.get_single_instance(input_dict[spec.BASE_MODEL_KEY])
                if input_dict.get(spec.BASE_MODEL_KEY) else None)
  return fn_args_utils.FnArgs(
      working_dir=working_dir, train_files=[], eval_files=[],
      train_steps=cfg.train_steps, eval_steps=cfg.eval_steps,
      schema_path=io_utils.get_only_uri_in_dir(schema_uri) if schema_uri else None,
      transform_graph_path=single_uri(input_dict, spec.TRANSFORM_GRAPH_KEY),
      custom_config=json.loads(exec_properties.get(spec.CUSTOM_CONFIG_KEY) or "null"),
      base_model=(path_utils.serving_model_path(
          base_model.uri, path_utils.is_old_model_artifact(base_model)) if base_model else None))


def fn_args(input_dict: Artifacts, output_dict: Artifacts, exec_properties: dict[str, Any],
            *, working_dir: Optional[str] = None) -> fn_args_utils.FnArgs:
  """TFX's ``FnArgs`` of an execution, as the stock Trainer's ``GenericExecutor`` builds them.

  ``fn_args_utils.get_common_fn_args`` (files, steps, schema, transform graph,
  base model, custom_config, data accessor) plus the output folders of
  ``output_dict`` where it has GnnTrainer's ``model`` / ``model_run`` (GnnTuner's
  has not; it passes ``working_dir``) and the HyperParameters artifact's config.
  """
  if input_dict.get(spec.EXAMPLES_KEY):
    result = fn_args_utils.get_common_fn_args(input_dict, exec_properties, working_dir)
  else:
    result = _graph_fn_args(input_dict, exec_properties, working_dir)
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


def _example_splits(input_dict: Artifacts, cfg: config_lib.TrainerConfig):
  """The record files of the splits, checked to exist (read by :func:`_checked_splits`)."""
  locations = _examples_locations(input_dict[spec.EXAMPLES_KEY])
  return (splits.resolve_splits(locations, cfg.train_splits, role="train_args"),
          splits.resolve_splits(locations, cfg.eval_splits, role="eval_args"))


def _checked_splits(split_files, graph_schema: tfgnn.GraphSchema) -> dict[str, Any]:
  """Every record of the splits' files read and sampled against the schema."""
  (train_splits, train_comp), (eval_splits, eval_comp) = split_files
  train_files, train_size = _checked_files(train_splits, train_comp, "train_args", graph_schema)
  eval_files, eval_size = _checked_files(eval_splits, eval_comp, "eval_args", graph_schema)
  return dict(train_files=train_files, train_compression=train_comp, train_size=train_size,
              eval_files=eval_files, eval_compression=eval_comp, eval_size=eval_size)


def _graph_data(input_dict: Artifacts, exec_properties: dict[str, Any],
                cfg: config_lib.TrainerConfig) -> dict[str, Any]:
  """The graph of the ``graph_schema`` folder in memory, and the seeds of the splits."""
  if not exec_properties.get(spec.SEEDS_KEY) and not exec_properties.get(spec.LINK_CONFIG_KEY):
    raise config_lib.ConfigError(
        "GnnTrainer needs either 'examples' or the graph: 'seeds' ({split: seed table}) and "
        "'sampling_config' or 'sampling_spec', or 'link_config', with the tables in the "
        "graph_schema folder.")
  if input_dict.get(spec.TRANSFORM_GRAPH_KEY):
    raise config_lib.ConfigError(
        "GnnTrainer: 'transform_graph' works on examples; a graph held in memory is not "
        "transformed. Pre-sample the subgraphs with GraphSampler, transform them, and train "
        "on the transformed examples.")
  graph = in_memory_inputs.load(
      single_uri(input_dict, spec.GRAPH_SCHEMA_KEY), seeds=exec_properties.get(spec.SEEDS_KEY),
      sampling_spec=exec_properties.get(spec.SAMPLING_SPEC_KEY),
      sampling_config=exec_properties.get(spec.SAMPLING_CONFIG_KEY),
      link_config=exec_properties.get(spec.LINK_CONFIG_KEY),
      splits=list(cfg.train_splits) + list(cfg.eval_splits))
  return dict(graph=graph, train_files=(), train_compression=None, eval_files=(),
              eval_compression=None,
              train_size=validation.DataSize(graph.num_examples(cfg.train_splits)),
              eval_size=validation.DataSize(graph.num_examples(cfg.eval_splits)))


def _graph_mode(graph: in_memory_inputs.GraphInput, cfg: config_lib.TrainerConfig,
                user_module: module_contract.UserModule) -> in_memory_inputs.GraphInput:
  """The graph sampled or whole, as ``custom_config["graph_mode"]`` asks or allows."""
  budget = (cfg.full_graph_budget_mb * 2**20 if cfg.full_graph_budget_mb
            else process.memory_bytes() // 4)
  return in_memory_inputs.choose_mode(
      graph, cfg.graph_mode, tasks=user_module.tasks, budget_bytes=budget,
      processes=max(cfg.local_workers, strategy_lib.cluster_workers()))


def _retrieval_splits(cfg: config_lib.TrainerConfig, graph: Optional[in_memory_inputs.GraphInput],
                      tasks: Mapping[str, Any]) -> tuple[str, ...]:
  """The splits ``custom_config["retrieval_splits"]`` resolves to (see its doc).

  Raises:
    config_lib.ConfigError: explicit splits where retrieval cannot run, or that
      are not held out of the message-passing graph.
  """
  requested = cfg.retrieval_splits
  link = isinstance(graph, link_pairs.LinkSplits)
  scorable = link and cfg.export_embeddings and retrieval.link_tasks(tasks)
  if requested is None:
    if not scorable:
      return ()
    scores = retrieval.num_scores(graph, cfg.eval_splits)
    if scores > retrieval.DEFAULT_MAX_SCORES:
      logging.warning(
          "GnnTrainer: no retrieval evaluation by default: ranking the eval_args splits "
          "%s against every node takes %d scores (more than %d); set custom_config "
          "'retrieval_splits' to run it anyway.", list(cfg.eval_splits), scores,
          retrieval.DEFAULT_MAX_SCORES)
      return ()
    return tuple(cfg.eval_splits)
  if not requested:
    return ()
  where = f"GnnTrainer custom_config['retrieval_splits']={list(requested)}"
  if not link:
    raise config_lib.ConfigError(
        f"{where} ranks held-out edges of link prediction on a graph in memory: it needs "
        "'link_config' (with the tables as graph_schema) instead of examples or seeds. Drop "
        "the key.")
  if not cfg.export_embeddings:
    raise config_lib.ConfigError(
        f"{where} ranks by the exported embeddings: set 'export_embeddings' to true, or "
        "drop the key.")
  if not scorable:
    raise config_lib.ConfigError(
        f"{where}: no task of {sorted(tasks)} is a TF-GNN link-prediction task "
        "(runner.DotProductLinkPrediction / HadamardProductLinkPrediction), whose edge "
        "scorer ranks the candidates. Drop the key.")
  held_out = graph.link.held_out_splits
  bad = [s for s in requested if s not in held_out]
  if bad:
    raise config_lib.ConfigError(
        f"{where}: {bad} {'is' if len(bad) == 1 else 'are'} not a held-out split of "
        f"link_config (held out of the message-passing graph: {held_out}; the "
        f"{graph.link.message_split!r} edges are in the graph the GNN reads).")
  return tuple(requested)


def resolve(input_dict: Artifacts, exec_properties: dict[str, Any], *,
            model_run_dir: str, staging_dir: str, backup_dir: str,
            make_fn_args: Callable[[], fn_args_utils.FnArgs]) -> TrainingInputs:
  """Reads, validates and maps every input of an execution, before any training.

  Args:
    input_dict: The execution's input artifacts (GnnTrainer's keys).
    exec_properties: Its parameters (train_args, eval_args, custom_config,
      module_file / module_path).
    model_run_dir: The ``ModelRun`` folder (TensorBoard logs, metrics).
    staging_dir: Where the SavedModel is written before it is renamed into place.
    backup_dir: Training state kept for a retry (:func:`outputs.resume_dir`), resumed from.
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
  examples = bool(input_dict.get(spec.EXAMPLES_KEY))
  if examples:
    split_files = _example_splits(input_dict, cfg)
  else:
    data = _graph_data(input_dict, exec_properties, cfg)
  user_module = module_contract.load_user_module(
      exec_properties.get(spec.MODULE_FILE_KEY), exec_properties.get(spec.MODULE_PATH_KEY),
      hparams, fn_args=make_fn_args())
  if cfg.export_embeddings and embeddings.unsupported(user_module.tasks):
    raise config_lib.ConfigError(
        f"GnnTrainer: the export's embeddings signature has no rule for the tasks "
        f"{embeddings.unsupported(user_module.tasks)} (none is a TF-GNN runner node, graph or "
        "link task). Give the task an `embeddings(graph)` method that returns the base GNN's "
        'state it reads, or set custom_config "export_embeddings": false.')
  if examples:
    if cfg.graph_mode != in_memory_inputs.AUTO:
      raise config_lib.ConfigError(
          f"GnnTrainer custom_config graph_mode={cfg.graph_mode!r} applies to a graph held in "
          "memory ('seeds' + 'sampling_config'), but this training reads 'examples'. Remove "
          "graph_mode, or pass the graph instead of the examples.")
    graph_schema, raw_parser = _schemas(input_dict)
    outputs.log_phase("validate")
    data = _checked_splits(split_files, graph_schema)
  else:
    data["graph"] = _graph_mode(data["graph"], cfg, user_module)
    graph_schema, raw_parser = data["graph"].schema, None
  data["retrieval_splits"] = _retrieval_splits(cfg, data.get("graph"), user_module.tasks)
  base_model_uri = single_uri(input_dict, spec.BASE_MODEL_KEY)
  inputs = TrainingInputs(
      cfg=cfg, user_module=user_module, graph_schema=graph_schema,
      model_run_dir=model_run_dir, staging_dir=staging_dir, resume_dir=backup_dir,
      base_model_path=path_utils.serving_model_path(base_model_uri) if base_model_uri else None,
      raw_parser=raw_parser, **data)
  logging.info("GnnTrainer: train %s %s (%d examples), eval %s %s (%d examples), "
               "config %s, hparams %s, resume dir %s",
               "seeds of" if inputs.graph else f"{len(inputs.train_files)} files of",
               cfg.train_splits, inputs.train_size.records,
               "seeds of" if inputs.graph else f"{len(inputs.eval_files)} files of",
               cfg.eval_splits, inputs.eval_size.records, cfg,
               dict(user_module.hparams), backup_dir)
  return inputs
