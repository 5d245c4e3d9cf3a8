"""The readout structure sampled subgraphs carry: TF-GNN's ``_readout`` names, one place.

TF-GNN reads a prediction target through "structured readout": an auxiliary
node set ``_readout`` (one node per target) and an edge set
``_readout/<key>`` from each node to read into it
(``tfgnn.keras.layers.StructuredReadout(key)``):

* link prediction: ``_readout/source`` and ``_readout/target`` from a pair's
  two ends, and the pair's ``label`` on the ``_readout`` node (LinkSampler's
  examples, GnnTrainer's link pairs in memory); with ``link_config``'s
  ``edge_features``, also ``_readout/pair`` from node set ``pair``: one node
  per pair holding its own edge's features (a node set of the graph, not an
  auxiliary one, so the features reach the model; it has no other edge, so no
  message passing touches it);
* seeds of merged batches and of the whole graph: ``_readout/seed`` from
  each seed (the names of TF-GNN's ``add_readout_from_first_node``;
  :func:`with_seed_readout`).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component.graph import encoding
from gnn_trainer_component.graph.errors import GraphInputError

READOUT = "_readout"
READOUT_SOURCE = "_readout/source"
READOUT_TARGET = "_readout/target"
#: The structured-readout key of seeds (TF-GNN's ``add_readout_from_first_node`` default):
#: merged batches, the whole graph, the export's parser of served subgraphs.
SEED_KEY = "seed"
READOUT_SEED = f"{READOUT}/{SEED_KEY}"
#: The node set of each pair's own edge's features (``edge_features``), and its readout key.
PAIR = "pair"
READOUT_PAIR = f"{READOUT}/{PAIR}"
#: The ``_readout`` node feature of a pair: 1.0 an edge, 0.0 a sampled negative (with
#: ``link_config``'s ``edge_label``: the edge's value of that feature, as a float).
LABEL = "label"


def with_link_readout(schema: tfgnn.GraphSchema, edge_set, edge_set_name: str, *,
                      who: str, edge_label: str = "",
                      edge_features: Sequence[str] = ()) -> tfgnn.GraphSchema:
  """A copy of ``schema`` with the readout sets of link prediction on ``edge_set``.

  ``edge_label``: the pairs are edges labelled with this feature of theirs
  (``link_config``'s ``edge_label``), not edges against negatives;
  ``edge_features``: the features of ``edge_set`` each pair carries on node set
  :data:`PAIR` (read with structured readout key ``"pair"``).

  Raises:
    GraphInputError: the schema already has a set of one of the readout names.
  """
  out = copy.deepcopy(schema)
  added = (READOUT, READOUT_SOURCE, READOUT_TARGET) + ((PAIR, READOUT_PAIR) if edge_features
                                                        else ())
  for name in added:
    if name in out.node_sets or name in out.edge_sets:
      raise GraphInputError(f"{who}: the graph schema already has a set named {name!r}, "
                            "which the link-prediction examples add.")
  out.node_sets[READOUT].features[LABEL].dtype = tf.float32.as_datatype_enum
  out.node_sets[READOUT].description = (
      f"One node per example: the supervised pair of edge set {edge_set_name!r}; " + (
          f"{LABEL}: the edge's {edge_label!r}." if edge_label else
          f"{LABEL} 1.0 for an edge, 0.0 for a sampled negative."))
  out.edge_sets[READOUT_SOURCE].source = edge_set.source
  out.edge_sets[READOUT_SOURCE].target = READOUT
  out.edge_sets[READOUT_TARGET].source = edge_set.target
  out.edge_sets[READOUT_TARGET].target = READOUT
  if edge_features:
    out.node_sets[PAIR].description = (
        f"One node per pair: its own edge's {list(edge_features)} (link_config's "
        "edge_features), read with structured readout key 'pair'; no edge but the readout's.")
    for name in edge_features:
      out.node_sets[PAIR].features[name].CopyFrom(edge_set.features[name])
    out.edge_sets[READOUT_PAIR].source = PAIR
    out.edge_sets[READOUT_PAIR].target = READOUT
  return out


def add_pair_readout(example: tf.train.Example, source: int, target: int,
                     label: Optional[float] = None,
                     features: Optional[Mapping[str, np.ndarray]] = None) -> None:
  """Adds the readout of one pair to a subgraph's example, with its label if given.

  ``source`` / ``target``: the ends' indices in their node sets. With
  ``(0, 0)`` on GraphSampler's example of one node, the pair (seed, seed):
  what a link-prediction model reads as that node's embedding. ``features``:
  the pair's own edge's ``edge_features`` (each ``[1, ...]``), on its node of
  :data:`PAIR`.
  """
  one, zero = np.ones([1], np.int64), np.zeros([1], np.int64)
  encoding.write_nodes([example], READOUT, one,
                       {} if label is None else {LABEL: np.array([label], np.float32)})
  for name, index in ((READOUT_SOURCE, source), (READOUT_TARGET, target)):
    encoding.write_edges([example], name, one, np.array([index]), zero, {})
  if features:
    encoding.write_nodes([example], PAIR, one, dict(features))
    encoding.write_edges([example], READOUT_PAIR, one, zero, zero, {})


def pair_pieces(features: Mapping[str, tf.Tensor], readout_nodes: tf.Tensor
                ) -> tuple[dict[str, tfgnn.NodeSet], dict[str, tfgnn.EdgeSet]]:
  """``({pair: ...}, {_readout/pair: ...})`` of one graph: pair ``i``'s node read into ``i``.

  ``features``: ``edge_features`` -> ``[pairs, ...]`` values; ``readout_nodes``:
  ``range(pairs)`` of the graph's indices dtype. No features: no pieces.
  """
  if not features:
    return {}, {}
  count = tf.shape(readout_nodes, out_type=readout_nodes.dtype)
  return ({PAIR: tfgnn.NodeSet.from_fields(sizes=count, features=dict(features))},
          {READOUT_PAIR: tfgnn.EdgeSet.from_fields(sizes=count, adjacency=tfgnn.Adjacency
                                                   .from_indices((PAIR, readout_nodes),
                                                                 (READOUT, readout_nodes)))})


@dataclasses.dataclass(frozen=True)
class NodeAsEnd:
  """How a link-prediction model reads one node: as one end of a pair.

  Within one node set, the pair is (node, node). Between two node sets, the
  node is its own end and a node without edges, appended to the other end's
  node set (:func:`encoding.append_node`), stands at the other end: it adds no
  message, so the node's state is its subgraph's alone.

  Attributes:
    end: ``"source"`` or ``"target"``: which end the node is.
    other_node_set: The other end's node set; None: the node's own (the pair
      (node, node)).
    other_layout: The other node set's feature layout (:func:`encoding.node_layout`).
  """
  end: str = "source"
  other_node_set: Optional[str] = None
  other_layout: tuple[encoding.FeatureLayout, ...] = ()


def add_node_readout(example: tf.train.Example, as_end: NodeAsEnd) -> None:
  """Adds the readout of the pair that reads the subgraph's first node as ``as_end`` says."""
  if as_end.other_node_set is None:
    add_pair_readout(example, 0, 0)  # (node, node)
    return
  other = encoding.append_node(example, as_end.other_node_set, as_end.other_layout)
  add_pair_readout(example, *((0, other) if as_end.end == "source" else (other, 0)))


def node_as_end(examples_schema: tfgnn.GraphSchema, graph_schema: tfgnn.GraphSchema,
                node_set: str, *, who: str) -> NodeAsEnd:
  """How a link model whose examples parse with ``examples_schema`` reads a node of ``node_set``.

  Args:
    examples_schema: The link examples' schema (with the readout sets).
    graph_schema: The schema of the graph the subgraphs are sampled from (its
      node sets' features are the examples').
    node_set: The node set of the nodes read.
    who: The component named in errors.

  Raises:
    GraphInputError: ``node_set`` is neither end's node set.
  """
  ends = {end: examples_schema.edge_sets[name].source
          for end, name in (("source", READOUT_SOURCE), ("target", READOUT_TARGET))}
  if ends["source"] == ends["target"] == node_set:
    return NodeAsEnd()
  if node_set not in ends.values():
    raise GraphInputError(
        f"{who}: the model scores pairs from node set {ends['source']!r} to node set "
        f"{ends['target']!r}; node set {node_set!r} is neither end. Sample around nodes of "
        "one of those.")
  end = "source" if ends["source"] == node_set else "target"
  other = ends["target" if end == "source" else "source"]
  try:
    layout = encoding.node_layout(graph_schema.node_sets[other])
  except ValueError as e:
    raise GraphInputError(f"{who}: node set {other!r}: {e}; reading one end of a pair "
                          "between two node sets needs fixed-shape features.") from e
  return NodeAsEnd(end=end, other_node_set=other, other_layout=layout)


def seed_readout_pieces(seed_node_set: str, seeds: tf.Tensor
                        ) -> tuple[dict[str, tfgnn.NodeSet], dict[str, tfgnn.EdgeSet]]:
  """``({_readout: ...}, {_readout/seed: ...})``: one readout node per seed, in order.

  ``seeds``: indices into ``seed_node_set``, of the graph's indices dtype.
  """
  count = tf.shape(seeds, out_type=seeds.dtype)
  nodes = {READOUT: tfgnn.NodeSet.from_fields(sizes=count)}
  edges = {READOUT_SEED: tfgnn.EdgeSet.from_fields(
      sizes=count, adjacency=tfgnn.Adjacency.from_indices(
          (seed_node_set, seeds), (READOUT, tf.range(count[0], dtype=seeds.dtype))))}
  return nodes, edges


def with_seed_readout(graph: tfgnn.GraphTensor, seed_node_set: str,
                      seeds: tf.Tensor) -> tfgnn.GraphTensor:
  """``graph`` plus the readout structure of ``seeds`` (indices into ``seed_node_set``)."""
  nodes, edges = seed_readout_pieces(seed_node_set, tf.cast(seeds, graph.indices_dtype))
  return tfgnn.GraphTensor.from_pieces(context=graph.context,
                                       node_sets={**graph.node_sets, **nodes},
                                       edge_sets={**graph.edge_sets, **edges})


def seed_readout_spec(graph: tfgnn.GraphTensor, seed_node_set: str) -> tfgnn.GraphTensorSpec:
  """The spec of ``graph`` with any seeds' readout (:func:`with_seed_readout`), sizes relaxed."""
  return with_seed_readout(graph, seed_node_set, tf.zeros([0], tf.int64)).spec.relax(
      num_nodes=True, num_edges=True)
