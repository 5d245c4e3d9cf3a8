"""GnnTrainer module: two root-node tasks on Planetoid, a paper's topic and its citation count.

Input: GraphSampler subgraphs of Planetoid tables written with
``with_citations=True`` (``pipelines.planetoid.data``): node set ``paper``
with ``feat``, ``label`` (the topic) and ``citations`` (log(1 + the paper's
citation links in the whole graph)); edge set ``cites``.

Tasks (``tasks``, one serving output each, named by the task):

* ``"topic"``: ``runner.RootNodeMulticlassClassification`` on ``label``
  (accuracy);
* ``"citations"``: ``runner.RootNodeMeanSquaredError`` on ``citations``
  (node regression; MSE and MAE).

``loss_weights``: ``{"topic": 1, "citations": hparams["citations_weight"]}``.
The runner requires that no task changes the graph's spec, so the labels are
not read with ``RootNodeLabelFn`` (which removes the feature): the feature
processor ``ReadoutRootFeatures`` moves the root's ``label`` and ``citations``
into TF-GNN's ``_readout`` node set, where the tasks read them
(``label_feature_name``) and from which the runner strips them before the
model. Serving needs neither feature.

Encoder: GCN as in ``planetoid_gcn.py`` (the tables' full-graph normalization
``weight``), two layers of ``units`` (relu) with dropout and L2 on the first,
on ``feat`` plus a constant 1: propagated, the constant becomes the sum of a
paper's edge weights, which grows with its number of links (the row-normalized
``feat`` alone hides it). Each task puts its own ``Dense`` on the root paper's
state.
"""

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

from gnn_trainer_component.tasks import ReadoutRootFeatures
from planetoid_common import EDGE_SET, NODE_SET, GCNConv, dropout_then_conv, optimizer_fn  # pylint: disable=unused-import

HPARAMS = {"units": 32, "dropout": 0.5, "l2": 5e-4, "learning_rate": 0.01,
           "citations_weight": 1.0, "num_classes": None}


def feature_processors(graph_tensor_spec):
  del graph_tensor_spec  # the same processor for any spec with the two features
  return [ReadoutRootFeatures(NODE_SET, ["label", "citations"])]


def _with_ones(node_set, node_set_name):
  if node_set_name != NODE_SET:
    return None
  feat = node_set["feat"]
  return tf.concat([feat, tf.ones_like(feat[:, :1])], axis=-1)


def model_fn(graph_tensor_spec, hparams):
  """Two GCN layers on ``paper`` (``feat`` and a constant 1)."""
  inputs = tf.keras.layers.Input(type_spec=graph_tensor_spec)
  graph = tfgnn.keras.layers.MapFeatures(node_sets_fn=_with_ones)(inputs)
  for layer in range(2):
    graph = dropout_then_conv(graph, GCNConv(
        hparams["units"], receiver_tag=tfgnn.SOURCE, activation="relu",
        degree_normalization="none", edge_weight_feature_name="weight",
        kernel_regularizer=tf.keras.regularizers.l2(hparams["l2"] / 2) if layer == 0 else None),
        hparams["dropout"])
  return tf.keras.Model(inputs, graph)


class CitationsRegression(runner.RootNodeMeanSquaredError):
  """``runner.RootNodeMeanSquaredError`` reporting MSE and MAE only (MAPE and
  MSLE divide by the label, 0 for a paper without citation links)."""

  def metrics(self):
    return (tf.keras.metrics.MeanSquaredError(), tf.keras.metrics.MeanAbsoluteError())


def tasks(hparams):
  return {
      "topic": runner.RootNodeMulticlassClassification(
          NODE_SET, num_classes=hparams["num_classes"], label_feature_name="label"),
      "citations": CitationsRegression(NODE_SET, label_feature_name="citations"),
  }


def loss_weights(hparams):
  return {"topic": 1.0, "citations": float(hparams["citations_weight"])}
