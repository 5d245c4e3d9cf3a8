"""Recommendation by id: a link model's export ranks every target node for a source id.

With ``custom_config["serve_by_node_id"]`` on link prediction in memory
(``link_config``), GnnTrainer's export holds the message-passing graph (the
snapshot of :mod:`served_sampler`), both ends' sampling plans and, computed at
export, the embedding of every target node read as the target of a pair (what
GnnTrainer's retrieval evaluation ranks with). Its signature ``recommend``
takes, per row:

* ``node_ids``: a source node's id;
* ``k``: int64, how many targets to return (1 to the number of target nodes);
* ``exclude_linked``: bool, leave out the targets the source already has an
  edge to in the snapshot (and the source itself within one node set).

It samples the source's subgraph (its end's hops), reads the source's embedding,
scores it against every target embedding with the task's own edge scorer (the
dot product, or the trained Hadamard layer) and returns ``target_ids`` and
``scores`` (``[batch, max k]``, best first; a row with a smaller ``k`` is padded
with empty ids, or -1, and score 0) and ``status``: :data:`~node_serving.SERVED`,
:data:`~node_serving.UNKNOWN_ID`, or :data:`BAD_K` (``k`` out of range; the row
gets nothing, the others are answered). Plain TensorFlow, as the rest of the
export.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Union

import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component import process
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.model import embeddings as embeddings_lib
from gnn_trainer_component.model import node_serving
from gnn_trainer_component.model import served_sampler

#: The signature, and its inputs and outputs.
SIGNATURE = "recommend"
K, EXCLUDE_LINKED = "k", "exclude_linked"
TARGET_IDS, SCORES = "target_ids", "scores"
#: ``status`` of a row whose ``k`` is not in [1, number of target nodes].
BAD_K = node_serving.BAD_K
#: Target nodes embedded per call at export.
EXPORT_BATCH = 1024


@dataclasses.dataclass(frozen=True)
class ServedLinks:
  """What a link model's export needs to recommend by id.

  Attributes:
    snapshot: The message-passing graph's arrays.
    end_plans: ``"source"`` / ``"target"`` -> the hops from that end alone.
    schema: The link examples' schema (the readout sets added).
    edge_set: The predicted edge set.
    task: The trained link task (its edge scorer scores the pairs).
  """
  snapshot: served_sampler.Snapshot
  end_plans: Mapping[str, sampling.SamplingPlan]
  schema: tfgnn.GraphSchema
  edge_set: str
  task: Any

  @property
  def end_node_sets(self) -> tuple[str, str]:
    edge_set = self.schema.edge_sets[self.edge_set]
    return edge_set.source, edge_set.target

  def check(self, who: str, budget_bytes: int) -> None:
    """Refuses what cannot recommend by id, before training (GraphInputError)."""
    for plan in self.end_plans.values():
      served_sampler.check_plan(plan, who)
    if not callable(getattr(self.task, "_compute_edge_scores", None)):
      raise GraphInputError(
          f"{who}: serve_by_node_id recommends with the edge scorer of the module's link "
          "task, and needs exactly one (TF-GNN's runner.DotProductLinkPrediction or "
          "HadamardProductLinkPrediction, or a subclass); this module has "
          f"{'several or none' if self.task is None else type(self.task).__name__}.")
    node_serving.check_budget(self.snapshot, who, budget_bytes)

  def functions(self, run_result: Any, **unused: Any
                ) -> tuple["Recommender", dict[str, Any], dict[str, Any]]:
    """:func:`functions` of these links (what a node model's export also takes, unused)."""
    del unused
    return functions(run_result, self)


class Recommender(tf.Module):
  """The snapshot, the target ids and embeddings, and the scorer: ``recommend``'s state."""

  def __init__(self, run_result: Any, served: ServedLinks):
    super().__init__(name="recommender")
    source_set, target_set = served.end_node_sets
    self.sampler = served_sampler.ServedSampler(served.snapshot, served.end_plans,
                                                served.schema)
    self._served = served
    self._run_result = run_result
    self._spec = tfgnn.create_graph_spec_from_schema_pb(served.schema)
    self._preprocessing = run_result.preprocess_model.layers[-1]
    other = None if source_set == target_set else target_set
    self._pairs = {
        "source": node_serving.PairEnds("source", source_set, other),
        "target": node_serving.PairEnds("target", target_set,
                                        None if other is None else source_set)}
    with tf.init_scope(), tf.device("/cpu:0"):
      ids = served.snapshot.node_ids[target_set]
      self.target_ids = tf.Variable(ids, dtype=tf.string if ids.dtype == object else tf.int64,
                                    trainable=False, name="target_ids")
      self.target_embeddings = tf.Variable(self._embed_targets(len(ids)), trainable=False,
                                           name="target_embeddings")

  def embed(self, end: str, roots: tf.Tensor, seeds: tf.Tensor) -> tf.Tensor:
    """The embedding of each root read as ``end`` of a pair, on its end's hops."""
    num_graphs = tf.size(roots, out_type=tf.int64)
    sampled = self.sampler.sample(end, roots, seeds,
                                  tf.fill([num_graphs], tf.constant(float("inf"), tf.float64)))
    graph = node_serving.graph_tensor(self.sampler, sampled, self._spec, num_graphs,
                                      pair=self._pairs[end])
    gnn_inputs, *_ = self._preprocessing(graph)
    read = embeddings_lib.read(self._served.task, self._run_result.base_model(gnn_inputs))
    return read[f"{end}_{embeddings_lib.EMBEDDING}"]

  def _embed_targets(self, num_targets: int) -> tf.Tensor:
    """Every target node's embedding, :data:`EXPORT_BATCH` at a time (seed 0)."""
    embed = process.trace(lambda roots: self.embed("target", roots, tf.zeros_like(roots)),
                          [tf.TensorSpec([None], tf.int64)], "the recommender's targets")
    parts = [embed(tf.range(start, min(start + EXPORT_BATCH, num_targets), dtype=tf.int64))
             for start in range(0, num_targets, EXPORT_BATCH)]
    return tf.concat(parts, 0)

  def scores(self, sources: tf.Tensor) -> tf.Tensor:
    """``[sources, targets]``: the task's edge scores of each source against every target."""
    count = tf.shape(sources)[0]
    targets = self.target_embeddings
    num_targets = tf.shape(targets)[0]
    # TF-GNN has no public API for the edge scores (as GnnTrainer's retrieval).
    scores = self._served.task._compute_edge_scores(  # pylint: disable=protected-access
        tf.repeat(sources, num_targets, axis=0), tf.tile(targets, [count, 1]))
    return tf.reshape(scores, [count, num_targets])

  def linked(self, roots: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``(row, target)`` of each root's edges in the predicted edge set (and itself)."""
    indptr = self.sampler.indptr[self._served.edge_set]
    start = tf.gather(indptr, roots)
    rows, offsets = served_sampler.run_offsets(tf.gather(indptr, roots + 1) - start)
    targets = tf.gather(self.sampler.targets[self._served.edge_set],
                        tf.gather(start, rows) + offsets)
    source_set, target_set = self._served.end_node_sets
    if source_set == target_set:
      rows = tf.concat([rows, tf.range(tf.size(roots, out_type=tf.int64))], 0)
      targets = tf.concat([targets, roots], 0)
    return rows, targets


def _top(recommender: Recommender, roots: tf.Tensor, k: tf.Tensor,
         exclude: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """``(target indices, scores, kept)``: each root's best ``max(k)`` targets."""
  scores = recommender.scores(recommender.embed("source", roots, tf.zeros_like(roots)))
  rows, targets = recommender.linked(roots)
  excluded = tf.gather(exclude, rows)
  scores = tf.tensor_scatter_nd_update(
      scores, tf.stack([tf.boolean_mask(rows, excluded), tf.boolean_mask(targets, excluded)], 1),
      tf.fill([tf.reduce_sum(tf.cast(excluded, tf.int32))], tf.constant(-float("inf"),
                                                                        scores.dtype)))
  values, indices = tf.math.top_k(scores, k=tf.cast(tf.reduce_max(k), tf.int32))
  kept = ((tf.range(tf.shape(values, out_type=tf.int64)[1])[tf.newaxis, :] < k[:, tf.newaxis])
          & (values > -float("inf")))
  return tf.cast(indices, tf.int64), values, kept


def functions(run_result: Any, served: ServedLinks
              ) -> tuple[Recommender, dict[str, Any], dict[str, Any]]:
  """``(the module, {"recommend": traced function}, the asset's description)``."""
  recommender = Recommender(run_result, served)
  source_set, target_set = served.end_node_sets
  num_targets = len(served.snapshot.node_ids[target_set])
  id_dtype = recommender.sampler.ids[source_set].key_dtype
  missing = "" if recommender.target_ids.dtype == tf.string else -1

  def recommend(node_ids, k, exclude_linked):
    index = recommender.sampler.lookup(source_set, node_ids)
    good_k = (k >= 1) & (k <= num_targets)
    rows = tf.where((index != served_sampler.UNKNOWN) & good_k)[:, 0]
    # At least one source through the model: node 0 when no row is served.
    pad = node_serving.stand_in(rows)
    indices, values, kept = _top(
        recommender, node_serving.padded(tf.gather(index, rows), pad, 0),
        node_serving.padded(tf.gather(k, rows), pad, 0),
        node_serving.padded(tf.gather(exclude_linked, rows), pad, False))
    served_rows = tf.size(rows)
    indices, values, kept = indices[:served_rows], values[:served_rows], kept[:served_rows]
    shape = tf.stack([tf.size(node_ids, out_type=tf.int64), tf.shape(values, tf.int64)[1]])
    ids = tf.where(kept, tf.gather(recommender.target_ids, indices), missing)
    return {
        TARGET_IDS: tf.tensor_scatter_nd_update(
            tf.fill(shape, tf.constant(missing, recommender.target_ids.dtype)),
            rows[:, tf.newaxis], ids),
        SCORES: node_serving.scatter_rows(tf.where(kept, values, 0.0), rows, shape[0]),
        node_serving.STATUS: tf.where(
            index == served_sampler.UNKNOWN, node_serving.UNKNOWN_ID,
            tf.where(good_k, node_serving.SERVED, BAD_K))}

  traced = process.trace(recommend, [tf.TensorSpec([None], id_dtype, name=node_serving.NODE_IDS),
                                     tf.TensorSpec([None], tf.int64, name=K),
                                     tf.TensorSpec([None], tf.bool, name=EXCLUDE_LINKED)],
                         f"The {SIGNATURE} signature")
  description = {
      "node_set": source_set, "target_node_set": target_set, "num_targets": num_targets,
      "id_dtype": id_dtype.name, "signatures": [SIGNATURE], "edge_set": served.edge_set,
      "ops": {end: node_serving.describe_ops(plan) for end, plan in served.end_plans.items()},
      "snapshot_bytes": served.snapshot.nbytes}
  return recommender, {SIGNATURE: traced}, description


#: What an export serves by id: a node model's graph, or a link model's.
ServedById = Union[node_serving.ServedGraph, ServedLinks]
