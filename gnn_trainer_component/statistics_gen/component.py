"""GraphStatisticsGen: the statistics of a graph's tables, before anything trains on them.

Example::

  tables = tfx.dsl.Importer(source_uri=data_dir, artifact_type=GraphSchema)
  stats = GraphStatisticsGen(
      graph_schema=tables.outputs["result"], seeds={"train": "train.csv", "test": "test.csv"},
      statistics_config={"seed_node_set": "paper", "label": "label"})
  # stats.outputs["statistics"]: TFDV's, one split per table (tfdv.visualize_statistics).
  # stats.outputs["graph_statistics"]: degrees, dangling edges, labels per split, ...
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Union

from tfx import types
from tfx.dsl.components.base import base_component
from tfx.dsl.components.base import executor_spec

from gnn_trainer_component import artifacts
from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.statistics_gen import config as config_lib
from gnn_trainer_component.statistics_gen import executor


class GraphStatisticsGen(base_component.BaseComponent):
  """Computes the statistics of a graph's node, edge and seed tables.

  The tables are read as GnnTrainer reads them in memory (CSV, TFRecord, Parquet), with
  their faults counted instead of refused: duplicate node ids, edges whose end is not in
  its node table, seeds that repeat or are not nodes.

  Outputs:
    statistics: ``ExampleStatistics``: TFDV's feature statistics of each table, one split
      per table (``nodes-<node set>``, ``edges-<edge set>``), read by TFDV's tools
      (``tfdv.load_statistics``, ``tfdv.visualize_statistics``) and the Kubeflow UI.
    graph_statistics: ``GraphStatistics``: ``graph_statistics.json`` (per node set: nodes,
      duplicate ids; per edge set: edges, self loops, multi-edges, dangling ends, out- and
      in-degree summaries with log2 histograms, label homophily, time range; per split:
      seeds, unknown and repeated ids, labels, edges at or after the seeds' times; the
      overlap of splits; how well each scalar feature predicts the label) and
      ``report.png``; custom properties ``nodes``, ``edges``, ``duplicate_ids``,
      ``dangling_edges``, ``seeds``.
  """

  SPEC_CLASS = spec_lib.GraphStatisticsGenSpec
  EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)

  def __init__(self, graph_schema: types.BaseChannel,
               seeds: Optional[Union[Mapping[str, str], str]] = None,
               statistics_config: Optional[Union[Mapping[str, Any], str]] = None):
    """Constructs a GraphStatisticsGen.

    Args:
      graph_schema: The graph: a ``GraphSchema`` whose folder holds the tables.
      seeds: Split -> seed table, as GraphSampler takes them (optional).
      statistics_config: The seeds' node set, the label and the time features (a dict or
        its JSON; see ``gnn_trainer_component.statistics_gen.config``).

    Raises:
      StatisticsConfigError: on an invalid config, at pipeline-definition time.
    """
    config, seed_tables = config_lib.dumps(config_lib.parse(statistics_config, seeds))
    spec = spec_lib.GraphStatisticsGenSpec(
        graph_schema=graph_schema, seeds=seed_tables, statistics_config=config,
        statistics=types.Channel(type=spec_lib.standard_artifacts.ExampleStatistics),
        graph_statistics=types.Channel(type=artifacts.GraphStatistics))
    super().__init__(spec=spec)


__all__ = ["GraphStatisticsGen"]
