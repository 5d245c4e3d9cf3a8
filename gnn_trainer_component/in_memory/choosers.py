"""How the in-memory kernel chooses a node's out-edges: one function per sampling strategy.

Each chooser takes the nodes one op expands (:class:`Candidates`: their CSR
runs and, for time-aware ops, their time bounds) and returns ``(rows, edge
positions)``: up to ``op.size`` distinct out-edges per node.

* ``uniform``: Floyd's algorithm run for all high-degree nodes at once (``k``
  steps of ``O(k)`` vector compares, ``k`` the fan-out);
* ``weighted``: without replacement with probability proportional to the
  weight (successive sampling: draws from a guide table over the running weights,
  a repeat drawn again; weight 0 is never chosen);
* ``top_k``: the ``k`` largest weights, ties to the smallest target id (as the
  Beam engine: :func:`gnn_trainer_component.graph.choice.choose` over a node's
  out-edges sorted by target id);
* ``uniform_before`` / ``latest``: the edges before a bound are a prefix of the
  node's run in time order, counted by one binary search per node, never a scan
  (``latest``: ties to the largest target id, as the Beam engine).

The orders they need (:class:`TimeIndex`, :class:`WeightIndex`) are built once
per edge set and feature (:func:`prepare`, before a sampler's first batch).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np

from gnn_trainer_component.graph import csr
from gnn_trainer_component.graph import ids as graph_ids
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.in_memory import store as store_lib


def choose_edges(rng: np.random.Generator, degrees: np.ndarray, k: int
                 ) -> tuple[np.ndarray, np.ndarray]:
  """Up to ``k`` distinct out-edge offsets per row, uniformly without replacement.

  Args:
    rng: The random generator.
    degrees: Out-degree of each row's node.
    k: The fan-out.

  Returns:
    (row of each chosen edge, its offset in ``[0, degrees[row])``); rows with
    a degree within ``k`` get all their edges.
  """
  small = np.flatnonzero(degrees <= k)
  runs, small_offsets = csr.run_offsets(degrees[small])
  small_rows = small[runs]
  big = np.flatnonzero(degrees > k)
  if not len(big):
    return small_rows, small_offsets
  d = degrees[big]
  chosen = np.empty((len(big), k), dtype=np.int64)
  for j in range(k):  # Floyd: a uniform k-subset of [0, d), k steps.
    top = d - k + j
    pick = (rng.random(len(big)) * (top + 1)).astype(np.int64)
    if j:
      pick = np.where((chosen[:, :j] == pick[:, None]).any(axis=1), top, pick)
    chosen[:, j] = pick
  return (np.concatenate([small_rows, np.repeat(big, k)]),
          np.concatenate([small_offsets, chosen.ravel()]))


def search(sorted_array: np.ndarray, values: np.ndarray, side: str = "left") -> np.ndarray:
  """``np.searchsorted(sorted_array, values, side)``, the values looked up in sorted order.

  Over an array of millions (an edge set's keys or running weights), sorted lookups walk it
  forward instead of probing it at random, several times faster for a batch's nodes.
  """
  values = np.asarray(values)
  order = np.argsort(values, kind="stable")
  out = np.empty(len(values), np.int64)
  out[order] = np.searchsorted(sorted_array, values[order], side=side)
  return out


def target_ranks(graph: store_lib.InMemoryGraph, edge_set: str) -> np.ndarray:
  """Each edge's target's rank among its node set's ids in byte order: how ties are broken."""
  edges = graph.edge_sets[edge_set]
  if ("ties",) not in edges.indexes:
    ids = graph.node_sets[graph.schema.edge_sets[edge_set].target].ids
    rank = np.empty(len(ids), np.int64)
    rank[graph_ids.byte_order(ids)] = np.arange(len(ids))
    edges.indexes[("ties",)] = rank[edges.target]
  return edges.indexes[("ties",)]


def _stable_order(keys: np.ndarray, ties: Optional[np.ndarray]) -> np.ndarray:
  """Positions sorted by ``keys``, then by ``ties`` (if given), then as they are.

  Stable single-key sorts, one per key (several times faster than ``np.lexsort``
  over millions of edges).
  """
  order = (np.argsort(ties, kind="stable") if ties is not None
           else np.arange(len(keys), dtype=np.int64))
  return order[np.argsort(keys[order], kind="stable")]


class TimeIndex:
  """An edge set's edges sorted by (source, time): a node's edges before ``t`` are a prefix.

  A node's count of edges before a bound is one binary search in ``keys``
  (``source * stride + time key``, sorted). The time key is the time itself
  less the smallest for integer times whose range fits, so a bound maps to its
  key by arithmetic; else the time's rank among the distinct times (one more
  binary search per bound).

  Attributes:
    order: Edge positions (CSR order) sorted by (source, time), ties by
      ``ties`` (the targets' id ranks, :func:`target_ranks`) or else in CSR
      order; node ``u``'s run is ``order[indptr[u]:indptr[u + 1]]``, as in CSR.
  """

  def __init__(self, edge_set: store_lib.EdgeSet, feature: str,
               ties: Optional[np.ndarray] = None):
    values = np.asarray(edge_set.features[feature])
    num_nodes = len(edge_set.indptr)
    low = int(values.min()) if len(values) else 0
    span = int(values.max()) - low + 2 if len(values) else 2
    self._distinct = None
    if values.dtype.kind in "iu" and num_nodes * span < 2**62:
      self._low, self._stride = low, span
      time_keys = values.astype(np.int64) - low
    else:
      self._distinct, rank = np.unique(values.astype(np.float64), return_inverse=True)
      self._stride = len(self._distinct) + 1
      time_keys = rank.reshape(-1)
    keys = edge_set.source * self._stride + time_keys
    self.order = _stable_order(keys, ties)
    self._keys = keys[self.order]

  def _time_keys(self, bounds: np.ndarray, inclusive: bool) -> np.ndarray:
    """The key below which an edge's time is before each bound (at or before: ``inclusive``)."""
    if self._distinct is not None:
      return search(self._distinct, bounds, side="right" if inclusive else "left")
    limit = np.floor(bounds) + 1 if inclusive else np.ceil(bounds)
    return np.clip(limit - self._low, 0, self._stride - 1).astype(np.int64)

  def count_before(self, nodes: np.ndarray, start: np.ndarray, bounds: np.ndarray,
                   inclusive: bool) -> np.ndarray:
    """Edges of each node earlier than (``inclusive``: at or before) its bound."""
    keys = nodes * self._stride + self._time_keys(bounds, inclusive)
    return search(self._keys, keys) - start


def time_index(edge_set: store_lib.EdgeSet, feature: str,
               ties: Optional[np.ndarray] = None) -> TimeIndex:
  """The edge set's :class:`TimeIndex` by ``feature``, built once (by :func:`prepare`)."""
  key = ("time", feature)
  if key not in edge_set.indexes:
    edge_set.indexes[key] = TimeIndex(edge_set, feature, ties)
  return edge_set.indexes[key]


@dataclasses.dataclass(frozen=True)
class Candidates:
  """The nodes one op expands: their out-edges are ``start[i]:start[i] + degrees[i]``.

  Attributes:
    edge_set: The op's edge set.
    nodes: Node indices (in the edge set's source node set).
    start, degrees: Their CSR runs.
    bounds: Time-aware ops: each node's time bound; else None.
  """
  edge_set: store_lib.EdgeSet
  nodes: np.ndarray
  start: np.ndarray
  degrees: np.ndarray
  bounds: Optional[np.ndarray] = None


def _uniform(c: Candidates, op: sampling.SamplingOp, rng: np.random.Generator):
  rows, offsets = choose_edges(rng, c.degrees, op.size)
  return rows, c.start[rows] + offsets


class WeightIndex:
  """An edge set's edges ranked by a weight, built once.

  Attributes:
    by_weight: Edge positions sorted by (source, -weight), ties by ``ties``
      (:func:`target_ranks`) or else in CSR order: node ``u``'s ``k``
      heaviest edges are the first ``k`` of its run.
    cumulative: Running sum of the weights in CSR order: edge ``e`` holds
      ``[cumulative[e], cumulative[e + 1])``, so a point drawn uniformly in a node's
      range falls in an edge with probability proportional to its weight.
    guide: For the ``j``-th edge position of node ``u``'s run, the edge that holds the
      point ``j / degree`` of the way through ``u``'s range (a guide table: a drawn
      point's edge is found from it in a step or two on average, without a search).
    positive: Edges of positive weight per node.
  """

  def __init__(self, edge_set: store_lib.EdgeSet, feature: str,
               ties: Optional[np.ndarray] = None):
    weights = np.asarray(edge_set.features[feature], dtype=np.float64)
    by_weight = _stable_order(-weights, ties)
    self.by_weight = by_weight[np.argsort(edge_set.source[by_weight], kind="stable")]
    self.cumulative = np.concatenate([[0.0], np.cumsum(weights)])
    running = np.concatenate([[0], np.cumsum(weights > 0)])
    self.positive = running[edge_set.indptr[1:]] - running[edge_set.indptr[:-1]]
    start = edge_set.indptr[:-1][edge_set.source]
    degree = edge_set.indptr[1:][edge_set.source] - start
    base = self.cumulative[start]
    width = self.cumulative[start + degree] - base
    points = base + (np.arange(len(weights)) - start) * (width / np.maximum(degree, 1))
    self.guide = np.clip(np.searchsorted(self.cumulative, points, side="right") - 1,
                         start, start + degree - 1)

  def draw(self, start: np.ndarray, degrees: np.ndarray, rng: np.random.Generator
           ) -> np.ndarray:
    """One edge position per node run, with probability proportional to its weight."""
    u = rng.random(len(start))
    base = self.cumulative[start]
    x = base + u * (self.cumulative[start + degrees] - base)
    drawn = self.guide[start + np.minimum((u * degrees).astype(np.int64), degrees - 1)]
    last = start + degrees - 1
    walking = np.flatnonzero((self.cumulative[drawn + 1] <= x) & (drawn < last))
    while len(walking):  # from the guide to the edge holding x: a step or two on average
      drawn[walking] += 1
      d = drawn[walking]
      walking = walking[(self.cumulative[d + 1] <= x[walking]) & (d < last[walking])]
    return drawn


def weight_index(edge_set: store_lib.EdgeSet, feature: str,
                 ties: Optional[np.ndarray] = None) -> WeightIndex:
  """The edge set's :class:`WeightIndex` by ``feature``, built once (by :func:`prepare`)."""
  key = ("weight", feature)
  if key not in edge_set.indexes:
    edge_set.indexes[key] = WeightIndex(edge_set, feature, ties)
  return edge_set.indexes[key]


def _top_k(c: Candidates, op: sampling.SamplingOp, rng: np.random.Generator):
  """The ``k`` heaviest out-edges of each node (ties to the smallest target id)."""
  del rng
  rows, offsets = csr.run_offsets(np.minimum(c.degrees, op.size))
  return rows, weight_index(c.edge_set, op.weight).by_weight[c.start[rows] + offsets]


#: Rounds of drawing with replacement before the exact fallback (:func:`_weighted`).
_WEIGHTED_ROUNDS = 8
#: Nodes with more than this many times ``k`` edges draw with replacement; the others
#: take exact keys over their edges (:func:`_weighted`).
_DRAW_FROM = 4


def _weighted(c: Candidates, op: sampling.SamplingOp, rng: np.random.Generator):
  """Up to ``k`` edges per node drawn in proportion to their weight, without replacement.

  Successive sampling: an edge drawn with replacement (:meth:`WeightIndex.draw`)
  that was already chosen is drawn again, which leaves each new edge's
  probability proportional to its weight among those not chosen
  (the law of Efraimidis-Spirakis keys). A node with at most ``k`` edges of
  positive weight takes them all; one with at most :data:`_DRAW_FROM` times
  ``k`` edges, and rows still short after :data:`_WEIGHTED_ROUNDS` rounds
  (weights concentrated on a few edges), take the exact keys over all their
  edges.
  """
  index = weight_index(c.edge_set, op.weight)
  positive = index.positive[c.nodes]
  small = np.flatnonzero(positive <= op.size)
  rows, offsets = csr.run_offsets(c.degrees[small])
  rows = small[rows]
  positions = c.start[rows] + offsets
  keep = np.asarray(c.edge_set.features[op.weight][positions]) > 0
  out_rows, out_positions = [rows[keep]], [positions[keep]]
  # Few edges beyond k: repeats would be drawn over and over; exact keys cost O(degree).
  middle = np.flatnonzero((positive > op.size) & (c.degrees <= _DRAW_FROM * op.size))
  if len(middle):
    r, pos = _weighted_keys(Candidates(c.edge_set, c.nodes[middle], c.start[middle],
                                       c.degrees[middle]), op, rng)
    out_rows.append(middle[r])
    out_positions.append(pos)
  big = np.flatnonzero((positive > op.size) & (c.degrees > _DRAW_FROM * op.size))
  if len(big):
    # Row i's chosen edges, -1 where still to draw: every round draws the empty slots
    # (with replacement) and empties the repeats again.
    chosen = np.full((len(big), op.size), -1, np.int64)
    for _ in range(_WEIGHTED_ROUNDS):
      rows, slots = np.nonzero(chosen < 0)
      if not len(rows):
        break
      chosen[rows, slots] = index.draw(c.start[big[rows]], c.degrees[big[rows]], rng)
      chosen.sort(axis=1)
      repeat = np.zeros(chosen.shape, bool)
      repeat[:, 1:] = chosen[:, 1:] == chosen[:, :-1]
      chosen[repeat] = -1
    full = (chosen >= 0).all(axis=1)
    out_rows.append(np.repeat(big[full], op.size))
    out_positions.append(chosen[full].ravel())
    short = big[~full]
    if len(short):  # exact keys for what successive draws left short
      r, pos = _weighted_keys(Candidates(c.edge_set, c.nodes[short], c.start[short],
                                         c.degrees[short]), op, rng)
      out_rows.append(short[r])
      out_positions.append(pos)
  return np.concatenate(out_rows), np.concatenate(out_positions)


def _weighted_keys(c: Candidates, op: sampling.SamplingOp, rng: np.random.Generator):
  """Efraimidis-Spirakis over every edge: the ``k`` smallest ``Exp(1) / w`` per node."""
  rows, offsets = csr.run_offsets(c.degrees)
  return keyed(c.edge_set, rows, c.start[rows] + offsets, np.full(len(c.degrees), op.size),
               op.weight, rng)


def keyed(edge_set: store_lib.EdgeSet, rows: np.ndarray, positions: np.ndarray,
          limit: np.ndarray, weight: str, rng: np.random.Generator
          ) -> tuple[np.ndarray, np.ndarray]:
  """Up to ``limit[row]`` of the candidate edges ``(rows, positions)`` of each row.

  Without replacement: uniformly, or (``weight``) in proportion to the weight by
  Efraimidis-Spirakis keys, the smallest ``Exp(1) / w`` (weight 0: never).
  Returns the chosen ``(rows, positions)``.
  """
  if weight:
    w = np.asarray(edge_set.features[weight][positions], dtype=np.float64)
    positive = w > 0
    rows, positions, w = rows[positive], positions[positive], w[positive]
    keys = rng.standard_exponential(len(w)) / w
  else:
    keys = rng.random(len(rows))
  order = np.lexsort((keys, rows))
  rows, positions = rows[order], positions[order]
  rank = csr.run_offsets(np.bincount(rows, minlength=len(limit)))[1]
  keep = rank < limit[rows]
  return rows[keep], positions[keep]


def _by_time(c: Candidates, op: sampling.SamplingOp, rng: np.random.Generator):
  """``uniform_before`` (uniform over the edges before the bound) or ``latest``."""
  index = time_index(c.edge_set, op.time)
  count = index.count_before(c.nodes, c.start, c.bounds, op.time_inclusive)
  if op.strategy == sampling.UNIFORM_BEFORE:
    rows, offsets = choose_edges(rng, count, op.size)
  else:
    take = np.minimum(count, op.size)
    rows, offsets = csr.run_offsets(take)
    offsets = offsets + (count - take)[rows]
  return rows, index.order[c.start[rows] + offsets]


#: Strategy -> how it chooses up to ``op.size`` out-edges per candidate node:
#: ``(candidates, op, rng) -> (rows, edge positions)``.
CHOOSERS: dict[str, Callable] = {
    sampling.UNIFORM: _uniform, sampling.WEIGHTED: _weighted, sampling.TOP_K: _top_k,
    sampling.UNIFORM_BEFORE: _by_time, sampling.LATEST: _by_time}


def prepare(graph: store_lib.InMemoryGraph, plan: sampling.SamplingPlan) -> None:
  """Builds the indexes the plan's strategies read, once (not in a sampling thread).

  Ties of ``top_k`` and ``latest`` go by target id, as on the Beam engine.
  """
  for op in plan.ops:
    edge_set = graph.edge_sets[op.edge_set]
    built = [k for k in (("time", op.time), ("weight", op.weight))
             if k[1] and k not in edge_set.indexes]
    ties = target_ranks(graph, op.edge_set) if built else None
    if op.time:
      time_index(edge_set, op.time, ties)
    if op.weight:
      weight_index(edge_set, op.weight, ties)
