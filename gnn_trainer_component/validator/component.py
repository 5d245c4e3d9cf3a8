"""GraphValidator: anomalies of a graph's statistics; a pipeline trains only on a valid graph.

Example::

  stats = GraphStatisticsGen(graph_schema=tables.outputs["result"], seeds=SEEDS,
                             statistics_config={"seed_node_set": "paper", "label": "label"})
  last = last_graph_statistics()  # this pipeline's earlier snapshots' statistics
  validator = GraphValidator(statistics=stats.outputs["statistics"],
                             graph_statistics=stats.outputs["graph_statistics"],
                             baseline_statistics=last.outputs["baseline_statistics"])
  with tfx.dsl.Cond(graph_is_valid(validator)):
    sampler = GraphSampler(...)
    trainer = GnnTrainer(...)
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Union

from tfx import types
from tfx import v1 as tfx
from tfx.dsl.components.base import base_component
from tfx.dsl.components.base import executor_spec
from tfx.dsl.components.common import resolver

from gnn_trainer_component import artifacts
from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.validator import config as config_lib
from gnn_trainer_component.validator import executor


class GraphValidator(base_component.BaseComponent):
  """Holds GraphStatisticsGen's statistics to bounds, and to the last snapshot's.

  Each anomaly (``gnn_trainer_component.validator.config.SEVERITIES``: dangling edges,
  duplicate ids, an emptied edge set, isolated nodes, unknown or repeated seeds, splits that
  share seeds, edges at or after their seed's time, a feature the label leaks into, label
  skew between splits; against the last snapshot: node and edge counts, degree
  distributions, label shares, and every table feature's drift by TFDV's comparators) has a
  bound and a severity in ``validation_config``. Anomalies of severity "error" make the
  graph invalid: a pipeline runs its samplers and trainer under ``tfx.dsl.Cond`` on
  :func:`graph_is_valid`, so they do not run on it and no Model is published.

  Outputs:
    anomalies: ``ExampleAnomalies`` (the stock ExampleValidator's layout): per split (each
      table's, ``nodes-<set>`` / ``edges-<set>``, and ``seeds``) ``SchemaDiff.pb``, TFDV's
      ``Anomalies``; ``anomalies.json``; custom properties ``errors``, ``warnings``,
      ``valid``, ``blessed`` (split -> 1 without anomalies) and the statistics' URIs.
  """

  SPEC_CLASS = spec_lib.GraphValidatorSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(self, statistics: types.BaseChannel, graph_statistics: types.BaseChannel,
               baseline_statistics: Optional[types.BaseChannel] = None,
               validation_config: Optional[Union[Mapping[str, Any], str]] = None):
    """Constructs a GraphValidator.

    Args:
      statistics: GraphStatisticsGen's ``statistics`` (TFDV's, per table).
      graph_statistics: GraphStatisticsGen's ``graph_statistics``.
      baseline_statistics: Earlier snapshots' ``graph_statistics``
        (:func:`last_graph_statistics`); the newest one older than this snapshot's is
        compared. None: no comparison.
      validation_config: Bounds and severities (a dict or its JSON; see
        ``gnn_trainer_component.validator.config``); default: every key's default.

    Raises:
      ValidationConfigError: on an invalid config, at pipeline-definition time.
    """
    spec = spec_lib.GraphValidatorSpec(
        statistics=statistics, graph_statistics=graph_statistics,
        baseline_statistics=baseline_statistics,
        validation_config=config_lib.dumps(config_lib.parse(validation_config)),
        anomalies=types.Channel(type=tfx.types.standard_artifacts.ExampleAnomalies))
    super().__init__(spec=spec)


#: How many of the newest statistics the resolver gives: the resolver may run after this
#: run's GraphStatisticsGen, and GraphValidator compares the newest one older than its own.
NEWEST = 2


class LatestStatisticsStrategy(resolver.ResolverStrategy):
  """The newest :data:`NEWEST` artifacts of each channel, newest first; none on a first run.

  TFX's ``LatestArtifactStrategy`` resolves nothing (a failed resolver execution) until
  every channel holds as many artifacts as it wants; this one gives what there is.
  """

  def resolve_artifacts(self, store: Any, input_dict: Dict[str, List[types.Artifact]]
                        ) -> Optional[Dict[str, List[types.Artifact]]]:
    """``{key: the newest artifacts}`` (fewer, or none, where there are fewer)."""
    del store  # the channels hold every candidate
    return {key: sorted(artifacts_, key=lambda a: a.id, reverse=True)[:NEWEST]
            for key, artifacts_ in input_dict.items()}


def last_graph_statistics(component_id: str = "GraphStatisticsGen") -> tfx.dsl.Resolver:
  """A resolver of the newest statistics of ``component_id`` (a GraphStatisticsGen).

  :class:`LatestStatisticsStrategy` over that component's ``graph_statistics``. Output
  ``baseline_statistics``; empty on a first run. It runs wherever TFX runs custom resolver
  strategies (LocalDagRunner, Kubeflow Pipelines); Vertex AI Pipelines compiles only TFX's
  built-in strategies (there, resolve with ``tfx.dsl.experimental.LatestArtifactStrategy``).
  """
  return tfx.dsl.Resolver(
      strategy_class=LatestStatisticsStrategy,
      baseline_statistics=tfx.dsl.Channel(
          type=artifacts.GraphStatistics, producer_component_id=component_id,
          output_key=spec_lib.GRAPH_STATISTICS_KEY),
  ).with_id(f"{component_id}_last_snapshot")


def graph_is_valid(validator: GraphValidator):
  """The predicate for ``tfx.dsl.Cond``: the graph had no anomaly of severity "error"."""
  return validator.outputs[spec_lib.ANOMALIES_KEY].future()[0].custom_property("valid") == 1


__all__ = ["GraphValidator", "LatestStatisticsStrategy", "graph_is_valid",
           "last_graph_statistics"]
