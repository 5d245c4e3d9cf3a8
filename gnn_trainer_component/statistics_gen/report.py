"""``report.png``: one picture of a graph's statistics.

Left: each edge set's degree distribution, out-degrees of its sources and
in-degrees of its targets, on log-log axes (nodes per log2 degree bucket, at the
bucket's lowest degree; isolated nodes in the legend). Right: the label's
distribution in each split (no label: the seeds per split; no seeds: said so).
Matplotlib's object API on the Agg canvas, as GraphEvaluator's report.
"""

from __future__ import annotations

import io
from typing import Any, Mapping

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
import numpy as np

from gnn_trainer_component import outputs
from gnn_trainer_component.graph.statistics import bucket_low

REPORT_FILE = "report.png"


def _degrees(ax, stats: Mapping[str, Any]) -> None:
  for name, edge_set in sorted(stats["edge_sets"].items()):
    for direction, end in (("out_degree", "source"), ("in_degree", "target")):
      summary = edge_set[direction]
      points = [(bucket_low(b), n) for b, n in summary["histogram"].items()
                if bucket_low(b) > 0 and n]
      if not points:
        continue
      x, y = zip(*points, strict=True)
      ax.plot(x, y, "o-", ms=3, label=f"{name} {direction.split('_')[0]} ({edge_set[end]}); "
                                      f"isolated {summary['isolated']}")
  ax.set_xscale("log", base=2)
  ax.set_yscale("log")
  ax.set_xlabel("degree (log2 bucket's lowest)")
  ax.set_ylabel("nodes")
  ax.set_title("degrees per edge set")
  if ax.get_legend_handles_labels()[0]:
    ax.legend(fontsize=7)


def _labels(ax, stats: Mapping[str, Any]) -> None:
  splits = stats["splits"]
  if not splits:
    ax.text(0.5, 0.5, "no seeds given", ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    return
  names = sorted(splits)
  if "label" not in stats:
    ax.bar(names, [splits[s]["seeds"] for s in names])
    ax.set_ylabel("seeds")
    ax.set_title("seeds per split")
    return
  classes = list(stats["label"]["classes"])
  width = 0.8 / len(names)
  for i, split in enumerate(names):
    counts = np.array([splits[split]["labels"].get(c, 0) for c in classes], float)
    share = counts / max(counts.sum(), 1.0)
    ax.bar(np.arange(len(classes)) + i * width, share, width, label=split)
  ax.set_xticks(np.arange(len(classes)) + 0.4 - width / 2)
  ax.set_xticklabels(classes, rotation=90 if len(classes) > 12 else 0, fontsize=7)
  ax.set_ylabel("share of the split's seeds")
  ax.set_title(f"label {stats['label']['feature']!r} per split")
  ax.legend(fontsize=7)


def render(stats: Mapping[str, Any]) -> bytes:
  """The report of :func:`~gnn_trainer_component.graph.table_statistics.graph_statistics`."""
  fig = Figure(figsize=(12, 4.5))
  FigureCanvasAgg(fig)
  _degrees(fig.add_subplot(1, 2, 1), stats)
  _labels(fig.add_subplot(1, 2, 2), stats)
  fig.tight_layout()
  buf = io.BytesIO()
  fig.savefig(buf, format="png", dpi=90)
  return buf.getvalue()


def write(stats: Mapping[str, Any], path: str) -> None:
  """Writes :func:`render`'s PNG to ``path`` (atomically)."""
  outputs.write_atomically(path, render(stats))
