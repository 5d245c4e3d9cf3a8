"""A graph's statistics against GraphValidator's bounds: the anomalies, each named and numbered.

Pure functions over GraphStatisticsGen's ``graph_statistics.json`` (this snapshot's and,
optionally, the last one's). Each :class:`Anomaly` belongs to a split of the
``ExampleAnomalies`` artifact: a table's (``nodes-<set>``, ``edges-<set>``, as in the
statistics) or :data:`SEEDS_SPLIT` (the seeds, their labels and their times), and its
message names the set, the table, the feature or split, and the number against its bound.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from gnn_trainer_component.graph import statistics
from gnn_trainer_component.graph.feature_statistics import split_name
from gnn_trainer_component.validator import config as config_lib

#: The anomalies split of the seeds, their labels and times.
SEEDS_SPLIT = "seeds"


@dataclasses.dataclass(frozen=True)
class Anomaly:
  """One anomaly.

  Attributes:
    split: The ExampleAnomalies split it is in.
    name: Its kind (a key of :data:`~gnn_trainer_component.validator.config.SEVERITIES`).
    key: What it is about within the split: a feature, or the anomaly with a qualifier.
    severity: ``"error"`` or ``"warning"``.
    description: The set, table, feature or split, and the number against its bound.
  """
  split: str
  name: str
  key: str
  severity: str
  description: str


class _Found:
  """Collects anomalies at their configured severity (``"off"``: dropped)."""

  def __init__(self, cfg: config_lib.ValidationConfig):
    self.cfg, self.anomalies = cfg, []

  def add(self, split: str, name: str, key: str, description: str) -> None:
    severity = self.cfg.severity[name]
    if severity != config_lib.OFF:
      self.anomalies.append(Anomaly(split, name, key, severity, description))


def _set(kind: str, name: str, stats: Mapping[str, Any]) -> str:
  return f"{kind} set {name!r} (table {stats['table']!r})"


def _tables(found: _Found, stats: Mapping[str, Any]) -> None:
  cfg = found.cfg
  touched = {e[end] for e in stats["edge_sets"].values() for end in ("source", "target")}
  for name, n in sorted(stats["node_sets"].items()):
    split = split_name("node", name)
    if n["duplicate_ids"] > cfg.max_duplicate_ids:
      found.add(split, "duplicate_ids", "duplicate_ids",
                f"{_set('node', name, n)}: {n['duplicate_ids']} row(s) repeat an earlier id "
                f"(max_duplicate_ids {cfg.max_duplicate_ids}).")
    share = n["isolated"] / n["nodes"] if n["nodes"] else 0.0
    if name in touched and share > cfg.max_isolated_share:
      found.add(split, "isolated_nodes", "isolated_nodes",
                f"{_set('node', name, n)}: {n['isolated']} of {n['nodes']} nodes "
                f"({share:.1%}) are at no end of any edge (max_isolated_share "
                f"{cfg.max_isolated_share}).")
  for name, e in sorted(stats["edge_sets"].items()):
    split = split_name("edge", name)
    dangling = e["dangling_sources"] + e["dangling_targets"]
    if dangling > cfg.max_dangling_edges:
      found.add(split, "dangling_edges", "dangling_edges",
                f"{_set('edge', name, e)}: {dangling} edge end(s) not in their node table "
                f"({e['dangling_sources']} source ids not in {e['source']!r}, "
                f"{e['dangling_targets']} target ids not in {e['target']!r}; "
                f"max_dangling_edges {cfg.max_dangling_edges}).")
    if e["edges"] < cfg.min_edges:
      found.add(split, "empty_edge_set", "edges",
                f"{_set('edge', name, e)}: {e['edges']} edges (min_edges {cfg.min_edges}).")


def _seeds(found: _Found, stats: Mapping[str, Any]) -> None:
  cfg = found.cfg
  for split, s in sorted(stats["splits"].items()):
    for name, value, bound in (("unknown_seeds", s["unknown_ids"], cfg.max_unknown_seeds),
                               ("duplicate_seeds", s["duplicate_ids"], cfg.max_duplicate_seeds)):
      if value > bound:
        what = "ids not in the seed node set" if name == "unknown_seeds" else "repeated ids"
        found.add(SEEDS_SPLIT, name, f"{split}/{name}",
                  f"split {split!r}: {value} seed(s) with {what} (max_{name} {bound}).")
    for edge_set, count in sorted(s.get("edges_at_or_after_seed_time", {}).items()):
      if count > cfg.max_future_edges:
        found.add(SEEDS_SPLIT, "future_edges", f"{split}/{edge_set}",
                  f"split {split!r}: {count} edge(s) of edge set {edge_set!r} touch a seed at "
                  f"or after the seed's time (max_future_edges {cfg.max_future_edges}).")
  for pair, count in sorted(stats["split_overlap"].items()):
    if count > cfg.max_split_overlap:
      a, b = pair.split("|")
      found.add(SEEDS_SPLIT, "split_overlap", pair,
                f"splits {a!r} and {b!r} share {count} seed(s) (max_split_overlap "
                f"{cfg.max_split_overlap}).")


def _labels(found: _Found, stats: Mapping[str, Any]) -> None:
  cfg, label = found.cfg, stats.get("label")
  if not label:
    return
  split = split_name("node", label["node_set"])
  for feature, purity in sorted(label["label_purity"].items()):
    if purity > cfg.max_label_purity:
      found.add(split, "label_leak", feature,
                f"node set {label['node_set']!r}: feature {feature!r} alone predicts the label "
                f"{label['feature']!r} for {purity:.1%} of labelled nodes (leave-one-out; "
                f"max_label_purity {cfg.max_label_purity}): the label leaks into it.")
  splits = stats["splits"]
  if "train" in splits:
    for name, s in sorted(splits.items()):
      skew = statistics.max_share_difference(s["labels"], splits["train"]["labels"])
      if name != "train" and skew > cfg.max_label_skew:
        found.add(SEEDS_SPLIT, "label_skew", f"{name}/labels",
                  f"split {name!r}: a label's share differs from the train split's by "
                  f"{skew:.3f} (max_label_skew {cfg.max_label_skew}).")


def _change(now: float, before: float) -> float:
  return abs(now - before) / before if before else float(now != before)


def _against(found: _Found, stats: Mapping[str, Any], base: Mapping[str, Any]) -> None:
  """The anomalies of this snapshot against the last one's statistics."""
  cfg = found.cfg
  for kind, key, count in (("node", "node_sets", "nodes"), ("edge", "edge_sets", "edges")):
    for name in sorted(set(stats[key]) & set(base[key])):
      now, before = stats[key][name][count], base[key][name][count]
      if _change(now, before) > cfg.max_count_change:
        found.add(split_name(kind, name), "count_change", count,
                  f"{_set(kind, name, stats[key][name])}: {now} {count}, {before} in the last "
                  f"snapshot ({(now - before) / max(before, 1):+.1%}; max_count_change "
                  f"{cfg.max_count_change}).")
  for name in sorted(set(stats["edge_sets"]) & set(base["edge_sets"])):
    for direction in ("out_degree", "in_degree"):
      now, before = stats["edge_sets"][name][direction], base["edge_sets"][name][direction]
      change = _change(now["mean"], before["mean"])
      distance = statistics.total_variation(now["histogram"], before["histogram"])
      if change > cfg.max_degree_change or distance > cfg.max_degree_distance:
        found.add(split_name("edge", name), "degree_shift", direction,
                  f"{_set('edge', name, stats['edge_sets'][name])}: {direction} mean "
                  f"{now['mean']:.3f} against {before['mean']:.3f} in the last snapshot "
                  f"(change {change:.1%}, max_degree_change {cfg.max_degree_change}); log2 "
                  f"histogram distance {distance:.3f} (max_degree_distance "
                  f"{cfg.max_degree_distance}).")
  for split in sorted(set(stats["splits"]) & set(base["splits"])):
    now, before = stats["splits"][split].get("labels"), base["splits"][split].get("labels")
    if now is not None and before is not None:
      shift = statistics.max_share_difference(now, before)
      if shift > cfg.max_label_shift:
        found.add(SEEDS_SPLIT, "label_shift", f"{split}/labels",
                  f"split {split!r}: a label's share moved by {shift:.3f} since the last "
                  f"snapshot (max_label_shift {cfg.max_label_shift}).")


def check(stats: Mapping[str, Any], cfg: config_lib.ValidationConfig,
          baseline: Optional[Mapping[str, Any]] = None) -> list[Anomaly]:
  """The anomalies of a graph's statistics (and against the last snapshot's, if given)."""
  found = _Found(cfg)
  _tables(found, stats)
  _seeds(found, stats)
  _labels(found, stats)
  if baseline is not None:
    _against(found, stats, baseline)
  return found.anomalies
