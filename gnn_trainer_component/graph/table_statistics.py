"""A graph's statistics from its tables, in memory: what GraphStatisticsGen writes as JSON.

The tables are read with their faults counted, not refused
(:func:`~gnn_trainer_component.graph.tables.read_graph_tables`'s ``lenient``): a
duplicate node id, an edge end not in its node table (dangling), a seed id that
repeats or is not a node. :func:`graph_statistics` then gives one JSON-ready dict
(:mod:`~gnn_trainer_component.graph.statistics` computes each number):

* ``node_sets``: per node set, its nodes, duplicate ids and isolated nodes (no
  edge of any edge set, at either end);
* ``edge_sets``: per edge set, its ends' node sets, the :class:`EdgeCounts`,
  the out-degrees of its sources and in-degrees of its targets
  (:class:`DegreeSummary`), label homophily where both ends are the label's
  node set, and for a time feature its range;
* ``splits``: per split, its seeds, the ids that repeat or are not nodes, the
  label's distribution among them, their times' range, and per edge set with a
  time the edges touching a seed at or after the seed's time;
* ``split_overlap``: ``"a|b"`` -> seeds in both splits;
* ``label``: its node set and feature, the nodes labelled, the distribution of
  labels, and per other scalar feature of the node set how well it predicts
  the label (``label_purity``: :func:`label_purity`, leave-one-out).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

import numpy as np
import pandas as pd
import tensorflow_gnn as tfgnn

from gnn_trainer_component.graph import statistics
from gnn_trainer_component.graph import tables

@dataclasses.dataclass(frozen=True)
class StatisticsSpec:
  """What the statistics read beyond the node and edge tables.

  Attributes:
    seeds: Split -> its seed table (a node table of ``seed_node_set``; a
      ``time`` column is read where ``times`` names edge sets).
    seed_node_set: The node set of the seeds and of ``label``.
    label: A scalar feature of ``seed_node_set``: the label (an integer below 0,
      a NaN or an empty string: unlabelled).
    times: Edge set -> its time feature (a scalar number).
  """
  seeds: Mapping[str, str] = dataclasses.field(default_factory=dict)
  seed_node_set: Optional[str] = None
  label: Optional[str] = None
  times: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Seeds:
  """A split's seed table read with its faults counted.

  Attributes:
    rows: The seeds' rows in their node table, in table order (-1: not a node).
    duplicate_ids: Rows that repeat an earlier row's id.
    times: The ``time`` column (float64), or None.
  """
  rows: np.ndarray
  duplicate_ids: int
  times: Optional[np.ndarray] = None

  @property
  def unknown_ids(self) -> int:
    return int(np.sum(self.rows < 0))


def read_seed_table(data_dir: str, filename: str, split: str, who: str, *,
                    with_times: bool = False) -> tuple[np.ndarray, Optional[np.ndarray]]:
  """A split's seed ids in table order, and (``with_times``) their float64 times."""
  ids = tables.read_ids(data_dir, filename, who)
  times = (tables.read_seed_times(data_dir, filename, split, np.dtype(np.float64), who)
           if with_times else None)
  return ids, times


def read_seeds(data_dir: str, filename: str, nodes: tables.NodeTable, split: str, who: str,
               *, with_times: bool = False) -> Seeds:
  """A split's :class:`Seeds` (``with_times``: its ``time`` column too)."""
  ids, times = read_seed_table(data_dir, filename, split, who, with_times=with_times)
  return Seeds(nodes.finder(ids), statistics.duplicate_ids(ids), times)


def is_labelled(values: np.ndarray) -> np.ndarray:
  """Which label values are labels: not a negative int, a NaN or an empty string."""
  values = np.asarray(values)
  if values.dtype.kind in "iu":
    return values >= 0
  if values.dtype.kind == "f":
    return ~np.isnan(values)
  return np.asarray([v not in (b"", None) for v in values.tolist()], bool)


def label_codes(values: np.ndarray) -> tuple[np.ndarray, list[str]]:
  """A label feature as codes (-1: unlabelled) and each code's label as text."""
  values = np.asarray(values)
  if values.ndim != 1:
    raise ValueError(f"a label is a scalar feature, not of shape {list(values.shape[1:])}")
  labelled = is_labelled(values)
  codes = np.full(len(values), -1, np.int64)
  found, uniques = pd.factorize(values[labelled], sort=True)
  codes[labelled] = found
  return codes, [label_text(u) for u in uniques]


def label_text(value: Any) -> str:
  """A label value as the JSON names it (bytes decoded, a whole float as an int)."""
  if isinstance(value, bytes):
    return value.decode("utf-8", "backslashreplace")
  if isinstance(value, (float, np.floating)) and float(value).is_integer():
    return str(int(value))
  return str(value)


def _distribution(codes: np.ndarray, names: list[str]) -> dict[str, int]:
  counts = np.bincount(codes[codes >= 0], minlength=len(names))
  return {name: int(c) for name, c in zip(names, counts, strict=True)}


def label_purity(feature: np.ndarray, codes: np.ndarray) -> float:
  """How well a scalar feature's value alone predicts the label: leave-one-out accuracy.

  Each labelled node's label is predicted as the most common label among the other
  labelled nodes of its feature value (none, or a tie: wrong;
  :func:`~gnn_trainer_component.graph.statistics.loo_correct`). A copy of the label scores
  1 (less the values held by one node); an id-like feature, every value on one node,
  scores 0, as does an unrelated feature of few values up to its majority class's share.
  """
  labelled = codes >= 0
  count = int(labelled.sum())
  if not count:
    return 0.0
  groups, _ = pd.factorize(np.asarray(feature)[labelled], use_na_sentinel=False)
  width = int(codes.max()) + 1
  cells, sizes = np.unique(groups.astype(np.int64) * width + codes[labelled],
                           return_counts=True)
  return statistics.share(statistics.loo_correct(cells // width, sizes), count)


def summary_json(s: statistics.DegreeSummary) -> dict[str, Any]:
  """A degree summary as the JSON holds it."""
  return {**dataclasses.asdict(s), "isolated_share": s.isolated_share}


def value_range(values: np.ndarray) -> dict[str, Optional[float]]:
  """``{"min", "max"}`` of numbers, NaN left out (None: no number)."""
  values = np.asarray(values, np.float64)
  values = values[~np.isnan(values)]
  return ({"min": float(values.min()), "max": float(values.max())} if len(values)
          else {"min": None, "max": None})


def _edge_set(name: str, piece, table: tables.EdgeTable, nodes: Mapping[str, tables.NodeTable],
              spec: StatisticsSpec, codes: Optional[np.ndarray]) -> dict[str, Any]:
  """The statistics of one edge set."""
  source, target = piece.source, piece.target
  out = {"source": source, "target": target, "table": table.filename,
         **dataclasses.asdict(statistics.edge_counts(
             table.source, table.target, same_node_set=source == target)),
         "out_degree": summary_json(statistics.degree_summary(
             statistics.degrees(table.source, len(nodes[source].ids)))),
         "in_degree": summary_json(statistics.degree_summary(
             statistics.degrees(table.target, len(nodes[target].ids))))}
  if codes is not None and source == target == spec.seed_node_set:
    share, edges = statistics.homophily(table.source, table.target, codes, codes)
    out["homophily"] = {"share": share, "edges": edges}
  if name in spec.times:
    out["time"] = {"feature": spec.times[name], **value_range(table.features[spec.times[name]])}
  return out


def at_or_after_seed_time(seeds: Seeds, num_nodes: int, ends: list[np.ndarray],
                          time: np.ndarray) -> int:
  """Edges with an end among ``seeds`` whose ``time`` is at or after that seed's time.

  ``ends``: the edge set's ends that are rows of the seeds' node set (one or both).
  A seed listed twice counts with its earliest time.
  """
  bound = np.full(num_nodes + 1, np.inf)  # the last slot: not a seed (row -1)
  known = seeds.rows >= 0
  np.minimum.at(bound, seeds.rows[known], seeds.times[known])
  time = np.asarray(time, np.float64)
  hit = np.zeros(len(time), bool)
  for end in ends:
    hit |= time >= bound[np.where(end >= 0, end, num_nodes)]
  return int(hit.sum())


def _split(seeds: Seeds, schema: tfgnn.GraphSchema, edges: Mapping[str, tables.EdgeTable],
           spec: StatisticsSpec, num_nodes: int, codes: Optional[np.ndarray],
           names: list[str]) -> dict[str, Any]:
  """The statistics of one split's seeds."""
  out = {"seeds": len(seeds.rows), "duplicate_ids": seeds.duplicate_ids,
         "unknown_ids": seeds.unknown_ids}
  if codes is not None:
    out["labels"] = _distribution(codes[seeds.rows[seeds.rows >= 0]], names)
  if seeds.times is not None:
    out["time"] = value_range(seeds.times)
    out["edges_at_or_after_seed_time"] = {
        name: at_or_after_seed_time(
            seeds, num_nodes,
            [e for e, s in ((edges[name].source, schema.edge_sets[name].source),
                            (edges[name].target, schema.edge_sets[name].target))
             if s == spec.seed_node_set],
            edges[name].features[feature])
        for name, feature in sorted(spec.times.items())}
  return out


def _label(nodes: tables.NodeTable, spec: StatisticsSpec, codes: np.ndarray,
           names: list[str]) -> dict[str, Any]:
  purity = {name: label_purity(value, codes)
            for name, value in sorted(nodes.features.items())
            if name not in (spec.label, tables.NODE_ID_FEATURE) and np.ndim(value) == 1}
  return {"node_set": spec.seed_node_set, "feature": spec.label,
          "labelled": int(np.sum(codes >= 0)), "classes": _distribution(codes, names),
          "label_purity": purity}


def _isolated(node_set: str, num_nodes: int, schema: tfgnn.GraphSchema,
              edges: Mapping[str, tables.EdgeTable]) -> int:
  """Nodes of ``node_set`` at no end of any edge."""
  touched = np.zeros(num_nodes, bool)
  for name, table in edges.items():
    for end, set_name in ((table.source, schema.edge_sets[name].source),
                          (table.target, schema.edge_sets[name].target)):
      if set_name == node_set:
        touched[end[end != statistics.DANGLING]] = True
  return int(num_nodes - touched.sum())


def graph_statistics(schema: tfgnn.GraphSchema, nodes: Mapping[str, tables.NodeTable],
                     edges: Mapping[str, tables.EdgeTable], seeds: Mapping[str, Seeds],
                     spec: StatisticsSpec) -> dict[str, Any]:
  """The statistics of a graph's tables (read ``lenient``) and its splits' seeds.

  Args:
    schema: The graph schema.
    nodes: Node set -> its table (every feature ``spec`` names kept).
    edges: Edge set -> its table (the time features of ``spec`` kept).
    seeds: Split -> its :class:`Seeds` (rows of ``spec.seed_node_set``).
    spec: The seeds' node set, the label and the time features.

  Returns:
    The JSON-ready dict the module docstring describes.
  """
  codes, names = None, []
  if spec.label:
    codes, names = label_codes(nodes[spec.seed_node_set].features[spec.label])
  out = {
      "node_sets": {name: {"nodes": len(table.ids), "table": table.filename,
                           "duplicate_ids": statistics.duplicate_ids(table.ids),
                           "isolated": _isolated(name, len(table.ids), schema, edges)}
                    for name, table in sorted(nodes.items())},
      "edge_sets": {name: _edge_set(name, schema.edge_sets[name], table, nodes, spec, codes)
                    for name, table in sorted(edges.items())},
      "splits": {split: _split(s, schema, edges, spec, len(nodes[spec.seed_node_set].ids),
                               codes, names)
                 for split, s in sorted(seeds.items())},
      "split_overlap": {f"{a}|{b}": n for (a, b), n in statistics.split_overlap(
          {split: s.rows[s.rows >= 0] for split, s in seeds.items()}).items()},
  }
  if codes is not None:
    out["label"] = _label(nodes[spec.seed_node_set], spec, codes, names)
  return out

