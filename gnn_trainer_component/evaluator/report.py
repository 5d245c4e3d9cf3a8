"""``report.png``: one picture of an evaluation, the model beside its baselines.

Left: the main metric (accuracy, RMSE) on all test nodes and per degree
bucket, one bar per predictor (the model, each baseline, the baseline model),
with the number of nodes under each bucket. Right, for classification: the
calibration curve (accuracy against confidence per bin, the diagonal is
perfect calibration) of the model and of each predictor that is not a
constant; for regression: the model's prediction against the label; for link
prediction: the ROC curve of every predictor on the split's pairs.
Matplotlib's object API on the Agg canvas, as the training curves.
"""

from __future__ import annotations

import io
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
import numpy as np

from gnn_trainer_component import outputs
from gnn_trainer_component.evaluator import baselines as baselines_lib
from gnn_trainer_component.evaluator import config as config_lib
from gnn_trainer_component.evaluator import metrics as metrics_lib

REPORT_FILE = "report.png"


def _bars(ax, evaluation: Any) -> None:
  metric = evaluation.cfg.main_metric
  model = evaluation.metrics["model"]
  names = [config_lib.ALL] + metrics_lib.degree_order(model)
  predictors = list(evaluation.metrics)
  width = 0.8 / len(predictors)
  x = np.arange(len(names))
  for i, predictor in enumerate(predictors):
    values = [evaluation.metrics[predictor][n].get(metric, np.nan) for n in names]
    ax.bar(x + (i - (len(predictors) - 1) / 2) * width, values, width, label=predictor)
  rows = "pairs" if evaluation.cfg.task in config_lib.PAIR_TASKS else "nodes"
  ax.set_xticks(x, [f"{n.removeprefix('degree:')}\n({model[n]['num_nodes']})" for n in names],
                fontsize=7)
  ax.set_xlabel(f"degree bucket ({rows})", fontsize=8)
  ax.set_ylabel(metric, fontsize=8)
  ax.set_title(f"{metric} per degree bucket", fontsize=10)
  ax.tick_params(labelsize=8)
  ax.grid(True, axis="y", alpha=0.3)
  top = max((evaluation.metrics[p][n].get(metric, 0.0) for p in predictors for n in names),
            default=0.0)
  ax.set_ylim(0, 1.25 * top if top > 0 else 1)
  ax.legend(fontsize=7, loc="upper center", ncol=len(predictors))


def _roc(ax, predictions: Any) -> None:
  positives = predictions.labels == 1
  ax.plot([0, 1], [0, 1], ":", color="gray", label="chance")
  for name, scores in predictions.by_predictor.items():
    order = np.argsort(-scores, kind="stable")
    hits = positives[order]
    # One point per distinct score: tied pairs move the curve together (a diagonal step).
    ends = metrics_lib.group_ends(scores[order])
    tpr = np.r_[0.0, np.cumsum(hits)[ends] / max(1, hits.sum())]
    fpr = np.r_[0.0, np.cumsum(~hits)[ends] / max(1, (~hits).sum())]
    ax.plot(fpr, tpr, label=name)
  ax.set_xlabel("false positive rate", fontsize=8)
  ax.set_ylabel("true positive rate", fontsize=8)
  ax.set_title("ROC on the split's pairs", fontsize=10)
  ax.legend(fontsize=7)


def _second(ax, evaluation: Any, predictions: Any) -> None:
  if evaluation.cfg.task == config_lib.LINK_PREDICTION:
    _roc(ax, predictions)
    return
  if config_lib.kind(evaluation.cfg.task) == config_lib.REGRESSION:
    ax.scatter(predictions.labels, predictions.by_predictor["model"], s=6, alpha=0.5)
    low = float(min(predictions.labels.min(), predictions.by_predictor["model"].min()))
    high = float(max(predictions.labels.max(), predictions.by_predictor["model"].max()))
    ax.plot([low, high], [low, high], ":", color="gray")
    ax.set_xlabel("label", fontsize=8)
    ax.set_ylabel("model", fontsize=8)
    ax.set_title("prediction against label", fontsize=10)
    return
  ax.plot([0, 1], [0, 1], ":", color="gray", label="perfect")
  for name, probs in predictions.by_predictor.items():
    if name == baselines_lib.MAJORITY_CLASS:  # one confidence for every node: one point
      continue
    confidence, accuracy, _ = metrics_lib.calibration_curve(predictions.labels, probs)
    filled = ~np.isnan(confidence)
    ax.plot(confidence[filled], accuracy[filled], marker="o", markersize=3, label=name)
  ax.set_xlabel("confidence", fontsize=8)
  ax.set_ylabel("accuracy", fontsize=8)
  ax.set_title("calibration", fontsize=10)
  ax.legend(fontsize=7)


def render(evaluation: Any, predictions: Any) -> bytes:
  """The PNG of an :class:`~gnn_trainer_component.evaluator.evaluation.Evaluation`."""
  fig = Figure(figsize=(10, 3.8), dpi=100, layout="constrained")
  FigureCanvasAgg(fig)
  left, right = fig.subplots(1, 2, width_ratios=[3, 2])
  _bars(left, evaluation)
  _second(right, evaluation, predictions)
  for ax in (left, right):
    ax.tick_params(labelsize=8)
  verdict = "blessed" if evaluation.verdict.blessed else "NOT blessed"
  what = (f"{evaluation.node_set!r}, split {evaluation.cfg.split!r}"
          if evaluation.cfg.task in config_lib.PAIR_TASKS
          else f"{evaluation.node_set!r}.{evaluation.cfg.label}")
  fig.suptitle(f"{evaluation.cfg.task} of {what}: {verdict}", fontsize=11)
  buf = io.BytesIO()
  fig.savefig(buf, format="png")
  return buf.getvalue()


def write(evaluation: Any, predictions: Any, path: str) -> None:
  """Writes :func:`render` to ``path`` (local or a ``tf.io.gfile`` URI)."""
  outputs.write_atomically(path, render(evaluation, predictions))
