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

Labels: ``RootNodeLabelFn`` reads the root's ``label`` and removes the feature
from the whole node set, so no node's label is a model input.

Hyperparameters (``hparams`` keys, defaults below): ``units``, ``dropout``,
``l2``, ``learning_rate``, ``num_classes``, ``use_bias``.
"""

import os

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner
from tensorflow_gnn.models import gcn

from gnn_trainer_component.tasks import RootNodeLogits

NODE_SET = "paper"
EDGE_SET = "cites"
DEFAULTS = {"units": 16, "dropout": 0.5, "l2": 5e-4, "learning_rate": 0.01,
            "use_bias": False,
            "num_classes": int(os.environ.get("PLANETOID_NUM_CLASSES", "7"))}


def _hp(hparams, name):
  return (hparams or {}).get(name, DEFAULTS[name])


def _gcn_layer(graph, units, activation, dropout, regularizer, use_bias):
  """Dropout on node states, then one GCNConv with precomputed edge weights."""
  graph = tfgnn.keras.layers.MapFeatures(
      node_sets_fn=lambda node_set, node_set_name: tf.keras.layers.Dropout(dropout)(
          node_set[tfgnn.HIDDEN_STATE]))(graph)
  return tfgnn.keras.layers.GraphUpdate(node_sets={
      NODE_SET: tfgnn.keras.layers.NodeSetUpdate(
          {EDGE_SET: gcn.GCNConv(
              units, receiver_tag=tfgnn.SOURCE, activation=activation,
              use_bias=use_bias,
              add_self_loops=False,            # self loops are in the edge table
              degree_normalization="none",     # weights are precomputed
              edge_weight_feature_name="weight",
              kernel_regularizer=regularizer)},
          tfgnn.keras.layers.SingleInputNextState())})(graph)


def model_fn(graph_tensor_spec, hparams=None):
  """Two GCN layers on the ``paper`` node set; the second one emits logits."""
  inputs = tf.keras.layers.Input(type_spec=graph_tensor_spec)
  graph = tfgnn.keras.layers.MapFeatures(
      node_sets_fn=lambda node_set, node_set_name: node_set["feat"])(inputs)
  dropout = _hp(hparams, "dropout")
  use_bias = _hp(hparams, "use_bias")
  graph = _gcn_layer(graph, _hp(hparams, "units"), "relu", dropout,
                     tf.keras.regularizers.l2(_hp(hparams, "l2") / 2), use_bias)
  graph = _gcn_layer(graph, _hp(hparams, "num_classes"), None, dropout, None, use_bias)
  return tf.keras.Model(inputs, graph)


def task(hparams=None):
  return RootNodeLogits(
      NODE_SET, num_classes=_hp(hparams, "num_classes"),
      label_fn=runner.RootNodeLabelFn(NODE_SET, feature_name="label"))


def optimizer_fn(hparams=None):
  return tf.keras.optimizers.Adam(learning_rate=_hp(hparams, "learning_rate"))
