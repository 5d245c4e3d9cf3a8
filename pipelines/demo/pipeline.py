"""The demo pipeline, a complete TFX pipeline around GnnTrainer:

ImportExampleGen -> StatisticsGen -> SchemaGen -> Transform -> (GnnTuner ->)
GnnTrainer -> Evaluator -> Pusher, with an Importer for the graph schema.

* Transform (module_files/demo_transform.py) z-scores the float node feature
  and turns the string node feature into vocabulary ids; GnnTrainer trains on
  the transformed examples, derives the transformed graph schema itself, and
  exports a model that serves *raw* examples.
* Evaluator (TFMA) reads the label from ``context/label`` of the raw examples
  (the root's label, written there by the data generator; it is not in the graph
  schema, so the model never sees it), computes accuracy and per-class
  precision/recall on the eval split, and blesses above ``min_eval_accuracy``.
* Pusher pushes a blessed model only, to ``serving_dir``.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence

import tensorflow_model_analysis as tfma
# Not re-exported at the top level by TFMA 0.52 (TFX 1.21); the proto exists on both stacks.
from tensorflow_model_analysis.proto import config_pb2 as tfma_config_pb2
from tfx import v1 as tfx

from gnn_trainer_component import GnnTrainer
from gnn_trainer_component import GnnTuner
from gnn_trainer_component import GraphSchema
from pipelines import REPO_ROOT
from pipelines.runtime import mlmd_connection

DEFAULT_MODULE_FILE = os.path.join(REPO_ROOT, "module_files", "demo_node_classification.py")
DEFAULT_TRANSFORM_FILE = os.path.join(REPO_ROOT, "module_files", "demo_transform.py")
DEFAULT_CUSTOM_CONFIG = {"global_batch_size": 32, "epochs": 5, "seed": 1,
                         "summarize_every_n_steps": 50}
LABEL_KEY = "context/label"
NUM_CLASSES = 3


def eval_config(min_accuracy: float) -> tfma.EvalConfig:
  """TFMA config: accuracy (with the blessing threshold) and per-class metrics."""
  return tfma.EvalConfig(
      model_specs=[tfma.ModelSpec(signature_name="serving_default", label_key=LABEL_KEY,
                                  prediction_key="logits", model_type="tf_generic")],
      slicing_specs=[tfma.SlicingSpec()],
      metrics_specs=[
          tfma.MetricsSpec(metrics=[
              tfma.MetricConfig(class_name="ExampleCount"),
              tfma.MetricConfig(
                  class_name="SparseCategoricalAccuracy",
                  threshold=tfma.MetricThreshold(value_threshold=tfma.GenericValueThreshold(
                      lower_bound={"value": min_accuracy}))),
              tfma.MetricConfig(class_name="MultiClassConfusionMatrixPlot"),
          ]),
          tfma.MetricsSpec(
              metrics=[tfma.MetricConfig(class_name="Precision", config='"top_k": 1'),
                       tfma.MetricConfig(class_name="Recall", config='"top_k": 1')],
              binarize=tfma_config_pb2.BinarizationOptions(class_ids={"values": list(range(NUM_CLASSES))})),
      ])


def transform_stages(transform: bool) -> dict[str, Any]:
  """:func:`create_pipeline`'s arguments for the demo with StatisticsGen, SchemaGen and
  Transform before GnnTrainer (``transform``), or with GnnTrainer on the raw examples."""
  return {"with_statistics": transform,
          "transform_module_file": DEFAULT_TRANSFORM_FILE if transform else None}


def create_pipeline(*, pipeline_name: str, pipeline_root: str, examples_dir: str,
                    graph_schema_dir: str, metadata: mlmd_connection.Metadata,
                    module_file: str = DEFAULT_MODULE_FILE,
                    transform_module_file: Optional[str] = DEFAULT_TRANSFORM_FILE,
                    train_steps: Optional[int] = 150,
                    eval_steps: Optional[int] = None,
                    custom_config: Optional[Mapping[str, Any]] = None,
                    with_statistics: bool = True,
                    serving_dir: Optional[str] = None,
                    min_eval_accuracy: float = 0.6,
                    tuning_config: Optional[Mapping[str, Any]] = None,
                    enable_cache: bool = True,
                    beam_pipeline_args: Optional[Sequence[str]] = None) -> tfx.dsl.Pipeline:
  """Builds the demo pipeline.

  Args:
    pipeline_name: Name in MLMD.
    pipeline_root: Root of all artifacts.
    examples_dir: Folder with ``train/*`` and ``eval/*`` TFRecords of graph tf.Examples.
    graph_schema_dir: Folder with ``graph_schema.pbtxt`` (of the raw examples).
    metadata: Where MLMD lives: a SQLite file, or a ``ConnectionConfig``
      (e.g. a MySQL/MariaDB server: ``pipelines.runtime.mlmd_connection.prepare``).
    module_file: GnnTrainer user module.
    transform_module_file: Transform module; None trains on raw examples
      (then ``with_statistics`` may be False too, for a minimal pipeline).
    train_steps: Total training steps (None: epochs over the split).
    eval_steps: Validation steps (None: the whole eval split).
    custom_config: GnnTrainer custom_config (default: DEFAULT_CUSTOM_CONFIG).
    with_statistics: Include StatisticsGen and SchemaGen (needed by Transform).
    serving_dir: If set, add Evaluator and Pusher (pushing blessed models there).
    min_eval_accuracy: The Evaluator's blessing threshold.
    tuning_config: If set, a GnnTuner (same inputs, module and config as
      GnnTrainer; this search, over the module's ``hyperparameter_space``)
      feeds its ``best_hyperparameters`` to GnnTrainer.
    enable_cache: TFX caching.
    beam_pipeline_args: Beam flags of the Beam steps (StatisticsGen, SchemaGen,
      Transform, Evaluator); see gnn_trainer_component/deploy/beam_args.py for the runners.
  """
  example_gen = tfx.components.ImportExampleGen(
      input_base=examples_dir,
      input_config=tfx.proto.Input(splits=[
          tfx.proto.Input.Split(name="train", pattern="train/*"),
          tfx.proto.Input.Split(name="eval", pattern="eval/*"),
      ]))
  graph_schema = tfx.dsl.Importer(
      source_uri=graph_schema_dir, artifact_type=GraphSchema).with_id("graph_schema_importer")
  components = [example_gen, graph_schema]
  schema = transform = None
  if with_statistics or transform_module_file:
    statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
    schema_gen = tfx.components.SchemaGen(
        statistics=statistics_gen.outputs["statistics"], infer_feature_shape=True)
    components += [statistics_gen, schema_gen]
    schema = schema_gen.outputs["schema"]
  if transform_module_file:
    transform = tfx.components.Transform(
        examples=example_gen.outputs["examples"], schema=schema,
        module_file=transform_module_file)
    components.append(transform)
  # What defines a training run: GnnTrainer's, and every GnnTuner trial's.
  training = dict(
      examples=(transform.outputs["transformed_examples"] if transform
                else example_gen.outputs["examples"]),
      transform_graph=transform.outputs["transform_graph"] if transform else None,
      graph_schema=graph_schema.outputs["result"],
      schema=schema,
      module_file=module_file,
      train_args=tfx.proto.TrainArgs(num_steps=train_steps),
      eval_args=tfx.proto.EvalArgs(num_steps=eval_steps),
      custom_config=dict(DEFAULT_CUSTOM_CONFIG if custom_config is None else custom_config))
  tuner = None
  if tuning_config is not None:
    tuner = GnnTuner(tuning_config=dict(tuning_config), **training)
    components.append(tuner)
  trainer = GnnTrainer(
      hyperparameters=tuner.outputs["best_hyperparameters"] if tuner else None, **training)
  components.append(trainer)
  if serving_dir:
    evaluator = tfx.components.Evaluator(
        examples=example_gen.outputs["examples"],  # raw: the model serves raw examples
        model=trainer.outputs["model"],
        eval_config=eval_config(min_eval_accuracy))
    pusher = tfx.components.Pusher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        push_destination=tfx.proto.PushDestination(
            filesystem=tfx.proto.PushDestination.Filesystem(base_directory=serving_dir)))
    components += [evaluator, pusher]
  return tfx.dsl.Pipeline(
      pipeline_name=pipeline_name,
      pipeline_root=pipeline_root,
      components=components,
      enable_cache=enable_cache,
      beam_pipeline_args=list(beam_pipeline_args or []),
      metadata_connection_config=mlmd_connection.pipeline_connection_config(metadata))
