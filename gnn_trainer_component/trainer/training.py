"""TrainingInputs -> ``tensorflow_gnn.runner.run`` -> a staged export and a TrainedModel.

No TFX here: the executor resolves artifacts into a frozen
:class:`TrainingInputs` and calls :func:`train_and_export`; tests can call it
directly. The input pipeline is ``input_data``; the Keras callbacks (numerics
guard, history, best weights, backup) are ``callbacks``.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

from absl import logging
import tensorflow as tf
# enable_op_determinism is public, its counterparts are not (TF 2.16 - 2.21).
from tensorflow.python.framework import config as tf_config  # pylint: disable=g-direct-tensorflow-import
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

from gnn_trainer_component.trainer import callbacks as callbacks_lib
from gnn_trainer_component.trainer import config as config_lib
from gnn_trainer_component.trainer import export
from gnn_trainer_component.trainer import input_data
from gnn_trainer_component.trainer import module_contract
from gnn_trainer_component.trainer import strategy as strategy_lib
from gnn_trainer_component.trainer import validation

TrainingError = callbacks_lib.TrainingError


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


def _padding(cfg: config_lib.TrainerConfig, gtspec, train, valid):
  if cfg.padding == "none":
    return None, None
  kwargs = {}
  if cfg.min_nodes_per_component:
    kwargs["min_nodes_per_component"] = dict(cfg.min_nodes_per_component)
  cls = runner.FitOrSkipPadding if cfg.padding == "fit_or_skip" else runner.TightPadding
  return cls(gtspec, train, **kwargs), runner.TightPadding(gtspec, valid, **kwargs)


def train_and_export(inputs: TrainingInputs, strategy: tf.distribute.Strategy,
                     export_model: bool = True) -> export.TrainedModel:
  """Runs ``runner.run`` with a ``KerasTrainer``; the export lands in ``inputs.staging_dir``.

  Args:
    inputs: What to train on, with what, and where to write.
    strategy: The distribution strategy (created before any other TF op).
    export_model: False: train and evaluate only (GnnTuner's trials); nothing
      is written to ``staging_dir`` and the result has no ``training_model``.

  Returns:
    Metrics, history and the in-memory model, for :func:`export.publish`.

  Raises:
    TrainingError: on a non-finite loss or weights, or input the parser rejects.
    validation.InputDataError: on a NaN/inf input feature.
  """
  cfg, user_module, graph_schema = inputs.cfg, inputs.user_module, inputs.graph_schema
  chief = strategy_lib.is_chief()
  if strategy_lib.needs_step_counts(strategy):
    config_lib.check_replicas(cfg, strategy.num_replicas_in_sync,
                              f"{strategy_lib.task_name()} of a {strategy_lib.strategy_name(strategy)}")
    cfg = config_lib.distributed_steps(
        cfg, inputs.train_size.records if inputs.train_size is not None else None,
        inputs.eval_size.records if inputs.eval_size is not None else None,
        num_workers=max(1, strategy_lib.cluster_workers()))
    logging.info("GnnTrainer (%s, %s, %d replicas in sync): %d training steps (%d per "
                 "epoch), %d validation steps", strategy_lib.task_name(),
                 strategy_lib.strategy_name(strategy), strategy.num_replicas_in_sync,
                 cfg.train_steps,
                 cfg.steps_per_epoch, cfg.eval_steps)
  if cfg.seed is not None:
    tf.keras.utils.set_random_seed(cfg.seed)
  # Op determinism is process-wide: on only while this training runs, so it
  # does not leak into what runs next in the process (other components, tests).
  restore_determinism = cfg.deterministic and not tf_config.is_op_determinism_enabled()
  if restore_determinism:
    tf.config.experimental.enable_op_determinism()
  gtspec = tfgnn.create_graph_spec_from_schema_pb(graph_schema)
  cache = input_data.resolve_cache(
      cfg.cache, budget_mb=cfg.cache_memory_budget_mb,
      # (validation_per_epoch needs num_steps)
      read_once=cfg.epochs == 1 and cfg.train_steps is None,
      data=(inputs.train_size + inputs.eval_size
            if inputs.train_size is not None and inputs.eval_size is not None else None))
  cache_dir = None
  if cache not in (input_data.MEMORY, input_data.NONE):
    cache_dir = input_data.attempt_cache_dir(cache)
  train = input_data.dataset_provider(
      inputs.train_files, inputs.train_compression, gtspec, shuffle=True,
      shuffle_buffer_size=cfg.shuffle_buffer_size,
      what=f"train_args splits {', '.join(cfg.train_splits)}",
      check_finite=cfg.check_finite_inputs,
      cache=f"{cache_dir}/train" if cache_dir else cache,
      num_records=inputs.train_size.records if inputs.train_size is not None else None)
  valid = input_data.dataset_provider(
      inputs.eval_files, inputs.eval_compression, gtspec, shuffle=False,
      what=f"eval_args splits {', '.join(cfg.eval_splits)}",
      check_finite=cfg.check_finite_inputs,
      cache=f"{cache_dir}/eval" if cache_dir else cache,
      num_records=inputs.eval_size.records if inputs.eval_size is not None else None)
  train_padding, valid_padding = _padding(cfg, gtspec, train, valid)

  task_names = list(user_module.tasks)
  backup_dir = inputs.resume_dir
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
  callbacks = [callbacks_lib.WarmStart(inputs.base_model_path)] if inputs.base_model_path else []
  callbacks += [guard, *keepers, callbacks_lib.Backup(
      backup_dir, steps_per_epoch=keras_steps_per_epoch,
      every_n_steps=cfg.backup_every_n_steps, every_seconds=cfg.backup_every_seconds,
      # Only the chief writes the run state (Keras' backup itself handles workers).
      before_backup=[k.persist for k in keepers] if chief else [],
      after_backup=[best.drop_older] if best and chief else [])]
  if cfg.summarize_every_n_steps != "never":
    callbacks.append(tf.keras.callbacks.TensorBoard(
        log_dir=inputs.model_run_dir, histogram_freq=cfg.histogram_freq,
        write_steps_per_second=True, update_freq=cfg.summarize_every_n_steps))
  trainer_kwargs = dict(
      strategy=strategy,
      model_dir=inputs.model_run_dir,
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
  single_worker = strategy.num_replicas_in_sync == 1 and not isinstance(
      strategy, tf.distribute.experimental.ParameterServerStrategy)
  records = inputs.train_size.records if inputs.train_size is not None else None
  service = None
  if cfg.tf_data_service_address:
    service = input_data.tf_data_service_config(
        cfg.tf_data_service_address, cfg.tf_data_service_mode,
        cfg.tf_data_service_job_name or input_data.service_job_name(inputs.resume_dir))
  trainer = input_data.GnnKerasTrainer(
      cache_batches=cache == input_data.MEMORY and single_worker and service is None,
      jit_compile=cfg.jit_compile,
      train_is_one_batch=bool(
          records is not None and cfg.steps_per_epoch is None
          and records <= cfg.global_batch_size
          and (records == cfg.global_batch_size or not cfg.drop_remainder)),
      **trainer_kwargs)
  exporter = export.ServingExporter(
      single_task_name=cfg.serving_output_name if user_module.single_task else None,
      label_defaults=export.label_defaults_example(
          graph_schema, export.context_label_features(user_module.tasks)),
      raw_parser=inputs.raw_parser, chief=chief)
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
        model_exporters=[exporter] if export_model else [],
        feature_processors=user_module.feature_processors_fn(gtspec),
        train_padding=train_padding,
        valid_padding=valid_padding,
        steps_per_execution=cfg.steps_per_execution,
        tf_data_service_config=service)
  except tf.errors.InvalidArgumentError as e:
    input_error = input_data.nonfinite_input_error(e.message)
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
  finally:
    if cache_dir and tf.io.gfile.exists(cache_dir):
      tf.io.gfile.rmtree(cache_dir)
    if restore_determinism:
      tf_config.disable_op_determinism()

  best_epoch = best.best_epoch if best else None
  train_metrics, eval_metrics = recorder.metrics(best_epoch)
  return export.TrainedModel(
      train_metrics=train_metrics, eval_metrics=eval_metrics, history=list(recorder.history),
      steps=recorder.steps, epochs=len(recorder.history), task_names=task_names,
      resumed_from_step=recorder.resumed_from_step, recoveries=guard.recoveries,
      output_names=exporter.output_names, training_model=exporter.training_model,
      parity_signature=(export.TRANSFORMED_SIGNATURE if inputs.raw_parser is not None
                        else "serving_default"),
      exported_epoch=(best_epoch + 1) if best_epoch is not None else len(recorder.history))
