"""GnnTrainer module: GAE-style link prediction (Kipf & Welling, 2016) on Planetoid.

Input: LinkSampler examples of the tables written by ``pipelines.planetoid.data``
(node set ``paper`` with ``feat``; edge set ``cites``, both directions of each
citation plus self loops): the subgraphs sampled around both papers of a pair
in the training graph, with TF-GNN's ``_readout`` node set (``label`` 1.0 for a
citation, 0.0 for a sampled non-citation) and ``_readout/source|target``.

Encoder as in GAE but twice as wide: GCN(64, relu) -> GCN(32, linear) over
``cites`` (GAE: 32 -> 16; on Cora's 5 seeds the wider one raised test AP from
0.899 to 0.907, benchmarks/README.md), on the papers' ``feat`` (with
``hparams["mark_ends"]``, plus two 0/1 columns marking the pair's ends, never
dropped out: the labeling trick of SEAL-style link
prediction, :class:`MarkEnds`; 39 % of Cora's test citations have a common
neighbour, 2 % of the sampled non-citations; yet on Cora's 5 seeds, measured
with GAE's widths, it did not raise the means, hence off by default:
benchmarks/README.md). The GCN
normalization is computed on each sampled subgraph (``degree_normalization=
"in_out"``), not read from the tables' ``weight`` feature: those weights count
the degrees of the whole graph, held-out citations included. Edges are sampled
away from the pair (source -> target), so messages flow target -> source
(``receiver_tag=tfgnn.SOURCE``). The node ``label`` (the paper's class) is not
an input. The first layer's dropout and weights run on the features' nonzero
entries only (``hparams["sparse_features"]``, on by default: Cora's bag-of-words
rows are 1.3 % nonzero; ``planetoid_common.SparseDropoutDense``, the same function).

Decoder (``hparams["scorer"]``): ``"hadamard"`` (default: ``Dense(1)`` on the
elementwise product, ``gnn_trainer_component.tasks.HadamardProductLinkPrediction``)
or ``"dot"`` (GAE's inner product, ``tasks.DotProductLinkPrediction``). Both
report ROC AUC and average precision. Unlike GAE, which scores every non-edge
of the full graph in each of its 200 full-batch steps, each training pair here
comes with fixed sampled negatives (the benchmark: 3 per positive); dropout 0.5
(GAE: none) keeps that from overfitting. On Cora (validation, fan-outs 10,5,
GAE's widths) the inner product plateaus near AUC 0.87, the Hadamard decoder reaches ~0.91
(benchmarks/README.md). Serving: a request holds the candidate pair's subgraph and
``_readout`` structure without ``label``; the output is the pair's logit.
"""

import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component import tasks as task_lib
from planetoid_common import GCNConv, conv_update

NODE_SET = "paper"
EDGE_SET = "cites"
READOUT = "_readout"  # tfgnn's structured readout: _readout/source, _readout/target

HPARAMS = {"units": 64, "embedding_dim": 32, "dropout": 0.5, "learning_rate": 0.01,
           "scorer": "hadamard", "mark_ends": False, "sparse_features": True}

_SCORERS = {"dot": task_lib.DotProductLinkPrediction,
            "hadamard": task_lib.HadamardProductLinkPrediction}


def _dropout(graph, rate):
  return tfgnn.keras.layers.MapFeatures(
      node_sets_fn=lambda node_set, node_set_name: tf.keras.layers.Dropout(rate)(
          node_set[tfgnn.HIDDEN_STATE]) if node_set_name == NODE_SET else None)(graph)


def _gcn_layer(graph, units, activation, sparse_input_dropout=None):
  return conv_update(graph, GCNConv(units, receiver_tag=tfgnn.SOURCE, activation=activation,
                                    degree_normalization="in_out",
                                    sparse_input_dropout=sparse_input_dropout))


class MarkEnds(tf.keras.layers.Layer):
  """Appends two 0/1 columns to the paper states: the pair's source, its target.

  The labeling trick (Zhang et al., 2021): with the ends marked, message
  passing sees which papers neighbour one end, the other or both, which plain
  GAE embeddings of each end cannot tell. The ends are read from the
  ``_readout/source`` and ``_readout/target`` edge sets, which serving
  requests hold too.
  """

  def call(self, graph):
    state = graph.node_sets[NODE_SET][tfgnn.HIDDEN_STATE]
    num_nodes = tf.shape(state, out_type=tf.int64)[:1]
    marks = []
    for end in ("source", "target"):
      index = tf.cast(graph.edge_sets[f"{READOUT}/{end}"].adjacency.source, tf.int64)
      marks.append(tf.scatter_nd(index[:, None], tf.ones_like(index, state.dtype), num_nodes))
    return graph.replace_features(node_sets={NODE_SET: {
        tfgnn.HIDDEN_STATE: tf.concat([state, tf.stack(marks, axis=1)], axis=1)}})


def model_fn(graph_tensor_spec, hparams):
  """Two GCN layers on ``paper``; the node embeddings are the ``paper`` states."""
  inputs = tf.keras.layers.Input(type_spec=graph_tensor_spec)
  graph = tfgnn.keras.layers.MapFeatures(
      node_sets_fn=lambda node_set, node_set_name: (
          node_set["feat"] if node_set_name == NODE_SET else None))(inputs)
  if hparams["sparse_features"] and not hparams["mark_ends"]:
    # Cora's bag-of-words features are mostly zeros: their dropout and W in one
    # layer that computes on the nonzeros only (the same function, cheaper).
    graph = _gcn_layer(graph, hparams["units"], "relu", sparse_input_dropout=hparams["dropout"])
  else:
    graph = _dropout(graph, hparams["dropout"])
    if hparams["mark_ends"]:  # after the dropout: the marks are never dropped
      graph = MarkEnds()(graph)
    graph = _gcn_layer(graph, hparams["units"], "relu")
  graph = _dropout(graph, hparams["dropout"])
  graph = _gcn_layer(graph, hparams["embedding_dim"], None)
  return tf.keras.Model(inputs, graph)


def task(hparams):
  if hparams["scorer"] not in _SCORERS:
    raise ValueError(f"hparams['scorer'] must be one of {sorted(_SCORERS)}, "
                     f"got {hparams['scorer']!r}.")
  return _SCORERS[hparams["scorer"]]()


def optimizer_fn(hparams):
  return tf.keras.optimizers.Adam(learning_rate=hparams["learning_rate"])
