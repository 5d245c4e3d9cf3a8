"""The demo pipeline: ImportExampleGen -> StatisticsGen -> SchemaGen -> GnnTrainer.

The graph schema comes in through an Importer of a folder with
``graph_schema.pbtxt``.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional

from tfx import v1 as tfx

from gnn_trainer_component import GnnTrainer
from gnn_trainer_component import GraphSchema

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_MODULE_FILE = os.path.join(REPO_ROOT, "module_files", "demo_node_classification.py")
DEFAULT_CUSTOM_CONFIG = {"global_batch_size": 32, "epochs": 5, "seed": 1,
                         "summarize_every_n_steps": 50}


def create_pipeline(*, pipeline_name: str, pipeline_root: str, examples_dir: str,
                    graph_schema_dir: str, metadata_path: str,
                    module_file: str = DEFAULT_MODULE_FILE,
                    train_steps: Optional[int] = 150,
                    eval_steps: Optional[int] = None,
                    custom_config: Optional[Mapping[str, Any]] = None,
                    with_statistics: bool = True,
                    enable_cache: bool = True) -> tfx.dsl.Pipeline:
  """Builds the demo pipeline.

  Args:
    pipeline_name: Name in MLMD.
    pipeline_root: Root of all artifacts.
    examples_dir: Folder with ``train/*`` and ``eval/*`` TFRecords of graph tf.Examples.
    graph_schema_dir: Folder with ``graph_schema.pbtxt``.
    metadata_path: SQLite MLMD file.
    module_file: GnnTrainer user module.
    train_steps: Total training steps (None: epochs over the split).
    eval_steps: Validation steps (None: the whole eval split).
    custom_config: GnnTrainer custom_config (default: DEFAULT_CUSTOM_CONFIG).
    with_statistics: Include StatisticsGen and SchemaGen (the TFMD schema is
      passed to GnnTrainer's optional ``schema`` input).
    enable_cache: TFX caching.
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
  schema = None
  if with_statistics:
    statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
    schema_gen = tfx.components.SchemaGen(
        statistics=statistics_gen.outputs["statistics"], infer_feature_shape=False)
    components += [statistics_gen, schema_gen]
    schema = schema_gen.outputs["schema"]
  trainer = GnnTrainer(
      examples=example_gen.outputs["examples"],
      graph_schema=graph_schema.outputs["result"],
      schema=schema,
      module_file=module_file,
      train_args=tfx.proto.TrainArgs(num_steps=train_steps),
      eval_args=tfx.proto.EvalArgs(num_steps=eval_steps),
      custom_config=dict(DEFAULT_CUSTOM_CONFIG if custom_config is None else custom_config))
  components.append(trainer)
  return tfx.dsl.Pipeline(
      pipeline_name=pipeline_name,
      pipeline_root=pipeline_root,
      components=components,
      enable_cache=enable_cache,
      metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
          metadata_path))
