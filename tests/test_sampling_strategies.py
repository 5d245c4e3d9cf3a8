"""Sampling strategies in the in-memory kernel: weighted, top-k and time-aware, each against a
brute-force reference, and the leak check that can fail.

Every table goes through the graph core's reader (real CSV tables in a GraphSchema folder);
the subgraphs are the kernel's, compared edge by edge with what the strategy's definition
picks, or (random strategies) by their law over many draws.
"""

import dataclasses
import os

import numpy as np
import pytest
import tensorflow_gnn as tfgnn

from gnn_trainer_component import training_data
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.in_memory import adapters
from gnn_trainer_component.in_memory import choosers
from gnn_trainer_component.in_memory import kernel

SCHEMA = """
node_sets { key: "v" value { metadata { filename: "v.csv" } } }
edge_sets { key: "e" value {
  source: "v" target: "v"
  features { key: "w" value { dtype: DT_FLOAT } }
  features { key: "t" value { dtype: DT_INT64 } }
  metadata { filename: "e.csv" } } }
"""


def _write(d, edges, seeds):
  """``edges``: (u, v, weight, time); ``seeds``: split -> [(node, time)]."""
  nodes = sorted({u for u, *_ in edges} | {v for _, v, *_ in edges}
                 | {n for rows in seeds.values() for n, _ in rows})
  (d / "graph_schema.pbtxt").write_text(SCHEMA)
  (d / "v.csv").write_text("id\n" + "".join(f"n{n}\n" for n in nodes))
  (d / "e.csv").write_text("source,target,w,t\n" + "".join(
      f"n{u},n{v},{w},{t}\n" for u, v, w, t in edges))
  for split, rows in seeds.items():
    (d / f"{split}.csv").write_text("id,time\n" + "".join(f"n{n},{t}\n" for n, t in rows))


def _load(d, hops, splits=("train",)):
  return adapters.load(str(d), seeds={s: f"{s}.csv" for s in splits}, sampling_spec=None,
                       sampling_config={"seed_node_set": "v", "hops": hops}, splits=list(splits))


def _random_graph(rng, num_nodes=40, degree=12):
  """Distinct edges (no parallel ones: subgraphs keep one of each), weights and times with ties."""
  edges = []
  for u in range(num_nodes):
    for v in rng.choice(num_nodes, size=degree, replace=False):
      edges.append((u, int(v), float(rng.integers(0, 4)), int(rng.integers(0, 20))))
  return edges


def _picked(graph, sub, seed_rows):
  """Subgraph -> the sampled hop-1 edges as (global source, target) pairs."""
  e = graph.edge_sets["e"]
  sizes, _, _, positions = sub.edges["e"]
  groups = np.repeat(np.arange(len(sizes)), sizes)
  out = {i: set() for i in range(len(seed_rows))}
  for g, p in zip(groups, positions):
    out[int(g)].add((int(e.source[p]), int(e.target[p])))
  return out


def _reference(graph, u, key, k, keep=lambda p: True):
  """The k out-edges of node u ranked first by ``key(position)`` (ties: ``key`` decides, else
  table order)."""
  e = graph.edge_sets["e"]
  positions = [p for p in range(e.indptr[u], e.indptr[u + 1]) if keep(p)]
  positions.sort(key=lambda p: (key(p), p))
  return {(int(e.source[p]), int(e.target[p])) for p in positions[:k]}


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
  d = tmp_path_factory.mktemp("timed")
  rng = np.random.default_rng(0)
  edges = _random_graph(rng)
  seeds = {"train": [(n, int(rng.integers(0, 22))) for n in range(40)]}
  _write(d, edges, seeds)
  return d


def _one_hop(d, fan_out):
  splits = _load(d, [{"e": fan_out}])
  graph = splits.sampler.graph
  return splits, graph, graph.edge_sets["e"]


def test_top_k_and_latest_pick_exactly_what_their_definition_picks(timed):
  for k in (1, 3, 20):
    splits, graph, e = _one_hop(timed, {"fanout": k, "strategy": "top_k", "weight": "w"})
    nodes = splits.seeds["train"]
    sub = kernel.sample(graph, splits.sampler.plan, nodes, np.random.default_rng(1))
    got = _picked(graph, sub, nodes)
    # Ties to the smallest target id, as the Beam engine breaks them (ids: bytes order).
    ids = graph.node_sets["v"].ids
    for i, u in enumerate(nodes):
      assert got[i] == _reference(graph, u, lambda p: (-e.features["w"][p], ids[e.target[p]]),
                                  k), (k, u)
    for inclusive in (False, True):
      splits, graph, e = _one_hop(timed, {"fanout": k, "strategy": "latest", "time": "t",
                                          "time_inclusive": inclusive})
      times = splits.times["train"]
      sub = kernel.sample(graph, splits.sampler.plan, nodes, np.random.default_rng(1),
                          times=times)
      got = _picked(graph, sub, nodes)
      for i, u in enumerate(nodes):
        before = (lambda p, t=times[i]: e.features["t"][p] <= t if inclusive
                  else e.features["t"][p] < t)
        # The most recent first; among edges of one time, the largest target id first (the
        # kernel takes the last of a run sorted by time and id, as the Beam engine does).
        rank = {v: r for r, v in enumerate(sorted(ids))}
        want = _reference(graph, u, lambda p: (-e.features["t"][p], -rank[ids[e.target[p]]]),
                          k, keep=before)
        assert got[i] == want, (k, u, inclusive)
        assert kernel.leaks(graph, splits.sampler.plan, sub, times) == []


def test_uniform_before_takes_every_earlier_edge_at_full_fan_out_and_is_uniform_below(timed):
  splits, graph, e = _one_hop(timed, {"fanout": 50, "strategy": "uniform_before", "time": "t"})
  nodes, times = splits.seeds["train"], splits.times["train"]
  got = _picked(graph, kernel.sample(graph, splits.sampler.plan, nodes,
                                     np.random.default_rng(2), times=times), nodes)
  for i, u in enumerate(nodes):
    assert got[i] == _reference(graph, u, lambda p: 0, 50,
                                keep=lambda p, t=times[i]: e.features["t"][p] < t)
  # One edge of node u among its c earlier ones: each with probability 1/c.
  splits, graph, e = _one_hop(timed, {"fanout": 1, "strategy": "uniform_before", "time": "t"})
  u, t = int(nodes[0]), 15.0
  eligible = _reference(graph, u, lambda p: 0, 50, keep=lambda p: e.features["t"][p] < t)
  draws = 6000
  sub = kernel.sample(graph, splits.sampler.plan, np.full(draws, u), np.random.default_rng(3),
                      times=np.full(draws, t))
  counts = {}
  for pairs in _picked(graph, sub, range(draws)).values():
    assert len(pairs) == 1 and pairs <= eligible
    counts[next(iter(pairs))] = counts.get(next(iter(pairs)), 0) + 1
  expected = draws / len(eligible)
  chi2 = sum((counts.get(p, 0) - expected) ** 2 / expected for p in eligible)
  assert len(eligible) >= 3 and chi2 < 3 * len(eligible) + 30, (chi2, counts)


def test_weighted_draws_in_proportion_to_the_weight_never_a_zero_weight(tmp_path):
  edges = [(0, 1, 0.0, 0), (0, 2, 1.0, 0), (0, 3, 2.0, 0), (0, 4, 5.0, 0)]
  _write(tmp_path, edges, {"train": [(0, 0)]})
  splits, graph, _ = _one_hop(tmp_path, {"fanout": 1, "strategy": "weighted", "weight": "w"})
  draws = 16000
  sub = kernel.sample(graph, splits.sampler.plan, np.zeros(draws, np.int64),
                      np.random.default_rng(4))
  counts = np.zeros(5)
  for pairs in _picked(graph, sub, range(draws)).values():
    (_, v), = pairs
    counts[v] += 1
  assert counts[1] == 0
  expected = draws * np.array([1.0, 2.0, 5.0]) / 8
  assert np.all(np.abs(counts[2:] - expected) < 4 * np.sqrt(expected)), counts
  # Two of them: without replacement, the zero-weight edge never, each pair with the
  # probability of successive draws in proportion to the weight (first a, then b among the
  # rest, or b then a); at full fan-out every edge of positive weight.
  splits, graph, _ = _one_hop(tmp_path, {"fanout": 2, "strategy": "weighted", "weight": "w"})
  sub = kernel.sample(graph, splits.sampler.plan, np.zeros(draws, np.int64),
                      np.random.default_rng(5))
  pairs = {}
  for picked in _picked(graph, sub, range(draws)).values():
    key = tuple(sorted(v for _, v in picked))
    pairs[key] = pairs.get(key, 0) + 1
  weight = {2: 1.0, 3: 2.0, 4: 5.0}
  for (a, b), count in pairs.items():
    p = (weight[a] / 8 * weight[b] / (8 - weight[a]) + weight[b] / 8 * weight[a] / (8 - weight[b]))
    assert abs(count - draws * p) < 4 * np.sqrt(draws * p), (a, b, count, draws * p)
  assert set(pairs) == {(2, 3), (2, 4), (3, 4)}
  splits, graph, _ = _one_hop(tmp_path, {"fanout": 4, "strategy": "weighted", "weight": "w"})
  sub = kernel.sample(graph, splits.sampler.plan, np.zeros(50, np.int64),
                      np.random.default_rng(5))
  assert all(p == {(0, 2), (0, 3), (0, 4)} for p in _picked(graph, sub, range(50)).values())


def test_weighted_draws_from_the_guide_table_at_high_degree(tmp_path):
  # 13 edges, zero weights first, inside and last: more than _DRAW_FROM times the fan-out,
  # so the edges come from WeightIndex.draw and the repeat rounds, not the exact keys.
  weights = [0.0, 0.0, 1.0, 2.0, 0.0, 3.0, 0.5, 4.0, 0.0, 1.5, 2.5, 6.0, 0.0]
  assert len(weights) > choosers._DRAW_FROM * 2
  _write(tmp_path, [(0, v, w, 0) for v, w in enumerate(weights, 1)], {"train": [(0, 0)]})
  weight = {v: w for v, w in enumerate(weights, 1) if w > 0}
  total = sum(weight.values())
  draws = 12000
  for fanout, seed in ((1, 11), (2, 12)):
    splits, graph, _ = _one_hop(tmp_path, {"fanout": fanout, "strategy": "weighted",
                                           "weight": "w"})
    sub = kernel.sample(graph, splits.sampler.plan, np.zeros(draws, np.int64),
                        np.random.default_rng(seed))
    counts = {}
    for picked in _picked(graph, sub, range(draws)).values():
      assert len(picked) == fanout
      key = tuple(sorted(v for _, v in picked))
      counts[key] = counts.get(key, 0) + 1
    if fanout == 1:
      want = {(v,): w / total for v, w in weight.items()}
    else:  # successive draws: a then b among the rest, or b then a
      want = {(a, b): weight[a] / total * weight[b] / (total - weight[a])
              + weight[b] / total * weight[a] / (total - weight[b])
              for a in weight for b in weight if a < b}
    assert set(counts) <= set(want)  # never a zero weight, never a repeat
    chi2 = sum((counts.get(key, 0) - draws * p) ** 2 / (draws * p) for key, p in want.items())
    assert chi2 < 3 * len(want) + 30, (fanout, chi2)


def test_weighted_takes_distinct_edges_when_the_weight_sits_on_one(tmp_path):
  # Drawing with replacement keeps hitting the heavy edge: the exact keys finish the rows.
  edges = [(0, 1, 1e9, 0)] + [(0, v, 1e-6, 0) for v in range(2, 16)]
  _write(tmp_path, edges, {"train": [(0, 0)]})
  splits, graph, _ = _one_hop(tmp_path, {"fanout": 3, "strategy": "weighted", "weight": "w"})
  sub = kernel.sample(graph, splits.sampler.plan, np.zeros(300, np.int64),
                      np.random.default_rng(8))
  seen = set()
  for picked in _picked(graph, sub, range(300)).values():
    assert len(picked) == 3 and (0, 1) in picked
    seen |= picked
  assert len(seen) == 15  # every light edge is drawn now and then, uniformly among them


def test_time_respecting_hops_go_back_in_time_from_the_edge_that_reached_the_node(tmp_path):
  # 0 -> 1 at time 5 and 0 -> 2 at time 8; from 1 and 2, edges at times 1..9.
  edges = [(0, 1, 1, 5), (0, 2, 1, 8)] + [(n, 10 + 10 * n + t, 1, t)
                                           for n in (1, 2) for t in range(1, 10)]
  _write(tmp_path, edges, {"train": [(0, 9)]})
  for respecting, want in ((False, {1: set(range(1, 9)), 2: set(range(1, 9))}),
                           (True, {1: set(range(1, 5)), 2: set(range(1, 8))})):
    hop = {"fanout": 20, "strategy": "uniform_before", "time": "t",
           "time_respecting": respecting}
    splits = _load(tmp_path, [{"e": hop}, {"e": hop}])
    graph = splits.sampler.graph
    e = graph.edge_sets["e"]
    sub = kernel.sample(graph, splits.sampler.plan, splits.seeds["train"],
                        np.random.default_rng(6), times=splits.times["train"])
    times = {1: set(), 2: set()}
    for p in sub.edges["e"][3]:
      node = int(graph.node_sets["v"].ids[e.source[p]][1:])
      if node in times:
        times[node].add(int(e.features["t"][p]))
    assert times == want, respecting


def test_the_leak_check_finds_future_edges_of_a_timeless_sampler(timed):
  splits, graph, e = _one_hop(timed, {"fanout": 50, "strategy": "uniform_before", "time": "t"})
  nodes, times = splits.seeds["train"], splits.times["train"]
  uniform = sampling.SamplingPlan(
      seed_node_set="v", seed_op="seed", ops=(sampling.SamplingOp(
          name="hop1_e", inputs=("seed",), edge_set="e", source="v", target="v", size=50),))
  leaky = kernel.sample(graph, uniform, nodes, np.random.default_rng(7))
  assert kernel.leaks(graph, uniform, leaky, times) == []  # a timeless plan has no rule
  found = kernel.leaks(graph, splits.sampler.plan, leaky, times)
  future = [(i, p) for i, u in enumerate(nodes) for p in range(e.indptr[u], e.indptr[u + 1])
            if e.features["t"][p] >= times[i]]
  assert sorted((g, p) for g, _, p, _, _ in found) == sorted(future) and future
  g, name, p, edge_time, seed_time = found[0]
  assert name == "e" and edge_time == e.features["t"][p] >= seed_time == times[g]
  clean = kernel.sample(graph, splits.sampler.plan, nodes, np.random.default_rng(7),
                        times=times)
  assert kernel.leaks(graph, splits.sampler.plan, clean, times) == []


def test_the_run_time_check_stops_a_leaking_sampler_naming_seed_edge_and_times(timed):
  splits, graph, _ = _one_hop(timed, {"fanout": 50, "strategy": "uniform_before", "time": "t"})
  nodes, times = splits.seeds["train"], splits.times["train"]
  plan = splits.sampler.plan
  kernel.check_leaks(graph, plan, kernel.sample(graph, plan, nodes, np.random.default_rng(9),
                                                times=times), nodes, times)
  # A sampler that forgot the time (every edge of the seed, whatever its time).
  forgetful = dataclasses.replace(plan, ops=tuple(dataclasses.replace(
      op, strategy="uniform", time="") for op in plan.ops))
  leaky = kernel.sample(graph, forgetful, nodes, np.random.default_rng(9))
  with pytest.raises(GraphInputError, match=r"GnnTrainer: time leak: the subgraph of seed 'n\d+' "
                                            r"\(time \d+\) holds edge 'n\d+' -> 'n\d+' of edge "
                                            r"set 'e' \(table .*e.csv\) at time \d+, not before "
                                            r"the seed's; \d+ such edge\(s\) in this batch"):
    kernel.check_leaks(graph, plan, leaky, nodes, times)


def test_seed_times_are_checked_and_time_aware_sampling_refuses_what_would_leak(tmp_path):
  edges = [(0, 1, 1.0, 3), (1, 0, 1.0, 4)]
  latest = [{"e": {"fanout": 2, "strategy": "latest", "time": "t"}}]
  _write(tmp_path, edges, {"train": [(0, 5), (1, 6)]})
  (tmp_path / "train.csv").write_text("id,time\nn0,5\nn1,6.5\n")
  with pytest.raises(GraphInputError, match=r"train.csv, line 3 \(id 'n1'\): feature 'time' is "
                                            r"not an integer \(dtype int64\) \('6.5'\).*split "
                                            r"'train': time-aware sampling bounds each seed's "
                                            r"subgraph by the seed's time"):
    _load(tmp_path, latest)
  (tmp_path / "train.csv").write_text("id\nn0\nn1\n")
  with pytest.raises(GraphInputError, match=r"lacks column\(s\) \['time'\]"):
    _load(tmp_path, latest)
  (tmp_path / "train.csv").write_text("id,time\nn0,5\nn1,6\n")
  splits = _load(tmp_path, latest)
  assert splits.times["train"].tolist() == [5, 6]
  options = adapters.Options(("train",), ("train",), graph_mode=training_data.FULL_GRAPH,
                             budget_bytes=2**30)
  with pytest.raises(GraphInputError, match="graph_mode 'full_graph' cannot train here: the "
                                            "sampling is time-aware"):
    adapters.for_training(splits, options, {})
  auto = adapters.for_training(splits, adapters.Options(("train",), ("train",),
                                                        budget_bytes=2**30), {})
  assert auto.mode == training_data.SAMPLED and auto.source.check_leakage
  unchecked = adapters.for_training(splits, adapters.Options(
      ("train",), ("train",), budget_bytes=2**30, check_leakage=False), {})
  assert not unchecked.source.check_leakage
  # The timed sampler serves every seed at its own time.
  examples = splits.serialized_examples(["train"], 2)
  parsed = [tfgnn.parse_single_example(tfgnn.create_graph_spec_from_schema_pb(
      splits.schema), e) for e in examples]
  assert [int(g.edge_sets["e"].sizes[0]) for g in parsed] == [1, 1]
  link = {"edge_set": "e", "splits": {"train": 0.5, "test": 0.5}, "hops": latest}
  with pytest.raises(GraphInputError, match="time-aware strategies bound each subgraph by its "
                                            "query's time"):
    adapters.load(str(tmp_path), link_config=link, splits=["train"])
  assert os.path.exists(tmp_path / "e.csv")


def _link(tmp_path, **change):
  rng = np.random.default_rng(3)
  edges, seen = [], set()
  while len(edges) < 240:
    u, v = (int(x) for x in rng.integers(0, 30, 2))
    if u != v and (u, v) not in seen:
      seen.add((u, v))
      edges.append((u, v, 1.0, int(rng.integers(0, 100))))
  edges.append((edges[0][0], edges[0][1], 1.0, 99))  # a repeat: the pair counts at its first time
  _write(tmp_path, edges, {})
  hop = {"fanout": 5, "strategy": "uniform_before", "time": "t"}
  config = {"edge_set": "e", "hops": [{"e": hop}, {"e": hop}],
            "time_split": {"time": "t", "from": {"train": None, "eval": 60, "test": 80}},
            "seed": 1, **change}
  return edges, config


def test_a_time_split_predicts_each_pair_from_what_came_before_it(tmp_path):
  edges, config = _link(tmp_path)
  pairs = adapters.load(str(tmp_path), link_config=config, splits=["train", "eval"])
  first = {}
  for u, v, _, t in edges:
    first[(u, v)] = min(t, first.get((u, v), t))
  ids = pairs.message_graph.node_sets["v"].ids
  for split, (low, high) in {"train": (0, 60), "eval": (60, 80), "test": (80, 100)}.items():
    got = {(int(ids[u][1:]), int(ids[v][1:])): t for (u, v), t in zip(
        pairs.positives[split], pairs.positive_times[split])}
    assert got == {p: t for p, t in first.items() if low <= t < high}, split
    # Held-out negatives at the times of their split's positives.
    if split != "train":
      assert set(pairs.negative_times[split]) <= set(pairs.positive_times[split])
      assert len(pairs.negative_times[split]) == len(pairs.negatives[split]) > 0
  # Nothing is held out of the graph: time keeps each query's own and later edges out.
  assert pairs.message_graph.edge_sets["e"].size == len(edges)
  for training, splits in ((True, ["train"]), (False, ["eval", "test"])):
    sampler = pairs.pair_sampler(splits, training)
    rows = np.arange(sampler.num_rows)
    sub, _ = sampler._sample(rows, np.random.default_rng(0))  # pylint: disable=protected-access
    times = np.concatenate([np.concatenate([pairs.positive_times[s],
                                            pairs.negative_times.get(s, np.zeros(0))])
                            for s in splits])
    if not training:
      assert kernel.leaks(pairs.message_graph, pairs.plan, sub, times) == []
      assert sub.edges["e"][0].sum() > 0  # earlier edges are sampled


def test_pair_examples_by_batch_are_write_example_of_the_datasets_subgraphs(tmp_path):
  """``batches`` (what GraphEvaluator scores) writes, batch by batch, the subgraphs and
  readouts ``dataset`` gives for the same rows and seed, as ``tfgnn.write_example`` does."""
  import tensorflow_gnn as tfgnn
  _, config = _link(tmp_path)
  pairs = adapters.load(str(tmp_path), link_config=config, splits=["eval", "test"])
  sampler = pairs.pair_sampler(["eval", "test"], training=False)
  rows = np.arange(sampler.num_rows)
  want = [tfgnn.write_example(g) for g in sampler.dataset(rows, batch_size=7, shuffle=False,
                                                          fresh=False, seed=3)]
  got = [e for batch in sampler.batches(rows, batch_size=7, seed=3) for e in batch]
  assert len(got) == len(want) == sampler.num_rows
  for a, b in zip(got, want, strict=True):
    assert a == b
  # The same subgraphs whatever TensorFlow's global seed (a training earlier in the process
  # sets one): GraphEvaluator's metrics do not depend on what ran before.
  import tensorflow as tf
  tf.random.set_seed(123)
  try:
    again = [e for batch in sampler.batches(rows, batch_size=7, seed=3) for e in batch]
    validation = [tfgnn.write_example(g) for g in sampler.dataset(
        rows, batch_size=7, shuffle=False, fresh=False, seed=3)]
  finally:
    tf.random.set_seed(None)
  assert again == got and validation == want


def test_a_time_split_is_checked(tmp_path):
  _, config = _link(tmp_path)
  for change, match in (
      ({"splits": {"train": 0.8, "test": 0.2}}, "give splits .* or time_split .*, not both"),
      ({"time_split": {"time": "t", "from": {"train": None, "test": "soon"}}},
       r"each split its first time \(a number\), and exactly one split, the first, null"),
      ({"time_split": {"time": "when", "from": {"train": None, "test": 5}}},
       r"time_split's \"time\" 'when' is not a feature of edge set 'e'"),
      ({"message_split": "test"}, "message_split 'test' must be the first split"),
      ({"hops": [{"e": 5}]}, r"every hop must be time-aware; sampling op 'hop1_e' \(edge set "
                             r"'e'\) is 'uniform'"),
      ({"time_split": {"time": "t", "from": {"train": None, "test": 500}}},
       r"split 'test' \(from 500\) holds no edge")):
    with pytest.raises(GraphInputError, match=match):
      adapters.load(str(tmp_path), link_config={**config, **change}, splits=["train"])
  splits = adapters.load(str(tmp_path), link_config=config, splits=["train", "eval"])
  options = adapters.Options(("train",), ("eval",), retrieval_splits=("test",))
  with pytest.raises(GraphInputError, match=r"retrieval_splits.*time_split does not run.*"
                                            r"GraphEvaluator\(eval_config=\{\.\.\., "
                                            r"'negatives_per_query': N\}\)"):
    adapters.for_training(splits, options, {})
  data = adapters.for_training(splits, adapters.Options(("train",), ("eval",)), {})
  assert data.ranking_splits == () and data.source.check_leakage
  # LinkSampler (TF-GNN's Beam engine runs uniform hops only) refuses it.
  from gnn_trainer_component.graph import link_config as link_config_lib
  from gnn_trainer_component.graph import plan as graph_plan
  schema = tfgnn.read_schema(str(tmp_path / "graph_schema.pbtxt"))
  with pytest.raises(GraphInputError, match="does not run"):
    link_config_lib.plan_links(schema, config, engine="LinkSampler's Beam sampling",
                               runs={"uniform"}, who="LinkSampler")
  assert graph_plan.plan(schema, seeds=None, sampling_spec=None, sampling_config=None,
                         link_config=config, splits=["train", "test"], engine="e",
                         runs=set(sampling.ALL_STRATEGIES), who="T").link.time == "t"


def test_integer_and_float_times_count_the_same_edges_before_a_bound():
  from gnn_trainer_component.in_memory import store as store_lib
  rng = np.random.default_rng(11)
  source = np.sort(rng.integers(0, 50, 2000))
  indptr = np.searchsorted(source, np.arange(51))
  times = rng.integers(-30, 30, 2000)
  edges = {name: store_lib.EdgeSet(source=source, target=source, indptr=indptr,
                                   features={"t": values}, table="e")
           for name, values in (("int", times), ("float", times.astype(np.float64)))}
  nodes = rng.integers(0, 50, 500)
  bounds = np.r_[rng.integers(-40, 40, 250), rng.uniform(-40, 40, 250)]
  for inclusive in (False, True):
    want = [int(((times[indptr[u]:indptr[u + 1]] <= b) if inclusive
                 else (times[indptr[u]:indptr[u + 1]] < b)).sum()) for u, b in zip(nodes, bounds)]
    for edge_set in edges.values():
      index = choosers.TimeIndex(edge_set, "t")
      assert index.count_before(nodes, indptr[nodes], bounds, inclusive).tolist() == want


NODE_TIME_SCHEMA = """
node_sets { key: "v" value {
  features { key: "born" value { dtype: DT_INT64 } }
  metadata { filename: "v.csv" } } }
edge_sets { key: "e" value {
  source: "v" target: "v"
  features { key: "t" value { dtype: DT_INT64 } }
  metadata { filename: "e.csv" } } }
"""


def _write_edges(d, edges):
  (d / "e.csv").write_text("source,target,t\n" + "".join(
      f"n{u},n{v},{t}\n" for u, v, t in sorted(edges)))


def _node_time_graph(d, born, num_edges, until, seed):
  """``NODE_TIME_SCHEMA`` tables: node ``n<i>`` appears at ``born[i]``; ``num_edges`` random
  edges ``(u, v, time)``, each between its ends' times and ``until`` (returned)."""
  rng = np.random.default_rng(seed)
  edges = set()
  while len(edges) < num_edges:
    u, v = (int(x) for x in rng.integers(0, len(born), 2))
    if u != v:
      edges.add((u, v, int(rng.integers(max(born[u], born[v]), until))))
  (d / "graph_schema.pbtxt").write_text(NODE_TIME_SCHEMA)
  (d / "v.csv").write_text("id,born\n" + "".join(f"n{i},{b}\n" for i, b in born.items()))
  _write_edges(d, edges)
  return edges


def test_a_time_split_draws_negatives_among_the_nodes_there_at_their_time(tmp_path):
  """With ``node_time``, a negative at time t (fixed, fresh, or a query's in GraphEvaluator)
  has both ends among the nodes that appeared by t."""
  from gnn_trainer_component.graph import negatives as negatives_lib
  _node_time_graph(tmp_path, {i: 2 * i for i in range(50)}, 300, 100, seed=5)  # n49 at 98
  hop = {"fanout": 5, "strategy": "uniform_before", "time": "t"}
  config = {"edge_set": "e", "hops": [{"e": hop}], "negatives_per_positive": 2, "seed": 1,
            "time_split": {"time": "t", "node_time": "born",
                           "from": {"train": None, "eval": 80, "test": 90}}}
  splits = adapters.load(str(tmp_path), link_config=config, splits=["train", "eval"])
  node_born = np.asarray(splits.message_graph.node_sets["v"].features["born"])
  checked = 0
  for split in ("eval", "test"):
    negatives, times = splits.negatives[split], splits.negative_times[split]
    assert len(negatives) == 2 * len(splits.positives[split]) > 0
    assert (node_born[negatives] <= times[:, None]).all()
    checked += len(negatives)
  # Fresh training negatives: drawn the same way, at message-split positives' times.
  early = np.full(400, 10.0)  # only n0..n5 had appeared by 10
  fresh = negatives_lib.draw_negatives_at(np.random.default_rng(0), early, (node_born, node_born),
                                  splits.edge_keys, one_node_set=True, what="a batch", who="Test")
  assert fresh.max() <= 5 and (fresh[:, 0] != fresh[:, 1]).all()
  assert len(set(fresh[:, 1].tolist())) == 6  # every node there is drawn
  # GraphEvaluator's ranking negatives: among the targets there at the query's time.
  queries = splits.positives["test"]
  query_times = splits.positive_times["test"]
  ranked = negatives_lib.query_negatives(queries, 5, splits.edge_keys, 50, one_node_set=True,
                                         seed=0, appeared=(query_times, node_born))
  assert (node_born[ranked] <= query_times[:, None]).all()
  with pytest.raises(GraphInputError, match=r"no node had appeared \(node_time\) by time -1"):
    negatives_lib.draw_negatives_at(np.random.default_rng(0), np.array([-1.0]), (node_born, node_born),
                            splits.edge_keys, one_node_set=True, what="a batch", who="Test")
  bad = dict(config, time_split={**config["time_split"], "node_time": "age"})
  with pytest.raises(GraphInputError, match=r"time_split's \"node_time\" 'age' is not a feature "
                                            r"of node set 'v'"):
    adapters.load(str(tmp_path), link_config=bad, splits=["train"])


def test_node_times_bound_the_sampled_nodes_and_no_edge_precedes_its_nodes(tmp_path):
  """``node_time``: an edge earlier than an end's node time is refused at load (both engines
  call links.supervise); a sampled node that appears after its pair's time is a leak."""
  edges = _node_time_graph(tmp_path, {i: i for i in range(30)}, 200, 40, seed=3)  # n29 at 29
  config = {"edge_set": "e", "negatives_per_positive": 1, "seed": 1,
            "hops": [{"e": {"fanout": 4, "strategy": "uniform_before", "time": "t"}}] * 2,
            "time_split": {"time": "t", "node_time": "born",
                           "from": {"train": None, "eval": 30, "test": 35}}}
  pairs = adapters.load(str(tmp_path), link_config=config, splits=["train", "eval"])
  graph, plan = pairs.message_graph, pairs.plan
  sampler = pairs.pair_sampler(["eval", "test"], training=False)
  sub, _ = sampler._sample(np.arange(sampler.num_rows),  # pylint: disable=protected-access
                           np.random.default_rng(0))
  rows = np.concatenate([np.concatenate([pairs.positives[s], pairs.negatives[s]])
                         for s in ("eval", "test")])
  times = np.concatenate([np.concatenate([pairs.positive_times[s], pairs.negative_times[s]])
                          for s in ("eval", "test")])
  assert sub.edges["e"][0].sum() > 0
  assert kernel.node_leaks(graph, plan, sub, times, "born") == []
  kernel.check_leaks(graph, plan, sub, rows, times, node_time="born")
  # The same subgraphs, with every node appearing at 100: each sampled end is a leak.
  late = dataclasses.replace(graph, node_sets={"v": dataclasses.replace(
      graph.node_sets["v"], features={"born": np.full(30, 100)})})
  found = kernel.node_leaks(late, plan, sub, times, "born")
  assert len(found) == len({(g, n) for g, _, n, _, _ in found}) > 0
  assert {(s, t) for _, s, _, t, _ in found} == {("v", 100.0)}
  with pytest.raises(GraphInputError, match=r"GnnTrainer: time leak: the subgraph of seed "
                                            r"'n\d+' \(time \d+\) holds node 'n\d+' of node "
                                            r"set 'v' \(table .*v.csv\), which appears at time "
                                            r"100 \('born'\), after the seed's time"):
    kernel.check_leaks(late, plan, sub, rows, times, node_time="born")
  # An edge before its target appears: bad input, at load, with the edge and both times.
  _write_edges(tmp_path, edges | {(0, 29, 5)})
  with pytest.raises(GraphInputError, match=r"GnnTrainer: edge 'n0' -> 'n29' of edge set 'e' "
                                            r"\(table .*e.csv\) is at time 5 \('t'\), before "
                                            r"its target appears \(node_time 'born': 29\)"):
    adapters.load(str(tmp_path), link_config=config, splits=["train"])


def test_a_pairs_own_edge_is_excluded_before_the_choice_as_on_beam(tmp_path):
  """A training pair (0, 1) never samples its own edge 0 -> 1, and node 0 still gets its full
  fan-out among the others, with each strategy's law over them (the Beam engine drops the
  edge before choosing; the kernel chooses again for the rows that chose it)."""
  weights = [9.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]  # 0 -> 1 the heaviest
  _write(tmp_path, [(0, v, w, 0) for v, w in enumerate(weights, 1)], {"train": [(0, 0)]})
  n = 4000
  others = {v: w for v, w in enumerate(weights, 1) if v != 1}
  for hop, check in (
      ({"fanout": 6, "strategy": "uniform"}, None),
      ({"fanout": 3, "strategy": "top_k", "weight": "w"}, {(5, 6, 7): 1.0}),
      ({"fanout": 1, "strategy": "weighted", "weight": "w"},
       {(v,): w / sum(others.values()) for v, w in others.items()}),
      ({"fanout": 2, "strategy": "uniform"}, {(a, b): 1 / 15 for a in others for b in others
                                                if a < b})):
    splits, graph, _ = _one_hop(tmp_path, hop)
    ids = graph.node_sets["v"].ids
    own = (list(ids).index(b"n0"), list(ids).index(b"n1"))
    exclude = kernel.Exclusion("e", np.tile(np.array([own]), (n, 1)), undirected=False)
    sub = kernel.sample(graph, splits.sampler.plan, np.full(n, own[0]),
                        np.random.default_rng(13), exclude)
    counts = {}
    for picked in _picked(graph, sub, range(n)).values():
      assert own not in picked and len(picked) == min(hop["fanout"], 6), (hop, picked)
      key = tuple(sorted(int(ids[v][1:]) for _, v in picked))
      counts[key] = counts.get(key, 0) + 1
    if check is None:
      continue
    assert set(counts) <= set(check), (hop, counts)
    chi2 = sum((counts.get(k, 0) - n * p) ** 2 / (n * p) for k, p in check.items())
    assert chi2 < 3 * len(check) + 30, (hop, chi2, counts)
