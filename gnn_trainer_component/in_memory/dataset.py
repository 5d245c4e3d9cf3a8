"""Sampled subgraphs as a tf.data input: one GraphTensor per seed, GraphSampler's spec.

:class:`SubgraphSampler` turns a batch of seeds into a rank-1 GraphTensor of
the graph schema's spec (the one GraphSampler's examples parse to), sampling
with :mod:`sampler` and gathering features from the in-memory arrays in one
``tf.numpy_function``. :class:`InMemoryDatasetProvider` is a
``runner.DatasetProvider`` of those subgraphs (unbatched: the runner batches
``global_batch_size`` of them as it batches parsed examples), so a module file
and the exported model are the same in both modes.

Randomness: every batch of seeds gets its own generator, seeded from a
``tf.data.Dataset.random`` stream. For training the stream (and the seed
order) changes every epoch, reproducibly under ``seed``; for validation it is
the same every time, so every validation sees the same subgraphs.
"""

from __future__ import annotations

import functools
from typing import Optional

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

from gnn_trainer_component.in_memory import graph as graph_lib
from gnn_trainer_component.in_memory import sampler as sampler_lib

#: Validation samples with this seed when the configuration has none.
DEFAULT_VALIDATION_SEED = 0


class SubgraphSampler:
  """Samples rooted subgraphs of an in-memory graph as GraphTensors of its schema's spec."""

  def __init__(self, graph: graph_lib.InMemoryGraph, plan: sampler_lib.SamplingPlan,
               schema: Optional[tfgnn.GraphSchema] = None):
    self.graph = graph
    self.plan = plan
    self.schema = schema or graph.schema
    self.spec = tfgnn.create_graph_spec_from_schema_pb(self.schema)
    self._node_features = {n: sorted(s.features) for n, s in sorted(graph.node_sets.items())}
    self._edge_features = {n: sorted(s.features) for n, s in sorted(graph.edge_sets.items())}
    self._dtypes = []
    for name, features in self._node_features.items():
      self._dtypes.append(tf.int64)
      self._dtypes += [self.spec.node_sets_spec[name][f].dtype for f in features]
    for name, features in self._edge_features.items():
      self._dtypes += [tf.int64] * 3
      self._dtypes += [self.spec.edge_sets_spec[name][f].dtype for f in features]
    self._dtypes += self._extra_dtypes()

  def _extra_dtypes(self) -> list[tf.DType]:
    """Dtypes of the arrays :meth:`_sample` adds after the graph's."""
    return []

  def _sample(self, rows: np.ndarray, rng: np.random.Generator
              ) -> tuple[sampler_lib.Subgraphs, list[np.ndarray]]:
    """The subgraphs around a batch of seeds, and no extra arrays."""
    return sampler_lib.sample(self.graph, self.plan, rows, rng), []

  def _extra_pieces(self, flat, num_graphs, starts) -> tuple[dict, dict]:
    """Node and edge sets built from the extra arrays (none).

    Args:
      flat: Iterator over the remaining arrays of :meth:`sample_arrays`.
      num_graphs: Subgraphs in the batch.
      starts: ``merged``: node set -> index of each subgraph's first node in
        the merged graph; None: the graph is rank-1 (one subgraph per row).
    """
    del flat, num_graphs, starts
    return {}, {}

  def sample_arrays(self, rows: np.ndarray, random_seed: int,
                    merged: bool = False) -> list[np.ndarray]:
    """The flat arrays of :meth:`graph_tensor` for one batch of rows (seed indices).

    ``merged``: edge endpoints index the batch's nodes of their set (all
    subgraphs), not the nodes of their own subgraph.
    """
    rng = np.random.default_rng(np.uint64(np.int64(random_seed).view(np.uint64)))
    sub, extra = self._sample(rows, rng)
    out = []
    for name, features in self._node_features.items():
      sizes, nodes = sub.nodes[name]
      out.append(sizes)
      out += [self.graph.node_sets[name].features[f][nodes] for f in features]
    for name, features in self._edge_features.items():
      sizes, src, tgt, positions = sub.edges[name]
      if merged:
        schema = self.graph.schema.edge_sets[name]
        src = src + np.repeat(self._starts(sub, schema.source), sizes)
        tgt = tgt + np.repeat(self._starts(sub, schema.target), sizes)
      out += [sizes, src, tgt]
      out += [self.graph.edge_sets[name].features[f][positions] for f in features]
    return out + extra

  @staticmethod
  def _starts(sub: sampler_lib.Subgraphs, node_set: str) -> np.ndarray:
    sizes = sub.nodes[node_set][0]
    return np.cumsum(sizes) - sizes

  def graph_tensor(self, seeds: tf.Tensor, random_seed: tf.Tensor, *,
                   merged: bool = False) -> tfgnn.GraphTensor:
    """The subgraphs of a batch of rows (TF op; runs :meth:`sample_arrays`).

    Args:
      seeds: The rows (seed indices) of the batch.
      random_seed: Seeds the batch's generator.
      merged: One scalar GraphTensor with a component per row (what
        ``runner.run`` makes of a batch after ``merge_batch_to_components``);
        else a rank-1 GraphTensor with one subgraph per row.
    """
    flat = tf.numpy_function(functools.partial(self.sample_arrays, merged=merged),
                             [seeds, random_seed], self._dtypes, stateful=False,
                             name="sample_subgraphs")
    flat = iter(flat)
    indices_dtype = self.spec.indices_dtype
    splits_dtype = self.spec.row_splits_dtype

    def values(array, sizes, spec=None):
      # spec: the feature's spec in the scalar graph, [num_items, *feature_shape].
      array.set_shape([None] + (spec.shape[1:].as_list() if spec is not None else []))
      return array if merged else tf.RaggedTensor.from_row_lengths(array, sizes, validate=False)

    def sizes_of(array):
      sizes = tf.cast(array, splits_dtype)
      sizes.set_shape([None])
      return sizes, tf.cast(sizes if merged else sizes[:, None], indices_dtype)

    node_sets, starts = {}, {}
    for name, features in self._node_features.items():
      sizes, field = sizes_of(next(flat))
      feature_specs = self.spec.node_sets_spec[name].features_spec
      node_sets[name] = tfgnn.NodeSet.from_fields(
          sizes=field, features={f: values(next(flat), sizes, feature_specs[f])
                                 for f in features})
      starts[name] = tf.cumsum(field, exclusive=True)
    edge_sets = {}
    for name, features in self._edge_features.items():
      sizes, field = sizes_of(next(flat))
      src, tgt = (values(tf.cast(next(flat), indices_dtype), sizes) for _ in range(2))
      feature_specs = self.spec.edge_sets_spec[name].features_spec
      schema = self.graph.schema.edge_sets[name]
      edge_sets[name] = tfgnn.EdgeSet.from_fields(
          sizes=field,
          adjacency=tfgnn.Adjacency.from_indices((schema.source, src), (schema.target, tgt)),
          features={f: values(next(flat), sizes, feature_specs[f]) for f in features})
    extra_nodes, extra_edges = self._extra_pieces(
        flat, tf.shape(seeds, out_type=splits_dtype)[0], starts if merged else None)
    return tfgnn.GraphTensor.from_pieces(node_sets={**node_sets, **extra_nodes},
                                         edge_sets={**edge_sets, **extra_edges})

  def dataset(self, seeds: np.ndarray, *, batch_size: int, shuffle: bool, fresh: bool,
              seed: Optional[int], merged: bool = False,
              drop_remainder: bool = False) -> tf.data.Dataset:
    """Scalar GraphTensors, one per seed (in order unless ``shuffle``), or merged batches.

    Args:
      seeds: Node indices of the seed node set.
      batch_size: Seeds sampled per numpy call.
      shuffle: A new seed order every iteration.
      fresh: New samples every iteration (training); else the same every time.
      seed: Makes orders and samples reproducible (None: random).
      merged: One element per batch of ``batch_size`` seeds: a scalar
        GraphTensor with one component per seed, as ``runner.run`` batches and
        merges them (it then takes them one at a time). Saves unbatching and
        re-batching every subgraph.
      drop_remainder: ``merged``: drop the last batch if it is smaller.
    """
    ds = tf.data.Dataset.from_tensor_slices(np.asarray(seeds, dtype=np.int64))
    if shuffle:
      ds = ds.shuffle(len(seeds), seed=seed, reshuffle_each_iteration=True)
    randoms = tf.data.Dataset.random(
        seed=seed if (fresh or seed is not None) else DEFAULT_VALIDATION_SEED,
        rerandomize_each_iteration=fresh)
    batch_size = max(1, batch_size)
    ds = tf.data.Dataset.zip((ds.batch(batch_size, drop_remainder=merged and drop_remainder),
                              randoms))
    ds = ds.map(functools.partial(self.graph_tensor, merged=merged),
                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if merged:
      batches = len(seeds) // batch_size if drop_remainder else -(-len(seeds) // batch_size)
      return ds.apply(tf.data.experimental.assert_cardinality(batches))
    ds = ds.unbatch()
    return ds.apply(tf.data.experimental.assert_cardinality(len(seeds)))


class InMemoryDatasetProvider(runner.DatasetProvider):
  """``runner.DatasetProvider`` of subgraphs sampled on the fly around a split's seeds.

  Each input pipeline (worker) samples around its share of the seeds
  (``seeds[i::n]``); the graph is held by every worker process.
  """

  def __init__(self, sampler: SubgraphSampler, seeds: np.ndarray, *, batch_size: int,
               shuffle: bool, fresh: bool, seed: Optional[int], what: str,
               merged: bool = False, drop_remainder: bool = False):
    self._sampler = sampler
    self._seeds = np.asarray(seeds, dtype=np.int64)
    self._batch_size = batch_size
    self._shuffle = shuffle
    self._fresh = fresh
    self._seed = seed
    self._what = what
    self._merged = merged
    self._drop_remainder = drop_remainder

  @property
  def num_seeds(self) -> int:
    return len(self._seeds)

  @property
  def steps(self) -> int:
    """Merged batches per pass over the seeds (one input pipeline)."""
    if self._drop_remainder:
      return len(self._seeds) // self._batch_size
    return -(-len(self._seeds) // self._batch_size)

  def get_dataset(self, context: tf.distribute.InputContext) -> tf.data.Dataset:
    n, i = context.num_input_pipelines, context.input_pipeline_id
    seeds = self._seeds[i::n] if n > 1 else self._seeds
    if n > 1:
      logging.info("GnnTrainer input pipeline %d of %d samples around %d of the %d seeds "
                   "of %s", i, n, len(seeds), len(self._seeds), self._what)
    seed = None if self._seed is None else self._seed + i
    if self._merged and n > 1:
      raise ValueError("Merged batches are for one input pipeline; got "
                       f"{n} (the trainer passes merged=False to distributed training).")
    return self._sampler.dataset(seeds, batch_size=self._batch_size, shuffle=self._shuffle,
                                 fresh=self._fresh, seed=seed, merged=self._merged,
                                 drop_remainder=self._drop_remainder
                                 ).prefetch(tf.data.AUTOTUNE)
