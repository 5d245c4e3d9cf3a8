"""GnnTuner executor: GnnTrainer's inputs -> trials on GnnTrainer's training path -> best hparams.

Every trial is a GnnTrainer training run: the same ``trainer.inputs.resolve``
(config mapping, module contract, input validation, Transform), the same
``training.train_and_export`` (``runner.run``, input pipeline, speed
settings), with the trial's values on top of ``custom_config["hparams"]``.
Only the SavedModel export is skipped. TFX glue only; the search is
``search.py``, the settings ``config.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from typing import Any, Optional

from absl import logging
import tensorflow as tf
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils

from gnn_trainer_component import outputs
from gnn_trainer_component import process
from gnn_trainer_component import spec
from gnn_trainer_component.distributed import strategy as strategy_lib
from gnn_trainer_component.trainer import config as trainer_config
from gnn_trainer_component.trainer import inputs as inputs_lib
from gnn_trainer_component.trainer import module_contract
from gnn_trainer_component.trainer import training
from gnn_trainer_component.tuner import config as config_lib
from gnn_trainer_component.tuner import search

Artifacts = dict[str, list[types.Artifact]]


def _copy_tree(src: str, dst: str) -> None:
  for folder, _, files in tf.io.gfile.walk(src):
    target = os.path.join(dst, os.path.relpath(folder, src))
    tf.io.gfile.makedirs(target)
    for name in files:
      tf.io.gfile.copy(os.path.join(folder, name), os.path.join(target, name), overwrite=True)


def trial_inputs(inputs: inputs_lib.TrainingInputs,
                 trial: search.Trial) -> inputs_lib.TrainingInputs:
  """GnnTrainer's resolved inputs for one trial: its hparams, epochs and folders."""
  cfg = inputs.cfg
  hparams = {**(cfg.hparams or {}), **trial.values}
  if trial.epochs:  # Hyperband's budget: epochs of the configured length
    cfg = dataclasses.replace(
        cfg, epochs=trial.epochs,
        train_steps=cfg.steps_per_epoch * trial.epochs if cfg.steps_per_epoch else None)
  return dataclasses.replace(
      inputs, cfg=dataclasses.replace(cfg, hparams=hparams),
      user_module=module_contract.validate_module(
          inputs.user_module.module, inputs.user_module.source, hparams,
          inputs.user_module.fn_args),
      model_run_dir=os.path.join(trial.directory, "run"),
      staging_dir=os.path.join(trial.directory, "staging"),
      resume_dir=os.path.join(trial.directory, "backup"))


def _properties(rows: list[dict], tuning: config_lib.TuningConfig) -> dict[str, Any]:
  """Custom properties of both outputs, from the results table (best completed trial first)."""
  statuses = [r["status"] for r in rows]
  return {"best_trial_id": str(rows[0]["trial_id"]),
          f"best_{tuning.objective}": float(rows[0]["score"]),
          "objective": f"{tuning.direction}:{tuning.objective}",
          "trials_completed": statuses.count("COMPLETED"),
          "trials_failed": len(statuses) - statuses.count("COMPLETED")}


class Executor(base_executor.BaseExecutor):
  """Runs GnnTuner's search; publishes ``best_hyperparameters`` and ``tuner_results``."""

  def Do(self, input_dict: Artifacts, output_dict: Artifacts,
         exec_properties: dict[str, Any]) -> None:
    process.check_keras_2("GnnTuner's executor")
    strategy = strategy_lib.make_strategy()  # first: before any other TF op
    best = artifact_utils.get_single_instance(output_dict[spec.BEST_HYPERPARAMETERS_KEY])
    results = artifact_utils.get_single_instance(output_dict[spec.TUNER_RESULTS_KEY])
    best_file = os.path.join(best.uri, search.BEST_HPARAMS_FILE)
    results_file = os.path.join(results.uri, search.RESULTS_JSON)
    state_dir = outputs.resume_dir(
        best.uri, self._context.pipeline_run_id if self._context else None,
        results.uri, output_key=spec.BEST_HYPERPARAMETERS_KEY)
    tuning = config_lib.make_tuning_config(exec_properties.get(spec.TUNING_CONFIG_KEY))
    if tf.io.gfile.exists(best_file) and tf.io.gfile.exists(results_file):
      logging.info("GnnTuner: %s was published by an earlier attempt of this execution; "
                   "not searching again.", best_file)
      with tf.io.gfile.GFile(results_file) as f:
        rows = json.loads(f.read())
    else:
      rows = self._search(input_dict, exec_properties, tuning, strategy, state_dir,
                          results.uri, best_file, results_file)
      if rows is None:
        return  # not the chief
    for artifact in (best, results):
      outputs.set_properties(artifact, _properties(rows, tuning))
    outputs.rmtree(state_dir)  # published: a retry must not resume any more

  def _search(self, input_dict, exec_properties, tuning, strategy, state_dir: str,
              results_dir: str, best_file: str, results_file: str) -> Optional[list[dict]]:
    """Runs (or resumes) the search and writes both outputs; the results rows."""
    # Everything is validated before the first trial: the default config, the
    # module (with custom_config's hparams), the data, and the search space.
    inputs = inputs_lib.resolve(
        input_dict, exec_properties, trainer_config.from_exec_properties(exec_properties),
        model_run_dir=results_dir, staging_dir="",
        backup_dir="", make_fn_args=functools.partial(
            inputs_lib.fn_args, input_dict, {}, exec_properties, working_dir=results_dir))
    space = module_contract.search_space(inputs.user_module.module, inputs.user_module.source)
    logging.info("GnnTuner: %s search, objective %s %s, space %s, state in %s",
                 tuning.algorithm, tuning.direction, tuning.objective,
                 [p.get_config() for p in space.space], state_dir)

    def train(trial: search.Trial) -> search.TrialOutcome:
      # A fresh Keras graph per trial, as keras-tuner's Tuner does before each
      # build (keras_tuner/src/engine/tuner.py): trials must not pile up models.
      tf.keras.backend.clear_session()
      trained = training.train_and_export(
          trial_inputs(inputs, trial), strategy, export_model=False)
      return search.TrialOutcome(eval_metrics=trained.eval_metrics,
                                 train_metrics=trained.train_metrics,
                                 steps=trained.steps, epochs=trained.epochs)

    first = (search.default_values(space, inputs.user_module.hparams)
             if tuning.default_trial else None)
    result = search.run_search(tuning, space, state_dir, train, default_epochs=inputs.cfg.epochs,
                               first_values=first)
    if not strategy_lib.is_chief():
      return None
    for row in result.rows:  # each trial's TensorBoard logs, for comparing them
      run_dir = os.path.join(state_dir, search.PROJECT, f"trial_{row['trial_id']}", "run")
      if tf.io.gfile.exists(run_dir):
        _copy_tree(run_dir, os.path.join(results_dir, "trials", f"trial_{row['trial_id']}"))
    # Atomic writes, the best file last: it marks the outputs complete for a retry
    # (which then does not search again) and is what GnnTrainer (and the stock
    # Trainer) reads, so a kill while writing must not leave it truncated.
    outputs.write_atomically(os.path.join(results_dir, search.RESULTS_CSV),
                            search.results_csv(result.rows).encode())
    outputs.write_atomically(results_file, json.dumps(result.rows, indent=1).encode())
    outputs.write_atomically(best_file, json.dumps(result.best_hyperparameters).encode())
    logging.info("GnnTuner: best trial %s, %s = %s: %s", result.best_trial_id,
                 tuning.objective, result.best_score, result.best_hyperparameters["values"])
    return result.rows
