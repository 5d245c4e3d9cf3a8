"""A graph's node and edge tables loaded once into memory: ids -> indices, CSR, feature matrices.

The tables are the ones GraphSampler reads (TF-GNN's unigraph convention, CSV
or TFRecord, named in each set's ``metadata.filename``): a node table has an
``id`` column (``#id`` bytes feature in TFRecord), an edge table ``source`` and
``target`` (``#source``/``#target``). Every feature the graph schema declares
is read from its set's table into one numpy array (``[num_items, *shape]``);
node ids become contiguous row indices (table order); each edge set gets a CSR
adjacency by source node. Memory is about the tables' size: one copy of each
feature, however many subgraphs are sampled from it.

Everything is validated as GraphSampler validates it, with the table, row and
id in the message: duplicate node ids, edges naming unknown nodes, missing or
non-finite feature values, seeds not in the seed node set.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn.data import unigraph

from gnn_trainer_component.sampler import inputs as tables
from gnn_trainer_component.sampler.inputs import GraphInputError

#: TFRecord records parsed per ``tf.io.parse_example`` call.
_PARSE_BATCH = 4096

#: Peak memory while loading, per byte of table on disk, by format: measured
#: 3.17 GB peak (0.6 GB before loading) for the 177 MB of CSV tables of the
#: 10M-edge graph (benchmarks/README.md, "In-memory graph"): ids become Python
#: strings while they are read. TFRecord features parse to about their size.
LOAD_PEAK_PER_TABLE_BYTE = {"csv": 16, "tfrecord": 4}


class GraphTooLargeError(GraphInputError):
  """The graph's tables would not fit in this machine's memory."""


@dataclasses.dataclass(frozen=True)
class NodeSet:
  """One node set: ids in table order (row i is node index i) and feature arrays."""
  ids: pd.Index
  features: Mapping[str, np.ndarray]
  table: str

  @property
  def size(self) -> int:
    return len(self.ids)


@dataclasses.dataclass(frozen=True)
class EdgeSet:
  """One edge set in CSR order by source: the out-edges of node ``u`` are
  ``indptr[u]:indptr[u + 1]``."""
  source: np.ndarray
  target: np.ndarray
  indptr: np.ndarray
  features: Mapping[str, np.ndarray]
  table: str

  @property
  def size(self) -> int:
    return len(self.target)

  def degrees(self) -> np.ndarray:
    return np.diff(self.indptr)


@dataclasses.dataclass(frozen=True)
class InMemoryGraph:
  """The whole graph of a unigraph GraphSchema, in memory.

  Attributes:
    schema: The graph schema (table metadata stripped: it parses the subgraphs
      sampled from this graph, exactly as GraphSampler's output schema).
    node_sets, edge_sets: By name.
  """
  schema: tfgnn.GraphSchema
  node_sets: Mapping[str, NodeSet]
  edge_sets: Mapping[str, EdgeSet]

  @property
  def nbytes(self) -> int:
    """Bytes of the arrays (ids excluded)."""
    total = 0
    for piece in list(self.node_sets.values()) + list(self.edge_sets.values()):
      total += sum(a.nbytes for a in piece.features.values())
    for e in self.edge_sets.values():
      total += e.source.nbytes + e.target.nbytes + e.indptr.nbytes
    return total

  def lookup(self, node_set: str, ids: Sequence[bytes], what: str) -> np.ndarray:
    """Indices of ``ids`` in ``node_set``.

    Raises:
      GraphInputError: naming ``what`` and the ids missing from the node set.
    """
    index = self.node_sets[node_set].ids.get_indexer(pd.Index(list(ids), dtype=object))
    missing = index < 0
    if missing.any():
      raise GraphInputError(
          f"{what}: ids missing from the {node_set!r} node table "
          f"{self.node_sets[node_set].table!r}: "
          f"{tables.format_ids(np.asarray(list(ids), dtype=object)[missing])}.")
    return index.astype(np.int64)


def _np_dtype(dtype) -> np.dtype:
  dt = tf.dtypes.as_dtype(dtype)
  return np.dtype(object) if dt == tf.string else dt.as_numpy_dtype


def _shape(feature: tfgnn.proto.graph_schema_pb2.Feature) -> tuple[int, ...]:
  return tuple(d.size for d in feature.shape.dim)


def _features_spec(piece) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
  return {name: (_shape(f), _np_dtype(f.dtype)) for name, f in piece.features.items()}


def _as_bytes(values: pd.Series) -> np.ndarray:
  return np.asarray([v.encode("utf-8") for v in values], dtype=object)


def _read_csv(data_dir: str, filename: str, key_columns: Sequence[str],
              features: Mapping[str, tuple[tuple[int, ...], np.dtype]], who: str):
  """(key columns as bytes arrays, feature arrays, 0-based row -> (file, line)) of a CSV table."""
  frames, origins = [], []
  for path in tables.resolve_table(data_dir, filename, who):
    with tf.io.gfile.GFile(path, "r") as f:
      frame = pd.read_csv(f, dtype=str, keep_default_na=False, na_filter=False)
    missing = [c for c in list(key_columns) + list(features) if c not in frame.columns]
    if missing:
      raise GraphInputError(
          f"{who}: CSV table {path} lacks column(s) {missing} (header: {list(frame.columns)}).")
    frames.append(frame)
    origins.append((path, len(frame)))
  frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
  keys = [_as_bytes(frame[c]) for c in key_columns]
  values = {}
  for name, (shape, dtype) in features.items():
    if shape:
      raise GraphInputError(
          f"{who}: feature {name!r} of CSV table {filename!r} has shape {list(shape)}; CSV "
          "tables hold scalar features only. Write the table as TFRecord tf.Examples.")
    column = frame[name]
    if dtype == object:
      values[name] = _as_bytes(column)
      continue
    numbers = pd.to_numeric(column.where(column != ""), errors="coerce").to_numpy()
    bad = np.flatnonzero(~np.isfinite(numbers.astype(np.float64)))
    if len(bad):
      path, line = _origin(origins, bad[0])
      raise GraphInputError(
          f"{who}: CSV table {path}, line {line}: feature {name!r} is missing, not a "
          f"number or not finite ({column.iloc[bad[0]]!r}); {len(bad)} such row(s).")
    values[name] = numbers.astype(dtype)
  return keys, values, origins


def _origin(origins: Sequence[tuple[str, int]], row: int) -> tuple[str, int]:
  """(file, line or record number) of 0-based ``row`` of a table read from ``origins``."""
  for path, n in origins:
    if row < n:
      return path, row + 2 if path.endswith(".csv") else row + 1
    row -= n
  raise IndexError(row)


def _read_tfrecord(data_dir: str, filename: str, key_columns: Sequence[str],
                   features: Mapping[str, tuple[tuple[int, ...], np.dtype]], who: str):
  """As :func:`_read_csv`, for a TFRecord table of tf.Examples."""
  spec = {"#" + c: tf.io.FixedLenFeature([], tf.string) for c in key_columns}
  for name, (shape, dtype) in features.items():
    spec[name] = tf.io.FixedLenFeature(shape, tf.string if dtype == object else tf.as_dtype(dtype))
  keys = {k: [] for k in spec}
  origins = []
  for path in tables.resolve_table(data_dir, filename, who):
    count = 0
    for start, batch in enumerate(tf.data.TFRecordDataset(path).batch(_PARSE_BATCH)):
      try:
        parsed = tf.io.parse_example(batch, spec)
      except tf.errors.InvalidArgumentError:
        _raise_record_error(path, start * _PARSE_BATCH, batch.numpy(), spec, who)
      for k, v in parsed.items():
        keys[k].append(v.numpy())
      count += int(batch.shape[0])
    origins.append((path, count))
  arrays = {k: (np.concatenate(v) if v else np.zeros((0,))) for k, v in keys.items()}
  key_arrays = [arrays.pop("#" + c).astype(object) for c in key_columns]
  values = {}
  for name, (_, dtype) in features.items():
    value = arrays[name]
    if value.dtype.kind == "f":
      flat = value.reshape(len(value), -1)
      bad = np.flatnonzero(~np.isfinite(flat).all(axis=1))
      if len(bad):
        path, record = _origin(origins, bad[0])
        raise GraphInputError(
            f"{who}: TFRecord table {path}, record {record}: feature {name!r} has a "
            f"non-finite value (NaN or inf); {len(bad)} such record(s).")
    values[name] = value.astype(dtype)
  return key_arrays, values, origins


def _raise_record_error(path: str, first: int, records: np.ndarray, spec, who: str):
  """Names the first record of a batch that does not parse, and why."""
  for i, record in enumerate(records):
    try:
      tf.io.parse_example(tf.constant([record]), spec)
    except tf.errors.InvalidArgumentError as e:
      example = tf.train.Example.FromString(record)
      absent = [k for k in spec if k not in example.features.feature]
      reason = (f"lacks feature(s) {absent}" if absent
                else f"has a feature of the wrong type or size ({e.message.splitlines()[0]})")
      raise GraphInputError(
          f"{who}: TFRecord table {path}, record {first + i + 1} {reason}; the graph "
          f"schema declares {sorted(spec)}.") from None
  raise GraphInputError(f"{who}: TFRecord table {path} does not parse.")


def _read_table(data_dir: str, filename: str, key_columns: Sequence[str], piece, who: str):
  read = _read_csv if unigraph.guess_file_format(filename) == "csv" else _read_tfrecord
  return read(data_dir, filename, key_columns, _features_spec(piece), who)


def _load_node_set(name: str, node_set, data_dir: str, who: str) -> NodeSet:
  if not node_set.metadata.HasField("filename"):
    raise GraphInputError(
        f"{who}: node set {name!r} has no metadata.filename table in the graph schema.")
  filename = node_set.metadata.filename
  (ids,), features, origins = _read_table(data_dir, filename, ("id",), node_set, who)
  index = pd.Index(ids, dtype=object)
  if not index.is_unique:
    dups = index[index.duplicated()]
    row = int(np.flatnonzero(index.duplicated())[0])
    path, line = _origin(origins, row)
    raise GraphInputError(
        f"{who}: node table {filename!r} of node set {name!r} has duplicate ids "
        f"{tables.format_ids(dups)} (first repeat: {path}, row {line}).")
  return NodeSet(ids=index, features=features, table=filename)


def _load_edge_set(name: str, edge_set, data_dir: str, node_sets: Mapping[str, NodeSet],
                   who: str) -> EdgeSet:
  if not edge_set.metadata.HasField("filename"):
    raise GraphInputError(
        f"{who}: edge set {name!r} has no metadata.filename table in the graph schema.")
  filename = edge_set.metadata.filename
  (src_ids, tgt_ids), features, origins = _read_table(
      data_dir, filename, ("source", "target"), edge_set, who)
  ends = []
  for role, ids, set_name in (("source", src_ids, edge_set.source),
                              ("target", tgt_ids, edge_set.target)):
    index = node_sets[set_name].ids.get_indexer(pd.Index(ids, dtype=object))
    bad = np.flatnonzero(index < 0)
    if len(bad):
      path, line = _origin(origins, int(bad[0]))
      raise GraphInputError(
          f"{who}: edge table {filename!r} of edge set {name!r} has {role} ids not in node "
          f"set {set_name!r}: "
          f"{tables.format_ids(ids[bad])} (first at {path}, row {line}; {len(bad)} edges).")
    ends.append(index.astype(np.int64))
  source, target = ends
  order = np.argsort(source, kind="stable")
  counts = np.bincount(source, minlength=node_sets[edge_set.source].size)
  indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
  return EdgeSet(source=source[order], target=target[order], indptr=indptr,
                 features={k: v[order] for k, v in features.items()}, table=filename)


def load_graph(schema: tfgnn.GraphSchema, data_dir: str, *, who: str = "GnnTrainer"
               ) -> InMemoryGraph:
  """Loads and validates every node and edge table of ``schema``.

  Args:
    schema: A unigraph GraphSchema: each set names its table in
      ``metadata.filename``, relative to ``data_dir``.
    data_dir: The GraphSchema artifact's folder.
    who: The component named in errors.

  Raises:
    GraphInputError: naming the table, row and ids or feature at fault.
  """
  if schema.context.features:
    raise GraphInputError(
        f"{who}: the graph schema declares context features {sorted(schema.context.features)}; "
        "a graph held in memory has none (sampled subgraphs get no context). Remove them "
        "or train on pre-sampled examples (GraphSampler).")
  node_sets = {name: _load_node_set(name, ns, data_dir, who)
               for name, ns in sorted(schema.node_sets.items())}
  edge_sets = {name: _load_edge_set(name, es, data_dir, node_sets, who)
               for name, es in sorted(schema.edge_sets.items())}
  return InMemoryGraph(schema=tables.output_graph_schema(schema), node_sets=node_sets,
                       edge_sets=edge_sets)


def _tables(schema: tfgnn.GraphSchema) -> list[str]:
  return [piece.metadata.filename for _, _, piece in tfgnn.iter_sets(schema)
          if piece.metadata.HasField("filename")]


def load_estimate(schema: tfgnn.GraphSchema, data_dir: str, *, who: str = "GnnTrainer"
                  ) -> tuple[int, int]:
  """(bytes of the tables on disk, estimated peak bytes while loading them)."""
  on_disk = peak = 0
  for filename in _tables(schema):
    fmt = "csv" if unigraph.guess_file_format(filename) == "csv" else "tfrecord"
    size = sum(tf.io.gfile.stat(f).length for f in tables.resolve_table(data_dir, filename, who))
    on_disk += size
    peak += size * LOAD_PEAK_PER_TABLE_BYTE[fmt]
  return on_disk, peak


def check_fits(schema: tfgnn.GraphSchema, data_dir: str, memory_bytes: int, *,
               who: str = "GnnTrainer") -> None:
  """Raises GraphTooLargeError, pointing to GraphSampler, if loading would not fit.

  Args:
    schema: The unigraph GraphSchema.
    data_dir: Its folder.
    memory_bytes: The memory of the machine (or container).
    who: The component named in errors.
  """
  on_disk, peak = load_estimate(schema, data_dir, who=who)
  if peak > memory_bytes:
    raise GraphTooLargeError(
        f"{who}: the graph's tables in {data_dir} hold {on_disk / 2**20:,.0f} MiB; loading "
        f"them takes about {peak / 2**30:,.1f} GiB, more than this machine's "
        f"{memory_bytes / 2**30:,.1f} GiB. Pre-sample the subgraphs with GraphSampler on a "
        "distributed Beam runner and train on its examples: sampler = GraphSampler("
        "graph_schema=..., seeds=..., sampling_config=...).with_beam_pipeline_args("
        "['--runner=DataflowRunner', ...]); GnnTrainer(examples=sampler.outputs['examples'], "
        "graph_schema=sampler.outputs['output_graph_schema'], ...).")


def read_seeds(graph: InMemoryGraph, data_dir: str, node_set: str, split: str,
               filename: str, *, who: str = "GnnTrainer") -> np.ndarray:
  """Node indices of a split's seed table (a node table: only ``id`` is read).

  Raises:
    GraphInputError: an empty table, duplicate ids, or ids not in ``node_set``.
  """
  ids = tables.read_node_ids(data_dir, filename) if filename.endswith(
      (".tfrecord", ".tfrecords")) else _csv_ids(data_dir, filename, who)
  what = f"{who}: split {split!r}: seed table {filename!r}"
  if not len(ids):
    raise GraphInputError(f"{what} is empty.")
  index = pd.Index(ids, dtype=object)
  if not index.is_unique:
    raise GraphInputError(
        f"{what} has duplicate ids {tables.format_ids(index[index.duplicated()])}.")
  return graph.lookup(node_set, ids, what)


def _csv_ids(data_dir: str, filename: str, who: str) -> list[bytes]:
  (ids,), _, _ = _read_csv(data_dir, filename, ("id",), {}, who)
  return list(ids)


def log_summary(graph: InMemoryGraph) -> str:
  """One line: sizes per set and the bytes held."""
  parts = [f"{n}: {s.size} nodes" for n, s in graph.node_sets.items()]
  parts += [f"{n}: {s.size} edges" for n, s in graph.edge_sets.items()]
  return f"{', '.join(parts)}; {graph.nbytes / 2**20:.1f} MiB of arrays"

