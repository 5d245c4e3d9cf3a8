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
