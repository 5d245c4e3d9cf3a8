"""Deduplicated training batches: when GnnTrainer takes them, and the check on the model.

A deduplicated batch (:func:`kernel.sample_deduplicated`) is one graph whose
nodes the batch's seeds share: each node's neighbours are drawn once for the
batch, so each seed's sampled tree follows the per-seed law, and where
subgraphs overlap the batch is smaller. What a model computes for a seed is
unchanged when its messages flow toward the seeds (to the end each op expands:
``receiver_tag=SOURCE`` for out-edge sampling); a model that also reads the other
way would see another graph in training than the per-seed subgraphs it serves.
So ``custom_config["deduplicate_batches"]`` (:func:`choose`): ``"always"``,
``"never"``, or ``"auto"``: deduplicated where they hold at most
:data:`MAX_SHARE` of the per-seed batches' nodes and edges (:func:`share`) and
the model computes the same seed states on both batches of probe seeds with
every edge sampled (:class:`ModelCheck`, run by the trainer once the model is
known).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Callable, Optional

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.in_memory import dataset as dataset_lib
from gnn_trainer_component.in_memory import kernel

_WHO = "GnnTrainer"
#: ``custom_config["deduplicate_batches"]`` values.
AUTO, ALWAYS, NEVER = "auto", "always", "never"
#: ``"auto"`` deduplicates when that leaves at most this share of a batch's nodes and edges.
MAX_SHARE = 0.9
#: Probe seeds of :class:`ModelCheck`, and the most edges their full subgraphs may hold.
PROBE_SEEDS, PROBE_MAX_EDGES = 16, 200_000
#: Seed states equal to this (``np.allclose``'s ``rtol`` and ``atol``) are the same.
TOLERANCE = 1e-4


def share(sampler: dataset_lib.SubgraphSampler, seeds: np.ndarray, batch_size: int, *,
          probes: int = 4, seed: int = dataset_lib.DEFAULT_VALIDATION_SEED) -> float:
  """Nodes and edges of deduplicated batches, as a share of those of per-seed batches.

  Measured on ``probes`` batches of ``batch_size`` seeds drawn from ``seeds``
  (the same seeds and random stream both ways; 1.0 without seeds).
  """
  rng = np.random.default_rng(seed)
  sizes = np.zeros(2)
  for probe in range(probes if len(seeds) else 0):
    rows = rng.choice(seeds, size=min(batch_size, len(seeds)), replace=False)
    for j, deduplicate in enumerate((False, True)):
      batch = sampler.sample(rows, dataset_lib.batch_seed(seed, probe), node_indices=True,
                             deduplicate=deduplicate)
      sizes[j] += sum(int(np.sum(p.sizes)) for p in (*batch.nodes.values(),
                                                      *batch.edges.values()))
  return float(sizes[1] / sizes[0]) if sizes[0] else 1.0


def choose(requested: str, sampler: dataset_lib.SubgraphSampler, seeds: np.ndarray, *,
           batch_size: int, merged: bool) -> bool:
  """Whether training steps are deduplicated batches (before :class:`ModelCheck`).

  ``"auto"``: where the training can take them (merged batches of a sampler
  that deduplicates) and they hold at most :data:`MAX_SHARE` of the per-seed
  batches' nodes and edges.

  Raises:
    GraphInputError: ``"always"`` where the training cannot take them.
  """
  if requested == NEVER:
    return False
  refusal = sampler.deduplication_refusal() or (None if merged else (
      "the steps are not merged batches (more than one replica, or a task that does not "
      "read the seeds through structured readout)"))
  if requested == ALWAYS:
    if refusal:
      raise GraphInputError(
          f"{_WHO} custom_config['deduplicate_batches']='always': {refusal}, so each seed "
          "needs its own subgraph. Drop the key (or set it to 'auto').")
    return True
  if refusal:
    return False
  found = share(sampler, seeds, batch_size)
  logging.info("%s: deduplicated batches hold %.1f %% of the per-seed batches' nodes and "
               "edges (deduplicate_batches 'auto' takes them at <= %.0f %%, if the model "
               "agrees)", _WHO, 100 * found, 100 * MAX_SHARE)
  return found <= MAX_SHARE


def full_plan(sampler: dataset_lib.SubgraphSampler) -> sampling.SamplingPlan:
  """The sampler's plan with every op taking all of a node's edges (its fan-out the max degree)."""
  graph = sampler.graph
  return dataclasses.replace(sampler.plan, ops=tuple(
      dataclasses.replace(op, size=max(1, int(graph.edge_sets[op.edge_set].degrees().max(
          initial=0)))) for op in sampler.plan.ops))


def probe_seeds(sampler: dataset_lib.SubgraphSampler, seeds: np.ndarray,
                count: int = PROBE_SEEDS) -> np.ndarray:
  """Up to ``count`` of the first seeds of least first-op degree, their full subgraphs small.

  Empty when even those would hold more than :data:`PROBE_MAX_EDGES` edges.
  """
  candidates = np.asarray(seeds[:1000], np.int64)
  first = sampler.plan.ops[0] if sampler.plan.ops else None
  if first is not None:
    degrees = sampler.graph.edge_sets[first.edge_set].degrees()[candidates]
    candidates = candidates[np.argsort(degrees, kind="stable")]
  plan, rng = full_plan(sampler), np.random.default_rng(0)
  for size in sorted({count, max(1, count // 4), 1}, reverse=True):
    chosen = candidates[:size]
    sub = kernel.sample(sampler.graph, plan, chosen, rng)
    if len(chosen) and sum(int(s.sum()) for s, *_ in sub.edges.values()) <= PROBE_MAX_EDGES:
      return chosen
  return candidates[:0]


class ModelCheck:
  """``"auto"``'s check on the model: the same seed states on both batches, every edge sampled.

  Called by the trainer with ``seed_states`` (a merged batch -> the model's
  states at its seed readout, ``[seeds, ...]``); where they differ (or cannot be
  read), the training provider goes back to per-seed batches.
  """

  def __init__(self, sampler: dataset_lib.SubgraphSampler, seeds: np.ndarray,
               provider: dataset_lib.InMemoryDatasetProvider):
    self._sampler, self._seeds, self._provider = sampler, seeds, provider

  def probe_graphs(self) -> Optional[tuple[tfgnn.GraphTensor, tfgnn.GraphTensor]]:
    """The per-seed and the deduplicated batch of the probe seeds under :func:`full_plan`."""
    seeds = probe_seeds(self._sampler, self._seeds)
    if not len(seeds):
      return None
    self._sampler.feature_tables()  # shared with the copy below
    full = copy.copy(self._sampler)
    full.plan = full_plan(self._sampler)
    rows, random_seed = tf.constant(seeds), tf.constant(0, tf.int64)
    return (full.merged_graph_tensor(rows, random_seed),
            full.merged_graph_tensor(rows, random_seed, deduplicate=True))

  def __call__(self, seed_states: Callable[[tfgnn.GraphTensor], np.ndarray]) -> bool:
    """Whether training keeps the deduplicated batches; else turns them off (and logs why)."""
    graphs = self.probe_graphs()
    why = "no probe seeds have small enough subgraphs with every edge sampled"
    if graphs is not None:
      try:
        per_seed, shared = (np.asarray(seed_states(g), np.float64) for g in graphs)
        if per_seed.shape == shared.shape and np.allclose(per_seed, shared, rtol=TOLERANCE,
                                                          atol=TOLERANCE):
          logging.info("%s: deduplicated training batches (the model computes the same "
                       "seed states on them, every edge sampled)", _WHO)
          return True
        why = ("the model computes other seed states on them than on per-seed subgraphs "
               f"(every edge sampled; largest difference {_difference(per_seed, shared)}): "
               "its messages do not only flow toward the seeds")
      except (ValueError, TypeError, KeyError, tf.errors.OpError) as e:
        why = f"the model's seed states could not be compared ({type(e).__name__}: {e})"
    logging.info("%s: per-seed training batches: %s (deduplicate_batches 'auto')", _WHO, why)
    self._provider.deduplicate = False
    return False


def _difference(a: np.ndarray, b: np.ndarray) -> str:
  return f"{np.max(np.abs(a - b)):.3g}" if a.shape == b.shape else f"shapes {a.shape}, {b.shape}"

