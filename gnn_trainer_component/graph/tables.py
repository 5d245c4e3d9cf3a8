"""A graph's unigraph tables: one reader and one set of checks for every engine.

Tables follow TF-GNN's "unigraph" convention (``tensorflow_gnn/data/unigraph.py``),
named in each node or edge set's ``metadata.filename`` relative to the
GraphSchema folder (sharded ``name@N`` TFRecords or globs allowed):

* CSV: a header; a node table has an ``id`` column, an edge table ``source``
  and ``target``; every feature the graph schema declares is a column
  (scalar features only);
* TFRecord of tf.Examples: the same keys as bytes features ``#id``,
  ``#source``, ``#target``; features as the schema declares them.

Every component and engine reads tables through :func:`read_node_table`,
:func:`read_edge_table` and :func:`read_seeds` (GraphSampler, LinkSampler and
GraphInferrer's Beam engine through :func:`check_graph`, which keeps no
features), so the same table gets the same verdict everywhere. A table is
read a chunk at a time; each error names the table file, the line (CSV) or
record (TFRecord), the column and the id:

* a malformed row (more fields than the header; a row with fewer fields is
  named where its missing values are refused), a missing column;
* an empty id, a duplicate node id, an edge end that is not in its node set;
* a feature value that is missing, not a number, not finite, not an integer
  (integer features) or out of the dtype's range;
* a seed table that is empty, repeats an id or names an unknown node.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Collection, Iterator, Mapping, Optional, Sequence, Union

import numpy as np
import pandas as pd
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn.data import unigraph

from gnn_trainer_component.graph.errors import format_ids
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.graph.errors import GraphTooLargeError
from gnn_trainer_component.graph.errors import too_large_hint

#: Rows (CSV) or records (TFRecord) read at a time.
CHUNK_ROWS = 65536
#: The key columns of node and edge tables (CSV names; ``#`` + name in TFRecord).
NODE_KEYS, EDGE_KEYS = ("id",), ("source", "target")

#: Feature name -> (shape, numpy dtype) as the graph schema declares it.
FeatureSpec = Mapping[str, tuple[tuple[int, ...], np.dtype]]


def features_spec(piece) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
  """The :data:`FeatureSpec` of a node or edge set of the graph schema."""
  out = {}
  for name, feature in piece.features.items():
    dt = tf.dtypes.as_dtype(feature.dtype)
    out[name] = (tuple(d.size for d in feature.shape.dim),
                 np.dtype(object) if dt == tf.string else np.dtype(dt.as_numpy_dtype))
  return out


def resolve_table(data_dir: str, filename: str, who: str) -> list[str]:
  """Files of a (possibly sharded ``name@N`` or glob) table, relative to data_dir.

  Raises:
    GraphInputError: no such files, or a CSV table named ``name@N`` (TF-GNN's
      CSV reader globs the name unexpanded and fails; a glob works).
  """
  shards = re.fullmatch(r"(.*)@(\d+)", filename)
  if shards and unigraph.guess_file_format(filename) == "csv":
    base, n = shards.group(1), int(shards.group(2))
    stem = base[:-len(".csv")] if base.endswith(".csv") else base
    raise GraphInputError(
        f"{who}: CSV table {filename!r}: TF-GNN's CSV reader cannot read sharded names "
        f"'name@N'. Name the shards with a glob instead, e.g. {stem}-*-of-{n:05d}.csv "
        f"(files {stem}-00000-of-{n:05d}.csv, ...).")
  path = filename if os.path.isabs(filename) else os.path.join(data_dir, filename)
  pattern = unigraph.expand_sharded_pattern(path)
  files = sorted(tf.io.gfile.glob(pattern))
  if not files:
    raise GraphInputError(f"{who}: table {filename!r} not found (looked for {pattern}).")
  return files


@dataclasses.dataclass(frozen=True)
class Chunk:
  """Consecutive rows of one table file, checked.

  Attributes:
    path: The file.
    first: The line (CSV) or record (TFRecord) number of the first row.
    keys: One bytes array per key column.
    features: Feature arrays, ``[rows, *shape]``.
  """
  path: str
  first: int
  keys: list[np.ndarray]
  features: dict[str, np.ndarray]

  def where(self, row: int) -> str:
    """``"<file>, line N"`` (or ``record N``) of the chunk's ``row``."""
    unit = "line" if self.path.endswith(".csv") else "record"
    return f"{self.path}, {unit} {self.first + row}"


def _short_row(path: str, line: int) -> str:
  """`` (the row has N of the header's M fields)`` if CSV ``line`` is short, else ``""``.

  A short row reads as empty values; this names the cause (called on errors only).
  """
  import csv
  with tf.io.gfile.GFile(path, "r") as f:
    reader = csv.reader(f)
    header = next(reader, [])
    for row in reader:
      if reader.line_num == line:
        return (f" (the row has {len(row)} of the header's {len(header)} fields)"
                if len(row) < len(header) else "")
  return ""


def _row_label(keys: Sequence[np.ndarray], row: int) -> str:
  if len(keys) == 1:
    return f"id {keys[0][row].decode('utf-8', 'replace')!r}"
  return "edge " + " -> ".join(repr(k[row].decode("utf-8", "replace")) for k in keys)


def _bad_value(who: str, chunk: Chunk, bad: np.ndarray, name: str, problem: str,
               value) -> GraphInputError:
  row = int(bad[0])
  short = _short_row(chunk.path, chunk.first + row) if value == "" else ""
  return GraphInputError(
      f"{who}: {chunk.where(row)} ({_row_label(chunk.keys, row)}): feature {name!r} {problem} "
      f"({value!r}){short}; {len(bad)} such row(s) in this part of the table.")


def _csv_numbers(who: str, chunk: Chunk, name: str, column: pd.Series, dtype: np.dtype
                 ) -> np.ndarray:
  """The numbers of a CSV column: integers must be integral and in range, floats finite."""
  text = column.str.strip()
  if dtype.kind in "iu":
    bad = np.flatnonzero(~text.str.fullmatch(r"[+-]?\d+").to_numpy(dtype=bool))
    if len(bad):
      value = column.iloc[bad[0]]
      problem = "is missing" if value == "" else f"is not an integer (dtype {dtype.name})"
      raise _bad_value(who, chunk, bad, name, problem, value)
    info = np.iinfo(dtype)
    digits = text.str.lstrip("+-").str.lstrip("0").str.len().to_numpy()
    long = np.flatnonzero(digits >= len(str(info.max)))
    bad = np.asarray([i for i in long if not info.min <= int(text.iloc[i]) <= info.max],
                     dtype=np.int64)
    if len(bad):
      raise _bad_value(who, chunk, bad, name, f"is out of the range of {dtype.name}",
                       column.iloc[bad[0]])
    return text.to_numpy().astype(dtype)
  numbers = pd.to_numeric(text.where(text != ""), errors="coerce").to_numpy(dtype=np.float64)
  bad = np.flatnonzero(~np.isfinite(numbers))
  if len(bad):
    value = column.iloc[bad[0]]
    raise _bad_value(who, chunk, bad, name, "is missing, not a number or not finite", value)
  with np.errstate(over="ignore"):
    out = numbers.astype(dtype)
  bad = np.flatnonzero(~np.isfinite(out))
  if len(bad):
    raise _bad_value(who, chunk, bad, name, f"is out of the range of {dtype.name}",
                     column.iloc[bad[0]])
  return out


def _as_bytes(values: pd.Series) -> np.ndarray:
  return np.asarray([v.encode("utf-8") for v in values], dtype=object)


def _csv_chunks(path: str, key_columns: Sequence[str], features: FeatureSpec, who: str
                ) -> Iterator[Chunk]:
  for name, (shape, _) in features.items():
    if shape:
      raise GraphInputError(
          f"{who}: feature {name!r} of CSV table {path} has shape {list(shape)}; CSV tables "
          "hold scalar features only. Write the table as TFRecord tf.Examples.")
  wanted = list(key_columns) + list(features)
  with tf.io.gfile.GFile(path, "r") as f:
    reader = pd.read_csv(f, dtype=str, keep_default_na=False, na_filter=False,
                         chunksize=CHUNK_ROWS)
    first = 2
    try:
      for frame in reader:
        missing = [c for c in wanted if c not in frame.columns]
        if missing:
          raise GraphInputError(
              f"{who}: CSV table {path} lacks column(s) {missing} (header: "
              f"{list(frame.columns)}).")
        chunk = Chunk(path, first, [_as_bytes(frame[c]) for c in key_columns], {})
        for name, (_, dtype) in features.items():
          chunk.features[name] = (_as_bytes(frame[name]) if dtype == np.dtype(object) else
                                  _csv_numbers(who, chunk, name, frame[name], dtype))
        first += len(frame)
        yield chunk
    except pd.errors.ParserError as e:
      raise GraphInputError(
          f"{who}: CSV table {path} is malformed: {str(e).strip()} (a row has more fields "
          "than the header; quote values that hold commas).") from None
    except pd.errors.EmptyDataError:
      raise GraphInputError(f"{who}: CSV table {path} is empty: it has no header "
                            f"(columns {wanted}).") from None


def _tfrecord_chunks(path: str, key_columns: Sequence[str], features: FeatureSpec, who: str
                     ) -> Iterator[Chunk]:
  spec = {"#" + c: tf.io.FixedLenFeature([], tf.string) for c in key_columns}
  for name, (shape, dtype) in features.items():
    spec[name] = tf.io.FixedLenFeature(
        shape, tf.string if dtype == np.dtype(object) else tf.as_dtype(dtype))
  first = 1
  for batch in tf.data.TFRecordDataset(path).batch(CHUNK_ROWS):
    try:
      parsed = {k: v.numpy() for k, v in tf.io.parse_example(batch, spec).items()}
    except tf.errors.InvalidArgumentError:
      _raise_record_error(path, first, batch.numpy(), spec, who)
    chunk = Chunk(path, first, [parsed["#" + c].astype(object) for c in key_columns], {})
    for name, (_, dtype) in features.items():
      value = parsed[name]
      if value.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(value.reshape(len(value), -1)).all(axis=1))
        if len(bad):
          raise _bad_value(who, chunk, bad, name, "has a non-finite value (NaN or inf)",
                           value[bad[0]].tolist())
      chunk.features[name] = value.astype(dtype)
    first += len(batch)
    yield chunk


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
          f"{who}: {path}, record {first + i} {reason}; the graph schema declares "
          f"{sorted(spec)}.") from None
  raise GraphInputError(f"{who}: TFRecord table {path} does not parse.")


def iter_chunks(data_dir: str, filename: str, key_columns: Sequence[str],
                features: FeatureSpec, who: str) -> Iterator[Chunk]:
  """The checked chunks of a table, file by file; no key (id) is empty.

  Raises:
    GraphInputError: naming the file, line or record, column and id.
  """
  read = _csv_chunks if unigraph.guess_file_format(filename) == "csv" else _tfrecord_chunks
  for path in resolve_table(data_dir, filename, who):
    for chunk in read(path, key_columns, features, who):
      for column, keys in zip(key_columns, chunk.keys, strict=True):
        empty = np.flatnonzero(keys == b"")
        if len(empty):
          row = int(empty[0])
          short = _short_row(chunk.path, chunk.first + row) if path.endswith(".csv") else ""
          raise GraphInputError(
              f"{who}: {chunk.where(row)}: {column!r} is empty{short}; every node id must be "
              f"a non-empty string ({len(empty)} such row(s) in this part of the table).")
      yield chunk


def _table_of(kind: str, name: str, piece, who: str) -> str:
  if not piece.metadata.HasField("filename"):
    raise GraphInputError(
        f"{who}: {kind} set {name!r} has no metadata.filename table in the graph schema.")
  return piece.metadata.filename


def _concat(parts: Sequence[np.ndarray], dtype, shape=()) -> np.ndarray:
  return np.concatenate(parts) if parts else np.zeros((0, *shape), dtype=dtype)


def _features(parts: Mapping[str, list[np.ndarray]], spec: FeatureSpec) -> dict[str, np.ndarray]:
  return {n: _concat(parts[n], dtype, shape) for n, (shape, dtype) in spec.items() if n in parts}


def _locate(parts: Sequence[tuple[Chunk, int]], row: int) -> str:
  """Where ``row`` (0-based over the whole table) of a table read as ``(chunk, rows)`` is."""
  for chunk, size in parts:
    if row < size:
      return chunk.where(row)
    row -= size
  raise IndexError(row)


@dataclasses.dataclass(frozen=True)
class NodeTable:
  """A node set's table: ids in table order (row i is node index i), feature arrays."""
  filename: str
  ids: pd.Index
  features: Mapping[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class EdgeTable:
  """An edge set's table in table order: its ends as row indices of their node tables."""
  filename: str
  source: np.ndarray
  target: np.ndarray
  features: Mapping[str, np.ndarray]

  def by_source(self, num_sources: int) -> tuple["EdgeTable", np.ndarray]:
    """The table in CSR order by source (stable: table order within a source), and ``indptr``.

    The out-edges of source node ``u`` are then rows ``indptr[u]:indptr[u + 1]``.
    """
    order = np.argsort(self.source, kind="stable")
    counts = np.bincount(self.source, minlength=num_sources)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return EdgeTable(self.filename, self.source[order], self.target[order],
                     {k: v[order] for k, v in self.features.items()}), indptr


#: Which features a reader keeps: all (True), none (False: checked, then dropped) or those named.
Keep = Union[bool, Collection[str]]


def _kept(keep: Keep, spec: FeatureSpec) -> frozenset:
  if isinstance(keep, bool):
    return frozenset(spec) if keep else frozenset()
  return frozenset(keep)


def read_node_table(name: str, node_set, data_dir: str, who: str, *,
                    keep_features: Keep = True) -> NodeTable:
  """Reads and checks a node set's table (``keep_features``: :data:`Keep`).

  Raises:
    GraphInputError: a bad row or value, an empty or duplicate id, no rows.
  """
  filename = _table_of("node", name, node_set, who)
  spec = features_spec(node_set)
  kept = _kept(keep_features, spec)
  ids, where, parts = [], [], {n: [] for n in spec if n in kept}
  for chunk in iter_chunks(data_dir, filename, NODE_KEYS, spec, who):
    ids.append(chunk.keys[0])
    where.append((chunk, len(chunk.keys[0])))
    for n, value in chunk.features.items():
      if n in kept:
        parts[n].append(value)
  index = pd.Index(_concat(ids, object), dtype=object)
  if not len(index):
    raise GraphInputError(
        f"{who}: node table {filename!r} of node set {name!r} has no rows; every node set of "
        "the graph schema needs at least one node (drop the node set and its edge sets from "
        "graph_schema.pbtxt if the graph has none).")
  if not index.is_unique:
    first = _locate(where, int(np.flatnonzero(index.duplicated())[0]))
    raise GraphInputError(
        f"{who}: node table {filename!r} of node set {name!r} has duplicate ids "
        f"{format_ids(index[index.duplicated()])} (first repeat: {first}).")
  return NodeTable(filename, index, _features(parts, spec))


def read_edge_table(name: str, edge_set, data_dir: str, node_ids: Mapping[str, pd.Index],
                    who: str, *, keep_features: Keep = True) -> EdgeTable:
  """Reads and checks an edge set's table: every end must be in its node set.

  Args:
    name: The edge set.
    edge_set: Its GraphSchema piece.
    data_dir: The folder table names are relative to.
    node_ids: Node set -> its ids (:attr:`NodeTable.ids`).
    who: The component named in errors.
    keep_features: Which features are kept (:data:`Keep`); the others are
      checked, then dropped.

  Raises:
    GraphInputError: a bad row or value, or an end not in its node set.
  """
  filename = _table_of("edge", name, edge_set, who)
  spec = features_spec(edge_set)
  kept = _kept(keep_features, spec)
  ends, parts = ([], []), {n: [] for n in spec if n in kept}
  for chunk in iter_chunks(data_dir, filename, EDGE_KEYS, spec, who):
    for role, ids, set_name, out in zip(EDGE_KEYS, chunk.keys,
                                        (edge_set.source, edge_set.target), ends, strict=True):
      index = node_ids[set_name].get_indexer(pd.Index(ids, dtype=object))
      bad = np.flatnonzero(index < 0)
      if len(bad):
        raise GraphInputError(
            f"{who}: edge table {filename!r} of edge set {name!r} has {role} ids not in node "
            f"set {set_name!r}: {format_ids(ids[bad])} (first at {chunk.where(int(bad[0]))}; "
            f"{len(bad)} such edge(s) in this part of the table).")
      out.append(index.astype(np.int64))
    for n, value in chunk.features.items():
      if n in kept:
        parts[n].append(value)
  return EdgeTable(filename, _concat(ends[0], np.int64), _concat(ends[1], np.int64),
                   _features(parts, spec))


def out_of_memory(who: str, what: str) -> GraphTooLargeError:
  """The error for a ``MemoryError`` while ``what`` (e.g. "reading node table 'x'") ran."""
  return GraphTooLargeError(
      f"{who}: ran out of memory {what}: the graph does not fit in what this process may use "
      "(the machine's memory, a container's limit, or an address-space limit such as "
      f"`ulimit -v`). {too_large_hint(who)}")


def _keep_of(keep: Union[bool, Mapping[str, Collection[str]]], name: str) -> Keep:
  return keep if isinstance(keep, bool) else tuple(keep.get(name, ()))


def read_graph_tables(schema: tfgnn.GraphSchema, data_dir: str, who: str, *,
                      keep_features: Union[bool, Mapping[str, Collection[str]]] = True
                      ) -> tuple[dict[str, NodeTable], dict[str, EdgeTable]]:
  """Every node and edge table of ``schema``, read and checked (node sets first).

  ``keep_features``: all, none, or set name -> the features kept (:data:`Keep`).

  Raises:
    GraphInputError: as :func:`read_node_table` and :func:`read_edge_table`.
    GraphTooLargeError: memory ran out while reading a table (naming it).
  """
  nodes, edges = {}, {}
  for name, piece in sorted(schema.node_sets.items()):
    try:
      nodes[name] = read_node_table(name, piece, data_dir, who,
                                    keep_features=_keep_of(keep_features, name))
    except MemoryError:
      raise out_of_memory(who, f"reading node table {piece.metadata.filename!r} of node set "
                               f"{name!r}") from None
  ids = {name: table.ids for name, table in nodes.items()}
  for name, piece in sorted(schema.edge_sets.items()):
    try:
      edges[name] = read_edge_table(name, piece, data_dir, ids, who,
                                    keep_features=_keep_of(keep_features, name))
    except MemoryError:
      raise out_of_memory(who, f"reading edge table {piece.metadata.filename!r} of edge set "
                               f"{name!r}") from None
  return nodes, edges


def lookup(ids: pd.Index, wanted: Sequence[bytes], what: str, node_set: str,
           table: str) -> np.ndarray:
  """Row indices of ``wanted`` in a node set's ``ids``.

  Raises:
    GraphInputError: naming ``what`` and the ids missing from the node set.
  """
  index = ids.get_indexer(pd.Index(list(wanted), dtype=object))
  missing = index < 0
  if missing.any():
    raise GraphInputError(
        f"{what}: ids missing from the {node_set!r} node table {table!r}: "
        f"{format_ids(np.asarray(list(wanted), dtype=object)[missing])}.")
  return index.astype(np.int64)


def read_ids(data_dir: str, filename: str, who: str) -> np.ndarray:
  """The ids of a node or seed table (checked: no row is malformed, no id empty)."""
  return _concat([c.keys[0] for c in iter_chunks(data_dir, filename, NODE_KEYS, {}, who)],
                 object)


def read_seeds(data_dir: str, filename: str, nodes: NodeTable, node_set: str, split: str,
               who: str) -> np.ndarray:
  """Node indices of a split's seed table (a node table: only ``id`` is read).

  Raises:
    GraphInputError: an empty table, an empty or duplicate id, or ids not in
      ``node_set``.
  """
  what = f"{who}: split {split!r}: seed table {filename!r}"
  ids = read_ids(data_dir, filename, who)
  if not len(ids):
    raise GraphInputError(f"{what} is empty.")
  index = pd.Index(ids, dtype=object)
  if not index.is_unique:
    raise GraphInputError(f"{what} has duplicate ids {format_ids(index[index.duplicated()])}.")
  return lookup(nodes.ids, ids, what, node_set, nodes.filename)


#: The column of a seed table that holds each seed's time (time-aware sampling).
SEED_TIME = "time"


def read_seed_times(data_dir: str, filename: str, split: str, dtype: np.dtype,
                    who: str) -> np.ndarray:
  """The ``time`` column of a split's seed table, in table order (one per seed).

  Raises:
    GraphInputError: the column is missing, or a time is missing, not a
      number, not finite or (``dtype`` integer) not an integer, naming the
      file, line or record and id.
  """
  try:
    chunks = list(iter_chunks(data_dir, filename, NODE_KEYS, {SEED_TIME: ((), dtype)}, who))
  except GraphInputError as e:
    raise GraphInputError(
        f"{e} (split {split!r}: time-aware sampling bounds each seed's subgraph by the "
        f"seed's time, the column {SEED_TIME!r} of its seed table {filename!r})") from None
  return _concat([c.features[SEED_TIME] for c in chunks], dtype)


def check_graph(schema: tfgnn.GraphSchema, data_dir: str, seed_node_set: Optional[str],
                seeds: Mapping[str, str], who: str,
                keep: Optional[Mapping[str, Collection[str]]] = None
                ) -> tuple[dict[str, NodeTable], dict[str, EdgeTable], dict[str, int]]:
  """Checks every table and seed table before a Beam pipeline reads them.

  Args:
    schema: The graph schema (tables in ``metadata.filename``).
    data_dir: The folder table names are relative to.
    seed_node_set: The node set of the seeds (None: no seeds).
    seeds: Split name -> seed table.
    who: The component named in errors.
    keep: Set name -> the features kept (none else: they are checked, then dropped).

  Returns:
    The node and edge tables (ids, edge ends and the features kept) and the
    seeds per split.

  Raises:
    GraphInputError: naming the table, line or record, column and id.
  """
  nodes, edges = read_graph_tables(schema, data_dir, who, keep_features=keep or False)
  counts = {split: len(read_seeds(data_dir, filename, nodes[seed_node_set], seed_node_set,
                                  split, who))
            for split, filename in seeds.items()}
  return nodes, edges, counts
