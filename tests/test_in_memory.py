"""The graph held in memory: loading and its errors, the sampler's randomness, the component contract.

Equality with GraphSampler's subgraphs is in test_sampler.py (it reuses that
module's Beam run); the pipeline in both modes is in test_planetoid.py.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component import training_data
from gnn_trainer_component.in_memory import adapters
from gnn_trainer_component.in_memory import choosers
from gnn_trainer_component.in_memory import kernel
from gnn_trainer_component.in_memory import store as store_lib
from gnn_trainer_component.graph import readout
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.graph.errors import GraphTooLargeError

SCHEMA = """
node_sets { key: "v" value {
  features { key: "x" value { dtype: DT_FLOAT } }
  features { key: "ident" value { dtype: DT_INT64 } }
  metadata { filename: "nodes.csv" } } }
edge_sets { key: "e" value { source: "v" target: "v"
  features { key: "w" value { dtype: DT_FLOAT } }
  metadata { filename: "edges.csv" } } }
"""
NUM_NODES = 40


def _edges(num_nodes=NUM_NODES, seed=0):
  """Every node has 3..12 out-neighbours (no parallel edges)."""
  rng = np.random.default_rng(seed)
  edges = []
  for u in range(num_nodes):
    for v in rng.choice(num_nodes, size=rng.integers(3, 13), replace=False):
      edges.append((u, int(v)))
  return edges


def _write(d, *, nodes=None, edges=None, seeds=None, node_header="id,x,ident",
           edge_header="source,target,w"):
  os.makedirs(d, exist_ok=True)
  with open(os.path.join(d, "graph_schema.pbtxt"), "w") as f:
    f.write(SCHEMA)
  nodes = nodes if nodes is not None else [f"n{i},{i / 10},{i}" for i in range(NUM_NODES)]
  edges = edges if edges is not None else [f"n{s},n{t},{s + t / 100}" for s, t in _edges()]
  with open(os.path.join(d, "nodes.csv"), "w") as f:
    f.write(node_header + "\n" + "\n".join(nodes) + "\n")
  with open(os.path.join(d, "edges.csv"), "w") as f:
    f.write(edge_header + "\n" + "\n".join(edges) + "\n")
  seeds = seeds if seeds is not None else {"train": list(range(0, 30)),
                                           "eval": list(range(30, NUM_NODES))}
  for split, ids in seeds.items():
    with open(os.path.join(d, f"seeds-{split}.csv"), "w") as f:
      f.write("id\n" + "".join(f"n{i}\n" for i in ids))
  return {split: f"seeds-{split}.csv" for split in seeds}


def _load(d, seeds=None, fan_outs=(4, 2), splits=("train", "eval")):
  return adapters.load(
      str(d), seeds=seeds or {"train": "seeds-train.csv", "eval": "seeds-eval.csv"},
      sampling_spec=None,
      sampling_config={"seed_node_set": "v", "hops": [{"e": f} for f in fan_outs]},
      splits=list(splits))


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
  d = tmp_path_factory.mktemp("graph")
  _write(d)
  return _load(d)


def _flat(element):
  return [np.asarray(t).tolist() for t in tf.nest.flatten(element, expand_composites=True)]


def _epochs(ds, n):
  return [[_flat(g) for g in ds] for _ in range(n)]


def test_graph_in_memory_is_the_tables(graph):
  g = graph.sampler.graph
  assert g.node_sets["v"].size == NUM_NODES
  edges = _edges()
  assert g.edge_sets["e"].size == len(edges)
  assert g.edge_sets["e"].degrees().tolist() == np.bincount(
      [s for s, _ in edges], minlength=NUM_NODES).tolist()
  e = g.edge_sets["e"]
  assert np.allclose(e.features["w"], e.source + e.target / 100)  # features follow the CSR order
  assert not g.schema.node_sets["v"].metadata.HasField("filename")


def test_sampled_subgraphs_respect_fan_outs_and_the_graph(graph):
  out_edges = set(_edges())
  for g in graph.sampler.dataset(graph.seeds["train"], batch_size=7, shuffle=False,
                                 fresh=True, seed=1):
    ident = g.node_sets["v"]["ident"].numpy().tolist()
    assert len(ident) == len(set(ident))
    assert np.allclose(g.node_sets["v"]["x"].numpy(), np.array(ident) / 10)
    adj = g.edge_sets["e"].adjacency
    pairs = [(ident[s], ident[t]) for s, t in zip(adj.source.numpy(), adj.target.numpy())]
    assert len(pairs) == len(set(pairs)) and set(pairs) <= out_edges
    assert np.allclose(g.edge_sets["e"]["w"].numpy(),
                       [s + t / 100 for s, t in pairs])
    from_seed = [t for s, t in pairs if s == ident[0]]
    degree = sum(1 for s, _ in out_edges if s == ident[0])
    # Hop 1 samples 4; hop 2 may expand the seed again (a self loop): 2 more.
    assert min(4, degree) <= len(from_seed) <= min(4 + 2, degree)
    assert len(ident) <= 1 + 4 + 4 * 2


def test_fresh_samples_every_epoch_repeatable_under_a_seed(graph):
  seeds = graph.seeds["train"]
  first, second = _epochs(graph.sampler.dataset(seeds, batch_size=8, shuffle=True, fresh=True,
                                                seed=3), 2)
  assert first != second  # new order and new neighbourhoods
  again = _epochs(graph.sampler.dataset(seeds, batch_size=8, shuffle=True, fresh=True,
                                        seed=3), 2)
  assert again == [first, second]
  other = _epochs(graph.sampler.dataset(seeds, batch_size=8, shuffle=True, fresh=True,
                                        seed=4), 1)
  assert other[0] != first
  # Validation: the same subgraphs, in seed order, every time.
  valid = _epochs(graph.sampler.dataset(seeds, batch_size=8, shuffle=False, fresh=False,
                                        seed=3), 2)
  assert valid[0] == valid[1]


def test_examples_are_write_example_of_the_sampled_subgraphs(graph):
  rows = graph.seeds["train"][:9]
  batch = graph.sampler.graph_tensor(tf.constant(rows), tf.constant(5, tf.int64))
  expected = [tfgnn.write_example(g) for g in tf.data.Dataset.from_tensors(batch).unbatch()]
  got = graph.sampler.examples(rows, 5)
  assert len(got) == 9 and got == expected
  assert graph.sampler.examples(rows, 6) != expected  # another sample


def test_choose_edges_is_uniform_without_replacement():
  rng = np.random.default_rng(0)
  degrees = np.array([0, 2, 5, 6, 30])
  counts = np.zeros(30)
  for _ in range(3000):
    rows, offsets = choosers.choose_edges(rng, degrees, 5)
    assert np.bincount(rows, minlength=5).tolist() == [0, 2, 5, 5, 5]
    for r in range(5):
      picked = offsets[rows == r]
      assert len(set(picked.tolist())) == len(picked) and (picked < degrees[r]).all()
    counts += np.bincount(offsets[rows == 4], minlength=30)
  # Each of the 30 edges is picked with probability 5/30: 500 of 3000 draws.
  assert np.abs(counts - 500).max() < 100, counts


def _error(tmp_path, match, **write):
  seeds = _write(tmp_path / "g", **write)
  with pytest.raises(GraphInputError, match=match):
    _load(tmp_path / "g", seeds={s: f for s, f in seeds.items()})


def test_duplicate_node_ids_name_the_table_and_row(tmp_path):
  nodes = [f"n{i},{i / 10},{i}" for i in range(NUM_NODES)] + ["n7,0.0,7"]
  _error(tmp_path, r"nodes.csv.*duplicate ids \['n7'\].*nodes.csv, line 42", nodes=nodes)


def test_dangling_edge_names_the_id_and_row(tmp_path):
  edges = ["n0,n1,0.5", "n1,nX,0.5"]
  _error(tmp_path, r"edges.csv.*target ids not in node set 'v': \['nX'\].*edges.csv, line 3",
         edges=edges)


def test_missing_feature_column_and_values(tmp_path):
  _error(tmp_path, r"lacks column\(s\) \['x'\]", node_header="id,y,ident")
  nodes = [f"n{i},{i / 10},{i}" for i in range(NUM_NODES)]
  nodes[5] = "n5,,5"
  _error(tmp_path / "b", r"nodes.csv, line 7 \(id 'n5'\): feature 'x' is missing", nodes=nodes)
  nodes[5] = "n5,nan,5"
  _error(tmp_path / "c", r"nodes.csv, line 7 \(id 'n5'\): feature 'x'.*not finite", nodes=nodes)


def test_seed_errors(tmp_path):
  _error(tmp_path, r"split 'train'.*ids missing from the 'v' node table.*\['n99'\]",
         seeds={"train": [1, 99], "eval": [2]})
  seeds = _write(tmp_path / "s", seeds={"train": [1, 2]})
  with pytest.raises(GraphInputError, match=r"split\(s\) \['eval'\] that 'seeds' does not"):
    _load(tmp_path / "s", seeds=seeds)


def test_tfrecord_tables_with_shaped_features(tmp_path):
  """TFRecord tables (Planetoid's format) carry vector features; a short one is named."""
  d = tmp_path / "tf"
  os.makedirs(d)
  with open(d / "graph_schema.pbtxt", "w") as f:
    f.write("""node_sets { key: "v" value {
      features { key: "f" value { dtype: DT_FLOAT shape { dim { size: 3 } } } }
      metadata { filename: "nodes.tfrecord" } } }
    edge_sets { key: "e" value { source: "v" target: "v" metadata { filename: "edges.tfrecord" } } }
    """)

  def example(**features):
    ex = tf.train.Example()
    for k, v in features.items():
      if isinstance(v, bytes):
        ex.features.feature[k].bytes_list.value.append(v)
      else:
        ex.features.feature[k].float_list.value.extend(v)
    return ex.SerializeToString()
  with tf.io.TFRecordWriter(str(d / "nodes.tfrecord")) as w:
    for i in range(4):
      w.write(example(**{"#id": b"%d" % i, "f": [i, i, i] if i != 2 else [1.0]}))
  with tf.io.TFRecordWriter(str(d / "edges.tfrecord")) as w:
    w.write(example(**{"#source": b"0", "#target": b"1"}))
  schema = tfgnn.read_schema(str(d / "graph_schema.pbtxt"))
  with pytest.raises(GraphInputError, match=r"nodes.tfrecord, record 3 has a feature of the "
                                            r"wrong type or size"):
    store_lib.load(schema, str(d), graph_schema=schema, memory_bytes=2**40)


def test_component_contract():
  from tfx import v1 as tfx
  from gnn_trainer_component import GnnTrainer, GraphSchema
  tables = tfx.dsl.Importer(source_uri="/tmp/none", artifact_type=GraphSchema).with_id("t")
  examples = tfx.dsl.Importer(source_uri="/tmp/none",
                              artifact_type=tfx.types.standard_artifacts.Examples).with_id("x")
  transform = tfx.dsl.Importer(
      source_uri="/tmp/none",
      artifact_type=tfx.types.standard_artifacts.TransformGraph).with_id("tg")
  common = dict(graph_schema=tables.outputs["result"], module_file="m.py")
  config = {"seed_node_set": "v", "hops": [{"e": 5}]}
  trainer = GnnTrainer(seeds={"train": "s.csv", "eval": "e.csv"}, sampling_config=config,
                       **common)
  assert "examples" not in trainer.inputs
  with pytest.raises(ValueError, match="exactly one of 'examples'.*or the graph held in memory"):
    GnnTrainer(**common)
  with pytest.raises(ValueError, match=r"Got \['examples', 'seeds'\]"):
    GnnTrainer(examples=examples.outputs["result"], seeds={"train": "s.csv"},
               sampling_config=config, **common)
  with pytest.raises(ValueError, match="'transform_graph' works on examples"):
    GnnTrainer(seeds={"train": "s.csv"}, sampling_config=config,
               transform_graph=transform.outputs["result"], **common)
  with pytest.raises(ValueError, match="exactly one of 'sampling_config' or 'sampling_spec'"):
    GnnTrainer(seeds={"train": "s.csv"}, **common)


def _symmetric_graph(d):
  und = sorted({(min(s, t), max(s, t)) for s, t in _edges() if s != t})
  rows = [f"n{s},n{t},0.5" for s, t in und] + [f"n{t},n{s},0.5" for s, t in und]
  _write(d, edges=rows)
  return und


@pytest.fixture(scope="module")
def link_graph(tmp_path_factory):
  d = tmp_path_factory.mktemp("links")
  und = _symmetric_graph(d)
  link = {"edge_set": "e", "splits": {"train": 0.7, "eval": 0.15, "test": 0.15},
          "negatives_per_positive": {"train": 2, "eval": 1, "test": 1},
          "hops": [{"e": 50}, {"e": 50}], "undirected": True, "seed": 5}
  return adapters.load(str(d), link_config=link, splits=["train", "eval"]), und, link


def _link_examples(ds):
  """(pair, label, message edges, node idents) of every example, read in one batch."""
  def parts(g):
    adj = g.edge_sets["e"].adjacency
    return {"ident": g.node_sets["v"]["ident"], "src": adj.source, "tgt": adj.target,
            "rs": g.edge_sets["_readout/source"].adjacency.source[0],
            "rt": g.edge_sets["_readout/target"].adjacency.source[0],
            "label": g.node_sets["_readout"]["label"][0]}
  batch = next(iter(ds.map(parts).ragged_batch(int(ds.cardinality()))))
  lists = {k: v.to_list() if isinstance(v, tf.RaggedTensor) else v.numpy().tolist()
           for k, v in batch.items()}
  out = []
  for ident, src, tgt, rs, rt, label in zip(*(lists[k] for k in (
      "ident", "src", "tgt", "rs", "rt", "label"))):
    edges = {(ident[s], ident[t]) for s, t in zip(src, tgt)}
    out.append(((ident[rs], ident[rt]), label, edges, ident))
  return out


def test_link_split_and_leakage_rules(link_graph):
  """LinkSampler's split; held-out positives are in no subgraph; a pair is never a
  message edge of its own subgraph; negatives are non-edges, fresh every epoch."""
  from gnn_trainer_component.graph import link_config as link_config_lib
  from gnn_trainer_component.graph import links
  splits, und, link = link_graph
  ids = {f"n{i}".encode(): i for i in range(NUM_NODES)}
  want = links.split_links([(f"n{s}".encode(), f"n{t}".encode()) for s, t in und],
                           link_config_lib.parse_link_config(tfgnn.parse_schema(SCHEMA), link,
                                                             who="GnnTrainer"),
                           who="GnnTrainer")
  for split, pairs in want.items():
    assert sorted(map(tuple, splits.positives[split].tolist())) == sorted(
        (ids[u], ids[v]) for u, v in pairs)
  held_out = {tuple(sorted(p)) for s in ("eval", "test") for p in splits.positives[s].tolist()}
  graph_edges = {(s, t) for s, t in und} | {(t, s) for s, t in und}
  train = splits.provider(["train"], training=True, batch_size=16, seed=0)
  valid = splits.provider(["eval"], training=False, batch_size=16, seed=0)
  ctx = tf.distribute.InputContext()
  assert train.get_dataset(ctx).element_spec == tfgnn.create_graph_spec_from_schema_pb(
      splits.schema)
  epochs = []
  for ds in (train.get_dataset(ctx), valid.get_dataset(ctx)):
    for _ in range(2):
      negatives = set()
      for pair, label, edges, ident in _link_examples(ds):
        assert ident[:2] == list(pair)  # the ends first, source first
        assert not {tuple(sorted(e)) for e in edges} & held_out
        assert pair not in edges and pair[::-1] not in edges
        assert (label == 1.0) == (pair in graph_edges)
        assert pair[0] != pair[1]
        if label == 0.0:
          negatives.add(pair)
      epochs.append(negatives)
  num_train = len(splits.positives["train"])
  assert train.num_seeds == 3 * num_train  # 2 negatives per positive
  assert epochs[0] != epochs[1]  # training: new negatives every epoch
  assert epochs[2] == epochs[3] and len(epochs[2]) == len(splits.positives["eval"])


def _assert_one_component_holding(merged, batch):
  """``merged`` has one component and the nodes, features and edges of ``batch``."""
  assert int(merged.num_components) == 1 and set(merged.node_sets) == set(batch.node_sets)
  for name, node_set in batch.node_sets.items():
    assert int(merged.node_sets[name].total_size) == int(node_set.total_size)
    for feature, value in node_set.features.items():
      np.testing.assert_array_equal(merged.node_sets[name][feature], value)
  for name, edge_set in batch.edge_sets.items():
    for tag in (tfgnn.SOURCE, tfgnn.TARGET):
      np.testing.assert_array_equal(merged.edge_sets[name].adjacency[tag],
                                    edge_set.adjacency[tag])


def test_merged_batches_are_the_subgraphs_with_their_roots_read_out(graph):
  """Around seeds, a merged batch is the batch's subgraphs in one component plus the
  seed readout of each subgraph's root: what add_readout_from_first_node gives the
  subgraphs batched and merged (the spec the export's parser serves)."""
  ctx = tf.distribute.InputContext()
  per_seed = graph.provider(["train"], training=True, batch_size=8, seed=4)
  merged = graph.provider(["train"], training=True, batch_size=8, seed=4, merged=True)
  assert merged.steps == 4  # 30 seeds
  want = [tfgnn.add_readout_from_first_node(g.merge_batch_to_components(), key="seed",
                                            node_set_name="v")
          for g in per_seed.get_dataset(ctx).batch(8)]
  got = list(merged.get_dataset(ctx))
  assert len(got) == len(want) == 4
  assert graph.training_spec.is_compatible_with(got[0].spec)
  for a, b in zip(got, want):
    _assert_one_component_holding(a, b)
  # Served subgraphs get the same structure.
  serialized = graph.serialized_examples(["train"], 8)
  parsed = graph.serving_parser()(tf.constant(serialized))
  sizes = parsed.node_sets["v"].sizes.numpy()
  np.testing.assert_array_equal(parsed.edge_sets["_readout/seed"].adjacency.source,
                                np.cumsum(sizes) - sizes)  # each subgraph's first node
  assert int(parsed.node_sets["_readout"].total_size) == 8


def test_merged_link_batches_are_the_pairs_subgraphs(link_graph):
  """A merged batch (one element per step) is the disjoint union of the batch's
  subgraphs: the same nodes, features, edges and readout as the per-pair elements
  batched and merged, in one component."""
  splits = link_graph[0]
  ctx = tf.distribute.InputContext()
  for training in (True, False):
    per_pair = splits.provider(["train"] if training else ["eval"], training=training,
                               batch_size=16, seed=3)
    merged = splits.provider(["train"] if training else ["eval"], training=training,
                             batch_size=16, seed=3, merged=True)
    assert per_pair.steps is None and merged.steps == -(-per_pair.num_seeds // 16)
    want = [g.merge_batch_to_components() for g in per_pair.get_dataset(ctx).batch(16)]
    got = list(merged.get_dataset(ctx))
    assert len(got) == len(want) == merged.steps
    for a, b in zip(got, want):
      tfgnn.check_compatible_with_schema_pb(a.spec, splits.schema)
      _assert_one_component_holding(a, b)
  dropped = splits.provider(["train"], training=True, batch_size=16, seed=3, merged=True,
                            drop_remainder=True)
  assert dropped.steps == splits.provider(["train"], training=True, batch_size=16,
                                          seed=3).num_seeds // 16
  assert all(int(g.node_sets["_readout"].total_size) == 16
             for g in dropped.get_dataset(ctx))
  with pytest.raises(GraphInputError, match="2 pipelines"):
    merged.get_dataset(tf.distribute.InputContext(num_input_pipelines=2))


def test_a_sampled_batch_is_named_and_crosses_to_tensorflow_by_name(link_graph):
  """The sampler's output names its pieces (node sets, edge sets, extras), and the dtypes
  tf.numpy_function is told are named the same way: no positional list to match by hand."""
  from gnn_trainer_component.in_memory import batch as batch_lib
  from gnn_trainer_component.in_memory import link_pairs
  sampler = link_graph[0].pair_sampler(["eval"], training=False)
  rows = np.arange(6)
  for node_indices in (False, True):
    got = sampler.sample(rows, 7, node_indices=node_indices)
    assert set(got.nodes) == set(sampler.graph.node_sets)
    assert set(got.edges) == set(sampler.graph.edge_sets)
    assert list(got.extras) == [link_pairs.LABELS] and got.extras["labels"].shape == (6,)
    assert all(p.sizes.shape == (6,) for p in [*got.nodes.values(), *got.edges.values()])
    structure = sampler.batch_dtypes(node_indices)
    assert tf.nest.map_structure(lambda a: tf.as_dtype(a.dtype), got) == structure
    tf.nest.map_structure(np.testing.assert_array_equal,
                          batch_lib.unflatten(structure, batch_lib.flatten(got)), got)
  features = sampler.sample(rows, 7)
  for name, nodes in got.node_indices.items():  # the same nodes, gathered or by index
    assert got.nodes[name].features == {}
    for feature, values in features.nodes[name].features.items():
      np.testing.assert_array_equal(
          values, sampler.graph.node_sets[name].features[feature][nodes])


def test_whole_graph_link_steps_hold_the_graph_without_their_pairs_own_edges(link_graph):
  """graph_mode "full_graph" with link_config: each step is the whole message-passing graph
  minus the step's positives (both directions: undirected), read out at its pairs (labels,
  ends); every training pair once per epoch, negatives fresh each epoch and no edge;
  validation is every pair in one step; the spec is LinkSampler's, as the export serves."""
  from gnn_trainer_component import tasks as task_lib
  splits, und, _ = link_graph
  data = adapters.for_training(
      splits, adapters.Options(("train",), ("eval",), graph_mode="full_graph"),
      {"link": task_lib.DotProductLinkPrediction()})
  assert isinstance(data, adapters.LinkFullGraphData) and data.mode == "full_graph"
  feed = data.feed(_request({}, batch_size=16, seed=3))
  ctx = tf.distribute.InputContext()
  ident = splits.message_graph.node_sets["v"].features["ident"]
  message = {(int(ident[s]), int(ident[t])) for s, t in zip(
      splits.message_graph.edge_sets["e"].source, splits.message_graph.edge_sets["e"].target)}
  graph_edges = {(s, t) for s, t in und} | {(t, s) for s, t in und}
  positives = {tuple(int(ident[i]) for i in p) for p in splits.positives["train"]}
  epochs = []
  ds = feed.train.get_dataset(ctx)
  for _ in range(2):
    pairs = []
    for g in ds:
      tfgnn.check_compatible_with_schema_pb(g.spec, splits.schema)
      assert feed.spec.is_compatible_with(g.spec)
      adj = g.edge_sets["e"].adjacency
      edges = set(zip(ident[adj.source.numpy()].tolist(), ident[adj.target.numpy()].tolist()))
      ends = list(zip(ident[g.edge_sets["_readout/source"].adjacency.source.numpy()].tolist(),
                      ident[g.edge_sets["_readout/target"].adjacency.source.numpy()].tolist()))
      labels = g.node_sets["_readout"]["label"].numpy().tolist()
      own = {e for e, label in zip(ends, labels) if label == 1.0}
      assert own <= positives and all((e in graph_edges) == (label == 1.0)
                                      for e, label in zip(ends, labels))
      assert edges == message - own - {(t, s) for s, t in own}
      pairs += ends
    assert len(pairs) == feed.train.steps * 16 - (-len(pairs) % 16) == splits.num_examples(
        ["train"])
    assert set(pairs) >= positives
    epochs.append(pairs)
  assert epochs[0] != epochs[1]
  [valid] = list(feed.valid.get_dataset(ctx))
  assert int(valid.node_sets["_readout"].sizes[0]) == splits.num_examples(["eval"])
  with pytest.raises(GraphInputError, match="one replica"):
    feed.train.get_dataset(tf.distribute.InputContext(num_input_pipelines=2))


def test_graph_too_large_points_to_graph_sampler(tmp_path):
  _write(tmp_path)
  schema = tfgnn.read_schema(str(tmp_path / "graph_schema.pbtxt"))
  on_disk, peak = store_lib.load_estimate(schema, str(tmp_path))
  assert on_disk == sum(os.path.getsize(tmp_path / f) for f in ("nodes.csv", "edges.csv"))
  assert peak == 8 * on_disk
  store_lib.check_fits(schema, str(tmp_path), memory_bytes=peak)
  with pytest.raises(GraphTooLargeError,
                     match=r"more than this machine's.*GraphSampler.*DataflowRunner"):
    store_lib.check_fits(schema, str(tmp_path), memory_bytes=peak - 1)
  # Each component names its own way out.
  with pytest.raises(GraphTooLargeError, match=r"^GraphInferrer: .*'engine': 'beam'"):
    store_lib.check_fits(schema, str(tmp_path), memory_bytes=peak - 1, who="GraphInferrer")
  with pytest.raises(GraphTooLargeError, match=r"^GraphEvaluator: .*GraphSampler.*stock "
                                               r"Evaluator \(TFMA"):
    store_lib.check_fits(schema, str(tmp_path), memory_bytes=peak - 1, who="GraphEvaluator")


#: Run in a fresh process (the limit is process-wide): argv the tables' folder. Nothing
#: large is allocated under the limit: with the address space exhausted, threads of the
#: libraries TF-GNN imports may crash the process before Python sees a MemoryError.
_ADDRESS_SPACE_PROBE = r"""
import json, resource, sys
from gnn_trainer_component import process
process.setup_process()
import tensorflow_gnn as tfgnn
from gnn_trainer_component.graph.errors import GraphTooLargeError
from gnn_trainer_component.in_memory import store
schema = tfgnn.read_schema(sys.argv[1] + "/graph_schema.pbtxt")
used = process._address_space_used()
resource.setrlimit(resource.RLIMIT_AS, (used + (256 << 20), resource.RLIM_INFINITY))
out = {"used": used, "left": process.memory_bytes()}
try:
  store.check_fits(schema, sys.argv[1], out["left"])
  out["estimate"] = "fits"
except GraphTooLargeError as e:
  out["estimate"] = str(e)
print(json.dumps(out))
"""


def _one_node_table(d, rows: int) -> None:
  (d / "graph_schema.pbtxt").write_text(
      'node_sets { key: "v" value { features { key: "x" value { dtype: DT_FLOAT } } '
      'metadata { filename: "nodes.csv" } } }\n')
  with open(d / "nodes.csv", "w") as f:
    f.write("id,x\n")
    f.writelines(f"n{i},0.5\n" for i in range(rows))


def test_an_address_space_limit_counts_what_is_left_of_it(tmp_path):
  """Under an address-space limit (``ulimit -v``, RLIMIT_AS) with 256 MiB left, the memory
  check counts what is left of it, not the whole limit (TensorFlow alone maps gigabytes)."""
  import json
  import subprocess
  import sys
  from tests.helpers import REPO_ROOT
  _one_node_table(tmp_path, 3_000_000)  # 41 MiB on disk: about 330 MiB to load
  proc = subprocess.run([sys.executable, "-c", _ADDRESS_SPACE_PROBE, str(tmp_path)],
                        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  out = json.loads(proc.stdout.strip().splitlines()[-1])
  assert 200 << 20 < out["left"] <= 256 << 20, out
  assert "more than this machine's 0.2 GiB" in out["estimate"], out


def test_running_out_of_memory_while_reading_names_the_table(tmp_path, monkeypatch):
  """A MemoryError while reading a table (memory the estimate did not foresee) is
  GraphTooLargeError naming the table, with the way out."""
  from gnn_trainer_component.graph import tables
  _one_node_table(tmp_path, 10)
  schema = tfgnn.read_schema(str(tmp_path / "graph_schema.pbtxt"))

  def out_of_memory(*args, **kwargs):
    raise MemoryError()

  monkeypatch.setattr(tables, "_concat", out_of_memory)  # where a read allocates its arrays
  with pytest.raises(GraphTooLargeError,
                     match=r"^GnnTrainer: ran out of memory reading node table 'nodes.csv' of "
                           r"node set 'v'.*`ulimit -v`.*GraphSampler"):
    tables.read_graph_tables(schema, str(tmp_path), "GnnTrainer")


def _gcn_like_tasks(label_fn_cls=None):
  from tensorflow_gnn import runner
  from gnn_trainer_component import tasks
  readout = tasks.RootNodeLogits("v", num_classes=3,
                                 label_fn=tasks.SeedLabelFn("v", feature_name="ident"))
  first_node = runner.RootNodeMulticlassClassification(
      "v", num_classes=3, label_fn=runner.RootNodeLabelFn("v", feature_name="ident"))
  return readout, first_node


def _for_training(graph, tasks, graph_mode="auto", budget_bytes=0, processes=1):
  return adapters.for_training(
      graph, adapters.Options(("train",), ("eval",), graph_mode=graph_mode,
                              budget_bytes=budget_bytes, processes=processes), tasks)


def _request(tasks, batch_size=8, seed=2, local=True, remote_input=None):
  return training_data.Request(batch_size=batch_size, seed=seed, drop_remainder=False,
                               tasks=tasks, local=local, remote_input=remote_input)


def test_full_graph_steps_hold_the_whole_graph_and_the_seeds(graph):
  """Each step: the whole graph plus structured readout of its share of the seeds;
  training seeds reshuffled every epoch, validation all seeds in one step; the
  batches are kept (one local replica), and the export serves sampled subgraphs."""
  readout_task, _ = _gcn_like_tasks()
  whole = _for_training(graph, {"t": readout_task}, "full_graph")
  assert whole.mode == "full_graph"
  feed = whole.feed(_request({"t": readout_task}))
  assert feed.whole_steps and feed.keep_batches and feed.serving_parser is not None
  ctx = tf.distribute.InputContext()
  train = feed.train
  assert train.steps == feed.train_records == 4
  edges = _edges()
  epochs = []
  ds = train.get_dataset(ctx)
  for _ in range(2):
    seeds = []
    for g in ds:
      assert feed.spec.is_compatible_with(g.spec)
      assert int(g.node_sets["v"].sizes[0]) == NUM_NODES
      assert int(g.edge_sets["e"].sizes[0]) == len(edges)
      assert g.node_sets["v"]["ident"].numpy().tolist() == list(range(NUM_NODES))
      adj = g.edge_sets[readout.READOUT_SEED].adjacency
      step = adj.source.numpy().tolist()
      assert adj.target.numpy().tolist() == list(range(len(step)))
      assert int(g.node_sets[readout.READOUT].sizes[0]) == len(step) <= 8
      # The tasks read the step's seeds (ident == row), and no node keeps its label.
      graph_in, labels = readout_task.preprocess(g)
      assert labels.numpy().tolist() == step
      assert "ident" not in graph_in.node_sets["v"].features
      seeds += step
    assert sorted(seeds) == graph.seeds["train"].tolist()
    epochs.append(seeds)
  assert epochs[0] != epochs[1]
  valid = list(feed.valid.get_dataset(ctx))
  assert len(valid) == 1
  assert (valid[0].edge_sets[readout.READOUT_SEED].adjacency.source.numpy().tolist()
          == graph.seeds["eval"].tolist())


def test_full_graph_model_serves_sampled_subgraphs(graph):
  """The export's parser adds the seed readout to GraphSampler-format subgraphs, so
  a task on the seed readout reads their first node: the same as a sampled model."""
  readout_task, _ = _gcn_like_tasks()
  whole = _for_training(graph, {"t": readout_task}, "full_graph")
  feed = whole.feed(_request({"t": readout_task}))
  serialized = whole.parity_examples(5)
  parsed = feed.serving_parser(tf.constant(serialized))
  assert feed.spec.relax(num_components=True).is_compatible_with(parsed.spec)
  _, labels = readout_task.preprocess(parsed)
  assert labels.numpy().tolist() == graph.seeds["eval"][:5].tolist()  # ident == row
  sampled = tfgnn.parse_example(tfgnn.create_graph_spec_from_schema_pb(graph.schema),
                                tf.constant(serialized)).merge_batch_to_components()
  _, first_node_labels = readout_task.preprocess(sampled)
  assert first_node_labels.numpy().tolist() == labels.numpy().tolist()


def test_graph_mode_auto_and_its_errors(graph, link_graph):
  from gnn_trainer_component.in_memory import full_graph
  readout_task, first_node_task = _gcn_like_tasks()
  auto = dict(budget_bytes=10**9, processes=1)
  assert _for_training(graph, {"t": readout_task}, **auto).mode == "full_graph"
  # auto falls back to sampling: a task reading the first node, several
  # processes, or a step over the budget.
  for tasks, kwargs in (({"t": first_node_task}, auto),
                        ({"t": readout_task}, dict(auto, processes=2)),
                        ({"t": readout_task}, dict(auto, budget_bytes=adapters.step_bytes(
                            graph.sampler.graph) - 1))):
    assert _for_training(graph, tasks, **kwargs).mode == "sampled"
  assert _for_training(graph, {"t": readout_task}, "sampled", **auto).mode == "sampled"
  with pytest.raises(GraphInputError, match=r"task 't' \(RootNodeMulticlassClassification\) "
                     r"does not read the seed readout.*RootNodeLabelFn.*graph_mode to 'sampled'"):
    _for_training(graph, {"t": first_node_task}, "full_graph", **auto)
  with pytest.raises(GraphInputError, match="trains in one process.*runs 2"):
    _for_training(graph, {"t": readout_task}, "full_graph", processes=2)
  # Link prediction on the whole graph: asked for only ("auto" samples each pair's subgraph).
  assert _for_training(link_graph[0], {}, "auto", **auto).mode == "sampled"
  with pytest.raises(GraphInputError, match="trains in one process.*runs 2"):
    _for_training(link_graph[0], {}, "full_graph", processes=2)
  # Sampled in memory where the input pipeline runs in this process only.
  for data in (_for_training(graph, {"t": readout_task}, "full_graph"),
               _for_training(graph, {"t": readout_task}, "sampled")):
    with pytest.raises(GraphInputError, match="a tf.data service runs the input pipeline "
                                              "elsewhere.*pre-sample"):
      data.feed(_request({"t": readout_task}, local=False, remote_input="a tf.data service"))
