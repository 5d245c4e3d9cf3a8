"""``link_config``'s ``edge_features``: a pair's own edge's features as inputs, in every engine.

With ``edge_label``, every pair is an edge, and ``edge_features`` names features of that edge
the pair carries on node set ``pair`` (one node per pair, read with structured readout key
``"pair"``). The tests hold each engine's batches to the law: a pair's node of ``pair`` holds
its own edge's values (its first edge's, as its label is), in GnnTrainer's per-pair, merged and
whole-graph batches, in the examples it writes, and in LinkSampler's examples; the edge tasks
read them after the model.
"""

import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component.graph import link_config as link_config_lib
from gnn_trainer_component.graph import links
from gnn_trainer_component.graph import readout
from gnn_trainer_component.graph.errors import GraphInputError

SCHEMA = """
node_sets { key: "v" value {
  features { key: "ident" value { dtype: DT_INT64 } }
  metadata { filename: "nodes.csv" } } }
edge_sets { key: "e" value { source: "v" target: "v"
  features { key: "y" value { dtype: DT_FLOAT } }
  features { key: "w" value { dtype: DT_FLOAT } }
  features { key: "k" value { dtype: DT_INT64 } }
  features { key: "tag" value { dtype: DT_STRING } }
  metadata { filename: "edges.csv" } } }
"""
NUM_NODES = 30
LINK = {"edge_set": "e", "edge_label": "y", "edge_features": ["w", "k"],
        "splits": {"train": 0.8, "eval": 0.2}, "hops": [{"e": 4}, {"e": 2}], "seed": 3}


def _w(s, t):
  """The edge ``s -> t``'s ``w``: names its pair."""
  return s + t / 100


@pytest.fixture(scope="module")
def graph_dir(tmp_path_factory):
  d = tmp_path_factory.mktemp("edge_features")
  rng = np.random.default_rng(0)
  edges = sorted({(int(s), int(t)) for s, t in rng.integers(0, NUM_NODES, (150, 2)) if s != t})
  (d / "graph_schema.pbtxt").write_text(SCHEMA)
  (d / "nodes.csv").write_text("id,ident\n" + "".join(f"n{i},{i}\n" for i in range(NUM_NODES)))
  (d / "edges.csv").write_text("source,target,y,w,k,tag\n" + "".join(
      f"n{s},n{t},{s % 5},{_w(s, t)},{100 * s + t},x\n" for s, t in edges))
  return str(d)


def test_edge_features_are_checked_by_key():
  schema = tfgnn.parse_schema(SCHEMA)
  link = link_config_lib.parse_link_config(schema, LINK, who="Test")
  assert link.edge_features == ("w", "k")
  out = link_config_lib.output_graph_schema(schema, link, who="Test")
  assert sorted(out.node_sets[readout.PAIR].features) == ["k", "w"]
  assert out.edge_sets[readout.READOUT_PAIR].source == readout.PAIR
  assert readout.PAIR not in link_config_lib.output_graph_schema(
      schema, link_config_lib.parse_link_config(schema, {**LINK, "edge_features": []},
                                                who="Test"), who="Test").node_sets
  for change, match in (
      ({"edge_label": None}, r"only pairs that are edges have one: add \"edge_label\""),
      ({"edge_features": ["y"]}, r"names 'y', the edge_label each pair predicts"),
      ({"edge_features": ["z"]}, r"names 'z', which is not a feature of edge set 'e'"),
      ({"edge_features": ["tag"]}, r"'tag' of edge set 'e' must be an int or float feature"),
      ({"edge_features": "w"}, r"must be a list of distinct feature names"),
      ({"edge_features": ["w", "w"]}, r"must be a list of distinct feature names")):
    config = {k: v for k, v in {**LINK, **change}.items() if v is not None}
    with pytest.raises(GraphInputError, match=match):
      link_config_lib.parse_link_config(schema, config, who="Test")
  taken = tfgnn.parse_schema(SCHEMA + 'node_sets { key: "pair" value { } }')
  with pytest.raises(GraphInputError, match="already has a set named 'pair'"):
    link_config_lib.plan_links(taken, LINK, engine="in_memory", runs=("uniform",), who="Test")


def test_each_positive_carries_its_first_edges_features_and_nan_is_refused():
  ids = pd.Index([f"n{i}".encode() for i in range(4)], dtype=object)
  source, target = np.array([0, 1, 2, 0]), np.array([1, 2, 3, 1])  # (0, 1) twice
  columns = {"y": np.array([1.0, 2, 3, 4]), "w": np.array([10.0, 20, 30, 40])}
  link = link_config_lib.LinkConfig(edge_set="e", splits={"train": 0.5, "eval": 0.5},
                                    negatives_per_positive={"train": 0, "eval": 0},
                                    source_hops=[], target_hops=[], edge_label="y",
                                    edge_features=("w",))
  got = links.supervise(link, ids, ids, source, target, one_node_set=True,
                        negatives_for=link.splits, who="Test", columns=columns)
  for split, pairs in got.positives.items():
    first = {(0, 1): 0, (1, 2): 1, (2, 3): 2}
    rows = [first[tuple(p)] for p in pairs.tolist()]
    np.testing.assert_array_equal(got.features[split]["w"], columns["w"][rows])
    np.testing.assert_array_equal(got.values[split], columns["y"][rows])
  with pytest.raises(GraphInputError, match=r"Test: edge 'n1' -> 'n2' of edge set 'e' \(table "
                                            r"e.csv\) has edge_features 'w' = nan; 1 such"):
    links.supervise(link, ids, ids, source, target, one_node_set=True, negatives_for=(),
                    who="Test", columns={**columns, "w": np.array([1, np.nan, 2, 3])},
                    table="e.csv")


def _pairs_and_features(graph: tfgnn.GraphTensor):
  """``[(source ident, target ident, w, k)]`` of each pair read out of a scalar graph."""
  ident = graph.node_sets["v"]["ident"]
  ends = [tf.gather(ident, tfgnn.keras.layers.StructuredReadout(
      key, feature_name=tfgnn.HIDDEN_STATE)(graph.replace_features(
          node_sets={"v": {tfgnn.HIDDEN_STATE: tf.range(graph.node_sets["v"].total_size)}})))
          for key in ("source", "target")]
  w, k = (tfgnn.keras.layers.StructuredReadout(readout.PAIR, feature_name=f)(graph)
          for f in ("w", "k"))
  return list(zip(ends[0].numpy().tolist(), ends[1].numpy().tolist(), w.numpy().tolist(),
                  k.numpy().tolist(), strict=True))


def _assert_own(rows, num):
  assert len(rows) == num
  for s, t, w, k in rows:
    assert w == pytest.approx(_w(s, t)) and k == 100 * s + t, (s, t, w, k)


def test_every_in_memory_batch_form_carries_each_pairs_own_edge_features(graph_dir):
  from gnn_trainer_component import tasks as task_lib
  from gnn_trainer_component import training_data
  from gnn_trainer_component.in_memory import adapters
  splits = adapters.load(graph_dir, link_config=LINK, splits=["train", "eval"])
  num = splits.num_examples(["eval"])
  ctx = tf.distribute.InputContext()
  per_pair = splits.provider(["eval"], training=False, batch_size=8, seed=1)
  batched = next(iter(per_pair.get_dataset(ctx).batch(num)))
  assert batched.node_sets[readout.PAIR]["w"].shape[0] == num
  _assert_own(_pairs_and_features(batched.merge_batch_to_components()), num)
  merged = splits.provider(["eval"], training=False, batch_size=8, seed=1, merged=True)
  _assert_own([r for g in merged.get_dataset(ctx) for r in _pairs_and_features(g)], num)
  examples = splits.serialized_examples(["eval"], num)
  parsed = tfgnn.parse_example(tfgnn.create_graph_spec_from_schema_pb(splits.schema),
                               tf.constant(examples))
  _assert_own(_pairs_and_features(parsed.merge_batch_to_components()), num)
  data = adapters.for_training(
      splits, adapters.Options(("train",), ("eval",), graph_mode="full_graph"),
      {"y": task_lib.EdgeRegression()})
  feed = data.feed(training_data.Request(batch_size=8, seed=1, drop_remainder=False,
                                        tasks={"y": task_lib.EdgeRegression()}, local=True,
                                        remote_input=None))
  [whole] = list(feed.valid.get_dataset(ctx))
  _assert_own(_pairs_and_features(whole), num)
  train = [r for g in feed.train.get_dataset(ctx) for r in _pairs_and_features(g)]
  _assert_own(train, splits.num_examples(["train"]))


def test_link_sampler_writes_each_pairs_own_edge_features(graph_dir):
  from gnn_trainer_component.sampler.link import subgraphs
  schema = tfgnn.read_schema(os.path.join(graph_dir, "graph_schema.pbtxt"))
  link = link_config_lib.parse_link_config(schema, LINK, who="Test")
  pair = (b"n3", b"n7")
  rows = subgraphs.supervision({"train": [pair]}, {}, link, values={"train": np.array([2.0])},
                               features={"train": {"w": np.array([_w(3, 7)]),
                                                   "k": np.array([307])}})
  [(_, got_pair, label, _, features)] = rows["train"]
  assert got_pair == pair and label == 2.0
  nodes = {"v": [(b"n3", tf.train.Example()), (b"n7", tf.train.Example())]}
  for _, example in nodes["v"]:
    example.features.feature["ident"].int64_list.value.append(0)
  example = subgraphs.build_example(schema, link, pair, label, nodes, {"e": []}, features)
  out = link_config_lib.output_graph_schema(schema, link, who="Test")
  graph = tfgnn.parse_single_example(tfgnn.create_graph_spec_from_schema_pb(out),
                                     tf.constant(example.SerializeToString()))
  assert graph.node_sets[readout.PAIR]["w"].numpy().tolist() == pytest.approx([_w(3, 7)])
  assert graph.node_sets[readout.PAIR]["k"].numpy().tolist() == [307]
  assert graph.node_sets[readout.READOUT]["label"].numpy().tolist() == [2.0]


def test_edge_tasks_read_the_pairs_features_after_the_model():
  from gnn_trainer_component import tasks as task_lib
  pieces = {"v": tfgnn.NodeSet.from_fields(sizes=[3], features={
      tfgnn.HIDDEN_STATE: tf.constant([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])})}
  readout_nodes = tf.constant([0, 1])
  nodes, edges = readout.pair_pieces({"w": tf.constant([5.0, 7.0]),
                                      "v2": tf.constant([[1, 2], [3, 4]], tf.int64)},
                                     readout_nodes)
  nodes[readout.READOUT] = tfgnn.NodeSet.from_fields(sizes=[2],
                                                     features={"label": tf.constant([1., 2.])})
  for key, ends in (("source", [0, 1]), ("target", [2, 0])):
    edges[f"_readout/{key}"] = tfgnn.EdgeSet.from_fields(
        sizes=[2], adjacency=tfgnn.Adjacency.from_indices(("v", tf.constant(ends)),
                                                          (readout.READOUT, readout_nodes)))
  graph = tfgnn.GraphTensor.from_pieces(node_sets={**pieces, **nodes}, edge_sets=edges)
  auto = task_lib.EdgeRegression(hidden_units=())
  assert auto.gather_activations(graph).shape == (2, 6 + 3)  # both ends, product, v2 and w
  tf.debugging.assert_equal(auto.gather_activations(graph)[:, 6:],
                            tf.constant([[1.0, 2.0, 5.0], [3.0, 4.0, 7.0]]))
  for names, width in (((), 6), (["w"], 7)):
    head = task_lib.EdgeRegression(pair_features=names, hidden_units=())
    assert head.gather_activations(graph).shape == (2, width)
  with pytest.raises(ValueError, match=r"reads pair feature 'x', but the model's output has "
                                       r"node set 'pair' with features \['v2', 'w'\]"):
    task_lib.EdgeRegression(pair_features=["x"]).gather_activations(graph)
