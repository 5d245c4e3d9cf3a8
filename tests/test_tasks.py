"""Unit tests of gnn_trainer_component.tasks and the generated graph-level data (no pipeline)."""

import numpy as np
import pytest


def _rooted_graph():
  """Two components of node set ``paper`` (3 and 2 nodes), ``label`` and ``citations``."""
  import tensorflow as tf
  import tensorflow_gnn as tfgnn
  return tfgnn.GraphTensor.from_pieces(
      node_sets={"paper": tfgnn.NodeSet.from_fields(
          sizes=tf.constant([3, 2]),
          features={"feat": tf.constant([[1.], [2.], [3.], [4.], [5.]]),
                    "label": tf.constant([7, 1, 2, 5, 3], tf.int64),
                    "citations": tf.constant([0.5, 1., 2., 1.5, 3.])})},
      edge_sets={"cites": tfgnn.EdgeSet.from_fields(
          sizes=tf.constant([2, 1]),
          adjacency=tfgnn.Adjacency.from_indices(
              ("paper", tf.constant([0, 0, 3])), ("paper", tf.constant([1, 2, 4]))))})


def test_readout_root_features_moves_the_roots_labels_into_readout():
  import tensorflow_gnn as tfgnn
  from gnn_trainer_component.tasks import ReadoutRootFeatures
  graph = ReadoutRootFeatures("paper", ["label", "citations"])(_rooted_graph())
  assert sorted(graph.node_sets["paper"].features) == ["feat"]
  readout = graph.node_sets["_readout"]
  assert readout["label"].numpy().tolist() == [7, 5]
  np.testing.assert_allclose(readout["citations"].numpy(), [0.5, 1.5])
  # What the runner's root-node tasks read with label_feature_name=...:
  assert tfgnn.keras.layers.Readout(node_set_name="_readout", feature_name="label")(
      graph).numpy().tolist() == [7, 5]
  # and the readout structure selects the roots, as ReadoutFirstNode does.
  graph = graph.replace_features(node_sets={"paper": {"feat": graph.node_sets["paper"]["feat"]}})
  np.testing.assert_allclose(
      tfgnn.keras.layers.StructuredReadout("seed", feature_name="feat")(graph), [[1.], [4.]])


def test_readout_root_features_names_a_missing_feature():
  from gnn_trainer_component.tasks import ReadoutRootFeatures
  with pytest.raises(ValueError, match=r"node set 'paper' has no feature \['degree'\] "
                                       r"\(it has \['citations', 'feat', 'label'\]\)"):
    ReadoutRootFeatures("paper", ["label", "degree"])(_rooted_graph())
  with pytest.raises(ValueError, match=r"no node set 'author'"):
    ReadoutRootFeatures("author", ["label"])(_rooted_graph())


def test_cycle_graphs_have_the_labelled_number_of_cycles():
  from pipelines.cycles import data
  rng = np.random.default_rng(0)
  for cycles in [0, 1, 2, 3] * 25:
    kinds, bonds = data.make_graph(rng, cycles=cycles)
    assert 10 <= len(kinds) <= 24
    assert len(set(bonds)) == len(bonds) and all(u < v for u, v in bonds)
    assert data.cyclomatic_number(len(kinds), bonds) == cycles
    assert len(bonds) == len(kinds) - 1 + cycles  # connected: one component


def test_cycle_examples_parse_with_the_graph_schema(tmp_path):
  import tensorflow as tf
  import tensorflow_gnn as tfgnn
  from pipelines.cycles import data
  written = data.write_data(str(tmp_path), sizes={"train": 8, "eval": 4, "test": 4}, seed=3)
  schema = tfgnn.read_schema(f"{written['graph_schema']}/graph_schema.pbtxt")
  records = list(tf.data.TFRecordDataset(f"{written['examples']}/train/data.tfrecord"))
  graphs = tfgnn.parse_example(tfgnn.create_graph_spec_from_schema_pb(schema),
                               tf.stack(records))
  labels = graphs.context["cycles"].numpy().reshape(-1)
  assert sorted(labels.tolist()) == [0, 0, 1, 1, 2, 2, 3, 3]  # balanced
  sizes = graphs.node_sets["atom"].sizes.numpy().reshape(-1)
  bonds = graphs.edge_sets["bond"].sizes.numpy().reshape(-1)
  np.testing.assert_array_equal(bonds, 2 * (sizes - 1 + labels))  # both directions


def test_link_module_marks_each_pairs_ends_in_a_batch():
  # planetoid_link_prediction's labeling trick: the ends come from _readout/source|target,
  # per component of a merged batch (the second pair's papers start at index 3).
  import os
  import tensorflow as tf
  import tensorflow_gnn as tfgnn
  from gnn_trainer_component.trainer import module_contract
  from tests.helpers import REPO_ROOT
  module = module_contract.load_module_file(
      os.path.join(REPO_ROOT, "module_files", "planetoid_link_prediction.py"))
  graph = _rooted_graph()

  def readout(end_indices):
    return tfgnn.EdgeSet.from_fields(sizes=tf.constant([1, 1]), adjacency=(
        tfgnn.Adjacency.from_indices(("paper", tf.constant(end_indices)),
                                     ("_readout", tf.constant([0, 1])))))

  graph = tfgnn.GraphTensor.from_pieces(
      node_sets={"paper": tfgnn.NodeSet.from_fields(
          sizes=tf.constant([3, 2]),
          features={tfgnn.HIDDEN_STATE: graph.node_sets["paper"]["feat"]}),
                 "_readout": tfgnn.NodeSet.from_fields(sizes=tf.constant([1, 1]))},
      edge_sets={"cites": graph.edge_sets["cites"],
                 "_readout/source": readout([0, 4]), "_readout/target": readout([2, 3])})
  state = module.MarkEnds()(graph).node_sets["paper"][tfgnn.HIDDEN_STATE].numpy()
  np.testing.assert_array_equal(state, [[1., 1., 0.], [2., 0., 0.], [3., 0., 1.],
                                        [4., 0., 1.], [5., 1., 0.]])


def _pair_graph():
  """Two users, three items, two (user, item) pairs read out with labels 4.0 and 2.0."""
  import tensorflow as tf
  import tensorflow_gnn as tfgnn
  from gnn_trainer_component.graph import readout
  states = {"user": tf.constant([[1.0, 0.0], [0.0, 1.0]]),
            "item": tf.constant([[1.0, 1.0], [2.0, 0.0], [0.0, 3.0]])}
  nodes = {name: tfgnn.NodeSet.from_fields(sizes=[len(value)],
                                           features={tfgnn.HIDDEN_STATE: value})
           for name, value in states.items()}
  nodes[readout.READOUT] = tfgnn.NodeSet.from_fields(
      sizes=[2], features={readout.LABEL: tf.constant([4.0, 2.0])})
  edges = {name: tfgnn.EdgeSet.from_fields(sizes=[2], adjacency=tfgnn.Adjacency.from_indices(
      (end, tf.constant(index)), (readout.READOUT, tf.constant([0, 1]))))
           for name, end, index in ((readout.READOUT_SOURCE, "user", [1, 0]),
                                    (readout.READOUT_TARGET, "item", [2, 1]))}
  return tfgnn.GraphTensor.from_pieces(node_sets=nodes, edge_sets=edges)


def test_edge_tasks_read_both_ends_of_each_pair_and_its_label():
  import tensorflow as tf
  from gnn_trainer_component import tasks
  graph = _pair_graph()
  np.testing.assert_allclose(tasks.pair_activations(graph).numpy(),
                             [[0, 1, 0, 3, 0, 3], [1, 0, 2, 0, 2, 0]])
  for task, units in ((tasks.EdgeRegression(hidden_units=(4,)), 1),
                      (tasks.EdgeBinaryClassification(hidden_units=()), 1),
                      (tasks.EdgeMulticlassClassification(5, hidden_units=(3,)), 5)):
    _, labels = task.preprocess(graph)
    np.testing.assert_array_equal(labels.numpy(), [4.0, 2.0])
    assert task.predict(graph).shape == (2, units)
    ends = task.embeddings(graph)  # each end's state, as a link model's export names them
    np.testing.assert_array_equal(ends["source_embedding"].numpy(), [[0, 1], [1, 0]])
    np.testing.assert_array_equal(ends["target_embedding"].numpy(), [[0, 3], [2, 0]])
  names = [m.name for m in tasks.EdgeRegression().metrics()]
  assert names == ["rmse", "mae"]
  assert isinstance(tasks.EdgeRegression().losses(), tf.keras.losses.MeanSquaredError)


def test_in_batch_softmax_ranks_each_positive_among_the_batchs_targets():
  import tensorflow as tf
  from gnn_trainer_component import tasks
  source = tf.constant([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
  target = tf.constant([[2.0, 0.0], [0.0, 3.0], [1.0, -1.0]])
  layer = tasks.InBatchScores()
  own = [[2.0], [3.0], [0.0]]
  np.testing.assert_allclose(layer([source, target]).numpy(), own)  # served: own score only
  full = layer([source, target], training=True).numpy()
  np.testing.assert_allclose(full, [[2, 2, 0, 1], [3, 0, 3, -1], [0, 2, 3, 0]])
  labels = tf.constant([1.0, 1.0, 0.0])
  loss = tasks.InBatchSoftmaxLoss(temperature=1.0, bce_weight=0.5, positives_as_negatives=True)
  scores = full[:, 1:]
  softmax = [-(scores[i, i] - np.log(np.exp(scores[i]).sum())) for i in range(2)]
  bce = [np.log1p(np.exp(-2.0)), np.log1p(np.exp(-3.0)), np.log1p(np.exp(0.0))]
  want = np.mean([softmax[0] + 0.5 * bce[0], softmax[1] + 0.5 * bce[1], 0.5 * bce[2]])
  np.testing.assert_allclose(loss(labels, tf.constant(full)).numpy(), want, rtol=1e-5)
  # By default a positive is ranked against the negative pairs' targets only (uniform draws).
  alone = [-(scores[i, i] - np.log(np.exp(scores[i, [i, 2]]).sum())) for i in range(2)]
  want = np.mean([alone[0] + 0.5 * bce[0], alone[1] + 0.5 * bce[1], 0.5 * bce[2]])
  np.testing.assert_allclose(tasks.InBatchSoftmaxLoss(bce_weight=0.5)(labels, tf.constant(full)),
                             want, rtol=1e-5)
  # Validation: the own score alone, binary cross-entropy only.
  np.testing.assert_allclose(loss(labels, tf.constant(own)).numpy(), 0.5 * np.mean(bce),
                             rtol=1e-5)
  auc = tasks.link_prediction_metrics(first_column=True)[0]
  auc.update_state(labels, tf.constant(full))
  assert auc.result().numpy() == 1.0  # the own scores 2, 3 above 0


def test_in_batch_scores_train_on_the_batch_and_serve_each_pairs_own_score(tmp_path):
  import tensorflow as tf
  from gnn_trainer_component import tasks
  inputs = [tf.keras.Input([2]), tf.keras.Input([2])]
  model = tf.keras.Model(inputs, tasks.InBatchScores()(
      [tf.keras.layers.Dense(2, use_bias=False)(x) for x in inputs]))
  model.compile(optimizer="sgd", loss=tasks.InBatchSoftmaxLoss(),
                metrics=list(tasks.link_prediction_metrics(first_column=True)))
  source, target = np.eye(2, dtype=np.float32)[[0, 1, 1]], np.ones((3, 2), np.float32)
  history = model.fit([source, target], np.array([1.0, 1.0, 0.0]), batch_size=3, verbose=0)
  assert np.isfinite(history.history["loss"]).all() and "auc" in history.history
  assert model([source, target], training=True).shape == (3, 4)
  assert model.predict([source, target], verbose=0).shape == (3, 1)
  tf.saved_model.save(model, str(tmp_path / "saved"))
  served = tf.saved_model.load(str(tmp_path / "saved")).signatures["serving_default"]
  out = next(iter(served(**{i.name: tf.constant(v) for i, v in zip(
      model.inputs, (source, target))}).values()))
  np.testing.assert_allclose(out.numpy(), model.predict([source, target], verbose=0),
                             rtol=1e-6)
