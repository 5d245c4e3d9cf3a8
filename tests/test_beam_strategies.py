"""Sampling strategies on Beam: the samplers' own engine against the in-memory kernel.

* Per strategy, at one node: the Beam step (``beam_sampling.SampleOp``) draws the kernel's law
  at partial fan-outs (a two-sample chi-square test over the chosen subsets) and the same
  edges where the strategy is deterministic.
* GraphSampler runs every strategy and seeds with a time (real executor, DirectRunner): at
  fan-outs that cover every neighbour its subgraphs are the kernel's, edge for edge, and no
  edge of a time-aware hop is at or after its seed's time.
* LinkSampler with ``time_split`` and time-aware hops: every example of a pair holds only
  edges before the pair's time.
"""

import collections
import json

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tfx.types import artifact_utils

from gnn_trainer_component.graph import readout
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.in_memory import adapters
from gnn_trainer_component.in_memory import kernel
from gnn_trainer_component.sampler.graph import executor as graph_executor
from gnn_trainer_component.sampler.link import executor as link_executor
from tests.helpers import run_beam_sampler
from tests.test_graph_core import beam_choices

SCHEMA = """
node_sets { key: "v" value {
  features { key: "ident" value { dtype: DT_INT64 } }
  metadata { filename: "v.csv" } } }
edge_sets { key: "e" value { source: "v" target: "v"
  features { key: "w" value { dtype: DT_FLOAT } }
  features { key: "t" value { dtype: DT_INT64 } }
  metadata { filename: "e.csv" } } }
edge_sets { key: "r" value { source: "v" target: "v"
  features { key: "w" value { dtype: DT_FLOAT } }
  metadata { filename: "r.csv" } } }
"""
NUM_NODES = 20


def _edges(seed=0, degree=6):
  """(u, v, weight, time) with ties in both, sorted by (u, v): table order is target order."""
  rng = np.random.default_rng(seed)
  out = []
  for u in range(NUM_NODES):
    for v in sorted(rng.choice(NUM_NODES, size=degree, replace=False).tolist()):
      out.append((u, v, float(rng.integers(0, 4)), int(rng.integers(0, 20))))
  return out


def _write(d, edges, seeds):
  """Ids ``n10``... sort as their numbers do; ``seeds``: split -> [(node, time)]."""
  d.mkdir(parents=True, exist_ok=True)
  (d / "graph_schema.pbtxt").write_text(SCHEMA)
  (d / "v.csv").write_text("id,ident\n" + "".join(f"n{10 + n},{n}\n" for n in range(NUM_NODES)))
  (d / "e.csv").write_text("source,target,w,t\n" + "".join(
      f"n{10 + u},n{10 + v},{w},{t}\n" for u, v, w, t in edges))
  reverse = sorted((v, u, w) for u, v, w, _ in edges)
  (d / "r.csv").write_text("source,target,w\n" + "".join(
      f"n{10 + u},n{10 + v},{w}\n" for u, v, w in reverse))
  for split, rows in seeds.items():
    (d / f"{split}.csv").write_text("id,time\n" + "".join(f"n{10 + n},{t}\n" for n, t in rows))
  return {split: f"{split}.csv" for split in seeds}


# ----------------------------------------------------------------------------
# One node, many draws: the Beam step's law is the kernel's.

LAW_CASES = [
    {"fanout": 3, "strategy": "weighted", "weight": "w"},
    {"fanout": 2, "strategy": "uniform_before", "time": "t"},
    {"fanout": 3, "strategy": "top_k", "weight": "w"},
    {"fanout": 3, "strategy": "latest", "time": "t"},
    {"fanout": 2, "strategy": "latest", "time": "t", "time_inclusive": True},
]


@pytest.fixture(scope="module")
def one_node(tmp_path_factory):
  """A node (0) with 10 out-edges: weights 0-5 (two zero), times with ties."""
  d = tmp_path_factory.mktemp("one_node")
  weights = [0.0, 1.0, 3.0, 1.0, 0.0, 2.0, 5.0, 1.0, 2.0, 3.0]
  times = [3, 9, 5, 5, 1, 12, 7, 5, 2, 14]
  edges = [(0, v + 1, w, t) for v, (w, t) in enumerate(zip(weights, times))]
  # Written in reverse: ties of top_k and latest go by target id in both engines, not by
  # table order (latest 3 before 8: times 7, 5, 5 of the three at 5).
  _write(d, edges[::-1], {"train": [(0, 8)]})
  return d, edges


@pytest.mark.parametrize("hop", LAW_CASES, ids=lambda h: f"{h['strategy']}-{h['fanout']}")
def test_the_beam_step_draws_the_kernels_law_at_one_node(one_node, hop):
  d, edges = one_node
  n, bound = 6000, 8
  splits = adapters.load(str(d), seeds={"train": "train.csv"}, sampling_spec=None,
                         sampling_config={"seed_node_set": "v", "hops": [{"e": hop}]},
                         splits=["train"])
  graph, plan = splits.sampler.graph, splits.sampler.plan
  sub = kernel.sample(graph, plan, np.zeros(n, np.int64), np.random.default_rng(3),
                      times=np.full(n, bound) if plan.timed else None)
  sizes, _, _, positions = sub.edges["e"]
  ident = graph.node_sets["v"].features["ident"]
  e = graph.edge_sets["e"]
  starts = np.r_[0, np.cumsum(sizes)]
  memory = collections.Counter(
      frozenset(int(ident[e.target[p]]) for p in positions[a:b])
      for a, b in zip(starts[:-1], starts[1:]))
  targets = [v for _, v, _, _ in edges]
  beam = collections.Counter(frozenset(int(t) for t in chosen) for chosen in beam_choices(
      plan.ops[0], targets, n, features={"w": [w for _, _, w, _ in edges],
                                         "t": [t for *_, t in edges]},
      seed_times=[bound] * n, kinds={"t": "int64_list"}).values())
  assert sum(memory.values()) == sum(beam.values()) == n
  outcomes = sorted(set(memory) | set(beam), key=sorted)
  if len(outcomes) == 1:  # top_k, latest: one outcome, the same in both engines
    assert memory == beam
    return
  table = np.array([[memory[o] for o in outcomes], [beam[o] for o in outcomes]])
  assert scipy.stats.chi2_contingency(table).pvalue > 1e-3, (memory, beam)
  if hop["strategy"] == "weighted":
    assert not any({1, 5} & set(o) for o in outcomes), "a weight-0 edge was chosen"
  else:  # only edges before the bound
    assert all(all(edges[v - 1][3] < bound for v in o) for o in outcomes)


# ----------------------------------------------------------------------------
# GraphSampler: every strategy on Beam equals the kernel at full fan-outs.

FULL_HOPS = [{"e": {"fanout": 50, "strategy": "latest", "time": "t"}},
             {"e": {"fanout": 50, "strategy": "uniform_before", "time": "t",
                    "time_respecting": True},
              "r": {"fanout": 50, "strategy": "weighted", "weight": "w"}}]


@pytest.fixture(scope="module")
def timed_graph(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("beam_strategies")
  rng = np.random.default_rng(1)
  seeds = {"train": [(n, int(rng.integers(0, 22))) for n in range(0, NUM_NODES, 2)],
           "eval": [(n, int(rng.integers(0, 22))) for n in range(1, NUM_NODES, 5)]}
  tables = _write(tmp / "graph", _edges(), seeds)
  examples, schema_out = run_beam_sampler(graph_executor.Executor, tmp, tmp / "graph", {
      "seeds": json.dumps(tables), "num_shards": 1,
      "sampling_config": json.dumps({"seed_node_set": "v", "hops": FULL_HOPS})})
  return tmp, tables, examples, schema_out


def _subgraph(graph: tfgnn.GraphTensor):
  """(seed ident, nodes, {edge set: {(source ident, target ident)}}) of one subgraph."""
  ident = graph.node_sets["v"]["ident"].numpy().tolist()
  edges = {}
  for name in ("e", "r"):
    adj = graph.edge_sets[name].adjacency
    pairs = [(ident[s], ident[t]) for s, t in zip(adj.source.numpy(), adj.target.numpy())]
    assert len(pairs) == len(set(pairs)), "edges are unique"
    edges[name] = set(pairs)
  assert len(ident) == len(set(ident)), "nodes are unique"
  return ident[0], set(ident), edges


def test_graph_sampler_runs_every_strategy_and_equals_the_kernel_at_full_fan_outs(timed_graph):
  tmp, tables, examples, schema_out = timed_graph
  spec = tfgnn.create_graph_spec_from_schema_pb(
      tfgnn.read_schema(str(schema_out.uri) + "/graph_schema.pbtxt"))
  splits = adapters.load(str(tmp / "graph"), seeds=tables, sampling_spec=None,
                         sampling_config={"seed_node_set": "v", "hops": FULL_HOPS},
                         splits=["train", "eval"])
  graph, plan = splits.sampler.graph, splits.sampler.plan
  e = graph.edge_sets["e"]
  time_of = {(int(u), int(v)): int(t) for u, v, t in zip(e.source, e.target, e.features["t"])}
  for split in ("train", "eval"):
    uri = artifact_utils.get_split_uri([examples], split)
    records = list(tf.data.TFRecordDataset(tf.io.gfile.glob(uri + "/*"), "GZIP"))
    beam = {}
    for record in records:
      seed, nodes, edges = _subgraph(tfgnn.parse_single_example(spec, record))
      beam[seed] = (nodes, edges)
    seeds, times = splits.seeds[split], splits.times[split]
    sub = kernel.sample(graph, plan, seeds, np.random.default_rng(0), times=times)
    assert kernel.leaks(graph, plan, sub, times) == []
    node_sizes, node_index = sub.nodes["v"]
    node_starts = np.r_[0, np.cumsum(node_sizes)]
    assert sorted(beam) == sorted(int(s) for s in seeds)
    with_edges = 0
    for i, (seed, seed_time) in enumerate(zip(seeds.tolist(), times.tolist())):
      nodes, edges = beam.pop(seed)
      assert nodes == set(node_index[node_starts[i]:node_starts[i + 1]].tolist())
      for name in ("e", "r"):
        sizes, src, tgt, _ = sub.edges[name]
        a, b = int(np.sum(sizes[:i])), int(np.sum(sizes[:i + 1]))
        local = node_index[node_starts[i]:node_starts[i + 1]]
        assert edges[name] == {(int(local[s]), int(local[t]))
                               for s, t in zip(src[a:b], tgt[a:b])}, (split, seed, name)
      assert all(time_of[pair] < seed_time for pair in edges["e"]), (seed, seed_time)
      with_edges += bool(edges["e"])
    assert with_edges > len(seeds) // 2, "most seeds have some earlier edge"


def test_graph_sampler_refuses_time_aware_hops_without_seed_times(tmp_path):
  tables = _write(tmp_path / "graph", _edges(), {"train": [(0, 5)]})
  (tmp_path / "graph" / "train.csv").write_text("id\nn10\n")
  with pytest.raises(GraphInputError, match=r"train.csv.*time"):
    run_beam_sampler(graph_executor.Executor, tmp_path, tmp_path / "graph", {
        "seeds": json.dumps(tables), "num_shards": 1,
        "sampling_config": json.dumps({"seed_node_set": "v", "hops": FULL_HOPS[:1]})})
  assert not list((tmp_path / "out" / "examples").rglob("*.gz"))


# ----------------------------------------------------------------------------
# LinkSampler: a split by time, time-aware hops, weighted ones.


def test_link_sampler_splits_by_time_and_samples_only_what_came_before(tmp_path):
  edges = _edges(seed=2, degree=5)
  _write(tmp_path / "graph", edges, {})
  config = {"edge_set": "e", "time_split": {"time": "t", "from": {"train": None, "eval": 12,
                                                                   "test": 16}},
            "reverse_edge_set": None,
            "hops": [{"e": {"fanout": 3, "strategy": "uniform_before", "time": "t"}},
                     {"e": {"fanout": 2, "strategy": "latest", "time": "t"}}]}
  examples, schema_out = run_beam_sampler(link_executor.Executor, tmp_path, tmp_path / "graph", {
      "link_config": json.dumps(config), "num_shards": 1})
  spec = tfgnn.create_graph_spec_from_schema_pb(
      tfgnn.read_schema(str(schema_out.uri) + "/graph_schema.pbtxt"))
  first_time = {}
  for u, v, _, t in edges:
    first_time[(u, v)] = min(t, first_time.get((u, v), t))
  starts = {"train": 0, "eval": 12, "test": 16}
  checked = 0
  for split, (low, high) in {"train": (0, 12), "eval": (12, 16), "test": (16, 99)}.items():
    uri = artifact_utils.get_split_uri([examples], split)
    for record in tf.data.TFRecordDataset(tf.io.gfile.glob(uri + "/*"), "GZIP"):
      graph = tfgnn.parse_single_example(spec, record)
      ident = graph.node_sets["v"]["ident"].numpy().tolist()
      label = float(graph.node_sets[readout.READOUT][readout.LABEL][0])
      _, _, sampled = _subgraph(graph)
      assert not sampled["r"]
      if label != 1.0:
        continue
      pair = (ident[0], ident[1])
      t = first_time[pair]
      assert low <= t < high and starts[split] <= t
      assert all(first_time[p] < t for p in sampled["e"]), (split, pair, t)
      checked += 1
  assert checked > 20


def test_link_sampler_draws_negatives_among_the_nodes_there_at_their_time(tmp_path):
  """``node_time``: papers n10..n19 appear at 12; a training pair (time < 12) has negatives
  among n0..n9 only, as GnnTrainer in memory draws them (the same core rule)."""
  # No edge before its ends appear: those touching n20.. (born 12) are at 12 or later.
  _write(tmp_path / "graph", [(u, v, w, max(t, 12) if max(u, v) >= 10 else t)
                              for u, v, w, t in _edges(seed=4, degree=5)], {})
  schema = (tmp_path / "graph" / "graph_schema.pbtxt").read_text()
  (tmp_path / "graph" / "graph_schema.pbtxt").write_text(schema.replace(
      'features { key: "ident" value { dtype: DT_INT64 } }',
      'features { key: "ident" value { dtype: DT_INT64 } }\n'
      '  features { key: "born" value { dtype: DT_INT64 } }'))
  (tmp_path / "graph" / "v.csv").write_text("id,ident,born\n" + "".join(
      f"n{10 + n},{n},{0 if n < 10 else 12}\n" for n in range(NUM_NODES)))
  config = {"edge_set": "e", "reverse_edge_set": None,
            "time_split": {"time": "t", "node_time": "born",
                           "from": {"train": None, "eval": 12, "test": 16}},
            "hops": [{"e": {"fanout": 3, "strategy": "uniform_before", "time": "t"}}]}
  examples, schema_out = run_beam_sampler(link_executor.Executor, tmp_path, tmp_path / "graph", {
      "link_config": json.dumps(config), "num_shards": 1})
  spec = tfgnn.create_graph_spec_from_schema_pb(
      tfgnn.read_schema(str(schema_out.uri) + "/graph_schema.pbtxt"))
  uri = artifact_utils.get_split_uri([examples], "train")
  negatives = 0
  for record in tf.data.TFRecordDataset(tf.io.gfile.glob(uri + "/*"), "GZIP"):
    graph = tfgnn.parse_single_example(spec, record)
    if float(graph.node_sets[readout.READOUT][readout.LABEL][0]) == 0.0:
      ends = graph.node_sets["v"]["ident"].numpy()[:2].tolist()
      assert max(ends) < 10, ends
      negatives += 1
  assert negatives > 10


def test_link_sampler_runs_weighted_and_top_k_hops(tmp_path):
  edges = _edges(seed=3, degree=5)
  _write(tmp_path / "graph", edges, {})
  config = {"edge_set": "e", "reverse_edge_set": "r", "splits": {"train": 0.8, "test": 0.2},
            "hops": [{"e": {"fanout": 2, "strategy": "top_k", "weight": "w"},
                      "r": {"fanout": 2, "strategy": "weighted", "weight": "w"}}]}
  examples, schema_out = run_beam_sampler(link_executor.Executor, tmp_path, tmp_path / "graph", {
      "link_config": json.dumps(config), "num_shards": 1})
  spec = tfgnn.create_graph_spec_from_schema_pb(
      tfgnn.read_schema(str(schema_out.uri) + "/graph_schema.pbtxt"))
  weight = {(u, v): w for u, v, w, _ in edges}
  count = 0
  for split in ("train", "test"):
    uri = artifact_utils.get_split_uri([examples], split)
    for record in tf.data.TFRecordDataset(tf.io.gfile.glob(uri + "/*"), "GZIP"):
      _, _, sampled = _subgraph(tfgnn.parse_single_example(spec, record))
      assert all(weight[(v, u)] > 0 for u, v in sampled["r"]), "a weight-0 edge was sampled"
      for u in {u for u, _ in sampled["e"]}:
        out = sorted(w for (a, _), w in weight.items() if a == u)
        got = sorted(weight[(a, b)] for a, b in sampled["e"] if a == u)
        assert len(got) <= 2 and got[-1] >= out[-3], (u, got, out)  # among the heaviest
      count += 1
  assert count > 50


def test_link_sampler_refuses_time_aware_hops_on_pairs_split_at_random(tmp_path):
  _write(tmp_path / "graph", _edges(), {})
  config = {"edge_set": "e", "splits": {"train": 0.8, "test": 0.2},
            "hops": [{"e": {"fanout": 3, "strategy": "latest", "time": "t"}}]}
  with pytest.raises(GraphInputError, match="link pairs split at random have none"):
    run_beam_sampler(link_executor.Executor, tmp_path, tmp_path / "graph", {
        "link_config": json.dumps(config), "num_shards": 1})


def test_every_engine_names_what_it_runs():
  assert set(sampling.ALL_STRATEGIES) == set(kernel.STRATEGIES)


def test_the_beam_leak_check_names_the_seed_the_edge_and_the_times():
  from gnn_trainer_component.beam import sampling as beam_sampling
  schema = tfgnn.parse_schema(SCHEMA)
  plan = sampling.plan_from_hops(schema, "v", FULL_HOPS, who="Test")
  late = tf.train.Example()
  late.features.feature["t"].int64_list.value.append(9)
  late.features.feature["w"].float_list.value.append(1.0)
  kinds = beam_sampling.time_kinds(schema, plan)
  beam_sampling.check_times(plan, {"e": [(b"n1", b"n2", late)]}, 10.0, kinds, "seed 'n1'", "Test")
  with pytest.raises(GraphInputError, match=r"Test: time leak: the subgraph of seed 'n1' \(time 9\) "
                                            r"holds edge 'n1' -> 'n2' of edge set 'e' at time 9, "
                                            r"not before the seed's"):
    beam_sampling.check_times(plan, {"e": [(b"n1", b"n2", late)]}, 9.0, kinds, "seed 'n1'",
                              "Test")
  # "r" is sampled by a timeless op: its edges may be later (no rule).
  beam_sampling.check_times(plan, {"r": [(b"n1", b"n2", late)]}, 1.0, kinds, "seed 'n1'", "Test")
  # node_time: an end of a checked edge that appears after the seed's time is a leak too.
  timed_schema = tfgnn.parse_schema(SCHEMA.replace(
      'features { key: "ident" value { dtype: DT_INT64 } }',
      'features { key: "ident" value { dtype: DT_INT64 } }\n'
      '  features { key: "born" value { dtype: DT_INT64 } }'))
  early = tf.train.Example()
  early.features.feature["t"].int64_list.value.append(3)
  nodes = {"v": {}}
  for name, born in ((b"n1", 0), (b"n2", 7)):
    nodes["v"][name] = tf.train.Example()
    nodes["v"][name].features.feature["born"].int64_list.value.append(born)
  args = dict(schema=timed_schema, by_set=nodes, node_time="born")
  beam_sampling.check_times(plan, {"e": [(b"n1", b"n2", early)]}, 7.0, kinds, "seed 'n1'",
                            "Test", **args)
  with pytest.raises(GraphInputError, match=r"Test: time leak: the subgraph of seed 'n1' "
                                            r"\(time 5\) holds node 'n2' of node set 'v', which "
                                            r"appears at time 7 \('born'\), after the seed's"):
    beam_sampling.check_times(plan, {"e": [(b"n1", b"n2", early)]}, 5.0, kinds, "seed 'n1'",
                              "Test", **args)
