"""GraphValidator executor: a graph's statistics -> TFDV ``Anomalies`` per split, and a verdict.

The anomalies artifact is the stock ExampleValidator's: one ``Split-<name>/SchemaDiff.pb``
per split (each table's, and ``seeds``), plus ``anomalies.json`` (every anomaly in one
list) and ``report.png`` (the degree distributions against the last snapshot's, the
anomalies per split). Its custom properties say whether the graph may be trained on: ``errors`` (the
anomalies of severity "error"), ``warnings``, ``valid`` (1 without errors) and, as
ExampleValidator's, ``blessed`` (split -> 1 without any anomaly, else 0). The executor
succeeds either way: ``valid`` is what a pipeline's ``tfx.dsl.Cond`` reads
(:func:`~gnn_trainer_component.validator.component.graph_is_valid`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, List, Optional

from absl import logging
import tensorflow as tf
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils

from gnn_trainer_component import artifacts
from gnn_trainer_component import outputs
from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.graph import feature_statistics
from gnn_trainer_component.validator import anomalies as anomalies_lib
from gnn_trainer_component.validator import checks
from gnn_trainer_component.validator import config as config_lib
from gnn_trainer_component.validator import report

WHO = "GraphValidator"
#: The anomalies' file (TFX ExampleValidator's name) in each split's folder.
ANOMALIES_FILE = "SchemaDiff.pb"
#: Every anomaly in one JSON list, at the artifact's root.
SUMMARY_FILE = "anomalies.json"


def read_statistics(artifact: types.Artifact) -> Dict[str, Any]:
  """The graph statistics of a GraphStatistics artifact."""
  with tf.io.gfile.GFile(os.path.join(artifact.uri, artifacts.GRAPH_STATISTICS_FILE)) as f:
    return json.load(f)


def last_snapshot(current: types.Artifact,
                  candidates: Optional[List[types.Artifact]]) -> Optional[types.Artifact]:
  """The newest candidate older than ``current``: the last snapshot's statistics, or None.

  The resolver may run before or after this run's GraphStatisticsGen, so its candidates may
  hold this run's statistics: they are skipped.
  """
  older = [a for a in candidates or [] if a.uri != current.uri
           and (not current.id or not a.id or a.id < current.id)]
  return max(older, key=lambda a: a.id) if older else None


def validate(stats: types.Artifact, graph: Dict[str, Any], baseline: Optional[types.Artifact],
             before: Optional[Dict[str, Any]], cfg: config_lib.ValidationConfig
             ) -> tuple[list[str], list[checks.Anomaly]]:
  """``(splits, anomalies)`` of this snapshot's statistics (against ``baseline``'s).

  Args:
    stats: This snapshot's TFDV statistics (``ExampleStatistics``).
    graph: Its graph statistics.
    baseline: The last snapshot's ``GraphStatistics``, or None.
    before: Its graph statistics, or None.
    cfg: The bounds and severities.
  """
  splits = artifact_utils.decode_split_names(stats.split_names) + [checks.SEEDS_SPLIT]
  found = checks.check(graph, cfg, before)
  if baseline is not None:
    base_uri = baseline.get_string_custom_property(artifacts.STATISTICS_URI_PROPERTY)
    for split in splits[:-1]:
      if base_uri and tf.io.gfile.exists(feature_statistics.stats_path(base_uri, split)):
        found += anomalies_lib.feature_drift(split, feature_statistics.load(stats.uri, split),
                                             feature_statistics.load(base_uri, split), cfg)
  return splits, found


class Executor(base_executor.BaseExecutor):
  """Holds a graph's statistics to the configured bounds and writes the anomalies."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    """Writes the anomalies per split and the verdict's properties.

    Args:
      input_dict: ``statistics`` and ``graph_statistics``: GraphStatisticsGen's outputs;
        ``baseline_statistics`` (optional): earlier snapshots' GraphStatistics (the
        newest older one is compared).
      output_dict: ``anomalies``: ``ExampleAnomalies``.
      exec_properties: ``validation_config`` (JSON, see :mod:`config`).

    Raises:
      ValidationConfigError: a bad config; nothing is published.
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    cfg = config_lib.parse(exec_properties.get(spec_lib.VALIDATION_CONFIG_KEY))
    stats = artifact_utils.get_single_instance(input_dict[spec_lib.STATISTICS_KEY])
    graph = artifact_utils.get_single_instance(input_dict[spec_lib.GRAPH_STATISTICS_KEY])
    baseline = last_snapshot(graph, input_dict.get(spec_lib.BASELINE_STATISTICS_KEY))
    now = read_statistics(graph)
    before = read_statistics(baseline) if baseline is not None else None
    splits, found = validate(stats, now, baseline, before, cfg)
    out = artifact_utils.get_single_instance(output_dict[spec_lib.ANOMALIES_KEY])
    out.split_names = artifact_utils.encode_split_names(splits)
    for split in splits:
      outputs.write_atomically(os.path.join(out.uri, f"Split-{split}", ANOMALIES_FILE),
                               anomalies_lib.to_proto(
                                   [a for a in found if a.split == split]).SerializeToString())
    outputs.write_atomically(os.path.join(out.uri, SUMMARY_FILE), json.dumps(
        [dataclasses.asdict(a) for a in found], indent=1).encode("utf-8"))
    report.write(os.path.join(out.uri, report.REPORT_FILE), now, before, splits, found)
    errors = sum(a.severity == config_lib.ERROR for a in found)
    outputs.set_properties(out, {
        "errors": errors, "warnings": len(found) - errors, "valid": int(not errors),
        "graph_statistics_uri": graph.uri,
        "baseline_statistics_uri": baseline.uri if baseline is not None else ""})
    out.set_json_value_custom_property(
        "blessed", {s: int(not any(a.split == s for a in found)) for s in splits})
    for anomaly in found:
      log = logging.error if anomaly.severity == config_lib.ERROR else logging.warning
      log("%s: %s %s: %s", WHO, anomaly.severity, anomaly.name, anomaly.description)
    logging.info("%s: %d error(s), %d warning(s)%s -> %s", WHO, errors, len(found) - errors,
                 f" against {baseline.uri}" if baseline is not None else "", out.uri)
