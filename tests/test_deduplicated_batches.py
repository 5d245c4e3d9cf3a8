"""Deduplicated batches: one graph per step whose nodes the seeds share (issue 73, item 1).

Held to the per-seed law (each seed's sampled tree drawn as in its own
subgraph), to the per-seed batch's predictions at full fan-out, and to the
merged batches' spec; ``deduplicate_batches`` chooses them.
"""

import collections
import dataclasses
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component import training_data
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.in_memory import adapters
from gnn_trainer_component.in_memory import deduplication
from gnn_trainer_component.in_memory import kernel
from tests import test_in_memory as base

BATCH = np.arange(8)  # seeds whose neighbourhoods overlap in a 40-node graph


def _load(tmp_path, fan_outs):
  """The 40-node graph of test_in_memory without its self loops."""
  edges = [f"n{s},n{t},{s + t / 100}" for s, t in base._edges() if s != t]
  base._write(tmp_path, edges=edges)
  return base._load(tmp_path, fan_outs=fan_outs)


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
  return _load(tmp_path_factory.mktemp("sampled"), (4, 2))


def _trees(nodes, src, tgt, roots):
  """Each root's sampled tree: (its first hop's nodes, the second hop's (node, node) edges)."""
  out = []
  for root in roots:
    hop1 = tgt[src == root]
    second = np.isin(src, hop1)
    out.append((set(nodes[hop1].tolist()),
                set(zip(nodes[src[second]].tolist(), nodes[tgt[second]].tolist(), strict=True))))
  return out


def _deduplicated_trees(graph, rng):
  sub, positions = kernel.sample_deduplicated(graph.sampler.graph, graph.sampler.plan, BATCH,
                                              rng)
  _, src, tgt, _ = sub.edges["e"]
  return _trees(sub.nodes["v"][1], src, tgt, positions[:, 0]), len(sub.nodes["v"][1])


def _per_seed_trees(graph, rng):
  sub = kernel.sample(graph.sampler.graph, graph.sampler.plan, BATCH, rng)
  sizes, nodes = sub.nodes["v"]
  edge_sizes, src, tgt, _ = sub.edges["e"]
  node_starts = np.cumsum(sizes) - sizes
  # One index space: each subgraph's local indices offset by the nodes before it.
  offsets = np.repeat(node_starts, edge_sizes)
  return _trees(nodes, src + offsets, tgt + offsets, node_starts), len(nodes)


def test_a_deduplicated_batch_shares_nodes_and_holds_only_sampled_edges(graph):
  g = graph.sampler.graph
  rng = np.random.default_rng(0)
  sub, positions = kernel.sample_deduplicated(g, graph.sampler.plan, BATCH, rng)
  (size,), nodes = sub.nodes["v"]
  (num_edges,), src, tgt, where = sub.edges["e"]
  assert size == len(nodes) and num_edges == len(src)
  np.testing.assert_array_equal(nodes[positions[:, 0]], BATCH)  # the seeds, in order
  np.testing.assert_array_equal(positions[:, 0], np.arange(8))  # the roots come first
  e = g.edge_sets["e"]
  np.testing.assert_array_equal(nodes[src], e.source[where])  # every edge is a graph edge
  np.testing.assert_array_equal(nodes[tgt], e.target[where])
  assert len(set(zip(src.tolist(), tgt.tolist(), strict=True))) == len(src)
  # A node's draw is shared: the edges out of one node for one op are at most its fan-out.
  for node, count in collections.Counter(src.tolist()).items():
    assert count <= (4 if node < 8 else 2), node
  per_seed = [_per_seed_trees(graph, np.random.default_rng(i))[1] for i in range(20)]
  shared = [_deduplicated_trees(graph, np.random.default_rng(i))[1] for i in range(20)]
  assert np.mean(shared) < 0.75 * np.mean(per_seed)


def test_each_seed_samples_by_the_per_seed_law(graph):
  """Each seed's first hop and second-hop edges are as frequent as in its own subgraph."""
  draws = 2000
  counts = []
  for trees_of in (_per_seed_trees, _deduplicated_trees):
    rng = np.random.default_rng(7)
    count = collections.Counter()
    for _ in range(draws):
      trees, _ = trees_of(graph, rng)
      for seed, (hop1, hop2) in enumerate(trees[:3]):
        count.update((seed, 1, n) for n in hop1)
        count.update((seed, 2, pair) for pair in hop2)
    counts.append(count)
  assert set(counts[1]) <= set(counts[0]) | {k for k, c in counts[1].items() if c < 10}
  for key in set(counts[0]) | set(counts[1]):
    p, q = counts[0][key] / draws, counts[1][key] / draws
    spread = np.sqrt(max(p * (1 - p), 1 / draws) * 2 / draws)
    assert abs(p - q) <= 5 * spread, (key, p, q)
  # The first hop is the fan-out (or every edge) of each seed, in both.
  degrees = graph.sampler.graph.edge_sets["e"].degrees()
  for seed in range(3):
    total = sum(c for (s, hop, _), c in counts[1].items() if s == seed and hop == 1)
    assert total == draws * min(4, degrees[seed])


SPEC_TWO_INPUTS = """
seed_op { op_name: "seed" node_set_name: "v" }
sampling_ops { op_name: "a" input_op_names: "seed" edge_set_name: "e" sample_size: 3
               strategy: RANDOM_UNIFORM }
sampling_ops { op_name: "b" input_op_names: "seed" input_op_names: "a" edge_set_name: "e"
               sample_size: 2 strategy: RANDOM_UNIFORM }
"""


def test_an_op_with_two_inputs_draws_a_node_once_for_both_of_its_roles(tmp_path):
  """A node an op reaches in two roles is drawn once.

  Op b expands the seeds and a's nodes: a seed that a also reached is two nodes
  (one per role), both with b's one draw of its edges.
  """
  edges = [f"n{s},n{t},{s + t / 100}" for s, t in base._edges() if s != t]
  base._write(tmp_path, edges=edges)
  graph = adapters.load(str(tmp_path), seeds={"train": "seeds-train.csv"},
                        sampling_spec=SPEC_TWO_INPUTS, splits=["train"])
  both_roles = 0
  for i in range(50):
    sub, positions = kernel.sample_deduplicated(graph.sampler.graph, graph.sampler.plan,
                                                BATCH, np.random.default_rng(i))
    nodes = sub.nodes["v"][1]
    _, src, tgt, _ = sub.edges["e"]
    for seed, at_seed in zip(BATCH, positions[:, 0], strict=True):
      others = np.flatnonzero(nodes == seed)
      others = others[others != at_seed]
      seed_targets = set(nodes[tgt[src == at_seed]].tolist())
      assert len(seed_targets) <= 3 + 2
      for other in others:  # the seed in another role: b's draw of it only, the same one
        targets = set(nodes[tgt[src == other]].tolist())
        assert len(targets) <= 2 and targets <= seed_targets, (i, seed)
        both_roles += bool(targets)
  assert both_roles >= 20


def _model(spec: tfgnn.GraphTensorSpec, receiver_tag=tfgnn.SOURCE) -> tf.keras.Model:
  """Two rounds toward the seeds (messages to each edge's source), read out at the seeds."""
  inputs = tf.keras.Input(type_spec=spec)
  graph = tfgnn.keras.layers.MapFeatures(
      node_sets_fn=lambda node_set, node_set_name: tf.keras.layers.Dense(8)(tf.stack(
          [node_set["x"], tf.cast(node_set["ident"], tf.float32) / 40.0], axis=-1)))(inputs)
  for _ in range(2):
    graph = tfgnn.keras.layers.GraphUpdate(node_sets={"v": tfgnn.keras.layers.NodeSetUpdate(
        {"e": tfgnn.keras.layers.SimpleConv(tf.keras.layers.Dense(8, "relu"), "mean",
                                            receiver_tag=receiver_tag)},
        tfgnn.keras.layers.NextStateFromConcat(tf.keras.layers.Dense(8)))})(graph)
  return tf.keras.Model(inputs, tfgnn.keras.layers.StructuredReadout("seed")(graph))


def test_at_full_fan_out_the_predictions_are_the_per_seed_batchs(tmp_path):
  """Every edge sampled: each seed's 2-hop computation is the same in both batches."""
  graph = _load(tmp_path, (12, 12))  # degrees are at most 12
  sampler = graph.sampler
  tf.random.set_seed(0)
  model = _model(graph.training_spec)
  seeds = tf.constant(graph.seeds["train"])
  per_seed = sampler.merged_graph_tensor(seeds, tf.constant(3, tf.int64))
  shared = sampler.merged_graph_tensor(seeds, tf.constant(5, tf.int64), deduplicate=True)
  assert graph.training_spec.is_compatible_with(shared.spec)
  assert int(shared.node_sets["v"].total_size) < int(per_seed.node_sets["v"].total_size)
  np.testing.assert_allclose(model(shared).numpy(), model(per_seed).numpy(), atol=1e-5)
  # In a tf.data pipeline, as training reads it: the same seeds read out in order.
  ds = sampler.dataset(graph.seeds["train"], batch_size=30, shuffle=False, fresh=True, seed=1,
                       merged=True, deduplicate=True)
  (element,) = list(ds)
  np.testing.assert_array_equal(
      tf.gather(element.node_sets["v"]["ident"],
                element.edge_sets["_readout/seed"].adjacency.source).numpy(),
      graph.seeds["train"])
  np.testing.assert_allclose(model(element).numpy(), model(per_seed).numpy(), atol=1e-5)


def test_deduplicate_batches_chooses_and_refuses(graph):
  def choose(requested, batch_size=8, merged=True, source=graph):
    sampler, rows = source.sampler_of(["train"])
    return deduplication.choose(requested, sampler, rows, batch_size=batch_size, merged=merged)

  assert deduplication.share(graph.sampler, graph.seeds["train"], 8) < deduplication.MAX_SHARE
  assert choose("auto") and choose("always") and not choose("never")
  assert not choose("auto", batch_size=1)  # nothing shared
  assert not choose("auto", merged=False)
  with pytest.raises(GraphInputError, match="not merged batches"):
    choose("always", merged=False)
  timed = dataclasses.replace(graph, times={"train": np.zeros(30), "eval": np.zeros(10)})
  with pytest.raises(GraphInputError, match="its own time"):
    choose("always", source=timed)
  assert not choose("auto", source=timed)
  # Training reads them; validation reads each seed's own subgraph (the evaluator's).
  tasks = {"t": base._gcn_like_tasks()[0]}
  request = training_data.Request(batch_size=8, seed=1, drop_remainder=False, tasks=tasks,
                                  local=True)
  always = adapters.SampledData(("train",), ("eval",),
                                dataclasses.replace(graph, deduplicate="always")).feed(request)
  assert always.whole_steps and always.train.deduplicate and not always.valid.deduplicate
  assert always.check_deduplication is None  # forced: no check on the model
  auto = adapters.SampledData(("train",), ("eval",), graph).feed(request)
  assert auto.train.deduplicate and auto.check_deduplication is not None


@pytest.mark.parametrize("receiver_tag, kept", [(tfgnn.SOURCE, True), (tfgnn.TARGET, False)])
def test_auto_keeps_them_only_for_a_model_whose_messages_flow_to_the_seeds(graph, receiver_tag,
                                                                            kept):
  """The check compares the model's seed states on both batches, every edge sampled."""
  tasks = {"t": base._gcn_like_tasks()[0]}
  feed = adapters.SampledData(("train",), ("eval",), graph).feed(training_data.Request(
      batch_size=8, seed=1, drop_remainder=False, tasks=tasks, local=True))
  tf.random.set_seed(0)
  model = _model(graph.training_spec, receiver_tag)
  assert feed.check_deduplication(lambda g: model(g).numpy()) is kept
  assert feed.train.deduplicate is kept
  per_seed, shared = deduplication.ModelCheck(
      graph.sampler, graph.seeds["train"], feed.train).probe_graphs()
  assert int(per_seed.node_sets["_readout"].total_size) == deduplication.PROBE_SEEDS
  assert int(shared.node_sets["v"].total_size) < int(per_seed.node_sets["v"].total_size)


def test_the_trainer_checks_a_module_files_model_on_cora(tmp_path):
  """The shipped GCN (messages to each edge's source) keeps deduplicated Cora batches.

  Its GNN, after its feature processors and task's preprocess, computes the same seed
  states on both probe batches.
  """
  from pipelines.planetoid import data as planetoid
  from pipelines.planetoid import pipeline as planetoid_pipeline
  from gnn_trainer_component.trainer import module_contract
  from gnn_trainer_component.trainer import training
  from tests.helpers import REPO_ROOT, require_planetoid
  tables = planetoid.write_planetoid_tables(require_planetoid("cora"), "cora", str(tmp_path))
  graph = adapters.load(tables["dir"], seeds=tables["seeds"], sampling_spec=None,
                        sampling_config=planetoid_pipeline.sampling_config((200, 200)),
                        splits=["train", "eval"])
  module = module_contract.load_user_module(
      os.path.join(REPO_ROOT, "module_files", "planetoid_gcn.py"), None, {"num_classes": 7})
  feed = adapters.SampledData(("train",), ("eval",), graph).feed(training_data.Request(
      batch_size=140, seed=0, drop_remainder=False, tasks=module.tasks, local=True))
  assert feed.train.deduplicate  # Cora's 140 seeds at fan-outs 200, 200: about half as big
  assert feed.check_deduplication(training._seed_states(module, feed.spec))
  assert feed.train.deduplicate
