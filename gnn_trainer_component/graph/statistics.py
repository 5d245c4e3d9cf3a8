"""A graph's statistics: the counts GraphStatisticsGen reports and GraphValidator bounds.

Pure functions over the graph core's arrays: node ids in table order, an edge
set's ends as row indices of their node tables (``-1``: an id not in the node
table, a dangling end), labels and seeds as row indices. numpy only, each a
pass or a sort over its arrays, so every engine computes the same numbers:

* :func:`degree_summary`: an edge set's degrees in one direction: the nodes of
  degree 0 (isolated in it), the largest, the mean, quantiles and the
  :func:`degree_bucket` histogram (log2 buckets, GraphEvaluator's slices);
* :func:`edge_counts`: edges, self loops, multi-edges (a repeat of an earlier
  ``(source, target)``) and dangling ends of each side;
* :func:`duplicate_ids`: the node table's rows that repeat an earlier id;
* :func:`homophily`: the share of edges whose two ends have the same label;
* :func:`split_overlap`: the seeds that two splits share;
* :func:`loo_correct`: the nodes a leave-one-out majority vote of their feature
  value's group labels right (how well a feature predicts the label);
* :func:`total_variation` and :func:`max_share_difference`: how far apart two
  histograms' shares are (a snapshot's degrees or labels against another's).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Mapping, Sequence

import numpy as np

#: The quantiles of a degree summary, by name.
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
#: An edge end whose id is not in its node table.
DANGLING = -1


def degree_bucket(degree: int) -> str:
  """The log2 bucket of a degree: ``"0"``, ``"1"``, ``"2-3"``, ``"4-7"``, ``"8-15"``, ..."""
  if degree <= 1:
    return str(int(degree))
  low = 1 << (int(degree).bit_length() - 1)
  return f"{low}-{2 * low - 1}"


def bucket_low(bucket: str) -> int:
  """The lowest degree of a :func:`degree_bucket` (``"4-7"`` -> 4, ``"1"`` -> 1)."""
  return int(bucket.split("-")[0])


@dataclasses.dataclass(frozen=True)
class DegreeSummary:
  """The degrees of one node set in one edge set and direction.

  Attributes:
    num_nodes: Nodes of the node set.
    isolated: Nodes of degree 0 (no edge of this set and direction).
    max: The largest degree (0 without edges).
    mean: Edges per node.
    quantiles: :data:`QUANTILES` -> degree (numpy's linear interpolation).
    histogram: :func:`degree_bucket` -> nodes, buckets in increasing order,
      every bucket from ``"0"`` to the largest degree's (empty ones as 0).
  """
  num_nodes: int
  isolated: int
  max: int
  mean: float
  quantiles: Mapping[str, float]
  histogram: Mapping[str, int]

  @property
  def isolated_share(self) -> float:
    return self.isolated / self.num_nodes if self.num_nodes else 0.0


def degrees(ends: np.ndarray, num_nodes: int) -> np.ndarray:
  """Each node's count in ``ends`` (row indices; :data:`DANGLING` ends not counted)."""
  ends = np.asarray(ends, np.int64)
  return np.bincount(ends[ends != DANGLING], minlength=num_nodes)


def degree_summary(degree: np.ndarray) -> DegreeSummary:
  """The :class:`DegreeSummary` of one degree per node (:func:`degrees`)."""
  values, nodes = np.unique(np.asarray(degree, np.int64), return_counts=True)
  return summary_of_counts(values, nodes)


def summary_of_counts(values: np.ndarray, nodes: np.ndarray) -> DegreeSummary:
  """The :class:`DegreeSummary` of distinct degrees and how many nodes have each.

  What every engine computes a summary from (in memory: ``np.unique`` of the degrees; on
  Beam: a count per degree), so the numbers are the same. Quantiles are numpy's linear
  interpolation between the two ranks around ``q * (n - 1)``.
  """
  order = np.argsort(np.asarray(values, np.int64), kind="stable")
  values = np.asarray(values, np.int64)[order]
  nodes = np.asarray(nodes, np.int64)[order]
  n = int(nodes.sum())
  if not n:
    return DegreeSummary(0, 0, 0, 0.0, {name: 0.0 for name in QUANTILES}, {})
  last = np.cumsum(nodes) - 1  # the last rank holding each value

  def at_rank(rank: int) -> float:
    return float(values[np.searchsorted(last, rank)])

  quantiles = {}
  for name, q in QUANTILES.items():
    h = q * (n - 1)
    low = int(np.floor(h))
    a, b = at_rank(low), at_rank(min(low + 1, n - 1))
    quantiles[name] = a + (h - low) * (b - a)
  # Bucket k holds degrees [2**(k-1), 2**k) for k >= 1, bucket 0 degree 0: frexp's exponent.
  buckets = np.bincount(np.frexp(values.astype(np.float64))[1], weights=nodes)
  return DegreeSummary(
      num_nodes=n, isolated=int(nodes[values == 0].sum()), max=int(values[-1]),
      mean=float(int((values * nodes).sum()) / n), quantiles=quantiles,
      histogram={degree_bucket(0 if k == 0 else 1 << (k - 1)): int(c)
                 for k, c in enumerate(buckets)})


@dataclasses.dataclass(frozen=True)
class EdgeCounts:
  """The counts of one edge set's table.

  Attributes:
    edges: Rows of the table.
    self_loops: Edges from a node to itself (a source and target node set
      that are the same; 0 otherwise).
    multi_edges: Edges that repeat an earlier edge's ``(source, target)``.
    dangling_sources: Edges whose source id is not in its node table.
    dangling_targets: Edges whose target id is not in its node table.
  """
  edges: int
  self_loops: int
  multi_edges: int
  dangling_sources: int
  dangling_targets: int


def edge_counts(source: np.ndarray, target: np.ndarray, *, same_node_set: bool) -> EdgeCounts:
  """The :class:`EdgeCounts` of an edge table's ends (row indices, :data:`DANGLING`)."""
  source, target = np.asarray(source, np.int64), np.asarray(target, np.int64)
  known = (source != DANGLING) & (target != DANGLING)
  ends = source[known], target[known]
  distinct = 0
  if len(ends[0]):  # one int64 key per (source, target): a 1-D sort, not a sort of rows
    width = int(ends[1].max()) + 1
    keys = (ends[0] * width + ends[1] if int(ends[0].max()) < np.iinfo(np.int64).max // width
            else np.stack(ends, axis=1))
    distinct = len(np.unique(keys, axis=0 if keys.ndim == 2 else None))
  return EdgeCounts(
      edges=len(source),
      self_loops=int(np.sum(known & (source == target))) if same_node_set else 0,
      multi_edges=len(ends[0]) - distinct,
      dangling_sources=int(np.sum(source == DANGLING)),
      dangling_targets=int(np.sum(target == DANGLING)))


def duplicate_ids(ids: Sequence) -> int:
  """The rows of a node table that repeat an earlier row's id."""
  ids = np.asarray(ids)
  return len(ids) - len(np.unique(ids)) if len(ids) else 0


def homophily(source: np.ndarray, target: np.ndarray, source_labels: np.ndarray,
              target_labels: np.ndarray) -> tuple[float, int]:
  """``(share, edges)``: label homophily over the edges whose two ends are known and labelled.

  ``share``: of those edges, the share whose ends have the same label; ``edges``: how many
  there are. Labels are per node row; a negative label means unlabelled.
  """
  source, target = np.asarray(source, np.int64), np.asarray(target, np.int64)
  known = (source != DANGLING) & (target != DANGLING)
  a = np.asarray(source_labels)[source[known]]
  b = np.asarray(target_labels)[target[known]]
  labelled = (a >= 0) & (b >= 0)
  count = int(np.sum(labelled))
  return share(int(np.sum(a[labelled] == b[labelled])), count), count


def loo_correct(group: np.ndarray, sizes: np.ndarray) -> int:
  """The nodes a leave-one-out majority vote within their group labels right.

  Args:
    group: Each cell's group (a feature value), cells ``(group, label)`` distinct.
    sizes: Each cell's nodes.

  Returns:
    The nodes whose label is, among the other nodes of their group, the one most common
    (a tie, or no other node: wrong). Groups are independent: a sum over any split of them.
  """
  group, sizes = np.asarray(group, np.int64), np.asarray(sizes, np.int64)
  if not len(sizes):
    return 0
  top = np.zeros(int(group.max()) + 1, np.int64)
  np.maximum.at(top, group, sizes)
  at_top = sizes == top[group]
  tops = np.bincount(group[at_top], minlength=len(top))  # labels at the top count
  second = np.zeros(len(top), np.int64)
  np.maximum.at(second, group[~at_top], sizes[~at_top])
  # The best count among the other labels, seen from a node of this cell.
  others = np.where(at_top & (tops[group] == 1), second[group], top[group])
  return int(sizes[sizes - 1 > others].sum())


def share(part: int, whole: int) -> float:
  """``part / whole`` (0 for nothing): every engine's shares divide the same two counts."""
  return part / whole if whole else 0.0


def split_overlap(seeds: Mapping[str, np.ndarray]) -> dict[tuple[str, str], int]:
  """``{(split a, split b): seeds in both}`` for each pair of splits (names sorted)."""
  distinct = {name: np.unique(np.asarray(rows)) for name, rows in seeds.items()}
  return {(a, b): len(np.intersect1d(distinct[a], distinct[b], assume_unique=True))
          for a, b in itertools.combinations(sorted(distinct), 2)}


def _shares(histogram: Mapping[str, int], keys: Sequence[str]) -> np.ndarray:
  counts = np.array([histogram.get(k, 0) for k in keys], np.float64)
  return counts / counts.sum() if counts.sum() else counts


def total_variation(a: Mapping[str, int], b: Mapping[str, int]) -> float:
  """Half the L1 distance of two histograms' shares: 0 the same shape, 1 disjoint.

  A histogram is bucket -> count; a bucket missing from one counts 0 there; an empty
  histogram has all shares 0.
  """
  keys = sorted(set(a) | set(b))
  return float(0.5 * np.abs(_shares(a, keys) - _shares(b, keys)).sum())


def max_share_difference(a: Mapping[str, int], b: Mapping[str, int]) -> float:
  """The largest difference of one bucket's share between two histograms (L-infinity)."""
  keys = sorted(set(a) | set(b))
  return float(np.abs(_shares(a, keys) - _shares(b, keys)).max()) if keys else 0.0
