"""What the Planetoid modules (planetoid_gcn.py, planetoid_gat.py) share: graph names, layer plumbing, task, optimizer.

Not a module file itself. A module file may import the ``.py`` files beside it:
TFX packages them all into the module's wheel, and GnnTrainer puts a
``module_file``'s folder on ``sys.path`` when it loads one directly.
"""

import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component.tasks import RootNodeLogits
from gnn_trainer_component.tasks import SeedLabelFn

NODE_SET = "paper"
EDGE_SET = "cites"


class GCNConv(tf.keras.layers.Layer):
  """``tensorflow_gnn.models.gcn.GCNConv`` (no self loops added) that transforms, then propagates.

  The same function as TF-GNN's layer with ``add_self_loops=False``:
  ``activation(receiver_scale * sum over edges of weight * sender_scale * h_sender @ W + b)``
  with ``degree_normalization`` ``"none"`` (scales 1) or ``"in_out"``
  (``1/sqrt`` of the weighted degrees at both ends, at least 1). TF-GNN's
  layer propagates the input states and applies ``W`` after; applying ``W``
  to each node first (as the GCN paper's code and PyTorch Geometric do) moves
  ``units`` values per edge instead of the input width: on Cora's 1,433-dim
  features the first layer costs a tenth. Used as a NodeSetUpdate
  convolution: ``conv(graph, edge_set_name=...)``.

  ``sparse_input_dropout``: for input states that are mostly zeros (Cora's
  bag-of-words rows hold 18 nonzeros of 1,433), dropout at this rate and ``W``
  in one :class:`SparseDropoutDense`, in place of a ``Dropout`` layer before
  the convolution: the same function, computed on the nonzero entries only.
  """

  def __init__(self, units, *, receiver_tag, activation=None, use_bias=True,
               degree_normalization="in_out", edge_weight_feature_name=None,
               kernel_regularizer=None, node_feature=tfgnn.HIDDEN_STATE,
               sparse_input_dropout=None, **kwargs):
    super().__init__(**kwargs)
    if degree_normalization not in ("none", "in_out"):
      raise ValueError(f"degree_normalization must be 'none' or 'in_out', "
                       f"got {degree_normalization!r}.")
    self._units = units
    self._receiver = receiver_tag
    self._sender = tfgnn.reverse_tag(receiver_tag)
    self._activation = tf.keras.activations.get(activation)
    self._use_bias = use_bias
    self._degree_normalization = degree_normalization
    self._edge_weight_feature_name = edge_weight_feature_name
    self._node_feature = node_feature
    self._sparse_input_dropout = sparse_input_dropout
    if sparse_input_dropout is None:
      self._kernel = tf.keras.layers.Dense(units, use_bias=False,
                                           kernel_regularizer=kernel_regularizer)
    else:
      self._kernel = SparseDropoutDense(units, sparse_input_dropout,
                                        kernel_regularizer=kernel_regularizer)
    self._bias = (self.add_weight(name="bias", shape=[units], initializer="zeros")
                  if use_bias else None)

  def get_config(self):
    return dict(super().get_config(), units=self._units, receiver_tag=self._receiver,
                activation=tf.keras.activations.serialize(self._activation),
                use_bias=self._use_bias, degree_normalization=self._degree_normalization,
                edge_weight_feature_name=self._edge_weight_feature_name,
                kernel_regularizer=tf.keras.regularizers.serialize(
                    self._kernel.kernel_regularizer) if self._kernel.kernel_regularizer
                else None, node_feature=self._node_feature,
                sparse_input_dropout=self._sparse_input_dropout)

  def call(self, graph, *, edge_set_name):
    adjacency = graph.edge_sets[edge_set_name].adjacency
    sender = adjacency.node_set_name(self._sender)
    weights = (graph.edge_sets[edge_set_name][self._edge_weight_feature_name][:, None]
               if self._edge_weight_feature_name else None)
    states = self._kernel(graph.node_sets[sender][self._node_feature])
    if self._degree_normalization == "in_out":
      def degree(tag):
        ones = (weights if weights is not None else
                tf.ones([graph.edge_sets[edge_set_name].total_size, 1], states.dtype))
        return tf.maximum(tfgnn.pool_edges_to_node(graph, edge_set_name, tag, "sum",
                                                   feature_value=ones), 1)
      states = tf.math.rsqrt(degree(self._sender)) * states
    messages = tfgnn.broadcast_node_to_edges(graph, edge_set_name, self._sender,
                                             feature_value=states)
    if weights is not None:
      messages = messages * weights
    pooled = tfgnn.pool_edges_to_node(graph, edge_set_name, self._receiver, "sum",
                                      feature_value=messages)
    if self._degree_normalization == "in_out":
      pooled = tf.math.rsqrt(degree(self._receiver)) * pooled
    if self._bias is not None:
      pooled += self._bias
    return self._activation(pooled)


class SparseDropoutDense(tf.keras.layers.Layer):
  """``Dense(units, use_bias=False)`` after ``Dropout(rate)``, computed on the nonzero inputs.

  Dropout leaves a zero input zero, so dropping out only the nonzero entries
  and multiplying sparsely is the same function (each entry kept with
  probability ``1 - rate`` and scaled by ``1 / (1 - rate)`` in training) as
  the dense pair; it is what the GCN and GAE papers' code does with their
  sparse bag-of-words features (``sparse_dropout``, then a sparse matmul). On
  Cora's features, a 5,850-node batch: 9 ms instead of 31 ms per training
  step on 2 cores, most of it finding the nonzeros. Not for dense inputs
  (every entry becomes a sparse one), nor under ``jit_compile``: XLA has no
  sparse matmul kernel.
  """

  def __init__(self, units, rate, *, kernel_regularizer=None, **kwargs):
    super().__init__(**kwargs)
    self._units = units
    self._rate = rate
    self._kernel_regularizer = tf.keras.regularizers.get(kernel_regularizer)
    self._dropout = tf.keras.layers.Dropout(rate)

  @property
  def kernel_regularizer(self):
    return self._kernel_regularizer

  def build(self, input_shape):
    self.kernel = self.add_weight(name="kernel", shape=[int(input_shape[-1]), self._units],
                                  initializer="glorot_uniform",
                                  regularizer=self._kernel_regularizer)
    super().build(input_shape)

  def get_config(self):
    return dict(super().get_config(), units=self._units, rate=self._rate,
                kernel_regularizer=tf.keras.regularizers.serialize(self._kernel_regularizer)
                if self._kernel_regularizer else None)

  def call(self, inputs, training=None):
    at = tf.where(tf.not_equal(inputs, 0))
    values = self._dropout(tf.gather_nd(inputs, at), training=training)
    sparse = tf.SparseTensor(at, values, tf.shape(inputs, out_type=tf.int64))
    return tf.sparse.sparse_dense_matmul(sparse, self.kernel)


def input_graph(graph_tensor_spec):
  """The Keras input and the graph with the ``feat`` of each paper as its hidden state."""
  inputs = tf.keras.layers.Input(type_spec=graph_tensor_spec)
  graph = tfgnn.keras.layers.MapFeatures(
      node_sets_fn=lambda node_set, node_set_name: node_set["feat"])(inputs)
  return inputs, graph


def dropout_then_conv(graph, conv, dropout):
  """Dropout on the paper states, then ``conv`` over ``cites`` as the next state."""
  graph = tfgnn.keras.layers.MapFeatures(
      node_sets_fn=lambda node_set, node_set_name: tf.keras.layers.Dropout(dropout)(
          node_set[tfgnn.HIDDEN_STATE]))(graph)
  return conv_update(graph, conv)


def conv_update(graph, conv):
  """``conv`` over ``cites`` as the next paper state."""
  return tfgnn.keras.layers.GraphUpdate(node_sets={
      NODE_SET: tfgnn.keras.layers.NodeSetUpdate(
          {EDGE_SET: conv}, tfgnn.keras.layers.SingleInputNextState())})(graph)


def task(hparams):
  """Seed classification on the logits the last layer computed (see RootNodeLogits).

  The seed is the first node of a sampled subgraph, or a node marked by the
  structured readout of a full-graph step (GnnTrainer graph_mode); the label
  feature is removed from every paper either way.
  """
  return RootNodeLogits(
      NODE_SET, num_classes=hparams["num_classes"],
      label_fn=SeedLabelFn(NODE_SET, feature_name="label"))


def optimizer_fn(hparams):
  return tf.keras.optimizers.Adam(learning_rate=hparams["learning_rate"])
