"""TrainingInputs -> ``tensorflow_gnn.runner.run`` -> a staged export and a TrainedModel.

No TFX here: the executor resolves artifacts into a frozen
:class:`~gnn_trainer_component.trainer.inputs.TrainingInputs` (``inputs``) and
calls :func:`train_and_export`; GnnTuner calls it for every trial; tests can
call it directly. What is trained on is ``inputs.data``, a
:class:`~gnn_trainer_component.training_data.TrainingData`, asked for its
datasets the same way whatever its source; the Keras trainer and its callbacks
are ``keras_trainer``; the export is ``model/export.py``'s, its publish ``publish``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import random
from typing import Any, Callable, Iterator, Optional

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn
# The global seed's getter and enable_op_determinism's counterparts are not public
# (TF 2.16 - 2.21).
from tensorflow.python.eager import context as tf_context
from tensorflow.python.framework import config as tf_config
from tensorflow_gnn import runner

from gnn_trainer_component import errors
from gnn_trainer_component import training_data
from gnn_trainer_component.distributed import strategy as strategy_lib
from gnn_trainer_component.in_memory import retrieval
from gnn_trainer_component.model import export as export_lib
from gnn_trainer_component.trainer import callbacks as callbacks_lib
from gnn_trainer_component.trainer import config as config_lib
from gnn_trainer_component.trainer import input_data
from gnn_trainer_component.trainer import inputs as inputs_lib
from gnn_trainer_component.trainer import keras_trainer
from gnn_trainer_component.trainer import publish

TrainingError = callbacks_lib.TrainingError


def _step_counts(inputs: inputs_lib.TrainingInputs,
                 strategy: tf.distribute.Strategy) -> config_lib.TrainerConfig:
  """The config with the step counts a distributed dataset needs (unchanged otherwise)."""
  cfg = inputs.cfg
  if not strategy_lib.needs_step_counts(strategy):
    return cfg
  config_lib.check_replicas(
      cfg, strategy.num_replicas_in_sync,
      f"{strategy_lib.task_name()} of a {strategy_lib.strategy_name(strategy)}")
  cfg = config_lib.distributed_steps(
      cfg, inputs.data.train_records, inputs.data.eval_records,
      num_workers=max(1, strategy_lib.cluster_workers()))
  logging.info("GnnTrainer (%s, %s, %d replicas in sync): %d training steps (%d per "
               "epoch), %d validation steps", strategy_lib.task_name(),
               strategy_lib.strategy_name(strategy), strategy.num_replicas_in_sync,
               cfg.train_steps, cfg.steps_per_epoch, cfg.eval_steps)
  return cfg


def _padding(cfg: config_lib.TrainerConfig, feed: training_data.Feed):
  if cfg.padding == "none":
    return None, None
  kwargs = {}
  if cfg.min_nodes_per_component:
    kwargs["min_nodes_per_component"] = dict(cfg.min_nodes_per_component)
  cls = runner.FitOrSkipPadding if cfg.padding == "fit_or_skip" else runner.TightPadding
  return (cls(feed.spec, feed.train, **kwargs),
          runner.TightPadding(feed.spec, feed.valid, **kwargs))


def _request(cfg: config_lib.TrainerConfig, strategy: tf.distribute.Strategy,
             service: Optional[runner.TFDataServiceConfig],
             tasks) -> training_data.Request:
  """How this training reads its data, from its config and strategy."""
  parameter_servers = isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy)
  return training_data.Request(
      batch_size=cfg.global_batch_size, seed=cfg.seed, drop_remainder=cfg.drop_remainder,
      tasks=tasks,
      local=strategy.num_replicas_in_sync == 1 and not parameter_servers and service is None,
      remote_input=("a tf.data service" if service is not None
                    else "a parameter-server cluster" if parameter_servers else None),
      cache=cfg.cache, cache_budget_mb=cfg.cache_memory_budget_mb,
      # (validation_per_epoch needs num_steps)
      read_once=cfg.epochs == 1 and cfg.train_steps is None,
      shuffle_buffer_size=cfg.shuffle_buffer_size, check_finite=cfg.check_finite_inputs)


@contextlib.contextmanager
def _determinism(cfg: config_lib.TrainerConfig) -> Iterator[None]:
  """Seeds and, with ``deterministic``, op determinism for this training only.

  Both are process-wide: set only while this training runs, then given back as they
  were (Python's, numpy's and TensorFlow's global seeds; op determinism), so they do
  not leak into what runs next in the process (other components, tests).
  """
  seeds = None
  if cfg.seed is not None:
    seeds = (random.getstate(), np.random.get_state(), tf_context.global_seed())
    tf.keras.utils.set_random_seed(cfg.seed)
  restore = cfg.deterministic and not tf_config.is_op_determinism_enabled()
  if restore:
    tf.config.experimental.enable_op_determinism()
  try:
    yield
  finally:
    if restore:
      tf_config.disable_op_determinism()
    if seeds is not None:
      random.setstate(seeds[0])
      np.random.set_state(seeds[1])
      tf.random.set_seed(seeds[2])


def _input_error(e: tf.errors.InvalidArgumentError, task_names: list[str]) -> Exception:
  """The error naming what in the input data made training fail."""
  input_error = input_data.nonfinite_input_error(e.message)
  if input_error is not None:
    return input_error
  lines = [line.strip() for line in e.message.splitlines() if line.strip()]
  cause = next((line for line in lines if "label value" in line), None) or (
      errors.op_error_cause(e.message))
  return TrainingError(
      f"Training failed on the input data: {cause}\nTypical causes: a label outside "
      f"[0, num_classes) for tasks {task_names}, or examples that do not match the "
      "graph schema. Nothing was published.")


def _service(inputs: inputs_lib.TrainingInputs, cfg: config_lib.TrainerConfig):
  if not cfg.tf_data_service_address:
    return None
  return input_data.tf_data_service_config(
      cfg.tf_data_service_address, cfg.tf_data_service_mode,
      cfg.tf_data_service_job_name or input_data.service_job_name(inputs.resume_dir))


def train_and_export(inputs: inputs_lib.TrainingInputs, strategy: tf.distribute.Strategy,
                     export_model: bool = True) -> publish.TrainedModel:
  """Runs ``runner.run`` with a ``KerasTrainer``; the export lands in ``inputs.staging_dir``.

  Args:
    inputs: What to train on, with what, and where to write.
    strategy: The distribution strategy (created before any other TF op).
    export_model: False: train and evaluate only (GnnTuner's trials); nothing
      is written to ``staging_dir`` and the result has no ``training_model``.

  Returns:
    Metrics, history and the in-memory model, for :func:`publish.publish`.

  Raises:
    TrainingError: on a non-finite loss or weights, or input the parser rejects.
    validation.InputDataError: on a NaN/inf input feature.
    GnnError (a subclass): data that cannot be read as this training asks.
  """
  user_module, chief = inputs.user_module, strategy_lib.is_chief()
  cfg = _step_counts(inputs, strategy)
  ranker = _validation_ranker(inputs, cfg)  # refuses before any data is read
  with _determinism(cfg):
    service = _service(inputs, cfg)
    feed = inputs.data.feed(_request(cfg, strategy, service, user_module.tasks))
    if feed.check_deduplication is not None:
      feed.check_deduplication(_seed_states(inputs.user_module, feed.spec))
      if cfg.seed is not None:  # the check's model drew from the seeded streams: start again
        tf.keras.utils.set_random_seed(cfg.seed)
    if feed.whole_steps:  # an element is a whole step: batched one per step
      cfg = dataclasses.replace(cfg, global_batch_size=1)
    exporter = _exporter(inputs, cfg, feed, chief)
    keras = keras_trainer.make_trainer(
        cfg, strategy, task_names=list(user_module.tasks), model_run_dir=inputs.model_run_dir,
        backup_dir=inputs.resume_dir, base_model_path=inputs.base_model_path, chief=chief,
        cache_batches=feed.keep_batches, train_records=feed.train_records,
        rank=_live_ranking(ranker, inputs, feed, exporter) if ranker else None)
    try:
      _run(inputs, cfg, feed, keras, [exporter] if export_model else [], service)
    finally:
      feed.close()
  ranking = (inputs.data.ranking_metrics(
      # Run as the exported signature runs it: an eager Keras call of the model
      # fails on the readout of subgraphs without labels.
      exporter.embeddings_signature,
      single_task=user_module.single_task, seed=cfg.seed or 0)
      # export_embeddings false: no embeddings, and nothing ranks (adapters' policy).
      if export_model and chief and exporter.embeddings_model is not None else {})
  return _trained_model(keras, exporter, inputs, ranking)


def _validation_ranker(inputs: inputs_lib.TrainingInputs, cfg: config_lib.TrainerConfig
                       ) -> Optional[Callable[[Callable], dict[str, float]]]:
  """Embed function -> validation ranking, if ``restore_best_weights_by`` asks for one.

  ``val_retrieval_*`` needs link pairs in memory (the graph to rank against) and the
  ``embeddings`` signature (what ranks); else a ConfigError.
  """
  monitor = config_lib.parse_monitor(cfg.restore_best_weights_by)[0]
  if not (cfg.restore_best_weights and monitor.startswith(f"val_{retrieval.PREFIX}")):
    return None
  ranker = inputs.data.validation_ranker(single_task=inputs.user_module.single_task,
                                         seed=cfg.seed or 0,
                                         max_queries=cfg.ranking_validation_queries)
  if ranker is None or not cfg.export_embeddings or inputs.data.raw_parser is not None:
    raise config_lib.ConfigError(
        f"GnnTrainer custom_config['restore_best_weights_by']={cfg.restore_best_weights_by!r} "
        "ranks the validation edges against every node: it needs link prediction on the graph "
        "in memory (a link_config, not examples or seeds), without a Transform graph, and "
        "'export_embeddings': true. Choose another metric (e.g. 'max:val_auc'). Nothing was "
        "published.")
  return ranker


def _seed_states(user_module, spec) -> Callable[[Any], np.ndarray]:
  """A merged batch -> the module's GNN's hidden states at its seed readout (untrained).

  The batch goes through the feature processors and the first task's
  ``preprocess`` as ``runner.run`` feeds the GNN; one GNN (``model_fn``, fresh
  weights) reads every batch, without dropout.
  """
  processors = user_module.feature_processors_fn(spec)
  task = next(iter(user_module.tasks.values()))
  models = []

  def seed_states(graph) -> np.ndarray:
    for processor in processors:
      graph = processor(graph)
    graph = tf.nest.flatten(task.preprocess(graph)[0], expand_composites=False)[0]
    if not models:
      models.append(user_module.model_fn(graph.spec.relax(num_nodes=True, num_edges=True)))
    out = models[0](graph, training=False)
    return tfgnn.structured_readout(out, "seed", feature_name=tfgnn.HIDDEN_STATE).numpy()

  return seed_states


def _live_ranking(ranker: Callable[[Callable], dict[str, float]],
                  inputs: inputs_lib.TrainingInputs, feed: training_data.Feed,
                  exporter: export_lib.ServingExporter
                  ) -> Callable[[tf.keras.Model], dict[str, float]]:
  """The model being trained -> ``ranker``'s metrics, through the export's embeddings.

  The embeddings function is built once, around the live model, at the first call.
  """
  user_module = inputs.user_module

  @functools.cache
  def embed(model: tf.keras.Model) -> Callable:
    return exporter.embeddings_function(export_lib.run_result_in_training(
        model, feed.spec, user_module.feature_processors_fn(feed.spec),
        user_module.runner_task))

  return lambda model: ranker(embed(model))


def _exporter(inputs: inputs_lib.TrainingInputs, cfg: config_lib.TrainerConfig,
              feed: training_data.Feed, chief: bool) -> export_lib.ServingExporter:
  """The export: serving_default (and embeddings) on the examples the data serves."""
  user_module, raw_parser = inputs.user_module, inputs.data.raw_parser
  return export_lib.ServingExporter(
      single_task_name=cfg.serving_output_name if user_module.single_task else None,
      label_defaults=export_lib.label_defaults_example(
          inputs.graph_schema, export_lib.context_label_features(user_module.tasks)),
      raw_parser=raw_parser, chief=chief, subgraph_parser=feed.serving_parser,
      embeddings_tasks=user_module.tasks if cfg.export_embeddings else None,
      graph_schema=inputs.graph_schema if raw_parser is None else None, graph_spec=feed.spec,
      served_graph=inputs.served_graph)


def _run(inputs: inputs_lib.TrainingInputs, cfg: config_lib.TrainerConfig,
         feed: training_data.Feed, keras: keras_trainer.KerasTraining,
         exporters: list[export_lib.ServingExporter],
         service: Optional[runner.TFDataServiceConfig]) -> None:
  """``runner.run`` on the feed; input and tracing failures as errors that say why."""
  user_module, task_names = inputs.user_module, list(inputs.user_module.tasks)
  train_padding, valid_padding = _padding(cfg, feed)
  # Without AutoGraph, model building, the input pipeline's maps and the
  # Keras steps trace the layers as written (see custom_config "autograph").
  run = runner.run if cfg.autograph else tf.autograph.experimental.do_not_convert(runner.run)
  try:
    run(
        train_ds_provider=feed.train, valid_ds_provider=feed.valid,
        model_fn=user_module.model_fn, optimizer_fn=user_module.optimizer_fn,
        trainer=keras.trainer, task=user_module.runner_task,
        loss_weights=user_module.loss_weights, gtspec=feed.spec,
        global_batch_size=cfg.global_batch_size, epochs=cfg.epochs,
        drop_remainder=cfg.drop_remainder,
        export_dirs=[inputs.staging_dir], model_exporters=exporters,
        feature_processors=user_module.feature_processors_fn(feed.spec),
        train_padding=train_padding, valid_padding=valid_padding,
        steps_per_execution=cfg.steps_per_execution, tf_data_service_config=service)
  except tf.errors.InvalidArgumentError as e:
    raise _input_error(e, task_names) from e
  except tf.errors.OperatorNotAllowedInGraphError as e:
    if cfg.autograph:
      raise
    raise config_lib.ConfigError(
        f"GnnTrainer: tracing the model, its feature processors or tasks {task_names} "
        f"failed: {e}\nPython control flow on a tensor value needs AutoGraph: set "
        'custom_config "autograph": true, or use tf.cond / tf.where / tf.while_loop. '
        "Nothing was published.") from e


def _trained_model(keras: keras_trainer.KerasTraining, exporter: export_lib.ServingExporter,
                   inputs: inputs_lib.TrainingInputs,
                   ranking: dict[str, Any]) -> publish.TrainedModel:
  """What the callbacks recorded, as the result of the run."""
  recorder = keras.recorder
  best_epoch = keras.best.best_epoch if keras.best else None
  train_metrics, eval_metrics = keras.metrics()
  return publish.TrainedModel(
      train_metrics=train_metrics, eval_metrics=eval_metrics, history=list(recorder.history),
      steps=recorder.steps, epochs=len(recorder.history),
      task_names=list(inputs.user_module.tasks),
      resumed_from_step=recorder.resumed_from_step, recoveries=keras.guard.recoveries,
      output_names=exporter.output_names, training_model=exporter.training_model,
      parity_signature=(export_lib.TRANSFORMED_SIGNATURE if inputs.data.raw_parser is not None
                        else "serving_default"),
      exported_epoch=(best_epoch + 1) if best_epoch is not None else len(recorder.history),
      graph_mode=inputs.data.mode, embeddings_model=exporter.embeddings_model,
      retrieval=ranking,
      refreshed_from=inputs.base_model_path if inputs.cfg.refresh_only else None)
