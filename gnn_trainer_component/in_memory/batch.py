"""One batch of sampled subgraphs by name, and its encoders: GraphTensors and tf.Examples.

:class:`SampledBatch` is what the in-memory engine's sampler returns for a
batch of seeds, as PyG's ``SamplerOutput``: per node set and edge set, the
items of every subgraph in order and how many each subgraph has, plus extras by
name (a link example's labels). It holds numpy arrays on the sampling side and
tensors after ``tf.numpy_function``, which returns a flat list: the batch
crosses it with ``tf.nest`` (:func:`flatten`, :func:`unflatten`), never by
position.

The encoders turn a batch into what the trainer and the tools read:
:func:`encode_subgraphs` (one rank-1 GraphTensor, one subgraph per row),
:func:`encode_merged` (one scalar GraphTensor: the subgraphs' disjoint union,
node features gathered in TensorFlow) and :func:`encode_examples` (GraphSampler's
tf.Examples, :mod:`gnn_trainer_component.graph.encoding`).
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component.graph import encoding

#: A numpy array (sampling side), a tensor (after tf.numpy_function) or a tf.DType (a spec).
Array = Any


class NodePiece(NamedTuple):
  """One node set of a batch.

  Attributes:
    sizes: ``[num_subgraphs]`` nodes of each subgraph.
    features: Feature name -> ``[sum(sizes), ...]`` values, subgraph by subgraph
      (empty when the batch carries node indices instead).
  """
  sizes: Array
  features: dict[str, Array]


class EdgePiece(NamedTuple):
  """One edge set of a batch.

  Attributes:
    sizes: ``[num_subgraphs]`` edges of each subgraph.
    source: ``[sum(sizes)]`` source ends, indices into their subgraph's source node set.
    target: ``[sum(sizes)]`` target ends, likewise.
    features: Feature name -> ``[sum(sizes), ...]`` values.
  """
  sizes: Array
  source: Array
  target: Array
  features: dict[str, Array]


class SampledBatch(NamedTuple):
  """The subgraphs sampled around one batch of seeds, by node set, edge set and name.

  Attributes:
    nodes: Node set -> its piece.
    edges: Edge set -> its piece.
    node_indices: Node set -> ``[sum(sizes)]`` indices of the sampled nodes in the
      graph held in memory, in place of their features (merged batches gather
      features in TensorFlow); empty otherwise.
    extras: What a sampler adds by name (a link example's ``"labels"``).
  """
  nodes: dict[str, NodePiece]
  edges: dict[str, EdgePiece]
  node_indices: dict[str, Array]
  extras: dict[str, Array]


def flatten(batch: SampledBatch) -> list[Array]:
  """``batch``'s leaves in one fixed order (its arrays; of a batch of dtypes, ``Tout``)."""
  return tf.nest.flatten(batch)


def unflatten(structure: SampledBatch, flat: list[tf.Tensor]) -> SampledBatch:
  """The batch of tensors that ``tf.numpy_function`` returned flat, named as ``structure``."""
  return tf.nest.pack_sequence_as(structure, flat)


def encode_examples(batch: SampledBatch, num_subgraphs: int) -> list[tf.train.Example]:
  """GraphSampler-format tf.Examples of a numpy batch (node features, not indices)."""
  examples = [tf.train.Example() for _ in range(num_subgraphs)]
  for name, piece in batch.nodes.items():
    encoding.write_nodes(examples, name, piece.sizes, piece.features)
  for name, piece in batch.edges.items():
    encoding.write_edges(examples, name, piece.sizes, piece.source, piece.target,
                         piece.features)
  return examples


def _shaped(tensor: tf.Tensor, spec: tf.TensorSpec = None) -> tf.Tensor:
  """``tensor`` with its static shape: ``[None]``, or ``[None, *feature shape]`` of ``spec``."""
  tensor.set_shape([None] + (spec.shape[1:].as_list() if spec is not None else []))
  return tensor


def encode_subgraphs(batch: SampledBatch, spec: tfgnn.GraphTensorSpec,
                     schema: tfgnn.GraphSchema) -> tuple[dict, dict]:
  """``(node sets, edge sets)`` of a rank-1 GraphTensor: one subgraph per row of ``batch``."""
  indices_dtype, splits_dtype = spec.indices_dtype, spec.row_splits_dtype

  def ragged(values, sizes, feature_spec=None):
    return tf.RaggedTensor.from_row_lengths(_shaped(values, feature_spec), sizes,
                                            validate=False)

  node_sets = {}
  for name, piece in batch.nodes.items():
    sizes = _shaped(tf.cast(piece.sizes, splits_dtype))
    specs = spec.node_sets_spec[name].features_spec
    node_sets[name] = tfgnn.NodeSet.from_fields(
        sizes=tf.cast(sizes[:, None], indices_dtype),
        features={f: ragged(v, sizes, specs[f]) for f, v in piece.features.items()})
  edge_sets = {}
  for name, piece in batch.edges.items():
    sizes = _shaped(tf.cast(piece.sizes, splits_dtype))
    ends = schema.edge_sets[name]
    specs = spec.edge_sets_spec[name].features_spec
    edge_sets[name] = tfgnn.EdgeSet.from_fields(
        sizes=tf.cast(sizes[:, None], indices_dtype),
        adjacency=tfgnn.Adjacency.from_indices(
            (ends.source, ragged(tf.cast(piece.source, indices_dtype), sizes)),
            (ends.target, ragged(tf.cast(piece.target, indices_dtype), sizes))),
        features={f: ragged(v, sizes, specs[f]) for f, v in piece.features.items()})
  return node_sets, edge_sets


def encode_merged(batch: SampledBatch, tables: Mapping[tuple[str, str], tf.Variable],
                  spec: tfgnn.GraphTensorSpec, schema: tfgnn.GraphSchema
                  ) -> tuple[dict, dict, dict[str, tf.Tensor]]:
  """``(node sets, edge sets, offsets)`` of the batch's subgraphs as one component.

  Their disjoint union: each node set's nodes subgraph after subgraph (features
  gathered from ``tables``, ``(node set, feature) -> values``, at the batch's
  node indices), edge ends offset by the nodes of the subgraphs before;
  ``offsets[node set]`` is each subgraph's first node in it.
  """
  indices_dtype = spec.indices_dtype
  node_sets, offsets = {}, {}
  for name, piece in batch.nodes.items():
    sizes = tf.cast(_shaped(piece.sizes), indices_dtype)
    offsets[name] = tf.cumsum(sizes, exclusive=True)
    nodes = _shaped(batch.node_indices[name])
    specs = spec.node_sets_spec[name].features_spec
    node_sets[name] = tfgnn.NodeSet.from_fields(
        sizes=tf.reduce_sum(sizes, keepdims=True),
        features={f: _shaped(tf.gather(table, nodes), specs[f])
                  for (node_set, f), table in tables.items() if node_set == name})
  edge_sets = {}
  for name, piece in batch.edges.items():
    sizes = tf.cast(_shaped(piece.sizes), indices_dtype)
    ends = schema.edge_sets[name]
    source, target = (tf.cast(_shaped(end), indices_dtype) + tf.repeat(offsets[node_set], sizes)
                      for end, node_set in ((piece.source, ends.source),
                                            (piece.target, ends.target)))
    specs = spec.edge_sets_spec[name].features_spec
    edge_sets[name] = tfgnn.EdgeSet.from_fields(
        sizes=tf.reduce_sum(sizes, keepdims=True),
        adjacency=tfgnn.Adjacency.from_indices((ends.source, source), (ends.target, target)),
        features={f: _shaped(v, specs[f]) for f, v in piece.features.items()})
  return node_sets, edge_sets, offsets
