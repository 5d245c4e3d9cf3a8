"""Training curves as a picture: per-epoch Keras logs -> one PNG.

``write_training_curves(history, path)`` draws, for every metric, the training
value and (where present) the validation value against the epoch, one subplot
per metric. Single-task logs (``loss``, ``sparse_categorical_accuracy``,
``val_loss``, ...) give one row of subplots; multi-task logs (``loss``,
``<task>/loss``, ``<task>/<metric>``, ``val_<task>/loss``, ...) give one row for
the totals (``loss``) and one row per task.

Matplotlib is used through its object API on the Agg canvas (no pyplot, no
display, no global backend switch), so it is safe inside a TFX executor and in a
notebook alike. ``path`` may be local or any ``tf.io.gfile`` URI (``gs://...``).
"""

from __future__ import annotations

import io
import math
import os
from typing import Any, Mapping, NamedTuple, Optional, Sequence

#: Size of one subplot in inches, and the resolution: a figure of ``r`` rows and
#: ``c`` columns is ``c * PANEL_WIDTH_IN * DPI`` x ``r * PANEL_HEIGHT_IN * DPI`` pixels.
PANEL_WIDTH_IN = 4.0
PANEL_HEIGHT_IN = 3.0
DPI = 100
#: File name of the picture in the ModelRun artifact (``<model_run uri>/curves.png``).
CURVES_FILE = "curves.png"

_VAL_PREFIX = "val_"
_TOTAL_GROUP = ""


class Panel(NamedTuple):
  """One subplot: ``task`` ("" for keys without a task) and ``metric``.

  ``train_key`` / ``val_key`` are the history keys drawn (None when absent).
  """
  task: str
  metric: str
  train_key: Optional[str]
  val_key: Optional[str]

  @property
  def title(self) -> str:
    return f"{self.task}: {self.metric}" if self.task else self.metric


def _number(value: Any) -> Optional[float]:
  """``value`` as a float, or None if it is not a (scalar) number."""
  if isinstance(value, bool):
    return None
  try:
    return float(value)
  except (TypeError, ValueError):
    return None


def _split_key(key: str) -> tuple[str, str]:
  """``"<task>/<metric>"`` -> (task, metric); ``"loss"`` -> ("", "loss")."""
  task, sep, metric = key.rpartition("/")
  return (task, metric) if sep else (_TOTAL_GROUP, key)


def curve_panels(history: Sequence[Mapping[str, Any]]) -> list[list[Panel]]:
  """The subplots drawn for ``history``: one list (row) per task, in display order.

  The first row holds the keys without a task (``loss``, ...), then one row per
  task in order of first appearance; within a row, metrics in order of first
  appearance with ``loss`` first. A metric logged only for validation gets a
  panel of its own. Keys whose values are never numbers are left out.
  """
  seen: dict[str, None] = {}  # Ordered set of numeric keys.
  for logs in history:
    for key, value in logs.items():
      if _number(value) is not None:
        seen.setdefault(key, None)
  base_keys: dict[str, None] = {}
  for key in seen:
    base = key[len(_VAL_PREFIX):] if key.startswith(_VAL_PREFIX) else key
    base_keys.setdefault(base, None)
  groups: dict[str, list[Panel]] = {}
  for base in base_keys:
    task, metric = _split_key(base)
    panel = Panel(task=task, metric=metric,
                  train_key=base if base in seen else None,
                  val_key=_VAL_PREFIX + base if _VAL_PREFIX + base in seen else None)
    groups.setdefault(task, []).append(panel)
  rows = []
  for task in sorted(groups, key=lambda t: t != _TOTAL_GROUP):  # Stable: totals first.
    panels = groups[task]
    panels.sort(key=lambda p: p.metric != "loss")  # Stable: loss first.
    rows.append(panels)
  return rows


def _series(history: Sequence[Mapping[str, Any]], key: Optional[str],
            epochs: Sequence[int]) -> tuple[list[int], list[float]]:
  xs, ys = [], []
  if key is None:
    return xs, ys
  for epoch, logs in zip(epochs, history, strict=True):
    value = _number(logs.get(key))
    if value is not None and math.isfinite(value):
      xs.append(epoch)
      ys.append(value)
  return xs, ys


def render_training_curves(history: Sequence[Mapping[str, Any]], *,
                           title: Optional[str] = None,
                           first_epoch: int = 1) -> Optional[bytes]:
  """The PNG bytes of the curves of ``history``, or None if it has no metric."""
  # Imported here: matplotlib loads only when a picture is drawn.
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure
  from matplotlib.ticker import MaxNLocator

  history = list(history)
  rows = curve_panels(history)
  if not rows:
    return None
  nrows, ncols = len(rows), max(len(r) for r in rows)
  fig = Figure(figsize=(ncols * PANEL_WIDTH_IN, nrows * PANEL_HEIGHT_IN), dpi=DPI,
               layout="constrained")
  FigureCanvasAgg(fig)
  axes = fig.subplots(nrows, ncols, squeeze=False)
  epochs = list(range(first_epoch, first_epoch + len(history)))
  single_point = len(history) == 1
  for r, panels in enumerate(rows):
    for c in range(ncols):
      ax = axes[r][c]
      if c >= len(panels):
        ax.set_axis_off()
        continue
      panel = panels[c]
      for key, label, style in ((panel.train_key, "train", "-"),
                                (panel.val_key, "validation", "--")):
        xs, ys = _series(history, key, epochs)
        if xs:
          ax.plot(xs, ys, style, marker="o" if single_point or len(xs) < 30 else None,
                  markersize=3, label=label)
      ax.set_title(panel.title, fontsize=10)
      ax.set_xlabel("epoch", fontsize=8)
      ax.tick_params(labelsize=8)
      ax.xaxis.set_major_locator(MaxNLocator(integer=True))
      ax.grid(True, alpha=0.3)
      if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
  if title:
    fig.suptitle(title, fontsize=11)
  buf = io.BytesIO()
  fig.savefig(buf, format="png", dpi=DPI)
  return buf.getvalue()


def _write_bytes(path: str, data: bytes) -> None:
  if "://" in path:  # gs://, s3://, ...: TensorFlow's file system layer.
    import tensorflow as tf  # Imported here: only a remote path needs TensorFlow.
    parent = path.rsplit("/", 1)[0]
    tf.io.gfile.makedirs(parent)
    with tf.io.gfile.GFile(path, "wb") as f:
      f.write(data)
    return
  parent = os.path.dirname(os.path.abspath(path))
  os.makedirs(parent, exist_ok=True)
  tmp = f"{path}.tmp-{os.getpid()}"
  with open(tmp, "wb") as f:
    f.write(data)
  os.replace(tmp, path)


def write_training_curves(history: Sequence[Mapping[str, Any]], path: str, *,
                          title: Optional[str] = None, first_epoch: int = 1) -> bool:
  """Writes the training curves of ``history`` as a PNG to ``path``.

  Args:
    history: Per-epoch Keras logs, oldest first, e.g. ``[{"loss": 1.1,
      "val_loss": 1.0, "sparse_categorical_accuracy": 0.4,
      "val_sparse_categorical_accuracy": 0.5}, ...]`` (Keras'
      ``History.history`` transposed, or the ``logs`` of each
      ``on_epoch_end``). Multi-task keys: ``<task>/<metric>`` and
      ``val_<task>/<metric>``. Missing keys (e.g. validation every n-th epoch
      only) and non-numeric or non-finite values are gaps.
    path: Local path or ``tf.io.gfile`` URI (``gs://bucket/.../curves.png``);
      parent folders are created.
    title: Optional figure title.
    first_epoch: Number of the first epoch in ``history`` (x axis).

  Returns:
    True if the PNG was written; False (nothing written) if ``history`` holds no
    numeric metric, e.g. it is empty.
  """
  data = render_training_curves(history, title=title, first_epoch=first_epoch)
  if data is None:
    return False
  _write_bytes(path, data)
  return True

