"""How a held-out edge is ranked: the one protocol of GnnTrainer's retrieval and GraphEvaluator.

A query is a held-out edge ``(source, target)``; its target is ranked among
candidate targets by a predictor's scores, ties counted half (OGB's mean of
the optimistic and pessimistic rank):

* :func:`filtered_ranks`: among every node of the target node set, the
  source's other known edges and the source itself (one node set) filtered
  out, as OGB's full-ranking link benchmarks;
* :func:`sampled_ranks`: among negative targets drawn for each query
  (:func:`~gnn_trainer_component.graph.negatives.query_negatives`, as
  ogbl-citation2);
* :func:`timed_ranks`: the same, each pair scored as of its query's time.

:class:`Ranking` holds a split's queries and what they are ranked among, and
ranks them by any predictor; :func:`rank_metrics` gives MRR and hits@K.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Sequence

import numpy as np

from gnn_trainer_component.graph import csr
from gnn_trainer_component.graph import negatives as negatives_lib

#: Hits@K reported by default.
HITS_AT = (20, 50, 100)

#: Scores computed per call of a predictor (sources x candidates), to bound memory.
PAIRS_PER_CALL = 2**19

#: ``sources [c] -> scores [c, num_candidates]``: a predictor's score of every candidate target.
ScoreRows = Callable[[np.ndarray], np.ndarray]

#: ``(pairs [N, 2], times [N]) -> scores [N]``: a predictor's score of each pair at its time.
PairScorer = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _rank(positive: np.ndarray, against: np.ndarray) -> np.ndarray:
  """1 + the candidates scored above each query's target + half those tied with it."""
  positive = np.asarray(positive, np.float64)[:, None]
  return 1.0 + (against > positive).sum(1) + 0.5 * (against == positive).sum(1)


def product_weights(source: np.ndarray, target: np.ndarray, score: np.ndarray
                    ) -> Optional[tuple[np.ndarray, float]]:
  """``(w, b)`` with ``score = sum_i w_i source_i target_i + b`` for every pair, or None.

  None when no such ``w``, ``b`` reproduce the scores (to 1e-3 of their scale), or the
  pairs are too few (or too alike) to tell: the products must span every ``w_i``.
  """
  features = source.reshape(len(source), -1) * target.reshape(len(target), -1)
  if len(score) <= features.shape[1] + 1:
    return None
  design = np.c_[features, np.ones(len(score))].astype(np.float64)
  coef, _, rank, _ = np.linalg.lstsq(design, score.astype(np.float64), rcond=None)
  if rank < design.shape[1]:
    return None
  scale = max(1.0, float(np.abs(score).max()))
  if np.abs(design @ coef - score).max() > 1e-3 * scale:
    return None
  return coef[:-1], float(coef[-1])


def product_rows(sources: np.ndarray, targets: np.ndarray, weights: np.ndarray,
                 bias: float) -> ScoreRows:
  """The :data:`ScoreRows` of ``sum_i w_i source_i target_i + b``: one matrix product per call.

  ``sources`` / ``targets``: the ends' embeddings by node index (``[N, ...]``, flattened
  to ``len(weights)`` values each).
  """
  weighted = sources.reshape(len(sources), len(weights)).astype(np.float64) * weights
  by_column = np.ascontiguousarray(targets.reshape(len(targets), len(weights)).T, np.float64)
  return lambda rows: weighted[rows] @ by_column + bias


def filtered_ranks(score_rows: ScoreRows, queries: np.ndarray, known: negatives_lib.EdgeKeys,
                   num_candidates: int, *, num_sources: Optional[int] = None,
                   one_node_set: bool = True) -> np.ndarray:
  """The filtered rank of each query's target among all candidates (see the module doc).

  Args:
    score_rows: Scores of every candidate (target node) for each given source.
    queries: ``[Q, 2]`` node indices ``(source, target)``.
    known: The edges not counted as candidates (the target of its own query
      excepted).
    num_candidates: Number of candidate nodes (the target node set's).
    num_sources: Number of nodes in the source node set (default: the same).
    one_node_set: Sources and candidates are one node set: a source is no
      candidate of its own query.

  Returns:
    ``[Q]`` float ranks, 1.0 for a target scored above every candidate.
  """
  indptr, neighbours = known.neighbours(num_candidates if num_sources is None else num_sources)
  chunk = max(1, PAIRS_PER_CALL // max(num_candidates, 1))
  ranks = np.empty(len(queries), np.float64)
  for start in range(0, len(queries), chunk):
    q = queries[start:start + chunk]
    rows = np.arange(len(q))
    scores = np.array(score_rows(q[:, 0]), dtype=np.float64, copy=True)
    positive = scores[rows, q[:, 1]]
    query, offsets = csr.run_offsets(indptr[q[:, 0] + 1] - indptr[q[:, 0]])
    scores[query, neighbours[indptr[q[:, 0]][query] + offsets]] = -np.inf
    if one_node_set:
      scores[rows, q[:, 0]] = -np.inf
    scores[rows, q[:, 1]] = -np.inf
    ranks[start:start + len(q)] = _rank(positive, scores)
  return ranks


def sampled_ranks(score_rows: ScoreRows, queries: np.ndarray, negatives: np.ndarray,
                  chunk: int = 1024) -> np.ndarray:
  """Each query's target ranked among its own ``[Q, K]`` negative targets."""
  ranks = np.empty(len(queries), np.float64)
  for start in range(0, len(queries), chunk):
    q, neg = queries[start:start + chunk], negatives[start:start + chunk]
    scores = np.asarray(score_rows(q[:, 0]), dtype=np.float64)
    rows = np.arange(len(q))
    ranks[start:start + len(q)] = _rank(scores[rows, q[:, 1]], scores[rows[:, None], neg])
  return ranks


def timed_ranks(score: PairScorer, queries: np.ndarray, negatives: np.ndarray,
                times: np.ndarray, positive_scores: Optional[np.ndarray] = None) -> np.ndarray:
  """Each query's target ranked among its negatives, every pair scored at the query's time.

  ``positive_scores``: the queries' own scores, if already known.
  """
  q, k = negatives.shape
  positive = score(queries, times) if positive_scores is None else positive_scores
  against = score(np.stack([np.repeat(queries[:, 0], k), negatives.reshape(-1)], axis=1),
                  np.repeat(times, k)).reshape(q, k)
  return _rank(positive, np.asarray(against, np.float64))


def rank_metrics(ranks: np.ndarray, hits_at: Sequence[int] = HITS_AT) -> dict[str, float]:
  """``{"mrr", "hits@K", ...}`` of the ranks (mean reciprocal rank, share within K)."""
  out = {"mrr": float(np.mean(1.0 / ranks))}
  out.update({f"hits@{k}": float(np.mean(ranks <= k)) for k in hits_at})
  return out


@dataclasses.dataclass(frozen=True)
class Ranking:
  """The held-out edges of a split as queries, and what each is ranked among.

  Attributes:
    queries: ``[Q, 2]`` node indices ``(source, target)``.
    known: The edges filtered out of every-target rankings (:func:`filtered_ranks`).
    num_candidates: Nodes of the target node set.
    num_sources: Nodes of the source node set.
    one_node_set: Sources and targets are one node set.
    negatives: ``[Q, K]`` negative targets per query (:func:`sampled_ranks`), or
      None: every target is a candidate.
    times: Each query's time (a split by time), or None.
  """
  queries: np.ndarray
  known: negatives_lib.EdgeKeys
  num_candidates: int
  num_sources: int
  one_node_set: bool
  negatives: Optional[np.ndarray] = None
  times: Optional[np.ndarray] = None

  def ranks(self, score_rows: ScoreRows) -> np.ndarray:
    """Each query's rank by ``score_rows``: among its negatives, or every target filtered."""
    if self.negatives is not None:
      return sampled_ranks(score_rows, self.queries, self.negatives)
    return filtered_ranks(score_rows, self.queries, self.known, self.num_candidates,
                          num_sources=self.num_sources, one_node_set=self.one_node_set)

  def sample(self, most: int, seed: int) -> "Ranking":
    """At most ``most`` of these queries (drawn without replacement, seeded), ranked alike."""
    if len(self.queries) <= most:
      return self
    keep = np.sort(np.random.default_rng(seed).choice(len(self.queries), most, replace=False))
    return dataclasses.replace(
        self, queries=self.queries[keep],
        negatives=None if self.negatives is None else self.negatives[keep],
        times=None if self.times is None else self.times[keep])

  def timed_ranks(self, score: PairScorer,
                  positive_scores: Optional[np.ndarray] = None) -> np.ndarray:
    """Each query's rank among its negatives, every pair scored by ``score`` at its time."""
    return timed_ranks(score, self.queries, self.negatives, self.times, positive_scores)
