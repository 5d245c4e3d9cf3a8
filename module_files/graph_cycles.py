"""GnnTrainer module: graph-level classification or regression of a graph's cycle count.

Input: the graphs written by ``pipelines.cycles.data``: one graph per example,
node set ``atom`` (``kind``: int64 in ``[0, 4)``), edge set ``bond`` (both
directions), context feature ``cycles`` (the number of independent cycles, the
label: read by ``runner.ContextLabelFn``, which removes it from the model's
input). Serving needs no ``cycles``: the exported signature fills it in.

Model: the kind's embedding, then ``layers`` rounds of GIN-style message
passing (the sum of the neighbours' ``Dense(relu)`` messages, concatenated
with the atom's own state, ``Dense(relu)``); the graph task sums the atom
states over each graph (``reduce_type="sum"``: with the degree in the states,
that counts bonds and atoms) and puts a ``Dense`` on top.

``hparams``:

* ``task``: ``"classification"`` (``runner.GraphMulticlassClassification``,
  ``num_classes`` classes: accuracy) or ``"regression"``
  (``runner.GraphMeanSquaredError`` on the count as a number: MSE, MAE);
* ``layers``: rounds of message passing; ``0`` is the features-only baseline
  (the pooled kinds and the number of atoms, no structure);
* ``units``, ``learning_rate``, ``num_classes``.
"""

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

NODE_SET = "atom"
EDGE_SET = "bond"
LABEL = "cycles"
NUM_KINDS = 4

HPARAMS = {"task": "classification", "layers": 2, "units": 32, "learning_rate": 0.003,
           "num_classes": 4}


def model_fn(graph_tensor_spec, hparams):
  """Kind embeddings and ``hparams["layers"]`` GIN-style rounds on ``atom``."""
  units = hparams["units"]
  inputs = tf.keras.layers.Input(type_spec=graph_tensor_spec)
  graph = tfgnn.keras.layers.MapFeatures(
      node_sets_fn=lambda node_set, node_set_name: tf.keras.layers.Embedding(
          NUM_KINDS, units)(node_set["kind"]))(inputs)
  for _ in range(hparams["layers"]):
    graph = tfgnn.keras.layers.GraphUpdate(node_sets={
        NODE_SET: tfgnn.keras.layers.NodeSetUpdate(
            {EDGE_SET: tfgnn.keras.layers.SimpleConv(
                tf.keras.layers.Dense(units, "relu"), "sum", receiver_tag=tfgnn.TARGET)},
            tfgnn.keras.layers.NextStateFromConcat(tf.keras.layers.Dense(units, "relu")))})(
                graph)
  return tf.keras.Model(inputs, graph)


class CountRegression(runner.GraphMeanSquaredError):
  """``runner.GraphMeanSquaredError`` reporting MSE and MAE only.

  The runner's default regression metrics add MAPE and MSLE, which divide by
  the label: meaningless for a count that is often 0.
  """

  def metrics(self):
    return (tf.keras.metrics.MeanSquaredError(), tf.keras.metrics.MeanAbsoluteError())


def task(hparams):
  label_fn = runner.ContextLabelFn(LABEL)
  if hparams["task"] == "classification":
    return runner.GraphMulticlassClassification(
        NODE_SET, num_classes=hparams["num_classes"], reduce_type="sum", label_fn=label_fn)
  if hparams["task"] == "regression":
    return CountRegression(NODE_SET, reduce_type="sum", label_fn=label_fn)
  raise ValueError("hparams['task'] must be 'classification' or 'regression', "
                   f"got {hparams['task']!r}.")


def optimizer_fn(hparams):
  return tf.keras.optimizers.Adam(learning_rate=hparams["learning_rate"])
