"""Zero-parameter baselines a graph model must beat, fit on the training nodes' labels only.

Classification: ``majority_class`` (every node gets the training labels'
class frequencies, so its prediction is the most frequent class) and
``label_propagation`` (Zhou et al., 2004, as PyTorch Geometric's
``LabelPropagation``: the training nodes' one-hot labels spread over the
whole graph, every edge set read in both directions across node sets,
``alpha`` 0.9, 50 rounds, symmetric normalisation, clamped to [0, 1]; a node
the labels never reach gets the class frequencies). Regression:
``mean`` (the training labels' mean for every node). Link prediction, on the
message-passing graph (the held-out edges removed): ``popularity`` (a pair's
score is its target's popularity, the graph core's one definition,
:func:`~gnn_trainer_component.graph.negatives.popularity`: its degree among
the message split's distinct edges, both ends counted when ``undirected``;
the most popular targets first), and between nodes of one node set
``common_neighbours`` and ``adamic_adar`` (Adamic & Adar, 2003: each common
neighbour ``w`` counts ``1 / log(degree(w))``), over every edge set within
that node set, either direction, without self loops; between two node sets
``item_knn`` and ``user_knn``, and on a split by time ``edgebank``,
``edgebank_window`` and ``recency`` (:mod:`interactions`). An edge's label
(``link_config``'s ``edge_label``), fit on the message split's edges: ``mean``
(regression: their labels' mean) or ``majority_class`` (classification: their
class frequencies), and ``bias`` (:func:`bias_model`: that mean plus a bias of
the edge's source and one of its target, as the baseline predictors of
collaborative filtering; classification: one such model per class, clipped to
[0, 1] and normalised).
"""

from __future__ import annotations

import functools
from typing import Callable, Mapping, Optional

import numpy as np
import scipy.sparse

from gnn_trainer_component.evaluator import config as config_lib
from gnn_trainer_component.evaluator import interactions
from gnn_trainer_component.graph import csr
from gnn_trainer_component.graph import negatives as negatives_lib
from gnn_trainer_component.graph import ranking
from gnn_trainer_component.in_memory import link_pairs
from gnn_trainer_component.in_memory import retrieval

BASELINES = config_lib.BASELINES
(MAJORITY_CLASS, LABEL_PROPAGATION), (MEAN,) = (BASELINES[config_lib.CLASSIFICATION],
                                                BASELINES[config_lib.REGRESSION])
(POPULARITY, COMMON_NEIGHBOURS, ADAMIC_ADAR, ITEM_KNN, USER_KNN, EDGEBANK, EDGEBANK_WINDOW,
 RECENCY) = BASELINES[config_lib.LINK_PREDICTION]
(BIAS,) = set(BASELINES[config_lib.EDGE_REGRESSION]) - {MEAN}
ALPHA, ROUNDS = 0.9, 50
#: ``bias``: the L2 penalty on each source's and target's bias (ridge: a node with few edges
#: stays near the mean), and when the alternating fit stops (the biases moved less than this,
#: or after that many sweeps).
BIAS_L2, BIAS_TOLERANCE, BIAS_SWEEPS = 5.0, 1e-7, 200


def class_frequencies(train_labels: np.ndarray, num_classes: int) -> np.ndarray:
  """The share of each class among the training labels."""
  counts = np.bincount(train_labels, minlength=num_classes).astype(np.float64)
  return counts / counts.sum()


def adjacency(num_nodes: int, sources: np.ndarray, targets: np.ndarray) -> scipy.sparse.csr_matrix:
  """The symmetric adjacency of edges given by global node indices (both directions)."""
  weights = np.ones(2 * len(sources), dtype=np.float64)
  rows = np.concatenate([sources, targets])
  cols = np.concatenate([targets, sources])
  adj = scipy.sparse.csr_matrix((weights, (rows, cols)), shape=(num_nodes, num_nodes))
  adj.sum_duplicates()
  return adj


def label_propagation(adj: scipy.sparse.csr_matrix, train_nodes: np.ndarray,
                      train_labels: np.ndarray, num_classes: int) -> np.ndarray:
  """Class probabilities of every node ``[num_nodes, num_classes]`` by label propagation.

  Args:
    adj: The symmetric adjacency (:func:`adjacency`).
    train_nodes: Global indices of the training nodes.
    train_labels: Their class ids.
    num_classes: Classes of the task.
  """
  degree = np.asarray(adj.sum(axis=1)).ravel()
  with np.errstate(divide="ignore"):
    scale = np.where(degree > 0, 1.0 / np.sqrt(degree), 0.0)
  norm = scipy.sparse.diags(scale) @ adj @ scipy.sparse.diags(scale)
  out = np.zeros((adj.shape[0], num_classes))
  out[train_nodes, train_labels] = 1.0
  res = (1 - ALPHA) * out
  for _ in range(ROUNDS):
    out = np.clip(ALPHA * (norm @ out) + res, 0.0, 1.0)
  total = out.sum(axis=1, keepdims=True)
  prior = class_frequencies(train_labels, num_classes)
  with np.errstate(invalid="ignore", divide="ignore"):
    return np.where(total > 0, out / total, prior)


def predict(task: str, *, train_labels: np.ndarray, num_classes: int,
            propagated: Callable[[], np.ndarray], num_test: int) -> Mapping[str, np.ndarray]:
  """Each baseline's predictions for the test nodes: ``{baseline: predictions}``.

  Args:
    task: ``classification`` or ``regression``.
    train_labels: The training nodes' labels.
    num_classes: Classes (classification).
    propagated: Computes label propagation's probabilities of the test nodes.
    num_test: Test nodes.
  """
  if task == config_lib.REGRESSION:
    return {MEAN: np.full(num_test, float(np.mean(train_labels)))}
  prior = class_frequencies(train_labels, num_classes)
  return {MAJORITY_CLASS: np.tile(prior, (num_test, 1)), LABEL_PROPAGATION: propagated()}


def bias_model(pairs: np.ndarray, values: np.ndarray, num_sources: int,
               num_targets: int) -> Callable[[np.ndarray], np.ndarray]:
  """``pairs -> mean + b_source + b_target``, the biases fit to ``values`` by ridge least squares.

  The mean is the values' own; the biases minimise ``sum (value - mean - b_u - b_i)^2 +``
  :data:`BIAS_L2` ``* (sum b_u^2 + sum b_i^2)``, found by alternating exact updates of the
  target and the source biases (each sweep solves one side given the other) until they move
  less than :data:`BIAS_TOLERANCE`. A node without training edges has bias 0.
  """
  sources, targets = pairs[:, 0], pairs[:, 1]
  values = values.astype(np.float64)
  mean = float(values.mean())
  per_source = BIAS_L2 + np.bincount(sources, minlength=num_sources)
  per_target = BIAS_L2 + np.bincount(targets, minlength=num_targets)
  b_source, b_target = np.zeros(num_sources), np.zeros(num_targets)
  for _ in range(BIAS_SWEEPS):
    new_target = np.bincount(targets, values - mean - b_source[sources],
                             minlength=num_targets) / per_target
    new_source = np.bincount(sources, values - mean - new_target[targets],
                             minlength=num_sources) / per_source
    moved = max(np.abs(new_target - b_target).max(initial=0),
                np.abs(new_source - b_source).max(initial=0))
    b_source, b_target = new_source, new_target
    if moved < BIAS_TOLERANCE:
      break
  return lambda rows: mean + b_source[rows[:, 0]] + b_target[rows[:, 1]]


def edge_baselines(task: str, train_pairs: np.ndarray, train_labels: np.ndarray,
                   pairs: np.ndarray, num_sources: int, num_targets: int,
                   num_classes: int) -> dict[str, np.ndarray]:
  """Each baseline's prediction of ``pairs``' labels, fit on the message split's edges.

  Regression: values ``[n]``; classification: probabilities ``[n, num_classes]``.
  """
  if task == config_lib.EDGE_REGRESSION:
    return {MEAN: np.full(len(pairs), float(np.mean(train_labels))),
            BIAS: bias_model(train_pairs, train_labels, num_sources, num_targets)(pairs)}
  labels = train_labels.astype(np.int64)
  prior = class_frequencies(labels, num_classes)
  per_class = np.stack([np.clip(bias_model(train_pairs, (labels == c).astype(np.float64),
                                           num_sources, num_targets)(pairs), 0.0, 1.0)
                        for c in range(num_classes)], axis=1)
  total = per_class.sum(axis=1, keepdims=True)
  with np.errstate(invalid="ignore", divide="ignore"):
    probs = np.where(total > 0, per_class / total, prior)
  return {MAJORITY_CLASS: np.tile(prior, (len(pairs), 1)), BIAS: probs}


class NeighbourScores:
  """Common neighbours and Adamic–Adar scores of pairs within one node set.

  Args:
    num_nodes: Nodes of the node set.
    sources, targets: Its edges (node indices; every edge set within the node set).
  """

  def __init__(self, num_nodes: int, sources: np.ndarray, targets: np.ndarray):
    loops = sources == targets
    adj = adjacency(num_nodes, sources[~loops], targets[~loops])
    adj.data[:] = 1.0  # neighbours, not edge counts
    self._adj = adj
    degree = np.asarray(adj.sum(axis=1)).ravel()
    with np.errstate(divide="ignore"):
      weight = np.where(degree > 1, 1.0 / np.log(np.maximum(degree, 2)), 0.0)
    self._weighted = {COMMON_NEIGHBOURS: adj,
                      ADAMIC_ADAR: (adj @ scipy.sparse.diags(weight)).tocsr()}

  def pairs(self, name: str, pairs: np.ndarray) -> np.ndarray:
    """The baseline ``name``'s score of each ``(source, target)`` pair."""
    left = self._weighted[name][pairs[:, 0]]
    return np.asarray(left.multiply(self._adj[pairs[:, 1]]).sum(axis=1)).ravel()

  def rows(self, name: str, sources: np.ndarray) -> np.ndarray:
    """The baseline ``name``'s score of ``(source, every node)`` for each source: ``[s, n]``."""
    return (self._weighted[name][sources] @ self._adj.T).toarray()


def _before(times: np.ndarray, bound: float, inclusive: bool) -> int:
  """How many of ``times`` (sorted) are before ``bound`` (``inclusive``: at or before)."""
  return int(np.searchsorted(times, bound, side="right" if inclusive else "left"))


class TimedPopularity:
  """``popularity`` as of each pair's time: the target's popularity among the edges before it.

  :func:`~gnn_trainer_component.graph.negatives.popularity` of the edges before
  the pair's time (each edge counted at the nodes
  :func:`~gnn_trainer_component.graph.negatives.popular_ends` names).

  Args:
    edges: The predicted edge set's edges, ``[E, 2]`` node indices (the
      supervised positives of every split: distinct, no self loops).
    times: Their times.
    num_targets: Nodes of the target node set.
    undirected: An edge counts at both ends.
    inclusive: An edge at the pair's time counts (the hops' ``time_inclusive``).
  """

  def __init__(self, edges: np.ndarray, times: np.ndarray, num_targets: int,
               undirected: bool, inclusive: bool = False):
    nodes = negatives_lib.popular_ends(edges, undirected)
    times = np.asarray(times, np.float64)
    times = np.r_[times, times] if undirected else times
    self._indptr, order = csr.by_row(nodes, num_targets, within=times)
    self._times = times[order]
    self._inclusive = inclusive

  def pairs(self, pairs: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Each ``(source, target)`` pair's score at its time."""
    out = np.empty(len(pairs))
    for i, (v, t) in enumerate(zip(pairs[:, 1].tolist(), np.asarray(times).tolist(), strict=True)):
      a, b = self._indptr[v], self._indptr[v + 1]
      out[i] = _before(self._times[a:b], t, self._inclusive)
    return out


class TimedNeighbourScores:
  """``common_neighbours`` and ``adamic_adar`` as of each pair's time (edges before it).

  Args:
    num_nodes: Nodes of the node set.
    sources, targets, times: Its timed edges (every edge set within the node set
      that has a time, either direction).
    inclusive: An edge at the pair's time counts.
  """

  def __init__(self, num_nodes: int, sources: np.ndarray, targets: np.ndarray,
               times: np.ndarray, inclusive: bool = False):
    keep = sources != targets
    nodes = np.r_[sources[keep], targets[keep]]
    times = np.asarray(times, np.float64)[keep]
    self._indptr, order = csr.by_row(nodes, num_nodes, within=np.r_[times, times])
    self._neighbours = np.r_[targets[keep], sources[keep]][order]
    self._times = np.r_[times, times][order]
    self._inclusive = inclusive

  def _neighbours_before(self, node: int, bound: float) -> np.ndarray:
    a, b = self._indptr[node], self._indptr[node + 1]
    return np.unique(self._neighbours[a:a + _before(self._times[a:b], bound, self._inclusive)])

  def pairs(self, name: str, pairs: np.ndarray, times: np.ndarray) -> np.ndarray:
    """The baseline ``name``'s score of each ``(source, target)`` pair at its time."""
    out = np.empty(len(pairs))
    for i, ((u, v), t) in enumerate(zip(pairs.tolist(), np.asarray(times).tolist(), strict=True)):
      common = np.intersect1d(self._neighbours_before(u, t), self._neighbours_before(v, t),
                              assume_unique=True)
      if name == COMMON_NEIGHBOURS:
        out[i] = len(common)
        continue
      degrees = np.array([len(self._neighbours_before(w, t)) for w in common.tolist()])
      out[i] = float(np.sum(1.0 / np.log(degrees[degrees > 1]))) if len(degrees) else 0.0
    return out


#: ``() -> (split, its queries as a Ranking)``: where the kNN baselines choose their neighbours.
Validation = Callable[[], tuple[str, ranking.Ranking]]


def link_baselines(splits: link_pairs.LinkSplits, pairs: np.ndarray,
                   pair_times: Optional[np.ndarray], task: ranking.Ranking,
                   cfg: config_lib.EvalConfig,
                   validation: Optional[Validation] = None
                   ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, dict]]:
  """Each link baseline's pair scores, query ranks and settings.

  On a split by time, every pair is scored as of its time.

  Args:
    splits: The graph in memory and its link splits.
    pairs: ``[N, 2]`` pairs scored.
    pair_times: Each pair's time (a split by time), or None.
    task: The queries ranked, and among what.
    cfg: ``knn_neighbours`` and ``edgebank_window``.
    validation: Builds another held-out split's name and queries, ranked as
      ``task``'s, where ``item_knn`` and ``user_knn`` choose their neighbours
      (called only for them; None: the default).
  """
  knn, settings = None, {}
  if splits.end_node_sets[0] != splits.end_node_sets[1]:
    knn, settings = _knn(splits, validation, cfg.knn_neighbours)
  if splits.link.time:
    scorers = timed_baselines(splits, cfg.edgebank_window or interactions.window_of(task.times))
    if knn is not None:
      scorers.update({name: (lambda p, t, n=name: knn.pairs(n, p)) for name in settings})
    scores = {name: fn(pairs, pair_times) for name, fn in scorers.items()}
    ranks = ({} if task.negatives is None else
             {name: task.timed_ranks(fn) for name, fn in scorers.items()})
    return scores, ranks, settings
  degree = retrieval.popularity(splits)
  scores = {POPULARITY: degree[pairs[:, 1]]}
  ranks = {POPULARITY: task.ranks(lambda rows: np.broadcast_to(degree, (len(rows), len(degree))))}
  if knn is not None:
    for name in settings:
      scores[name] = knn.pairs(name, pairs)
      ranks[name] = task.ranks(lambda rows, n=name: knn.rows(n, rows))
    return scores, ranks, settings
  graph = splits.message_graph
  within = _within(splits)
  neighbours = NeighbourScores(
      graph.node_sets[splits.end_node_sets[0]].size,
      np.concatenate([graph.edge_sets[n].source for n in within]),
      np.concatenate([graph.edge_sets[n].target for n in within]))
  for name in (COMMON_NEIGHBOURS, ADAMIC_ADAR):
    scores[name] = neighbours.pairs(name, pairs)
    ranks[name] = task.ranks(lambda rows, n=name: neighbours.rows(n, rows))
  return scores, ranks, settings


def _knn(splits: link_pairs.LinkSplits, validation: Optional[Validation],
         neighbours: Optional[int]) -> tuple[interactions.KnnScores, dict[str, dict]]:
  """``item_knn`` and ``user_knn`` on the message graph's predicted edges, and their settings.

  Each keeps ``neighbours``, else the count with the best MRR on ``validation``,
  else the default.
  """
  graph = splits.message_graph
  source_set, target_set = splits.end_node_sets
  edges = graph.edge_sets[splits.link.edge_set]
  choices = (neighbours,) if neighbours else interactions.NEIGHBOUR_CHOICES
  knn = interactions.KnnScores(graph.node_sets[source_set].size,
                               graph.node_sets[target_set].size, edges.source, edges.target,
                               most=max(choices))
  settings, validated = {}, None
  for name in (ITEM_KNN, USER_KNN):
    if neighbours or validation is None:
      knn.use(name, neighbours or interactions.DEFAULT_NEIGHBOURS)
      settings[name] = {"neighbours": knn.neighbours[name],
                        "chosen_on": "eval_config" if neighbours else "default"}
      continue
    validated = validated or validation()  # built once, for both baselines
    split, queries = validated
    mrr = {}
    for k in choices:
      knn.use(name, k)
      mrr[k] = float(np.mean(1.0 / queries.ranks(lambda rows, n=name: knn.rows(n, rows))))
    best = max(choices, key=lambda k: (mrr[k], -k))
    knn.use(name, best)
    settings[name] = {"neighbours": best, "chosen_on": split,
                      "validation_mrr": {str(k): round(v, 6) for k, v in mrr.items()}}
  return knn, settings


def _within(splits: link_pairs.LinkSplits) -> list[str]:
  """The edge sets within the (one) node set of the pairs."""
  node_set = splits.end_node_sets[0]
  return [n for n, e in splits.message_graph.schema.edge_sets.items()
          if e.source == node_set and e.target == node_set]


def timed_baselines(splits: link_pairs.LinkSplits, window: float
                    ) -> dict[str, ranking.PairScorer]:
  """The baselines of a time split, each reading only the edges before a pair's time.

  ``popularity`` counts the predicted edge set's distinct edges (every split's
  positives, as the graph core counts popularity), and ``edgebank``,
  ``edgebank_window`` (over ``window``) and ``recency`` read them
  (:class:`interactions.EdgeHistory`); ``common_neighbours`` and
  ``adamic_adar`` (one node set) the edge sets within it that have a time: the
  link's and those the hops read by time.
  """
  link, graph = splits.link, splits.message_graph
  rules = splits.plan.time_rules()
  inclusive = rules.get(link.edge_set, ("", False))[1]
  source_set, target_set = splits.end_node_sets
  names = sorted(splits.positives)
  edges = np.concatenate([splits.positives[s] for s in names])
  times = np.concatenate([splits.positive_times[s] for s in names])
  history = interactions.EdgeHistory(edges, times, graph.node_sets[target_set].size,
                                     undirected=link.undirected, window=window,
                                     inclusive=inclusive)
  out: dict[str, ranking.PairScorer] = {POPULARITY: TimedPopularity(
      edges, times, graph.node_sets[target_set].size, link.undirected, inclusive).pairs}
  for name in (EDGEBANK, EDGEBANK_WINDOW, RECENCY):
    out[name] = functools.partial(history.pairs, name)
  if source_set == target_set:
    timed = {**{n: f for n, (f, _) in rules.items()}, link.edge_set: link.time}
    within = [n for n in _within(splits) if n in timed]
    neighbours = TimedNeighbourScores(
        graph.node_sets[source_set].size,
        np.concatenate([graph.edge_sets[n].source for n in within]),
        np.concatenate([graph.edge_sets[n].target for n in within]),
        np.concatenate([np.asarray(graph.edge_sets[n].features[timed[n]], np.float64)
                        for n in within]), inclusive)
    for name in (COMMON_NEIGHBOURS, ADAMIC_ADAR):
      out[name] = functools.partial(neighbours.pairs, name)
  return out
