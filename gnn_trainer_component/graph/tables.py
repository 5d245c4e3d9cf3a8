"""A graph's unigraph tables: one reader and one set of checks for every engine.

A node or edge set's table is named in its ``metadata.filename`` (formats and
files: :mod:`~gnn_trainer_component.graph.table_formats`, Parquet:
:mod:`~gnn_trainer_component.graph.parquet_format`). Every component and engine
reads tables through :func:`read_node_table`, :func:`read_edge_table` and
:func:`read_seeds` (GraphSampler, LinkSampler and GraphInferrer's Beam engine
through :func:`check_graph`, which keeps no features), so the same table gets
the same verdict everywhere. A table is read a chunk at a time
(:func:`iter_chunks`); each error names the table file, the line (CSV), record
(TFRecord) or row (Parquet; 1-based, the header not counted), the column and
the id:

* a malformed row, a missing column, a bad feature value (the format readers);
* an empty id, a duplicate node id, an edge end that is not in its node set;
* a seed table that is empty, repeats an id or names an unknown node.

A node table keeps its ids as int64 or bytes
(:mod:`~gnn_trainer_component.graph.ids`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Collection, Iterator, Mapping, Optional, Sequence, Union

import numpy as np
import pandas as pd
import tensorflow_gnn as tfgnn

from gnn_trainer_component import graph_schema
from gnn_trainer_component.graph import csr
from gnn_trainer_component.graph import ids as graph_ids
from gnn_trainer_component.graph import parquet_format
from gnn_trainer_component.graph import table_formats
from gnn_trainer_component.graph.errors import format_ids
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.graph.errors import GraphTooLargeError
from gnn_trainer_component.graph.errors import too_large_hint


def iter_chunks(data_dir: str, filename: str, key_columns: Sequence[str],
                features: table_formats.FeatureSpec, who: str
                ) -> Iterator[table_formats.Chunk]:
  """The checked chunks of a table, file by file; no key (id) is empty.

  Raises:
    GraphInputError: naming the file, line or record, column and id.
  """
  read = {"csv": table_formats.csv_chunks, "tfrecord": table_formats.tfrecord_chunks,
          "parquet": parquet_format.parquet_chunks}[table_formats.table_format(filename, who)]
  for path in table_formats.resolve_table(data_dir, filename, who):
    for chunk in read(path, key_columns, features, who):
      for column, keys in zip(key_columns, chunk.keys, strict=True):
        if keys.dtype != object:  # integers: never empty
          continue
        empty = np.flatnonzero(keys == b"")
        if len(empty):
          row = int(empty[0])
          short = (table_formats.short_row(chunk.path, chunk.first + row)
                   if path.endswith(".csv") else "")
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


def _features(parts: Mapping[str, list[np.ndarray]], spec: table_formats.FeatureSpec
              ) -> dict[str, np.ndarray]:
  return {n: _concat(parts[n], dtype, shape) for n, (shape, dtype) in spec.items() if n in parts}


def _locate(parts: Sequence[tuple[table_formats.Chunk, int]], row: int) -> str:
  """Where ``row`` (0-based over the whole table) of a table read as ``(chunk, rows)`` is."""
  for chunk, size in parts:
    if row < size:
      return chunk.where(row)
    row -= size
  raise IndexError(row)


@dataclasses.dataclass(frozen=True)
class NodeTable:
  """A node set's table: ids in table order (row i is node index i), feature arrays.

  ``ids``: int64 if the table's ids are all integers, else bytes objects
  (:class:`~gnn_trainer_component.graph.ids.IdFinder` finds ids of any kind among
  them, :func:`~gnn_trainer_component.graph.ids.id_bytes` gives them as bytes).
  """
  filename: str
  ids: pd.Index
  features: Mapping[str, np.ndarray]

  @functools.cached_property
  def finder(self) -> Union[graph_ids.IdFinder, graph_ids.FirstRowFinder]:
    """The :class:`~gnn_trainer_component.graph.ids.IdFinder` of :attr:`ids`.

    Built once, for every edge and seed table. Ids that repeat (a table read
    ``lenient``): a :class:`~gnn_trainer_component.graph.ids.FirstRowFinder`.
    """
    finder = graph_ids.IdFinder(self.ids)
    return finder if finder.unique else graph_ids.FirstRowFinder(self.ids)


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
    indptr, order = csr.by_row(self.source, num_sources)
    return EdgeTable(self.filename, self.source[order], self.target[order],
                     {k: v[order] for k, v in self.features.items()}), indptr


#: Which features a reader keeps: all (True), none (False: checked, then dropped) or those named.
Keep = Union[bool, Collection[str]]


def _kept(keep: Keep, spec: table_formats.FeatureSpec) -> frozenset:
  if isinstance(keep, bool):
    return frozenset(spec) if keep else frozenset()
  return frozenset(keep)


#: The node feature filled with each node's id (:data:`graph_schema.NODE_ID_FEATURE`).
NODE_ID_FEATURE = graph_schema.NODE_ID_FEATURE


def _id_feature(index: pd.Index, spec: tuple[tuple[int, ...], np.dtype], filename: str,
                name: str, who: str) -> np.ndarray:
  """The ``#id`` feature of a node table: its ids as bytes."""
  if spec != ((), np.dtype(object)):
    raise GraphInputError(
        f"{who}: node set {name!r} (table {filename!r}) declares the feature "
        f"{NODE_ID_FEATURE!r} as {spec[1]} of shape {list(spec[0])}; it holds each node's id: "
        f"declare it as a scalar string, features {{ key: \"{NODE_ID_FEATURE}\" value "
        "{ dtype: DT_STRING } }.")
  return graph_ids.id_bytes(index)


def read_node_table(name: str, node_set, data_dir: str, who: str, *,
                    keep_features: Keep = True, lenient: bool = False) -> NodeTable:
  """Reads and checks a node set's table (``keep_features``: :data:`Keep`).

  ``lenient``: ids that repeat are kept (counted by the graph's statistics), not refused.

  Raises:
    GraphInputError: a bad row or value, an empty or duplicate id, no rows.
  """
  filename = _table_of("node", name, node_set, who)
  spec = table_formats.features_spec(node_set)
  kept = _kept(keep_features, spec)
  read = {n: s for n, s in spec.items() if n != NODE_ID_FEATURE}
  ids, where, parts = [], [], {n: [] for n in read if n in kept}
  for chunk in iter_chunks(data_dir, filename, table_formats.NODE_KEYS, read, who):
    ids.append(chunk.keys[0])
    where.append((chunk, len(chunk.keys[0])))
    for n, value in chunk.features.items():
      if n in kept:
        parts[n].append(value)
  values = graph_ids.ids_of(ids)
  index = pd.Index(values, dtype=values.dtype)
  if not len(index):
    raise GraphInputError(
        f"{who}: node table {filename!r} of node set {name!r} has no rows; every node set of "
        "the graph schema needs at least one node (drop the node set and its edge sets from "
        "graph_schema.pbtxt if the graph has none).")
  features = _features(parts, read)
  if NODE_ID_FEATURE in spec and NODE_ID_FEATURE in kept:
    features[NODE_ID_FEATURE] = _id_feature(index, spec[NODE_ID_FEATURE], filename, name, who)
  table = NodeTable(filename, index, features)
  if not lenient and not table.finder.unique:
    repeats = index.duplicated()
    first = _locate(where, int(np.flatnonzero(repeats)[0]))
    raise GraphInputError(
        f"{who}: node table {filename!r} of node set {name!r} has duplicate ids "
        f"{format_ids(graph_ids.id_bytes(index, repeats))} (first repeat: {first}).")
  return table


def read_edge_table(name: str, edge_set, data_dir: str, nodes: Mapping[str, NodeTable],
                    who: str, *, keep_features: Keep = True, lenient: bool = False
                    ) -> EdgeTable:
  """Reads and checks an edge set's table: every end must be in its node set.

  Args:
    name: The edge set.
    edge_set: Its GraphSchema piece.
    data_dir: The folder table names are relative to.
    nodes: Node set -> its table (:func:`read_node_table`).
    who: The component named in errors.
    keep_features: Which features are kept (:data:`Keep`); the others are
      checked, then dropped.
    lenient: An end not in its node set is kept as ``-1`` (a dangling end,
      counted by the graph's statistics), not refused.

  Raises:
    GraphInputError: a bad row or value, or an end not in its node set.
  """
  filename = _table_of("edge", name, edge_set, who)
  spec = table_formats.features_spec(edge_set)
  kept = _kept(keep_features, spec)
  ends, parts = ([], []), {n: [] for n in spec if n in kept}
  for chunk in iter_chunks(data_dir, filename, table_formats.EDGE_KEYS, spec, who):
    for role, ids, set_name, out in zip(table_formats.EDGE_KEYS, chunk.keys,
                                        (edge_set.source, edge_set.target), ends, strict=True):
      index = nodes[set_name].finder(ids)
      bad = np.flatnonzero(index < 0)
      if len(bad) and not lenient:
        raise GraphInputError(
            f"{who}: edge table {filename!r} of edge set {name!r} has {role} ids not in node "
            f"set {set_name!r}: {format_ids(graph_ids.id_bytes(ids, bad))} (first at "
            f"{chunk.where(int(bad[0]))}; {len(bad)} such edge(s) in this part of the table).")
      out.append(index)
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
                      keep_features: Union[bool, Mapping[str, Collection[str]]] = True,
                      lenient: bool = False
                      ) -> tuple[dict[str, NodeTable], dict[str, EdgeTable]]:
  """Every node and edge table of ``schema``, read and checked (node sets first).

  ``keep_features``: all, none, or set name -> the features kept (:data:`Keep`).
  ``lenient``: duplicate ids and dangling ends kept, not refused (:func:`read_node_table`,
  :func:`read_edge_table`).

  Raises:
    GraphInputError: as :func:`read_node_table` and :func:`read_edge_table`.
    GraphTooLargeError: memory ran out while reading a table (naming it).
  """
  nodes, edges = {}, {}
  for name, piece in sorted(schema.node_sets.items()):
    try:
      nodes[name] = read_node_table(name, piece, data_dir, who, lenient=lenient,
                                    keep_features=_keep_of(keep_features, name))
    except MemoryError:
      raise out_of_memory(who, f"reading node table {piece.metadata.filename!r} of node set "
                               f"{name!r}") from None
  for name, piece in sorted(schema.edge_sets.items()):
    try:
      edges[name] = read_edge_table(name, piece, data_dir, nodes, who, lenient=lenient,
                                    keep_features=_keep_of(keep_features, name))
    except MemoryError:
      raise out_of_memory(who, f"reading edge table {piece.metadata.filename!r} of edge set "
                               f"{name!r}") from None
  return nodes, edges


def read_ids(data_dir: str, filename: str, who: str) -> np.ndarray:
  """The ids of a node or seed table (checked: no row is malformed, no id empty).

  Returns:
    int64 if every id is an integer (integer Parquet columns), else bytes objects.
  """
  return graph_ids.ids_of([c.keys[0] for c in iter_chunks(data_dir, filename,
                                                          table_formats.NODE_KEYS, {}, who)])


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
  index = pd.Index(ids, dtype=ids.dtype)
  if not index.is_unique:
    raise GraphInputError(
        f"{what} has duplicate ids {format_ids(graph_ids.id_bytes(index, index.duplicated()))}.")
  return graph_ids.lookup(nodes.finder, ids, what, node_set, nodes.filename)


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
    chunks = list(iter_chunks(data_dir, filename, table_formats.NODE_KEYS,
                              {SEED_TIME: ((), dtype)}, who))
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
    GraphInputError: naming the table, line or record, column and id; a
      Parquet table (:func:`refuse_parquet_on_beam`).
  """
  refuse_parquet_on_beam(schema, seeds, who)
  nodes, edges = read_graph_tables(schema, data_dir, who, keep_features=keep or False)
  counts = {split: len(read_seeds(data_dir, filename, nodes[seed_node_set], seed_node_set,
                                  split, who))
            for split, filename in seeds.items()}
  return nodes, edges, counts


#: What to do instead of a Beam engine that cannot read Parquet, by component.
_PARQUET_HINTS = {
    "GraphSampler": "or let GnnTrainer sample the graph in memory, which reads Parquet: "
                    "GnnTrainer(graph_schema=..., seeds=..., sampling_config=...) without "
                    "GraphSampler",
    "LinkSampler": "or let GnnTrainer sample the links in memory, which reads Parquet: "
                   "GnnTrainer(graph_schema=..., link_config=...) without LinkSampler",
    "GraphInferrer": "or use GraphInferrer's in-memory engine, which reads Parquet: "
                     "inference_config={'engine': 'in_memory'}",
}


def refuse_parquet_on_beam(schema: tfgnn.GraphSchema, seeds: Mapping[str, str],
                           who: str) -> None:
  """Refuses Parquet tables before a Beam engine: TF-GNN's Beam reader reads CSV and TFRecord.

  GraphSampler, LinkSampler and GraphInferrer's Beam engine read the tables in
  Beam with ``tensorflow_gnn.data.unigraph`` (``read_graph``, ``read_node_set``),
  whose ``ReadTable`` reads CSV and TFRecord only.

  Raises:
    GraphInputError: naming the first Parquet table (node set, edge set or split).
  """
  named = [(f"{kind} set {name!r}", piece.metadata.filename)
           for kind, name, piece in [("node", n, p) for n, p in sorted(schema.node_sets.items())]
           + [("edge", n, p) for n, p in sorted(schema.edge_sets.items())]
           if piece.metadata.HasField("filename")]
  named += [(f"split {split!r}", filename) for split, filename in sorted(seeds.items())]
  for what, filename in named:
    if table_formats.table_format(filename, who) == "parquet":
      hint = _PARQUET_HINTS.get(who, "or use the in-memory engine, which reads Parquet")
      raise GraphInputError(
          f"{who}: the table {filename!r} of {what} is Parquet, which {who}'s Beam engine "
          "does not read (it reads the tables with TF-GNN's Beam reader, CSV and TFRecord "
          f"only). Write the table as CSV or TFRecord for {who}, {hint}.")
