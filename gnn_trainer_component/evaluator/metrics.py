"""The metrics GraphEvaluator computes, on numpy arrays: per task, per slice.

Classification (``labels``: class ids, ``probs``: ``[n, num_classes]``
probabilities): ``accuracy``; ``macro_f1`` (the mean F1 over the classes that
occur among the labels or the predictions, as scikit-learn's ``f1_score(...,
average="macro")``); ``precision/<c>`` and ``recall/<c>`` per class (0 where
undefined, as scikit-learn's ``zero_division=0``); ``calibration_error``, the
expected calibration error over ``CALIBRATION_BINS`` equal-width bins of the
predicted class's probability (Guo et al., 2017). Regression: ``mae`` and
``rmse``. Link prediction (``labels`` 1 for an edge, 0 for a negative pair,
``scores`` of each pair, ``ranks`` of each edge among every candidate target):
``auc`` (ROC, ties counted half) and ``average_precision`` (scikit-learn's
``average_precision_score``: precision at each distinct score, weighted by the
recall it adds), defined on a slice holding both edges and negatives;
``mrr`` and ``hits@K`` from the filtered ranks, where the predictor ranks.
Each slice (:func:`slices`) gets every metric it defines, and ``num_nodes``
(pairs, for link prediction).
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np
import scipy.stats

from gnn_trainer_component.evaluator import config as config_lib
from gnn_trainer_component.graph import ranking

#: Bins of the calibration error and of the report's calibration curve.
CALIBRATION_BINS = 10


def calibration_bins(probs: np.ndarray) -> np.ndarray:
  """The bin of each node's confidence (its top probability): bin ``b`` is ``(b/B, (b+1)/B]``."""
  confidence = probs.max(axis=1)
  return np.clip(np.ceil(confidence * CALIBRATION_BINS).astype(np.int64) - 1, 0,
                 CALIBRATION_BINS - 1)


def calibration_curve(labels: np.ndarray, probs: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Per calibration bin: (mean confidence, accuracy, nodes); NaN where a bin is empty."""
  bins = calibration_bins(probs)
  correct = (probs.argmax(axis=1) == labels).astype(np.float64)
  counts = np.bincount(bins, minlength=CALIBRATION_BINS).astype(np.float64)
  with np.errstate(invalid="ignore", divide="ignore"):
    confidence = np.bincount(bins, probs.max(axis=1), CALIBRATION_BINS) / counts
    accuracy = np.bincount(bins, correct, CALIBRATION_BINS) / counts
  return confidence, accuracy, counts


def classification(labels: np.ndarray, probs: np.ndarray) -> dict[str, float]:
  """The classification metrics of ``probs`` (``[n, num_classes]``) against ``labels``."""
  predicted = probs.argmax(axis=1)
  num_classes = probs.shape[1]
  out = {"accuracy": float(np.mean(predicted == labels))}
  f1 = []
  present = set(np.unique(labels).tolist()) | set(np.unique(predicted).tolist())
  for c in range(num_classes):
    tp = int(np.sum((predicted == c) & (labels == c)))
    predicted_c, actual_c = int(np.sum(predicted == c)), int(np.sum(labels == c))
    precision = tp / predicted_c if predicted_c else 0.0
    recall = tp / actual_c if actual_c else 0.0
    out[f"precision/{c}"], out[f"recall/{c}"] = precision, recall
    if c in present:
      f1.append(2 * precision * recall / (precision + recall) if precision + recall else 0.0)
  out["macro_f1"] = float(np.mean(f1))
  confidence, accuracy, counts = calibration_curve(labels, probs)
  filled = counts > 0
  out["calibration_error"] = float(
      np.sum(counts[filled] * np.abs(accuracy[filled] - confidence[filled])) / len(labels))
  return out


def regression(labels: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
  """MAE and RMSE of ``predictions`` against ``labels`` (both ``[n]``)."""
  error = predictions.astype(np.float64) - labels.astype(np.float64)
  return {"mae": float(np.mean(np.abs(error))), "rmse": float(np.sqrt(np.mean(error ** 2)))}


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
  """ROC AUC: the chance a random edge outscores a random negative (ties count half)."""
  ranks = scipy.stats.rankdata(scores)
  positives = labels == 1
  p, n = int(positives.sum()), int((~positives).sum())
  return float((ranks[positives].sum() - p * (p + 1) / 2) / (p * n))


def group_ends(sorted_scores: np.ndarray) -> np.ndarray:
  """The index of the last of each run of equal scores (``-inf`` equals ``-inf``)."""
  return np.r_[np.flatnonzero(sorted_scores[1:] != sorted_scores[:-1]), len(sorted_scores) - 1]


def average_precision(labels: np.ndarray, scores: np.ndarray) -> float:
  """Precision at each distinct score threshold, weighted by the recall it adds."""
  order = np.argsort(-scores, kind="stable")
  scores, labels = scores[order], labels[order]
  last = group_ends(scores)  # end of each score group
  true_positives = np.cumsum(labels == 1)[last]
  precision = true_positives / (last + 1)
  recall = true_positives / true_positives[-1]
  return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def link_prediction(labels: np.ndarray, scores: np.ndarray, ranks: Optional[np.ndarray],
                    hits_at: Sequence[int]) -> dict[str, float]:
  """AUC and AP where both classes occur; MRR and hits@K where ``ranks`` are given.

  ``ranks``: per pair, the filtered rank of an edge (NaN for a negative pair).
  """
  out = {}
  has_positive = bool(np.any(labels == 1))
  if has_positive and np.any(labels != 1):
    out["auc"] = auc(labels, scores)
    out["average_precision"] = average_precision(labels, scores)
  if ranks is not None and has_positive:
    out.update(ranking.rank_metrics(ranks[labels == 1], hits_at))
  return out


def compute(task: str, labels: np.ndarray, predictions: np.ndarray,
            ranks: Optional[np.ndarray] = None,
            hits_at: Sequence[int] = config_lib.HITS_AT) -> dict[str, float]:
  """The metrics of ``task``.

  ``predictions``: probabilities (classification), values (regression), or
  pair scores with ``ranks`` (link prediction); an edge task's as its node task's.
  """
  if task == config_lib.LINK_PREDICTION:
    return link_prediction(labels, predictions, ranks, hits_at)
  if config_lib.kind(task) == config_lib.REGRESSION:
    return regression(labels, predictions)
  out = classification(labels, predictions)
  if (task == config_lib.EDGE_CLASSIFICATION and predictions.shape[1] == 2
      and len(np.unique(labels)) == 2):  # an edge's 0/1 label (a fraud flag): its ROC AUC too
    out["auc"] = auc(labels, predictions[:, 1])
  return out


def slices(degrees: np.ndarray, features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
  """``{slice name: positions}``: ``all``, each degree bucket present, each feature value.

  Args:
    degrees: Each evaluated node's distinct neighbours in the whole graph.
    features: Per slice feature, each evaluated node's value (scalars).
  """
  out = {config_lib.ALL: np.arange(len(degrees))}
  buckets = np.array([config_lib.degree_slice(int(d)) for d in degrees], dtype=object)
  for name in sorted(set(buckets.tolist()), key=lambda s: config_lib.degree_bounds(s)[0]):
    out[name] = np.flatnonzero(buckets == name)
  for feature, values in features.items():
    shown = np.array([_shown(v) for v in values], dtype=object)
    for value in sorted(set(shown.tolist())):
      out[f"{feature}={value}"] = np.flatnonzero(shown == value)
  return out


def _shown(value) -> str:
  if isinstance(value, bytes):
    return value.decode("utf-8", "backslashreplace")
  if isinstance(value, (float, np.floating)) and float(value).is_integer():
    return str(int(value))
  return str(value.item() if isinstance(value, np.generic) else value)


def by_slice(task: str, labels: np.ndarray, predictions: np.ndarray,
             slice_rows: Mapping[str, np.ndarray], ranks: Optional[np.ndarray] = None,
             hits_at: Sequence[int] = config_lib.HITS_AT) -> dict[str, dict[str, float]]:
  """``{slice: {metric: value, "num_nodes": n}}`` for every slice."""
  out = {}
  for name, rows in slice_rows.items():
    out[name] = dict(compute(task, labels[rows], predictions[rows],
                             None if ranks is None else ranks[rows], hits_at),
                     num_nodes=len(rows))
  return out


def degree_order(names: Sequence[str]) -> list[str]:
  """The degree slices among ``names``, by degree."""
  return sorted((n for n in names if config_lib.degree_bounds(n)),
                key=lambda n: config_lib.degree_bounds(n)[0])


#: Resamples of the paired bootstrap (:func:`paired_interval`).
RESAMPLES = 1000
#: The confidence of the intervals evaluation.json reports.
REPORTED_CONFIDENCE = 0.95


def query_values(metric: str, ranks: np.ndarray) -> np.ndarray:
  """Each query's share of a query metric: ``1/rank`` for ``mrr``, ``rank <= K`` for hits@K."""
  if metric == "mrr":
    return 1.0 / ranks
  return (ranks <= int(metric.split("@", 1)[1])).astype(np.float64)


def paired_interval(model: np.ndarray, baseline: np.ndarray, confidence: float, seed: int,
                    resamples: int = RESAMPLES) -> dict[str, float]:
  """The mean gain ``model - baseline`` over paired queries, with its bootstrap interval.

  The queries are resampled with replacement ``resamples`` times (seeded), the
  same queries for both predictors; the interval holds the central
  ``confidence`` share of the resampled mean gains (percentile bootstrap).

  Returns:
    ``{"gain", "low", "high", "confidence", "queries"}``.
  """
  diff = np.asarray(model, np.float64) - np.asarray(baseline, np.float64)
  n = len(diff)
  out = {"gain": float(diff.mean()) if n else float("nan"), "confidence": float(confidence),
         "queries": n}
  if not n:
    return {**out, "low": float("nan"), "high": float("nan")}
  rng = np.random.default_rng(seed)
  means = np.empty(resamples)
  chunk = max(1, 2**22 // n)
  for start in range(0, resamples, chunk):
    size = min(chunk, resamples - start)
    means[start:start + size] = diff[rng.integers(n, size=(size, n))].mean(axis=1)
  low, high = np.quantile(means, [(1 - confidence) / 2, (1 + confidence) / 2])
  return {**out, "low": float(low), "high": float(high)}
