"""The graph core's statistics (``graph/statistics.py``) against brute-force counts.

Each function on small random graphs (dangling ends, repeats, self loops, unlabelled nodes
included) against a plain Python loop over the same rows.
"""

import collections
import math

import numpy as np
import pytest

from gnn_trainer_component.evaluator import config as evaluator_config
from gnn_trainer_component.graph import statistics


def _graph(seed: int, num_nodes: int = 30, num_edges: int = 120):
  rng = np.random.default_rng(seed)
  source = rng.integers(0, num_nodes, num_edges)
  target = rng.integers(0, num_nodes, num_edges)
  source[rng.random(num_edges) < 0.05] = statistics.DANGLING
  target[rng.random(num_edges) < 0.05] = statistics.DANGLING
  return source, target


@pytest.mark.parametrize("seed", range(5))
def test_degrees_and_their_summary_equal_a_loop_over_the_edges(seed):
  source, _ = _graph(seed)
  num_nodes = 40  # some nodes without an edge
  count = collections.Counter(int(s) for s in source if s != statistics.DANGLING)
  want = [count.get(node, 0) for node in range(num_nodes)]
  degree = statistics.degrees(source, num_nodes)
  assert degree.tolist() == want
  summary = statistics.degree_summary(degree)
  assert summary.num_nodes == num_nodes and summary.max == max(want)
  assert summary.isolated == want.count(0)
  assert summary.isolated_share == pytest.approx(want.count(0) / num_nodes)
  assert summary.mean == pytest.approx(sum(want) / num_nodes)
  ordered = sorted(want)
  for name, q in statistics.QUANTILES.items():  # numpy's linear interpolation, by hand
    at = q * (num_nodes - 1)
    low, high = ordered[math.floor(at)], ordered[math.ceil(at)]
    assert summary.quantiles[name] == pytest.approx(low + (high - low) * (at - math.floor(at)))
  buckets = collections.Counter(statistics.degree_bucket(d) for d in want)
  assert {k: v for k, v in summary.histogram.items() if v} == dict(buckets)
  assert list(summary.histogram)[0] == "0"  # every bucket up to the largest, in order
  assert list(summary.histogram)[-1] == statistics.degree_bucket(max(want))


def test_degree_buckets_are_log2_and_the_evaluators_slices():
  assert [statistics.degree_bucket(d) for d in (0, 1, 2, 3, 4, 7, 8, 1000)] == [
      "0", "1", "2-3", "2-3", "4-7", "4-7", "8-15", "512-1023"]
  assert evaluator_config.degree_slice(5) == "degree:4-7"
  summary = statistics.degree_summary(np.array([0, 0, 9]))
  assert summary.histogram == {"0": 2, "1": 0, "2-3": 0, "4-7": 0, "8-15": 1}
  empty = statistics.degree_summary(np.array([], np.int64))
  assert (empty.num_nodes, empty.isolated_share, empty.histogram) == (0, 0.0, {})


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("same_node_set", [True, False])
def test_edge_counts_equal_a_loop_over_the_edges(seed, same_node_set):
  source, target = _graph(seed, num_nodes=8)  # few nodes: repeats and self loops
  seen, multi, loops = set(), 0, 0
  for s, t in zip(source.tolist(), target.tolist()):
    if statistics.DANGLING in (s, t):
      continue
    multi += (s, t) in seen
    seen.add((s, t))
    loops += same_node_set and s == t
  counts = statistics.edge_counts(source, target, same_node_set=same_node_set)
  assert counts == statistics.EdgeCounts(
      edges=len(source), self_loops=loops, multi_edges=multi,
      dangling_sources=int(np.sum(source == -1)), dangling_targets=int(np.sum(target == -1)))
  assert counts.multi_edges > 0 and (counts.self_loops > 0) == same_node_set


def test_duplicate_ids_count_every_repeat():
  assert statistics.duplicate_ids([b"a", b"b", b"a", b"a", b"c"]) == 2
  assert statistics.duplicate_ids(np.array([3, 1, 2], np.int64)) == 0
  assert statistics.duplicate_ids([]) == 0


@pytest.mark.parametrize("seed", range(5))
def test_homophily_is_the_share_of_labelled_edges_whose_ends_agree(seed):
  source, target = _graph(seed)
  rng = np.random.default_rng(seed + 100)
  labels = rng.integers(-1, 3, 30)  # -1: unlabelled
  same = total = 0
  for s, t in zip(source.tolist(), target.tolist()):
    if statistics.DANGLING in (s, t) or labels[s] < 0 or labels[t] < 0:
      continue
    total += 1
    same += labels[s] == labels[t]
  share, edges = statistics.homophily(source, target, labels, labels)
  assert edges == total > 0 and share == pytest.approx(same / total)
  assert statistics.homophily(source, target, -np.ones(30), labels) == (0.0, 0)


def test_split_overlap_counts_the_seeds_two_splits_share():
  seeds = {"train": np.array([1, 2, 3, 3]), "test": np.array([3, 4]), "eval": np.array([2, 3])}
  assert statistics.split_overlap(seeds) == {
      ("eval", "test"): 1, ("eval", "train"): 2, ("test", "train"): 1}


@pytest.mark.parametrize("seed", range(4))
def test_histogram_distances_equal_sums_over_shares(seed):
  rng = np.random.default_rng(seed)
  a = {str(k): int(rng.integers(0, 9)) for k in range(6)}
  b = {str(k): int(rng.integers(0, 9)) for k in range(2, 9)}
  keys = sorted(set(a) | set(b))
  share_a = [a.get(k, 0) / sum(a.values()) for k in keys]
  share_b = [b.get(k, 0) / sum(b.values()) for k in keys]
  diffs = [abs(x - y) for x, y in zip(share_a, share_b, strict=True)]
  assert statistics.total_variation(a, b) == pytest.approx(sum(diffs) / 2)
  assert statistics.max_share_difference(a, b) == pytest.approx(max(diffs))
  assert statistics.total_variation(a, a) == 0 == statistics.max_share_difference(a, a)
  assert statistics.total_variation({"0": 3}, {"1": 5}) == 1.0


@pytest.mark.parametrize("seed", range(4))
def test_a_summary_of_counts_equals_numpys_quantiles_of_the_degrees(seed):
  rng = np.random.default_rng(seed)
  degree = rng.zipf(2.0, int(rng.integers(1, 300))) - 1
  summary = statistics.degree_summary(degree)
  for name, q in statistics.QUANTILES.items():
    assert summary.quantiles[name] == pytest.approx(float(np.quantile(degree, q)), abs=1e-9)
  values, nodes = np.unique(degree, return_counts=True)
  shuffled = rng.permutation(len(values))  # a count per degree, in any order: the same
  assert statistics.summary_of_counts(values[shuffled], nodes[shuffled]) == summary


def test_a_bucket_reads_back_as_its_lowest_degree():
  for degree in range(0, 5000):
    low = statistics.bucket_low(statistics.degree_bucket(degree))
    assert low <= degree and statistics.degree_bucket(low) == statistics.degree_bucket(degree)
