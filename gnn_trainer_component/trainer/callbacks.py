"""Keras callbacks of a GnnTrainer run: numerics guard, history, best weights, backup.

Order in ``model.fit`` (see ``training.train_and_export``): warm start; the
ranking validation (adds ``val_retrieval_*`` to an epoch's logs); the guard
(checks before anything is recorded or backed up); the recorder and the
best-weights keeper (an epoch's metrics and best weights are saved with its
backup); the backup, whose ``on_train_begin`` restores a retry's state
(winning over the warm start) before the first epoch begins.
"""

from __future__ import annotations

import io
import json
import math
import time
from typing import Callable, Mapping, Optional, Sequence

from absl import logging
import numpy as np
import tensorflow as tf

from gnn_trainer_component import errors
from gnn_trainer_component import outputs
from gnn_trainer_component.trainer import config as config_lib
from gnn_trainer_component.trainer import publish


class TrainingError(errors.GnnError, RuntimeError):
  """Training failed in a way the user must fix (e.g. a non-finite loss)."""


def _optimizer_step(model: tf.keras.Model) -> int:
  """The training step (optimizer iterations; restored by a backup)."""
  return int(model.optimizer.iterations.numpy())


def coordinated() -> bool:
  """Whether training runs under ParameterServerStrategy (a coordinator).

  Keras refuses batch-level callbacks there (the coordinator gets no per-step
  logs), so ours then act at epoch ends only.
  """
  return bool(getattr(tf.distribute.get_strategy(), "_should_use_with_coordinator", False))


class _EpochLevelUnderCoordinator:
  """Mixin: no batch hooks under ParameterServerStrategy (see :func:`coordinated`)."""

  def _implements_train_batch_hooks(self):
    return not coordinated() and super()._implements_train_batch_hooks()


class _TaskNamedLogs:
  """Mixin for a Keras callback: logs named by task (``topic_loss``), not by output layer.

  With several tasks Keras prefixes each metric with its output layer's name
  (``classification_logits_loss``); users see and name them by the task's
  key in ``tasks`` (:func:`publish.metric_prefixes`).
  """

  def _by_task(self, logs) -> dict:
    if getattr(self, "_prefixes", None) is None:
      self._prefixes = publish.metric_prefixes(self.model)
    return publish.by_task(logs or {}, self._prefixes)


class RunRecorder(_EpochLevelUnderCoordinator, _TaskNamedLogs, tf.keras.callbacks.Callback):
  """Records each epoch's logs, the step count and where training resumed.

  Logs one line per epoch (``GnnTrainer epoch 3/200: loss=... val_loss=...``)
  and one when the first training step is done (``GnnTrainer first step done
  21.3 s after training began``: model build and tracing), both with absl.
  With a ``state_file`` (in the resume dir, written with each backup) the
  history survives a crash, so a retry reports (and plots) every epoch, and one
  that has nothing left to train still reports the final metrics.
  """

  def __init__(self, state_file: Optional[str] = None):
    super().__init__()
    self._state_file = state_file
    self.history: list[dict[str, float]] = []
    self.steps = 0
    self.resumed_from_step = 0
    #: Seconds from training start to the end of the first step (None: no step yet).
    self.first_step_s: Optional[float] = None
    self._started = False
    self._train_began = 0.0
    if state_file and tf.io.gfile.exists(state_file):
      with tf.io.gfile.GFile(state_file) as f:
        self.history = json.load(f)["history"]

  def metrics(self, epoch: Optional[int] = None) -> tuple[dict[str, float], dict[str, float]]:
    """Train metrics and eval metrics of ``epoch`` (None: the last epoch / validation)."""
    history = self.history if epoch is None else self.history[:epoch + 1]
    train = {k: v for k, v in (history[-1] if history else {}).items()
             if not k.startswith("val_")}
    validated = [logs for logs in history if any(k.startswith("val_") for k in logs)]
    evaluation = {k[len("val_"):]: v for k, v in (validated[-1] if validated else {}).items()
                  if k.startswith("val_")}
    return train, evaluation

  def _note_start(self) -> None:
    # After BackupAndRestore.on_train_begin restored model and optimizer state.
    if self._started:
      return
    self._started = True
    step = _optimizer_step(self.model)
    if step:
      self.resumed_from_step = step
      logging.info("Resuming from checkpoint at step %d", step)

  def on_train_begin(self, logs=None):
    self._started = False
    self._train_began = time.monotonic()
    self.first_step_s = None

  def on_epoch_begin(self, epoch, logs=None):
    self._note_start()

  def on_train_batch_end(self, batch, logs=None):
    if self.first_step_s is None:
      self.first_step_s = time.monotonic() - self._train_began
      logging.info("GnnTrainer first step done %.1f s after training began "
                   "(model build and tracing)", self.first_step_s)

  def on_train_end(self, logs=None):
    self._note_start()  # a resumed run with nothing left to train has no epoch
    self.steps = _optimizer_step(self.model)

  def on_epoch_end(self, epoch, logs=None):
    logs = {k: float(v) for k, v in self._by_task(logs).items()}
    del self.history[epoch:]  # a resumed epoch replaces what a killed attempt recorded
    self.history.append(logs)
    logging.info("GnnTrainer epoch %d/%s: %s", epoch + 1, self.params.get("epochs", "?"),
                 " ".join(f"{k}={v:.4g}" for k, v in sorted(logs.items())))

  def persist(self) -> None:
    """Saves the history (called right before each backup)."""
    if self._state_file:
      outputs.write_atomically(self._state_file, json.dumps({"history": self.history}).encode())


class Backup(tf.keras.callbacks.BackupAndRestore):
  """Keras' BackupAndRestore on a cadence that costs little when epochs are tiny.

  Backs up every ``every_n_steps`` steps if set; else at the first epoch end
  (or, with a known epoch length, step end) at least ``every_seconds`` after
  the previous backup (0: every epoch); and always after the last epoch, so a
  retry of an attempt killed while exporting trains nothing. Right before each
  backup the ``before_backup`` callables run (they save the run history and
  the best weights with it), right after it the ``after_backup`` ones. The
  backup is kept after training (the executor deletes it after publishing).

  A backup due at an epoch's last step waits for the epoch's end: Keras treats
  a backup taken at the last batch as a finished epoch, so a run killed after
  it but before that epoch's validation (and the history write) would resume
  past the epoch and publish the previous epoch's metrics.
  """

  def __init__(self, backup_dir: str, *, steps_per_epoch: Optional[int],
               every_n_steps: Optional[int] = None, every_seconds: float = 0,
               before_backup: Sequence[Callable[[], None]] = (),
               after_backup: Sequence[Callable[[], None]] = ()):
    # Keras resumes inside an epoch only in its "int" mode, which needs the
    # epoch length; the int is a placeholder: _due() decides.
    super().__init__(backup_dir=backup_dir,
                     save_freq=(every_n_steps or 1) if steps_per_epoch else "epoch",
                     delete_checkpoint=False)
    self._steps_per_epoch = steps_per_epoch
    self._every_n_steps = every_n_steps
    self._every_seconds = every_seconds
    self._before_backup = list(before_backup)
    self._after_backup = list(after_backup)
    self._last_time = time.monotonic()
    self._last_step = 0
    self._pending = False
    self.backups = 0

  def _due(self) -> bool:
    if self._every_n_steps:
      return _optimizer_step(self.model) - self._last_step >= self._every_n_steps
    return time.monotonic() - self._last_time >= self._every_seconds

  def on_train_begin(self, logs=None):
    super().on_train_begin(logs)
    # After a restore: counts from the resume point.
    self._last_step = _optimizer_step(self.model)
    self._last_time = time.monotonic()

  def _implements_train_batch_hooks(self):
    return not coordinated() and bool(self._steps_per_epoch) and (
        bool(self._every_n_steps) or self._every_seconds > 0)

  def on_train_batch_begin(self, batch, logs=None):
    # Keras writes the batch into the backed-up state before every step (a
    # variable write, ~0.2 ms); here it is written right before each backup,
    # which is all a restore reads (no save-before-preemption here).
    del batch, logs

  def on_train_batch_end(self, batch, logs=None):
    if not self._implements_train_batch_hooks():
      return
    self._training_state.backup_if_preempted()
    if self._due():
      if batch == self._steps_per_epoch - 1:
        self._pending = True  # at the epoch's end, after validation
      else:
        # The last step run (with steps_per_execution > 1, Keras noted the first). Keras has
        # no public API for the batch a backup records.
        self._training_state._ckpt_saved_batch.assign(batch)
        self._backup(epoch=self._current_epoch, batch=batch)

  def on_epoch_end(self, epoch, logs=None):
    last = epoch + 1 >= self.params.get("epochs", 0)
    if self._pending or last or self._due():
      if self._steps_per_epoch:
        self._training_state._ckpt_saved_batch.assign(self._steps_per_epoch - 1)
      self._backup(epoch=epoch)

  def _backup(self, epoch, batch=0):
    for fn in self._before_backup:
      fn()
    super()._backup(epoch=epoch, batch=batch)
    for fn in self._after_backup:
      fn()
    self._pending = False
    self._last_step = _optimizer_step(self.model)
    self._last_time = time.monotonic()
    self.backups += 1


class TensorBoard(tf.keras.callbacks.TensorBoard):
  """Keras' TensorBoard callback whose step summaries cost nothing between the steps written.

  Keras' callback calls ``tf.summary.scalar`` for every log after every step,
  each evaluating its ``record_if`` (``step % update_freq == 0``) in eager:
  about 2 ms a step for four scalars, a quarter of a small model's step. Here
  the step is counted in Python and Keras' step hook runs only at the steps
  it records (multiples of ``update_freq`` of Keras' step counter, as before)
  and at the first step (the model graph), so the event files hold what they
  held before.
  """

  def set_model(self, model):  # once per fit: Keras writes the model graph at its first step
    super().set_model(model)
    self._first_step_done = False
    self._first_of_epoch = None

  def on_epoch_begin(self, epoch, logs=None):
    super().on_epoch_begin(epoch, logs)
    self._first_of_epoch = None  # (Keras' step counter, batch) at the epoch's first step end

  def on_train_batch_end(self, batch, logs=None):
    first = self._first_of_epoch
    if first is None:  # one host read per epoch (a resumed epoch starts mid-way)
      first = self._first_of_epoch = (int(self._train_step.numpy()), batch)
      if not self._first_step_done:
        self._first_step_done = True
        super().on_train_batch_end(batch, logs)
        return
    step = first[0] + batch - first[1]
    if self.update_freq != "epoch" and step % self.update_freq == 0:
      super().on_train_batch_end(batch, logs)


class RankingValidation(tf.keras.callbacks.Callback):
  """Adds ``val_retrieval_*`` to the logs of each epoch that validated: ranking by the model now.

  ``rank`` takes the model being trained and returns ``retrieval_*`` metrics (GnnTrainer
  ranks the validation positives with the weights of the moment). It runs before the
  callbacks that keep the history and the best weights, which read the logs it extends.
  """

  def __init__(self, rank: Callable[[tf.keras.Model], Mapping[str, float]]):
    super().__init__()
    self._rank = rank

  def on_epoch_end(self, epoch, logs=None):
    if logs is None or not any(key.startswith("val_") for key in logs):
      return  # no validation after this epoch (validation_freq)
    start = time.perf_counter()
    ranked = {f"val_{key}": float(value) for key, value in self._rank(self.model).items()
              if not key.endswith("queries")}
    logs.update(ranked)
    logging.info("GnnTrainer: epoch %d ranks %s (%.1f s)", epoch + 1, ranked,
                 time.perf_counter() - start)


class BestWeights(_TaskNamedLogs, tf.keras.callbacks.Callback):
  """Keeps the weights of the epoch with the best ``monitor``; sets them at the end.

  ``mode`` ``"min"``: the lowest value is best (losses), ``"max"``: the
  highest (AUC, accuracy).

  Replaces TF-GNN's ``restore_best_weights`` (a ModelCheckpoint written to disk
  at every improvement, then loaded) with a copy in memory. :meth:`persist`
  (run right before each backup) writes that copy next to the backup, named
  by the optimizer step of the backup, so a resumed attempt continues with
  exactly the best weights of the state it resumes from.
  """

  def __init__(self, state_dir: str, monitor: str = "val_loss", mode: str = "min"):
    super().__init__()
    if mode not in ("min", "max"):
      raise ValueError(f"BestWeights mode must be 'min' or 'max', got {mode!r}.")
    self._dir = state_dir
    self._monitor = monitor
    self._sign = 1.0 if mode == "min" else -1.0  # compares sign * value, lower is better
    self._weights: Optional[list] = None
    self.best = self._sign * math.inf
    self.best_epoch: Optional[int] = None
    self._loaded = False
    self._variables: Optional[list] = None

  def _file(self, step: int) -> str:
    return f"{self._dir}/best_weights-step{step}.npz"

  def _load(self) -> None:
    # After BackupAndRestore.on_train_begin restored the optimizer step.
    if self._loaded:
      return
    self._loaded = True
    step = _optimizer_step(self.model)
    path = self._file(step)
    if step and tf.io.gfile.exists(path):
      with tf.io.gfile.GFile(path, "rb") as f:
        saved = np.load(io.BytesIO(f.read()))
        self._weights = [saved[f"w{i}"] for i in range(len(saved.files) - 2)]
        self.best, self.best_epoch = float(saved["best"]), int(saved["best_epoch"])
      logging.info("GnnTrainer: best weights so far (epoch %d, %s=%.6g) restored from %s",
                   self.best_epoch + 1, self._monitor, self.best, path)

  def on_epoch_begin(self, epoch, logs=None):
    self._load()

  def on_epoch_end(self, epoch, logs=None):
    logs = self._by_task(logs)
    validated = sorted(k for k in logs if k.startswith("val_"))
    if validated and self._monitor not in logs:
      raise config_lib.ConfigError(
          f"GnnTrainer custom_config['restore_best_weights_by']: this model logs no "
          f"{self._monitor!r}; its validation metrics are {validated}. Nothing was published.")
    value = logs.get(self._monitor)
    if (value is not None and math.isfinite(float(value))
        and self._sign * float(value) < self._sign * self.best):
      self.best, self.best_epoch = float(value), epoch
      if self._variables is None:  # model.weights walks every layer: once
        self._variables = self.model.weights
      self._weights = [np.array(v.numpy(), copy=True) for v in self._variables]

  def persist(self) -> None:
    """Writes the best weights for the backup about to be taken."""
    if self._weights is None:
      return
    buffer = io.BytesIO()
    np.savez(buffer, best=self.best, best_epoch=self.best_epoch,
             **{f"w{i}": w for i, w in enumerate(self._weights)})
    outputs.write_atomically(self._file(_optimizer_step(self.model)), buffer.getvalue())

  def drop_older(self) -> None:
    """After the backup is written: removes the files of earlier backups."""
    current = self._file(_optimizer_step(self.model))
    for path in tf.io.gfile.glob(f"{self._dir}/best_weights-step*.npz"):
      if path != current:
        tf.io.gfile.remove(path)

  def on_train_end(self, logs=None):
    self._load()  # a resumed run with nothing left to train
    if self._weights is None:
      logging.warning("GnnTrainer restore_best_weights: no finite %s was logged; "
                      "exporting the last weights.", self._monitor)
      return
    self.model.set_weights(self._weights)
    logging.info("GnnTrainer: restored the best weights (epoch %d, %s=%.6g)",
                 self.best_epoch + 1, self._monitor, self.best)


class NumericsGuard(_EpochLevelUnderCoordinator, _TaskNamedLogs,
                    tf.keras.callbacks.Callback):
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
    self._finite = None
    self.recoveries = 0

  def _variables(self) -> list:
    optimizer_variables = self.model.optimizer.variables
    if callable(optimizer_variables):  # a tf.keras.optimizers.legacy optimizer
      optimizer_variables = optimizer_variables()
    return list(self.model.weights) + list(optimizer_variables)

  def _nonfinite_weights(self) -> list[str]:
    if self._finite is None:  # one call for all weights: per-weight eager ops cost ms
      weights = [w for w in self.model.weights if w.dtype.is_floating]
      check = tf.function(lambda: tf.stack(
          [tf.reduce_all(tf.math.is_finite(w)) for w in weights]), autograph=False)
      self._finite = weights, check
    weights, check = self._finite
    if not weights:
      return []
    return [w.name for w, finite in zip(weights, check().numpy(), strict=True) if not finite]

  def _check_weights(self, snapshot: bool) -> None:
    """Trouble on non-finite weights; else, with ``snapshot``, keeps a copy to roll back to."""
    bad = self._nonfinite_weights()
    if bad:
      self._trouble(self._weights_message(bad))
    elif snapshot:
      self._snapshot = [v.numpy() for v in self._variables()]
      self._snapshot_step = _optimizer_step(self.model)

  def _weights_message(self, bad: list[str]) -> str:
    more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
    step = _optimizer_step(self.model)
    return (f"Non-finite weights after training step {step}: variable "
            f"'{bad[0]}'{more} hold NaN/inf (the loss can stay finite while this happens, "
            "e.g. in moving statistics or when a fused kernel masks NaN).")

  def _trouble(self, problem: str) -> None:
    if self.recoveries < self._max_trials and self._snapshot is not None:
      self.recoveries += 1
      for variable, value in zip(self._variables(), self._snapshot, strict=False):
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
      hint = (f"All {self._max_trials} recoveries (custom_config['recovery_max_trials']) are "
              "used up.")
    raise TrainingError(
        f"{problem} Nothing was published. Check the input features for NaN/inf, lower "
        f"the learning rate, or add gradient clipping in optimizer_fn. {hint}")

  def on_train_batch_end(self, batch, logs=None):
    logs = logs or {}
    bad = {k: float(v) for k, v in logs.items()  # (a fused step logs validation too)
           if k.endswith("loss") and not k.startswith("val_") and v is not None
           and not math.isfinite(float(v))}
    # The step is read from the optimizer only when it is used (a host read every
    # step costs a tenth of a millisecond, a few percent of a small model's step).
    if bad:
      bad = self._by_task(bad)
      tasks = [t for t in self._task_names if any(k.startswith(t) for k in bad)]
      self._trouble(
          f"Non-finite loss at training step {_optimizer_step(self.model)} (task"
          f"{'s' if len(self._task_names) > 1 else ''} "
          f"{', '.join(tasks or self._task_names)}): {bad}.")
    elif (self._loss_upper_bound is not None and "loss" in logs
          and float(logs["loss"]) > self._loss_upper_bound):
      self._trouble(f"Exploding loss at training step {_optimizer_step(self.model)}: "
                    f"{float(logs['loss']):.6g} > loss_upper_bound {self._loss_upper_bound}.")
    elif self._max_trials and (self._snapshot is None or (
        self._snapshot_every and _optimizer_step(self.model) // self._snapshot_every >
        self._snapshot_step // self._snapshot_every)):
      self._check_weights(snapshot=True)

  def on_epoch_end(self, epoch, logs=None):
    self._check_weights(snapshot=bool(self._max_trials))


class WarmStart(tf.keras.callbacks.Callback):
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
    self.load_into(self.model)

  def load_into(self, model: tf.keras.Model) -> None:
    """Loads the base model's weights into ``model`` (built by ``model_fn``, compiled).

    Raises:
      TrainingError: the base model's weights do not match ``model``'s.
    """
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
    weighted = (layer for layer in model.layers if layer.weights)
    for i, layer in enumerate(weighted):
      setattr(mirror, f"layer_with_weights-{i}", layer)
    checkpoint = tf.train.Checkpoint(**{f"layer_with_weights-{max(indices)}": mirror})
    try:
      checkpoint.read(variables).expect_partial().assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.InvalidArgumentError) as e:
      raise self._fail(str(e).strip().splitlines()[0][:500]) from e
    logging.info("Warm start: loaded the weights of %s", self._path)
