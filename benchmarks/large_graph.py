"""W2's data: a generated large graph, sampled into GraphSampler-format subgraphs.

The graph (a stochastic block model) is generated with numpy, and the 2-hop
subgraphs are sampled with numpy here rather than by GraphSampler, whose
scale-out is issue 14's benchmark: W2 measures the trainer. The output is
exactly what GraphSampler writes for the Planetoid tables (node set ``paper``
with ``feat`` and ``label``, edge set ``cites`` with self loops and a GCN
``weight``, edges pointing away from the root, root = node 0, one GZIP
TFRecord folder per split, ``graph_schema.pbtxt``), so
``module_files/planetoid_gcn.py`` trains on it unchanged.

:func:`write_tables` writes the same graph as GraphSampler's input tables
(what GnnTrainer loads to sample in memory, ``gnn_trainer_component.in_memory``):
a TFRecord node table (``#id``, the 128-dim ``feat``, ``label``), a CSV edge
table (``source``, ``target``, ``weight``) holding every node's out-edges plus
a self loop, one CSV seed table per split (the same roots as the examples), and
a ``graph_schema.pbtxt`` naming them. Sampled in memory with fan-outs 10,5 they
give subgraphs of the examples' spec, with GraphSampler's semantics: each hop
draws from a node's 11 out-edges (its self loop among them), and the last
hop's nodes get no self loop, where :func:`sample_subgraph` takes the fan-out
from the 10 neighbours and adds a self loop to every node.

Graph: ``num_nodes`` nodes in ``num_classes`` classes; every node has
``out_degree`` out-edges, each to a node of its own class with probability
``homophily``, else to any node. Features: a class centroid scaled by
``signal`` plus unit Gaussian noise, so a node's own features predict its
class poorly and its neighbourhood's mean predicts it well (measured by
:func:`feature_only_accuracy` / :func:`neighbourhood_accuracy`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from typing import Mapping, Optional, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class GraphConfig:
  """The generated graph and its sampling."""
  num_nodes: int = 200_000
  out_degree: int = 10               # edges = num_nodes * out_degree
  feature_dim: int = 128
  num_classes: int = 8
  homophily: float = 0.7
  signal: float = 0.1
  fan_outs: tuple[int, ...] = (10, 5)
  #: Split name -> number of roots (disjoint random nodes).
  splits: Mapping[str, int] = dataclasses.field(default_factory=lambda: {
      "train": 50_000, "eval": 5_000, "test": 5_000})
  examples_per_file: int = 5_000
  seed: int = 0

  @property
  def num_edges(self) -> int:
    return self.num_nodes * self.out_degree


SCHEMA_PBTXT = """\
node_sets {{
  key: "paper"
  value {{
    features {{ key: "feat" value {{ dtype: DT_FLOAT shape {{ dim {{ size: {dim} }} }} }} }}
    features {{ key: "label" value {{ dtype: DT_INT64 }} }}
  }}
}}
edge_sets {{
  key: "cites"
  value {{
    features {{ key: "weight" value {{ dtype: DT_FLOAT }} }}
    source: "paper"
    target: "paper"
  }}
}}
"""


@dataclasses.dataclass(frozen=True)
class Graph:
  labels: np.ndarray      # [num_nodes] int64
  features: np.ndarray    # [num_nodes, feature_dim] float32
  neighbours: np.ndarray  # [num_nodes, out_degree] int64 (out-edges)


def generate_graph(config: GraphConfig) -> Graph:
  """The stochastic block model graph (deterministic in ``config.seed``)."""
  rng = np.random.default_rng(config.seed)
  n, k = config.num_nodes, config.num_classes
  labels = rng.integers(0, k, size=n)
  centroids = rng.standard_normal((k, config.feature_dim)).astype(np.float32)
  features = (config.signal * centroids[labels]
              + rng.standard_normal((n, config.feature_dim)).astype(np.float32))
  by_class = [np.flatnonzero(labels == c) for c in range(k)]
  same = rng.random((n, config.out_degree)) < config.homophily
  any_node = rng.integers(0, n, size=(n, config.out_degree))
  same_class = np.empty_like(any_node)
  for c in range(k):
    rows = labels == c
    same_class[rows] = by_class[c][rng.integers(0, len(by_class[c]),
                                                size=(int(rows.sum()), config.out_degree))]
  neighbours = np.where(same, same_class, any_node)
  return Graph(labels=labels.astype(np.int64), features=features, neighbours=neighbours)


def _nearest_centroid_accuracy(x: np.ndarray, labels: np.ndarray, num_classes: int) -> float:
  centroids = np.stack([x[labels == c].mean(axis=0) for c in range(num_classes)])
  d = ((x[:, None, :] - centroids[None]) ** 2).sum(-1)
  return float((d.argmin(axis=1) == labels).mean())


def feature_only_accuracy(graph: Graph, num_classes: int, n: int = 20_000) -> float:
  """Nearest-class-mean accuracy from a node's own features (first ``n`` nodes)."""
  return _nearest_centroid_accuracy(graph.features[:n], graph.labels[:n], num_classes)


def neighbourhood_accuracy(graph: Graph, num_classes: int, n: int = 20_000) -> float:
  """The same from the mean of a node's and its out-neighbours' features."""
  x = (graph.features[:n] + graph.features[graph.neighbours[:n]].sum(axis=1)) / (
      1 + graph.neighbours.shape[1])
  return _nearest_centroid_accuracy(x, graph.labels[:n], num_classes)


def sample_subgraph(graph: Graph, root: int, fan_outs: Sequence[int],
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """One rooted subgraph: (node ids with the root first, edge sources, edge targets).

  Hop ``i`` samples ``fan_outs[i]`` out-edges of each frontier node without
  replacement (all of them when the degree is lower); edges point away from
  the root; duplicate edges are dropped; every node gets a self loop.
  """
  nodes = [root]
  index = {root: 0}
  edges = set()
  frontier = [root]
  degree = graph.neighbours.shape[1]
  for fan_out in fan_outs:
    next_frontier = []
    for u in frontier:
      picks = graph.neighbours[u]
      if fan_out < degree:
        picks = picks[rng.choice(degree, size=fan_out, replace=False)]
      for v in picks.tolist():
        if v not in index:
          index[v] = len(nodes)
          nodes.append(v)
          next_frontier.append(v)
        edges.add((index[u], index[v]))
    frontier = next_frontier
  edges.update((i, i) for i in range(len(nodes)))
  pairs = np.array(sorted(edges), dtype=np.int64)
  return np.array(nodes, dtype=np.int64), pairs[:, 0], pairs[:, 1]


def _varint(value: int) -> bytes:
  out = bytearray()
  while True:
    byte = value & 0x7F
    value >>= 7
    if value:
      out.append(byte | 0x80)
    else:
      out.append(byte)
      return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
  """A length-delimited protobuf field."""
  return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _feature_entry(key: str, kind: int, packed: bytes) -> bytes:
  """One ``Features.feature`` map entry; ``kind`` 2 = FloatList, 3 = Int64List."""
  feature = _field(kind, _field(1, packed))
  return _field(1, _field(1, key.encode()) + _field(2, feature))


def _int64s(values) -> bytes:
  return b"".join(_varint(int(v)) for v in values)  # non-negative values only


def subgraph_example(graph: Graph, nodes: np.ndarray, sources: np.ndarray,
                     targets: np.ndarray, out_degree: int) -> bytes:
  """The subgraph as a serialized tf.Example in TF-GNN's encoding.

  Encoded directly (packed fields, as ``tf.train.Example`` encodes them) since
  building ``tf.train.Example`` messages costs ~4 ms per subgraph here (0.24 ms
  this way); :func:`write` checks that the examples parse.
  """
  # GCN normalization 1/sqrt((d_u+1)(d_v+1)); every node has out-degree d.
  weight = np.full(len(sources), 1.0 / (out_degree + 1), dtype="<f4")
  entries = (
      _feature_entry("nodes/paper.#size", 3, _varint(len(nodes))),
      _feature_entry("nodes/paper.feat", 2,
                     graph.features[nodes].astype("<f4", copy=False).tobytes()),
      _feature_entry("nodes/paper.label", 3, _int64s(graph.labels[nodes])),
      _feature_entry("edges/cites.#size", 3, _varint(len(sources))),
      _feature_entry("edges/cites.#source", 3, _int64s(sources)),
      _feature_entry("edges/cites.#target", 3, _int64s(targets)),
      _feature_entry("edges/cites.weight", 2, weight.tobytes()),
  )
  return _field(1, b"".join(entries))


def _split_roots(config: GraphConfig, rng: np.random.Generator) -> dict[str, np.ndarray]:
  """Split name -> its roots: disjoint random nodes, drawn first from ``rng``."""
  wanted = sum(config.splits.values())
  roots = rng.permutation(config.num_nodes)[:wanted]
  out, start = {}, 0
  for split, size in config.splits.items():
    out[split] = roots[start:start + size]
    start += size
  return out


def _check_parses(examples_dir: str, schema_dir: str, graph: Graph) -> None:
  """The first examples of the first file parse with the schema and hold the
  root's features and label."""
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  import tensorflow_gnn as tfgnn
  from gnn_trainer_component import graph_schema
  # pylint: enable=g-import-not-at-top
  spec = tfgnn.create_graph_spec_from_schema_pb(graph_schema.read_artifact_schema(schema_dir))
  files = sorted(tf.io.gfile.glob(os.path.join(examples_dir, "Split-*", "*.gz")))
  records = tf.data.TFRecordDataset(files[:1], compression_type="GZIP").take(8).batch(8)
  parsed = tfgnn.parse_example(spec, next(iter(records)))
  feat = parsed.node_sets["paper"]["feat"].to_tensor()[:, 0].numpy()
  label = parsed.node_sets["paper"]["label"].to_tensor()[:, 0].numpy()
  roots = [int(np.flatnonzero((graph.features == row).all(axis=1))[0]) for row in feat]
  if not (graph.labels[roots] == label).all():
    raise AssertionError(f"Examples under {examples_dir} do not parse back to the graph.")


def write(out_dir: str, config: GraphConfig) -> dict[str, object]:
  """Generates, samples and writes the examples; returns what was written.

  Layout: ``<out_dir>/examples/Split-<name>/data-NNNNN.gz`` and
  ``<out_dir>/graph_schema/graph_schema.pbtxt``; ``<out_dir>/graph.json``
  describes the graph (sizes, accuracies of the feature-only and neighbourhood
  baselines).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  graph = generate_graph(config)
  rng = np.random.default_rng(config.seed + 1)
  roots = _split_roots(config, rng)
  examples_dir = os.path.join(out_dir, "examples")
  shutil.rmtree(examples_dir, ignore_errors=True)
  options = tf.io.TFRecordOptions(compression_type="GZIP", compression_level=1)
  counts = {}
  for split, split_roots in roots.items():
    split_dir = os.path.join(examples_dir, f"Split-{split}")
    os.makedirs(split_dir)
    size = len(split_roots)
    for shard, lo in enumerate(range(0, size, config.examples_per_file)):
      path = os.path.join(split_dir, f"data-{shard:05d}.gz")
      with tf.io.TFRecordWriter(path, options) as writer:
        for root in split_roots[lo:lo + config.examples_per_file].tolist():
          nodes, sources, targets = sample_subgraph(graph, root, config.fan_outs, rng)
          writer.write(subgraph_example(graph, nodes, sources, targets, config.out_degree))
    counts[split] = size
  schema_dir = os.path.join(out_dir, "graph_schema")
  os.makedirs(schema_dir, exist_ok=True)
  with open(os.path.join(schema_dir, "graph_schema.pbtxt"), "w") as f:
    f.write(SCHEMA_PBTXT.format(dim=config.feature_dim))
  _check_parses(examples_dir, schema_dir, graph)
  info = {"num_nodes": config.num_nodes, "num_edges": config.num_edges,
          "feature_dim": config.feature_dim, "num_classes": config.num_classes,
          "fan_outs": list(config.fan_outs), "num_examples": counts,
          "feature_only_accuracy": feature_only_accuracy(graph, config.num_classes),
          "neighbourhood_accuracy": neighbourhood_accuracy(graph, config.num_classes)}
  with open(os.path.join(out_dir, "graph.json"), "w") as f:
    json.dump(info, f, indent=2)
  return info


# ----------------------------------------------------------------- the graph as tables

#: The tables' folder under ``write``'s ``out_dir``, and its files.
TABLES_DIR = "tables"
NODE_TABLE = "nodes-paper.tfrecord"
EDGE_TABLE = "edges-cites.csv"
#: Nodes whose edge rows are formatted at a time (memory: ~1 KB per node).
_EDGE_CHUNK_NODES = 50_000


def sampling_config(config: GraphConfig) -> dict[str, object]:
  """GraphSampler's (and GnnTrainer's in-memory) sampling_config of the examples' fan-outs."""
  return {"seed_node_set": "paper", "hops": [{"cites": int(f)} for f in config.fan_outs]}


def tables_schema_text(config: GraphConfig) -> str:
  """:data:`SCHEMA_PBTXT` with each set's table in ``metadata.filename``."""
  # pylint: disable=g-import-not-at-top
  from google.protobuf import text_format
  import tensorflow_gnn as tfgnn
  # pylint: enable=g-import-not-at-top
  schema = tfgnn.parse_schema(SCHEMA_PBTXT.format(dim=config.feature_dim))
  schema.node_sets["paper"].metadata.filename = NODE_TABLE
  schema.edge_sets["cites"].metadata.filename = EDGE_TABLE
  return text_format.MessageToString(schema)


def node_record(node_id: int, features: np.ndarray, label: int) -> bytes:
  """One node table row as a serialized tf.Example: ``#id`` (bytes), ``feat``, ``label``.

  Encoded as :func:`subgraph_example` encodes (kind 1 = BytesList: one value).
  """
  return _field(1, b"".join((
      _feature_entry("#id", 1, str(node_id).encode()),
      _feature_entry("feat", 2, features.astype("<f4", copy=False).tobytes()),
      _feature_entry("label", 3, _varint(int(label))))))


def _csv_ids(ids: np.ndarray) -> np.ndarray:
  return ids.astype(np.int64).astype(str)


def write_tables(out_dir: str, config: GraphConfig,
                 graph: Optional[Graph] = None) -> dict[str, object]:
  """Writes the graph as GraphSampler's input tables into ``<out_dir>/tables``.

  Node ids are the node indices as strings; the seed tables hold the roots of
  :func:`write`'s splits (the same draw). Edges: each node's ``out_degree``
  out-edges (duplicates kept: the sampler drops parallel edges) and a self
  loop, all with the examples' GCN ``weight`` 1/(out_degree+1).

  Returns:
    ``{"dir", "seeds": {split: table}, "sampling_config", "num_edges"}``.
  """
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  from benchmarks import power_law_graph
  # pylint: enable=g-import-not-at-top
  graph = graph or generate_graph(config)
  tables_dir = os.path.join(out_dir, TABLES_DIR)
  shutil.rmtree(tables_dir, ignore_errors=True)
  os.makedirs(tables_dir)
  n = config.num_nodes
  with tf.io.TFRecordWriter(os.path.join(tables_dir, NODE_TABLE)) as writer:
    for i, feat, label in zip(range(n), graph.features, graph.labels.tolist()):
      writer.write(node_record(i, feat, label))
  weight = np.float32(1.0 / (config.out_degree + 1))
  weight_text = np.format_float_positional(weight)
  if np.float32(float(weight_text)) != weight:
    raise AssertionError(f"weight {weight_text} does not parse back to {weight!r}")
  with open(os.path.join(tables_dir, EDGE_TABLE), "w") as f:
    f.write("source,target,weight\n")
    for lo in range(0, n, _EDGE_CHUNK_NODES):  # vectorized, as power_law_graph's edges
      nodes = np.arange(lo, min(n, lo + _EDGE_CHUNK_NODES))
      sources = np.repeat(nodes, config.out_degree + 1)
      targets = np.concatenate([graph.neighbours[nodes], nodes[:, None]], axis=1).ravel()
      lines = np.char.add(np.char.add(np.char.add(_csv_ids(sources), ","), _csv_ids(targets)),
                          f",{weight_text}\n")
      f.write("".join(lines.tolist()))
  seeds = {}
  for split, split_roots in _split_roots(config, np.random.default_rng(config.seed + 1)).items():
    seeds[split] = f"seeds-{split}.csv"
    power_law_graph._write_ids(  # pylint: disable=protected-access
        os.path.join(tables_dir, seeds[split]), "id",
        [f"{i}\n" for i in _csv_ids(split_roots)])
  with open(os.path.join(tables_dir, "graph_schema.pbtxt"), "w") as f:
    f.write(tables_schema_text(config))
  return {"dir": tables_dir, "seeds": seeds, "sampling_config": sampling_config(config),
          "num_edges": n * (config.out_degree + 1)}


def check_tables(tables: Mapping[str, object], schema_dir: str, graph: Graph,
                 splits: Sequence[str] = ("train",), n: int = 8) -> None:
  """The tables load as GnnTrainer loads them, and their sampled subgraphs have the
  spec of the examples' schema (``schema_dir``) and the roots' features and labels."""
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  import tensorflow_gnn as tfgnn
  from gnn_trainer_component import graph_schema
  from gnn_trainer_component.in_memory import adapters
  # pylint: enable=g-import-not-at-top
  loaded = adapters.load(str(tables["dir"]), seeds=tables["seeds"],
                         sampling_config=tables["sampling_config"], splits=list(splits))
  expected = tfgnn.create_graph_spec_from_schema_pb(graph_schema.read_artifact_schema(schema_dir))
  if loaded.sampler.spec != expected:
    raise AssertionError(f"Subgraphs sampled from {tables['dir']} have spec "
                         f"{loaded.sampler.spec}, the examples {expected}.")
  # As GnnTrainer's parity check: GraphSampler-format examples, parsed with the examples' spec.
  records = loaded.serialized_examples([splits[0]], n)
  parsed = tfgnn.parse_example(expected, tf.constant(records))
  roots = loaded.seeds[splits[0]][:n]  # node ids are the node indices
  feat = parsed.node_sets["paper"]["feat"].to_tensor()[:, 0].numpy()
  label = parsed.node_sets["paper"]["label"].to_tensor()[:, 0].numpy()
  if not (np.array_equal(feat, graph.features[roots])
          and np.array_equal(label, graph.labels[roots])):
    raise AssertionError(f"Subgraphs sampled from {tables['dir']} do not start at their seeds.")


def write_tables_once(out_dir: str, config: GraphConfig) -> dict[str, object]:
  """:func:`write_tables` unless ``<out_dir>/tables/DONE`` exists (then what it wrote)."""
  tables_dir = os.path.join(out_dir, TABLES_DIR)
  marker = os.path.join(tables_dir, "DONE")
  info_file = os.path.join(tables_dir, "tables.json")
  if not os.path.exists(marker):
    graph = generate_graph(config)
    tables = write_tables(out_dir, config, graph)
    check_tables(tables, os.path.join(out_dir, "graph_schema"), graph)
    with open(info_file, "w") as f:
      json.dump(tables, f, indent=2)
    open(marker, "w").close()
  with open(info_file) as f:
    return json.load(f)
