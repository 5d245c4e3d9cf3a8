"""ReadoutRound: the last round for the read nodes only, while training, equals the whole round.

Fast, no pipeline: graphs of a few components built here, TF-GNN's own layers as the
wrapped round.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn.models import gat_v2

from gnn_trainer_component import layers

#: Papers and authors per component, cites and writes edges per component.
PAPERS, AUTHORS, CITES, WRITES = [5, 1, 7], [2, 0, 3], [9, 0, 14], [3, 0, 4]


def _edges(rng, sources, targets, counts):
  """Edge ends within each component, numbered in the whole graph."""
  src, tgt, s0, t0 = [], [], 0, 0
  for n_s, n_t, count in zip(sources, targets, counts):
    src += list(s0 + rng.integers(0, max(n_s, 1), count))
    tgt += list(t0 + rng.integers(0, max(n_t, 1), count))
    s0, t0 = s0 + n_s, t0 + n_t
  return np.array(src, np.int64), np.array(tgt, np.int64)


def _graph(seed_rows=None, dim=4):
  """Three components; with ``seed_rows``, a structured readout ``seed`` of those papers."""
  rng = np.random.default_rng(0)
  state = lambda n: tf.constant(rng.normal(size=(sum(n), dim)), tf.float32)  # noqa: E731
  cites = _edges(rng, PAPERS, PAPERS, CITES)
  writes = _edges(rng, AUTHORS, PAPERS, WRITES)
  node_sets = {"paper": tfgnn.NodeSet.from_fields(sizes=PAPERS, features={
      tfgnn.HIDDEN_STATE: state(PAPERS), "year": tf.constant(np.arange(sum(PAPERS)))}),
               "author": tfgnn.NodeSet.from_fields(sizes=AUTHORS, features={
                   tfgnn.HIDDEN_STATE: state(AUTHORS)})}
  edge_sets = {
      "cites": tfgnn.EdgeSet.from_fields(
          sizes=CITES, adjacency=tfgnn.Adjacency.from_indices(("paper", cites[0]),
                                                              ("paper", cites[1])),
          features={"w": tf.constant(rng.random(sum(CITES)), tf.float32)}),
      "writes": tfgnn.EdgeSet.from_fields(
          sizes=WRITES, adjacency=tfgnn.Adjacency.from_indices(("author", writes[0]),
                                                               ("paper", writes[1])))}
  if seed_rows is not None:
    per_component = [sum(1 for r in seed_rows if sum(PAPERS[:c]) <= r < sum(PAPERS[:c + 1]))
                     for c in range(len(PAPERS))]
    node_sets["_readout"] = tfgnn.NodeSet.from_fields(sizes=per_component, features={})
    edge_sets["_readout/seed"] = tfgnn.EdgeSet.from_fields(
        sizes=per_component, adjacency=tfgnn.Adjacency.from_indices(
            ("paper", seed_rows), ("_readout", np.arange(len(seed_rows)))))
  return tfgnn.GraphTensor.from_pieces(node_sets=node_sets, edge_sets=edge_sets)


def _mean_update(units, receiver_tag=tfgnn.TARGET):
  """Mean over cites and (papers receiving from authors) a sum over writes."""
  convs = {"cites": tfgnn.keras.layers.SimpleConv(tf.keras.layers.Dense(units, "relu"), "mean",
                                                  receiver_tag=receiver_tag)}
  if receiver_tag == tfgnn.TARGET:
    convs["writes"] = tfgnn.keras.layers.SimpleConv(tf.keras.layers.Dense(units, "relu"), "sum",
                                                    receiver_tag=receiver_tag)
  return tfgnn.keras.layers.GraphUpdate(node_sets={"paper": tfgnn.keras.layers.NodeSetUpdate(
      convs, tfgnn.keras.layers.NextStateFromConcat(tf.keras.layers.Dense(units)))})


def _gat_update(units):
  return tfgnn.keras.layers.GraphUpdate(node_sets={"paper": tfgnn.keras.layers.NodeSetUpdate(
      {"cites": gat_v2.GATv2Conv(num_heads=2, per_head_channels=units // 2,
                                 receiver_tag=tfgnn.TARGET)},
      tfgnn.keras.layers.NextStateFromConcat(tf.keras.layers.Dense(units)))})


FIRST_NODES = np.array([0, 5, 6])


@pytest.mark.parametrize("make_update,units", [(_mean_update, 6), (_mean_update, 4),
                                               (_gat_update, 4)])
def test_read_nodes_get_the_whole_rounds_states_and_others_keep_theirs(make_update, units):
  graph = _graph()
  update = make_update(units)
  whole = update(graph).node_sets["paper"][tfgnn.HIDDEN_STATE].numpy()
  wrapped = layers.ReadoutRound(update, node_set_name="paper")
  out = wrapped(graph, training=True)
  states = out.node_sets["paper"][tfgnn.HIDDEN_STATE].numpy()
  np.testing.assert_allclose(states[FIRST_NODES], whole[FIRST_NODES], rtol=1e-5, atol=1e-6)
  others = np.setdiff1d(np.arange(sum(PAPERS)), FIRST_NODES)
  before = graph.node_sets["paper"][tfgnn.HIDDEN_STATE].numpy()
  np.testing.assert_array_equal(states[others], before[others] if units == 4 else 0.0)
  np.testing.assert_array_equal(out.node_sets["paper"]["year"], np.arange(sum(PAPERS)))
  np.testing.assert_array_equal(out.node_sets["author"][tfgnn.HIDDEN_STATE],
                                graph.node_sets["author"][tfgnn.HIDDEN_STATE])
  assert out.spec == update(graph).spec  # the same graph, features and sizes, as without it
  for training in (False, None):
    np.testing.assert_array_equal(
        wrapped(graph, training=training).node_sets["paper"][tfgnn.HIDDEN_STATE], whole)


def test_the_round_reads_only_the_edges_into_read_nodes_and_their_ends():
  graph = _graph(seed_rows=np.array([2, 5, 9, 11]))
  read = layers.read_nodes(graph, node_set_name=None)
  assert set(read) == {"paper"}
  assert np.flatnonzero(read["paper"]).tolist() == [2, 5, 9, 11]
  part, places = layers.round_graph(graph, read, tfgnn.TARGET)
  cites = graph.edge_sets["cites"].adjacency
  into = np.isin(cites.target.numpy(), [2, 5, 9, 11])
  assert part.edge_sets["cites"].sizes.numpy().tolist() == [
      int(into[:9].sum()), 0, int(into[9:].sum())]
  np.testing.assert_allclose(part.edge_sets["cites"]["w"],
                             graph.edge_sets["cites"]["w"].numpy()[into])
  kept = places["paper"].numpy()
  # The papers in the round: the read ones and the senders of their edges, in order.
  expected = np.union1d([2, 5, 9, 11], cites.source.numpy()[into])
  writes = graph.edge_sets["writes"].adjacency
  assert np.flatnonzero(kept >= 0).tolist() == expected.tolist()
  np.testing.assert_array_equal(
      part.node_sets["paper"]["year"], expected)
  np.testing.assert_array_equal(
      part.edge_sets["cites"].adjacency.target, kept[cites.target.numpy()[into]])
  assert part.edge_sets["writes"].total_size == int(
      np.isin(writes.target.numpy(), [2, 5, 9, 11]).sum())
  assert part.edge_sets["_readout/seed"].total_size == 4  # the readout whole
  np.testing.assert_array_equal(
      tfgnn.structured_readout(part, "seed", feature_name="year"), [2, 5, 9, 11])


def _model(graph, update, wrap):
  inputs = tf.keras.layers.Input(type_spec=graph.spec)
  out = layers.ReadoutRound(update, receiver_tag=tfgnn.SOURCE)(inputs) if wrap else update(
      inputs)
  logits = tf.keras.layers.Dense(3)(
      tfgnn.keras.layers.StructuredReadout("seed", feature_name=tfgnn.HIDDEN_STATE)(out))
  return tf.keras.Model(inputs, logits)


def _train(model, graph, labels, steps, jit_compile=False):
  """The losses of ``steps`` SGD steps (``training=True``, as ``model.fit`` calls the model)."""
  optimizer = tf.keras.optimizers.SGD(0.1)

  def step():
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
          labels, model(graph, training=True), from_logits=True))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                  model.trainable_variables))
    return loss

  step = tf.function(step, autograph=False, jit_compile=jit_compile)
  return [float(step()) for _ in range(steps)]


def test_training_steps_equal_the_whole_rounds_and_inference_is_unchanged(caplog):
  graph = _graph(seed_rows=np.array([0, 3, 5, 8, 12]))
  labels = np.array([0, 1, 2, 1, 0])
  # The whole round; the read nodes only; under XLA, which takes the whole round, warned.
  models = [_model(graph, _mean_update(4, tfgnn.SOURCE), wrap) for wrap in (False, True, True)]
  for model in models[1:]:
    model.set_weights(models[0].get_weights())
  losses = [_train(m, graph, labels, 3, jit_compile=xla)
            for m, xla in zip(models, (False, False, True))]
  assert losses[0][0] > losses[0][-1]  # it learns
  np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
  np.testing.assert_allclose(losses[2], losses[0], rtol=1e-4)
  assert "compiled with XLA (jit_compile), the round runs on every node" in caplog.text
  for before, after in zip(models[0].get_weights(), models[1].get_weights()):
    np.testing.assert_allclose(after, before, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(models[1](graph), models[0](graph), rtol=1e-5, atol=1e-6)


def test_what_it_cannot_run_is_refused_with_what_to_write():
  graph = _graph()
  with pytest.raises(ValueError, match="pass node_set_name=<the seed node set>"):
    layers.ReadoutRound(_mean_update(4))(graph, training=True)
  with pytest.raises(ValueError, match="'venue' is not a node set.*'author', 'paper'"):
    layers.ReadoutRound(_mean_update(4), node_set_name="venue")(graph)
  edge_update = tfgnn.keras.layers.GraphUpdate(edge_sets={"cites": tfgnn.keras.layers.EdgeSetUpdate(
      tfgnn.keras.layers.NextStateFromConcat(tf.keras.layers.Dense(2)), edge_input_feature="w")})
  weights = graph.replace_features(edge_sets={"cites": {"w": graph.edge_sets["cites"]["w"][:, None]}})
  with pytest.raises(ValueError, match="changes the features of edge set 'cites'"):
    layers.ReadoutRound(edge_update, node_set_name="paper")(weights, training=True)
  batch = tf.data.Dataset.from_tensors(graph).batch(2).get_single_element()
  with pytest.raises(ValueError, match="scalar GraphTensor"):
    layers.ReadoutRound(_mean_update(4), node_set_name="paper")(batch)
