"""The Planetoid module files' own layers, checked against what they stand in for."""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn.models import gcn

from tests.helpers import REPO_ROOT


@pytest.fixture(scope="module")
def planetoid_common():
  sys.path.insert(0, os.path.join(REPO_ROOT, "module_files"))
  try:
    import planetoid_common as module  # pylint: disable=g-import-not-at-top
    yield module
  finally:
    sys.path.remove(os.path.join(REPO_ROOT, "module_files"))


def _graph(seed=0, num_nodes=30, num_edges=90, dim=12):
  rng = np.random.default_rng(seed)
  src, tgt = rng.integers(0, num_nodes, num_edges), rng.integers(0, num_nodes, num_edges)
  return tfgnn.GraphTensor.from_pieces(
      node_sets={"v": tfgnn.NodeSet.from_fields(
          sizes=[num_nodes], features={tfgnn.HIDDEN_STATE: rng.normal(size=(num_nodes, dim))
                                       .astype(np.float32)})},
      edge_sets={"e": tfgnn.EdgeSet.from_fields(
          sizes=[num_edges], adjacency=tfgnn.Adjacency.from_indices(("v", src), ("v", tgt)),
          features={"weight": rng.uniform(0.1, 1.0, num_edges).astype(np.float32)})})


@pytest.mark.parametrize("normalization,weight", [("none", "weight"), ("in_out", None),
                                                  ("in_out", "weight")])
@pytest.mark.parametrize("receiver", [tfgnn.SOURCE, tfgnn.TARGET])
def test_transform_first_gcn_equals_tf_gnn_gcn(planetoid_common, normalization, weight,
                                               receiver):
  """Same function as TF-GNN's GCNConv (no self loops added), with the same weights."""
  graph = _graph()
  ours = planetoid_common.GCNConv(5, receiver_tag=receiver, activation="relu",
                                  degree_normalization=normalization,
                                  edge_weight_feature_name=weight)
  theirs = gcn.GCNConv(5, receiver_tag=receiver, activation="relu", add_self_loops=False,
                       degree_normalization=normalization, edge_weight_feature_name=weight)
  got = ours(graph, edge_set_name="e")
  want_shape = theirs(graph, edge_set_name="e").shape
  theirs._filter.kernel.assign(ours._kernel.kernel)  # pylint: disable=protected-access
  theirs._filter.bias.assign(tf.range(5, dtype=tf.float32) / 10)  # pylint: disable=protected-access
  ours._bias.assign(tf.range(5, dtype=tf.float32) / 10)  # pylint: disable=protected-access
  got = ours(graph, edge_set_name="e")
  assert got.shape == want_shape
  np.testing.assert_allclose(got.numpy(), theirs(graph, edge_set_name="e").numpy(),
                             rtol=1e-5, atol=1e-5)


def test_sparse_dropout_dense_is_dropout_then_dense(planetoid_common):
  """Inference: exactly x @ W (sparse inputs); training: each nonzero entry is dropped or
  scaled by 1 / (1 - rate), as Dropout then Dense; regularizer and config kept."""
  rng = np.random.default_rng(0)
  x = (rng.random((50, 40)) < 0.1) * rng.random((50, 40))
  x[3] = 0.0  # a row without any nonzero entry
  x = tf.constant(x, tf.float32)
  layer = planetoid_common.SparseDropoutDense(
      6, 0.5, kernel_regularizer=tf.keras.regularizers.l2(0.1))
  got = layer(x, training=False)
  np.testing.assert_allclose(got.numpy(), (x @ layer.kernel).numpy(), rtol=1e-5, atol=1e-6)
  assert len(layer.losses) == 1
  one_hot = tf.one_hot(rng.integers(0, 40, 400), 40)
  trained = layer(one_hot, training=True).numpy()
  rows = tf.gather(layer.kernel, tf.argmax(one_hot, axis=1)).numpy()
  kept = np.all(np.isclose(trained, 2.0 * rows, atol=1e-6), axis=1)
  dropped = np.all(trained == 0.0, axis=1)
  assert np.all(kept | dropped) and 150 < kept.sum() < 250
  config = layer.get_config()
  assert config["units"] == 6 and config["rate"] == 0.5
  conv = planetoid_common.GCNConv(5, receiver_tag=tfgnn.SOURCE, sparse_input_dropout=0.5)
  assert conv.get_config()["sparse_input_dropout"] == 0.5
  graph = _graph()
  dense = planetoid_common.GCNConv(5, receiver_tag=tfgnn.SOURCE)
  dense(graph, edge_set_name="e")
  conv(graph, edge_set_name="e")
  conv._kernel.kernel.assign(dense._kernel.kernel)  # pylint: disable=protected-access
  np.testing.assert_allclose(conv(graph, edge_set_name="e", training=False).numpy(),
                             dense(graph, edge_set_name="e").numpy(), rtol=1e-5, atol=1e-5)
