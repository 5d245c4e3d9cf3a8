"""A graph's statistics on Beam: the in-memory engine's numbers, for graphs that do not fit.

The tables are read with TF-GNN's Beam reader (``unigraph``: CSV and TFRecord). Every
count is a Beam aggregate keyed by node id: node ids counted (duplicates), edge ends
joined with their node set (dangling ends, degrees, the nodes of degree 0), known pairs
counted (self loops, multi-edges), labels joined to both ends (homophily) and to the seeds
(labels per split), seed times joined to the edges (edges at or after a seed's time), a
count per ``(feature value, label)`` voted per value (label purity). Only aggregates reach
the driver, which builds the dict of
:func:`~gnn_trainer_component.graph.table_statistics.graph_statistics` with the graph core's
functions (a degree summary from a count per degree, the vote, the shares). TFDV's Beam
``GenerateStatistics`` computes each table's feature statistics. The seed tables are read
on the driver.
"""

from __future__ import annotations

import collections
import itertools
import math
import os
import pickle
import tempfile
from typing import Any, Mapping, Optional

import apache_beam as beam
import numpy as np
import tensorflow as tf
import tensorflow_data_validation as tfdv
import tensorflow_gnn as tfgnn
from tensorflow_gnn.data import unigraph
from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx_bsl.coders import example_coder

from gnn_trainer_component.graph import feature_statistics
from gnn_trainer_component.graph import ids as graph_ids
from gnn_trainer_component.graph import statistics
from gnn_trainer_component.graph import table_formats
from gnn_trainer_component.graph import table_statistics
from gnn_trainer_component.graph import tables

#: Rows of one record batch TFDV reads.
BATCH = 1000


def _value(example: tf.train.Example, name: str) -> Any:
  """A scalar feature's one value (None if absent)."""
  feature = example.features.feature.get(name)
  if feature is None:
    return None
  kind = feature.WhichOneof("kind")
  values = getattr(feature, kind).value if kind else []
  return values[0] if len(values) else None


def _numpy(values: list, dtype: np.dtype) -> np.ndarray:
  return np.asarray(values, dtype=dtype)


class _Results:
  """Named aggregates of one pipeline: ``(name, value)`` PCollections, flattened at the end."""

  def __init__(self):
    self.parts = []

  def add(self, name: str, pcoll: beam.PCollection) -> None:
    self.parts.append(pcoll | f"Name/{name}" >> beam.Map(lambda v, n=name: (n, v)))

  def total(self, name: str, pcoll: beam.PCollection) -> None:
    self.add(name, pcoll | f"Sum/{name}" >> beam.CombineGlobally(sum))


def _join(named: Mapping[str, beam.PCollection], label: str) -> beam.PCollection:
  return named | f"Join/{label}" >> beam.CoGroupByKey()


def _degrees(results: _Results, label: str, ends: beam.PCollection,
             id_counts: beam.PCollection) -> beam.PCollection:
  """Each degree's nodes and the dangling ends; returns the known ends' ids, counted."""
  per_id = ends | f"PerId/{label}" >> beam.combiners.Count.PerElement()
  joined = _join({"nodes": id_counts, "ends": per_id}, label)

  def degrees(element):
    _, got = element
    copies, degree = sum(got["nodes"]), sum(got["ends"])
    if copies:  # the id's first row has the degree, its repeats none
      yield degree, 1
      if copies > 1:
        yield 0, copies - 1

  results.add(f"degrees/{label}", joined | f"Degrees/{label}" >> beam.FlatMap(degrees)
              | f"PerDegree/{label}" >> beam.CombinePerKey(sum)
              | f"List/{label}" >> beam.combiners.ToList())
  results.total(f"dangling/{label}", joined | f"Dangling/{label}" >> beam.Map(
      lambda e: 0 if sum(e[1]["nodes"]) else sum(e[1]["ends"])))
  return joined | f"Known/{label}" >> beam.FlatMap(
      lambda e: [e[0]] if sum(e[1]["nodes"]) else [])


def _known_pairs(edges: beam.PCollection, id_counts: Mapping[str, beam.PCollection], piece,
                 name: str) -> beam.PCollection:
  """``((source, target), edges)``: the edges both of whose ends are nodes, per pair."""
  by_source = edges | f"BySource/{name}" >> beam.Map(lambda e: (e[0], e[1]))
  known_source = _join({"nodes": id_counts[piece.source], "edge": by_source},
                       f"pairsource/{name}") | f"KnownSource/{name}" >> beam.FlatMap(
      lambda e: [(t, e[0]) for t in e[1]["edge"]] if sum(e[1]["nodes"]) else [])
  return (_join({"nodes": id_counts[piece.target], "edge": known_source}, f"pairtarget/{name}")
          | f"KnownTarget/{name}" >> beam.FlatMap(
              lambda e: [(s, e[0]) for s in e[1]["edge"]] if sum(e[1]["nodes"]) else [])
          | f"PerPair/{name}" >> beam.combiners.Count.PerElement())


def _homophily(results: _Results, pairs: beam.PCollection, labels: beam.PCollection,
               name: str) -> None:
  """``(same, labelled)`` over the known edges whose two ends are labelled."""
  with_source = _join({"label": labels, "pair": pairs | f"HBySource/{name}" >> beam.Map(
      lambda p: (p[0][0], (p[0][1], p[1])))}, f"hsource/{name}") | f"HSource/{name}" >> (
          beam.FlatMap(lambda e: [(t, (e[1]["label"][0], n)) for t, n in e[1]["pair"]]
                       if e[1]["label"] else []))
  both = _join({"label": labels, "pair": with_source}, f"htarget/{name}") | (
      f"HTarget/{name}" >> beam.FlatMap(
          lambda e: [(int(a == e[1]["label"][0]) * n, n) for a, n in e[1]["pair"]]
          if e[1]["label"] else []))
  results.add(f"homophily/{name}", both | f"HSum/{name}" >> beam.CombineGlobally(
      lambda pairs_: tuple(map(sum, zip(*pairs_, strict=True))) if pairs_ else (0, 0)))


def _edge_set(results: _Results, name: str, piece, edges: beam.PCollection,
              id_counts: Mapping[str, beam.PCollection], spec, labels) -> dict:
  """The aggregates of one edge set; returns its known ends per node set."""
  results.add(f"edges/{name}", edges | f"Count/{name}" >> beam.combiners.Count.Globally())
  known = {}
  for end, set_name, index in (("source", piece.source, 0), ("target", piece.target, 1)):
    ids = edges | f"Ends/{end}/{name}" >> beam.Map(lambda e, i=index: e[i])
    known.setdefault(set_name, []).append(
        _degrees(results, f"{end}/{name}", ids, id_counts[set_name]))
  pairs = _known_pairs(edges, id_counts, piece, name)
  results.total(f"multi/{name}", pairs | f"Multi/{name}" >> beam.Map(lambda p: p[1] - 1))
  same = piece.source == piece.target
  results.total(f"loops/{name}", pairs | f"Loops/{name}" >> beam.Map(
      lambda p: p[1] if same and p[0][0] == p[0][1] else 0))
  if labels is not None and piece.source == piece.target == spec.seed_node_set:
    _homophily(results, pairs, labels, name)
  if name in spec.times:
    times = edges | f"Times/{name}" >> beam.Map(
        lambda e, f=spec.times[name]: _value(e[2], f))
    for end, pick in (("min", min), ("max", max)):  # associative: None is no value
      results.add(f"time/{end}/{name}", times | f"Time{end}/{name}" >> beam.CombineGlobally(
          lambda ts, f=pick: f((t for t in ts if t is not None), default=None)))
  return known


def _future_edges(results: _Results, schema, edges, bounds, spec) -> None:
  """Per split and edge set with a time: the edges touching a seed at or after its time."""
  for name, feature in sorted(spec.times.items()):
    piece = schema.edge_sets[name]
    sides = [i for i, s in enumerate((piece.source, piece.target)) if s == spec.seed_node_set]
    timed = edges[name] | f"Timed/{name}" >> beam.Map(
        lambda e, f=feature: ((e[0], e[1]), _value(e[2], f), [{}, {}]))
    for side in sides:
      keyed = timed | f"TimedBy{side}/{name}" >> beam.Map(lambda e, i=side: (e[0][i], e))
      timed = _join({"bound": bounds, "edge": keyed}, f"bound{side}/{name}") | (
          f"Bounded{side}/{name}" >> beam.FlatMap(
              lambda g, i=side: [(e[0], e[1], [b if k != i else (g[1]["bound"] or [{}])[0]
                                              for k, b in enumerate(e[2])])
                                 for e in g[1]["edge"]]))
    hits = timed | f"Hits/{name}" >> beam.FlatMap(
        lambda e: {split for b in e[2] for split, t in b.items() if e[1] >= t})
    results.add(f"future/{name}", hits | f"HitCount/{name}" >> beam.combiners.Count.PerElement()
                | f"HitList/{name}" >> beam.combiners.ToList())


def _seeds(results: _Results, root, seeds: Mapping[str, table_statistics.Seeds], ids, spec,
           id_counts, labels) -> Optional[beam.PCollection]:
  """Per split: unknown seeds, labels, overlap; returns seed id -> {split: earliest time}."""
  rows = [(seed_id, (split, None if s.times is None else float(s.times[i])))
          for split, s in sorted(seeds.items()) for i, seed_id in enumerate(ids[split])]
  seed_rows = root | "Seeds" >> beam.Create(rows)
  joined = _join({"nodes": id_counts[spec.seed_node_set], "seed": seed_rows,
                  **({"label": labels} if labels is not None else {})}, "seeds")
  results.add("unknown_seeds", joined | "Unknown" >> beam.FlatMap(
      lambda e: [] if sum(e[1]["nodes"]) else [split for split, _ in e[1]["seed"]])
              | "UnknownCount" >> beam.combiners.Count.PerElement()
              | "UnknownList" >> beam.combiners.ToList())
  known = joined | "KnownSeeds" >> beam.Filter(lambda e: sum(e[1]["nodes"]) > 0)
  if labels is not None:
    results.add("seed_labels", known | "SeedLabels" >> beam.FlatMap(
        lambda e: [(split, e[1]["label"][0]) for split, _ in e[1]["seed"]
                   if e[1]["label"]]) | "SeedLabelCount" >> beam.combiners.Count.PerElement()
                | "SeedLabelList" >> beam.combiners.ToList())
  results.add("overlap", known | "Overlap" >> beam.FlatMap(
      lambda e: [f"{a}|{b}" for a, b in itertools.combinations(
          sorted({split for split, _ in e[1]["seed"]}), 2)])
              | "OverlapCount" >> beam.combiners.Count.PerElement()
              | "OverlapList" >> beam.combiners.ToList())
  if not spec.times:
    return None

  def earliest(e):
    bound = {}
    for split, t in e[1]["seed"]:
      bound[split] = min(bound.get(split, math.inf), t)
    return e[0], bound

  return known | "Bounds" >> beam.Map(earliest)


def _labelled(value: Any) -> bool:
  """One label value is a label (as :func:`table_statistics.is_labelled` says of many)."""
  if isinstance(value, bytes):
    return value != b""
  if isinstance(value, float):
    return not math.isnan(value)
  return value is not None and value >= 0


def _vote(group) -> int:
  """One feature value's ``(label, nodes)`` cells: the nodes its leave-one-out vote gets right."""
  sizes = [n for _, n in group[1]]
  return statistics.loo_correct(np.zeros(len(sizes), np.int64), np.asarray(sizes))


def _label(results: _Results, nodes: beam.PCollection, spec, purity_features) -> beam.PCollection:
  """The label's aggregates; returns ``(id, label value)`` of the labelled nodes."""
  labelled = (nodes | "LabelValues" >> beam.Map(lambda n: (n[0], _value(n[1], spec.label), n[1]))
              | "Labelled" >> beam.Filter(lambda v: _labelled(v[1])))
  results.add("classes", labelled | "Classes" >> beam.Map(lambda v: v[1])
              | "ClassCount" >> beam.combiners.Count.PerElement()
              | "ClassList" >> beam.combiners.ToList())
  for feature in purity_features:
    results.total(f"purity/{feature}", labelled
                  | f"Cells/{feature}" >> beam.Map(lambda v, f=feature: (
                      (_value(v[2], f), v[1]), 1))
                  | f"CellCount/{feature}" >> beam.CombinePerKey(sum)
                  | f"ByValue/{feature}" >> beam.Map(lambda c: (c[0][0], (c[0][1], c[1])))
                  | f"Groups/{feature}" >> beam.GroupByKey()
                  | f"Vote/{feature}" >> beam.Map(_vote))
  return labelled | "Labels" >> beam.Map(lambda v: (v[0], v[1]))


def _feature_statistics(results: _Results, name: str, examples: beam.PCollection) -> None:
  """TFDV's statistics of a table's features (``#id``, ``#source`` and ``#target`` left out)."""
  def serialized(example):
    copy = tf.train.Example()
    copy.CopyFrom(example)
    for key in (tables.NODE_ID_FEATURE, tfgnn.SOURCE_NAME, tfgnn.TARGET_NAME):
      copy.features.feature.pop(key, None)
    return copy.SerializeToString()

  decoder = example_coder.ExamplesToRecordBatchDecoder()
  results.add(f"tfdv/{name}", examples
              | f"Serialize/{name}" >> beam.Map(serialized)
              | f"Batch/{name}" >> beam.BatchElements(min_batch_size=BATCH,
                                                      max_batch_size=BATCH)
              | f"Decode/{name}" >> beam.Map(decoder.DecodeBatch)
              | f"TFDV/{name}" >> tfdv.GenerateStatistics(tfdv.StatsOptions())
              | f"TFDVBytes/{name}" >> beam.Map(lambda s: s.SerializeToString()))


def _pipeline(root, schema: tfgnn.GraphSchema, data_dir: str,
              spec: table_statistics.StatisticsSpec, seeds, seed_ids) -> beam.PCollection:
  """Every aggregate of the graph as ``(name, value)``, in one list."""
  results = _Results()
  graph = unigraph.read_graph(schema, data_dir, root)
  id_counts, labels = {}, None
  for name, nodes in sorted(graph["nodes"].items()):
    ids = nodes | f"Ids/{name}" >> beam.Keys()
    id_counts[name] = (ids | f"IdCount/{name}" >> beam.combiners.Count.PerElement())
    results.add(f"nodes/{name}", ids | f"Nodes/{name}" >> beam.combiners.Count.Globally())
    results.total(f"duplicates/{name}", id_counts[name] | f"Repeats/{name}" >> beam.Map(
        lambda c: c[1] - 1))
    _feature_statistics(results, feature_statistics.split_name("node", name),
                        nodes | f"Examples/{name}" >> beam.Values())
  if spec.label:
    features = schema.node_sets[spec.seed_node_set].features
    purity = sorted(f for f, piece in features.items() if not piece.shape.dim
                    and f not in (spec.label, tables.NODE_ID_FEATURE))
    labels = _label(results, graph["nodes"][spec.seed_node_set], spec, purity)
  touched = collections.defaultdict(list)
  for name, edges in sorted(graph["edges"].items()):
    known = _edge_set(results, name, schema.edge_sets[name], edges, id_counts, spec, labels)
    for set_name, ends in known.items():
      touched[set_name] += ends
    _feature_statistics(results, feature_statistics.split_name("edge", name),
                        edges | f"EdgeExamples/{name}" >> beam.Map(lambda e: e[2]))
  for set_name, ends in sorted(touched.items()):
    results.add(f"touched/{set_name}", ends | f"Touched/{set_name}" >> beam.Flatten()
                | f"Distinct/{set_name}" >> beam.Distinct()
                | f"TouchedCount/{set_name}" >> beam.combiners.Count.Globally())
  if seeds:
    bounds = _seeds(results, root, seeds, seed_ids, spec, id_counts, labels)
    if bounds is not None:
      _future_edges(results, schema, graph["edges"], bounds, spec)
  return results.parts | "All" >> beam.Flatten() | "One" >> beam.combiners.ToList()


def _read_seeds(data_dir: str, spec: table_statistics.StatisticsSpec, who: str):
  """Each split's seeds (rows unknown until Beam joins them) and ids, read on the driver."""
  seeds, ids = {}, {}
  for split, filename in sorted(spec.seeds.items()):
    read, times = table_statistics.read_seed_table(data_dir, filename, split, who,
                                                   with_times=bool(spec.times))
    ids[split] = graph_ids.id_bytes(read).tolist()  # as TF-GNN's Beam reader keys nodes
    seeds[split] = table_statistics.Seeds(np.zeros(len(read), np.int64),
                                          statistics.duplicate_ids(read), times)
  return seeds, ids


def run(schema: tfgnn.GraphSchema, data_dir: str, spec: table_statistics.StatisticsSpec,
        who: str, make_pipeline) -> tuple[dict[str, Any], dict[str, Any]]:
  """``(graph statistics, split -> TFDV statistics)``: what the in-memory engine gives.

  Args:
    schema: The graph schema (CSV or TFRecord tables).
    data_dir: The folder of its tables.
    spec: The seeds, their node set, the label and the time features.
    who: The component named in errors.
    make_pipeline: Returns a ``beam.Pipeline`` (the executor's, with its Beam options).
  """
  tables.refuse_parquet_on_beam(schema, spec.seeds, who)
  seeds, seed_ids = _read_seeds(data_dir, spec, who)
  with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "aggregates")
    with make_pipeline() as root:
      _ = (_pipeline(root, schema, data_dir, spec, seeds, seed_ids)
           | "Pickle" >> beam.Map(lambda items: pickle.dumps(items))
           | "Write" >> beam.io.WriteToText(out, shard_name_template="",
                                            coder=beam.coders.BytesCoder()))
    with open(out, "rb") as f:
      got = dict(pickle.loads(f.read().rstrip(b"\n")))
  return _assemble(schema, spec, seeds, got), _tfdv(schema, got)


def _degree_summary(got: Mapping[str, Any], label: str) -> dict[str, Any]:
  counts = got.get(f"degrees/{label}", [])
  values = np.asarray([v for v, _ in counts], np.int64)
  nodes = np.asarray([n for _, n in counts], np.int64)
  return table_statistics.summary_json(statistics.summary_of_counts(values, nodes))


def _range(pair) -> dict[str, Optional[float]]:
  values = [v for v in (pair or []) if v is not None]
  return table_statistics.value_range(np.asarray(values, np.float64))


def _assemble_edge_set(name: str, piece, spec, got) -> dict[str, Any]:
  dangling = {end: got.get(f"dangling/{end}/{name}", 0) for end in ("source", "target")}
  out = {"source": piece.source, "target": piece.target, "table": piece.metadata.filename,
         "edges": got[f"edges/{name}"], "self_loops": got.get(f"loops/{name}", 0),
         "multi_edges": got.get(f"multi/{name}", 0),
         "dangling_sources": dangling["source"], "dangling_targets": dangling["target"],
         "out_degree": _degree_summary(got, f"source/{name}"),
         "in_degree": _degree_summary(got, f"target/{name}")}
  if f"homophily/{name}" in got:
    same, count = got[f"homophily/{name}"]
    out["homophily"] = {"share": statistics.share(same, count), "edges": count}
  if name in spec.times:
    out["time"] = {"feature": spec.times[name],
                   **_range([got.get(f"time/min/{name}"), got.get(f"time/max/{name}")])}
  return out


def _label_names(schema, spec, got) -> dict[Any, str]:
  """Label value -> its name, in the in-memory engine's order (sorted values)."""
  dtype = table_formats.features_spec(schema.node_sets[spec.seed_node_set])[spec.label][1]
  values = [v for v, _ in got.get("classes", [])]
  _, names = table_statistics.label_codes(_numpy(values, dtype))
  return dict(zip(sorted(values), names, strict=True))


def _assemble(schema, spec, seeds, got) -> dict[str, Any]:
  """The aggregates as :func:`table_statistics.graph_statistics`'s dict."""
  out = {"node_sets": {name: {
      "nodes": got[f"nodes/{name}"], "table": piece.metadata.filename,
      "duplicate_ids": got.get(f"duplicates/{name}", 0),
      "isolated": got[f"nodes/{name}"] - got.get(f"touched/{name}", 0)}
                       for name, piece in sorted(schema.node_sets.items())},
         "edge_sets": {name: _assemble_edge_set(name, piece, spec, got)
                       for name, piece in sorted(schema.edge_sets.items())}}
  names = _label_names(schema, spec, got) if spec.label else {}
  unknown = dict(got.get("unknown_seeds", []))
  seed_labels = collections.Counter(dict(got.get("seed_labels", [])))
  splits = {}
  for split, s in sorted(seeds.items()):
    entry = {"seeds": len(s.rows), "duplicate_ids": s.duplicate_ids,
             "unknown_ids": unknown.get(split, 0)}
    if spec.label:
      entry["labels"] = {names[v]: seed_labels[(split, v)] for v in sorted(names)}
    if s.times is not None:
      entry["time"] = table_statistics.value_range(s.times)
      entry["edges_at_or_after_seed_time"] = {
          name: dict(got.get(f"future/{name}", [])).get(split, 0)
          for name in sorted(spec.times)}
    splits[split] = entry
  out["splits"] = splits
  overlap = dict(got.get("overlap", []))
  out["split_overlap"] = {f"{a}|{b}": overlap.get(f"{a}|{b}", 0)
                          for a, b in itertools.combinations(sorted(seeds), 2)}
  if spec.label:
    classes = dict(got.get("classes", []))
    labelled = sum(classes.values())
    out["label"] = {
        "node_set": spec.seed_node_set, "feature": spec.label, "labelled": labelled,
        "classes": {names[v]: classes[v] for v in sorted(names)},
        "label_purity": {k.split("/", 1)[1]: statistics.share(v, labelled)
                         for k, v in sorted(got.items()) if k.startswith("purity/")}}
  return out


def _tfdv(schema, got) -> dict[str, statistics_pb2.DatasetFeatureStatisticsList]:
  """Each table's TFDV statistics, named as the in-memory engine names them."""
  out = {}
  for kind, group in (("node", schema.node_sets), ("edge", schema.edge_sets)):
    for name in sorted(group):
      split = feature_statistics.split_name(kind, name)
      stats = statistics_pb2.DatasetFeatureStatisticsList.FromString(got[f"tfdv/{split}"])
      if not stats.datasets:
        stats.datasets.add()
      stats.datasets[0].name = split
      stats.datasets[0].num_examples = got[f"{kind}s/{name}"]
      out[split] = stats
  return out
