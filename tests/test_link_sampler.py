"""LinkSampler: exact subgraphs around both ends of each pair, no leakage, bad input fails.

The executor runs for real (Beam DirectRunner) on a small hand-built
undirected graph; nothing of TFX, Beam or TF-GNN is mocked. With fan-outs
above every degree the sampled subgraph must equal the brute-force 2-hop
neighbourhoods of both ends in the message-passing graph, which is checked
edge by edge, as are the leakage rules.
"""

import dataclasses
import json
import os

import pytest

# pylint: disable=g-import-not-at-top
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tfx.types import artifact_utils

from gnn_trainer_component.beam import sampling as beam_sampling
from gnn_trainer_component.graph import link_config as link_config_lib
from gnn_trainer_component.graph import links
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.sampler.link import executor as link_executor
from gnn_trainer_component.sampler.link import pipeline as link_pipeline
from tests import helpers
from tests.helpers import run_beam_sampler

NUM_NODES = 14
# Undirected edges (written in both directions, as pipelines/planetoid does) plus self loops.
UNDIRECTED = [(0, 1), (0, 2), (1, 2), (1, 3), (2, 4), (3, 5), (4, 6), (5, 7), (6, 7), (7, 8),
              (8, 9), (9, 10), (10, 11), (11, 12), (12, 0), (3, 9), (4, 10), (2, 11), (6, 12),
              (1, 8)]
SELF_LOOPS = [(i, i) for i in range(NUM_NODES)]
EDGES = [(u, v) for u, v in UNDIRECTED] + [(v, u) for u, v in UNDIRECTED] + SELF_LOOPS
HOPS = [{"e": 50}, {"e": 50}]  # above every degree: the full neighbourhood
CONFIG = {"edge_set": "e", "splits": {"train": 0.6, "eval": 0.2, "test": 0.2},
          "negatives_per_positive": 1, "hops": HOPS, "undirected": True, "seed": 3}

SCHEMA = """
node_sets { key: "v" value {
  features { key: "#id" value { dtype: DT_STRING } }
  features { key: "ident" value { dtype: DT_INT64 } }
  features { key: "x" value { dtype: DT_FLOAT shape { dim { size: 2 } } } }
  metadata { filename: "nodes.tfrecord" } } }
edge_sets { key: "e" value { source: "v" target: "v"
  features { key: "w" value { dtype: DT_FLOAT } }
  metadata { filename: "edges.csv" } } }
"""


def _write_graph(d, edges=EDGES):
  """The schema, a TFRecord node table (``x`` has two values) and a CSV edge table."""
  os.makedirs(d, exist_ok=True)
  with open(os.path.join(d, "graph_schema.pbtxt"), "w") as f:
    f.write(SCHEMA)
  with tf.io.TFRecordWriter(os.path.join(d, "nodes.tfrecord")) as w:
    for i in range(NUM_NODES):
      ex = tf.train.Example()
      ex.features.feature["#id"].bytes_list.value.append(f"n{i}".encode())
      ex.features.feature["ident"].int64_list.value.append(i)
      ex.features.feature["x"].float_list.value.extend([i, -i])
      w.write(ex.SerializeToString())
  with open(os.path.join(d, "edges.csv"), "w") as f:
    f.write("source,target,w\n" + "".join(f"n{s},n{t},{10 * s + t}\n" for s, t in edges))


def _run(tmp_path, graph_dir, config):
  return run_beam_sampler(link_executor.Executor, tmp_path, graph_dir,
                          {"link_config": json.dumps(config), "num_shards": 1})


def _sample(tmp):
  examples, schema_out = _run(tmp, tmp / "graph", CONFIG)
  spec = tfgnn.create_graph_spec_from_schema_pb(
      tfgnn.read_schema(os.path.join(schema_out.uri, "graph_schema.pbtxt")))
  graphs = {}
  for split in CONFIG["splits"]:
    split_dir = artifact_utils.get_split_uri([examples], split)
    files = tf.io.gfile.glob(os.path.join(split_dir, "*"))
    assert [os.path.basename(f) for f in files] == ["data_tfrecord-00000-of-00001.gz"]
    graphs[split] = [_decode(tfgnn.parse_single_example(spec, tf.constant(r)))
                     for r in tf.data.TFRecordDataset(files, compression_type="GZIP")
                     .as_numpy_iterator()]
  return examples, graphs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """Mode -> (examples, graphs): node features broadcast (small tables) and joined."""
  out = {}
  for mode, max_bytes in (("broadcast", beam_sampling.BROADCAST_MAX_BYTES), ("join", 0)):
    tmp = tmp_path_factory.mktemp(f"links_{mode}")
    _write_graph(tmp / "graph")
    with pytest.MonkeyPatch.context() as m:
      m.setattr(beam_sampling, "BROADCAST_MAX_BYTES", max_bytes)
      schema = tfgnn.read_schema(str(tmp / "graph" / "graph_schema.pbtxt"))
      link = link_config_lib.parse_link_config(schema, CONFIG, who="LinkSampler")
      assert link_pipeline.should_broadcast(schema, str(tmp / "graph"), link) == (
          mode == "broadcast")
      out[mode] = _sample(tmp)
  return out


@pytest.fixture(scope="module")
def sampled(runs):
  return runs["broadcast"]


def test_join_and_broadcast_write_the_same_examples(runs):
  assert runs["join"][1] == runs["broadcast"][1]


def _decode(graph):
  """(pair of idents, label, node idents, message edges as ident pairs, edge weights)."""
  ident = graph.node_sets["v"]["ident"].numpy().tolist()
  x = graph.node_sets["v"]["x"].numpy().tolist()
  assert x == [[i, -i] for i in ident], "node features travel with their node"
  ids = graph.node_sets["v"]["#id"].numpy().tolist()
  assert ids == [f"n{i}".encode() for i in ident], "a declared #id is each node's id"
  adj = graph.edge_sets["e"].adjacency
  edges = [(ident[s], ident[t]) for s, t in zip(adj.source.numpy(), adj.target.numpy())]
  weights = graph.edge_sets["e"]["w"].numpy().tolist()
  assert weights == [10 * s + t for s, t in edges], "edge features travel with their edge"
  src = ident[int(graph.edge_sets["_readout/source"].adjacency.source.numpy()[0])]
  tgt = ident[int(graph.edge_sets["_readout/target"].adjacency.source.numpy()[0])]
  label = float(graph.node_sets["_readout"]["label"].numpy()[0])
  return (src, tgt), label, ident, edges


def _key(u, v):
  return (min(u, v), max(u, v))


def _positives(graphs):
  return {s: {_key(*p) for p, label, _, _ in g if label == 1.0} for s, g in graphs.items()}


def _brute_force(pair, message_edges):
  """Nodes and edges reached in 2 hops from either end, never over the pair's edge."""
  return helpers.reachable([(s, t) for s, t in message_edges if _key(s, t) != _key(*pair)],
                           list(pair), len(HOPS))


def test_splits_partition_the_edges_and_negatives_are_non_edges(sampled):
  examples, graphs = sampled
  positives = _positives(graphs)
  all_edges = {_key(u, v) for u, v in UNDIRECTED}
  assert set().union(*positives.values()) == all_edges  # every edge once, no self loop
  assert sum(map(len, positives.values())) == len(all_edges)
  assert {s: len(p) for s, p in positives.items()} == {"train": 12, "eval": 4, "test": 4}
  negatives = [_key(*p) for g in graphs.values() for p, label, _, _ in g if label == 0.0]
  assert len(negatives) == len(set(negatives)) == 20  # one per positive, all distinct
  assert not set(negatives) & all_edges
  assert all(u != v for u, v in negatives)
  for split, g in graphs.items():
    n_pos = len(positives[split])
    assert examples.get_int_custom_property(f"num_positives_{split}") == n_pos
    assert examples.get_int_custom_property(f"num_negatives_{split}") == n_pos
    assert sum(label == 0.0 for _, label, _, _ in g) == n_pos


@pytest.mark.parametrize("mode", ["broadcast", "join"])
def test_subgraphs_are_exact_and_nothing_leaks(runs, mode):
  _, graphs = runs[mode]
  held_out = _positives(graphs)["eval"] | _positives(graphs)["test"]
  message = [(u, v) for u, v in EDGES if _key(u, v) not in held_out]
  for split, g in graphs.items():
    for pair, label, ident, edges in g:
      assert ident[0] == pair[0] and ident[1] == pair[1], "the endpoints come first"
      assert len(ident) == len(set(ident)) and len(edges) == len(set(edges))
      assert not any(_key(u, v) in held_out for u, v in edges if u != v), (
          f"{split} example {pair} passes messages over a held-out edge")
      assert _key(*pair) not in {_key(u, v) for u, v in edges}, (
          f"{split} example {pair} holds its own supervised edge")
      want_nodes, want_edges = _brute_force(pair, message)
      assert set(ident) == want_nodes
      assert set(edges) == want_edges


def test_examples_train_a_link_prediction_task(sampled):
  # The readout structure is what TF-GNN's task reads: labels and both endpoints.
  _, graphs = sampled
  assert {label for g in graphs.values() for _, label, _, _ in g} == {0.0, 1.0}


def _assert_fails_unpublished(tmp_path, config, match, edges=EDGES):
  _write_graph(tmp_path / "graph", edges=edges)
  with pytest.raises(GraphInputError, match=match):
    _run(tmp_path, tmp_path / "graph", config)
  out = tmp_path / "out"
  published = [p for p in out.rglob("*") if p.is_file()] if out.exists() else []
  assert not published, f"files published despite the error: {published}"


@pytest.mark.parametrize("change,match", [
    ({"edge_set": "cites"}, r"edge_set 'cites' is not in the graph schema \(edge sets: \['e'\]\)"),
    ({"negatives_per_positive": 0}, r"negatives_per_positive must be > 0 .*got 0"),
    ({"negatives_per_positive": {"train": 1, "eval": -1, "test": 1}},
     r"negatives_per_positive for split 'eval' must be > 0"),
    ({"splits": {"train": 0.8, "test": 0.1}}, r"fractions must add up to 1, they add up to 0.9"),
    ({"splits": {"fit": 0.9, "test": 0.1}}, r"message_split 'train'"),
    ({"hops": [{"f": 3}]}, r"LinkSampler link_config: hop 1 names unknown edge set 'f'"),
    ({"colour": "red"}, r"unknown keys \['colour'\]"),
])
def test_bad_link_config(tmp_path, change, match):
  _assert_fails_unpublished(tmp_path, {**CONFIG, **change}, match)


def test_dangling_edge_ids(tmp_path):
  _assert_fails_unpublished(tmp_path, CONFIG, r"edges.csv.*target ids not in node set 'v': \['n99'\].*edges.csv, line \d+",
                            edges=EDGES + [(0, 99)])


def test_too_dense_for_the_negatives(tmp_path):
  complete = [(u, v) for u in range(NUM_NODES) for v in range(NUM_NODES) if u != v]
  _assert_fails_unpublished(tmp_path, CONFIG, r"too dense", edges=complete)


def test_split_is_seeded_and_covers_the_fractions():
  link = link_config_lib.LinkConfig(edge_set="e", splits={"train": 0.85, "eval": 0.05, "test": 0.1},
                          negatives_per_positive={"train": 1, "eval": 1, "test": 1},
                          source_hops=HOPS, target_hops=HOPS, undirected=True, seed=5)
  pairs = [(f"a{i}".encode(), f"a{j}".encode()) for i in range(40) for j in range(i)]
  a = links.split_links(pairs + [(v, u) for u, v in pairs], link, who="LinkSampler")
  assert {s: len(p) for s, p in a.items()} == {"train": 663, "eval": 39, "test": 78}
  assert a == links.split_links(pairs, link, who="LinkSampler")  # reverse duplicates count once
  other = links.split_links(pairs, dataclasses.replace(link, seed=6), who="LinkSampler")
  assert other["test"] != a["test"]


def test_labels_are_mixed_in_the_written_order(sampled):
  # A trainer with a small shuffle buffer must not see one-label batches.
  _, graphs = sampled
  labels = [label for _, label, _, _ in graphs["train"]]
  half = len(labels) // 2
  assert 0 < sum(labels[:half]) < half, labels
