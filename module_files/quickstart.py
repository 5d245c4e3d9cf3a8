"""GnnTrainer module of the quickstart (docs/quickstart.md): a user's segment from what they bought."""

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner
from tensorflow_gnn.models import vanilla_mpnn

# The task. The quickstart pipeline reads these too: GraphSampler samples HOPS around
# each seed of SEED_NODE_SET, GraphEvaluator reads the test seeds' LABEL.
SEED_NODE_SET = "user"
LABEL = "label"
NUM_CLASSES = 3
HOPS = [{"bought": 8}, {"also_viewed": 4}]  # per hop: {edge set: sampled edges per node}

HPARAMS = {"units": 32, "learning_rate": 0.01, "dropout": 0.1}


def initial_state(node_set, node_set_name):
  """A node's first hidden state, from its features (one CSV column each)."""
  if node_set_name == "user":
    x = tf.stack([node_set["age"] / 100.0, node_set["visits"] / 10.0], axis=-1)
  elif node_set_name == "item":
    category = tf.keras.layers.Embedding(6, 8)(node_set["category"])
    numbers = tf.stack([tf.math.log1p(node_set["price"]), node_set["rating"]], axis=-1)
    x = tf.concat([category, numbers], axis=-1)
  else:
    raise ValueError(f"No initial state for node set {node_set_name!r}.")
  return tf.keras.layers.Dense(32, activation="relu")(x)


def model_fn(graph_tensor_spec, hparams):
  """The GNN: initial states, then one round of message passing per hop."""
  inputs = tf.keras.layers.Input(type_spec=graph_tensor_spec)
  graph = tfgnn.keras.layers.MapFeatures(node_sets_fn=initial_state)(inputs)
  for _ in HOPS:
    # GraphSampler samples edges away from the seed (source -> target), so
    # messages flow back to it: every node set receives at the edges' SOURCE.
    graph = vanilla_mpnn.VanillaMPNNGraphUpdate(
        units=hparams["units"], message_dim=hparams["units"], receiver_tag=tfgnn.SOURCE,
        reduce_type="mean", dropout_rate=hparams["dropout"])(graph)
  return tf.keras.Model(inputs, graph)


def task():
  """Classify the seed (the first node of each subgraph) by its label; the label is no input."""
  return runner.RootNodeMulticlassClassification(
      SEED_NODE_SET, num_classes=NUM_CLASSES,
      label_fn=runner.RootNodeLabelFn(SEED_NODE_SET, feature_name=LABEL))


def optimizer_fn(hparams):
  return tf.keras.optimizers.Adam(learning_rate=hparams["learning_rate"])
