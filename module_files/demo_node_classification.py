"""Demo user module: root-node (paper topic) classification with a 2-layer MPNN.

Works on raw demo examples (``venue`` is a string, hashed) and on the output of
``module_files/demo_transform.py`` (``feat`` z-scored, ``venue`` a vocabulary id).

Follows the GnnTrainer module-file contract (gnn_trainer_component/trainer/module_contract.py).
Hyperparameters (from a Tuner's HyperParameters artifact, else defaults):
``units``, ``message_dim``, ``dropout``, ``l2``, ``learning_rate``; GnnTuner
searches the ones in ``hyperparameter_space``.
"""

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner
from tensorflow_gnn.models import vanilla_mpnn

from gnn_trainer_component import layers

NODE_SET = "paper"
NUM_CLASSES = 3
HPARAMS = {"units": 32, "message_dim": 32, "dropout": 0.1, "l2": 5e-4,
           "learning_rate": 5e-3, "venue_buckets": 64}


def model_fn(graph_tensor_spec, hparams):
  """Base GNN: initial states from feat + hashed venue, two MPNN rounds (the last: ReadoutRound)."""
  units = hparams["units"]

  buckets = hparams["venue_buckets"]

  def init_node_state(node_set, node_set_name):
    del node_set_name
    venue = node_set["venue"]
    if venue.dtype == tf.string:  # raw examples
      venue = tf.keras.layers.Hashing(num_bins=buckets)(venue)
    else:  # vocabulary ids from Transform (module_files/demo_transform.py)
      venue = tf.math.floormod(venue, buckets)
    venue = tf.keras.layers.Embedding(buckets, 8)(venue)
    x = tf.keras.layers.Concatenate()([node_set["feat"], venue])
    return tf.keras.layers.Dense(units, activation="relu")(x)

  inputs = tf.keras.layers.Input(type_spec=graph_tensor_spec)
  graph = tfgnn.keras.layers.MapFeatures(node_sets_fn=init_node_state)(inputs)
  for last in (False, True):
    update = vanilla_mpnn.VanillaMPNNGraphUpdate(
        units=units, message_dim=hparams["message_dim"],
        receiver_tag=tfgnn.TARGET, l2_regularization=hparams["l2"],
        dropout_rate=hparams["dropout"])
    if last:  # while training, the last round updates the seeds only: what the task reads
      update = layers.ReadoutRound(update, node_set_name=NODE_SET, receiver_tag=tfgnn.TARGET)
    graph = update(graph)
  return tf.keras.Model(inputs, graph)


def hyperparameter_space(hp):
  """GnnTuner's search space (a keras_tuner.HyperParameters; names are HPARAMS keys)."""
  hp.Choice("learning_rate", [1e-2, 5e-3, 1e-3])
  hp.Choice("units", [16, 32, 64])
  hp.Float("dropout", 0.0, 0.4, step=0.1)


def task():
  # RootNodeLabelFn reads the root's label and removes the `label` feature of
  # the whole node set, so no node's label is a model input.
  return runner.RootNodeMulticlassClassification(
      NODE_SET, num_classes=NUM_CLASSES,
      label_fn=runner.RootNodeLabelFn(NODE_SET, feature_name="label"))


def optimizer_fn(hparams):
  return tf.keras.optimizers.Adam(learning_rate=hparams["learning_rate"])
