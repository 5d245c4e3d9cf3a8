"""GnnTuner: hyperparameter search in the pipeline, declared like the stock Tuner.

Example::

  tuner = GnnTuner(
      examples=example_gen.outputs["examples"],
      graph_schema=graph_schema_importer.outputs["result"],
      module_file="module_files/planetoid_gcn.py",   # + hyperparameter_space(hp)
      train_args=tfx.proto.TrainArgs(num_steps=200),
      eval_args=tfx.proto.EvalArgs(),
      custom_config={"epochs": 200, "seed": 0, "hparams": {"num_classes": 7}},
      tuning_config={"algorithm": "bayesian", "max_trials": 12, "seed": 1,
                     "objective": "max:val_sparse_categorical_accuracy"},
  )
  trainer = GnnTrainer(..., hyperparameters=tuner.outputs["best_hyperparameters"])
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from tfx import v1 as tfx
from tfx.dsl.components.base import base_component
from tfx.dsl.components.base import executor_spec
from tfx import types
from tfx.proto import trainer_pb2
from tfx.types import standard_artifacts
from tfx.utils import json_utils

from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.trainer import component as trainer_component
from gnn_trainer_component.tuner import config as tuning_config_lib
from gnn_trainer_component.tuner import executor


class GnnTuner(base_component.BaseComponent):
  """Searches hyperparameters of a GnnTrainer module with keras-tuner's algorithms.

  Each trial trains exactly as GnnTrainer does (same inputs, config mapping,
  input pipeline and ``runner.run``), with the trial's values on top of
  ``custom_config["hparams"]``; the search space is the module's
  ``hyperparameter_space(hp)``.

  Outputs:
    best_hyperparameters: ``HyperParameters``; ``best_hyperparameters.txt``
      holds keras-tuner's ``{"space": [...], "values": {...}}`` of the best
      trial, as the stock Tuner writes it (GnnTrainer and the stock Trainer
      read it). Custom properties: ``best_trial_id``, ``best_<objective>``,
      ``objective``, ``trials_completed``, ``trials_failed``.
    tuner_results: ``TunerResults``; ``tuner_results.json`` and
      ``tuner_results.csv``: one row per trial (id, status, objective, values,
      steps, epochs, wall seconds, error), completed trials best first;
      ``trials/trial_<id>/``: each trial's TensorBoard logs.
  """

  SPEC_CLASS = spec_lib.GnnTunerSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(self,
               examples: Optional[tfx.types.BaseChannel] = None,
               graph_schema: Optional[tfx.types.BaseChannel] = None,
               module_file: Optional[str] = None,
               module_path: Optional[str] = None,
               train_args: Optional[trainer_pb2.TrainArgs] = None,
               eval_args: Optional[trainer_pb2.EvalArgs] = None,
               custom_config: Optional[Mapping[str, Any]] = None,
               tuning_config: Optional[Mapping[str, Any]] = None,
               schema: Optional[tfx.types.BaseChannel] = None,
               transform_graph: Optional[tfx.types.BaseChannel] = None,
               seeds: Optional[Mapping[str, str]] = None,
               sampling_config: Optional[Mapping[str, Any]] = None,
               sampling_spec: Optional[str] = None,
               link_config: Optional[Mapping[str, Any]] = None):
    """Constructs a GnnTuner.

    Every argument but ``tuning_config`` is GnnTrainer's (one parameter list,
    ``trainer.component.training_run``): together they define every trial's
    training run. Give the GnnTrainer fed by this tuner the same ones, so that
    it reproduces the best trial.

    Args:
      examples: ``Examples`` of serialized graph tf.Examples; or, without
        examples, the graph itself (``seeds`` and a sampling config, or
        ``link_config``).
      graph_schema: :class:`gnn_trainer_component.GraphSchema` that parses the
        examples; without examples, the graph's folder.
      module_file: Path of the user module, which also defines
        ``hyperparameter_space(hp)``. Exactly one of module_file / module_path.
      module_path: Importable module name of the user module.
      train_args: ``tfx.proto.TrainArgs`` of every trial.
      eval_args: ``tfx.proto.EvalArgs`` of every trial.
      custom_config: Runner knobs and module options (``hparams``); a trial's
        values override ``hparams`` key by key.
      tuning_config: The search: ``algorithm`` ("random", "bayesian",
        "hyperband"), ``max_trials``, ``objective`` (e.g.
        ``"max:val_sparse_categorical_accuracy"``; default ``"val_loss"``),
        ``seed``, ... (see ``gnn_trainer_component.tuner.config``).
      schema: Optional TFMD ``Schema``.
      transform_graph: Optional ``TransformGraph``.
      seeds: Instead of examples: split name -> seed table in the graph_schema
        folder.
      sampling_config: With seeds: GraphSampler's sampling config.
      sampling_spec: Or a text-format ``tensorflow_gnn.sampler.SamplingSpec``.
      link_config: Instead of examples or seeds: LinkSampler's ``link_config``.

    Raises:
      ValueError: for invalid parameters, at pipeline-definition time.
    """
    # Validated at pipeline definition, as GnnTrainer's (and again in the executor).
    tuning_config_lib.make_tuning_config(dict(tuning_config or {}))
    run, _ = trainer_component.training_run(
        "GnnTuner", examples=examples, graph_schema=graph_schema, module_file=module_file,
        module_path=module_path, train_args=train_args, eval_args=eval_args,
        custom_config=custom_config, schema=schema, transform_graph=transform_graph,
        seeds=seeds, sampling_config=sampling_config, sampling_spec=sampling_spec,
        link_config=link_config)
    spec = spec_lib.GnnTunerSpec(
        tuning_config=json_utils.dumps(dict(tuning_config or {})),
        best_hyperparameters=types.Channel(type=standard_artifacts.HyperParameters),
        tuner_results=types.Channel(type=standard_artifacts.TunerResults),
        **run)
    super().__init__(spec=spec)
    trainer_component.package_user_module(self)  # as GnnTrainer: a wheel for remote runners


__all__ = ["GnnTuner"]
