"""The graph's validation at the head of a pipeline: statistics, anomalies, the gate.

Importer (the tables) -> GraphStatisticsGen -> GraphValidator (against the last run's
statistics, through ``last_graph_statistics``); the pipelines build the rest inside
``tfx.dsl.Cond(gate)``, so nothing trains on a graph with an anomaly of severity "error".
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from gnn_trainer_component import GraphStatisticsGen
from gnn_trainer_component import GraphValidator
from gnn_trainer_component.validator.component import graph_is_valid
from gnn_trainer_component.validator.component import last_graph_statistics


def validate_graph(tables, *, seeds: Optional[Mapping[str, str]] = None,
                   statistics_config: Optional[Mapping[str, Any]] = None,
                   validation_config: Optional[Mapping[str, Any]] = None
                   ) -> tuple[list, Any]:
  """``(components, gate)``: the graph's statistics and validator, and the ``Cond`` predicate.

  Args:
    tables: The Importer of the tables (its ``result``: a ``GraphSchema``).
    seeds: Split -> seed table, as GraphSampler takes them.
    statistics_config: GraphStatisticsGen's (the seed node set, label, times).
    validation_config: GraphValidator's bounds and severities (default: its defaults).
  """
  statistics = GraphStatisticsGen(graph_schema=tables.outputs["result"], seeds=seeds,
                                  statistics_config=statistics_config)
  last = last_graph_statistics()
  validator = GraphValidator(
      statistics=statistics.outputs["statistics"],
      graph_statistics=statistics.outputs["graph_statistics"],
      baseline_statistics=last.outputs["baseline_statistics"],
      validation_config=validation_config)
  return [statistics, last, validator], graph_is_valid(validator)


def verdict(metadata_path: str, pipeline_name: str) -> dict[str, Any]:
  """GraphValidator's newest verdict in a pipeline's ML Metadata, with the graph's size.

  Returns:
    ``{"valid", "errors", "warnings", "nodes", "edges", "seeds", "anomalies"}``: the
    anomalies as GraphValidator lists them (``split``, ``name``, ``severity``, ...).
  """
  import json  # pylint: disable=g-import-not-at-top
  import os  # pylint: disable=g-import-not-at-top
  from pipelines.runtime import mlmd_utils  # pylint: disable=g-import-not-at-top
  anomalies = mlmd_utils.latest_artifact(metadata_path, "ExampleAnomalies", pipeline_name,
                                         producer="GraphValidator")
  found = mlmd_utils.custom_properties(anomalies)
  counts = mlmd_utils.custom_properties(mlmd_utils.latest_artifact(
      metadata_path, "gnn_trainer_component.GraphStatistics", pipeline_name,
      producer="GraphStatisticsGen"))
  with open(os.path.join(anomalies.uri, "anomalies.json"), encoding="utf-8") as f:
    listed = json.load(f)
  return {"valid": bool(found["valid"]), "errors": found["errors"],
          "warnings": found["warnings"],
          **{k: counts[k] for k in ("nodes", "edges", "seeds")}, "anomalies": listed}
