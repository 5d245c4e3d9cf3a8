"""An execution's artifacts and parameters -> one frozen :class:`TrainingInputs`, once.

GnnTrainer's executor and every GnnTuner trial train from what :func:`resolve`
returns, as the stock Trainer's modules train from the ``FnArgs`` that TFX's
``fn_args_utils`` builds: the validated ``custom_config``, the user module
(hparams and ``FnArgs`` bound), and the data as a
:class:`~gnn_trainer_component.training_data.TrainingData`: examples on disk,
each read end to end and sampled against the graph schema, or the graph loaded
into memory. Bad input fails here, before any training, naming what and where.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any, Callable, Mapping, Optional

from absl import logging
import tensorflow_gnn as tfgnn
from tfx import types
from tfx.components.trainer import fn_args_utils
from tfx.types import artifact_utils
from tfx.utils import io_utils
from tfx.utils import path_utils

from gnn_trainer_component import process
from gnn_trainer_component import spec
from gnn_trainer_component import training_data
from gnn_trainer_component.distributed import strategy as strategy_lib
from gnn_trainer_component.in_memory import adapters
from gnn_trainer_component.model import embeddings
from gnn_trainer_component.model import recommend
from gnn_trainer_component.trainer import config as config_lib
from gnn_trainer_component.trainer import examples
from gnn_trainer_component.trainer import module_contract

Artifacts = dict[str, list[types.Artifact]]


@dataclasses.dataclass(frozen=True)
class TrainingInputs:
  """Everything one training run reads, resolved from the execution's artifacts.

  Built once by :func:`resolve` (as TFX's ``FnArgs`` is for the stock
  Trainer); tests and benchmarks may build it directly.

  Attributes:
    cfg: The validated configuration.
    user_module: The validated user module (hparams and fn_args bound).
    data: What training reads: examples on disk, or the graph in memory
      (:class:`~gnn_trainer_component.training_data.TrainingData`).
    model_run_dir: Where TensorBoard logs and checkpoints go (ModelRun).
    staging_dir: Where the SavedModel is written before publish.
    resume_dir: Where the training state is backed up (``backup_every_*``);
      a backup from an earlier attempt is resumed from. The caller deletes it
      after publishing.
    base_model_path: Optional SavedModel to warm-start from.
    served_graph: What the export serves node ids from (``serve_by_node_id``), or None.
  """
  cfg: config_lib.TrainerConfig
  user_module: module_contract.UserModule
  data: training_data.TrainingData
  model_run_dir: str
  staging_dir: str
  resume_dir: str
  base_model_path: Optional[str] = None
  served_graph: Optional[recommend.ServedById] = None

  @property
  def graph_schema(self) -> tfgnn.GraphSchema:
    """The GraphSchema that parses the training examples (Transform applied)."""
    return self.data.schema


def single_uri(input_dict: Artifacts, key: str) -> Optional[str]:
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


def module_hparams(cfg: config_lib.TrainerConfig, tuned: dict[str, Any]) -> dict[str, Any]:
  """custom_config['hparams'] with a HyperParameters artifact's values on top."""
  hparams = dict(cfg.hparams or {})
  overridden = sorted(k for k in tuned if k in hparams and tuned[k] != hparams[k])
  if overridden:
    logging.info("GnnTrainer: hyperparameters artifact overrides custom_config hparams %s",
                 overridden)
  hparams.update(tuned)
  return hparams


def _graph_fn_args(input_dict: Artifacts, exec_properties: dict[str, Any],
                   working_dir: Optional[str]) -> fn_args_utils.FnArgs:
  """``get_common_fn_args``'s FnArgs for the graph in memory: no files, no data accessor."""
  cfg = config_lib.from_exec_properties(exec_properties)
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


def graph_options(cfg: config_lib.TrainerConfig) -> adapters.Options:
  """What the config asks of training on the graph in memory."""
  return adapters.Options(
      train_splits=tuple(cfg.train_splits), eval_splits=tuple(cfg.eval_splits),
      graph_mode=cfg.graph_mode,
      budget_bytes=(cfg.full_graph_budget_mb * 2**20 if cfg.full_graph_budget_mb
                    else process.memory_bytes() // 4),
      processes=max(cfg.local_workers, strategy_lib.cluster_workers()),
      retrieval_splits=(tuple(cfg.retrieval_splits) if cfg.retrieval_splits is not None
                        else None),
      export_embeddings=cfg.export_embeddings, check_leakage=cfg.check_leakage,
      deduplicate_batches=cfg.deduplicate_batches)


def _graph_source(input_dict: Artifacts, cfg: config_lib.TrainerConfig
                  ) -> Callable[[Mapping[str, Any]], training_data.TrainingData]:
  """Checks the graph in memory is asked for; the function that loads it for the tasks."""
  graph = cfg.graph
  if graph is None:
    raise config_lib.ConfigError(
        "GnnTrainer needs either 'examples' or the graph: 'seeds' ({split: seed table}) and "
        "'sampling_config' or 'sampling_spec', or 'link_config', with the tables in the "
        "graph_schema folder.")
  if input_dict.get(spec.TRANSFORM_GRAPH_KEY):
    raise config_lib.ConfigError(
        "GnnTrainer: 'transform_graph' works on examples; a graph held in memory is not "
        "transformed. Pre-sample the subgraphs with GraphSampler, transform them, and train "
        "on the transformed examples.")
  options = graph_options(cfg)
  schema_dir = single_uri(input_dict, spec.GRAPH_SCHEMA_KEY)

  def load(tasks: Mapping[str, Any]) -> training_data.TrainingData:
    return adapters.load_for_training(schema_dir, graph, options, tasks)

  return load


def _served_graph(cfg: config_lib.TrainerConfig, data: training_data.TrainingData
                  ) -> Optional[recommend.ServedById]:
  """What the export serves node ids from (``serve_by_node_id``), checked before training."""
  if not cfg.serve_by_node_id:
    return None
  served = data.served_graph()
  if served is None:
    raise config_lib.ConfigError(
        "GnnTrainer custom_config 'serve_by_node_id' serves models trained on the graph in "
        "memory (node tasks: 'seeds' and 'sampling_config' or 'sampling_spec'; link "
        "prediction: 'link_config'); this training reads "
        f"{data.describe()}. Train on the graph in memory, or drop the key.")
  served.check("GnnTrainer", cfg.serve_by_node_id_budget_mb * 2**20)
  return served


def resolve(input_dict: Artifacts, exec_properties: dict[str, Any],
            cfg: config_lib.TrainerConfig, *, model_run_dir: str, staging_dir: str, backup_dir: str,
            make_fn_args: Callable[[], fn_args_utils.FnArgs]) -> TrainingInputs:
  """Reads, validates and maps every input of an execution, before any training.

  What is cheap to check comes first (the config, the splits or graph keys,
  the user module), then the data is read: examples on disk
  (:func:`examples.locate`) or the graph in memory (:mod:`in_memory.adapters`).

  Args:
    input_dict: The execution's input artifacts (GnnTrainer's keys).
    exec_properties: Its parameters (train_args, eval_args, custom_config,
      module_file / module_path).
    cfg: Their validated configuration (:func:`config.from_exec_properties`).
    model_run_dir: The ``ModelRun`` folder (TensorBoard logs, metrics).
    staging_dir: Where the SavedModel is written before it is renamed into place.
    backup_dir: Training state kept for a retry (:func:`outputs.resume_dir`), resumed from.
    make_fn_args: Builds TFX's ``FnArgs`` (:func:`fn_args`); called once the
      splits are known to exist (TFX's split lookup fails with a bare ValueError).

  Raises:
    config_lib.ConfigError, module_contract.ModuleContractError,
    graph_schema_lib.GraphSchemaError, splits.SplitError,
    validation.InputDataError, transform.TransformSchemaError, GraphInputError:
      on bad input, naming what and where.
  """
  base_model_uri = single_uri(input_dict, spec.BASE_MODEL_KEY)
  if cfg.refresh_only and not base_model_uri:
    raise config_lib.ConfigError(
        "GnnTrainer custom_config 'refresh_only' exports the weights of base_model, and this "
        "GnnTrainer has no base_model: pass base_model=<the trained Model's channel> (e.g. a "
        "Resolver's latest blessed Model), or drop the key to train.")
  hparams = module_hparams(cfg, _tuned_hparams(single_uri(input_dict, spec.HYPERPARAMETERS_KEY)))
  if not input_dict.get(spec.EXAMPLES_KEY):
    read_data = _graph_source(input_dict, cfg)
  else:
    read_data = examples.locate(
        input_dict[spec.EXAMPLES_KEY], cfg,
        graph_schema_uri=single_uri(input_dict, spec.GRAPH_SCHEMA_KEY),
        schema_uri=single_uri(input_dict, spec.SCHEMA_KEY),
        transform_graph_uri=single_uri(input_dict, spec.TRANSFORM_GRAPH_KEY))
  user_module = module_contract.load_user_module(
      exec_properties.get(spec.MODULE_FILE_KEY), exec_properties.get(spec.MODULE_PATH_KEY),
      hparams, fn_args=make_fn_args())
  if cfg.export_embeddings and embeddings.unsupported(user_module.tasks):
    raise config_lib.ConfigError(
        f"GnnTrainer: the export's embeddings signature has no rule for the tasks "
        f"{embeddings.unsupported(user_module.tasks)} (none is a TF-GNN runner node, graph or "
        "link task). Give the task an `embeddings(graph)` method that returns the base GNN's "
        'state it reads, or set custom_config "export_embeddings": false.')
  data = read_data(user_module.tasks)
  served_graph = _served_graph(cfg, data)
  logging.info("GnnTrainer: %s; config %s, hparams %s, resume dir %s", data.describe(), cfg,
               dict(user_module.hparams), backup_dir)
  return TrainingInputs(
      cfg=cfg, user_module=user_module, data=data, model_run_dir=model_run_dir,
      staging_dir=staging_dir, resume_dir=backup_dir,
      base_model_path=path_utils.serving_model_path(base_model_uri) if base_model_uri else None,
      served_graph=served_graph)


def resolve_execution(input_dict: Artifacts, output_dict: Artifacts,
                      exec_properties: dict[str, Any], cfg: config_lib.TrainerConfig, *,
                      model_run_dir: str, staging_dir: str, backup_dir: str) -> TrainingInputs:
  """:func:`resolve` for a GnnTrainer execution: ``FnArgs`` from its artifacts (:func:`fn_args`).

  What the trainer's executor trains from, and what its launcher checks
  before a job starts.
  """
  return resolve(input_dict, exec_properties, cfg, model_run_dir=model_run_dir,
                 staging_dir=staging_dir, backup_dir=backup_dir,
                 make_fn_args=functools.partial(fn_args, input_dict, output_dict, exec_properties))
