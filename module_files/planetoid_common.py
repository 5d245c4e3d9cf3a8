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
