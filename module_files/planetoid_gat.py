"""GnnTrainer module: GAT-style (GATv2) root-node classification on Planetoid.

Input as for ``planetoid_gcn.py`` (GraphSampler subgraphs; ``cites`` edges
include self loops, so every node attends to itself as in GAT; the ``weight``
edge feature is ignored). Messages flow target -> source
(``receiver_tag=tfgnn.SOURCE``) because edges are sampled away from the seed.

Architecture following Velickovic et al. (2018) for Cora, with
``tensorflow_gnn.models.gat_v2.GATv2Conv`` (GATv2 scoring, LeakyReLU(0.2) in
the attention):
dropout 0.6 -> GATv2(8 heads x 8, concat, ELU, attention dropout 0.6)
-> dropout 0.6 -> GATv2(1 head x num_classes, linear, attention dropout 0.6);
L2 5e-4 (``tf.nn.l2_loss`` convention) on every kernel, including the
attention vectors, not on biases; Adam lr 0.005.

The second GAT layer outputs the class logits, and ``task()`` returns a
:class:`RootNodeLogits` task (as in ``planetoid_gcn.py``: no extra
``Dense(num_classes)`` head), so the trained model is the paper's two layers.

Labels: ``RootNodeLabelFn`` removes ``label`` from every node before the GNN.

Hyperparameters: ``heads``, ``per_head_channels``, ``dropout``,
``attention_dropout``, ``l2``, ``learning_rate``, ``num_classes``.
"""

import os

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner
from tensorflow_gnn.models import gat_v2

from gnn_trainer_component.tasks import RootNodeLogits

NODE_SET = "paper"
EDGE_SET = "cites"
DEFAULTS = {"heads": 8, "per_head_channels": 8, "dropout": 0.6,
            "attention_dropout": 0.6, "l2": 5e-4, "learning_rate": 0.005,
            "num_classes": int(os.environ.get("PLANETOID_NUM_CLASSES", "7"))}


def _hp(hparams, name):
  return (hparams or {}).get(name, DEFAULTS[name])


def _gat_layer(graph, heads, channels, activation, dropout, attention_dropout,
               regularizer):
  graph = tfgnn.keras.layers.MapFeatures(
      node_sets_fn=lambda node_set, node_set_name: tf.keras.layers.Dropout(dropout)(
          node_set[tfgnn.HIDDEN_STATE]))(graph)
  return tfgnn.keras.layers.GraphUpdate(node_sets={
      NODE_SET: tfgnn.keras.layers.NodeSetUpdate(
          {EDGE_SET: gat_v2.GATv2Conv(
              num_heads=heads, per_head_channels=channels,
              receiver_tag=tfgnn.SOURCE, edge_dropout=attention_dropout,
              attention_activation=tf.keras.layers.LeakyReLU(alpha=0.2),
              activation=activation, kernel_regularizer=regularizer)},
          tfgnn.keras.layers.SingleInputNextState())})(graph)


def model_fn(graph_tensor_spec, hparams=None):
  """Two GATv2 layers on the ``paper`` node set; the second one emits logits."""
  inputs = tf.keras.layers.Input(type_spec=graph_tensor_spec)
  graph = tfgnn.keras.layers.MapFeatures(
      node_sets_fn=lambda node_set, node_set_name: node_set["feat"])(inputs)
  dropout = _hp(hparams, "dropout")
  attention_dropout = _hp(hparams, "attention_dropout")
  reg = tf.keras.regularizers.l2(_hp(hparams, "l2") / 2)
  graph = _gat_layer(graph, _hp(hparams, "heads"), _hp(hparams, "per_head_channels"),
                     "elu", dropout, attention_dropout, reg)
  graph = _gat_layer(graph, 1, _hp(hparams, "num_classes"), "linear", dropout,
                     attention_dropout, reg)
  return tf.keras.Model(inputs, graph)


def task(hparams=None):
  return RootNodeLogits(
      NODE_SET, num_classes=_hp(hparams, "num_classes"),
      label_fn=runner.RootNodeLabelFn(NODE_SET, feature_name="label"))


def optimizer_fn(hparams=None):
  return tf.keras.optimizers.Adam(learning_rate=_hp(hparams, "learning_rate"))
