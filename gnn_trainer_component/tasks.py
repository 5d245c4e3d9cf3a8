"""Small TF-GNN ``runner.Task`` variants for use in user modules."""

from __future__ import annotations

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
