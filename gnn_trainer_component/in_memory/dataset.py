"""Sampled subgraphs as a tf.data input: one GraphTensor per seed, GraphSampler's spec.

:class:`SubgraphSampler` turns a batch of seeds into a rank-1 GraphTensor of
the graph schema's spec (the one GraphSampler's examples parse to), sampling
with :mod:`kernel` and gathering features from the in-memory arrays in one
``tf.numpy_function`` (a :class:`batch.SampledBatch`, encoded by
:mod:`batch`). :class:`InMemoryDatasetProvider` is a
``runner.DatasetProvider`` of those subgraphs (unbatched: the runner batches
``global_batch_size`` of them as it batches parsed examples), so a module file
and the exported model are the same in both modes.

Randomness: every batch of seeds gets its own generator, seeded from
:func:`random_seeds`. For training the stream (and the seed order) changes
every epoch, reproducibly under ``seed``; for validation it is the same every
time and in every process, so every validation (and GraphEvaluator's and
GraphInferrer's passes) sees the same subgraphs.
"""

from __future__ import annotations

import functools
from typing import Iterator, Optional

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

from gnn_trainer_component import process
from gnn_trainer_component.graph import readout
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.in_memory import batch as batch_lib
from gnn_trainer_component.in_memory import choosers
from gnn_trainer_component.in_memory import kernel
from gnn_trainer_component.in_memory import store as store_lib

#: Validation samples with this seed when the configuration has none.
DEFAULT_VALIDATION_SEED = 0
#: The extra of a deduplicated batch: each seed's index in the seed node set.
SEED_POSITIONS = "seed_positions"


class SubgraphSampler:
  """Samples rooted subgraphs of an in-memory graph as GraphTensors of its schema's spec."""

  #: Why its merged batches cannot be deduplicated (:func:`kernel.sample_deduplicated`
  #: needs one root per subgraph, no extras and an untimed plan); None: they can.
  no_deduplication: Optional[str] = None

  def __init__(self, graph: store_lib.InMemoryGraph, plan: sampling.SamplingPlan,
               schema: Optional[tfgnn.GraphSchema] = None):
    self.graph = graph
    self.plan = plan
    self.schema = schema or graph.schema
    choosers.prepare(graph, plan)  # the strategies' indexes, before any sampling thread
    self.spec = tfgnn.create_graph_spec_from_schema_pb(self.schema)
    self._node_features = {n: sorted(s.features) for n, s in sorted(graph.node_sets.items())}
    self._edge_features = {n: sorted(s.features) for n, s in sorted(graph.edge_sets.items())}
    self._tables = None

  def feature_tables(self) -> dict[tuple[str, str], tf.Variable]:
    """The node features as CPU variables, created once: what merged batches gather from.

    Variables, not constants: a tf.data function captures them by reference,
    where it would copy a constant into its graph.
    """
    if self._tables is None:
      with tf.init_scope(), tf.device("/cpu:0"):
        self._tables = {
            (name, f): tf.Variable(self.graph.node_sets[name].features[f], trainable=False,
                                   name=process.variable_name("nodes", name, f))
            for name, features in self._node_features.items() for f in features}
    return self._tables

  def deduplication_refusal(self) -> Optional[str]:
    """Why merged batches of this sampler cannot be deduplicated (None: they can)."""
    if self.no_deduplication:
      return self.no_deduplication
    if self.plan.timed:
      return "a time-aware op bounds each subgraph by its own seed's time"
    return None

  def batch_dtypes(self, node_indices: bool = False,
                   deduplicate: bool = False) -> batch_lib.SampledBatch:
    """The dtypes of :meth:`sample`'s batches, named as the batches are."""
    nodes_spec, edges_spec = self.spec.node_sets_spec, self.spec.edge_sets_spec
    return batch_lib.SampledBatch(
        nodes={name: batch_lib.NodePiece(tf.int64, {} if node_indices else {
            f: nodes_spec[name][f].dtype for f in features})
               for name, features in self._node_features.items()},
        edges={name: batch_lib.EdgePiece(tf.int64, tf.int64, tf.int64, {
            f: edges_spec[name][f].dtype for f in features})
               for name, features in self._edge_features.items()},
        node_indices={name: tf.int64 for name in self._node_features} if node_indices else {},
        extras={SEED_POSITIONS: tf.int64} if deduplicate else self._extra_dtypes())

  def _extra_dtypes(self) -> dict[str, tf.DType]:
    """Dtypes of the extras :meth:`_sample` adds to the graph's pieces, by name (none)."""
    return {}

  def _sample(self, rows: np.ndarray, rng: np.random.Generator
              ) -> tuple[kernel.Subgraphs, dict[str, np.ndarray]]:
    """The subgraphs around a batch of seeds, and no extras."""
    return kernel.sample(self.graph, self.plan, rows, rng), {}

  def _extra_pieces(self, extras: dict[str, tf.Tensor], num_graphs) -> tuple[dict, dict]:
    """Node and edge sets of a rank-1 batch built from the extras (none)."""
    del extras, num_graphs
    return {}, {}

  def sample(self, rows: np.ndarray, random_seed: int, node_indices: bool = False,
             deduplicate: bool = False) -> batch_lib.SampledBatch:
    """The subgraphs around one batch of rows (seed indices), features gathered.

    ``node_indices``: each node set's node indices in place of its features.
    ``deduplicate``: one graph whose nodes the seeds share
    (:func:`kernel.sample_deduplicated`), each seed's index in the extra
    :data:`SEED_POSITIONS`.
    """
    if deduplicate:
      sub, positions = kernel.sample_deduplicated(self.graph, self.plan, rows,
                                                  rng_of(random_seed))
      extras = {SEED_POSITIONS: positions[:, 0]}
    else:
      sub, extras = self._sample(rows, rng_of(random_seed))
    nodes, indices = {}, {}
    for name, features in self._node_features.items():
      sizes, sampled = sub.nodes[name]
      if node_indices:
        indices[name] = sampled.astype(np.int64)
      node_features = self.graph.node_sets[name].features
      nodes[name] = batch_lib.NodePiece(sizes, {} if node_indices else {
          f: np.take(node_features[f], sampled, axis=0) for f in features})
    edges = {}
    for name, features in self._edge_features.items():
      sizes, src, tgt, positions = sub.edges[name]
      edge_features = self.graph.edge_sets[name].features
      edges[name] = batch_lib.EdgePiece(sizes, src, tgt, {
          f: edge_features[f][positions] for f in features})
    return batch_lib.SampledBatch(nodes, edges, indices, extras)

  def examples(self, rows: np.ndarray, random_seed: int) -> list[tf.train.Example]:
    """The subgraphs around ``rows`` as GraphSampler-format tf.Examples (one per row).

    The encoding ``tfgnn.write_example`` gives the same subgraphs, written from
    :meth:`sample`'s batch without a GraphTensor per subgraph.
    """
    batch = self.sample(rows, random_seed)
    examples = batch_lib.encode_examples(batch, len(rows))
    self._write_extra_pieces(examples, batch.extras)
    return examples

  def _write_extra_pieces(self, examples: list[tf.train.Example],
                          extras: dict[str, np.ndarray]) -> None:
    """Writes the pieces of :meth:`_extra_pieces` into ``examples``."""
    if extras:
      raise NotImplementedError(f"{type(self).__name__} adds pieces examples() does not write")

  def _sampled(self, seeds: tf.Tensor, random_seed: tf.Tensor, node_indices: bool,
               deduplicate: bool = False) -> batch_lib.SampledBatch:
    """:meth:`sample` as a TF op (``tf.numpy_function``): the batch of tensors."""
    structure = self.batch_dtypes(node_indices, deduplicate)
    flat = tf.numpy_function(
        lambda rows, seed: batch_lib.flatten(self.sample(rows, seed, node_indices, deduplicate)),
        [seeds, random_seed], batch_lib.flatten(structure), stateful=False,
        name="sample_subgraphs")
    return batch_lib.unflatten(structure, flat)

  def graph_tensor(self, seeds: tf.Tensor, random_seed: tf.Tensor) -> tfgnn.GraphTensor:
    """A rank-1 GraphTensor: one subgraph per row (TF op; runs :meth:`sample`)."""
    batch = self._sampled(seeds, random_seed, node_indices=False)
    node_sets, edge_sets = batch_lib.encode_subgraphs(batch, self.spec, self.graph.schema)
    extra_nodes, extra_edges = self._extra_pieces(
        batch.extras, tf.shape(seeds, out_type=self.spec.row_splits_dtype)[0])
    return tfgnn.GraphTensor.from_pieces(node_sets={**node_sets, **extra_nodes},
                                         edge_sets={**edge_sets, **extra_edges})

  def merged_graph_tensor(self, seeds: tf.Tensor, random_seed: tf.Tensor,
                          deduplicate: bool = False) -> tfgnn.GraphTensor:
    """The subgraphs of :meth:`graph_tensor` as one scalar GraphTensor with one component.

    Their disjoint union (:func:`batch_lib.encode_merged`): the same nodes,
    features and edges, so message passing computes exactly what it computes on
    the subgraphs one by one, without the copies of unbatching and batching them
    again. Only a model that reads subgraphs through structured readout
    (``_readout``, from :meth:`_merged_extra_pieces`) can tell them apart, so
    only such inputs are merged. ``deduplicate``: the batch as one graph whose
    nodes the seeds share (:func:`kernel.sample_deduplicated`), of the same spec.
    """
    batch = self._sampled(seeds, random_seed, node_indices=True, deduplicate=deduplicate)
    node_sets, edge_sets, offsets = batch_lib.encode_merged(
        batch, self.feature_tables(), self.spec, self.graph.schema)
    if deduplicate:
      extra_nodes, extra_edges = readout.seed_readout_pieces(
          self.plan.seed_node_set,
          tf.cast(tf.reshape(batch.extras[SEED_POSITIONS], [-1]), self.spec.indices_dtype))
    else:
      extra_nodes, extra_edges = self._merged_extra_pieces(batch.extras, offsets)
    return tfgnn.GraphTensor.from_pieces(node_sets={**node_sets, **extra_nodes},
                                         edge_sets={**edge_sets, **extra_edges})

  def _merged_extra_pieces(self, extras: dict[str, tf.Tensor], offsets) -> tuple[dict, dict]:
    """The seed readout of a merged batch: each subgraph's root (its first node).

    TF-GNN's structured readout (key ``"seed"``), as ``tfgnn.add_readout_from_first_node``
    adds it to a batch of subgraphs and as full-graph steps mark their seeds.
    """
    del extras
    return readout.seed_readout_pieces(self.plan.seed_node_set,
                                       offsets[self.plan.seed_node_set])

  def merged_spec(self) -> tfgnn.GraphTensorSpec:
    """The spec of :meth:`merged_graph_tensor` (sizes relaxed)."""
    spec = tf.data.Dataset.from_tensors(np.zeros([1], np.int64)).map(
        lambda seeds: self.merged_graph_tensor(seeds, tf.constant(0, tf.int64))).element_spec
    return spec.relax(num_nodes=True, num_edges=True)

  def batches(self, rows: np.ndarray, *, batch_size: int, seed: Optional[int]
              ) -> Iterator[list[tf.train.Example]]:
    """:meth:`dataset`'s subgraphs of ``rows`` (in order, not fresh) as tf.Examples, by batch.

    The same batches and random seeds as :meth:`dataset`, so the same subgraphs,
    written without a GraphTensor each (:meth:`examples`).
    """
    randoms = random_seeds(seed, fresh=False)
    batch_size = max(1, batch_size)
    starts = range(0, len(rows), batch_size)
    for start, random_seed in zip(starts, randoms.take(len(starts)).as_numpy_iterator(),
                                  strict=True):
      yield self.examples(rows[start:start + batch_size], int(random_seed))

  def serialized_examples(self, rows: np.ndarray) -> list[bytes]:
    """The subgraphs :meth:`dataset` gives ``rows`` in one batch (seed None), serialized.

    Written by :meth:`batches` (as ``tfgnn.write_example`` writes them), without tracing
    a dataset.
    """
    return [example.SerializeToString()
            for batch in self.batches(rows, batch_size=len(rows), seed=None) for example in batch]

  def dataset(self, seeds: np.ndarray, *, batch_size: int, shuffle: bool, fresh: bool,
              seed: Optional[int], merged: bool = False, drop_remainder: bool = False,
              deduplicate: bool = False) -> tf.data.Dataset:
    """Scalar GraphTensors, one per seed (in order unless ``shuffle``), or one per batch.

    Args:
      seeds: Node indices of the seed node set.
      batch_size: Seeds sampled per numpy call.
      shuffle: A new seed order every iteration.
      fresh: New samples every iteration (training); else the same every time.
      seed: Makes orders and samples reproducible (None: random).
      merged: One element per ``batch_size`` seeds: their subgraphs merged into
        one component (:meth:`merged_graph_tensor`).
      drop_remainder: With ``merged``, no element for the last seeds if fewer
        than ``batch_size``.
      deduplicate: With ``merged``, each batch one graph whose nodes the seeds
        share (:meth:`merged_graph_tensor`).
    """
    ds = tf.data.Dataset.from_tensor_slices(np.asarray(seeds, dtype=np.int64))
    if shuffle:
      ds = ds.shuffle(len(seeds), seed=seed, reshuffle_each_iteration=True)
    randoms = random_seeds(seed, fresh=fresh)
    batch_size = max(1, batch_size)
    ds = tf.data.Dataset.zip((ds.batch(batch_size, drop_remainder=merged and drop_remainder),
                              randoms))
    if merged:
      ds = ds.map(functools.partial(self.merged_graph_tensor, deduplicate=deduplicate),
                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
      return ds.apply(tf.data.experimental.assert_cardinality(
          merged_steps(len(seeds), batch_size, drop_remainder)))
    ds = ds.map(self.graph_tensor, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    ds = ds.unbatch()
    return ds.apply(tf.data.experimental.assert_cardinality(len(seeds)))


class TimedSubgraphSampler(SubgraphSampler):
  """Subgraphs of seeds that each have a time: row ``i`` is node ``nodes[i]`` at ``times[i]``.

  Time-aware ops sample only what was known at the seed's time
  (:func:`kernel.sample`'s ``times``), and ``check_leakage`` checks every
  batch (:func:`kernel.check_leaks`); the datasets take row numbers as seeds.
  """

  no_deduplication = "each seed has its own time, which bounds what its subgraph samples"

  def __init__(self, sampler: SubgraphSampler, nodes: np.ndarray, times: np.ndarray, *,
               check_leakage: bool = True):
    super().__init__(sampler.graph, sampler.plan, sampler.schema)
    self._base = sampler
    self._nodes = np.asarray(nodes, dtype=np.int64)
    self._times = np.asarray(times, dtype=np.float64)
    self._check = check_leakage
    self.num_rows = len(self._nodes)

  def feature_tables(self) -> dict[tuple[str, str], tf.Variable]:
    return self._base.feature_tables()  # one copy of the node features, shared

  def _sample(self, rows: np.ndarray, rng: np.random.Generator
              ) -> tuple[kernel.Subgraphs, dict[str, np.ndarray]]:
    nodes, times = self._nodes[rows], self._times[rows]
    sub = kernel.sample(self.graph, self.plan, nodes, rng, times=times)
    if self._check:
      kernel.check_leaks(self.graph, self.plan, sub, nodes, times)
    return sub, {}


def random_seeds(seed: Optional[int], *, fresh: bool) -> tf.data.Dataset:
  """The int64 random seed of each batch, batch after batch (an endless dataset).

  ``fresh`` (training): ``tf.data.Dataset.random``'s stream, new every iteration,
  reproducible under ``seed`` once the training has set TensorFlow's global seed.
  Otherwise the same in every iteration and every process, whatever TensorFlow's global
  seed (a stateless hash of ``seed``, default :data:`DEFAULT_VALIDATION_SEED`, and the
  batch number): validation, evaluation and inference sample the same subgraphs whether
  or not a training ran earlier in the process.
  """
  if fresh:
    return tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
  base = tf.constant(DEFAULT_VALIDATION_SEED if seed is None else seed, tf.int64)
  return tf.data.Dataset.counter().map(lambda batch: tf.random.stateless_uniform(
      [], seed=tf.stack([base, batch]), minval=None, maxval=None, dtype=tf.int64))


def rng_of(random_seed: int) -> np.random.Generator:
  """The numpy generator of one batch, from its int64 seed (``tf.data.Dataset.random``'s)."""
  return np.random.default_rng(np.uint64(np.int64(random_seed).view(np.uint64)))


def merged_steps(num_seeds: int, batch_size: int, drop_remainder: bool) -> int:
  """Merged elements (steps) per pass over ``num_seeds`` seeds."""
  return num_seeds // batch_size if drop_remainder else -(-num_seeds // batch_size)


def batch_seed(seed: int, batch: int) -> int:
  """The sampling seed of batch ``batch`` of a run seeded ``seed`` (its own stream)."""
  return int(np.random.SeedSequence([seed, batch]).generate_state(1)[0])


class InMemoryDatasetProvider(runner.DatasetProvider):
  """``runner.DatasetProvider`` of subgraphs sampled on the fly around a split's seeds.

  Each input pipeline (worker) samples around its share of the seeds
  (``seeds[i::n]``); the graph is held by every worker process.
  """

  def __init__(self, sampler: SubgraphSampler, seeds: np.ndarray, *, batch_size: int,
               shuffle: bool, fresh: bool, seed: Optional[int], what: str,
               merged: bool = False, drop_remainder: bool = False, deduplicate: bool = False):
    self._sampler = sampler
    self._seeds = np.asarray(seeds, dtype=np.int64)
    self._batch_size = batch_size
    self._shuffle = shuffle
    self._fresh = fresh
    self._seed = seed
    self._what = what
    self._merged = merged
    self._drop_remainder = drop_remainder
    self.deduplicate = deduplicate and merged
    if merged:  # the variables merged batches gather from: made here, eagerly, on the CPU
      sampler.feature_tables()

  @property
  def num_seeds(self) -> int:
    return len(self._seeds)

  @property
  def steps(self) -> Optional[int]:
    """Elements per pass when each is a merged batch (one step), else None."""
    if not self._merged:
      return None
    return merged_steps(len(self._seeds), self._batch_size, self._drop_remainder)

  def get_dataset(self, context: tf.distribute.InputContext) -> tf.data.Dataset:
    n, i = context.num_input_pipelines, context.input_pipeline_id
    seeds = self._seeds[i::n] if n > 1 else self._seeds
    if n > 1:
      if self._merged:
        raise GraphInputError(
            f"GnnTrainer: merged batches of {self._what} are one step of one replica, but "
            f"this input has {n} pipelines.")
      logging.info("GnnTrainer input pipeline %d of %d samples around %d of the %d seeds "
                   "of %s", i, n, len(seeds), len(self._seeds), self._what)
    seed = None if self._seed is None else self._seed + i
    return self._sampler.dataset(seeds, batch_size=self._batch_size, shuffle=self._shuffle,
                                 fresh=self._fresh, seed=seed, merged=self._merged,
                                 drop_remainder=self._drop_remainder,
                                 deduplicate=self.deduplicate)
