"""GnnTrainer module: GCN (Kipf & Welling, 2017) root-node classification on Planetoid.

Input: GraphSampler subgraphs of the tables written by
``pipelines.planetoid.data`` (node set ``paper`` with ``feat``
and ``label``; edge set ``cites`` with self loops and a ``weight`` feature
holding the full-graph GCN normalization 1/sqrt((d_u+1)(d_v+1))). Edges are
sampled away from the seed (source -> target), so messages flow target ->
source (``receiver_tag=tfgnn.SOURCE``). With fan-outs above the max degree the
2-hop subgraph holds the seed's whole receptive field and every weight is the
full-graph one, so this equals full-graph GCN on the seed.

Architecture as in the paper (and its reference code, ``gcn/models.py``):
dropout 0.5 -> GCN(16, relu) -> dropout 0.5 -> GCN(num_classes, linear), both
layers without bias; L2 5e-4 in GCN's ``tf.nn.l2_loss`` convention
(5e-4 * sum(w^2) / 2) on the first layer only; Adam lr 0.01.

The second GCN layer outputs the class logits. ``task()`` therefore returns a
``gnn_trainer_component.tasks.RootNodeLogits`` task: ``runner.RootNodeMulticlassClassification``
(same labels, loss and metrics) whose ``predict`` reads the root's logits
instead of adding another ``Dense(num_classes)`` on top, so the trained model
is exactly the paper's two-layer GCN.

Labels: ``SeedLabelFn`` reads the seed's ``label`` and removes the feature
from the whole node set, so no node's label is a model input.

Options: ``HPARAMS`` below (``hparams`` keys and defaults). ``num_classes`` has no
default: the Planetoid pipeline passes it as ``custom_config["hparams"]`` (7 for
Cora, 6 for CiteSeer, 3 for PubMed).
"""

import tensorflow as tf
import tensorflow_gnn as tfgnn

# The task and optimizer_fn of this module are the shared ones.
from planetoid_common import GCNConv, conv_update, dropout_then_conv, input_graph, optimizer_fn, task  # pylint: disable=unused-import

HPARAMS = {"units": 16, "dropout": 0.5, "l2": 5e-4, "learning_rate": 0.01,
           "use_bias": False, "sparse_features": True,
           "num_classes": None}


def hyperparameter_space(hp):
  """GnnTuner's search space around the paper's setting (lr 0.01, dropout 0.5, L2 5e-4, 16 units).

  It holds clearly bad values on purpose (a learning rate of 1e-5 barely moves
  in 200 epochs; dropout 0.9 drops most of the input), so that a search shows
  it tells them apart (benchmarks/README.md, "Hyperparameter search").
  """
  hp.Choice("learning_rate", [1e-5, 1e-3, 5e-3, 1e-2, 5e-2])
  hp.Choice("dropout", [0.0, 0.3, 0.5, 0.7, 0.9])
  hp.Choice("l2", [0.0, 5e-4, 5e-3])
  hp.Choice("units", [16, 32, 64])


def _gcn_layer(graph, units, activation, dropout, regularizer, use_bias, sparse_input=False):
  """Dropout on node states, then one GCN layer with precomputed edge weights.

  ``sparse_input``: the states are mostly zeros (Planetoid's bag-of-words
  features; ``hparams["sparse_features"]``): dropout and ``W`` in one
  ``SparseDropoutDense``, the same function, cheaper. Set it false for dense
  features, and with ``jit_compile`` (XLA has no sparse matmul kernel).
  """
  conv = GCNConv(
      units, receiver_tag=tfgnn.SOURCE, activation=activation, use_bias=use_bias,
      degree_normalization="none",     # weights are precomputed
      edge_weight_feature_name="weight",
      kernel_regularizer=regularizer, sparse_input_dropout=dropout if sparse_input else None)
  return conv_update(graph, conv) if sparse_input else dropout_then_conv(graph, conv, dropout)


def model_fn(graph_tensor_spec, hparams):
  """Two GCN layers on the ``paper`` node set; the second one emits logits."""
  inputs, graph = input_graph(graph_tensor_spec)
  dropout = hparams["dropout"]
  use_bias = hparams["use_bias"]
  graph = _gcn_layer(graph, hparams["units"], "relu", dropout,
                     tf.keras.regularizers.l2(hparams["l2"] / 2), use_bias,
                     sparse_input=hparams["sparse_features"])
  graph = _gcn_layer(graph, hparams["num_classes"], None, dropout, None, use_bias)
  return tf.keras.Model(inputs, graph)
