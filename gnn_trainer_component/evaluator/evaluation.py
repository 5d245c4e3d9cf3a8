"""An evaluation from predictions: metrics per predictor and slice, the verdict, the files.

The ModelEvaluation folder holds ``evaluation.json`` (everything below),
``predictions.parquet`` (one row per test node: ``id``, ``label``,
``degree``, the model's prediction and each baseline's) and ``report.png``
(:mod:`report`). ``evaluation.json``::

  {"task": "classification", "node_set": "paper", "label": "label", "num_nodes": 1000,
   "metrics": {"model": {"all": {"accuracy": 0.81, ..., "num_nodes": 1000},
                         "degree:1": {...}, ...},
               "majority_class": {...}, "label_propagation": {...},
               "baseline_model": {...}},          # with a baseline_model input
   "baselines": ["majority_class", "label_propagation"],
   "gains": {"popularity": {"mrr": {"gain": 0.05, "low": 0.03, "high": 0.07,   # link prediction:
             "confidence": 0.95, "queries": 468}, "hits@20": {...}}, ...},  # paired bootstrap
   "baseline_settings": {"item_knn": {"neighbours": 50, "chosen_on": "eval"}, ...},
   "blessed": true, "message": "...", "checks": [{"rule": ..., "bound": ..., "value": ...,
   "limit": ..., "passed": true, "against": "label_propagation"}, ...]}
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from typing import Any, Mapping, Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import tensorflow as tf

from gnn_trainer_component import outputs
from gnn_trainer_component.evaluator import baselines as baselines_lib
from gnn_trainer_component.evaluator import blessing as blessing_lib
from gnn_trainer_component.evaluator import config as config_lib
from gnn_trainer_component.evaluator import metrics as metrics_lib
from gnn_trainer_component.evaluator import report
from gnn_trainer_component.evaluator.in_memory import Predictions

EVALUATION_FILE = "evaluation.json"
PREDICTIONS_FILE = "predictions.parquet"


@dataclasses.dataclass(frozen=True)
class Evaluation:
  """Metrics of every predictor on every slice, and the verdict of the rules."""
  cfg: config_lib.EvalConfig
  node_set: str
  metrics: Mapping[str, Mapping[str, Mapping[str, float]]]
  baselines: tuple[str, ...]
  verdict: blessing_lib.Verdict
  # {baseline: {metric: paired_interval}}: the model's gain on all ranked queries (link)
  gains: Mapping[str, Mapping[str, Mapping[str, float]]] = dataclasses.field(
      default_factory=dict)
  # {baseline: {setting: value}}: how a baseline was set up (e.g. item_knn's neighbours)
  baseline_settings: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)

  def to_json(self) -> dict[str, Any]:
    return {"task": self.cfg.task, "node_set": self.node_set, "label": self.cfg.label,
            "num_nodes": self.metrics[blessing_lib.MODEL][config_lib.ALL]["num_nodes"],
            "metrics": self.metrics, "baselines": list(self.baselines),
            "gains": self.gains, "baseline_settings": self.baseline_settings,
            "blessed": self.verdict.blessed, "message": self.verdict.message,
            "checks": list(self.verdict.checks)}

  def properties(self) -> dict[str, Any]:
    """The ModelEvaluation's custom properties: the main metrics on all nodes, per predictor."""
    names = config_lib.metric_names(self.cfg.task, self.cfg.hits_at)
    out: dict[str, Any] = {"node_set": self.node_set, "task": self.cfg.task,
                           "num_nodes": self.metrics[blessing_lib.MODEL][config_lib.ALL][
                               "num_nodes"],
                           "blessed": int(self.verdict.blessed)}
    for predictor, by_slice in self.metrics.items():
      prefix = "" if predictor == blessing_lib.MODEL else f"{predictor}_"
      out.update({f"{prefix}{m}": round(by_slice[config_lib.ALL][m], 6) for m in names
                  if m in by_slice[config_lib.ALL]})
    for baseline, by_metric in self.gains.items():  # the MRR gain's interval, per baseline
      if "mrr" in by_metric:
        out[f"mrr_gain_low_vs_{baseline}"] = round(by_metric["mrr"]["low"], 6)
    return out


def _intervals(predictions: Predictions, slice_rows: Mapping[str, np.ndarray],
               seed: int) -> Optional[blessing_lib.Interval]:
  """The model's gain over a baseline on a slice's ranked queries, with its interval.

  The interval is the paired bootstrap's (:func:`metrics.paired_interval`);
  None when the model ranks nothing.
  """
  ranked = predictions.ranks.get(blessing_lib.MODEL)
  if ranked is None:
    return None

  @functools.cache  # the report's intervals and the rules' share them
  def interval(metric: str, slice_name: str, baseline: str,
               confidence: float) -> Mapping[str, float]:
    rows = slice_rows[slice_name]
    model, other = ranked[rows], predictions.ranks[baseline][rows]
    queries = ~np.isnan(model)  # the edges (a negative pair has no rank)
    return metrics_lib.paired_interval(
        metrics_lib.query_values(metric, model[queries]),
        metrics_lib.query_values(metric, other[queries]), confidence, seed)

  return interval


def evaluate(predictions: Predictions, cfg: config_lib.EvalConfig) -> Evaluation:
  """Metrics per predictor and slice, the gains' intervals, and the rules checked."""
  slice_rows = metrics_lib.slices(predictions.degrees, predictions.slice_features)
  results = {name: metrics_lib.by_slice(cfg.task, predictions.labels, values, slice_rows,
                                        predictions.ranks.get(name), cfg.hits_at)
             for name, values in predictions.by_predictor.items()}
  names = tuple(b for b in baselines_lib.BASELINES[cfg.task] if b in results)
  interval = _intervals(predictions, slice_rows, cfg.sampling_seed)
  gains = {} if interval is None else {
      b: {m: interval(m, config_lib.ALL, b, metrics_lib.REPORTED_CONFIDENCE)
          for m in config_lib.metric_names(cfg.task, cfg.hits_at) if config_lib.is_query_metric(m)}
      for b in names if b in predictions.ranks}
  verdict = blessing_lib.judge(cfg.thresholds, results, names, interval)
  return Evaluation(cfg=cfg, node_set=predictions.node_set, metrics=results, baselines=names,
                    verdict=verdict, gains=gains,
                    baseline_settings=dict(predictions.baseline_settings))


def _ids(ids: np.ndarray) -> pa.Array:
  return pa.array([i.decode("utf-8", "backslashreplace") if isinstance(i, bytes) else str(i)
                   for i in ids])


def _table(predictions: Predictions) -> pa.Table:
  if predictions.target_ids is None:
    columns = {"id": _ids(predictions.ids)}
  else:
    columns = {"source": _ids(predictions.ids), "target": _ids(predictions.target_ids)}
  columns.update(label=pa.array(predictions.labels), degree=pa.array(predictions.degrees))
  for name, values in predictions.by_predictor.items():
    if values.ndim == 1:
      columns[name] = pa.array(values.astype(np.float32))
      if name in predictions.ranks:
        columns[f"{name}_rank"] = pa.array(predictions.ranks[name].astype(np.float32))
    else:
      columns[name] = pa.array(values.argmax(axis=1))
      columns[f"{name}_probabilities"] = pa.FixedSizeListArray.from_arrays(
          pa.array(values.astype(np.float32).reshape(-1)), values.shape[1])
  return pa.table(columns)


def write(evaluation: Evaluation, predictions: Predictions, uri: str) -> None:
  """Writes ``evaluation.json``, ``predictions.parquet`` and ``report.png`` into ``uri``."""
  tf.io.gfile.makedirs(uri)
  sink = pa.BufferOutputStream()
  pq.write_table(_table(predictions), sink)
  outputs.write_atomically(os.path.join(uri, PREDICTIONS_FILE), sink.getvalue().to_pybytes())
  report.write(evaluation, predictions, os.path.join(uri, report.REPORT_FILE))
  outputs.write_atomically(os.path.join(uri, EVALUATION_FILE),
                           json.dumps(evaluation.to_json(), indent=1, sort_keys=True).encode())


def read(uri: str) -> dict[str, Any]:
  """``evaluation.json`` of a ModelEvaluation folder."""
  with tf.io.gfile.GFile(os.path.join(uri, EVALUATION_FILE)) as f:
    return json.load(f)
