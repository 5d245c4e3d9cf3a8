"""The Keras trainer of ``runner.run`` and the callbacks GnnTrainer trains with.

:class:`GnnKerasTrainer` is TF-GNN's ``runner.KerasTrainer`` that can keep
finished batches in memory (``input_data``'s stage 2), fuse an epoch's
validation into its one training step (:func:`fuse_validation`) and compile
with XLA;
:func:`make_trainer` wires it with GnnTrainer's callbacks (``callbacks``:
numerics guard, run recorder, best weights, backups, warm start, TensorBoard)
from one :class:`~gnn_trainer_component.trainer.config.TrainerConfig`.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Mapping, Optional

from absl import logging
import tensorflow as tf
from tensorflow_gnn import runner

from gnn_trainer_component.trainer import callbacks as callbacks_lib
from gnn_trainer_component.trainer import config as config_lib
from gnn_trainer_component.trainer import input_data
from gnn_trainer_component.trainer import publish


class _FixedDatasetProvider(runner.DatasetProvider):
  def __init__(self, dataset: tf.data.Dataset):
    self._dataset = dataset

  def get_dataset(self, context: tf.distribute.InputContext) -> tf.data.Dataset:
    del context  # one input pipeline (checked by the caller)
    return self._dataset


class GnnKerasTrainer(runner.KerasTrainer):
  """``runner.KerasTrainer`` that can keep finished batches in memory.

  With ``cache_batches`` (cache in memory, one worker), the finished batches
  are kept (stage 2 in the module doc): the providers ``runner.run`` hands to
  ``train`` are turned into datasets here, once, with the default
  ``InputContext``.

  Attributes:
    cached: What was cached: ``{"validation": bool, "training": bool}``.
  """

  def __init__(self, *args, cache_batches: bool = False, train_is_one_batch: bool = False,
               jit_compile: bool = False, autograph: bool = True, fused_epochs: bool = False,
               **kwargs):
    super().__init__(*args, **kwargs)
    self._cache_batches = cache_batches
    self._train_is_one_batch = train_is_one_batch
    self._jit_compile = jit_compile
    self._autograph = autograph
    self._fused_epochs = fused_epochs
    self.cached = {"validation": False, "training": False}

  def train(self, model_fn, train_ds_provider, *, epochs=1, valid_ds_provider=None):
    if self._cache_batches:
      train_ds_provider, valid_ds_provider = self._cached(train_ds_provider, valid_ds_provider)
    validation_batch = self._fusable(valid_ds_provider)
    if validation_batch is not None:
      valid_ds_provider = None  # validated inside the training step
      unfused_model_fn = model_fn

      def model_fn():
        return fuse_validation(unfused_model_fn(), validation_batch)
    if self._jit_compile:
      compiled_model_fn = model_fn

      def model_fn():  # runner.run compiles the model without jit_compile
        model = compiled_model_fn()
        strings = input_data.string_inputs(model)
        if strings:
          raise config_lib.ConfigError(
              "GnnTrainer custom_config jit_compile=true: XLA cannot take string inputs, "
              f"and the model gets {', '.join(strings)}. Turn those into numbers in "
              "feature_processors (or Transform), drop them, or set jit_compile to false.")
        model.jit_compile = True
        return model

    model_fn = _with_optimizer_built(model_fn)
    if not self._autograph:
      model_fn = _without_autograph(model_fn)

    if validation_batch is None:
      return super().train(model_fn, train_ds_provider, epochs=epochs,
                           valid_ds_provider=valid_ds_provider)
    # KerasTrainer validates only with a validation dataset; here the step does. One
    # step per epoch, declared: Keras then repeats the batch with one iterator instead
    # of a new one every epoch.
    declared = self._validation_freq, self._steps_per_epoch
    self._validation_freq, self._steps_per_epoch = None, 1
    try:
      return super().train(model_fn, train_ds_provider, epochs=epochs, valid_ds_provider=None)
    finally:
      self._validation_freq, self._steps_per_epoch = declared

  def _fusable(self, valid_ds_provider) -> Optional[tuple]:
    """The one validation batch, when each epoch can be one call (else None).

    That is: ``fused_epochs``, training is one cached batch per epoch (so an
    epoch is one step), validation one batch, every epoch validated.
    """
    if not (self._fused_epochs and self.cached["training"] and self.cached["validation"]
            and self._steps_per_epoch is None and self._validation_steps is None
            and self._validation_per_epoch is None and self._validation_freq in (None, 1)
            and self._strategy.num_replicas_in_sync == 1):
      return None
    batches = list(valid_ds_provider.get_dataset(tf.distribute.InputContext()).take(2))
    if len(batches) != 1:
      return None
    logging.info("GnnTrainer: one call per epoch, its validation inside the training step "
                 "(custom_config fused_epochs)")
    return batches[0]

  def _cached(self, train_ds_provider, valid_ds_provider):
    """Providers of the cached finished batches where that is safe."""
    start = time.perf_counter()
    context = tf.distribute.InputContext()
    deterministic = None
    if valid_ds_provider is not None:
      valid = valid_ds_provider.get_dataset(context)
      deterministic = input_data.is_deterministic(valid)
      if deterministic:
        valid_ds_provider = _FixedDatasetProvider(valid.cache())
        self.cached["validation"] = True
    # Checked on validation batches (file order; training's are shuffled).
    if self._train_is_one_batch and deterministic:
      train = train_ds_provider.get_dataset(context)
      train_ds_provider = _FixedDatasetProvider(train.take(1).cache())
      self.cached["training"] = True
    if deterministic is None and valid_ds_provider is not None:
      logging.warning("GnnTrainer cache: could not tell whether preprocessing is "
                      "deterministic; finished batches are not cached.")
    if deterministic is False:
      logging.warning(
          "GnnTrainer cache: preprocessing (feature processors / Task.preprocess) gave "
          "two different results on the same batch, so it is random: finished batches "
          "are not cached, only parsed examples.")
    logging.info("GnnTrainer cache: finished batches cached for %s (checked in %.1f s)",
                 [k for k, v in self.cached.items() if v] or "nothing",
                 time.perf_counter() - start)
    return train_ds_provider, valid_ds_provider


class RefreshTrainer(runner.KerasTrainer):
  """``runner.KerasTrainer`` that trains nothing (custom_config ``refresh_only``).

  The model ``runner.run``'s ``model_fn`` builds on this execution's graph
  takes the base model's weights (:meth:`callbacks.WarmStart.load_into`, which
  refuses another architecture) and is evaluated once on the validation data;
  ``runner.run`` then exports it as it exports a trained model.

  Attributes:
    evaluation: That evaluation's metrics, named by task, without ``val_``
      (empty before ``train`` or without validation data).
  """

  def __init__(self, *args, base_model_path: str, autograph: bool = True, **kwargs):
    super().__init__(*args, **kwargs)
    self._base_model_path = base_model_path
    self._autograph = autograph
    self.evaluation: dict[str, float] = {}

  def train(self, model_fn, train_ds_provider, *, epochs=1, valid_ds_provider=None):
    del train_ds_provider, epochs  # nothing is trained
    with self._strategy.scope():
      model = model_fn() if self._autograph else _without_autograph(model_fn)()
    callbacks_lib.WarmStart(self._base_model_path).load_into(model)
    if valid_ds_provider is not None:
      valid = self._strategy.distribute_datasets_from_function(valid_ds_provider.get_dataset)
      logs = model.evaluate(valid, steps=self._validation_steps, return_dict=True, verbose=0)
      self.evaluation = publish.by_task({k: float(v) for k, v in logs.items()},
                                        publish.metric_prefixes(model))
    logging.info("GnnTrainer refresh_only: the weights of %s, not trained; evaluated: %s",
                 self._base_model_path, self.evaluation)
    return model


def _with_optimizer_built(model_fn: Callable[[], tf.keras.Model]
                          ) -> Callable[[], tf.keras.Model]:
  """``model_fn`` whose compiled model's optimizer has its variables before ``fit``.

  Keras' optimizers make their slot variables at their first update, inside the
  first trace of the training step; a ``tf.function`` that makes variables is traced
  a second time, without them (1-3 s of CPU per training, as long as the first).
  Built here, in the strategy's scope, the step is traced once. Legacy optimizers
  (no ``build``) are left as they are.
  """

  def built_model_fn() -> tf.keras.Model:
    model = model_fn()
    if isinstance(model.optimizer, tf.keras.optimizers.Optimizer):
      model.optimizer.build(model.trainable_variables)
    return model

  return built_model_fn


def _without_autograph(model_fn: Callable[[], tf.keras.Model]) -> Callable[[], tf.keras.Model]:
  """``model_fn`` whose model's Keras steps are traced without AutoGraph.

  Keras traces its train/test/predict functions with AutoGraph on; the steps
  then run with it off, so no layer inside is rewritten (custom_config
  ``autograph``).
  """

  def plain_model_fn() -> tf.keras.Model:
    model = model_fn()
    for name in ("train_step", "test_step", "predict_step"):
      setattr(model, name, tf.autograph.experimental.do_not_convert(getattr(model, name)))
    return model

  return plain_model_fn


def fuse_validation(model: tf.keras.Model, validation_batch: tuple) -> tf.keras.Model:
  """Makes ``model``'s training step validate on ``validation_batch`` after it trains.

  Keras' ``fit`` validates with an ``evaluate`` call per epoch: its own
  callbacks, data handler and iterator, which cost more than a small graph's
  forward pass. When an epoch is one step on one batch, the training step can
  instead return the training metrics and, measured right after on the updated
  weights, ``val_``-prefixed validation metrics: what ``fit`` would log for the
  epoch, so every callback sees the same logs (at ``on_train_batch_end`` too).

  What ``fit`` still does around the one step each epoch is made cheap too:
  the metrics are reset in one call (:func:`one_call_reset`) instead of one
  eager op per variable, and ``fit`` keeps the step's logs without first
  reading every metric eagerly only to find that the logs are not the
  metrics' own (they hold ``val_`` keys too), which is what it then did.

  Args:
    model: The compiled model; its ``train_step`` is replaced.
    validation_batch: The one validation batch, ``(inputs, labels)``.

  Returns:
    ``model``.
  """
  train_step, test_step = model.train_step, model.test_step
  model.reset_metrics = one_call_reset(model)

  def step(data):
    # Read before the reset: training and validation update the same metrics.
    logs = {k: tf.identity(v) for k, v in train_step(data).items()}
    model.reset_metrics()
    logs.update({"val_" + k: v for k, v in test_step(validation_batch).items()})
    return logs

  def logs_as_they_are(logs):
    # Both fit and evaluate have synced the logs to Python values before this call.
    return logs

  model.train_step = step
  model._validate_and_get_metrics_result = logs_as_they_are  # pylint: disable=protected-access
  return model


def one_call_reset(model: tf.keras.Model) -> Callable[[], None]:
  """``model.reset_metrics`` as one ``tf.function`` call per set of metric variables.

  Keras resets each metric variable with an eager op; a model's metrics are
  built by its first step, so the function is traced again whenever the
  variables change. Should a metric's reset not trace, it stays eager.
  """
  eager = model.reset_metrics
  traced: dict[tuple, Callable[[], None]] = {}

  def reset_metrics() -> None:
    key = tuple(id(v) for m in model.metrics for v in m.variables)
    if key not in traced:
      traced[key] = tf.function(eager, autograph=False)
    try:
      traced[key]()
    except Exception:  # pylint: disable=broad-except
      traced[key] = eager  # a metric whose reset only runs eagerly
      eager()

  return reset_metrics


@dataclasses.dataclass(frozen=True)
class KerasTraining:
  """The trainer ``runner.run`` gets and the callbacks whose state makes the result.

  Attributes:
    trainer: The Keras trainer, callbacks attached.
    recorder: Records history, metrics and steps (resumable).
    guard: Stops or rolls back on non-finite losses; counts recoveries.
    best: Keeps the best weights, or None without ``restore_best_weights``.
  """
  trainer: runner.KerasTrainer  # GnnKerasTrainer, or RefreshTrainer with refresh_only
  recorder: callbacks_lib.RunRecorder
  guard: callbacks_lib.NumericsGuard
  best: Optional[callbacks_lib.BestWeights]

  def metrics(self) -> tuple[dict[str, float], dict[str, float]]:
    """Train and eval metrics of the exported weights (``refresh_only``: its evaluation)."""
    if isinstance(self.trainer, RefreshTrainer):
      return {}, dict(self.trainer.evaluation)
    return self.recorder.metrics(self.best.best_epoch if self.best else None)


def _callbacks(cfg: config_lib.TrainerConfig, task_names: list[str], *, backup_dir: str,
               model_run_dir: str, base_model_path: Optional[str], chief: bool,
               rank: Optional[Callable[[tf.keras.Model], Mapping[str, float]]] = None):
  """GnnTrainer's callbacks in the order they run, and the three whose state is read after."""
  # Keras epochs (as KerasTrainer counts them with validation_per_epoch).
  keras_steps_per_epoch = (
      cfg.steps_per_epoch // cfg.validation_per_epoch
      if cfg.steps_per_epoch and cfg.validation_per_epoch else cfg.steps_per_epoch)
  recorder = callbacks_lib.RunRecorder(state_file=f"{backup_dir}/run_recorder.json")
  guard = callbacks_lib.NumericsGuard(
      task_names, max_trials=cfg.recovery_max_trials, loss_upper_bound=cfg.loss_upper_bound,
      snapshot_every=cfg.backup_every_n_steps)
  keepers = [recorder]
  best = (callbacks_lib.BestWeights(backup_dir, *config_lib.parse_monitor(
              cfg.restore_best_weights_by))
          if cfg.restore_best_weights else None)
  if best:
    keepers.append(best)
  callbacks = [callbacks_lib.WarmStart(base_model_path)] if base_model_path else []
  if rank is not None:
    callbacks.append(callbacks_lib.RankingValidation(rank))
  callbacks += [guard, *keepers, callbacks_lib.Backup(
      backup_dir, steps_per_epoch=keras_steps_per_epoch,
      every_n_steps=cfg.backup_every_n_steps, every_seconds=cfg.backup_every_seconds,
      # Only the chief writes the run state (Keras' backup itself handles workers).
      before_backup=[k.persist for k in keepers] if chief else [],
      after_backup=[best.drop_older] if best and chief else [])]
  if cfg.summarize_every_n_steps != "never":
    callbacks.append(callbacks_lib.TensorBoard(
        log_dir=model_run_dir, histogram_freq=cfg.histogram_freq,
        write_steps_per_second=True, update_freq=cfg.summarize_every_n_steps))
  return callbacks, recorder, guard, best


def make_trainer(cfg: config_lib.TrainerConfig, strategy: tf.distribute.Strategy, *,
                 task_names: list[str], model_run_dir: str, backup_dir: str,
                 base_model_path: Optional[str], chief: bool, cache_batches: bool,
                 train_records: Optional[int],
                 rank: Optional[Callable[[tf.keras.Model], Mapping[str, float]]] = None
                 ) -> KerasTraining:
  """The Keras trainer for ``runner.run``, with GnnTrainer's callbacks.

  Args:
    cfg: The validated configuration (step counts already set for a
      distributed strategy).
    strategy: The distribution strategy.
    task_names: The module's task names (the guard names them).
    model_run_dir: TensorBoard logs and checkpoints.
    backup_dir: Where the training state is backed up for a retry.
    base_model_path: A SavedModel to warm-start from (``refresh_only``: whose
      weights are exported untrained), or None.
    chief: Whether this process writes the run state.
    cache_batches: Keep finished batches in memory (cache "memory", one worker).
    train_records: Records of the training split, None if unknown.
    rank: The model being trained -> ``retrieval_*`` metrics of the validation
      splits, logged as ``val_retrieval_*`` after each validation; None: not ranked.
  """
  if cfg.refresh_only:
    return KerasTraining(
        trainer=RefreshTrainer(strategy=strategy, model_dir=model_run_dir,
                               validation_steps=cfg.eval_steps, base_model_path=base_model_path,
                               autograph=cfg.autograph),
        recorder=callbacks_lib.RunRecorder(), guard=callbacks_lib.NumericsGuard(task_names),
        best=None)
  callbacks, recorder, guard, best = _callbacks(
      cfg, task_names, backup_dir=backup_dir, model_run_dir=model_run_dir,
      base_model_path=base_model_path, chief=chief, rank=rank)
  trainer = GnnKerasTrainer(
      cache_batches=cache_batches,
      jit_compile=cfg.jit_compile,
      autograph=cfg.autograph,
      fused_epochs=cfg.fused_epochs,
      train_is_one_batch=bool(
          train_records is not None and cfg.steps_per_epoch is None
          and train_records <= cfg.global_batch_size
          and (train_records == cfg.global_batch_size or not cfg.drop_remainder)),
      strategy=strategy,
      model_dir=model_run_dir,
      steps_per_epoch=cfg.steps_per_epoch,
      validation_steps=cfg.eval_steps,
      validation_freq=None if cfg.validation_per_epoch else cfg.validation_freq,
      validation_per_epoch=cfg.validation_per_epoch,
      summarize_every_n_steps="never",  # ours above: histograms only when asked
      checkpoint_every_n_steps=cfg.checkpoint_every_n_steps,
      restore_best_weights=False,  # ours above: in memory, kept with the backups
      backup_and_restore=False,  # ours above: on a cheap cadence, kept until publish
      callbacks=callbacks,
      verbose=2)
  return KerasTraining(trainer=trainer, recorder=recorder, guard=guard, best=best)
