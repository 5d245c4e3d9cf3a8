"""Baselines from the predicted edge set's interactions: neighbourhood kNN, EdgeBank, recency.

What a recommender or a temporal link model must beat besides popularity:

* :class:`KnnScores`, between two node sets (users -> items), on the
  message-passing graph's edges of the predicted edge set as a binary
  source x target matrix ``R``. ``item_knn``: the cosine similarity of two
  targets over their sources; each target keeps its ``k`` most similar other
  targets, and a pair's score is the sum of the target's kept similarities to
  the targets the source has (``R @ W.T``; the item-based CF of Sarwar et al.,
  2001, as the RecSys 2019 reproducibility study runs it). ``user_knn``: the
  same between sources; a pair's score is the sum of the source's kept
  similarities to the sources that have the target (``W @ R``).
* :class:`EdgeHistory`, for a split by time, each pair as of its time (the
  edges before it; at it too with ``inclusive``), over every split's edges of
  the predicted edge set as the temporal graph benchmark's EdgeBank keeps
  them: ``edgebank`` 1 if the pair was an edge before, else 0;
  ``edgebank_window`` 1 if it was within ``window`` before; ``recency`` the
  time of the pair's latest edge (never: ``-inf``), so a source's most recent
  targets come first.

Pure numpy and scipy.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import scipy.sparse

from gnn_trainer_component.evaluator import config as config_lib

(ITEM_KNN, USER_KNN, EDGEBANK, EDGEBANK_WINDOW,
 RECENCY) = config_lib.BASELINES[config_lib.LINK_PREDICTION][3:]
#: The neighbour counts ``knn_neighbours: null`` chooses among on the validation split.
NEIGHBOUR_CHOICES = (10, 20, 50, 100, 200)
#: Neighbours without a validation split to choose on (the RecSys 2019 study's ItemKNN default).
DEFAULT_NEIGHBOURS = 50
#: Similarities computed per block of rows (rows x columns, dense), to bound memory.
_CELLS_PER_BLOCK = 2**20
#: Pairs scored per block (a popular target's row holds many sources).
_PAIRS_PER_BLOCK = 4096


def _top_k_rows(similar: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
  """``(rows, columns)`` of each row's ``k`` largest positive entries (ties: lower columns)."""
  if k < similar.shape[1]:
    kth = -np.partition(-similar, k - 1, axis=1)[:, k - 1:k]  # each row's k-th largest
    above = similar > kth
    tied = similar == kth
    room = k - above.sum(axis=1, keepdims=True)
    keep = above | (tied & (np.cumsum(tied, axis=1) <= room))
  else:
    keep = np.ones(similar.shape, bool)
  return np.nonzero(keep & (similar > 0))


def _blockwise_top_k(shape: tuple[int, int], block_of: Callable[[int, int], np.ndarray],
                     k: int) -> scipy.sparse.csr_matrix:
  """Each row's ``k`` largest positive entries of a matrix, as a sparse matrix of ``shape``.

  ``block_of(start, stop)`` gives the matrix's rows ``start:stop`` dense; a
  block holds about :data:`_CELLS_PER_BLOCK` cells.
  """
  rows, cols, vals = [], [], []
  step = max(1, _CELLS_PER_BLOCK // max(shape[1], 1))
  for start in range(0, shape[0], step):
    block = block_of(start, min(start + step, shape[0]))
    r, c = _top_k_rows(block, k)
    rows.append(r + start)
    cols.append(c)
    vals.append(block[r, c])
  if not rows:
    return scipy.sparse.csr_matrix(shape)
  return scipy.sparse.csr_matrix(
      (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=shape)


class _RankedRows:
  """A sparse matrix's positive entries, each row's best first (ties: the lower column).

  Sorted once, so :meth:`top` keeps each row's ``k`` best for any ``k`` without sorting
  again: what :func:`_top_k_rows` keeps of the rows made dense.
  """

  def __init__(self, matrix: scipy.sparse.csr_matrix):
    matrix = matrix.tocsr()
    counts = np.diff(matrix.indptr)
    rows = np.repeat(np.arange(matrix.shape[0], dtype=np.int32), counts)
    order = np.lexsort((matrix.indices, -matrix.data, rows))  # by row, best first
    place = (np.arange(len(order)) - np.repeat(matrix.indptr[:-1], counts)).astype(np.int32)
    positive = matrix.data[order] > 0  # first in their rows: the places count them only
    order = order[positive]
    self.shape = matrix.shape
    self._rows, self._cols = rows[order], matrix.indices[order]
    self._values, self._place = matrix.data[order], place[positive]

  def top(self, k: int) -> scipy.sparse.csr_matrix:
    """Each row's ``k`` best entries."""
    keep = self._place < k
    return scipy.sparse.csr_matrix(
        (self._values[keep], (self._rows[keep], self._cols[keep])), shape=self.shape)


def cosine_neighbours(vectors: scipy.sparse.csr_matrix, k: int) -> scipy.sparse.csr_matrix:
  """The ``k`` nearest rows of each row of ``vectors`` by cosine similarity, as weights.

  ``W[i, j]`` is the cosine similarity of rows ``i`` and ``j`` for the ``k``
  most similar rows ``j != i`` with a positive similarity, else 0.
  Computed a block of rows at a time, so memory is bounded by a block's similarities.
  """
  norms = np.sqrt(np.asarray(vectors.multiply(vectors).sum(axis=1)).ravel())
  with np.errstate(divide="ignore"):
    scale = np.where(norms > 0, 1.0 / norms, 0.0)
  unit = (scipy.sparse.diags(scale) @ vectors).tocsr()
  by_column = unit.T.tocsr()

  def similarities(start: int, stop: int) -> np.ndarray:
    block = (unit[start:stop] @ by_column).toarray()
    own = np.arange(stop - start)
    block[own, own + start] = 0.0  # a row is not its own neighbour
    return block

  n = unit.shape[0]
  return _blockwise_top_k((n, n), similarities, k)


class KnnScores:
  """``item_knn`` and ``user_knn`` scores from a source x target interaction matrix.

  Each keeps :data:`DEFAULT_NEIGHBOURS` neighbours until :meth:`use` sets another count.

  Args:
    num_sources: Nodes of the source node set.
    num_targets: Nodes of the target node set.
    sources, targets: The interactions (node indices; repeats count once).
    most: The most neighbours :meth:`use` may ask for.
  """

  def __init__(self, num_sources: int, num_targets: int, sources: np.ndarray,
               targets: np.ndarray, most: int = max(NEIGHBOUR_CHOICES)):
    matrix = scipy.sparse.csr_matrix(
        (np.ones(len(sources)), (np.asarray(sources), np.asarray(targets))),
        shape=(num_sources, num_targets))
    matrix.data[:] = 1.0  # an interaction, however often it repeats
    self._matrix, self._by_target = matrix, matrix.T.tocsr()
    self._most = most
    self._similar = {ITEM_KNN: _RankedRows(cosine_neighbours(self._by_target, most)),
                     USER_KNN: _RankedRows(cosine_neighbours(matrix, most))}
    self.neighbours: dict[str, int] = {}
    self._weights: dict[str, scipy.sparse.csr_matrix] = {}
    for name in self._similar:
      self.use(name, min(DEFAULT_NEIGHBOURS, most))

  def use(self, name: str, k: int) -> None:
    """Keeps ``k`` neighbours (at most ``most``) for the baseline ``name`` from now on."""
    if k > self._most:
      raise ValueError(f"{name}: {k} neighbours asked, at most {self._most} computed")
    self.neighbours[name] = k
    self._weights[name] = self._similar[name].top(k)

  def rows(self, name: str, sources: np.ndarray) -> np.ndarray:
    """The baseline ``name``'s score of ``(source, every target)``: ``[len(sources), T]``."""
    if name == ITEM_KNN:
      return (self._matrix[sources] @ self._weights[ITEM_KNN].T).toarray()
    return (self._weights[USER_KNN][sources] @ self._matrix).toarray()

  def pairs(self, name: str, pairs: np.ndarray) -> np.ndarray:
    """The baseline ``name``'s score of each ``(source, target)`` pair (a block at a time)."""
    out = np.zeros(len(pairs))
    for start in range(0, len(pairs), _PAIRS_PER_BLOCK):
      block = pairs[start:start + _PAIRS_PER_BLOCK]
      if name == ITEM_KNN:
        left, right = self._matrix[block[:, 0]], self._weights[ITEM_KNN][block[:, 1]]
      else:
        left, right = self._weights[USER_KNN][block[:, 0]], self._by_target[block[:, 1]]
      out[start:start + len(block)] = np.asarray(left.multiply(right).sum(axis=1)).ravel()
    return out


class EdgeHistory:
  """``edgebank``, ``edgebank_window`` and ``recency`` of pairs, each as of its time.

  Args:
    edges: ``[E, 2]`` node indices of the predicted edge set's edges (every split's).
    times: Their times.
    num_targets: Nodes of the target node set.
    undirected: An edge ``(u, v)`` is also ``(v, u)``.
    window: ``edgebank_window``'s span (in the time feature's units).
    inclusive: An edge at the pair's time counts.
  """

  def __init__(self, edges: np.ndarray, times: np.ndarray, num_targets: int, *,
               undirected: bool, window: float, inclusive: bool = False):
    edges = np.asarray(edges, np.int64).reshape(-1, 2)
    times = np.asarray(times, np.float64)
    if undirected:
      edges, times = np.r_[edges, edges[:, ::-1]], np.r_[times, times]
    self._n = max(int(num_targets), 1)
    keys = edges[:, 0] * self._n + edges[:, 1]
    order = np.lexsort((times, keys))
    self._keys, self._times = keys[order], times[order]
    self.window = float(window)
    self._inclusive = inclusive

  def _before(self, pairs: np.ndarray, bounds: np.ndarray, side: str
               ) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's count of edges before its bound, and where its edges start.

    ``side`` "right": an edge at the bound counts too.
    """
    pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
    keys = pairs[:, 0] * self._n + pairs[:, 1]
    lo = np.searchsorted(self._keys, keys, "left")
    hi = np.searchsorted(self._keys, keys, "right")
    out = np.zeros(len(keys), np.int64)
    for i in np.flatnonzero(hi > lo):  # only pairs that ever were an edge
      out[i] = np.searchsorted(self._times[lo[i]:hi[i]], bounds[i], side)
    return out, lo

  def pairs(self, name: str, pairs: np.ndarray, times: np.ndarray) -> np.ndarray:
    """The baseline ``name``'s score of each ``(source, target)`` pair at its time."""
    times = np.asarray(times, np.float64)
    count, lo = self._before(pairs, times, "right" if self._inclusive else "left")
    if name == EDGEBANK:
      return (count > 0).astype(np.float64)
    if name == EDGEBANK_WINDOW:  # an edge in [time - window, time)
      older, _ = self._before(pairs, times - self.window, "left")
      return (count > older).astype(np.float64)
    latest = np.full(len(count), -np.inf)
    seen = count > 0
    latest[seen] = self._times[lo[seen] + count[seen] - 1]
    return latest


def window_of(query_times: Optional[np.ndarray]) -> float:
  """EdgeBank's default window: the span of the evaluated split's query times (TGB's rule)."""
  if query_times is None or not len(query_times):
    return 0.0
  return float(np.max(query_times) - np.min(query_times))
