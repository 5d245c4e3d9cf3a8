"""GraphStatisticsGen executor: a graph's tables -> TFDV's statistics per table, graph statistics.

The tables are read in memory with their faults counted, not refused (duplicate ids,
dangling ends, seeds that are not nodes: the statistics report them, GraphValidator
bounds them). Everything is computed before anything is written; TFX publishes the
outputs only when the execution succeeds.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Mapping, Optional

from absl import logging
from tfx import types
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils

from gnn_trainer_component import artifacts
from gnn_trainer_component import graph_schema
from gnn_trainer_component import outputs
from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.beam import statistics as beam_statistics
from gnn_trainer_component.graph import feature_statistics
from gnn_trainer_component.graph import table_statistics
from gnn_trainer_component.graph import tables
from gnn_trainer_component.statistics_gen import config as config_lib
from gnn_trainer_component.statistics_gen import report



def compute(data_dir: str, spec: table_statistics.StatisticsSpec, *,
            make_pipeline: Optional[Callable[[], Any]] = None
            ) -> tuple[Dict[str, Any], Dict[str, Any]]:
  """``(graph statistics, split -> TFDV statistics)`` of the graph in ``data_dir``.

  In memory; with ``make_pipeline`` (it returns a ``beam.Pipeline``), on Beam.

  Raises:
    GraphInputError: a bad name in ``spec``, or a table that cannot be read (a
      malformed row or value, a missing file), naming it; a Parquet table on Beam.
  """
  schema = graph_schema.read_artifact_schema(data_dir)
  config_lib.check(spec, schema)
  if make_pipeline is not None:
    return beam_statistics.run(schema, data_dir, spec, config_lib.WHO, make_pipeline)
  nodes, edges = tables.read_graph_tables(schema, data_dir, config_lib.WHO, lenient=True)
  seeds = {split: table_statistics.read_seeds(
      data_dir, filename, nodes[spec.seed_node_set], split, config_lib.WHO,
      with_times=bool(spec.times))
           for split, filename in sorted(spec.seeds.items())}
  stats = table_statistics.graph_statistics(schema, nodes, edges, seeds, spec)
  features = {}
  for kind, group in (("node", nodes), ("edge", edges)):
    for name, table in sorted(group.items()):
      split = feature_statistics.split_name(kind, name)
      rows = len(table.ids) if kind == "node" else len(table.source)
      kept = {k: v for k, v in table.features.items() if k != tables.NODE_ID_FEATURE}
      features[split] = feature_statistics.table_statistics(kept, rows, split)
  return stats, features


def summary(stats: Mapping[str, Any]) -> Dict[str, int]:
  """The counts recorded as the GraphStatistics artifact's custom properties."""
  edge_sets = stats["edge_sets"].values()
  return {
      "nodes": sum(s["nodes"] for s in stats["node_sets"].values()),
      "edges": sum(s["edges"] for s in edge_sets),
      "duplicate_ids": sum(s["duplicate_ids"] for s in stats["node_sets"].values()),
      "dangling_edges": sum(s["dangling_sources"] + s["dangling_targets"] for s in edge_sets),
      "seeds": sum(s["seeds"] for s in stats["splits"].values()),
  }


class Executor(base_beam_executor.BaseBeamExecutor):
  """Computes the statistics of a graph's tables and writes both artifacts."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    """Writes TFDV's statistics per table and the graph statistics.

    Args:
      input_dict: ``graph_schema``: the graph (its folder holds the tables).
      output_dict: ``statistics``: ``ExampleStatistics``, one split per table
        (``nodes-<node set>``, ``edges-<edge set>``: ``Split-<name>/FeatureStats.pb``);
        ``graph_statistics``: ``GraphStatistics`` (``graph_statistics.json``,
        ``report.png``).
      exec_properties: ``statistics_config`` and ``seeds`` (JSON, see :mod:`config`).

    Raises:
      StatisticsConfigError, GraphInputError: on bad input; nothing is published.
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    cfg = config_lib.parse(exec_properties.get(spec_lib.STATISTICS_CONFIG_KEY),
                           exec_properties.get(spec_lib.SEEDS_KEY))
    data_dir = artifact_utils.get_single_uri(input_dict[spec_lib.GRAPH_SCHEMA_KEY])
    stats, features = compute(data_dir, cfg.spec, make_pipeline=(
        self._make_beam_pipeline if cfg.engine == config_lib.BEAM else None))
    out = artifact_utils.get_single_instance(output_dict[spec_lib.STATISTICS_KEY])
    out.split_names = artifact_utils.encode_split_names(sorted(features))
    for split, feature_stats in features.items():
      outputs.write_atomically(feature_statistics.stats_path(out.uri, split),
                               feature_stats.SerializeToString())
    graph = artifact_utils.get_single_instance(output_dict[spec_lib.GRAPH_STATISTICS_KEY])
    outputs.write_atomically(os.path.join(graph.uri, artifacts.GRAPH_STATISTICS_FILE),
                             json.dumps(stats, indent=1, sort_keys=True).encode("utf-8"))
    report.write(stats, os.path.join(graph.uri, report.REPORT_FILE))
    # The TFDV statistics beside these, for GraphValidator's drift against this snapshot.
    outputs.set_properties(graph, {**summary(stats), artifacts.STATISTICS_URI_PROPERTY: out.uri})
    logging.info("%s: %s -> %s", config_lib.WHO, summary(stats), graph.uri)
