"""The one plain, typed configuration a GnnTrainer execution runs with.

Pure functions: TFX execution properties (JSON strings, as TFX stores them in
MLMD) in, a frozen :class:`TrainerConfig` out, its graph parameters (``seeds``,
``sampling_config`` / ``sampling_spec``, ``link_config``) decoded once into
the graph core's :class:`~gnn_trainer_component.graph.params.GraphParams`. Nothing here imports
TFX or TensorFlow, so it is unit-testable in milliseconds.

The knobs of ``tensorflow_gnn.runner.run`` / ``runner.KerasTrainer`` are set
through ``custom_config``, whose keys ``trainer.custom_config`` declares;
unknown keys and ill-typed values are rejected here, never ignored.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Mapping, Optional, Sequence, Union

from gnn_trainer_component import config_dicts
from gnn_trainer_component import errors
from gnn_trainer_component import keys
from gnn_trainer_component.distributed import job_spec as job_spec_lib
from gnn_trainer_component.graph import params as graph_params
from gnn_trainer_component.trainer import custom_config as custom_config_lib


class ConfigError(errors.GnnError, ValueError):
  """A GnnTrainer parameter is missing, unknown or has the wrong type/value."""


def parse_monitor(spec: str, what: str = custom_config_lib.RESTORE_BEST_WEIGHTS_BY
                  ) -> tuple[str, str]:
  """``restore_best_weights_by`` (or GnnTuner's objective) -> ``(metric name, "min" | "max")``.

  ``what`` names the parameter in error messages.

  Raises:
    ConfigError: unless ``spec`` is ``min:val_<m>``, ``max:val_<m>`` or a bare
      ``val_<m>`` naming a loss or an error (lowest is best).
  """
  problem = custom_config_lib.monitor_problem(spec, what)
  if problem:
    raise ConfigError(problem)
  mode, _, name = spec.rpartition(":")
  return name, mode or "min"


@dataclasses.dataclass(frozen=True)
class TrainerConfig(custom_config_lib.CustomConfig):
  """Everything one GnnTrainer execution needs besides artifacts and code.

  The ``custom_config`` keys (declared, with their defaults, checks and
  documentation, in :class:`~gnn_trainer_component.trainer.custom_config.CustomConfig`),
  and: the first four fields from ``train_args`` / ``eval_args``, ``graph``
  from the graph parameters (None: the examples are on disk).
  """
  train_splits: tuple[str, ...] = ("train",)
  eval_splits: tuple[str, ...] = ("eval",)
  train_steps: Optional[int] = None
  eval_steps: Optional[int] = None
  graph: Optional[graph_params.GraphParams] = None

  @property
  def launches(self) -> bool:
    """Whether the execution launches a job (the launcher's) instead of training in place."""
    return bool(self.ai_platform_training_args) or self.local_workers > 1

  @property
  def steps_per_epoch(self) -> Optional[int]:
    """Steps per epoch, or None to run each epoch over the whole split."""
    if self.train_steps is None:
      return None
    return self.train_steps // self.epochs


def _suggest(name: str, choices: Sequence[str]) -> str:
  close = difflib.get_close_matches(name, choices, n=1)
  return f" Did you mean {close[0]!r}?" if close else ""


def parse_custom_config(custom_config: Optional[Mapping[str, Any]]) -> dict:
  """Validates ``custom_config`` and fills defaults.

  Args:
    custom_config: The user's dict (already JSON-decoded), or None.

  Returns:
    A dict with every key of
    :data:`~gnn_trainer_component.trainer.custom_config.CUSTOM_CONFIG_KEYS`.

  Raises:
    ConfigError: on an unknown key or an ill-typed value.
  """
  custom_config = dict(custom_config or {})
  if not isinstance(custom_config, dict):
    raise ConfigError(
        f"GnnTrainer custom_config must be a dict, got {type(custom_config).__name__}.")
  declared = custom_config_lib.CUSTOM_CONFIG_KEYS
  known = sorted(declared)
  for key in custom_config:
    if key not in declared:
      raise ConfigError(
          f"GnnTrainer custom_config has unknown key {key!r}.{_suggest(key, known)} "
          f"Allowed keys: {', '.join(known)}.")
  out = {}
  for key, spec in declared.items():
    value = custom_config.get(key, spec.default)
    if not spec.check(value):
      raise ConfigError(
          f"GnnTrainer custom_config[{key!r}] must be {spec.expected}, got "
          f"{value!r} ({type(value).__name__}). {spec.doc}")
    out[key] = value
  return out


def _splits(args: Mapping[str, Any], default: str, field: str) -> tuple[str, ...]:
  splits = tuple(args.get("splits") or (default,))
  for s in splits:
    if not isinstance(s, str) or not s:
      raise ConfigError(f"GnnTrainer {field}.splits has an invalid split name {s!r}.")
  return splits


def _steps(args: Mapping[str, Any], field: str) -> Optional[int]:
  # proto3 JSON renders int fields as ints or strings; 0 / absent means "unset".
  raw = args.get("num_steps", args.get("numSteps"))
  if raw in (None, "", 0, "0"):
    return None
  try:
    steps = int(raw)
  except (TypeError, ValueError):
    raise ConfigError(f"GnnTrainer {field}.num_steps must be an int, got {raw!r}.") from None
  if steps < 0:
    raise ConfigError(f"GnnTrainer {field}.num_steps must be >= 0, got {steps}.")
  return steps


def _loads(value: Union[None, str, Mapping[str, Any]], field: str) -> dict:
  return dict(config_dicts.decode(value, f"GnnTrainer {field}", ConfigError, optional=True))


def _check_keys_that_need_others(cfg: TrainerConfig) -> None:
  """Raises ConfigError for a custom_config key set without the key it needs."""
  if cfg.restore_best_weights_by != "val_loss" and not cfg.restore_best_weights:
    raise ConfigError(
        f"GnnTrainer custom_config['restore_best_weights_by']={cfg.restore_best_weights_by!r} "
        "only applies with 'restore_best_weights': true; set it too, or drop the key.")
  if cfg.retrieval_splits and not cfg.export_embeddings:
    raise ConfigError(
        f"GnnTrainer custom_config['retrieval_splits']={list(cfg.retrieval_splits)} ranks by "
        "the exported embeddings: set 'export_embeddings' to true, or drop the key.")
  if cfg.deterministic and cfg.seed is None:
    raise ConfigError(
        "GnnTrainer custom_config['deterministic'] needs a 'seed' (an int): without one "
        "every run starts from other random weights.")


def from_exec_properties(exec_properties: Mapping[str, Any], *,
                         in_place: bool = False) -> "TrainerConfig":
  """The validated configuration of an execution, its graph parameters decoded.

  Args:
    exec_properties: train_args, eval_args, custom_config and the graph
      parameters (seeds, sampling_spec, sampling_config, link_config).
    in_place: The execution trains in place (GnnTrainer's executor): a
      custom_config that asks for a job is the launcher's.

  Raises:
    ConfigError: an invalid parameter (a graph parameter that is not a JSON
      object too), or (``in_place``) a job asked for.
  """
  cfg = make_trainer_config(exec_properties.get(keys.TRAIN_ARGS_KEY),
                            exec_properties.get(keys.EVAL_ARGS_KEY),
                            exec_properties.get(keys.CUSTOM_CONFIG_KEY))
  if in_place and cfg.launches:
    raise ConfigError(
        "GnnTrainer custom_config asks for a job ('local_workers' > 1 or "
        "'ai_platform_training_args'), which gnn_trainer_component.trainer.launcher.Executor "
        "runs (GnnTrainer picks it for such a custom_config); this executor trains in "
        "place. Declare the step with GnnTrainer, or run the launcher's executor.")
  graph = graph_params.read(exec_properties, "GnnTrainer", ConfigError)
  if not graph.seeds and not graph.link_config:
    return cfg
  return dataclasses.replace(cfg, graph=graph)


def make_trainer_config(train_args: Union[None, str, Mapping[str, Any]],
                        eval_args: Union[None, str, Mapping[str, Any]],
                        custom_config: Union[None, str, Mapping[str, Any]]
                        ) -> TrainerConfig:
  """Maps the GnnTrainer execution properties to a :class:`TrainerConfig`.

  Args:
    train_args: ``tfx.proto.TrainArgs`` as proto-JSON (as TFX stores it) or dict.
    eval_args: ``tfx.proto.EvalArgs`` as proto-JSON or dict. ``{"splits": []}``
      is treated like the default ``["eval"]``, as the stock Trainer does.
    custom_config: The custom_config JSON string or dict.

  Returns:
    The validated config.

  Raises:
    ConfigError: with a message naming the offending parameter.
  """
  train = _loads(train_args, "train_args")
  evaluation = _loads(eval_args, "eval_args")
  knobs = parse_custom_config(_loads(custom_config, "custom_config"))
  cfg = TrainerConfig(
      train_splits=_splits(train, "train", "train_args"),
      eval_splits=_splits(evaluation, "eval", "eval_args"),
      train_steps=_steps(train, "train_args"),
      eval_steps=_steps(evaluation, "eval_args"),
      **knobs)
  if cfg.train_steps is not None and cfg.train_steps < cfg.epochs:
    raise ConfigError(
        f"GnnTrainer train_args.num_steps={cfg.train_steps} is smaller than "
        f"custom_config['epochs']={cfg.epochs}: each epoch needs at least one step.")
  if cfg.validation_per_epoch is not None:
    if cfg.train_steps is None:
      raise ConfigError(
          "GnnTrainer custom_config['validation_per_epoch'] needs train_args.num_steps.")
    if cfg.validation_freq != 1:
      raise ConfigError(
          "GnnTrainer custom_config: set either 'validation_per_epoch' or "
          "'validation_freq', not both.")
  if cfg.backup_every_n_steps is not None and cfg.train_steps is None:
    raise ConfigError(
        "GnnTrainer custom_config['backup_every_n_steps'] needs train_args.num_steps "
        "(a resume point inside an epoch needs a known epoch length); without it, "
        "use 'backup_every_seconds'.")
  _check_keys_that_need_others(cfg)
  if cfg.local_parameter_servers and cfg.local_workers < 2:
    raise ConfigError(
        f"GnnTrainer custom_config['local_parameter_servers']={cfg.local_parameter_servers} "
        "needs 'local_workers' >= 2 (a chief to coordinate and at least one worker).")
  if not cfg.local_parameter_servers:
    check_replicas(cfg, cfg.local_workers, "custom_config['local_workers']")
  if cfg.ai_platform_training_args is not None:
    check_vertex_job(cfg)
  elif cfg.ai_platform_vertex_region is not None:
    raise ConfigError(
        "GnnTrainer custom_config['ai_platform_vertex_region'] only applies with "
        "'ai_platform_training_args' (the Vertex AI CustomJob); set it too, or drop the key.")
  if cfg.tf_data_service_address is None:
    for key in ("tf_data_service_job_name", "tf_data_service_mode"):
      if getattr(cfg, key) != custom_config_lib.CUSTOM_CONFIG_KEYS[key].default:
        raise ConfigError(
            f"GnnTrainer custom_config[{key!r}] only applies with "
            "'tf_data_service_address' (the dispatcher, e.g. 'grpc://host:5050'); set it "
            "too, or drop the key.")
  overlap = set(cfg.train_splits) & set(cfg.eval_splits)
  if overlap:
    raise ConfigError(
        f"GnnTrainer train_args.splits and eval_args.splits share {sorted(overlap)}: "
        "validation data must not be training data.")
  return cfg


_POOL_KEYS = ("replica_count", "machine_spec", "container_spec", "disk_spec", "nfs_mounts")
_POOL_ROLES = ("chief", "workers", "parameter servers")


def check_vertex_job(cfg: TrainerConfig) -> None:
  """Checks ``ai_platform_training_args`` as Vertex AI and GnnTrainer need it.

  Raises:
    ConfigError: naming the field (e.g. ``job_spec.worker_pool_specs[1].machine_spec``)
      and what to write instead.
  """
  where = "GnnTrainer custom_config['ai_platform_training_args']"
  args = cfg.ai_platform_training_args
  if cfg.local_workers > 1:
    raise ConfigError(f"{where} and 'local_workers' both choose where training runs: "
                      "drop one.")
  if not cfg.ai_platform_vertex_region:
    raise ConfigError(f"{where} needs custom_config['ai_platform_vertex_region'] "
                      "(e.g. 'us-central1'): the region the CustomJob runs in.")
  if not isinstance(args.get("project"), str) or not args["project"]:
    raise ConfigError(f"{where} needs 'project': the Google Cloud project id (a string).")
  unknown = sorted(set(args) - {"project", "job_spec", "display_name", "labels",
                                "encryption_spec"})
  if unknown:
    raise ConfigError(
        f"{where} has unknown keys {unknown}: it holds 'project' and a CustomJob "
        "('job_spec' with 'worker_pool_specs', optional 'display_name', 'labels', "
        "'encryption_spec'), snake_case as in TFX's Vertex Trainer.")
  pools = (args.get("job_spec") or {}).get("worker_pool_specs")
  if not isinstance(pools, list) or not 1 <= len(pools) <= 3:
    raise ConfigError(
        f"{where}['job_spec']['worker_pool_specs'] must be a list of 1 to 3 worker pools "
        f"(chief, workers, parameter servers), got {pools!r}. An evaluator pool is not "
        "supported: the chief validates.")
  for i, pool in enumerate(pools):
    at = f"{where}['job_spec']['worker_pool_specs'][{i}] ({_POOL_ROLES[i]})"
    if not isinstance(pool, dict):
      raise ConfigError(f"{at} must be an object, got {pool!r}.")
    if not pool and i == 1 and len(pools) == 3:
      continue  # Vertex AI's placeholder for an unused pool
    bad = sorted(set(pool) - set(_POOL_KEYS))
    if bad:
      raise ConfigError(f"{at} has unknown keys {bad}; a pool holds {list(_POOL_KEYS)} "
                        "(snake_case; 'python_package_spec' is not supported: the replicas "
                        "run the GnnTrainer image).")
    count = pool.get("replica_count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1 or (
        i == 0 and count != 1):
      raise ConfigError(f"{at}: replica_count must be {'1' if i == 0 else 'a positive int'}, "
                        f"got {count!r}.")
    if not isinstance((pool.get("machine_spec") or {}).get("machine_type"), str):
      raise ConfigError(f"{at} needs machine_spec.machine_type, e.g. 'n1-standard-8'.")
    image = (pool.get("container_spec") or {}).get("image_uri")
    if not isinstance(image, str) or not image or any(c.isspace() for c in image):
      raise ConfigError(f"{at} needs container_spec.image_uri: the GnnTrainer image "
                        "(kubeflow/Dockerfile), the one the pipeline runs.")
  if len(pools) == 3 and not pools[1]:
    raise ConfigError(f"{where}: a parameter-server pool needs workers (pool 1).")
  if len(pools) < 3:
    check_replicas(cfg, job_spec_lib.training_replicas(args["job_spec"]),
                   "custom_config['ai_platform_training_args'] pools 0 and 1")


def launch_job_spec(cfg: TrainerConfig) -> Optional[dict[str, Any]]:
  """The CustomJob ``job_spec`` an execution with ``cfg`` launches, or None to train in place.

  ``ai_platform_training_args`` -> its ``job_spec`` (Vertex AI);
  ``local_workers`` > 1 -> a chief, workers and parameter servers on this machine.
  """
  if not cfg.launches:
    return None
  if cfg.ai_platform_training_args:
    return cfg.ai_platform_training_args["job_spec"]
  return job_spec_lib.local_job_spec(cfg.local_workers, cfg.local_parameter_servers)


def _batch_not_divisible(global_batch_size: int, replicas: int, where: str) -> str:
  lower = global_batch_size - global_batch_size % replicas
  return (f"GnnTrainer custom_config['global_batch_size']={global_batch_size} is not divisible "
          f"by the {replicas} replicas ({where}): each replica trains on global_batch_size / "
          f"replicas examples per step. Use a multiple of {replicas}, e.g. "
          f"{lower or replicas} or {lower + replicas}.")


def check_replicas(cfg: TrainerConfig, replicas: int, where: str) -> None:
  """Raises ConfigError unless the global batch splits evenly over ``replicas``."""
  if cfg.global_batch_size % replicas:
    raise ConfigError(_batch_not_divisible(cfg.global_batch_size, replicas, where))


def distributed_steps(cfg: TrainerConfig, train_records: Optional[int],
                      eval_records: Optional[int], num_workers: int) -> TrainerConfig:
  """``cfg`` with the step counts a distributed dataset needs.

  Keras cannot tell where an epoch of a distributed dataset ends (every worker
  reads its own shard), so ``runner.run`` needs ``train_args.num_steps`` and,
  with validation, ``eval_args.num_steps``. Unset ones are derived from the
  record counts of the pre-flight pass: ``records // global_batch_size``
  training steps per epoch (at least 1) and ``ceil(records / global_batch_size)``
  validation steps (the runner repeats both datasets, so no worker runs dry).

  Raises:
    ConfigError: a count is unset and the records are unknown.
  """
  train_steps, eval_steps = cfg.train_steps, cfg.eval_steps
  for name, steps, records in (("train_args", train_steps, train_records),
                               ("eval_args", eval_steps, eval_records)):
    if steps is None and records is None:
      raise ConfigError(
          f"GnnTrainer on {num_workers} workers needs {name}.num_steps: a distributed "
          "dataset has no known end, and the number of examples is unknown. Set "
          f"{name}=tfx.proto.{'TrainArgs' if name == 'train_args' else 'EvalArgs'}"
          "(num_steps=...).")
  if train_steps is None:
    train_steps = max(1, train_records // cfg.global_batch_size) * cfg.epochs
  if eval_steps is None:
    eval_steps = max(1, -(-eval_records // cfg.global_batch_size))
  return dataclasses.replace(cfg, train_steps=train_steps, eval_steps=eval_steps)
