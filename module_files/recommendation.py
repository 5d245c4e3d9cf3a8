"""GnnTrainer module: recommendation as link prediction between users and items.

Input: the user-item graph of ``pipelines.recommendation.data`` (node sets
``user`` and ``item``; ``rated``: user -> item, ``rated_by``: its reverse),
sampled in memory around both ends of each (user, item) pair with the
``LINK_CONFIG`` below: the user end over the items it rated and their other
raters, the item end over its raters and what else they rated.

Model: every node set's features to a first state (the user's features carry
no taste; the item's genre is embedded, beside its price and page views), then two rounds of message passing in
which each node receives from the nodes its sampled edges reach (edges are
sampled away from the pair's ends, so messages flow to the edges' SOURCE); while
training, the last round updates the pairs' ends only (``layers.ReadoutRound``),
the nodes the task reads.
A linear layer per node set then gives the embeddings, and the pair's score
is the dot product of the user's and the item's (``DotProductLinkPrediction``):
the same embeddings rank every item for a user.
"""

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn.models import vanilla_mpnn

from gnn_trainer_component import layers
from gnn_trainer_component import tasks as task_lib

#: GnnTrainer's link_config (the pipeline reads it): which edges to predict, how to
#: split them, and the hops sampled around each end.
LINK_CONFIG = {
    "edge_set": "rated",
    "reverse_edge_set": "rated_by",
    "splits": {"train": 0.8, "eval": 0.1, "test": 0.1},
    "negatives_per_positive": {"train": 2, "eval": 1, "test": 1},
    "source_hops": [{"rated": 10}, {"rated_by": 5}],  # from the user
    "target_hops": [{"rated_by": 10}, {"rated": 5}],  # from the item
    "seed": 0,
}

HPARAMS = {"units": 32, "learning_rate": 0.005, "dropout": 0.1}


def initial_state(node_set, node_set_name):
  """A node's first hidden state, from its features."""
  if node_set_name == "user":
    x = tf.stack([node_set["age"] / 100.0, node_set["activity"]], axis=-1)
  elif node_set_name == "item":
    genre = tf.keras.layers.Embedding(32, 16)(node_set["genre"])
    numbers = tf.stack([tf.math.log1p(node_set["price"]), tf.math.log1p(node_set["views"])],
                       axis=-1)
    x = tf.concat([genre, numbers], axis=-1)
  else:
    return None  # the readout node set
  return tf.keras.layers.Dense(32, activation="relu")(x)


def model_fn(graph_tensor_spec, hparams):
  """Initial states, then one round of message passing per hop."""
  inputs = tf.keras.layers.Input(type_spec=graph_tensor_spec)
  graph = tfgnn.keras.layers.MapFeatures(node_sets_fn=initial_state)(inputs)
  rounds = len(LINK_CONFIG["source_hops"])
  for i in range(rounds):
    update = vanilla_mpnn.VanillaMPNNGraphUpdate(
        units=hparams["units"], message_dim=hparams["units"], receiver_tag=tfgnn.SOURCE,
        node_set_names=["user", "item"], reduce_type="mean",
        dropout_rate=hparams["dropout"])
    if i == rounds - 1:  # while training, the last round updates the pairs' ends only
      update = layers.ReadoutRound(update, receiver_tag=tfgnn.SOURCE)
    graph = update(graph)
  # Linear embeddings: the ReLU states above are never negative, and their dot
  # products could not score a pair below another's without all going to zero.
  graph = tfgnn.keras.layers.MapFeatures(
      node_sets_fn=lambda node_set, node_set_name: (
          tf.keras.layers.Dense(hparams["units"])(node_set[tfgnn.HIDDEN_STATE])
          if node_set_name in ("user", "item") else None))(graph)
  return tf.keras.Model(inputs, graph)


def task():
  """The dot product of the pair's user and item states; ROC AUC and AP as metrics."""
  return task_lib.DotProductLinkPrediction()


def optimizer_fn(hparams):
  return tf.keras.optimizers.Adam(learning_rate=hparams["learning_rate"])
