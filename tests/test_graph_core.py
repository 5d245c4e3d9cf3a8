"""The graph core (gnn_trainer_component/graph/): tables, sampling plans and strategies, links.

Fast unit tests. That every engine gives a bad table the same error is
``tests/test_inferrer.py::test_a_bad_table_gets_the_same_error_from_every_engine``.
"""

import collections
import dataclasses
import itertools
import math

import apache_beam as beam
import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component.beam import sampling as beam_sampling
from gnn_trainer_component.graph import link_config as link_config_lib
from gnn_trainer_component.graph import links
from gnn_trainer_component.graph import negatives as negatives_lib
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph import table_formats
from gnn_trainer_component.graph import tables
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.in_memory import choosers
from gnn_trainer_component.in_memory import kernel
from gnn_trainer_component.sampler.link import subgraphs

SCHEMA = tfgnn.parse_schema("""
node_sets { key: "user" value {
  features { key: "age" value { dtype: DT_INT32 } }
  metadata { filename: "users.csv" } } }
node_sets { key: "item" value {
  features { key: "price" value { dtype: DT_FLOAT } }
  metadata { filename: "items.tfrecord" } } }
edge_sets { key: "rated" value { source: "user" target: "item" metadata { filename: "r.csv" } } }
edge_sets { key: "rated_by" value { source: "item" target: "user" metadata { filename: "rb.csv" } } }
""")
#: SCHEMA with a weight, a time and a string on the rated_by edges.
STRATEGY_SCHEMA = tfgnn.parse_schema(str(SCHEMA).replace(
    'key: "rated_by"\n  value {', 'key: "rated_by"\n  value {\n features { key: "weight" value '
    '{ dtype: DT_FLOAT } } features { key: "day" value { dtype: DT_INT64 } } features { key: '
    '"tag" value { dtype: DT_STRING } }'))


def _write_items(path, prices, ids=None):
  with tf.io.TFRecordWriter(str(path)) as writer:
    for i, price in enumerate(prices):
      ex = tf.train.Example()
      ex.features.feature["#id"].bytes_list.value.append((ids or {}).get(i, f"i{i}").encode())
      ex.features.feature["price"].float_list.value.append(price)
      writer.write(ex.SerializeToString())


def _read_users(tmp_path, rows):
  (tmp_path / "users.csv").write_text("id,age\n" + "".join(r + "\n" for r in rows))
  return tables.read_node_table("user", SCHEMA.node_sets["user"], str(tmp_path), "Test")


def test_integer_features_are_integral_and_in_range(tmp_path):
  users = _read_users(tmp_path, ["u0,30", "u1, -4 ", "u2,+7"])
  assert users.features["age"].dtype == np.int32
  assert users.features["age"].tolist() == [30, -4, 7]
  assert list(users.ids) == [b"u0", b"u1", b"u2"]
  for value, problem in (("1.0", r"is not an integer \(dtype int32\)"), ("", "is missing"),
                         ("2147483648", "is out of the range of int32"),
                         ("-99999999999999999999", "is out of the range of int32")):
    with pytest.raises(GraphInputError, match=rf"Test: .*users.csv, line 3 \(id 'u1'\): feature "
                                              rf"'age' {problem} \('{value}'\); 1 such row"):
      _read_users(tmp_path, ["u0,30", f"u1,{value}", "u2,7"])


def test_a_csv_table_with_a_nul_byte_is_refused_by_line(tmp_path):
  """pandas' C parser ends a value at a NUL: a corrupt file would load as other ids and values."""
  for row in ("u\x001,30", "u1,3\x000", "u1,\x00"):
    with pytest.raises(GraphInputError, match=r"Test: CSV table .*users.csv, line 3 holds a NUL "
                                              r"byte: the file is corrupt or not text"):
      _read_users(tmp_path, ["u0,30", row, "u2,7"])
  (tmp_path / "users.csv").write_bytes(b"id,age\n" + b"\x00" * 300 + b"\nu0,1\n")
  with pytest.raises(GraphInputError, match=r"users.csv, line 2 holds a NUL byte"):
    tables.read_node_table("user", SCHEMA.node_sets["user"], str(tmp_path), "Test")


def test_tfrecord_tables_name_the_record_and_id(tmp_path):
  _write_items(tmp_path / "items.tfrecord", [1.0, float("nan"), 2.0])
  with pytest.raises(GraphInputError, match=r"items.tfrecord, record 2 \(id 'i1'\): feature "
                                            r"'price' has a non-finite value"):
    tables.read_node_table("item", SCHEMA.node_sets["item"], str(tmp_path), "Test")
  _write_items(tmp_path / "items.tfrecord", [1.0, 2.0], ids={1: ""})
  with pytest.raises(GraphInputError, match=r"items.tfrecord, record 2: 'id' is empty"):
    tables.read_node_table("item", SCHEMA.node_sets["item"], str(tmp_path), "Test")


def test_edges_are_checked_a_chunk_at_a_time(tmp_path, monkeypatch):
  monkeypatch.setattr(table_formats, "CHUNK_ROWS", 2)
  (tmp_path / "users.csv").write_text("id,age\nu0,1\nu1,2\nu2,3\n")
  _write_items(tmp_path / "items.tfrecord", [1.0, 2.0, 3.0])
  (tmp_path / "r.csv").write_text("source,target\nu0,i0\nu1,i2\nu2,i1\nu0,i9\n")
  (tmp_path / "rb.csv").write_text("source,target\ni0,u0\n")
  with pytest.raises(GraphInputError, match=r"edge table 'r.csv' of edge set 'rated' has target "
                                            r"ids not in node set 'item': \['i9'\] \(first at "
                                            r".*r.csv, line 5;"):
    tables.read_graph_tables(SCHEMA, str(tmp_path), "Test")
  (tmp_path / "r.csv").write_text("source,target\nu0,i0\nu1,i2\nu2,i1\n")
  nodes, edges = tables.read_graph_tables(SCHEMA, str(tmp_path), "Test", keep_features=False)
  assert nodes["item"].features == {} and list(nodes["item"].ids) == [b"i0", b"i1", b"i2"]
  assert edges["rated"].source.tolist() == [0, 1, 2]
  assert edges["rated"].target.tolist() == [0, 2, 1]


def test_a_strategy_per_hop_and_the_same_refusal_from_every_engine():
  top_k = {"fanout": 3, "strategy": "top_k", "weight": "weight"}
  spec = sampling.parse_sampling_spec("""
      seed_op { op_name: "seed" node_set_name: "user" }
      sampling_ops { op_name: "hop1_rated" input_op_names: "seed" edge_set_name: "rated"
                     sample_size: 5 strategy: RANDOM_UNIFORM }
      sampling_ops { op_name: "hop2_rated_by" input_op_names: "hop1_rated"
                     edge_set_name: "rated_by" sample_size: 3 strategy: TOP_K }""", "Test")
  plan = sampling.plan_from_hops(STRATEGY_SCHEMA, "user", [{"rated": 5}, {"rated_by": top_k}],
                                 who="Test")
  assert [(op.edge_set, op.size, op.strategy, op.weight) for op in plan.ops] == [
      ("rated", 5, "uniform", ""), ("rated_by", 3, "top_k", "weight")]
  # A text SamplingSpec's TOP_K reads TF-GNN's weight feature, "weight".
  assert sampling.plan_from_spec(spec, STRATEGY_SCHEMA, who="Test") == plan
  kernel.check_plan(plan, "Test")  # the in-memory kernel runs every strategy
  with pytest.raises(GraphInputError, match=r"Test: sampling op 'hop2_rated_by' \(edge set "
                                            r"'rated_by'\) asks for strategy 'top_k', which "
                                            r"a uniform sampler does not run \(it runs "
                                            r"\['uniform'\]\)"):
    sampling.check_engine(plan, "a uniform sampler", "Test", runs={"uniform"})
  latest = {"fanout": 2, "strategy": "latest", "time": "day", "time_respecting": True}
  timed = sampling.plan_from_hops(STRATEGY_SCHEMA, "user", [{"rated": 5}, {"rated_by": latest}],
                                  who="Test")
  assert timed.timed and timed.ops[1].time == "day" and timed.ops[1].time_respecting
  with pytest.raises(GraphInputError, match="which samples before each seed's time, but Test "
                                            "has no time per seed"):
    kernel.check_plan(timed, "Test")
  kernel.check_plan(timed, "Test", seed_times=True)
  for bad, match in (
      ({"fanout": 3, "strategy": "newest"}, r"strategy 'newest' is not one of \['uniform'"),
      ({"fanout": 0}, "must be a positive int"),
      ({"size": 3}, r"unknown keys \['size'\] for strategy 'uniform'"),
      ({"fanout": 3, "weight": "weight"}, r"unknown keys \['weight'\] for strategy 'uniform'"),
      ({"fanout": 3, "strategy": "weighted"},
       r"edge set 'rated_by': strategy 'weighted''s \"weight\" is missing: name the edge "
       r"feature it reads \(features of edge set 'rated_by': \['day', 'tag', 'weight'\]\)"),
      ({"fanout": 3, "strategy": "latest", "time": "year"},
       r"\"time\" 'year' is not a feature of edge set 'rated_by'"),
      ({"fanout": 3, "strategy": "latest", "time": "tag"}, "must be a scalar int or float"),
      ({"fanout": 3, "strategy": "latest", "time": "day", "time_inclusive": "yes"},
       "time_inclusive must be true or false")):
    with pytest.raises(GraphInputError, match=match):
      sampling.plan_from_hops(STRATEGY_SCHEMA, "user", [{"rated": 1}, {"rated_by": bad}], who="Test")
  bare = sampling.parse_sampling_spec(
      'seed_op { op_name: "seed" node_set_name: "user" } sampling_ops { op_name: "hop1" '
      'input_op_names: "seed" edge_set_name: "rated" sample_size: 2 strategy: TOP_K }', "Test")
  with pytest.raises(GraphInputError, match=r"asks for strategy 'top_k', which reads the edge "
                                            r"feature 'weight' .* edge set 'rated' has none"):
    sampling.plan_from_spec(bare, STRATEGY_SCHEMA, who="Test")


def test_link_hops_are_checked_from_each_end_and_the_error_says_which():
  config = {"edge_set": "rated", "splits": {"train": 0.8, "test": 0.2}, "hops": [{"rated": 3}]}
  with pytest.raises(GraphInputError, match=r"Test link_config: hop 1 from the target end "
                                            r"\(node set 'item'\) samples edge set 'rated' from "
                                            r"node set 'user', which the previous hop does not "
                                            r"reach \(it reaches \['item'\]\)"):
    link_config_lib.parse_link_config(SCHEMA, config, who="Test")


def test_the_plan_checks_splits_hops_and_strategies_before_any_table():
  from gnn_trainer_component.graph import plan as graph_plan
  kwargs = dict(sampling_spec=None, engine="the test engine", runs={"uniform"}, who="Test")
  hops = {"seed_node_set": "user", "hops": [{"rated": 2}, {"rated_by": 2}]}
  got = graph_plan.plan(SCHEMA, seeds={"train": "s.csv", "test": "t.csv"}, sampling_config=hops,
                        link_config=None, splits=["train", "train"], **kwargs)
  assert got.seed_tables == {"train": "s.csv"} and got.link is None
  assert got.sampling.seed_node_set == "user" and got.output_schema == got.graph_schema
  assert not any(p.metadata.HasField("filename") for _, _, p in tfgnn.iter_sets(got.graph_schema))
  with pytest.raises(GraphInputError, match=r"name split\(s\) \['eval'\] that 'seeds' does not"):
    graph_plan.plan(SCHEMA, seeds={"train": "s.csv"}, sampling_config=hops, link_config=None,
                    splits=["train", "eval"], **kwargs)
  top_k = {"seed_node_set": "user", "hops": [{"rated_by": {"fanout": 2, "strategy": "top_k",
                                                          "weight": "weight"}}]}
  top_k["seed_node_set"] = "item"
  with pytest.raises(GraphInputError, match="which the test engine does not run"):
    graph_plan.plan(STRATEGY_SCHEMA, seeds={"train": "s.csv"}, sampling_config=top_k, link_config=None,
                    splits=["train"], **kwargs)
  follows = tfgnn.parse_schema("""
      node_sets { key: "v" value { metadata { filename: "v.csv" } } }
      edge_sets { key: "e" value { source: "v" target: "v" metadata { filename: "e.csv" } } }""")
  link = {"edge_set": "e", "splits": {"train": 0.8, "test": 0.2}, "hops": [{"e": 3}]}
  got = graph_plan.plan(follows, seeds=None, sampling_config=None, link_config=link,
                        splits=["train"], **kwargs)
  assert got.link.edge_set == "e" and got.seed_tables == {}
  assert got.output_schema == link_config_lib.output_graph_schema(follows, got.link, who="Test")
  assert "_readout" in got.output_schema.node_sets and "_readout" not in got.graph_schema.node_sets
  with pytest.raises(GraphInputError, match=r"that link_config\['splits'\] does not define"):
    graph_plan.plan(follows, seeds=None, sampling_config=None, link_config=link,
                    splits=["eval"], **kwargs)
  clash = tfgnn.parse_schema(str(follows) + 'node_sets { key: "_readout" value {} }')
  with pytest.raises(GraphInputError, match="already has a set named '_readout'"):
    graph_plan.plan(clash, seeds=None, sampling_config=None, link_config=link,
                    splits=["train"], **kwargs)


def test_negatives_are_non_edges_distinct_and_of_the_target_node_set():
  source, target = np.array([0, 0, 1, 2]), np.array([1, 2, 3, 0])
  known = negatives_lib.EdgeKeys(source, target, 5, undirected=False)
  # 3 x 5 pairs, 4 of them edges: 11 non-edges, 8 without the self pairs.
  got = negatives_lib.draw_negatives(np.random.default_rng(0), 11, 3, 5, known, one_node_set=False,
                             what="a test", who="Test", distinct=True)
  assert got.shape == (11, 2) and got[:, 0].max() < 3 and got[:, 1].max() < 5
  assert not known.contains(got[:, 0], got[:, 1]).any()
  assert len({tuple(p) for p in got}) == 11
  with pytest.raises(GraphInputError, match="Test: found only 8 of 9 negatives for a test"):
    negatives_lib.draw_negatives(np.random.default_rng(0), 9, 3, 5, known, one_node_set=True,
                         what="a test", who="Test", distinct=True)


def test_supervise_is_the_same_split_for_both_engines_and_undirected_keys():
  ids = pd.Index([f"n{i}".encode() for i in range(30)], dtype=object)
  rng = np.random.default_rng(3)
  source, target = rng.integers(30, size=120), rng.integers(30, size=120)
  link = link_config_lib.LinkConfig(edge_set="e", splits={"train": 0.7, "eval": 0.1, "test": 0.2},
                          negatives_per_positive={"train": 1, "eval": 2, "test": 1},
                          source_hops=[{"e": 2}], target_hops=[{"e": 2}], undirected=True,
                          seed=4)
  a = links.supervise(link, ids, ids, source, target, one_node_set=True,
                      negatives_for=link.splits, who="Test")
  b = links.supervise(link, ids, ids, source, target, one_node_set=True,
                      negatives_for=link.held_out_splits, who="Test")
  for split in link.splits:
    np.testing.assert_array_equal(a.positives[split], b.positives[split])
  assert len(b.negatives["train"]) == 0
  np.testing.assert_array_equal(a.negatives["eval"], b.negatives["eval"])
  negatives = np.concatenate(list(a.negatives.values()))
  keys = {tuple(sorted(p)) for p in negatives.tolist()}
  assert len(keys) == len(negatives)  # distinct across splits, in either direction
  assert not a.known.contains(negatives[:, 0], negatives[:, 1]).any()
  assert (negatives[:, 0] != negatives[:, 1]).all()
  held = np.concatenate([a.positives["eval"], a.positives["test"]])
  assert a.held_out.contains(held[:, 1], held[:, 0]).all()  # both directions held out
  assert not a.held_out.contains(a.positives["train"][:, 0], a.positives["train"][:, 1]).any()


#: SCHEMA with a rating and a time on the rated edges (edge_label).
LABEL_SCHEMA = tfgnn.parse_schema(str(SCHEMA).replace(
    'key: "rated"\n  value {', 'key: "rated"\n  value {\n features { key: "stars" value '
    '{ dtype: DT_INT64 } } features { key: "ts" value { dtype: DT_FLOAT } } features { key: '
    '"tag" value { dtype: DT_STRING } }'))


def test_edge_label_config_is_checked_by_key():
  config = {"edge_set": "rated", "reverse_edge_set": "rated_by", "edge_label": "stars",
            "splits": {"train": 0.8, "test": 0.2},
            "source_hops": [{"rated": 2}], "target_hops": [{"rated_by": 2}]}
  link = link_config_lib.parse_link_config(LABEL_SCHEMA, config, who="Test")
  assert link.edge_label == "stars" and link.negatives_for("test", 10) == 0
  schema = link_config_lib.output_graph_schema(LABEL_SCHEMA, link, who="Test")
  assert "the edge's 'stars'" in schema.node_sets["_readout"].description
  for key, value in (("negatives_per_positive", 1), ("negative_sampling", "uniform")):
    with pytest.raises(GraphInputError, match=rf"with edge_label every pair is an edge, "
                                              rf"labelled with its 'stars', and no negative is "
                                              rf"drawn; remove \['{key}'\]"):
      link_config_lib.parse_link_config(LABEL_SCHEMA, {**config, key: value}, who="Test")
  with pytest.raises(GraphInputError, match=r"edge_label \(the edge feature each pair "
                                            r"predicts\) 'tag' must be a scalar int or float"):
    link_config_lib.parse_link_config(LABEL_SCHEMA, {**config, "edge_label": "tag"}, who="Test")
  with pytest.raises(GraphInputError, match=r"'rating' is not a feature of edge set 'rated'"):
    link_config_lib.parse_link_config(LABEL_SCHEMA, {**config, "edge_label": "rating"},
                                      who="Test")


def test_edge_label_pairs_carry_their_first_edges_value_and_no_negative():
  ids = pd.Index([f"n{i}".encode() for i in range(6)], dtype=object)
  source, target = np.array([0, 1, 2, 0, 3, 4, 5, 1]), np.array([1, 2, 3, 1, 4, 5, 0, 0])
  stars = np.array([5, 4, 3, 1, 2, 5, 4, 2])  # (0, 1) twice: 5 first in the table, 1 earlier
  link = link_config_lib.LinkConfig(edge_set="e", splits={"train": 0.5, "test": 0.5},
                                    negatives_per_positive={"train": 0, "test": 0},
                                    source_hops=[], target_hops=[], edge_label="stars")
  got = links.supervise(link, ids, ids, source, target, one_node_set=True,
                        negatives_for=link.splits, who="Test", columns={"stars": stars})
  want = {(0, 1): 5, (1, 2): 4, (2, 3): 3, (3, 4): 2, (4, 5): 5, (5, 0): 4, (1, 0): 2}
  assert sum(len(p) for p in got.positives.values()) == len(want)
  for split, pairs in got.positives.items():
    assert len(got.negatives[split]) == 0
    assert got.values[split].dtype == np.float32
    assert got.values[split].tolist() == [want[tuple(p)] for p in pairs.tolist()]
    csv_rows = links.pairs_csv(pairs, got.negatives[split], ids, ids, got.values[split])
    assert csv_rows.splitlines()[1:] == [f"n{u},n{v},{want[(u, v)]}" for u, v in pairs.tolist()]
  undirected = dataclasses.replace(link, undirected=True)  # (1, 0) is (0, 1): its first value
  got, _ = links.edge_columns(undirected, ids, ids, source, target, {"stars": stars},
                              {"all": np.array([[1, 0]])}, who="Test")
  assert got["all"].tolist() == [5.0]
  timed, _ = links.edge_columns(link, ids, ids, source, target, {"stars": stars},
                                {"all": np.array([[0, 1]])},
                                times=np.array([9, 0, 0, 3, 0, 0, 0, 0.0]), who="Test")
  assert timed["all"].tolist() == [1.0]  # the earliest (0, 1) edge: the one the split keeps
  with pytest.raises(GraphInputError, match=r"Test: edge 'n2' -> 'n3' of edge set 'e' \(table "
                                            r"r.csv\) has edge_label 'stars' = nan; 1 such"):
    links.supervise(link, ids, ids, source, target, one_node_set=True, negatives_for=(),
                    who="Test", columns={"stars": np.where(np.arange(8) == 2, np.nan, stars)},
                    table="r.csv")


def _chi_square_p(counts: collections.Counter, outcomes: list, n: int) -> float:
  """p-value of ``counts`` under the uniform law over ``outcomes`` (Wilson-Hilferty)."""
  expected = n / len(outcomes)
  stat = sum((counts[o] - expected) ** 2 / expected for o in outcomes)
  k = len(outcomes) - 1
  z = ((stat / k) ** (1 / 3) - (1 - 2 / (9 * k))) / math.sqrt(2 / (9 * k))
  return 0.5 * math.erfc(z / math.sqrt(2))


def test_partial_fan_outs_draw_the_same_law_in_memory_and_in_link_sampler():
  """A node with 8 neighbours and fan-out 3: every 3-subset is equally likely in both engines.

  The in-memory kernel (Floyd's algorithm over a batch) and LinkSampler's Beam
  step (one seeded choice per example, op and node) must draw the same law: a
  uniform 3-subset of the 56, so each neighbour is in 3/8 of the samples.
  """
  degree, fan_out, n = 8, 3, 11200
  subsets = [frozenset(s) for s in itertools.combinations(range(degree), fan_out)]
  rows, offsets = choosers.choose_edges(np.random.default_rng(7), np.full(n, degree), fan_out)
  memory = collections.Counter(frozenset(offsets[rows == r].tolist()) for r in range(n))
  op = sampling.SamplingOp(size=fan_out, name="hop1_e", inputs=("seed",), edge_set="e",
                           source="v", target="v")
  beam = collections.Counter(frozenset(int(t) for t in targets)
                             for targets in beam_choices(op, list(range(degree)), n).values())
  for counts in (memory, beam):
    assert set(counts) <= set(subsets) and sum(counts.values()) == n
    assert _chi_square_p(counts, subsets, n) > 1e-3
    per_node = collections.Counter(v for s, c in counts.items() for v in s for _ in range(c))
    assert all(abs(per_node[v] / n - fan_out / degree) < 0.03 for v in range(degree))
  # Within the fan-out, both take every neighbour.
  rows, offsets = choosers.choose_edges(np.random.default_rng(0), np.array([2]), fan_out)
  assert offsets.tolist() == [0, 1]
  assert list(beam_choices(op, [5, 6], 1).values()) == [[5, 6]]


def beam_choices(op, targets, n, features=None, seed_times=None, kinds=None):
  """What the Beam samplers' own engine (one ``SampleOp`` step) picks at one node, per visit.

  Args:
    op: The sampling op.
    targets: The node's out-edges' targets (ints), in their candidate order.
    n: How many subgraphs visit the node (keys ``k000000``, ...).
    features: Edge feature -> a value per out-edge.
    seed_times: Each visit's seed time (default 0).
    kinds: Edge feature -> its tf.Example list kind (default float_list).

  Returns:
    Key -> the chosen targets (in candidate order).
  """
  features = features or {}
  outs = []
  for i, t in enumerate(targets):
    ex = tf.train.Example()
    for name, values in features.items():
      kind = (kinds or {}).get(name, "float_list")
      getattr(ex.features.feature[name], kind).value.append(values[i])
    outs.append((str(t).encode(), ex.SerializeToString()))  # as adjacency() gives them
  times = [0.0] * n if seed_times is None else seed_times
  visits = [beam_sampling.Visit(f"k{i:06d}".encode(), None, float(times[i]), float(times[i]))
            for i in range(n)]
  step = beam_sampling.SampleOp(op, op.name, 7, {f: (kinds or {}).get(f, "float_list")
                                                 for f in features})
  out = collections.defaultdict(list)
  for item in step.process((b"n0", {"frontier": visits, "adjacency": [outs]})):
    if not isinstance(item, beam.pvalue.TaggedOutput):
      out[item[1].key].append(int(item[0]))
  return out


def test_link_sampler_examples_are_write_example_of_their_subgraph():
  """LinkSampler's example of a pair, written by the graph core's encoder, is what
  ``tfgnn.write_example`` writes for the same subgraph: nodes in their given order (the
  pair's ends first), duplicate edges once, edges sorted by their ends, the pair's readout."""
  schema = tfgnn.parse_schema("""
    node_sets { key: "v" value {
      features { key: "x" value { dtype: DT_FLOAT shape { dim { size: 2 } } } }
      features { key: "tag" value { dtype: DT_STRING } } } }
    edge_sets { key: "e" value { source: "v" target: "v"
      features { key: "w" value { dtype: DT_INT64 } } } }""")
  link = link_config_lib.parse_link_config(schema, {"edge_set": "e", "splits": {"train": 1.0},
                                          "hops": [{"e": 2}]}, who="LinkSampler")

  def item(**features):
    example = tf.train.Example()
    for name, (kind, values) in features.items():
      getattr(example.features.feature[name], kind).value.extend(values)
    return example

  x = {b"a": [0.5, 1.0], b"b": [2.0, -1.0], b"c": [0.0, 3.25]}
  nodes = {"v": [(i, item(x=("float_list", x[i]), tag=("bytes_list", [i + b"!"])))
                 for i in (b"b", b"a", b"c")]}
  edges = {"e": [(b"c", b"a", item(w=("int64_list", [7]))),
                 (b"b", b"c", item(w=("int64_list", [3]))),
                 (b"c", b"a", item(w=("int64_list", [9])))]}  # a duplicate: the first counts
  got = subgraphs.build_example(schema, link, (b"b", b"a"), 1.0, nodes, edges)
  one = tf.constant([1])
  expected = tfgnn.GraphTensor.from_pieces(node_sets={
      "v": tfgnn.NodeSet.from_fields(sizes=tf.constant([3]), features={
          "x": tf.constant([x[b"b"], x[b"a"], x[b"c"]]),
          "tag": tf.constant([b"b!", b"a!", b"c!"])}),
      "_readout": tfgnn.NodeSet.from_fields(sizes=one,
                                            features={"label": tf.constant([1.0])})},
      edge_sets={
          "e": tfgnn.EdgeSet.from_fields(
              sizes=tf.constant([2]), adjacency=tfgnn.Adjacency.from_indices(
                  ("v", tf.constant([0, 2])), ("v", tf.constant([2, 1]))),
              features={"w": tf.constant([3, 7], tf.int64)}),
          "_readout/source": tfgnn.EdgeSet.from_fields(
              sizes=one, adjacency=tfgnn.Adjacency.from_indices(
                  ("v", tf.constant([0])), ("_readout", tf.constant([0])))),
          "_readout/target": tfgnn.EdgeSet.from_fields(
              sizes=one, adjacency=tfgnn.Adjacency.from_indices(
                  ("v", tf.constant([1])), ("_readout", tf.constant([0]))))})
  assert got == tfgnn.write_example(expected)


def test_csr_groups_each_rows_entries_stably_and_by_a_key_within():
  from gnn_trainer_component.graph import csr
  rows = np.array([2, 0, 2, 1, 0, 2, 0])
  within = np.array([5.0, 1.0, 3.0, 0.0, 1.0, 2.0, -4.0])  # row 0 ties at 1.0
  indptr = csr.indptr(rows, 4)
  assert indptr.tolist() == [0, 3, 4, 7, 7] and indptr.dtype == np.int64  # row 3 is empty
  for key in (None, within):
    got, order = csr.by_row(rows, 4, within=key)
    assert got.tolist() == indptr.tolist()
    for r in range(4):
      mine = [i for i in range(len(rows)) if rows[i] == r]  # table order
      if key is not None:
        mine.sort(key=lambda i, key=key: key[i])  # stable: ties keep table order
      assert order[indptr[r]:indptr[r + 1]].tolist() == mine
  assert csr.by_row(rows, 4, within=within)[1][:3].tolist() == [6, 1, 4]


@pytest.mark.parametrize("undirected,want", [(False, [2, 3, 1, 1, 2]), (True, [3, 4, 2, 3, 4])])
def test_popularity_is_one_definition_for_negatives_and_the_baseline(undirected, want):
  """A target's degree among the distinct edges without self loops (both ends if undirected):
  the popularity negatives' weights and GraphEvaluator's baseline count the same."""
  from gnn_trainer_component.evaluator import baselines
  edges = [(0, 1), (1, 0), (0, 1), (2, 2), (3, 1), (1, 2), (4, 0), (2, 4), (3, 4), (0, 3),
           (4, 1)]  # (0, 1) twice, (2, 2) a self loop, (1, 0) its reverse
  source, target = (np.array(c) for c in zip(*edges, strict=True))
  ids = pd.Index([f"n{i}".encode() for i in range(5)], dtype=object)
  link = link_config_lib.LinkConfig(
      edge_set="e", splits={"train": 1.0}, negatives_per_positive={"train": 1.0},
      source_hops=[{"e": 1}], target_hops=[{"e": 1}], undirected=undirected,
      negative_sampling="popularity")
  pairs = links.supervise(link, ids, ids, source, target, one_node_set=True, negatives_for=(),
                          who="Test")
  train = pairs.positives["train"]
  assert negatives_lib.popularity(train, 5, undirected).tolist() == want
  weight = np.asarray(want, np.float64) + 1.0
  np.testing.assert_allclose(np.diff(np.r_[0, pairs.target_cdf]), weight / weight.sum())
  timed = baselines.TimedPopularity(train, np.zeros(len(train)), 5, undirected)
  queries = np.array([[0, v] for v in range(5)])
  assert timed.pairs(queries, np.ones(5)).tolist() == want  # every edge before time 1
  assert timed.pairs(queries, np.zeros(5)).tolist() == [0] * 5  # none before time 0
