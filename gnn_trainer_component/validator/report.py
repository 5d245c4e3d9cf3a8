"""``report.png``: one picture of GraphValidator's verdict and of the drift since the last snapshot.

Left: each edge set's degree distributions (the share of nodes per log2 degree bucket, out
and in) for this snapshot, solid, and for the last one, dashed, on log-log axes; without a
last snapshot, this one's alone. Right: the anomalies per split, errors and warnings
stacked. Matplotlib's object API on the Agg canvas, as GraphEvaluator's report.
"""

from __future__ import annotations

import io
from typing import Any, Mapping, Optional, Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
import numpy as np

from gnn_trainer_component import outputs
from gnn_trainer_component.graph.statistics import bucket_low
from gnn_trainer_component.validator import checks
from gnn_trainer_component.validator import config as config_lib

REPORT_FILE = "report.png"


def _shares(histogram: Mapping[str, int]) -> tuple[list[int], list[float]]:
  total = sum(histogram.values()) or 1
  points = [(bucket_low(b), n / total) for b, n in histogram.items()
            if bucket_low(b) > 0 and n]
  return [p[0] for p in points], [p[1] for p in points]


def _degrees(ax, stats: Mapping[str, Any], baseline: Optional[Mapping[str, Any]]) -> None:
  colors = iter(f"C{i}" for i in range(1000))
  for name, edge_set in sorted(stats["edge_sets"].items()):
    for direction in ("out_degree", "in_degree"):
      color = next(colors)
      x, y = _shares(edge_set[direction]["histogram"])
      ax.plot(x, y, "o-", ms=3, color=color, label=f"{name} {direction.split('_')[0]}")
      before = (baseline or {}).get("edge_sets", {}).get(name)
      if before:
        x, y = _shares(before[direction]["histogram"])
        ax.plot(x, y, "--", color=color, alpha=0.7)
  ax.set_xscale("log", base=2)
  ax.set_yscale("log")
  ax.set_xlabel("degree (log2 bucket's lowest)")
  ax.set_ylabel("share of nodes")
  ax.set_title("degrees: this snapshot (solid), the last (dashed)" if baseline
               else "degrees (no last snapshot)")
  if ax.get_legend_handles_labels()[0]:
    ax.legend(fontsize=7)


def _anomalies(ax, splits: Sequence[str], found: Sequence[checks.Anomaly]) -> None:
  at = np.arange(len(splits))
  errors = np.array([sum(a.split == s and a.severity == config_lib.ERROR for a in found)
                     for s in splits])
  warnings = np.array([sum(a.split == s and a.severity == config_lib.WARNING for a in found)
                       for s in splits])
  ax.bar(at, errors, color="C3", label="error")
  ax.bar(at, warnings, bottom=errors, color="C1", label="warning")
  ax.set_xticks(at)
  ax.set_xticklabels(splits, rotation=30, ha="right", fontsize=7)
  ax.set_ylabel("anomalies")
  verdict = "valid" if not errors.sum() else "not valid"
  ax.set_title(f"anomalies per split: {verdict}")
  ax.legend(fontsize=7)


def render(stats: Mapping[str, Any], baseline: Optional[Mapping[str, Any]],
           splits: Sequence[str], found: Sequence[checks.Anomaly]) -> bytes:
  """The report of one validation (``baseline``: the last snapshot's statistics, or None)."""
  fig = Figure(figsize=(12, 4.5))
  FigureCanvasAgg(fig)
  _degrees(fig.add_subplot(1, 2, 1), stats, baseline)
  _anomalies(fig.add_subplot(1, 2, 2), splits, found)
  fig.tight_layout()
  buf = io.BytesIO()
  fig.savefig(buf, format="png", dpi=90)
  return buf.getvalue()


def write(path: str, *args) -> None:
  """Writes :func:`render`'s PNG to ``path`` (atomically)."""
  outputs.write_atomically(path, render(*args))
