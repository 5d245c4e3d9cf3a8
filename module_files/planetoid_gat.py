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

Labels: ``SeedLabelFn`` removes ``label`` from every node before the GNN.

Options: ``HPARAMS`` below (``hparams`` keys and defaults). ``num_classes`` has no
default: the Planetoid pipeline passes it as ``custom_config["hparams"]``.
"""

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn.models import gat_v2

# The task and optimizer_fn of this module are the shared ones.
from planetoid_common import dropout_then_conv, input_graph, optimizer_fn, task  # pylint: disable=unused-import

HPARAMS = {"heads": 8, "per_head_channels": 8, "dropout": 0.6,
           "attention_dropout": 0.6, "l2": 5e-4, "learning_rate": 0.005,
           "num_classes": None}


def _gat_layer(graph, heads, channels, activation, dropout, attention_dropout,
               regularizer):
  return dropout_then_conv(graph, gat_v2.GATv2Conv(
      num_heads=heads, per_head_channels=channels,
      receiver_tag=tfgnn.SOURCE, edge_dropout=attention_dropout,
      attention_activation=tf.keras.layers.LeakyReLU(alpha=0.2),
      activation=activation, kernel_regularizer=regularizer), dropout)


def model_fn(graph_tensor_spec, hparams):
  """Two GATv2 layers on the ``paper`` node set; the second one emits logits."""
  inputs, graph = input_graph(graph_tensor_spec)
  dropout = hparams["dropout"]
  attention_dropout = hparams["attention_dropout"]
  reg = tf.keras.regularizers.l2(hparams["l2"] / 2)
  graph = _gat_layer(graph, hparams["heads"], hparams["per_head_channels"],
                     "elu", dropout, attention_dropout, reg)
  graph = _gat_layer(graph, 1, hparams["num_classes"], "linear", dropout,
                     attention_dropout, reg)
  return tf.keras.Model(inputs, graph)
