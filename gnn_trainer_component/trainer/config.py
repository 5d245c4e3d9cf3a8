"""The one plain, typed configuration a GnnTrainer execution runs with.

Pure functions: TFX execution properties (JSON strings, as TFX stores them in
MLMD) in, a frozen :class:`TrainerConfig` out, its graph parameters (``seeds``,
``sampling_config`` / ``sampling_spec``, ``link_config``) decoded once into
:class:`GraphParams`. Nothing here imports
TFX or TensorFlow, so it is unit-testable in milliseconds.

The knobs of ``tensorflow_gnn.runner.run`` / ``runner.KerasTrainer`` are set
through ``custom_config``; :data:`CUSTOM_CONFIG_KEYS` is the complete list.
Unknown keys and ill-typed values are rejected, never ignored.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from gnn_trainer_component import config_dicts
from gnn_trainer_component import errors
from gnn_trainer_component import keys
from gnn_trainer_component.distributed import job_spec as job_spec_lib


class ConfigError(errors.GnnError, ValueError):
  """A GnnTrainer parameter is missing, unknown or has the wrong type/value."""


def _is_int(v: Any) -> bool:
  return isinstance(v, int) and not isinstance(v, bool)


def _pos_int(v: Any) -> bool:
  return _is_int(v) and v > 0


def _opt_pos_int(v: Any) -> bool:
  return v is None or _pos_int(v)


def _non_neg_int(v: Any) -> bool:
  return _is_int(v) and v >= 0


def _is_number(v: Any) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_bool(v: Any) -> bool:
  return isinstance(v, bool)


def _one_of(*choices: str) -> Callable[[Any], bool]:
  return lambda v: v in choices


def _pos_int_or(*words: str) -> Callable[[Any], bool]:
  return lambda v: _pos_int(v) or v in words


def _str_to_pos_int_map(v: Any) -> bool:
  return v is None or (isinstance(v, Mapping) and
                       all(isinstance(k, str) and _pos_int(n) for k, n in v.items()))


def _opt_split_names(v: Any) -> bool:
  return v is None or (isinstance(v, (list, tuple)) and
                       all(isinstance(s, str) and s for s in v))


def _opt_str(v: Any) -> bool:
  return v is None or (isinstance(v, str) and bool(v))


def _cache_setting(v: Any) -> bool:
  return v in ("auto", "memory", "none") or (
      isinstance(v, str) and ("/" in v or "\\" in v))


def _json_object(v: Any) -> bool:
  if not isinstance(v, Mapping) or not all(isinstance(k, str) and k for k in v):
    return False
  try:
    json.dumps(v)
  except (TypeError, ValueError):
    return False
  return True


def parse_monitor(spec: str,
                  what: str = "GnnTrainer custom_config['restore_best_weights_by']"
                  ) -> tuple[str, str]:
  """``restore_best_weights_by`` (or GnnTuner's objective) -> ``(metric name, "min" | "max")``.

  ``what`` names the parameter in error messages.

  Raises:
    ConfigError: unless ``spec`` is ``min:val_<m>``, ``max:val_<m>`` or a bare
      ``val_<m>`` naming a loss or an error (lowest is best).
  """
  mode, _, name = spec.rpartition(":") if isinstance(spec, str) else ("", "", "")
  if not name.startswith("val_") or len(name) == len("val_") or mode not in ("", "min", "max"):
    raise ConfigError(
        f"{what} must be a validation metric "
        f"as history.json names it, e.g. 'val_loss' or 'max:val_auc'; got {spec!r}.")
  if not mode:
    if not any(word in name for word in ("loss", "error", "crossentropy")):
      raise ConfigError(
          f"{what}={spec!r}: say whether "
          f"higher or lower is better: 'max:{name}' or 'min:{name}'.")
    mode = "min"
  return name, mode


def _monitor(v: Any) -> bool:
  try:
    parse_monitor(v)
  except ConfigError:
    return False
  return True


_SERVICE_ADDRESS = re.compile(r"^(grpc://)?[A-Za-z0-9_.\-]+:\d{1,5}$")


@dataclasses.dataclass(frozen=True)
class _Key:
  """Declaration of one ``custom_config`` key."""
  default: Any
  check: Callable[[Any], bool]
  expected: str
  doc: str


#: Marks a TrainerConfig field as a ``custom_config`` key (dataclass field metadata).
CUSTOM_CONFIG = "custom_config"


def _key(default: Any, check: Callable[[Any], bool], expected: str, doc: str) -> Any:
  """Declares a ``custom_config`` key: a TrainerConfig field with its check and doc."""
  return dataclasses.field(default=default, metadata={
      CUSTOM_CONFIG: _Key(default, check, expected, doc)})


@dataclasses.dataclass(frozen=True)
class GraphParams:
  """The graph held in memory, as GnnTrainer's parameters ask for it (decoded, not yet checked).

  The checks against the graph schema and an engine are the graph core's
  (:func:`gnn_trainer_component.graph.plan.plan`).

  Attributes:
    seeds: Split name -> seed table (relative to the graph_schema folder), or None.
    sampling_spec: Text-format SamplingSpec, or None.
    sampling_config: ``{"seed_node_set": ..., "hops": [...]}``, or None.
    link_config: LinkSampler's ``link_config`` instead of the three above, or None.
  """
  seeds: Optional[Mapping[str, str]] = None
  sampling_spec: Optional[str] = None
  sampling_config: Optional[Mapping[str, Any]] = None
  link_config: Optional[Mapping[str, Any]] = None


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
  """Everything one GnnTrainer execution needs besides artifacts and code.

  The first four fields come from ``train_args`` / ``eval_args``, ``graph``
  from the graph parameters (None: the examples are on disk); every other
  field is a ``custom_config`` key, declared here once with its default, check
  and documentation (docs/gnn_trainer.md's table is generated from them:
  ``python -m gnn_trainer_component.trainer.config``).
  """
  train_splits: tuple[str, ...] = ("train",)
  eval_splits: tuple[str, ...] = ("eval",)
  train_steps: Optional[int] = None
  eval_steps: Optional[int] = None
  graph: Optional[GraphParams] = None

  global_batch_size: int = _key(
      32, _pos_int, "a positive int",
      "Batch size summed over replicas (runner.run global_batch_size).")
  epochs: int = _key(
      1, _pos_int, "a positive int",
      "Number of epochs. With train_args.num_steps, steps per epoch = "
      "num_steps // epochs and the training data is repeated.")
  drop_remainder: bool = _key(False, _is_bool, "a bool", "Drop the last partial batch.")
  shuffle_buffer_size: int = _key(
      1000, _non_neg_int, "an int >= 0",
      "Examples shuffle buffer for training (0 disables shuffling).")
  padding: str = _key(
      "none", _one_of("none", "fit_or_skip", "tight"),
      "one of 'none', 'fit_or_skip', 'tight'",
      'Static-shape padding (needed on TPU): `fit_or_skip` or `tight` for training, '
      'validation uses TightPadding.')
  min_nodes_per_component: Optional[Mapping[str, int]] = _key(
      None, _str_to_pos_int_map, "a {node_set: positive int} mapping or null",
      "Padding: nodes reserved per graph component (default: 1 per set).")
  steps_per_execution: Optional[int] = _key(
      None, _opt_pos_int, "a positive int or null",
      "Keras steps_per_execution (measured: no gain on CPU, see "
      "[benchmarks](../benchmarks/README.md)).")
  jit_compile: bool = _key(
      False, _is_bool, "a bool",
      "Compile the train and validation steps with XLA (Keras `jit_compile`). Pays off when "
      "batch shapes repeat: full-batch training with the cache, or `padding`; else every new "
      "shape compiles again. W1: 61 instead of 67 ms per epoch. XLA draws its own "
      "dropout masks: a seeded run differs as another seed would.")
  graph_mode: str = _key(
      "auto", _one_of("auto", "full_graph", "sampled"),
      "one of 'auto', 'full_graph', 'sampled'",
      'With the graph in memory (`seeds` + `sampling_config`/`sampling_spec`): '
      '`"full_graph"`: every step runs the GNN on the whole graph and reads out '
      '`global_batch_size` seeds with structured readout (key `"seed"`; tasks must read it, '
      'e.g. `tasks.RootNodeLogits` + `tasks.SeedLabelFn`); validation reads all its seeds in '
      'one step; one replica. `"sampled"`: subgraphs around the seeds, sampled fresh every '
      'epoch with the sampling config. `"auto"`: full graph when its estimated step memory '
      'fits `full_graph_budget_mb`, the tasks read the seed readout and training runs in one '
      'process; else sampled. The export serves GraphSampler-format subgraphs in every mode. '
      'Link prediction (`link_config`): `"full_graph"` runs every step on the whole '
      'message-passing graph without the step\'s positives, read out at `global_batch_size` '
      'pairs; `"auto"` samples each pair\'s subgraph.')
  full_graph_budget_mb: Optional[int] = _key(
      None, _opt_pos_int, "a positive int or null",
      '`graph_mode` "auto": the most memory a full-graph step may take (estimated as 8x the '
      'graph\'s features and indices); null: a quarter of the RAM.')
  autograph: bool = _key(
      False, _is_bool, "a bool",
      'Let TensorFlow\'s AutoGraph rewrite Python `if`/`for`/`while` on tensor values in the '
      'model, feature processors and tasks into graph ops. TF-GNN\'s layers need no rewrite, '
      'and rewriting them was most of the time before the first training step (W1: about '
      '18 s of 20). Turn it on for a module whose own layers branch or loop on tensor values: '
      'without it, their tracing fails with an error that names this key.')
  fused_epochs: bool = _key(
      True, _is_bool, "a bool",
      'When an epoch is one training step on one batch kept in memory (the whole graph in '
      'memory, or a training split of one batch) and validation is one batch: run each '
      'epoch as one call, the validation pass inside the training step, instead of Keras\' '
      'step and a separate `evaluate` call (which costs more than a small graph\'s epoch). '
      'The logs, callbacks and history are the same. See [Speed](speed.md).')
  validation_freq: int = _key(1, _pos_int, "a positive int", "Validate every N epochs.")
  validation_per_epoch: Optional[int] = _key(
      None, _opt_pos_int, "a positive int or null",
      "Validate N times per epoch (needs train_args.num_steps; exclusive "
      "with validation_freq != 1).")
  cache: str = _key(
      "auto", _cache_setting, "'auto', 'memory', 'none' or a folder path (local or gs://)",
      'Parse once: keep the parsed training and validation examples after the first pass '
      '(shuffling stays per epoch, after the cache). `"memory"`: in RAM; a folder: '
      'tf.data cache files there (one subfolder per attempt, deleted after training); '
      '`"none"`: re-read and re-parse every epoch; `"auto"`: none when each split is '
      'read once (one epoch without `num_steps`), else memory when the estimated '
      'parsed size fits `cache_memory_budget_mb`, else none. In memory, on one worker, '
      'the batches after merging and preprocessing are cached too when preprocessing is '
      'deterministic (checked: two passes over the first batch must agree), for '
      'validation always and for training when the whole split is one batch. See '
      '[Speed](speed.md).')
  cache_memory_budget_mb: Optional[int] = _key(
      None, _opt_pos_int, "a positive int or null",
      '`cache: "auto"` caches in memory up to this estimated size (MiB); null: a '
      'quarter of the machine\'s RAM.')
  summarize_every_n_steps: Union[int, str] = _key(
      500, _pos_int_or("never"), "a positive int or 'never'",
      'TensorBoard scalars in model_run every N steps and each epoch (or `"never"`).')
  histogram_freq: int = _key(
      0, _non_neg_int, "an int >= 0",
      'TensorBoard weight histograms every N epochs (0: never; TF-GNN writes them '
      'every epoch, which dominates short epochs).')
  checkpoint_every_n_steps: Union[int, str] = _key(
      "never", _pos_int_or("epoch", "never"), "a positive int, 'epoch' or 'never'",
      'Extra weight checkpoints in model_run/ckpnt (TF-GNN\'s "latest" and "best"). '
      'Not needed for resume (see `backup_every_*`) nor for `restore_best_weights`.')
  backup_every_n_steps: Optional[int] = _key(
      None, _opt_pos_int, "a positive int or null",
      'Back up the training state for resume every N steps (needs train_args.num_steps). '
      'Null: by time, see `backup_every_seconds`.')
  backup_every_seconds: float = _key(
      60, lambda v: _is_number(v) and v >= 0, "a number >= 0",
      'Back up the training state for resume at the first epoch end (or, with '
      'train_args.num_steps, step end) at least this many seconds after the last '
      'backup, and after the last epoch; 0: every epoch. A SIGKILLed attempt loses '
      'at most this much training.')
  restore_best_weights: bool = _key(
      False, _is_bool, "a bool",
      'Export the weights of the epoch with the best validation metric (by '
      '`restore_best_weights_by`; kept in memory, saved with each backup so resume keeps '
      'them) instead of the last epoch\'s.')
  restore_best_weights_by: str = _key(
      "val_loss", _monitor, "'val_loss', 'min:val_<metric>' or 'max:val_<metric>'",
      'With `restore_best_weights`: the validation metric that picks the exported epoch, '
      'as history.json names it: lowest with `min:`, highest with `max:` (e.g. '
      '`"max:val_auc"` for link prediction); a bare name must be a loss or an error '
      '(lowest). A name the model does not log fails the run at the first validation.')
  serving_output_name: str = _key(
      "logits", _opt_str, "a non-empty string",
      "Output key of serving_default for a single task (multi-task models "
      "use the task names).")
  export_embeddings: bool = _key(
      True, _is_bool, "a bool",
      'Add the `embeddings` signature to the export: on the same serialized examples as '
      '`serving_default`, the base GNN\'s final state where each task reads it (the root or '
      'seed node, both ends of a link, the pooled graph). A task GnnTrainer has no rule for '
      'needs an `embeddings(graph)` method, or set this to false.')
  retrieval_splits: Optional[Sequence[str]] = _key(
      None, _opt_split_names, "null or a list of split names",
      'Link prediction on the graph in memory (`link_config`): after training, rank each '
      'positive of these held-out splits against every node (filtered, as OGB\'s full-ranking '
      'benchmarks: the other known edges are not candidates) by the exported embeddings and the '
      'task\'s edge scorer; Model properties `retrieval_mrr`, `retrieval_hits@20`, `@50`, '
      '`@100`, `retrieval_queries`. Null: the `eval_args` splits where that takes at most '
      '10^9 scores (queries x nodes; else skipped with a warning); `[]`: off. Needs '
      '`export_embeddings`.')
  parity_check_examples: int = _key(
      16, _non_neg_int, "an int >= 0",
      "Before publishing, the exported SavedModel is reloaded and its "
      "predictions on this many eval examples are compared with the "
      "in-memory model's (0 disables).")
  seed: Optional[int] = _key(
      None, lambda v: v is None or _is_int(v), "an int or null",
      '`tf.keras.utils.set_random_seed` for reproducible runs.')
  deterministic: bool = _key(
      False, _is_bool, "a bool",
      'With `seed`: the same inputs train the same model bit for bit '
      '(`tf.config.experimental.enable_op_determinism()`, which also keeps the order of '
      'tf.data\'s parallel maps, TF-GNN\'s runner\'s included: without it, batches that '
      'finish out of order change the training order). For reproducible tuning: '
      'GnnTrainer fed GnnTuner\'s best retrains the best trial exactly. Process-wide while '
      'GnnTrainer trains (switched off again after); the input pipeline gives up '
      'out-of-order speed.')
  check_finite_inputs: bool = _key(
      True, _is_bool, "a bool",
      'Assert every float feature of every training/validation example finite (no '
      'NaN/inf) right after parsing; the first one stops training with an error '
      'naming file, record and feature. Measured on Cora: the input pipeline alone '
      '+16 %, a whole 20-epoch training run no measurable change '
      '([benchmarks](../benchmarks/README.md#input-pipeline-nan-check)); `false` skips '
      'it and lets the runner parse in batches (the pre-flight sample check still '
      'runs).')
  check_leakage: bool = _key(
      True, _is_bool, "a bool",
      'Time-aware sampling on the graph in memory (`uniform_before`, `latest`): check every '
      'sampled subgraph for an edge at or after its seed\'s time (the sampler is not '
      'trusted); the first one stops training with an error naming the seed, the edge and '
      'both times. `false` skips the check.')
  recovery_max_trials: int = _key(
      0, _non_neg_int, "an int >= 0",
      'On a non-finite loss (or one above `loss_upper_bound`) or non-finite weights, '
      'roll model and optimizer back to the last good state (kept in memory every '
      '`backup_every_n_steps` steps, or every epoch) and go on with the next '
      'batch, at most this many times per execution; `0`: stop with an error at once.'
      ' See [Guarantees](guarantees.md).')
  loss_upper_bound: Optional[float] = _key(
      None, lambda v: v is None or (_is_number(v) and v > 0), "a positive number or null",
      'A training loss above this counts as exploding: handled like a non-finite loss'
      ' (recovery or error).')
  local_workers: int = _key(
      1, _pos_int, "a positive int",
      'Train with MultiWorkerMirroredStrategy in this many worker processes on this '
      'machine (chief + workers on 127.0.0.1, one `TF_CONFIG` each, logs in '
      '`model_run/cluster/`), as a Vertex AI / Kubeflow job runs replicas: to try a '
      'multi-worker setup before a cluster. Ignored inside a cluster (`TF_CONFIG` set). '
      'See [Scaling out](scaling.md).')
  local_parameter_servers: int = _key(
      0, _non_neg_int, "an int >= 0",
      'With `local_workers` >= 2: also start this many parameter-server tasks, and train '
      'with TF-GNN\'s ParameterServerStrategy (the chief coordinates, the other workers '
      'train, the variables live on the ps tasks) instead of MultiWorkerMirroredStrategy.')
  ai_platform_training_args: Optional[Mapping[str, Any]] = _key(
      None, lambda v: v is None or _json_object(v),
      "a JSON object {project, job_spec: {worker_pool_specs: [...]}} or null",
      'Train as a Vertex AI CustomJob (the key of TFX\'s Vertex Trainer): `project` and '
      '`job_spec.worker_pool_specs` (pool 0: the chief, 1 replica; pool 1: workers; pool 2: '
      'parameter servers; each with `machine_spec` and `container_spec.image_uri`, the '
      'GnnTrainer image). This step submits the job, waits, and publishes what the chief '
      'wrote. Needs `ai_platform_vertex_region`. See [Scaling out](scaling.md).')
  ai_platform_vertex_region: Optional[str] = _key(
      None, _opt_str, "a region such as 'us-central1', or null",
      'With `ai_platform_training_args`: the Vertex AI region of the CustomJob.')
  ai_platform_enable_vertex: bool = _key(
      True, lambda v: v is True, "true",
      'Accepted for TFX compatibility; only Vertex AI is supported (AI Platform Training '
      'is retired).')
  tf_data_service_address: Optional[str] = _key(
      None, lambda v: v is None or (isinstance(v, str) and bool(_SERVICE_ADDRESS.match(v))),
      "'grpc://host:port', 'host:port' or null",
      'Read and batch the training data on a [tf.data service]'
      '(https://www.tensorflow.org/api_docs/python/tf/data/experimental/service) whose '
      'dispatcher is here (`runner.run(tf_data_service_config=...)`); parsing, feature '
      'processors and validation stay on the trainer. Checked reachable before training.')
  tf_data_service_job_name: Optional[str] = _key(
      None, _opt_str, "a non-empty string or null",
      'With `tf_data_service_address`: the service job the workers share; null: one per '
      'pipeline run and GnnTrainer node (retries and workers share it).')
  tf_data_service_mode: str = _key(
      "parallel_epochs", _one_of("parallel_epochs", "distributed_epoch"),
      "'parallel_epochs' or 'distributed_epoch'",
      'With `tf_data_service_address`: each trainer worker gets every example per epoch '
      '(`parallel_epochs`), or the service splits one epoch among them '
      '(`distributed_epoch`).')
  hparams: Optional[Mapping[str, Any]] = _key(
      None, lambda v: v is None or _json_object(v), "a JSON object {name: value} or null",
      "Options of the user module (e.g. `num_classes`), passed to its functions as "
      "`hparams` and recorded with the execution in ML Metadata; values of a "
      "`hyperparameters` artifact (e.g. a tuner's best) override them key by key. "
      "The one channel for module options: module files must not read environment "
      "variables.")

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


#: Every key ``custom_config`` accepts, with its default, check and meaning
#: (derived from :class:`TrainerConfig`).
CUSTOM_CONFIG_KEYS: Mapping[str, _Key] = {
    f.name: f.metadata[CUSTOM_CONFIG] for f in dataclasses.fields(TrainerConfig)
    if CUSTOM_CONFIG in f.metadata}


def _suggest(name: str, choices: Sequence[str]) -> str:
  close = difflib.get_close_matches(name, choices, n=1)
  return f" Did you mean {close[0]!r}?" if close else ""


def parse_custom_config(custom_config: Optional[Mapping[str, Any]]) -> dict:
  """Validates ``custom_config`` and fills defaults.

  Args:
    custom_config: The user's dict (already JSON-decoded), or None.

  Returns:
    A dict with every key of :data:`CUSTOM_CONFIG_KEYS`.

  Raises:
    ConfigError: on an unknown key or an ill-typed value.
  """
  custom_config = dict(custom_config or {})
  if not isinstance(custom_config, dict):
    raise ConfigError(
        f"GnnTrainer custom_config must be a dict, got {type(custom_config).__name__}.")
  known = sorted(CUSTOM_CONFIG_KEYS)
  for key in custom_config:
    if key not in CUSTOM_CONFIG_KEYS:
      raise ConfigError(
          f"GnnTrainer custom_config has unknown key {key!r}.{_suggest(key, known)} "
          f"Allowed keys: {', '.join(known)}.")
  out = {}
  for key, spec in CUSTOM_CONFIG_KEYS.items():
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
    ConfigError: an invalid parameter, or (``in_place``) a job asked for.
    GraphInputError: a graph parameter that is not valid JSON.
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
  seeds, link_config = (exec_properties.get(k) for k in (keys.SEEDS_KEY, keys.LINK_CONFIG_KEY))
  if not seeds and not link_config:
    return cfg
  return dataclasses.replace(cfg, graph=GraphParams(
      seeds=_loads(seeds, keys.SEEDS_KEY) or None,
      sampling_spec=exec_properties.get(keys.SAMPLING_SPEC_KEY) or None,
      sampling_config=_loads(exec_properties.get(keys.SAMPLING_CONFIG_KEY),
                             keys.SAMPLING_CONFIG_KEY) or None,
      link_config=_loads(link_config, keys.LINK_CONFIG_KEY) or None))


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
      if getattr(cfg, key) != CUSTOM_CONFIG_KEYS[key].default:
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
    if not _pos_int(count) or (i == 0 and count != 1):
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


def _markdown_value(value: Any) -> str:
  return f"`{json.dumps(value)}`"


def markdown_table() -> str:
  """docs/gnn_trainer.md's ``custom_config`` table, generated from :data:`CUSTOM_CONFIG_KEYS`."""
  rows = ["| key | default | meaning |", "|---|---|---|"]
  rows += [f"| `{name}` | {_markdown_value(key.default)} | {key.doc} |"
           for name, key in CUSTOM_CONFIG_KEYS.items()]
  return "\n".join(rows) + "\n"


if __name__ == "__main__":
  print(markdown_table(), end="")
