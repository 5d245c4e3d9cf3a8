"""The served index: a SavedModel that TensorFlow alone loads and TF Serving or Vertex serves.

The stock Pusher pushes it as it pushes a Model.

Signatures (K is ``index_config``'s ``k``):

* ``serving_default``: ``embedding`` ``[batch, d]`` float32 -> ``ids`` ``[batch, K]`` (the
  indexed nodes' ids, best first) and ``scores`` ``[batch, K]`` (inner product; cosine: of
  the unit vectors).
* ``neighbours``: ``ids`` ``[batch]`` string (indexed ids) -> the same for each node's own
  vector, the node itself left out. An id not in the index fails the call, naming it.

The search is :class:`build.Layout`'s: exact scores every vector; ``ivf`` scores the
centroids, then the vectors of the ``nprobe`` best lists (a variable of the module, so the
gate tunes it before the export).
"""

from __future__ import annotations

import tensorflow as tf

from gnn_trainer_component.index import build as build_lib
from gnn_trainer_component.index import config as config_lib

#: The signature of neighbours by id (``serving_default`` takes an embedding).
NEIGHBOURS = "neighbours"


class IndexModule(tf.Module):
  """The layout's arrays as variables and the search over them (:mod:`serving`)."""

  def __init__(self, layout: build_lib.Layout, k: int, nprobe: int = 1):
    super().__init__(name="embedding_index")
    n, dim = layout.vectors.shape
    self._k, self._dim = min(k, n), dim
    self._exact = layout.kind == config_lib.EXACT
    self._cosine = layout.metric == config_lib.COSINE
    self.ids = tf.Variable(build_lib.id_bytes(layout.ids), dtype=tf.string, trainable=False,
                           name="ids")
    self.vectors = tf.Variable(layout.vectors, trainable=False, name="vectors")
    self.centroids = tf.Variable(layout.centroids, trainable=False, name="centroids")
    self.offsets = tf.Variable(layout.offsets, trainable=False, name="offsets")
    self.nprobe = tf.Variable(max(1, min(nprobe, max(layout.nlist, 1))), dtype=tf.int32,
                              trainable=False, name="nprobe")
    self.rows = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(self.ids, tf.range(n, dtype=tf.int64)), -1)
    spec = tf.TensorSpec([None, dim], tf.float32, name="embedding")
    self.search = tf.function(self._search_signature, input_signature=[spec])
    self.neighbours = tf.function(self._neighbours_signature,
                                  input_signature=[tf.TensorSpec([None], tf.string, name="ids")])

  def floats_per_query(self) -> int:
    """About how many floats one query's search holds.

    Exact: a score per vector; ivf: its lists' vectors (on average).
    """
    n = int(self.vectors.shape[0])
    if self._exact:
      return n
    lists = int(self.centroids.shape[0])
    return max(1, int(self.nprobe.numpy()) * -(-n // lists) * self._dim)

  def _scores(self, queries: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``(rows [b, c], scores [b, c])``: each query's candidate rows and their scores.

    Candidates past a query's own (ivf: lists of different sizes) score ``-inf``.
    """
    if self._exact:
      scores = tf.matmul(queries, self.vectors, transpose_b=True)
      rows = tf.broadcast_to(tf.range(tf.shape(scores, tf.int64)[1]), tf.shape(scores, tf.int64))
      return rows, scores
    nprobe = tf.minimum(self.nprobe, tf.shape(self.centroids)[0])
    _, lists = tf.math.top_k(tf.matmul(queries, self.centroids, transpose_b=True), nprobe)
    starts, limits = tf.gather(self.offsets, lists), tf.gather(self.offsets, lists + 1)
    rows = tf.ragged.range(tf.reshape(starts, [-1]), tf.reshape(limits, [-1]))
    rows = tf.RaggedTensor.from_uniform_row_length(rows, tf.cast(nprobe, tf.int64))
    rows = rows.merge_dims(1, 2)
    scores = tf.reduce_sum(tf.gather(self.vectors, rows.values)
                           * tf.repeat(queries, rows.row_lengths(), axis=0), axis=1)
    scores = rows.with_flat_values(scores).to_tensor(float("-inf"))
    return rows.to_tensor(-1), scores

  def top_k(self, queries: tf.Tensor, k: int) -> tuple[tf.Tensor, tf.Tensor]:
    """``(rows [b, k], scores [b, k])``, best first; ``-1`` / ``-inf`` past the candidates."""
    queries = tf.convert_to_tensor(queries, tf.float32)
    if self._cosine:
      queries = tf.math.l2_normalize(queries, axis=1)
    rows, scores = self._scores(queries)
    width = tf.shape(scores)[1]
    pad = tf.maximum(k - width, 0)  # fewer candidates than k: padded, as unfound
    scores = tf.pad(scores, [[0, 0], [0, pad]], constant_values=float("-inf"))
    rows = tf.pad(rows, [[0, 0], [0, pad]], constant_values=-1)
    best, at = tf.math.top_k(scores, k)
    return tf.where(tf.math.is_finite(best), tf.gather(rows, at, batch_dims=1), -1), best

  def _answer(self, rows: tf.Tensor, scores: tf.Tensor) -> dict[str, tf.Tensor]:
    ids = tf.where(rows >= 0, tf.gather(self.ids, tf.maximum(rows, 0)), "")
    return {"ids": ids, "scores": scores}

  def _search_signature(self, embedding: tf.Tensor) -> dict[str, tf.Tensor]:
    tf.debugging.assert_equal(tf.shape(embedding)[1], self._dim, message=(
        f"EmbeddingIndex: the embedding must have {self._dim} values, as the indexed ones"))
    return self._answer(*self.top_k(embedding, self._k))

  def _neighbours_signature(self, ids: tf.Tensor) -> dict[str, tf.Tensor]:
    own = self.rows.lookup(ids)
    unknown = tf.boolean_mask(ids, own < 0)
    known = tf.debugging.Assert(tf.equal(tf.size(unknown), 0),
                                ["EmbeddingIndex: ids not in the index:", unknown[:5]],
                                summarize=5)
    with tf.control_dependencies([known]):  # the named error first, not the gather's
      own = tf.identity(own)
    rows, scores = self.top_k(tf.gather(self.vectors, own), self._k + 1)
    others = rows != own[:, tf.newaxis]
    rows = tf.ragged.boolean_mask(rows, others).to_tensor(-1)[:, :self._k]
    scores = tf.ragged.boolean_mask(scores, others).to_tensor(float("-inf"))[:, :self._k]
    return self._answer(rows, scores)


def save(module: IndexModule, path: str) -> None:
  """Writes the module as a SavedModel with its two signatures."""
  tf.saved_model.save(module, path, signatures={
      "serving_default": module.search.get_concrete_function(),
      NEIGHBOURS: module.neighbours.get_concrete_function()})
