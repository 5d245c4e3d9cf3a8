"""Link prediction on the graph in memory: LinkSampler's split and leakage rules, fresh negatives.

GnnTrainer with ``link_config`` (LinkSampler's) instead of examples loads the
graph once and builds, per split, the supervised pairs LinkSampler would:
the same seeded split of the distinct edges (:func:`links.split_links`). Each
example is the subgraph sampled around both ends of its pair (ends first, source
first) plus TF-GNN's ``_readout`` node set (``label`` 1.0 / 0.0) and
``_readout/source|target`` edges: the spec of LinkSampler's examples, so the
same module file trains in both modes and the model serves LinkSampler-format
examples.

Leakage rules (as LinkSampler's): the positives of held-out splits are not
edges of the message-passing graph (both directions when ``undirected``), and
an example's own pair is never a message edge of its subgraph (it is dropped
from what the sampler picked). Negatives are pairs that are no edge of the
whole graph and no self pair: fixed (seeded) for validation, drawn fresh every
epoch for training.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component.in_memory import dataset as dataset_lib
from gnn_trainer_component.in_memory import graph as graph_lib
from gnn_trainer_component.in_memory import sampler as sampler_lib
from gnn_trainer_component.sampler.inputs import GraphInputError
from gnn_trainer_component.sampler.link import links

#: Candidate draws per wanted negative before giving up (a graph too dense).
_NEGATIVE_TRIES = 50


class EdgeKeys:
  """Membership of ``(u, v)`` pairs in an edge set, vectorized (sorted int64 keys)."""

  def __init__(self, source: np.ndarray, target: np.ndarray, num_nodes: int,
               undirected: bool):
    self._n = num_nodes
    self._undirected = undirected
    self.keys = np.unique(self._key(source, target))

  def _key(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    if self._undirected:
      u, v = np.minimum(u, v), np.maximum(u, v)
    return u * self._n + v

  def contains(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    key = self._key(u, v)
    at = np.minimum(np.searchsorted(self.keys, key), len(self.keys) - 1)
    return self.keys[at] == key if len(self.keys) else np.zeros(len(key), bool)

  def neighbours(self) -> tuple[np.ndarray, np.ndarray]:
    """``(indptr, targets)``: CSR of the pairs ``(u, w)`` held (both ways if undirected)."""
    source, target = np.divmod(self.keys, self._n)
    if self._undirected:
      source, target = np.r_[source, target], np.r_[target, source]
    order = np.lexsort((target, source))
    counts = np.bincount(source, minlength=self._n)
    return np.r_[0, np.cumsum(counts)].astype(np.int64), target[order]


def draw_negatives(rng: np.random.Generator, count: int, num_nodes: int, edges: EdgeKeys,
                   what: str) -> np.ndarray:
  """``count`` uniform ``(u, v)`` pairs that are no edge and no self pair ([count, 2])."""
  found, tries = [], 0
  missing = count
  while missing > 0:
    if tries > _NEGATIVE_TRIES * max(count, 1):
      raise GraphInputError(f"GnnTrainer: found only {count - missing} of {count} negatives "
                            f"for {what} after {tries} random pairs: the graph is too dense "
                            "for negatives_per_positive.")
    u = rng.integers(num_nodes, size=2 * missing + 16)
    v = rng.integers(num_nodes, size=2 * missing + 16)
    tries += len(u)
    ok = (u != v) & ~edges.contains(u, v)
    pairs = np.stack([u[ok], v[ok]], axis=1)[:missing]
    found.append(pairs)
    missing -= len(pairs)
  return np.concatenate(found).astype(np.int64) if found else np.zeros((0, 2), np.int64)


def _without_edges(graph: graph_lib.InMemoryGraph, edge_set: str, drop: EdgeKeys
                   ) -> graph_lib.InMemoryGraph:
  """``graph`` with the edges ``drop`` holds removed from ``edge_set`` (CSR kept)."""
  e = graph.edge_sets[edge_set]
  keep = ~drop.contains(e.source, e.target)
  counts = np.bincount(e.source[keep], minlength=len(e.indptr) - 1)
  kept = graph_lib.EdgeSet(
      source=e.source[keep], target=e.target[keep],
      indptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
      features={k: v[keep] for k, v in e.features.items()}, table=e.table)
  return dataclasses.replace(graph, edge_sets={**graph.edge_sets, edge_set: kept})


class LinkSubgraphSampler(dataset_lib.SubgraphSampler):
  """Link examples of one or more splits: rows ``< len(pairs)`` are the fixed
  pairs, the ``fresh`` rows after them new negatives drawn per batch."""

  def __init__(self, splits: "LinkSplits", pairs: np.ndarray, labels: np.ndarray, fresh: int):
    super().__init__(splits.message_graph, splits.plan, splits.schema)
    self._link = splits.link
    self._edges = splits.edge_keys
    self._num_nodes = splits.message_graph.node_sets[splits.plan.seed_node_set].size
    self._pairs = pairs
    self._labels = labels.astype(np.float32)
    self.num_rows = len(pairs) + fresh

  def _extra_dtypes(self) -> list[tf.DType]:
    return [tf.float32]

  def _sample(self, rows: np.ndarray, rng: np.random.Generator):
    fixed = rows < len(self._pairs)
    pairs = np.empty((len(rows), 2), np.int64)
    labels = np.zeros(len(rows), np.float32)
    pairs[fixed] = self._pairs[rows[fixed]]
    labels[fixed] = self._labels[rows[fixed]]
    pairs[~fixed] = draw_negatives(rng, int((~fixed).sum()), self._num_nodes, self._edges,
                                   "a training batch")
    exclude = sampler_lib.Exclusion(self._link.edge_set, pairs, self._link.undirected)
    return sampler_lib.sample(self.graph, self.plan, pairs, rng, exclude), [labels]

  def _extra_pieces(self, flat, num_graphs):
    labels = next(flat)
    labels.set_shape([None])
    dtype, splits_dtype = self.spec.indices_dtype, self.spec.row_splits_dtype
    ones = tf.ones([num_graphs, 1], dtype)
    one_each = tf.ones([num_graphs], splits_dtype)

    def ragged(values):
      return tf.RaggedTensor.from_row_lengths(values, one_each, validate=False)
    zeros = ragged(tf.zeros([num_graphs], dtype))
    edge_set = self.schema.edge_sets[self._link.edge_set]
    nodes = {links.READOUT: tfgnn.NodeSet.from_fields(
        sizes=ones, features={links.LABEL: ragged(labels)})}
    edges = {
        links.READOUT_SOURCE: tfgnn.EdgeSet.from_fields(sizes=ones, adjacency=tfgnn.Adjacency
                                                        .from_indices((edge_set.source, zeros),
                                                                      (links.READOUT, zeros))),
        links.READOUT_TARGET: tfgnn.EdgeSet.from_fields(sizes=ones, adjacency=tfgnn.Adjacency
                                                        .from_indices(
                                                            (edge_set.target,
                                                             ragged(tf.ones([num_graphs], dtype))),
                                                            (links.READOUT, zeros)))}
    return nodes, edges

  def _merged_extra_pieces(self, flat, offsets):
    """The readout of a merged batch: pair ``i``'s ends are its subgraph's first two nodes."""
    labels = next(flat)
    labels.set_shape([None])
    edge_set = self.schema.edge_sets[self._link.edge_set]
    start = offsets[edge_set.source]  # the link's edge set is within one node set
    dtype = start.dtype
    count = tf.shape(labels, out_type=dtype)
    readout = tf.range(count[0], dtype=dtype)
    nodes = {links.READOUT: tfgnn.NodeSet.from_fields(sizes=count,
                                                      features={links.LABEL: labels})}
    edges = {
        name: tfgnn.EdgeSet.from_fields(sizes=count, adjacency=tfgnn.Adjacency.from_indices(
            (node_set, start + end), (links.READOUT, readout)))
        for name, node_set, end in ((links.READOUT_SOURCE, edge_set.source, 0),
                                    (links.READOUT_TARGET, edge_set.target, 1))}
    return nodes, edges


@dataclasses.dataclass(frozen=True)
class LinkSplits:
  """The graph in memory and LinkSampler's supervised pairs of each split.

  Attributes:
    link: The validated ``link_config``.
    schema: LinkSampler's output schema (the readout sets added).
    message_graph: The graph without the held-out splits' positives.
    plan: The hops, from both ends of a pair.
    edge_keys: Every edge of the link edge set (negatives avoid them).
    positives: Split -> ``[P, 2]`` node indices.
    negatives: Split -> fixed ``[Q, 2]`` negatives (not the message split's:
      its negatives are drawn every epoch).
  """
  link: links.LinkConfig
  schema: tfgnn.GraphSchema
  message_graph: graph_lib.InMemoryGraph
  plan: sampler_lib.SamplingPlan
  edge_keys: EdgeKeys
  positives: Mapping[str, np.ndarray]
  negatives: Mapping[str, np.ndarray]

  #: Merged batches keep LinkSampler's spec (the pairs' readout is its own).
  merged_reads_out_seeds = False

  def merges_batches(self, tasks: Mapping[str, Any]) -> bool:
    """Link tasks read each pair through the ``_readout`` structure, which merging keeps."""
    del tasks
    return True

  def _fresh(self, split: str) -> int:
    return int(round(self.link.negatives_per_positive[split] * len(self.positives[split])))

  def _sampler(self, splits: Sequence[str], training: bool) -> LinkSubgraphSampler:
    pairs = np.concatenate([np.concatenate([self.positives[s], self.negatives[s]])
                            for s in splits])
    labels = np.concatenate([np.r_[np.ones(len(self.positives[s])),
                                   np.zeros(len(self.negatives[s]))] for s in splits])
    fresh = sum(self._fresh(s) for s in splits if s == self.link.message_split) if training else 0
    if not training and self.link.message_split in splits:
      raise GraphInputError(
          f"GnnTrainer: eval_args splits {list(splits)} include the message split "
          f"{self.link.message_split!r}, whose negatives are drawn during training.")
    return LinkSubgraphSampler(self, pairs, labels, fresh)

  def num_examples(self, splits: Sequence[str]) -> int:
    return sum(len(self.positives[s]) + (len(self.negatives[s]) or self._fresh(s))
               for s in splits)

  def provider(self, splits: Sequence[str], *, training: bool, batch_size: int,
               seed: Optional[int], merged: bool = False,
               drop_remainder: bool = False) -> dataset_lib.InMemoryDatasetProvider:
    """Training (shuffled, fresh negatives and samples every epoch) or validation pairs.

    ``merged``: one element per ``batch_size`` pairs, their subgraphs merged
    (the tasks read pairs through the ``_readout`` structure).
    """
    sampler = self._sampler(splits, training)
    return dataset_lib.InMemoryDatasetProvider(
        sampler, np.arange(sampler.num_rows), batch_size=batch_size, shuffle=training,
        fresh=training, seed=seed, what=f"link splits {', '.join(splits)}", merged=merged,
        drop_remainder=drop_remainder)

  def serialized_examples(self, splits: Sequence[str], n: int) -> list[bytes]:
    """Up to ``n`` examples of held-out ``splits`` as LinkSampler-format tf.Examples."""
    sampler = self._sampler(splits, training=False)
    rows = np.arange(min(n, sampler.num_rows))
    ds = sampler.dataset(rows, batch_size=max(1, len(rows)), shuffle=False, fresh=False,
                         seed=None)
    return [tfgnn.write_example(g).SerializeToString() for g in ds]


def load(graph: graph_lib.InMemoryGraph, input_schema: tfgnn.GraphSchema,
         link_config: Mapping[str, Any]) -> LinkSplits:
  """LinkSampler's split of ``link_config`` over the graph in memory.

  Raises:
    GraphInputError: an invalid link_config, or an edge set between two node
      sets (in memory, pairs are within one node set: use LinkSampler).
  """
  link = links.parse_link_config(input_schema, link_config)
  edge_set = input_schema.edge_sets[link.edge_set]
  if edge_set.source != edge_set.target:
    raise GraphInputError(
        f"GnnTrainer link_config: edge set {link.edge_set!r} goes from {edge_set.source!r} to "
        f"{edge_set.target!r}; in memory, link prediction needs an edge set within one node "
        "set. Pre-sample with LinkSampler and train on its examples.")
  spec = links.sampling_specs(input_schema, link)["source"]
  plan = sampler_lib.plan_from_spec(spec, input_schema)
  nodes = graph.node_sets[edge_set.source]
  e = graph.edge_sets[link.edge_set]
  ids = np.asarray(nodes.ids, dtype=object)
  positives = {}
  for split, pairs in links.split_links(zip(ids[e.source], ids[e.target]), link).items():
    flat = [i for pair in pairs for i in pair]
    positives[split] = graph.lookup(edge_set.source, flat, "link split").reshape(-1, 2)
  edge_keys = EdgeKeys(e.source, e.target, nodes.size, link.undirected)
  held_out = np.concatenate([positives[s] for s in link.held_out_splits] or
                            [np.zeros((0, 2), np.int64)])
  message_graph = _without_edges(graph, link.edge_set,
                                 EdgeKeys(held_out[:, 0], held_out[:, 1], nodes.size,
                                          link.undirected))
  negatives = {}
  for split in sorted(positives):
    rng = np.random.default_rng([link.seed, sorted(positives).index(split)])
    count = 0 if split == link.message_split else int(round(
        link.negatives_per_positive[split] * len(positives[split])))
    negatives[split] = draw_negatives(rng, count, nodes.size, edge_keys, f"split {split!r}")
  return LinkSplits(link=link, schema=links.output_graph_schema(input_schema, link),
                    message_graph=message_graph, plan=plan, edge_keys=edge_keys,
                    positives=positives, negatives=negatives)
