"""Full-graph training: the whole graph every step, the seeds read out with structured readout.

Where the graph fits one GraphTensor, every training step runs the GNN on all
of it (as full-batch GCN training does) and the loss is taken on the step's
seeds. The seeds are marked with TF-GNN's structured readout: an auxiliary
node set ``_readout`` (one node per seed) and an edge set ``_readout/seed``
from each seed to its readout node, the structure that
``tfgnn.add_readout_from_first_node(key="seed")`` gives a sampled subgraph.
Tasks that read ``StructuredReadout(key="seed")`` (``runner.Node*`` tasks,
``gnn_trainer_component.tasks.RootNodeLogits`` and ``SeedLabelFn``) therefore
train on the whole graph and serve subgraphs unchanged: the export parses
GraphSampler-format subgraphs and adds that readout from their first node
(``model/export.py``'s ``SubgraphReadoutParser``).

The graph is built once as a scalar GraphTensor of the schema's features;
each dataset element is that graph plus the readout of up to
``seeds_per_step`` seeds (training: shuffled every epoch; validation: all of
them in one step).
"""

from __future__ import annotations

from typing import Callable, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

from gnn_trainer_component.graph import readout
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.in_memory import dataset as dataset_lib
from gnn_trainer_component.in_memory import store as store_lib


def whole_graph_tensor(graph: store_lib.InMemoryGraph) -> tfgnn.GraphTensor:
  """The whole graph as one scalar GraphTensor of the schema's spec (one component)."""
  spec = tfgnn.create_graph_spec_from_schema_pb(graph.schema)
  indices_dtype = spec.indices_dtype
  node_sets = {
      name: tfgnn.NodeSet.from_fields(
          sizes=tf.constant([node_set.size], indices_dtype),
          features={f: tf.convert_to_tensor(v, spec.node_sets_spec[name][f].dtype)
                    for f, v in node_set.features.items()})
      for name, node_set in graph.node_sets.items()}
  edge_sets = {}
  for name, edge_set in graph.edge_sets.items():
    schema = graph.schema.edge_sets[name]
    edge_sets[name] = tfgnn.EdgeSet.from_fields(
        sizes=tf.constant([edge_set.size], indices_dtype),
        adjacency=tfgnn.Adjacency.from_indices(
            (schema.source, tf.constant(edge_set.source, indices_dtype)),
            (schema.target, tf.constant(edge_set.target, indices_dtype))),
        features={f: tf.convert_to_tensor(v, spec.edge_sets_spec[name][f].dtype)
                  for f, v in edge_set.features.items()})
  return tfgnn.GraphTensor.from_pieces(node_sets=node_sets, edge_sets=edge_sets)


def _check_one_replica(context: tf.distribute.InputContext) -> None:
  if context.num_input_pipelines > 1:
    raise GraphInputError(
        "GnnTrainer graph_mode 'full_graph' trains on one replica (every step holds the "
        "whole graph); use graph_mode 'sampled' with a multi-replica strategy.")


class FullGraphDatasetProvider(runner.DatasetProvider):
  """The whole graph with the readout of a share of the seeds, one element per step.

  Training: the seeds are shuffled every epoch (reproducibly under ``seed``)
  and split into ``ceil(len(seeds) / seeds_per_step)`` steps. Validation: the
  same steps in seed order every time.
  """

  def __init__(self, graph: tfgnn.GraphTensor, seed_node_set: str, seeds: np.ndarray, *,
               seeds_per_step: int, shuffle: bool, seed: Optional[int]):
    self._graph = graph
    self._seed_node_set = seed_node_set
    self._seeds = np.asarray(seeds, dtype=np.int64)
    self._seeds_per_step = max(1, int(seeds_per_step))
    self._shuffle = shuffle
    self._seed = seed

  @property
  def steps(self) -> int:
    """Elements (full-graph steps) per pass over the seeds."""
    return -(-len(self._seeds) // self._seeds_per_step)

  def get_dataset(self, context: tf.distribute.InputContext) -> tf.data.Dataset:
    _check_one_replica(context)
    ds = tf.data.Dataset.from_tensor_slices(self._seeds)
    if self._shuffle:
      ds = ds.shuffle(len(self._seeds), seed=self._seed, reshuffle_each_iteration=True)
    graph = self._graph
    ds = ds.batch(self._seeds_per_step).map(
        lambda seeds: readout.with_seed_readout(graph, self._seed_node_set, seeds))
    return ds.apply(tf.data.experimental.assert_cardinality(self.steps))


class LinkFullGraphDatasetProvider(runner.DatasetProvider):
  """The whole message-passing graph with the readout of a share of the pairs, one per step.

  Each step holds the graph without its pairs' own edges (``own_edges``: the
  edges to drop, by edge set), TF-GNN's ``_readout`` node set (``label`` 1.0 /
  0.0) and ``_readout/source|target`` edges from the pairs' ends: the spec of
  LinkSampler's examples merged into one component, so the export serves those.

  Args:
    graph: The message-passing graph as one GraphTensor (:func:`whole_graph_tensor`).
    ends: The node sets of the pairs' sources and targets.
    num_rows: Pairs per pass.
    pairs_of: ``(rows, rng) -> (pairs [n, 2], labels [n], ...)``: the pairs of rows
      (fixed ones, or fresh negatives drawn from ``rng``).
    own_edges: ``pairs -> {edge set: [its edges] bool}``: the edges the pairs must not see.
    pairs_per_step: Pairs per step.
    shuffle: A new order every pass (training).
    fresh: New negatives every pass (training); else the same every time.
    seed: Makes orders and draws reproducible.
    features_of: ``rows -> {feature: values}``: the pairs' ``edge_features``
      (node set ``pair``, :func:`readout.pair_pieces`); None: none.
    feature_specs: Their specs, by feature.
  """

  def __init__(self, graph: tfgnn.GraphTensor, ends: Sequence[str], num_rows: int,
               pairs_of: Callable, own_edges: Callable, *, pairs_per_step: int,
               shuffle: bool, fresh: bool, seed: Optional[int],
               features_of: Optional[Callable] = None,
               feature_specs: Optional[Mapping[str, tf.TensorSpec]] = None):
    self._graph = graph
    self._ends = tuple(ends)
    self._num_rows = num_rows
    self._pairs_of = pairs_of
    self._own_edges = own_edges
    self._pairs_per_step = max(1, int(pairs_per_step))
    self._shuffle, self._fresh, self._seed = shuffle, fresh, seed
    self._dropped = sorted(own_edges(np.zeros((0, 2), np.int64)))
    self._features_of = features_of
    self._feature_specs = dict(feature_specs or {})

  @property
  def steps(self) -> int:
    """Elements (whole-graph steps) per pass over the pairs."""
    return -(-self._num_rows // self._pairs_per_step)

  def _arrays(self, rows: np.ndarray, random_seed: int) -> list[np.ndarray]:
    pairs, labels, *_ = self._pairs_of(rows, dataset_lib.rng_of(random_seed))
    drop = self._own_edges(pairs)
    features = self._features_of(rows) if self._feature_specs else {}
    return [pairs[:, 0], pairs[:, 1], labels.astype(np.float32),
            *(np.flatnonzero(~drop[name]).astype(np.int64) for name in self._dropped),
            *(features[name] for name in sorted(self._feature_specs))]

  def _step(self, rows: tf.Tensor, random_seed: tf.Tensor) -> tfgnn.GraphTensor:
    graph, dtype = self._graph, self._graph.indices_dtype
    specs = [self._feature_specs[name] for name in sorted(self._feature_specs)]
    arrays = tf.numpy_function(
        self._arrays, [rows, random_seed],
        [tf.int64, tf.int64, tf.float32] + [tf.int64] * len(self._dropped)
        + [spec.dtype for spec in specs], stateful=False, name="link_step_pairs")
    for array, spec in zip(arrays, [None] * (3 + len(self._dropped)) + specs, strict=True):
      array.set_shape([None] if spec is None else spec.shape)
    sources, targets, labels, *kept = arrays[:3 + len(self._dropped)]
    features = dict(zip(sorted(self._feature_specs), arrays[3 + len(self._dropped):],
                        strict=True))
    edge_sets = dict(graph.edge_sets)
    for name, keep in zip(self._dropped, kept, strict=True):
      edges, adjacency = graph.edge_sets[name], graph.edge_sets[name].adjacency
      edge_sets[name] = tfgnn.EdgeSet.from_fields(
          sizes=tf.shape(keep, out_type=dtype),
          adjacency=tfgnn.Adjacency.from_indices(
              (adjacency.source_name, tf.gather(adjacency.source, keep)),
              (adjacency.target_name, tf.gather(adjacency.target, keep))),
          features={f: tf.gather(v, keep) for f, v in edges.features.items()})
    count = tf.shape(labels, out_type=dtype)
    readout_nodes = tf.range(count[0], dtype=dtype)
    node_sets = dict(graph.node_sets)
    node_sets[readout.READOUT] = tfgnn.NodeSet.from_fields(
        sizes=count, features={readout.LABEL: labels})
    for name, node_set, ends in ((readout.READOUT_SOURCE, self._ends[0], sources),
                                 (readout.READOUT_TARGET, self._ends[1], targets)):
      edge_sets[name] = tfgnn.EdgeSet.from_fields(
          sizes=count, adjacency=tfgnn.Adjacency.from_indices(
              (node_set, tf.cast(ends, dtype)), (readout.READOUT, readout_nodes)))
    pair_nodes, pair_edges = readout.pair_pieces(features, readout_nodes)
    return tfgnn.GraphTensor.from_pieces(context=graph.context,
                                         node_sets={**node_sets, **pair_nodes},
                                         edge_sets={**edge_sets, **pair_edges})

  def get_dataset(self, context: tf.distribute.InputContext) -> tf.data.Dataset:
    _check_one_replica(context)
    ds = tf.data.Dataset.from_tensor_slices(np.arange(self._num_rows, dtype=np.int64))
    if self._shuffle:
      ds = ds.shuffle(self._num_rows, seed=self._seed, reshuffle_each_iteration=True)
    randoms = dataset_lib.random_seeds(self._seed, fresh=self._fresh)
    ds = tf.data.Dataset.zip((ds.batch(self._pairs_per_step), randoms)).map(self._step)
    # The next step's pairs are drawn while this one trains.
    return ds.apply(tf.data.experimental.assert_cardinality(self.steps)).prefetch(1)
