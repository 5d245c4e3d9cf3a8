"""GnnTrainer module: recommendation by learned id embeddings, propagated as LightGCN does.

Input: a graph of two node sets whose schema declares each node's id as the feature ``#id``
(``features { key: "#id" value { dtype: DT_STRING } }``; GnnTrainer fills it from the table's
id column), sampled in memory around both ends of each (source, target) pair: the user-item
graph of ``pipelines.recommendation.data`` with the ``LINK_CONFIG`` below, or one's own
tables with a link_config naming their edge sets.

Model (LightGCN, He et al. 2020, on each pair's sampled subgraph): every node of a node set
that declares ``#id`` has a learned embedding (its id hashed into ``buckets`` rows); where a
node set has the example's ``genre`` and ``views`` (its items), their embedding is added, so
an item without ratings still has a place. Then ``rounds`` of parameter-free propagation, each
node taking the mean of the nodes its sampled edges reach (as deep as the hops sample); a
node's final embedding is the mean of its embeddings after every round. The pair's score is
the dot product of its ends' embeddings: the same embeddings rank every item for a user
(``DotProductLinkPrediction``, trained as ``recommendation.py`` is: binary cross-entropy
against uniformly drawn negative items).
"""

import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component import optimizers
from gnn_trainer_component import tasks as task_lib

#: GnnTrainer's link_config (the pipeline reads it), as ``recommendation.py``'s.
LINK_CONFIG = {
    "edge_set": "rated",
    "reverse_edge_set": "rated_by",
    "splits": {"train": 0.8, "eval": 0.1, "test": 0.1},
    "negatives_per_positive": {"train": 2, "eval": 1, "test": 1},
    "source_hops": [{"rated": 10}, {"rated_by": 5}],  # from the user
    "target_hops": [{"rated_by": 10}, {"rated": 5}],  # from the item
    "seed": 0,
}

#: ``buckets``: rows of each node set's id embedding (ids are hashed into them: keep it well
#: above the number of nodes, so that few share a row; ``LazyAdam`` updates the rows a batch
#: looks up only, so a step costs the same whatever the table's size); ``l2``: on the
#: embeddings the batch looks up (a penalty on the whole table would pull every row to zero
#: at each step and hold the model back).
#: ``rounds``: of propagation (the hops' depth).
#: ``loss``: ``"bce"`` (binary cross-entropy of each pair against the link_config's negatives)
#: or ``"in_batch_softmax"`` (each positive's item ranked against every item of its batch,
#: ``tasks.InBatchSoftmaxLinkPrediction``, scores divided by ``temperature``, plus
#: ``bce_weight`` times the binary cross-entropy).
HPARAMS = {"units": 32, "learning_rate": 0.005, "buckets": 1 << 16, "l2": 1e-4, "rounds": 2,
           "loss": "bce", "temperature": 1.0, "bce_weight": 1.0}


#: The example items' features the first state adds, where a node set has them all.
ITEM_FEATURES = ("genre", "views")


class IdEmbedding(tf.keras.layers.Layer):
  """A node set's first state: its hashed id's learned embedding (+ genre and views)."""

  def __init__(self, units: int, buckets: int, l2: float, with_features: bool, **kwargs):
    super().__init__(**kwargs)
    self._units, self._buckets, self._l2, self._with_features = (
        units, buckets, l2, with_features)
    self._ids = tf.keras.layers.Embedding(
        buckets, units,
        embeddings_initializer=tf.keras.initializers.RandomNormal(stddev=0.1))
    if with_features:
      self._genre = tf.keras.layers.Embedding(32, units)
      self._views = tf.keras.layers.Dense(units, use_bias=False)

  def get_config(self):
    return dict(super().get_config(), units=self._units, buckets=self._buckets, l2=self._l2,
                with_features=self._with_features)

  def call(self, node_set):
    x = self._ids(tf.strings.to_hash_bucket_fast(node_set["#id"], self._buckets))
    self.add_loss(self._l2 * tf.reduce_mean(tf.reduce_sum(tf.square(x), axis=-1)))
    if self._with_features:
      x += self._genre(node_set["genre"])
      x += self._views(tf.math.log1p(node_set["views"])[:, None])
    return x


def propagate(graph: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
  """One round of LightGCN's propagation: each node's state becomes its neighbours' mean.

  Edges are sampled away from the pair's ends, so a node receives over the edges it is the
  SOURCE of; a node without such an edge keeps its state.
  """
  received = {}
  for name, edge_set in graph.edge_sets.items():
    ends = (edge_set.adjacency.source_name, edge_set.adjacency.target_name)
    if name.startswith("_") or any(tfgnn.HIDDEN_STATE not in graph.node_sets[end].features
                                   for end in ends):
      continue  # the readout, or a node set without an embedding
    sender = tfgnn.broadcast_node_to_edges(graph, name, tfgnn.TARGET,
                                           feature_name=tfgnn.HIDDEN_STATE)
    pooled = tfgnn.pool_edges_to_node(graph, name, tfgnn.SOURCE, "sum", feature_value=sender)
    count = tfgnn.pool_edges_to_node(graph, name, tfgnn.SOURCE, "sum",
                                     feature_value=tf.ones_like(sender[:, :1]))
    receiver = ends[0]
    total, seen = received.get(receiver, (0.0, 0.0))
    received[receiver] = (total + pooled, seen + count)
  states = {}
  for name, (total, seen) in received.items():
    own = graph.node_sets[name][tfgnn.HIDDEN_STATE]
    states[name] = {tfgnn.HIDDEN_STATE: tf.where(seen > 0, total / tf.maximum(seen, 1.0), own)}
  return graph.replace_features(node_sets=states)


def model_fn(graph_tensor_spec, hparams):
  """Id embeddings, then the rounds of propagation, averaged per node."""
  embedded = sorted(name for name, spec in graph_tensor_spec.node_sets_spec.items()
                    if "#id" in spec.features_spec)
  if not embedded:
    raise ValueError(
        "recommendation_ranking.py learns an embedding per node from its id: declare "
        'features { key: "#id" value { dtype: DT_STRING } } on the node sets of the pairs\' '
        f"ends in the graph schema (node sets: {sorted(graph_tensor_spec.node_sets_spec)}).")

  def first_state(node_set, node_set_name):
    if node_set_name not in embedded:
      return None
    return IdEmbedding(hparams["units"], hparams["buckets"], hparams["l2"],
                       with_features=all(f in node_set.features for f in ITEM_FEATURES))(
                           node_set)

  inputs = tf.keras.layers.Input(type_spec=graph_tensor_spec)
  rounds = [tfgnn.keras.layers.MapFeatures(node_sets_fn=first_state)(inputs)]
  for _ in range(hparams["rounds"]):
    rounds.append(tf.keras.layers.Lambda(propagate)(rounds[-1]))
  mean = {name: {tfgnn.HIDDEN_STATE: tf.add_n([g.node_sets[name][tfgnn.HIDDEN_STATE]
                                                for g in rounds]) / len(rounds)}
          for name in embedded}
  graph = rounds[0].replace_features(node_sets=mean)
  return tf.keras.Model(inputs, graph)


def task(hparams):
  """The dot product of the pair's user and item embeddings; ROC AUC and AP as metrics."""
  if hparams["loss"] == "in_batch_softmax":
    return task_lib.InBatchSoftmaxLinkPrediction(temperature=hparams["temperature"],
                                                 bce_weight=hparams["bce_weight"])
  if hparams["loss"] != "bce":
    raise ValueError(f"hparams loss must be 'bce' or 'in_batch_softmax', got "
                     f"{hparams['loss']!r}.")
  return task_lib.DotProductLinkPrediction()


def optimizer_fn(hparams):
  """Adam on the rows each batch looks up (``LazyAdam``): the id tables' other rows rest."""
  return optimizers.LazyAdam(learning_rate=hparams["learning_rate"])
