"""Every key of GnnTrainer's ``custom_config``, declared once.

The knobs of ``tensorflow_gnn.runner.run`` / ``runner.KerasTrainer`` and the
module options (``hparams``) are set through ``custom_config``: each is a field
of :class:`CustomConfig` with its default, check and documentation, and
:data:`CUSTOM_CONFIG_KEYS` is the complete list. docs/gnn_trainer.md's table is
generated from them: ``python -m gnn_trainer_component.trainer.custom_config``.
The parsing, which rejects unknown keys and ill-typed values, and the rules
between keys are ``trainer.config``'s. TFX- and TensorFlow-free.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Callable, Mapping, Optional, Sequence, Union


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


#: What ``restore_best_weights_by`` is called in error messages.
RESTORE_BEST_WEIGHTS_BY = "GnnTrainer custom_config['restore_best_weights_by']"


def monitor_problem(spec: Any, what: str = RESTORE_BEST_WEIGHTS_BY) -> Optional[str]:
  """What is wrong with a validation metric to select by, or None when it is valid.

  ``restore_best_weights_by`` and GnnTuner's objective are ``min:val_<m>``,
  ``max:val_<m>`` or a bare ``val_<m>`` naming a loss or an error (lowest is
  best). ``what`` names the parameter in the message.
  """
  mode, _, name = spec.rpartition(":") if isinstance(spec, str) else ("", "", "")
  if not name.startswith("val_") or len(name) == len("val_") or mode not in ("", "min", "max"):
    return (f"{what} must be a validation metric "
            f"as history.json names it, e.g. 'val_loss' or 'max:val_auc'; got {spec!r}.")
  if not mode and not any(word in name for word in ("loss", "error", "crossentropy")):
    return (f"{what}={spec!r}: say whether "
            f"higher or lower is better: 'max:{name}' or 'min:{name}'.")
  return None


def _monitor(v: Any) -> bool:
  return monitor_problem(v) is None


_SERVICE_ADDRESS = re.compile(r"^(grpc://)?[A-Za-z0-9_.\-]+:\d{1,5}$")


@dataclasses.dataclass(frozen=True)
class Key:
  """Declaration of one ``custom_config`` key."""
  default: Any
  check: Callable[[Any], bool]
  expected: str
  doc: str


#: Marks a CustomConfig field as a ``custom_config`` key (dataclass field metadata).
_METADATA = "custom_config"


def _key(default: Any, check: Callable[[Any], bool], expected: str, doc: str) -> Any:
  """Declares a ``custom_config`` key: a CustomConfig field with its check and doc."""
  return dataclasses.field(default=default, metadata={
      _METADATA: Key(default, check, expected, doc)})


@dataclasses.dataclass(frozen=True)
class CustomConfig:
  """Every ``custom_config`` key: its value (the default when not given).

  ``trainer.config.TrainerConfig`` extends it with what ``train_args``,
  ``eval_args`` and the graph parameters say.
  """
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
  deduplicate_batches: str = _key(
      "auto", _one_of("auto", "always", "never"), "one of 'auto', 'always', 'never'",
      'Sampled in memory around seeds, in one process: `"always"`: each training step is one '
      'graph in which a node reached from several seeds is one node, its neighbours drawn '
      'once for the batch (each seed\'s sampled tree follows the same law); `"never"`: one '
      'copy of every subgraph. `"auto"`: deduplicated where that leaves at most 90 % of the '
      'nodes and edges on a few probe batches and the model computes the same seed states on '
      'both kinds of batch with every edge sampled (messages toward the seeds). Validation, '
      'evaluation and serving read each seed\'s own subgraph. Not for time-aware sampling or '
      'link prediction. See [the graph in memory](in_memory.md).')
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
      '(lowest). A name the model does not log fails the run at the first validation. '
      'Link prediction in memory also logs, when named here, `val_retrieval_mrr` and '
      '`val_retrieval_hits@20` (`@50`, `@100`) after every validation: the validation '
      'positives ranked against every node as `retrieval_splits` ranks (see '
      '`ranking_validation_queries`), e.g. `"max:val_retrieval_mrr"` to export the epoch '
      'that ranks best.')
  ranking_validation_queries: int = _key(
      2000, lambda v: _is_int(v) and v >= 1, "an int >= 1",
      'With `restore_best_weights_by` naming `val_retrieval_*`: validation positives ranked '
      'after each epoch (drawn once, seeded by `seed`; all of them if fewer). Each costs one '
      'embedding of its source; every target node is embedded once per epoch.')
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
  serve_by_node_id: bool = _key(
      False, _is_bool, "a bool",
      'On the graph in memory (node tasks): the export also serves node ids. It holds the '
      'graph (ids, features, edges) and the training\'s sampling plan, and its signatures '
      '`serve_node_ids` / `serve_node_ids_as_of` sample each node\'s subgraph inside the '
      'model and answer as `serving_default` and `embeddings` do, with a `status` per row '
      '(docs/inference.md, "Serving by node id"). Strategies: uniform, top_k, '
      'uniform_before, latest.')
  serve_by_node_id_budget_mb: int = _key(
      4096, _pos_int, "an int > 0",
      'With `serve_by_node_id`: the most MiB of graph arrays the export may hold; a larger '
      'graph is refused before training.')
  refresh_only: bool = _key(
      False, _is_bool, "a bool",
      'With `base_model`: no training. The model `model_fn` builds on this execution\'s graph '
      'takes the base model\'s weights, is evaluated once on the `eval_args` splits and '
      'exported; with `serve_by_node_id` it serves this graph\'s snapshot. The way to give a '
      'pushed model fresh tables without retraining (docs/inference.md, "Refreshing the '
      'snapshot"): MLMD records the new Model with both the base Model and the new '
      'GraphSchema as its inputs.')
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
      '`tf.keras.utils.set_random_seed` for reproducible runs, while GnnTrainer trains: '
      'Python\'s, numpy\'s and TensorFlow\'s global seeds are given back as they were '
      'after it.')
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

#: Every key ``custom_config`` accepts, with its default, check and meaning
#: (derived from :class:`CustomConfig`).
CUSTOM_CONFIG_KEYS: Mapping[str, Key] = {
    f.name: f.metadata[_METADATA] for f in dataclasses.fields(CustomConfig)
    if _METADATA in f.metadata}


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
