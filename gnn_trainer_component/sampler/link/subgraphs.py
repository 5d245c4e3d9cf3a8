"""LinkSampler's own logic: neighbour choice per node, example assembly, keys and counts.

The link rules (config, split, negatives, readout) are the graph core's
(:mod:`gnn_trainer_component.graph.links`); this is what the Beam pipeline
(:mod:`pipeline`) adds: each example is the union of a subgraph sampled
around the source and one around the target of one supervised pair, plus the
pair's readout (:mod:`gnn_trainer_component.graph.readout`).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component import graph_schema
from gnn_trainer_component.graph import encoding
from gnn_trainer_component.graph import links
from gnn_trainer_component.graph import readout
from gnn_trainer_component.graph.errors import GraphInputError

Pair = links.Pair


# ----------------------------------------------------------------------------
# Neighbour sampling of one (example, node, op).


def sample_neighbours(candidates: Sequence[Any], fan_out: int, *, seed: int,
                      example: bytes, op_name: str, node: bytes) -> list[Any]:
  """Up to ``fan_out`` of ``candidates`` uniformly without replacement.

  Seeded by (seed, example, op, node): the same call always picks the same ones.
  """
  if len(candidates) <= fan_out:
    return list(candidates)
  picked = links.split_rng(seed, example, op_name, node).choice(len(candidates), fan_out,
                                                            replace=False)
  return [candidates[i] for i in sorted(picked)]


def is_supervised_edge(src: bytes, tgt: bytes, pair: Pair, undirected: bool) -> bool:
  """Whether message edge ``src -> tgt`` is the example's supervised pair."""
  if (src, tgt) == tuple(pair):
    return True
  return undirected and (tgt, src) == tuple(pair)


# ----------------------------------------------------------------------------
# Example assembly.


def _features(features: Mapping[str, Any], items: Sequence[Any],
              what: str) -> dict[str, np.ndarray]:
  """Each schema feature's values over ``items`` (tf.Examples), concatenated in item order."""
  out = {}
  for name, feature_pb in features.items():
    kind = graph_schema.example_kind(feature_pb.dtype)
    width = int(np.prod([d.size for d in feature_pb.shape.dim])) if feature_pb.shape.dim else 1
    values = []
    for item_id, item in items:
      item_values = (getattr(item.features.feature[name], kind).value
                     if name in item.features.feature else ())
      if width > 0 and len(item_values) != width:
        raise GraphInputError(
            f"LinkSampler: {what} {item_id!r}: feature {name!r} has {len(item_values)} "
            f"values, the graph schema says {width}.")
      values.extend(item_values)
    array = encoding.values_array(values, feature_pb.dtype)
    out[name] = array.reshape(len(items), -1) if items else array  # a row per item
  return out


def build_example(schema: tfgnn.GraphSchema, link: links.LinkConfig, pair: Pair, label: float,
                  nodes: Mapping[str, Sequence[tuple[bytes, Any]]],
                  edges: Mapping[str, Iterable[tuple[bytes, bytes, Any]]]):
  """The tf.Example of one link-prediction subgraph (GraphTensor encoding).

  Args:
    schema: Input graph schema (its features are written).
    link: The config (for the edge set's endpoint node sets).
    pair: The supervised (source id, target id).
    label: 1.0 or 0.0.
    nodes: Node set -> ``(id, tf.Example)`` of its sampled nodes. The
      endpoints come first in their node set (source first).
    edges: Edge set -> ``(source id, target id, tf.Example)`` of the sampled
      edges (duplicates count once).

  Returns:
    The ``tf.train.Example``.
  """
  example = tf.train.Example()
  index: dict[str, dict[bytes, int]] = {}
  for set_name in schema.node_sets:
    items = list(nodes.get(set_name, ()))
    index[set_name] = {node_id: i for i, (node_id, _) in enumerate(items)}
    if len(index[set_name]) != len(items):
      raise ValueError(f"duplicate nodes in node set {set_name!r}")
    encoding.write_nodes([example], set_name, np.array([len(items)]),
                         _features(schema.node_sets[set_name].features, items,
                                   f"node {set_name!r}"))
  for set_name, edge_set in schema.edge_sets.items():
    unique = {}
    for src, tgt, ex in edges.get(set_name, ()):
      unique.setdefault((src, tgt), ex)
    ordered = sorted((((index[edge_set.source][s], index[edge_set.target][t]), (s, t), ex)
                      for (s, t), ex in unique.items()), key=lambda row: row[0])
    encoding.write_edges(
        [example], set_name, np.array([len(ordered)]),
        np.array([i for (i, _), _, _ in ordered], np.int64),
        np.array([j for (_, j), _, _ in ordered], np.int64),
        _features(edge_set.features, [(f"{s!r}->{t!r}", ex) for _, (s, t), ex in ordered],
                  f"edge {set_name!r}"))
  link_edge_set = schema.edge_sets[link.edge_set]
  readout.add_pair_readout(example, index[link_edge_set.source][pair[0]],
                           index[link_edge_set.target][pair[1]], label=label)
  return example


def ordered_nodes(node_set: str, ids: Iterable[bytes], link_edge_set: tfgnn.proto.EdgeSet,
                  pair: Pair) -> list[bytes]:
  """The node ids of one node set in example order: endpoints first, then sorted."""
  first = []
  if node_set == link_edge_set.source:
    first.append(pair[0])
  if node_set == link_edge_set.target and pair[1] not in first:
    first.append(pair[1])
  rest = sorted(set(ids) - set(first))
  return first + rest


def example_key(split: str, index: int) -> bytes:
  """The id of the ``index``-th supervised pair of ``split``."""
  return f"{split}/{index:09d}".encode()


def split_of(key: bytes) -> str:
  return key.decode("utf-8").split("/", 1)[0]


def supervision(positives: Mapping[str, Sequence[Pair]],
                negatives: Mapping[str, Sequence[Pair]], link: links.LinkConfig
                ) -> dict[str, list[tuple[bytes, Pair, float]]]:
  """Split -> ``(example key, pair, label)``, positives and negatives in a seeded random order.

  The order is the order the examples are written in (on the DirectRunner;
  other Beam runners do not keep any): a file of all positives and then all
  negatives would give a trainer with a shuffle buffer smaller than the split
  one-label batches.
  """
  out = {}
  for split in sorted(positives):
    rows = [(p, 1.0) for p in positives[split]] + [(p, 0.0) for p in negatives.get(split, ())]
    order = links.split_rng(link.seed, "order", split).permutation(len(rows))
    out[split] = [(example_key(split, i), rows[j][0], rows[j][1]) for i, j in enumerate(order)]
  return out


def counts(rows: Mapping[str, Sequence[tuple[bytes, Pair, float]]]) -> dict[str, dict[str, int]]:
  """Split -> {"positives": n, "negatives": n} for logging and artifact properties."""
  return {s: {"positives": sum(1 for _, _, y in r if y == 1.0),
              "negatives": sum(1 for _, _, y in r if y == 0.0)} for s, r in rows.items()}
