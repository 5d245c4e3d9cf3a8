"""Keras layers for use in user modules.

:class:`ReadoutRound` runs a model's last round of message passing, while
training, for the nodes the readout reads only: the seeds of node tasks, the two
ends of link pairs. A two-round model on sampled subgraphs otherwise updates
every node of every subgraph twice although the loss reads one node per
subgraph (or two per pair); DGL and PyG compute their last round for the seeds
only in the same way.
"""

from __future__ import annotations

from typing import Mapping, Optional

from absl import logging
import tensorflow as tf
from tensorflow.python.ops import control_flow_util  # pylint: disable=g-direct-tensorflow-import
import tensorflow_gnn as tfgnn

from gnn_trainer_component.graph import readout


def _marks(indices: tf.Tensor, size: tf.Tensor) -> tf.Tensor:
  """``[size]`` bool: True at ``indices``."""
  ones = tf.ones_like(indices, dtype=tf.int32)
  return tf.scatter_nd(tf.expand_dims(indices, -1), ones, tf.reshape(size, [1])) > 0


def _is_aux(name: str) -> bool:
  return tfgnn.get_aux_type_prefix(name) is not None


def readout_edge_sets(spec: tfgnn.GraphTensorSpec,
                      readout_node_set: str = readout.READOUT) -> list[str]:
  """The structured-readout edge sets (``<readout_node_set>/<key>``) of ``spec``."""
  return sorted(name for name in spec.edge_sets_spec if name.startswith(readout_node_set + "/"))


def check_readable(spec: tfgnn.GraphTensorSpec, node_set_name: Optional[str],
                   readout_node_set: str = readout.READOUT, who: str = "ReadoutRound") -> None:
  """Raises ValueError unless :func:`read_nodes` can tell which nodes of ``spec`` are read.

  Raises:
    ValueError: no structured readout and no (or an unknown) ``node_set_name``, or a
      graph that is not scalar.
  """
  if spec.rank != 0:
    raise ValueError(f"{who}: takes a scalar GraphTensor (the batch merged into components, "
                     f"as GnnTrainer's models get it), got rank {spec.rank}.")
  if readout_edge_sets(spec, readout_node_set):
    return
  if node_set_name is None:
    raise ValueError(
        f"{who}: the graph has no structured readout (edge sets '{readout_node_set}/<key>'), "
        "so it reads the first node of each component, as GraphSampler's subgraphs hold "
        "their seed: pass node_set_name=<the seed node set> "
        f"(one of {sorted(spec.node_sets_spec)}).")
  if node_set_name not in spec.node_sets_spec:
    raise ValueError(f"{who}: node_set_name {node_set_name!r} is not a node set of the "
                     f"graph; it has {sorted(spec.node_sets_spec)}.")


def read_nodes(graph: tfgnn.GraphTensor, node_set_name: Optional[str],
               readout_node_set: str = readout.READOUT) -> dict[str, tf.Tensor]:
  """``{node set: [nodes] bool}``: the nodes a readout of ``graph`` reads.

  The sources of every structured-readout edge set where the graph has them (merged
  batches' seeds, link pairs' ends, the pairs' own nodes), else the first node of each
  component of ``node_set_name`` (GraphSampler's subgraphs). Node sets nothing reads of
  are left out.
  """
  check_readable(graph.spec, node_set_name, readout_node_set)
  names = readout_edge_sets(graph.spec, readout_node_set)
  read: dict[str, tf.Tensor] = {}
  if not names:
    sizes = graph.node_sets[node_set_name].sizes
    firsts = tf.boolean_mask(tf.cumsum(sizes, exclusive=True), sizes > 0)
    return {node_set_name: _marks(firsts, graph.node_sets[node_set_name].total_size)}
  for name in names:
    adjacency = graph.edge_sets[name].adjacency
    node_set = adjacency.source_name
    marks = _marks(adjacency.source, graph.node_sets[node_set].total_size)
    read[node_set] = read[node_set] | marks if node_set in read else marks
  return read


def _component_sizes(keep: tf.Tensor, sizes: tf.Tensor) -> tf.Tensor:
  """The sizes per component of the items ``keep`` selects (items grouped by component)."""
  components = tf.repeat(tf.range(tf.size(sizes)), sizes)
  return tf.cast(tf.math.unsorted_segment_sum(tf.cast(keep, sizes.dtype), components,
                                              tf.size(sizes)), sizes.dtype)


def round_graph(graph: tfgnn.GraphTensor, read: Mapping[str, tf.Tensor],
                receiver_tag: tfgnn.IncidentNodeTag
                ) -> tuple[tfgnn.GraphTensor, dict[str, tf.Tensor]]:
  """The part of ``graph`` a round that updates the ``read`` nodes reads, and where they are.

  Args:
    graph: A scalar GraphTensor with :class:`tfgnn.Adjacency` edge sets.
    read: ``{node set: [nodes] bool}`` (:func:`read_nodes`).
    receiver_tag: The end of each edge that receives its message.

  Returns:
    The graph of the edges whose receiver is read (auxiliary sets, such as the readout's,
    whole), with the nodes at their ends and the read nodes, renumbered in their order; the
    same sets, features and components. And, by node set, each node's index in it (-1: not
    in it).

  Raises:
    ValueError: an edge set is not a plain ``tfgnn.Adjacency``.
  """
  sender_tag = tfgnn.reverse_tag(receiver_tag)
  needed = {name: (tf.ones([node_set.total_size], tf.bool) if _is_aux(name)
                   else read.get(name, tf.zeros([node_set.total_size], tf.bool)))
            for name, node_set in graph.node_sets.items()}
  kept = {}
  for name, edge_set in graph.edge_sets.items():
    adjacency = edge_set.adjacency
    if type(adjacency) is not tfgnn.Adjacency:  # pylint: disable=unidiomatic-typecheck
      raise ValueError(f"ReadoutRound: edge set {name!r} has a {type(adjacency).__name__}; "
                       "only tfgnn.Adjacency (a source and a target) is supported.")
    receivers = adjacency.node_set_name(receiver_tag)
    if _is_aux(name):
      keep = tf.ones([edge_set.total_size], tf.bool)
    elif receivers in read:
      keep = tf.gather(read[receivers], adjacency[receiver_tag])
    else:
      keep = tf.zeros([edge_set.total_size], tf.bool)
    kept[name] = keep
    senders = adjacency.node_set_name(sender_tag)  # the receivers are read: needed already
    needed[senders] |= _marks(tf.boolean_mask(adjacency[sender_tag], keep),
                              graph.node_sets[senders].total_size)
  places = {name: tf.where(keep, tf.cumsum(tf.cast(keep, graph.indices_dtype)) - 1,
                          tf.constant(-1, graph.indices_dtype))
            for name, keep in needed.items()}
  node_sets = {}
  for name, node_set in graph.node_sets.items():
    rows = tf.where(needed[name])[:, 0]
    node_sets[name] = tfgnn.NodeSet.from_fields(
        sizes=_component_sizes(needed[name], node_set.sizes),
        features={key: tf.gather(value, rows) for key, value in node_set.features.items()})
  edge_sets = {}
  for name, edge_set in graph.edge_sets.items():
    adjacency, rows = edge_set.adjacency, tf.where(kept[name])[:, 0]
    ends = {tag: (adjacency.node_set_name(tag),
                  tf.gather(places[adjacency.node_set_name(tag)],
                            tf.gather(adjacency[tag], rows)))
            for tag in (tfgnn.SOURCE, tfgnn.TARGET)}
    edge_sets[name] = tfgnn.EdgeSet.from_fields(
        sizes=_component_sizes(kept[name], edge_set.sizes),
        adjacency=tfgnn.Adjacency.from_indices(ends[tfgnn.SOURCE], ends[tfgnn.TARGET]),
        features={key: tf.gather(value, rows) for key, value in edge_set.features.items()})
  return tfgnn.GraphTensor.from_pieces(context=graph.context, node_sets=node_sets,
                                       edge_sets=edge_sets), places


def _kind(value) -> tuple:
  """A feature's dtype, shape per item and raggedness (what a round may not change)."""
  return value.dtype, tuple(value.shape[1:].as_list()), isinstance(value, tf.RaggedTensor)


def _kinds(graph_piece) -> dict[str, tuple]:
  return {key: _kind(value) for key, value in graph_piece.features.items()}


def merge_read_states(graph: tfgnn.GraphTensor, updated: tfgnn.GraphTensor,
                      read: Mapping[str, tf.Tensor], places: Mapping[str, tf.Tensor]
                      ) -> tfgnn.GraphTensor:
  """``graph`` with the node features of ``updated`` (:func:`round_graph`'s) at the read nodes.

  A feature ``graph`` has in the same dtype and shape keeps its value at every other
  node; a new or reshaped one is zero there. Edge and context features stay ``graph``'s.

  Raises:
    ValueError: the update changed an edge set's or the context's features (their
      names, dtypes or shapes), which the round would drop.
  """
  for name, edge_set in updated.edge_sets.items():
    if _kinds(edge_set) != _kinds(graph.edge_sets[name]):
      raise ValueError(f"ReadoutRound: the wrapped update changes the features of edge set "
                       f"{name!r}; it may update node states only (wrap the last round).")
  if _kinds(updated.context) != _kinds(graph.context):
    raise ValueError("ReadoutRound: the wrapped update changes the context's features; it "
                     "may update node states only (wrap the last round).")
  node_sets = {}
  for name, node_set in updated.node_sets.items():
    old = graph.node_sets[name].features
    rows = tf.where(read[name])[:, 0] if name in read else tf.zeros([0], tf.int64)
    at = tf.expand_dims(rows, -1)
    features = {}
    for key, value in node_set.features.items():
      if isinstance(value, tf.RaggedTensor) or isinstance(old.get(key), tf.RaggedTensor):
        if key not in old:
          raise ValueError(f"ReadoutRound: the wrapped update adds ragged feature {key!r} "
                           f"to node set {name!r}, which it cannot place.")
        features[key] = old[key]  # an update sets dense states; ragged ones pass through
        continue
      new = tf.gather(value, tf.gather(places[name], rows))
      if key in old and _kind(value) == _kind(old[key]):
        features[key] = tf.tensor_scatter_nd_update(old[key], at, new)
      else:
        size = tf.reshape(tf.cast(graph.node_sets[name].total_size, tf.int64), [1])
        features[key] = tf.scatter_nd(at, new, tf.concat(
            [size, tf.shape(value, out_type=tf.int64)[1:]], 0))
    node_sets[name] = features
  return graph.replace_features(node_sets=node_sets)


def _in_xla() -> bool:
  """Whether the function being traced compiles with XLA (``jit_compile``; TF's own test)."""
  return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


@tf.keras.utils.register_keras_serializable(package="GnnTrainer")
class ReadoutRound(tf.keras.layers.Layer):
  """A graph update that, while training, updates only the nodes the readout reads.

  Wrap a model's last round of message passing (a ``tfgnn.keras.layers.GraphUpdate``
  or any layer that maps a graph to a graph by updating node states)::

    graph = gnn_trainer_component.layers.ReadoutRound(
        tfgnn.keras.layers.GraphUpdate(node_sets={...}), node_set_name="paper",
        receiver_tag=tfgnn.SOURCE)(graph)

  While training (``training=True``, as ``model.fit`` calls it) the update runs on the
  edges whose receiver is a read node, with the nodes at their ends, and its node
  states are placed back at the read nodes: those nodes get exactly the states the
  whole round gives them, and so the same loss and gradients, for less work. Every
  other node keeps its state from before the round where the update keeps the
  state's shape, else zeros, so nothing but the readout may read the round's
  output while training. Otherwise (``training`` False or None: validation,
  serving, the exported embeddings, GraphInferrer) and under XLA (``jit_compile``,
  which needs shapes that do not depend on the batch; a warning says so) the update
  runs on the whole graph, so exported models and their signatures are those of the
  model without it.

  The nodes read: the sources of the graph's structured-readout edge sets
  (``_readout/<key>``: merged batches' seeds, link pairs' ends), else the first node
  of each component of ``node_set_name`` (GraphSampler's subgraphs hold their seed
  first). Exact for updates whose new state of a node depends on its own state and
  the messages along its incoming edges (``receiver_tag``'s end) only: mean, sum and
  max pooling, attention (GATv2, ...), VanillaMPNN, and GCN with precomputed edge
  weights. Not for updates that read degrees or other nodes beyond those edges
  (GCN normalising by the sender's degree in the graph, which sees only the
  round's edges here), nor for ones that update edge or context states (refused
  where their features change).

  Args:
    update: The round's layer, called on a scalar GraphTensor.
    receiver_tag: The end of every edge set that receives messages in the round.
    node_set_name: The seed node set, read as the first node of each component of a
      graph without structured readout; None: the graph must have structured readout.
    readout_node_set: The auxiliary node set of structured readout.
  """

  def __init__(self, update: tf.keras.layers.Layer, *,
               receiver_tag: tfgnn.IncidentNodeTag = tfgnn.TARGET,
               node_set_name: Optional[str] = None,
               readout_node_set: str = readout.READOUT, **kwargs):
    super().__init__(**kwargs)
    self._update = update
    self._receiver_tag = receiver_tag
    self._node_set_name = node_set_name
    self._readout_node_set = readout_node_set

  def get_config(self):
    return dict(super().get_config(), update=tf.keras.layers.serialize(self._update),
                receiver_tag=self._receiver_tag, node_set_name=self._node_set_name,
                readout_node_set=self._readout_node_set)

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    update = tf.keras.layers.deserialize(config.pop("update"))
    return cls(update, **config)

  def call(self, graph: tfgnn.GraphTensor, training=None) -> tfgnn.GraphTensor:
    check_readable(graph.spec, self._node_set_name, self._readout_node_set)
    if training and _in_xla():
      logging.warning("ReadoutRound %r: compiled with XLA (jit_compile), the round runs on "
                      "every node (XLA needs shapes that do not depend on the batch).",
                      self.name)
    if not training or _in_xla():
      return self._update(graph, training=training)
    read = read_nodes(graph, self._node_set_name, self._readout_node_set)
    part, places = round_graph(graph, read, self._receiver_tag)
    return merge_read_states(graph, self._update(part, training=training), read, places)
