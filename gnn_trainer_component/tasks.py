"""Small TF-GNN ``runner.Task`` variants for use in user modules."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner


class RootNodeLogits(runner.RootNodeMulticlassClassification):
  """Root-node multiclass classification on logits the GNN already computed.

  ``RootNodeMulticlassClassification.predict`` puts a ``Dense(num_classes)``
  on the root's state; here the last GNN layer has ``num_classes`` units and
  its output is used as the logits directly (loss, metrics and label handling
  are inherited unchanged).
  """

  def __init__(self, node_set_name: str, **kwargs):
    super().__init__(node_set_name, **kwargs)
    self._logits_node_set_name = node_set_name

  def predict(self, inputs: tfgnn.GraphTensor):
    tfgnn.check_scalar_graph_tensor(inputs, name="RootNodeLogits")
    return tfgnn.keras.layers.ReadoutFirstNode(
        node_set_name=self._logits_node_set_name, feature_name=tfgnn.HIDDEN_STATE,
        name=self._name)(inputs)


def link_prediction_metrics() -> tuple[tf.keras.metrics.Metric, ...]:
  """Metrics of a link-prediction task on logits: ROC AUC, average precision, accuracy.

  ``average_precision`` is Keras' area under the precision-recall curve
  (``careful_interpolation``, 200 thresholds), an estimate of scikit-learn's
  ``average_precision_score``. Accuracy thresholds the logit at 0
  (probability 0.5); TF-GNN's tasks keep ``BinaryAccuracy``'s default
  threshold of 0.5, which on logits means probability 0.62.
  """
  return (tf.keras.metrics.AUC(from_logits=True, name="auc"),
          tf.keras.metrics.AUC(curve="PR", from_logits=True, name="average_precision"),
          tf.keras.metrics.BinaryAccuracy(threshold=0.0, name="binary_accuracy"))


class DotProductLinkPrediction(runner.DotProductLinkPrediction):
  """``runner.DotProductLinkPrediction`` (score: dot product of the two ends'
  states) with :func:`link_prediction_metrics`."""

  def metrics(self):
    return link_prediction_metrics()


class HadamardProductLinkPrediction(runner.HadamardProductLinkPrediction):
  """``runner.HadamardProductLinkPrediction`` (score: ``Dense(1)`` on the
  elementwise product of the two ends' states) with :func:`link_prediction_metrics`."""

  def metrics(self):
    return link_prediction_metrics()
