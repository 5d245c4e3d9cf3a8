"""GraphSampler: a TFX Beam component from node/edge tables to subgraph Examples.

Example::

  graph_tables = tfx.dsl.Importer(
      source_uri="path/to/tables",       # graph_schema.pbtxt + tables + seeds
      artifact_type=GraphSchema).with_id("graph_tables")
  sampler = GraphSampler(
      graph_schema=graph_tables.outputs["result"],
      seeds={"train": "seeds-train.csv", "eval": "seeds-eval.csv"},
      sampling_config={"seed_node_set": "paper",
                       "hops": [{"cites": 32}, {"cites": 16}]},
  ).with_beam_pipeline_args(["--direct_num_workers=0"])
  trainer = GnnTrainer(examples=sampler.outputs["examples"],
                       graph_schema=sampler.outputs["output_graph_schema"], ...)
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from tfx import v1 as tfx
from tfx.dsl.components.base import base_beam_component
from tfx.dsl.components.base import executor_spec
from tfx.utils import json_utils

from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.sampler import staging
from gnn_trainer_component.sampler.graph import executor


class GraphSampler(base_beam_component.BaseBeamComponent):
  """Samples a subgraph tf.Example around each seed node on Beam.

  Runs on any Beam runner (DirectRunner locally; Dataflow/Flink/Spark through
  ``with_beam_pipeline_args`` or the pipeline's ``beam_pipeline_args``).

  Outputs:
    examples: ``Examples`` with one ``Split-<name>`` per seeds split (GZIP
      TFRecords ``data_tfrecord-SSSSS-of-NNNNN.gz``, like ExampleGen), custom
      properties ``file_format``, ``payload_format``, ``num_seeds_<split>``.
      The seed is node 0 of its node set in each example.
    output_graph_schema: ``GraphSchema`` that parses those examples.
  """

  SPEC_CLASS = spec_lib.GraphSamplerSpec
  EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)

  def __init__(self,
               graph_schema: tfx.types.BaseChannel,
               seeds: Mapping[str, str],
               sampling_spec: Optional[str] = None,
               sampling_config: Optional[Mapping[str, Any]] = None,
               num_shards: int = 1):
    """Constructs a GraphSampler.

    Args:
      graph_schema: ``GraphSchema`` artifact: a folder with
        ``graph_schema.pbtxt`` whose node/edge sets name CSV or TFRecord tables
        in ``metadata.filename`` (relative to that folder), TF-GNN unigraph
        format (``id``; ``source``, ``target``).
      seeds: Split name -> seed table (node table of the seed node set; only
        the id is read), relative to the graph_schema folder. Each split
        becomes ``Split-<name>``.
      sampling_spec: Text-format ``tensorflow_gnn.sampler.SamplingSpec``.
      sampling_config: Or a simple builder config:
        ``{"seed_node_set": "paper", "hops": [{"cites": 25}, {"cites": 10}]}``
        (one ``{edge_set: fan_out}`` dict per hop). Exactly one of the two.
      num_shards: Output files per split (0: the Beam runner decides).

    Raises:
      ValueError: for invalid parameters, at pipeline-definition time.
    """
    if not seeds or not isinstance(seeds, Mapping):
      raise ValueError("GraphSampler needs seeds={split_name: seed_table, ...}.")
    if bool(sampling_spec) == bool(sampling_config):
      raise ValueError("GraphSampler needs exactly one of 'sampling_spec' or "
                       "'sampling_config'.")
    spec = spec_lib.GraphSamplerSpec(
        graph_schema=graph_schema,
        seeds=json_utils.dumps(dict(seeds)),
        sampling_spec=sampling_spec,
        sampling_config=json_utils.dumps(dict(sampling_config)) if sampling_config else None,
        num_shards=num_shards,
        **staging.output_channels())
    super().__init__(spec=spec)


__all__ = ["GraphSampler"]
