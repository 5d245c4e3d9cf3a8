"""The in-memory graph as the snapshot a served model samples (``model/served_sampler.py``).

The served sampler runs the training's plan over the same arrays and the same
edge orders as the in-memory kernel (:mod:`choosers`' indexes: ``top_k`` by
weight, the time-aware strategies by time, ties broken alike), so a node's
served subgraph is the one GraphInferrer's in-memory engine samples wherever
the strategy is deterministic or takes every edge.
"""

from __future__ import annotations

import numpy as np

from gnn_trainer_component.graph import sampling
from gnn_trainer_component.in_memory import choosers
from gnn_trainer_component.in_memory import store as store_lib
from gnn_trainer_component.model import served_sampler


def _time_order(edge_set: store_lib.EdgeSet, feature: str) -> served_sampler.TimeOrder:
  order = choosers.time_index(edge_set, feature).order
  values = np.asarray(edge_set.features[feature], dtype=np.float64)
  times = np.unique(values)
  rank = np.searchsorted(times, values[order])
  keys = edge_set.source[order].astype(np.int64) * (len(times) + 1) + rank
  return served_sampler.TimeOrder(order=order.astype(np.int64), keys=keys, times=times)


def snapshot(graph: store_lib.InMemoryGraph,
             *plans: sampling.SamplingPlan) -> served_sampler.Snapshot:
  """The arrays of ``graph`` and the edge orders the ``plans``' strategies read."""
  weights, times = {}, {}
  for plan in plans:
    choosers.prepare(graph, plan)
  for op in (op for plan in plans for op in plan.ops):
    edge_set = graph.edge_sets[op.edge_set]
    if op.strategy == sampling.TOP_K:
      weights[(op.edge_set, op.weight)] = choosers.weight_index(edge_set, op.weight).by_weight
    elif op.time:
      times[(op.edge_set, op.time)] = _time_order(edge_set, op.time)
  return served_sampler.Snapshot(
      node_ids={name: np.asarray(s.ids) for name, s in graph.node_sets.items()},
      node_features={name: dict(s.features) for name, s in graph.node_sets.items()},
      indptr={name: s.indptr for name, s in graph.edge_sets.items()},
      targets={name: s.target for name, s in graph.edge_sets.items()},
      edge_features={name: dict(s.features) for name, s in graph.edge_sets.items()},
      weight_orders=weights, time_orders=times)
