"""TrainingInputs -> ``tensorflow_gnn.runner.run`` -> a staged export and a TrainedModel.

No TFX here: the executor resolves artifacts into a frozen
:class:`TrainingInputs` and calls :func:`train_and_export`; tests can call it
directly. The input pipeline (:func:`dataset_provider`) and the callbacks that
guard numerics, record the history and back up for resume live here too.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any, Optional, Sequence

from absl import logging
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

from gnn_trainer_component.trainer import config as config_lib
from gnn_trainer_component.trainer import module_contract
from gnn_trainer_component.trainer import export
from gnn_trainer_component.trainer import validation


class TrainingError(RuntimeError):
  """Training failed in a way the user must fix (e.g. a non-finite loss)."""


@dataclasses.dataclass(frozen=True)
class TrainingInputs:
  """Everything one training run reads, resolved from the execution's artifacts.

  Built once by the executor (as TFX's ``FnArgs`` is for the stock Trainer);
  tests and benchmarks build it directly.

  Attributes:
    cfg: The validated configuration.
    user_module: The validated user module (hparams bound).
    graph_schema: The GraphSchema that parses the training examples.
    train_files, eval_files: TFRecord files of serialized graph tf.Examples.
    train_compression, eval_compression: "GZIP" or None.
    model_run_dir: Where TensorBoard logs and checkpoints go (ModelRun).
    staging_dir: Where the SavedModel is written before publish.
    resume_dir: Where the training state is backed up (every
      ``checkpoint_every_n_steps`` steps, or each epoch); a backup from an
      earlier attempt is resumed from. The caller deletes it after publishing.
    base_model_path: Optional SavedModel to warm-start from.
    raw_parser: Optional layer parsing serialized *raw* examples into a
      GraphTensor of ``graph_schema``'s spec (Transform applied); then
      ``serving_default`` takes raw examples and a second signature
      ``transformed_examples`` takes training-format ones.
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


#: Prefix of the assertion raised in the input pipeline on a NaN/inf feature value.
NONFINITE_INPUT = "GnnTrainer: non-finite input"
_NONFINITE_INPUT_RE = re.compile(
    re.escape(NONFINITE_INPUT) + r" in (?P<what>[^\]]*)\] \[file:\] \[(?P<file>[^\]]*)\] "
    r"\[record:\] \[(?P<record>\d+)\]")


def _float_features(gtspec: tfgnn.GraphTensorSpec) -> list[tuple[str, str, str, str]]:
  """(piece kind, set name, feature name, description) of every float feature."""
  out = [("context", "", name, f"feature 'context/{name}' of the context")
         for name, spec in sorted(gtspec.context_spec.features_spec.items())
         if spec.dtype.is_floating]
  for kind, prefix, label, pieces in (
      ("nodes", "nodes", "node set", gtspec.node_sets_spec),
      ("edges", "edges", "edge set", gtspec.edge_sets_spec)):
    for set_name, piece in sorted(pieces.items()):
      out += [(kind, set_name, name, f"feature '{prefix}/{set_name}.{name}' of {label} '{set_name}'")
              for name, spec in sorted(piece.features_spec.items()) if spec.dtype.is_floating]
  return out


def _feature(graph: tfgnn.GraphTensor, kind: str, set_name: str, name: str):
  if kind == "context":
    return graph.context[name]
  return (graph.node_sets if kind == "nodes" else graph.edge_sets)[set_name][name]


def dataset_provider(files: Sequence[str], compression: Optional[str],
                     gtspec: tfgnn.GraphTensorSpec, *, shuffle: bool,
                     shuffle_buffer_size: int = 0, what: str = "data",
                     check_finite: bool = True) -> runner.DatasetProvider:
  """A provider of the examples in TFRecord files (GZIP or not), checked for NaN/inf.

  ``runner.TFRecordDatasetProvider`` cannot read GZIP, which is what ExampleGen
  writes, so this is ``SimpleDatasetProvider`` with a compression-aware reader.
  With ``check_finite`` each record is parsed with ``gtspec`` right after
  reading (the runner then only checks the spec) and its float features are
  asserted finite: the first NaN/inf stops training with an error naming
  ``what``, the file, the record index and the feature (see
  :func:`nonfinite_input_error`). Without it the provider yields the serialized
  records and the runner parses them in batches
  (``custom_config['check_finite_inputs']``).
  """
  float_features = _float_features(gtspec)

  # Plain TF code without Python control flow on tensors: no AutoGraph needed.
  @tf.autograph.experimental.do_not_convert
  def interleave_fn(filename):

    @tf.autograph.experimental.do_not_convert
    def parse_and_check(index, serialized):
      graph = tfgnn.parse_single_example(gtspec, serialized, validate=True)
      for kind, set_name, name, description in float_features:
        value = _feature(graph, kind, set_name, name)
        if isinstance(value, tf.RaggedTensor):
          value = value.flat_values
        tf.debugging.Assert(
            tf.reduce_all(tf.math.is_finite(value)),
            [f"{NONFINITE_INPUT} in {what}: {description}", "file:", filename,
             "record:", index], summarize=1)
      return graph

    records = tf.data.TFRecordDataset(filename, compression_type=compression or "")
    if not check_finite:
      return records
    return records.enumerate().map(parse_and_check, num_parallel_calls=tf.data.AUTOTUNE,
                                   deterministic=False)

  return runner.SimpleDatasetProvider(
      filenames=list(files), shuffle_filenames=shuffle, interleave_fn=interleave_fn,
      examples_shuffle_size=(shuffle_buffer_size or None) if shuffle else None)


def nonfinite_input_error(message: str) -> Optional[validation.InputDataError]:
  """The InputDataError for an input-pipeline NaN/inf assertion message, else None."""
  match = _NONFINITE_INPUT_RE.search(message.replace("\\'", "'"))
  if not match:
    return None
  return validation.InputDataError(
      f"{match['what']} has a non-finite value (NaN or inf) in record #{match['record']} "
      f"of {match['file']}. Fix or drop that example (e.g. impute the value before "
      "ExampleGen); nothing was published.")


class _RunRecorder(tf.keras.callbacks.Callback):
  """Records each epoch's logs, the step count and where training resumed.

  Logs one line per epoch (``GnnTrainer epoch 3/200: loss=... val_loss=...``).
  With a ``state_file`` (in the resume dir) the history survives a crash, so a
  retry reports (and plots) every epoch, and one that has nothing left to
  train still reports the final metrics.
  """

  def __init__(self, state_file: Optional[str] = None):
    super().__init__()
    self._state_file = state_file
    self.history: list[dict[str, float]] = []
    self.steps = 0
    self.resumed_from_step = 0
    self._started = False
    if state_file and tf.io.gfile.exists(state_file):
      with tf.io.gfile.GFile(state_file) as f:
        self.history = json.load(f)["history"]

  def metrics(self) -> tuple[dict[str, float], dict[str, float]]:
    """Train metrics of the last epoch, eval metrics of the last validation."""
    train = {k: v for k, v in (self.history[-1] if self.history else {}).items()
             if not k.startswith("val_")}
    validated = [logs for logs in self.history if any(k.startswith("val_") for k in logs)]
    evaluation = {k[len("val_"):]: v for k, v in (validated[-1] if validated else {}).items()
                  if k.startswith("val_")}
    return train, evaluation

  def _note_start(self) -> None:
    # After BackupAndRestore.on_train_begin restored model and optimizer state.
    if self._started:
      return
    self._started = True
    step = int(self.model.optimizer.iterations.numpy())
    if step:
      self.resumed_from_step = step
      logging.info("Resuming from checkpoint at step %d", step)

  def on_train_begin(self, logs=None):
    self._started = False

  def on_epoch_begin(self, epoch, logs=None):
    self._note_start()

  def on_train_end(self, logs=None):
    self._note_start()  # a resumed run with nothing left to train has no epoch
    self.steps = int(self.model.optimizer.iterations.numpy())

  def on_epoch_end(self, epoch, logs=None):
    logs = {k: float(v) for k, v in (logs or {}).items()}
    del self.history[epoch:]  # a resumed epoch replaces what a killed attempt recorded
    self.history.append(logs)
    logging.info("GnnTrainer epoch %d/%s: %s", epoch + 1, self.params.get("epochs", "?"),
                 " ".join(f"{k}={v:.4g}" for k, v in sorted(logs.items())))
    if self._state_file:
      # Write then rename: a crash never leaves a truncated state file.
      tf.io.gfile.makedirs(self._state_file.rsplit("/", 1)[0])
      tmp = f"{self._state_file}.tmp"
      with tf.io.gfile.GFile(tmp, "w") as f:
        json.dump({"history": self.history}, f)
      tf.io.gfile.rename(tmp, self._state_file, overwrite=True)


class _BackupAndRestore(tf.keras.callbacks.BackupAndRestore):
  """BackupAndRestore whose backup at an epoch's last batch waits for the epoch's end.

  Keras treats a backup taken at the last batch of an epoch as a finished
  epoch: a run killed after it but before that epoch's validation (and the
  run recorder's state write) would resume past the epoch and publish the
  previous epoch's metrics. Deferring that backup to ``on_epoch_end``, which
  runs after validation and after the recorder (earlier in the callback
  list), keeps the backup and the recorded metrics consistent.
  """

  def __init__(self, *args, steps_per_epoch: Optional[int] = None, **kwargs):
    super().__init__(*args, **kwargs)
    self._steps_per_epoch = steps_per_epoch
    self._deferred: Optional[tuple[int, int]] = None

  def _backup(self, epoch, batch=0):
    if (self._deferred is None and isinstance(self.save_freq, int)
        and self._steps_per_epoch and batch == self._steps_per_epoch - 1):
      self._deferred = (epoch, batch)
      return
    super()._backup(epoch=epoch, batch=batch)

  def on_epoch_end(self, epoch, logs=None):
    super().on_epoch_end(epoch, logs)
    if self._deferred is not None:
      deferred_epoch, batch = self._deferred
      super()._backup(epoch=deferred_epoch, batch=batch)
      self._deferred = None


class _NumericsGuard(tf.keras.callbacks.Callback):
  """Stops, or rolls back, on a non-finite or exploding loss or non-finite weights.

  The loss is checked after every step; all weights (trainable or not, e.g.
  moving statistics) after every epoch, so that a model whose weights went
  NaN while a fused kernel kept the loss finite is never published. It runs
  before BackupAndRestore, so a bad state is never backed up.

  With ``max_trials`` > 0 it keeps a copy of the model and optimizer
  variables in memory, taken after the first step and then every
  ``snapshot_every`` steps (None: every epoch) once the weights are checked
  finite. On trouble it restores that copy, resets the epoch's metrics and
  goes on with the next batch (the bad batch is skipped), at most
  ``max_trials`` times, as Model Garden's trainer does; then it fails.
  """

  def __init__(self, task_names: Sequence[str], *, max_trials: int = 0,
               loss_upper_bound: Optional[float] = None,
               snapshot_every: Optional[int] = None):
    super().__init__()
    self._task_names = list(task_names)
    self._max_trials = max_trials
    self._loss_upper_bound = loss_upper_bound
    self._snapshot_every = snapshot_every
    self._snapshot: Optional[list] = None
    self._snapshot_step = 0
    self.recoveries = 0

  def _step(self) -> int:
    return int(self.model.optimizer.iterations.numpy())

  def _variables(self) -> list:
    optimizer_variables = self.model.optimizer.variables
    if callable(optimizer_variables):  # a tf.keras.optimizers.legacy optimizer
      optimizer_variables = optimizer_variables()
    return list(self.model.weights) + list(optimizer_variables)

  def _nonfinite_weights(self) -> list[str]:
    return [w.name for w in self.model.weights
            if w.dtype.is_floating and not bool(tf.reduce_all(tf.math.is_finite(w)))]

  def _check_weights(self, snapshot: bool) -> None:
    """Trouble on non-finite weights; else, with ``snapshot``, keeps a copy to roll back to."""
    bad = self._nonfinite_weights()
    if bad:
      self._trouble(self._weights_message(bad))
    elif snapshot:
      self._snapshot = [v.numpy() for v in self._variables()]
      self._snapshot_step = self._step()

  def _weights_message(self, bad: list[str]) -> str:
    more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
    return (f"Non-finite weights after training step {self._step()}: variable "
            f"'{bad[0]}'{more} hold NaN/inf (the loss can stay finite while this happens, "
            "e.g. in moving statistics or when a fused kernel masks NaN).")

  def _trouble(self, problem: str) -> None:
    if self.recoveries < self._max_trials and self._snapshot is not None:
      self.recoveries += 1
      for variable, value in zip(self._variables(), self._snapshot):
        variable.assign(value)
      self.model.reset_metrics()
      logging.warning(
          "GnnTrainer: %s Rolled back to the state after step %d and continuing with the "
          "next batch (recovery %d of %d).", problem, self._snapshot_step,
          self.recoveries, self._max_trials)
      return
    if self._max_trials == 0:
      hint = ("Set custom_config['recovery_max_trials'] to roll back and skip a transient "
              "bad batch.")
    elif self._snapshot is None:
      hint = "No good state to roll back to yet (trouble before the first finished step)."
    else:
      hint = f"All {self._max_trials} recoveries (custom_config['recovery_max_trials']) are used up."
    raise TrainingError(
        f"{problem} Nothing was published. Check the input features for NaN/inf, lower "
        f"the learning rate, or add gradient clipping in optimizer_fn. {hint}")

  def on_train_batch_end(self, batch, logs=None):
    logs = logs or {}
    bad = {k: float(v) for k, v in logs.items()
           if k.endswith("loss") and v is not None and not math.isfinite(float(v))}
    step = self._step()
    if bad:
      tasks = [t for t in self._task_names if any(k.startswith(t) for k in bad)]
      self._trouble(
          f"Non-finite loss at training step {step} (task"
          f"{'s' if len(self._task_names) > 1 else ''} "
          f"{', '.join(tasks or self._task_names)}): {bad}.")
    elif (self._loss_upper_bound is not None and "loss" in logs
          and float(logs["loss"]) > self._loss_upper_bound):
      self._trouble(f"Exploding loss at training step {step}: {float(logs['loss']):.6g} > "
                    f"loss_upper_bound {self._loss_upper_bound}.")
    elif self._max_trials and (self._snapshot is None or (
        self._snapshot_every and step // self._snapshot_every >
        self._snapshot_step // self._snapshot_every)):
      self._check_weights(snapshot=True)

  def on_epoch_end(self, epoch, logs=None):
    self._check_weights(snapshot=bool(self._max_trials))


class _WarmStart(tf.keras.callbacks.Callback):
  """Loads a base model's weights into the new model before training.

  The base model is a SavedModel exported by GnnTrainer: its checkpoint holds
  the trained model as the last ``layer_with_weights-K`` of the serving model.
  Weights are restored object by object (same layer structure, same shapes),
  and every weight of the new model must be matched. BackupAndRestore runs
  after this callback, so a resumed run keeps its own progress.
  """

  def __init__(self, base_model_path: str):
    super().__init__()
    self._path = base_model_path

  def _fail(self, detail: str) -> TrainingError:
    return TrainingError(
        f"base_model at {self._path} does not match the model built by model_fn "
        f"({detail}). Warm start needs the same architecture (model_fn, task heads, "
        "hyperparameters); drop base_model to train from scratch.")

  def on_train_begin(self, logs=None):
    variables = f"{self._path}/variables/variables"
    try:
      keys = [name for name, _ in tf.train.list_variables(variables)]
    except (tf.errors.NotFoundError, ValueError) as e:
      raise self._fail(f"no SavedModel variables readable: {e}") from e
    indices = [int(k.split("/")[0].split("-")[1]) for k in keys
               if k.startswith("layer_with_weights-")]
    if not indices:
      raise self._fail("it has no weights")
    mirror = tf.Module()
    for i, layer in enumerate(l for l in self.model.layers if l.weights):
      setattr(mirror, f"layer_with_weights-{i}", layer)
    checkpoint = tf.train.Checkpoint(**{f"layer_with_weights-{max(indices)}": mirror})
    try:
      checkpoint.read(variables).expect_partial().assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.InvalidArgumentError) as e:
      raise self._fail(str(e).strip().splitlines()[0][:500]) from e
    logging.info("Warm start: loaded the weights of %s", self._path)


def _padding(cfg: config_lib.TrainerConfig, gtspec, train, valid):
  if cfg.padding == "none":
    return None, None
  kwargs = {}
  if cfg.min_nodes_per_component:
    kwargs["min_nodes_per_component"] = dict(cfg.min_nodes_per_component)
  cls = runner.FitOrSkipPadding if cfg.padding == "fit_or_skip" else runner.TightPadding
  return cls(gtspec, train, **kwargs), runner.TightPadding(gtspec, valid, **kwargs)


def train_and_export(inputs: TrainingInputs,
                     strategy: tf.distribute.Strategy) -> export.TrainedModel:
  """Runs ``runner.run`` with a ``KerasTrainer``; the export lands in ``inputs.staging_dir``.

  Args:
    inputs: What to train on, with what, and where to write.
    strategy: The distribution strategy (created before any other TF op).

  Returns:
    Metrics, history and the in-memory model, for :func:`export.publish`.

  Raises:
    TrainingError: on a non-finite loss or weights, or input the parser rejects.
    validation.InputDataError: on a NaN/inf input feature.
  """
  cfg, user_module, graph_schema = inputs.cfg, inputs.user_module, inputs.graph_schema
  if cfg.seed is not None:
    tf.keras.utils.set_random_seed(cfg.seed)
  gtspec = tfgnn.create_graph_spec_from_schema_pb(graph_schema)
  train = dataset_provider(inputs.train_files, inputs.train_compression, gtspec, shuffle=True,
                           shuffle_buffer_size=cfg.shuffle_buffer_size,
                           what=f"train_args splits {', '.join(cfg.train_splits)}",
                           check_finite=cfg.check_finite_inputs)
  valid = dataset_provider(inputs.eval_files, inputs.eval_compression, gtspec, shuffle=False,
                           what=f"eval_args splits {', '.join(cfg.eval_splits)}",
                           check_finite=cfg.check_finite_inputs)
  train_padding, valid_padding = _padding(cfg, gtspec, train, valid)

  task_names = list(user_module.tasks)
  backup_dir = inputs.resume_dir
  recorder = _RunRecorder(state_file=f"{backup_dir}/run_recorder.json")
  save_freq = cfg.checkpoint_every_n_steps
  guard = _NumericsGuard(
      task_names, max_trials=cfg.recovery_max_trials, loss_upper_bound=cfg.loss_upper_bound,
      snapshot_every=save_freq if isinstance(save_freq, int) else None)
  # Order matters: warm start; the guard (checks before anything is recorded
  # or backed up); the recorder (an epoch's metrics are saved before its
  # backup); the backup, whose on_train_begin restores a retry's state
  # (winning over the warm start) before the first epoch begins.
  callbacks = [_WarmStart(inputs.base_model_path)] if inputs.base_model_path else []
  callbacks += [
      guard,
      recorder,
      _BackupAndRestore(
          backup_dir=backup_dir,
          save_freq="epoch" if save_freq in ("epoch", "never") else save_freq,
          delete_checkpoint=False, steps_per_epoch=(
              cfg.steps_per_epoch // cfg.validation_per_epoch  # Keras epochs, as KerasTrainer
              if cfg.steps_per_epoch and cfg.validation_per_epoch else cfg.steps_per_epoch))]
  trainer = runner.KerasTrainer(
      strategy=strategy,
      model_dir=inputs.model_run_dir,
      steps_per_epoch=cfg.steps_per_epoch,
      validation_steps=cfg.eval_steps,
      validation_freq=None if cfg.validation_per_epoch else cfg.validation_freq,
      validation_per_epoch=cfg.validation_per_epoch,
      summarize_every_n_steps=cfg.summarize_every_n_steps,
      checkpoint_every_n_steps=cfg.checkpoint_every_n_steps,
      restore_best_weights=cfg.restore_best_weights,
      backup_and_restore=False,  # ours above: step-level and kept until publish
      callbacks=callbacks,
      verbose=2)
  exporter = export.ServingExporter(
      single_task_name=cfg.serving_output_name if user_module.single_task else None,
      label_defaults=export.label_defaults_example(
          graph_schema, export.context_label_features(user_module.tasks)),
      raw_parser=inputs.raw_parser)
  try:
    runner.run(
        train_ds_provider=train,
        valid_ds_provider=valid,
        model_fn=user_module.model_fn,
        optimizer_fn=user_module.optimizer_fn,
        trainer=trainer,
        task=user_module.runner_task,
        loss_weights=user_module.loss_weights,
        gtspec=gtspec,
        global_batch_size=cfg.global_batch_size,
        epochs=cfg.epochs,
        drop_remainder=cfg.drop_remainder,
        export_dirs=[inputs.staging_dir],
        model_exporters=[exporter],
        feature_processors=user_module.feature_processors_fn(gtspec),
        train_padding=train_padding,
        valid_padding=valid_padding,
        steps_per_execution=cfg.steps_per_execution)
  except tf.errors.InvalidArgumentError as e:
    input_error = nonfinite_input_error(e.message)
    if input_error is not None:
      raise input_error from e
    lines = [l.strip() for l in e.message.splitlines() if l.strip()]
    cause = next((l for l in lines if "label value" in l), None) or (
        [l for l in lines if not l.startswith(("Detected at node", "File ", "Graph execution"))]
        or lines)[-1]
    raise TrainingError(
        f"Training failed on the input data: {cause}\nTypical causes: a label outside "
        f"[0, num_classes) for tasks {task_names}, or examples that do not match the "
        "graph schema. Nothing was published.") from e

  train_metrics, eval_metrics = recorder.metrics()
  return export.TrainedModel(
      train_metrics=train_metrics, eval_metrics=eval_metrics, history=list(recorder.history),
      steps=recorder.steps, epochs=len(recorder.history), task_names=task_names,
      resumed_from_step=recorder.resumed_from_step, recoveries=guard.recoveries,
      output_names=exporter.output_names, training_model=exporter.training_model,
      parity_signature=(export.TRANSFORMED_SIGNATURE if inputs.raw_parser is not None
                        else "serving_default"))
