"""``report.png``: one picture of an index's release gate.

Left: recall@k against one query's p50 latency for each ``nprobe`` the gate tried (the
served one ringed), exact search's point beside them, the recall bound dashed. Right: the
churn against the last blessed index, a histogram of the sampled nodes' Jaccard
similarity of their two top-k neighbourhoods, the mean and the bound marked (a first
release: no histogram, said so). Matplotlib's object API on the Agg canvas, as
GraphEvaluator's report.
"""

from __future__ import annotations

import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
import numpy as np

from gnn_trainer_component import outputs
from gnn_trainer_component.index import config as config_lib
from gnn_trainer_component.index import gate

REPORT_FILE = "report.png"


def _curve(ax, done: gate.Release, cfg: config_lib.IndexConfig) -> None:
  points = [p for p in done.curve if p["nprobe"]]
  if points:
    ax.plot([p["p50_ms"] for p in points], [p["recall"] for p in points], "o-",
            label="inverted lists (nprobe)")
    for p in points:
      ax.annotate(str(p["nprobe"]), (p["p50_ms"], p["recall"]), fontsize=7,
                  textcoords="offset points", xytext=(3, -9))
  ax.plot([done.metrics["exact_p50_ms"]], [1.0], "s", label="exact search")
  ax.plot([done.metrics["p50_ms"]], [done.metrics[f"recall@{cfg.k}"]], "o", ms=12,
          mfc="none", mec="black", label=f"served ({done.metrics['kind']})")
  ax.axhline(cfg.min_recall, ls="--", c="gray", lw=1, label=f"bound {cfg.min_recall}")
  ax.set_xscale("log")
  ax.set_xlabel("one query's p50 latency (ms)")
  ax.set_ylabel(f"recall@{cfg.k} vs exact search")
  ax.legend(fontsize=7, loc="lower right")


def _churn(ax, done: gate.Release, cfg: config_lib.IndexConfig) -> None:
  if done.churn is None:
    ax.text(0.5, 0.5, "first release:\nno last blessed index to compare", ha="center",
            va="center", transform=ax.transAxes)
    ax.set_axis_off()
    return
  ax.hist(done.churn.jaccard, bins=np.linspace(0, 1, 11), color="tab:blue")
  ax.axvline(done.churn.mean_jaccard, c="black", lw=1.5,
             label=f"mean {done.churn.mean_jaccard:.3f}")
  ax.axvline(cfg.min_jaccard, c="gray", ls="--", lw=1, label=f"bound {cfg.min_jaccard}")
  ax.set_xlabel(f"Jaccard of top-{cfg.k} neighbours, this release vs last")
  ax.set_ylabel(f"nodes (of {len(done.churn.jaccard)})")
  ax.set_title(f"changed entirely: {done.churn.changed_share:.1%} "
               f"(bound {cfg.max_changed_share:.0%})", fontsize=9)
  ax.legend(fontsize=7)


def render(done: gate.Release, cfg: config_lib.IndexConfig, title: str) -> bytes:
  """The PNG of a :class:`gate.Release`."""
  fig = Figure(figsize=(10, 3.8), dpi=100, layout="constrained")
  FigureCanvasAgg(fig)
  left, right = fig.subplots(1, 2)
  _curve(left, done, cfg)
  _churn(right, done, cfg)
  for ax in (left, right):
    ax.tick_params(labelsize=8)
  verdict = "blessed" if done.verdict.blessed else "NOT blessed"
  fig.suptitle(f"{title}: {verdict}", fontsize=11)
  buf = io.BytesIO()
  fig.savefig(buf, format="png")
  return buf.getvalue()


def write(done: gate.Release, cfg: config_lib.IndexConfig, title: str, path: str) -> None:
  """Writes :func:`render` to ``path`` (local or a ``tf.io.gfile`` URI)."""
  outputs.write_atomically(path, render(done, cfg, title))
