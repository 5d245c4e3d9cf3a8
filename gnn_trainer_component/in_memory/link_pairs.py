"""Link prediction on the graph in memory: LinkSampler's split and leakage rules, fresh negatives.

GnnTrainer with ``link_config`` (LinkSampler's) instead of examples loads the
graph once and builds, per split, the supervised pairs LinkSampler would, with
the graph core's rules (:func:`gnn_trainer_component.graph.links.supervise`). Each
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

from gnn_trainer_component.graph import csr
from gnn_trainer_component.graph import link_config as link_config_lib
from gnn_trainer_component.graph import links
from gnn_trainer_component.graph import negatives as negatives_lib
from gnn_trainer_component.graph import plan as graph_plan
from gnn_trainer_component.graph import readout
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.in_memory import dataset as dataset_lib
from gnn_trainer_component.in_memory import full_graph
from gnn_trainer_component.in_memory import kernel
from gnn_trainer_component.in_memory import store as store_lib

_WHO = "GnnTrainer"

#: The extra of a link example's sampled batch: each pair's label (1.0 positive, 0.0 negative).
LABELS = "labels"
#: The extras of the pairs' ``edge_features``: this prefix and the feature's name.
_PAIR_EXTRA = "pair/"


class LinkSubgraphSampler(dataset_lib.SubgraphSampler):
  """Link examples of one or more splits.

  Rows ``< len(pairs)`` are the fixed pairs, the ``fresh`` rows after them new negatives drawn
  per batch. ``features``: ``edge_features`` -> each fixed pair's own edge's values, on
  the pair's node of :data:`readout.PAIR` (pairs with them are edges: no fresh rows).
  """

  no_deduplication = ("link prediction samples each pair's own subgraph, without the "
                      "pair's own edge")

  def __init__(self, splits: "LinkSplits", pairs: np.ndarray, labels: np.ndarray, fresh: int,
               times: Optional[np.ndarray] = None,
               features: Optional[Mapping[str, np.ndarray]] = None):
    super().__init__(splits.message_graph, splits.plan, splits.schema)
    self._times = times
    # Fresh negatives of a time split: each at the time of a message-split positive.
    self._fresh_times = splits.positive_times.get(splits.link.message_split)
    self._node_times = splits.node_times
    self._check = splits.check_leakage
    self._link = splits.link
    self._edges = splits.edge_keys
    self._ends = splits.end_node_sets
    self._target_cdf = splits.target_cdf
    self._sizes = [splits.message_graph.node_sets[n].size for n in self._ends]
    self._pairs = pairs
    self._labels = labels.astype(np.float32)
    pair_spec = self.spec.node_sets_spec.get(readout.PAIR)
    self._features = {name: np.asarray(values, pair_spec[name].dtype.as_numpy_dtype)
                      for name, values in (features or {}).items()}
    if self._features and fresh:
      raise ValueError("pairs with edge_features are edges: they get no fresh negatives")
    self.num_rows = len(pairs) + fresh

  def _extra_dtypes(self) -> dict[str, tf.DType]:
    return {LABELS: tf.float32, **{_PAIR_EXTRA + name: spec.dtype
                                   for name, spec in self.pair_feature_specs().items()}}

  def features_of(self, rows: np.ndarray) -> dict[str, np.ndarray]:
    """``edge_features`` -> the values of ``rows``' pairs (none: no such features)."""
    return {name: values[rows] for name, values in self._features.items()}

  def pair_feature_specs(self) -> dict[str, tf.TensorSpec]:
    """``edge_features`` -> the spec of its values on node set :data:`readout.PAIR`."""
    return {name: self.spec.node_sets_spec[readout.PAIR][name] for name in self._features}

  def _pair_features(self, extras) -> dict[str, tf.Tensor]:
    """The pairs' ``edge_features`` among a batch's extras, shaped as the schema says."""
    out = {}
    for name, spec in self.pair_feature_specs().items():
      value = extras[_PAIR_EXTRA + name]
      value.set_shape(spec.shape)
      out[name] = value
    return out

  def pairs_of(self, rows: np.ndarray, rng: np.random.Generator
               ) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """``(pairs [rows, 2], labels, the fresh negatives' times or None)`` of ``rows``.

    Fixed rows are their pairs; fresh rows get new negatives from ``rng``.
    """
    fixed = rows < len(self._pairs)
    pairs = np.empty((len(rows), 2), np.int64)
    labels = np.zeros(len(rows), np.float32)
    pairs[fixed] = self._pairs[rows[fixed]]
    labels[fixed] = self._labels[rows[fixed]]
    fresh_times = None
    if self._node_times is not None:  # each fresh negative's time first: its ends exist then
      fresh_times = rng.choice(self._fresh_times, int((~fixed).sum()))
      pairs[~fixed] = negatives_lib.draw_negatives_at(
          rng, fresh_times, self._node_times, self._edges,
          one_node_set=self._ends[0] == self._ends[1], what="a training batch", who=_WHO,
          target_cdf=self._target_cdf)
    else:
      pairs[~fixed] = negatives_lib.draw_negatives(
          rng, int((~fixed).sum()), *self._sizes, self._edges,
          one_node_set=self._ends[0] == self._ends[1], what="a training batch", who=_WHO,
          target_cdf=self._target_cdf)
    return pairs, labels, fresh_times

  def exclusion(self, pairs: np.ndarray) -> kernel.Exclusion:
    """The pairs' own edges, which they must not see (in either direction if undirected)."""
    return kernel.Exclusion(self._link.edge_set, pairs, self._link.undirected,
                            self._link.reverse_edge_set)

  def _sample(self, rows: np.ndarray, rng: np.random.Generator):
    fixed = rows < len(self._pairs)
    pairs, labels, fresh_times = self.pairs_of(rows, rng)
    exclude = self.exclusion(pairs)
    extras = {LABELS: labels, **{_PAIR_EXTRA + name: values
                                 for name, values in self.features_of(rows).items()}}
    if self._times is None:
      return kernel.sample(self.graph, self.plan, pairs, rng, exclude), extras
    times = np.empty(len(rows))
    times[fixed] = self._times[rows[fixed]]
    times[~fixed] = (rng.choice(self._fresh_times, int((~fixed).sum()))
                     if fresh_times is None else fresh_times)
    sub = kernel.sample(self.graph, self.plan, pairs, rng, exclude, times=times)
    if self._check:
      kernel.check_leaks(self.graph, self.plan, sub, pairs, times,
                         node_time=self._link.node_time)
    return sub, extras

  def _extra_pieces(self, extras, num_graphs):
    labels = extras[LABELS]
    labels.set_shape([None])
    dtype, splits_dtype = self.spec.indices_dtype, self.spec.row_splits_dtype
    ones = tf.ones([num_graphs, 1], dtype)
    one_each = tf.ones([num_graphs], splits_dtype)

    def ragged(values):
      return tf.RaggedTensor.from_row_lengths(values, one_each, validate=False)
    zeros = ragged(tf.zeros([num_graphs], dtype))
    nodes = {readout.READOUT: tfgnn.NodeSet.from_fields(
        sizes=ones, features={readout.LABEL: ragged(labels)})}
    edges = {
        name: tfgnn.EdgeSet.from_fields(sizes=ones, adjacency=tfgnn.Adjacency.from_indices(
            (node_set, ragged(tf.fill([num_graphs], tf.constant(local, dtype)))),
            (readout.READOUT, zeros)))
        for name, node_set, local in self._readout_ends()}
    features = self._pair_features(extras)
    if features:
      nodes[readout.PAIR] = tfgnn.NodeSet.from_fields(sizes=ones, features={
          name: tf.RaggedTensor.from_row_lengths(value, one_each, validate=False)
          for name, value in features.items()})
      edges[readout.READOUT_PAIR] = tfgnn.EdgeSet.from_fields(
          sizes=ones, adjacency=tfgnn.Adjacency.from_indices((readout.PAIR, zeros),
                                                             (readout.READOUT, zeros)))
    return nodes, edges

  def _write_extra_pieces(self, examples: list[tf.train.Example],
                          extras: dict[str, np.ndarray]) -> None:
    """Each pair's readout and label (:func:`readout.add_pair_readout`), as LinkSampler's."""
    (_, _, source), (_, _, target) = self._readout_ends()
    for i, (example, label) in enumerate(zip(examples, extras[LABELS].tolist(), strict=True)):
      readout.add_pair_readout(example, source, target, label=label, features={
          name: extras[_PAIR_EXTRA + name][i:i + 1] for name in self._features})

  def _readout_ends(self) -> list[tuple[str, str, int]]:
    """``(readout edge set, node set, index of the end in its subgraph's node set)``.

    The ends are their subgraph's first nodes of their node sets, the source first.
    """
    source, target = self._ends
    return [(readout.READOUT_SOURCE, source, 0),
            (readout.READOUT_TARGET, target, 1 if source == target else 0)]

  def _merged_extra_pieces(self, extras, offsets):
    """The readout of a merged batch: pair ``i``'s ends are its subgraph's first two nodes."""
    labels = extras[LABELS]
    labels.set_shape([None])
    dtype = offsets[self._ends[0]].dtype
    count = tf.shape(labels, out_type=dtype)
    readout_nodes = tf.range(count[0], dtype=dtype)
    nodes = {readout.READOUT: tfgnn.NodeSet.from_fields(sizes=count,
                                                      features={readout.LABEL: labels})}
    edges = {
        name: tfgnn.EdgeSet.from_fields(sizes=count, adjacency=tfgnn.Adjacency.from_indices(
            (node_set, offsets[node_set] + local), (readout.READOUT, readout_nodes)))
        for name, node_set, local in self._readout_ends()}
    pair_nodes, pair_edges = readout.pair_pieces(self._pair_features(extras), readout_nodes)
    return {**nodes, **pair_nodes}, {**edges, **pair_edges}


@dataclasses.dataclass(frozen=True)
class LinkSplits:
  """The graph in memory and LinkSampler's supervised pairs of each split.

  Attributes:
    link: The validated ``link_config``.
    schema: LinkSampler's output schema (the readout sets added).
    message_graph: The graph without the held-out splits' positives (nor their
      copies in the reverse edge set).
    plan: The hops, from both ends of a pair (its two roots).
    end_plans: ``"source"`` / ``"target"`` -> the hops from that end alone.
    edge_keys: Every edge of the link edge set (negatives avoid them).
    positives: Split -> ``[P, 2]`` node indices.
    negatives: Split -> fixed ``[Q, 2]`` negatives (not the message split's:
      its negatives are drawn every epoch).
    target_cdf: How negative targets are drawn (None: uniform; see
      :class:`links.Supervision`).
    positive_times, negative_times: ``time_split``: each pair's time (the
      query's: its subgraph holds only edges before it); else empty.
    check_leakage: Time-split samples are checked for edges after their
      pair's time (:func:`kernel.check_leaks`).
    node_times: ``node_time``: when each source and target node appears
      (negatives are drawn among the nodes there at their time); else None.
    values: ``edge_label``: split -> each positive's label; else empty.
    features: ``edge_features``: split -> feature -> each positive's values; else empty.
  """
  link: link_config_lib.LinkConfig
  schema: tfgnn.GraphSchema
  message_graph: store_lib.InMemoryGraph
  plan: sampling.SamplingPlan
  end_plans: Mapping[str, sampling.SamplingPlan]
  edge_keys: negatives_lib.EdgeKeys
  positives: Mapping[str, np.ndarray]
  negatives: Mapping[str, np.ndarray]
  target_cdf: Optional[np.ndarray] = None
  positive_times: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
  negative_times: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
  check_leakage: bool = True
  node_times: Optional[tuple[np.ndarray, np.ndarray]] = None
  values: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
  features: Mapping[str, Mapping[str, np.ndarray]] = dataclasses.field(default_factory=dict)

  @property
  def end_node_sets(self) -> tuple[str, str]:
    """The node sets of the source and of the target of the predicted edges."""
    edge_set = self.schema.edge_sets[self.link.edge_set]
    return edge_set.source, edge_set.target

  #: Merged batches keep LinkSampler's spec (the pairs' readout is its own).
  merged_reads_out_seeds = False

  def merges_batches(self, tasks: Mapping[str, Any]) -> bool:
    """Link tasks read each pair through the ``_readout`` structure, which merging keeps."""
    del tasks
    return True

  def _fresh(self, split: str) -> int:
    return self.link.negatives_for(split, len(self.positives[split]))

  def pair_sampler(self, splits: Sequence[str], training: bool) -> LinkSubgraphSampler:
    """The pairs of ``splits``: positives, then fixed negatives, split by split (row order).

    ``training`` adds the rows of fresh negatives of the message split.
    """
    pairs = np.concatenate([np.concatenate([self.positives[s], self.negatives[s]])
                            for s in splits])
    labels = np.concatenate([links.pair_labels(self.positives[s], self.negatives[s],
                                               self.values.get(s)) for s in splits])
    fresh = sum(self._fresh(s) for s in splits if s == self.link.message_split) if training else 0
    if not training and self.link.message_split in splits:
      raise GraphInputError(
          f"GnnTrainer: eval_args splits {list(splits)} include the message split "
          f"{self.link.message_split!r}, whose negatives are drawn during training.")
    times = None
    if self.link.time:
      times = np.concatenate([np.concatenate([self.positive_times[s],
                                              self.negative_times.get(s, np.zeros(0))])
                              for s in splits])
    features = {name: np.concatenate([self.features[s][name] for s in splits])
                for name in self.link.edge_features}
    return LinkSubgraphSampler(self, pairs, labels, fresh, times=times, features=features)

  def held_out_tables(self) -> dict[str, str]:
    """Held-out split -> CSV ``source,target,label`` of its pairs by node id (1: an edge)."""
    source, target = (self.message_graph.node_sets[n].ids for n in self.end_node_sets)
    return {split: links.pairs_csv(self.positives[split], self.negatives[split], source, target,
                                   self.values.get(split))
            for split in self.link.held_out_splits}

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
    sampler = self.pair_sampler(splits, training)
    return dataset_lib.InMemoryDatasetProvider(
        sampler, np.arange(sampler.num_rows), batch_size=batch_size, shuffle=training,
        fresh=training, seed=seed, what=f"link splits {', '.join(splits)}", merged=merged,
        drop_remainder=drop_remainder)

  def whole_provider(self, whole: tfgnn.GraphTensor, splits: Sequence[str], *, training: bool,
                     batch_size: int, seed: Optional[int]
                     ) -> full_graph.LinkFullGraphDatasetProvider:
    """The whole message-passing graph ``whole`` with ``batch_size`` pairs read out per step.

    Training: shuffled, fresh negatives every epoch; validation: every pair in one step. Each
    step's graph lacks its pairs' own edges.
    """
    sampler = self.pair_sampler(splits, training)
    graph = self.message_graph

    def own_edges(pairs):
      exclusion = sampler.exclusion(pairs)
      return {name: exclusion.own_edges(name, graph.edge_sets[name].source,
                                        graph.edge_sets[name].target)
              for name in exclusion.edge_sets}

    return full_graph.LinkFullGraphDatasetProvider(
        whole, self.end_node_sets, sampler.num_rows, sampler.pairs_of, own_edges,
        pairs_per_step=batch_size if training else sampler.num_rows, shuffle=training,
        fresh=training, seed=seed, features_of=sampler.features_of,
        feature_specs=sampler.pair_feature_specs())

  def serialized_examples(self, splits: Sequence[str], n: int, *, step: int = 1) -> list[bytes]:
    """Up to ``n`` examples of held-out ``splits`` as LinkSampler-format tf.Examples.

    The pairs in order (each split's positives, then its negatives), every ``step``-th.
    """
    sampler = self.pair_sampler(splits, training=False)
    return sampler.serialized_examples(np.arange(0, sampler.num_rows, step)[:n])


def split(graph: store_lib.InMemoryGraph, plan: graph_plan.GraphPlan, *,
          who: str = _WHO) -> LinkSplits:
  """LinkSampler's split of ``plan.link`` over the graph in memory (the graph core's rules).

  The message-passing graph is ``graph`` without the held-out splits'
  positives, in the predicted edge set and (reversed) in its reverse edge set
  (CSR order kept).

  Raises:
    GraphInputError: an edge set with too few edges for the splits, or a graph
      too dense for the negatives asked.
  """
  link = plan.link
  edge_set = graph.schema.edge_sets[link.edge_set]
  e = graph.edge_sets[link.edge_set]
  node_times = (tuple(graph.node_sets[n].features[link.node_time]
                      for n in (edge_set.source, edge_set.target)) if link.node_time else None)
  pairs = links.supervise(link, graph.node_sets[edge_set.source].ids,
                          graph.node_sets[edge_set.target].ids, e.source, e.target,
                          one_node_set=edge_set.source == edge_set.target,
                          negatives_for=link.held_out_splits, who=who,
                          times=e.features[link.time] if link.time else None,
                          node_times=node_times, table=e.table,
                          columns=e.features)
  kept = {}
  for name, reverse in ((link.edge_set, False), (link.reverse_edge_set, True)):
    if name:  # the held-out positives leave the graph, CSR order kept
      e = graph.edge_sets[name]
      keep = ~pairs.held_out.contains(*((e.target, e.source) if reverse
                                        else (e.source, e.target)))
      if keep.all():  # nothing held out (a time split): the edge set and its indexes stay
        continue
      kept[name] = store_lib.EdgeSet(
          source=e.source[keep], target=e.target[keep],
          indptr=csr.indptr(e.source[keep], len(e.indptr) - 1),
          features={k: v[keep] for k, v in e.features.items()}, table=e.table)
  return LinkSplits(link=link, schema=plan.output_schema,
                    message_graph=dataclasses.replace(
                        graph, edge_sets={**graph.edge_sets, **kept}),
                    plan=plan.sampling, end_plans=plan.end_plans, edge_keys=pairs.known,
                    positives=pairs.positives, negatives=pairs.negatives,
                    target_cdf=pairs.target_cdf, positive_times=pairs.times,
                    negative_times=pairs.negative_times, node_times=node_times,
                    values=pairs.values, features=pairs.features)

