"""GnnTrainer: a TFX component that trains TF-GNN models, declared like the stock Trainer.

Example::

  trainer = GnnTrainer(
      examples=example_gen.outputs["examples"],
      graph_schema=graph_schema_importer.outputs["result"],
      module_file="module_files/demo_node_classification.py",
      train_args=tfx.proto.TrainArgs(num_steps=200),
      eval_args=tfx.proto.EvalArgs(num_steps=None),
      custom_config={"global_batch_size": 32, "epochs": 4},
  )
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from google.protobuf import json_format
from tfx import v1 as tfx
from tfx.components.util import udf_utils
from tfx.dsl.components.base import base_component
from tfx.dsl.components.base import base_executor
from tfx.dsl.components.base import executor_spec
from tfx import types
from tfx.proto import trainer_pb2
from tfx.types import standard_artifacts
from tfx.utils import json_utils

from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.trainer import config as config_lib
from gnn_trainer_component.trainer import executor
from gnn_trainer_component.trainer import launcher


class GnnTrainer(base_component.BaseComponent):
  """Trains a TF-GNN model with ``tensorflow_gnn.runner.run``.

  Outputs:
    model: ``Model``; the SavedModel is in ``<uri>/Format-Serving`` (where
      Evaluator, Pusher and InfraValidator look). Its ``serving_default``
      signature takes serialized tf.Examples as ``examples`` and returns
      ``logits`` (one task) or one output per task name. Custom properties:
      ``train_<metric>``, ``eval_<metric>``, ``train_steps``, ``epochs``,
      ``tasks``, ``serving_outputs``.
    model_run: ``ModelRun``: TensorBoard logs, ``metrics.json``,
      ``history.json``, ``curves.png`` and the parity check's files (weight
      checkpoints only with ``custom_config["checkpoint_every_n_steps"]``).

  Executor: the trainer's (``trainer.executor.Executor``, a TFX
  ``GenericExecutor``), or, when ``custom_config`` asks for a job
  (``ai_platform_training_args`` or ``local_workers`` > 1), the launcher's
  (``trainer.launcher.Executor``), whose replicas run the trainer's.
  """

  SPEC_CLASS = spec_lib.GnnTrainerSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(self,
               examples: Optional[tfx.types.BaseChannel] = None,
               graph_schema: Optional[tfx.types.BaseChannel] = None,
               module_file: Optional[str] = None,
               module_path: Optional[str] = None,
               train_args: Optional[trainer_pb2.TrainArgs] = None,
               eval_args: Optional[trainer_pb2.EvalArgs] = None,
               custom_config: Optional[Mapping[str, Any]] = None,
               schema: Optional[tfx.types.BaseChannel] = None,
               transform_graph: Optional[tfx.types.BaseChannel] = None,
               base_model: Optional[tfx.types.BaseChannel] = None,
               hyperparameters: Optional[tfx.types.BaseChannel] = None,
               seeds: Optional[Mapping[str, str]] = None,
               sampling_config: Optional[Mapping[str, Any]] = None,
               sampling_spec: Optional[str] = None,
               link_config: Optional[Mapping[str, Any]] = None):
    """Constructs a GnnTrainer.

    Args:
      examples: ``Examples`` of serialized graph tf.Examples (ExampleGen,
        Transform or GraphSampler output). Or, without examples, the graph
        itself: ``seeds`` and a sampling config, the tables in graph_schema.
      graph_schema: :class:`gnn_trainer_component.GraphSchema` that parses the
        examples; without examples, the graph's folder: ``graph_schema.pbtxt``
        and the node/edge tables it names (GraphSampler's input).
      module_file: Path of the user module (see ``module_contract``). Exactly
        one of module_file / module_path.
      module_path: Importable module name of the user module.
      train_args: ``tfx.proto.TrainArgs``: splits (default ["train"]) and
        num_steps (total training steps; unset = epochs over the whole split).
      eval_args: ``tfx.proto.EvalArgs``: splits (default ["eval"]) and
        num_steps (unset = the whole split each validation).
      custom_config: Runner knobs and module options (``hparams``); see
        ``config.TrainerConfig``. Unknown keys are an error.
      schema: Optional TFMD ``Schema``.
      transform_graph: Optional ``TransformGraph``.
      base_model: Optional ``Model`` to warm-start from (same architecture);
        with ``custom_config["refresh_only"]``, whose weights are exported
        untrained with this execution's graph.
      hyperparameters: Optional ``HyperParameters`` (e.g. Tuner's best); their
        values override ``custom_config["hparams"]`` key by key and reach
        model_fn / task / optimizer_fn as ``hparams``.
      seeds: Instead of examples: split name -> seed table in the graph_schema
        folder. The graph is loaded into memory once and training samples a
        fresh subgraph around each seed every epoch (validation: the same
        subgraphs every time), of the same spec as GraphSampler's examples.
      sampling_config: With seeds: GraphSampler's
        ``{"seed_node_set": ..., "hops": [{edge_set: fan_out}, ...]}``.
      sampling_spec: Or a text-format ``tensorflow_gnn.sampler.SamplingSpec``.
      link_config: Instead of examples or seeds: LinkSampler's ``link_config``;
        training then predicts links of the graph in memory (the same split
        and leakage rules, negatives drawn fresh every epoch).

    Raises:
      ValueError: for invalid parameters, at pipeline-definition time.
    """
    run, cfg = training_run(
        "GnnTrainer", examples=examples, graph_schema=graph_schema, module_file=module_file,
        module_path=module_path, train_args=train_args, eval_args=eval_args,
        custom_config=custom_config, schema=schema, transform_graph=transform_graph,
        seeds=seeds, sampling_config=sampling_config, sampling_spec=sampling_spec,
        link_config=link_config)
    spec = spec_lib.GnnTrainerSpec(
        base_model=base_model,
        hyperparameters=hyperparameters,
        model=types.Channel(type=standard_artifacts.Model),
        model_run=types.Channel(type=standard_artifacts.ModelRun),
        **run)
    super().__init__(spec=spec, custom_executor_spec=executor_spec.ExecutorClassSpec(
        executor_class(cfg)))
    package_user_module(self)


def training_run(component: str, *,
                 examples: Optional[tfx.types.BaseChannel] = None,
                 graph_schema: Optional[tfx.types.BaseChannel] = None,
                 module_file: Optional[str] = None,
                 module_path: Optional[str] = None,
                 train_args: Optional[trainer_pb2.TrainArgs] = None,
                 eval_args: Optional[trainer_pb2.EvalArgs] = None,
                 custom_config: Optional[Mapping[str, Any]] = None,
                 schema: Optional[tfx.types.BaseChannel] = None,
                 transform_graph: Optional[tfx.types.BaseChannel] = None,
                 seeds: Optional[Mapping[str, str]] = None,
                 sampling_config: Optional[Mapping[str, Any]] = None,
                 sampling_spec: Optional[str] = None,
                 link_config: Optional[Mapping[str, Any]] = None
                 ) -> tuple[dict[str, Any], config_lib.TrainerConfig]:
  """The spec arguments of a training run: GnnTrainer's, and every GnnTuner trial's.

  The one parameter list the two components share: GnnTrainer's and GnnTuner's
  constructors take these keywords, with these types and defaults
  (``tests/test_config.py`` holds them to it; GnnTrainer documents them), and
  hand them here, the one mapping to their ComponentSpecs' arguments
  (``GnnTunerSpec`` takes ``GnnTrainerSpec``'s).

  Returns:
    The spec arguments (input channels and execution parameters), and the
    configuration they make.

  Raises:
    ValueError: naming ``component`` and the parameter, for what the executor
      would reject.
  """
  parameters, cfg = _training_parameters(component, module_file, module_path, train_args,
                                         eval_args, custom_config)
  return {spec_lib.GRAPH_SCHEMA_KEY: graph_schema, spec_lib.SCHEMA_KEY: schema,
          spec_lib.TRANSFORM_GRAPH_KEY: transform_graph,
          **_data_parameters(component, examples, graph_schema, transform_graph, seeds,
                             sampling_config, sampling_spec, link_config),
          **parameters}, cfg


def _training_parameters(component: str, module_file: Optional[str],
                         module_path: Optional[str],
                         train_args: Optional[trainer_pb2.TrainArgs],
                         eval_args: Optional[trainer_pb2.EvalArgs],
                         custom_config: Optional[Mapping[str, Any]]
                         ) -> tuple[dict[str, Any], config_lib.TrainerConfig]:
  """The execution parameters of a training run: the module and how it trains.

  Fails at pipeline definition on what the executor would reject: unknown or
  ill-typed keys and the cross-field rules (one function checks both places).

  Returns:
    The execution parameters, and the configuration they make.

  Raises:
    ValueError: naming ``component`` and the parameter.
  """
  if bool(module_file) == bool(module_path):
    raise ValueError(f"{component} needs exactly one of 'module_file' or 'module_path'.")
  train_args = train_args or trainer_pb2.TrainArgs()
  eval_args = eval_args or trainer_pb2.EvalArgs()
  cfg = config_lib.make_trainer_config(
      json_format.MessageToDict(train_args, preserving_proto_field_name=True),
      json_format.MessageToDict(eval_args, preserving_proto_field_name=True),
      dict(custom_config or {}))
  return {spec_lib.MODULE_FILE_KEY: module_file, spec_lib.MODULE_PATH_KEY: module_path,
          spec_lib.TRAIN_ARGS_KEY: train_args, spec_lib.EVAL_ARGS_KEY: eval_args,
          spec_lib.CUSTOM_CONFIG_KEY: json_utils.dumps(dict(custom_config or {}))}, cfg


def _data_parameters(component: str, examples: Optional[tfx.types.BaseChannel],
                     graph_schema: Optional[tfx.types.BaseChannel],
                     transform_graph: Optional[tfx.types.BaseChannel],
                     seeds: Optional[Mapping[str, str]],
                     sampling_config: Optional[Mapping[str, Any]],
                     sampling_spec: Optional[str],
                     link_config: Optional[Mapping[str, Any]]) -> dict[str, Any]:
  """What a training run reads.

  Either ``examples``, or the graph in memory (seeds + sampling, or link_config).

  Raises:
    ValueError: naming ``component`` and what to write instead.
  """
  if graph_schema is None:
    raise ValueError(f"{component} needs 'graph_schema'.")
  given = [name for name, value in (("examples", examples), ("seeds", seeds),
                                    ("link_config", link_config)) if value]
  if len(given) != 1:
    raise ValueError(
        f"{component} needs exactly one of 'examples' (pre-sampled subgraphs, e.g. "
        "GraphSampler's or LinkSampler's) or the graph held in memory: 'seeds' "
        "({split: seed table}) with 'sampling_config' or 'sampling_spec', or 'link_config' "
        f"(LinkSampler's), the tables in the graph_schema folder. Got {given or 'none'}.")
  if not seeds and (sampling_config or sampling_spec):
    raise ValueError(f"{component}: 'sampling_config' / 'sampling_spec' go with 'seeds' "
                     "(subgraphs around seeds of the graph in memory).")
  if examples is not None:
    return {spec_lib.EXAMPLES_KEY: examples}
  if transform_graph is not None:
    raise ValueError(
        f"{component}: 'transform_graph' works on examples; a graph held in memory is not "
        "transformed. Pre-sample subgraphs with GraphSampler (or LinkSampler), run Transform "
        "on them and give its examples instead.")
  if link_config:
    if not isinstance(link_config, Mapping):
      raise ValueError(f"{component}: 'link_config' must be a dict (LinkSampler's).")
    return {spec_lib.LINK_CONFIG_KEY: json_utils.dumps(dict(link_config))}
  if not isinstance(seeds, Mapping):
    raise ValueError(f"{component}: 'seeds' must be a dict {{split: seed table}}, got "
                     f"{type(seeds).__name__}.")
  if bool(sampling_config) == bool(sampling_spec):
    raise ValueError(f"{component} with 'seeds' needs exactly one of 'sampling_config' or "
                     "'sampling_spec' (as GraphSampler).")
  return {spec_lib.SEEDS_KEY: json_utils.dumps(dict(seeds)),
          spec_lib.SAMPLING_CONFIG_KEY: (json_utils.dumps(dict(sampling_config))
                                         if sampling_config else None),
          spec_lib.SAMPLING_SPEC_KEY: sampling_spec}


def executor_class(cfg: config_lib.TrainerConfig) -> type[base_executor.BaseExecutor]:
  """The executor of a GnnTrainer step with ``cfg``.

  The launcher's for a job, else the trainer's.
  """
  if cfg.launches:
    return launcher.Executor
  return executor.Executor


def package_user_module(component: base_component.BaseComponent) -> None:
  """Packages ``module_file`` as a wheel for remote runners, as the stock Trainer does.

  At compile/run time TFX writes the wheel under ``<pipeline_root>/_wheels``
  and rewrites the parameter to ``module_path``, so Kubeflow / Vertex get the
  module without baking it into the image.
  """
  if udf_utils.should_package_user_modules():
    udf_utils.add_user_module_dependency(
        component, spec_lib.MODULE_FILE_KEY, spec_lib.MODULE_PATH_KEY)


__all__ = ["GnnTrainer"]
