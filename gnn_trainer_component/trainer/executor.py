"""GnnTrainer's executor: one process of a training run, as TFX's ``GenericExecutor``.

``Executor.Do`` reads as resolve -> train -> publish. It runs where the
pipeline step runs (the usual case) and in every replica of a multi-worker
job that :mod:`~gnn_trainer_component.trainer.launcher` starts. The mapping
logic lives in pure modules (``inputs`` and what it calls); training in
``training``; the parity check and atomic publish in ``publish`` (the export is
``model/``'s); the distribution strategy in ``distributed.strategy``. This file is
only TFX glue.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

from absl import logging
from tfx import types
from tfx.components.trainer import executor as tfx_trainer_executor
from tfx.components.trainer import fn_args_utils
from tfx.types import artifact_utils
from tfx.utils import path_utils

from gnn_trainer_component import outputs
from gnn_trainer_component import process
from gnn_trainer_component import spec
from gnn_trainer_component.distributed import custom_job
from gnn_trainer_component.distributed import devices
from gnn_trainer_component.distributed import strategy as strategy_lib
from gnn_trainer_component.trainer import config as config_lib
from gnn_trainer_component.trainer import publish
from gnn_trainer_component.trainer import inputs as inputs_lib
from gnn_trainer_component.trainer import training

Artifacts = dict[str, list[types.Artifact]]


@dataclasses.dataclass(frozen=True)
class OutputDirs:
  """Where an execution writes, from its output artifacts.

  Attributes:
    model: The ``Model`` artifact (its properties are set on publish).
    model_run_dir: The ``ModelRun`` folder (TensorBoard logs, metrics).
    serving_dir: ``<model>/Format-Serving``, where the SavedModel is published.
    staging_dir: Where the SavedModel is written before it is renamed into place.
    backup_dir: Training state kept for a retry (:func:`outputs.resume_dir`).
  """
  model: types.Artifact
  model_run_dir: str
  serving_dir: str
  staging_dir: str
  backup_dir: str

  @classmethod
  def of(cls, output_dict: Artifacts, pipeline_run_id: Optional[str]) -> "OutputDirs":
    model = artifact_utils.get_single_instance(output_dict[spec.MODEL_KEY])
    model_run_dir = artifact_utils.get_single_uri(output_dict[spec.MODEL_RUN_KEY])
    return cls(model=model, model_run_dir=model_run_dir,
               serving_dir=path_utils.serving_model_dir(model.uri),
               staging_dir=os.path.join(model.uri, publish.STAGING_DIR),
               backup_dir=outputs.resume_dir(model.uri, pipeline_run_id, model_run_dir))


def pipeline_run_id(context: Any) -> Optional[str]:
  """The pipeline run id of an execution (a job's replicas get the launcher's)."""
  return ((context.pipeline_run_id if context else None)
          or os.environ.get(custom_job.PIPELINE_RUN_ID_ENV))


class Executor(tfx_trainer_executor.GenericExecutor):
  """Trains a TF-GNN model with ``tensorflow_gnn.runner.run`` and publishes a SavedModel."""

  def _GetFnArgs(self, input_dict: Artifacts, output_dict: Artifacts,
                 exec_properties: dict[str, Any]) -> fn_args_utils.FnArgs:
    return inputs_lib.fn_args(input_dict, output_dict, exec_properties)

  def Do(self, input_dict: Artifacts, output_dict: Artifacts,
         exec_properties: dict[str, Any]) -> None:
    """Trains on the examples and publishes the model, unless an earlier attempt published it.

    In a parameter-server cluster the ``worker`` and ``ps`` tasks only serve;
    in a multi-worker cluster every worker trains and the chief publishes.

    Args:
      input_dict: Input artifacts:
        - examples: ``Examples`` of serialized graph tf.Examples, with the
          splits ``train_args`` / ``eval_args`` name.
        - graph_schema: ``GraphSchema`` that parses them.
        - schema: Optional TFMD ``Schema``; must agree with graph_schema.
        - transform_graph: Optional ``TransformGraph``; the model then serves
          raw examples.
        - base_model: Optional ``Model`` of the same architecture to warm-start from
          (``refresh_only``: whose weights are exported untrained).
        - hyperparameters: Optional ``HyperParameters``; their values override
          ``custom_config['hparams']``.
      output_dict: Output artifacts:
        - model: ``Model``; the SavedModel goes to ``<uri>/Format-Serving``,
          metrics become custom properties.
        - model_run: ``ModelRun``: TensorBoard logs, ``metrics.json``, history.
      exec_properties: Execution properties:
        - module_file / module_path: The user module (``module_contract``).
        - train_args / eval_args: JSON of ``TrainArgs`` / ``EvalArgs`` (splits, num_steps).
        - custom_config: JSON of GnnTrainer's ``custom_config`` (``config``).

    Raises:
      config_lib.ConfigError: custom_config names a job to launch (the
        launcher's role), or is invalid. Bad input raises the errors
        :func:`inputs.resolve` lists; training failures ``training.TrainingError``;
        a failed parity check ``publish.ExportError``. Nothing is published then.
    """
    process.check_keras_2("GnnTrainer's executor")
    strategy_lib.log_cluster()
    devices.check_gpus()  # GNN_TRAINER_GPU asked for GPUs: refuse to train on the CPU
    if strategy_lib.serves_only():
      logging.info("GnnTrainer (%s of a parameter-server cluster): serving; the chief "
                   "trains and publishes.", strategy_lib.task_name())
      strategy_lib.serve()
      return
    # The strategy comes first, before any other TF op.
    strategy = strategy_lib.make_strategy()
    devices.log_strategy(strategy)
    self._log_startup(input_dict, output_dict, exec_properties)
    cfg = config_lib.from_exec_properties(exec_properties, in_place=True)
    dirs = OutputDirs.of(output_dict, pipeline_run_id(self._context))
    properties = publish.published_properties(dirs.serving_dir, dirs.staging_dir,
                                             dirs.model_run_dir)
    if properties is not None:
      logging.info("GnnTrainer: %s was published by an earlier attempt of this execution; "
                   "not training again.", dirs.serving_dir)
    else:
      inputs = inputs_lib.resolve_execution(
          input_dict, output_dict, exec_properties, cfg, model_run_dir=dirs.model_run_dir,
          staging_dir=dirs.staging_dir, backup_dir=dirs.backup_dir)
      outputs.log_phase("train")
      if not strategy_lib.is_chief():
        # Trains and saves with the others (collectives); writes nothing shared.
        training.train_and_export(inputs, strategy)
        logging.info("GnnTrainer (%s): done; the chief publishes.", strategy_lib.task_name())
        return
      properties = train_and_publish(inputs, strategy, dirs)
    outputs.set_properties(dirs.model, properties)
    outputs.rmtree(dirs.backup_dir)  # published: a retry must not resume any more
    outputs.log_phase("done")


def train_and_publish(inputs: inputs_lib.TrainingInputs, strategy,
                      dirs: OutputDirs) -> dict[str, Any]:
  """Trains, checks and publishes the export atomically; the Model's properties."""
  try:
    trained = training.train_and_export(inputs, strategy)
    properties = publish.publish(
        trained, staging_dir=dirs.staging_dir, serving_dir=dirs.serving_dir,
        model_run_dir=dirs.model_run_dir,
        parity_examples=inputs.data.parity_examples(inputs.cfg.parity_check_examples),
        held_out=inputs.data.held_out_tables())
  finally:
    outputs.rmtree(dirs.staging_dir)  # never leave a half-written export behind
  logging.info("GnnTrainer: published %s (metrics: %s)", dirs.serving_dir, trained.eval_metrics)
  return properties
