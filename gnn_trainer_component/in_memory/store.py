"""The in-memory engine's store: a graph's tables held once in memory, ids -> indices, CSR.

The tables are read and checked by the graph core's one reader
(:mod:`gnn_trainer_component.graph.tables`, the same verdict GraphSampler and
LinkSampler give). Every feature the graph schema declares becomes one numpy
array (``[num_items, *shape]``); node ids become contiguous row indices (table
order); each edge set gets a CSR adjacency by source node. Memory is about the
tables' size: one copy of each feature, however many subgraphs are sampled
from it. :func:`load` is one step: the memory check, the node and edge tables,
the seed tables. This is the place a memory-mapped or remote store would plug in.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Optional

from absl import logging
import numpy as np
import pandas as pd
import pyarrow as pa
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component import process
from gnn_trainer_component.graph import ids as graph_ids
from gnn_trainer_component.graph import parquet_format
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph import table_formats
from gnn_trainer_component.graph import tables
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.graph.errors import GraphTooLargeError
from gnn_trainer_component.graph.errors import too_large_hint

#: Peak memory while loading, per byte of table on disk, by format, with a 2x
#: margin: measured 1.30 GB peak (0.6 GB before loading) for the 177 MB of CSV
#: tables of the 10M-edge graph, read a chunk at a time (benchmarks/README.md,
#: "In-memory graph"): node ids become Python bytes, edge ids only a chunk at a
#: time. TFRecord features parse to about their size. Parquet: the same graph as
#: Parquet (95 MiB of edges, compressed) peaked 4.2x its size on disk, CSV 3.4x.
#: A Parquet node table's ids are counted apart (:data:`PARQUET_ID_BYTES`).
LOAD_PEAK_PER_TABLE_BYTE = {"csv": 8, "tfrecord": 4, "parquet": 10}
#: Memory per id of a Parquet node table, beyond its share above (a compressed
#: column holds an id in a byte or two; CSV and TFRecord hold it as text, in
#: their share): an integer id is an int64 in the index and a slot of the edge
#: reader's lookup table (:class:`~gnn_trainer_component.graph.ids.IdFinder`),
#: 16 bytes; a string or binary id a Python bytes object, its pointer and hash
#: slot, 80 bytes plus its text (measured: 1M node ids of 7 characters took
#: 85 MB more than as integers; 1M integer ids and their features peaked at
#: 63 MB, 13x their 4.9 MB of Parquet).
PARQUET_ID_BYTES = {"int": 16, "bytes": 80}


@dataclasses.dataclass(frozen=True)
class NodeSet:
  """One node set: ids in table order (row i is node index i) and feature arrays.

  ``ids``: :attr:`~gnn_trainer_component.graph.tables.NodeTable.ids` (int64 or bytes).
  """
  ids: pd.Index
  features: Mapping[str, np.ndarray]
  table: str

  @property
  def size(self) -> int:
    return len(self.ids)


@dataclasses.dataclass(frozen=True)
class EdgeSet:
  """One edge set in CSR order by source.

  The out-edges of node ``u`` are ``indptr[u]:indptr[u + 1]``.
  """
  source: np.ndarray
  target: np.ndarray
  indptr: np.ndarray
  features: Mapping[str, np.ndarray]
  table: str
  #: Indexes the kernel builds once per feature it sorts by (e.g. edges by time).
  indexes: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

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

  @property
  def summary(self) -> str:
    """One line for the log: sizes per set and the bytes held."""
    parts = [f"{n}: {s.size} nodes" for n, s in self.node_sets.items()]
    parts += [f"{n}: {s.size} edges" for n, s in self.edge_sets.items()]
    return f"{', '.join(parts)}; {self.nbytes / 2**20:.1f} MiB of arrays"

  def lookup(self, node_set: str, ids: Iterable[Any], what: str) -> np.ndarray:
    """Indices of ``ids`` (bytes, str or int: an integer is its decimal text) in ``node_set``.

    Raises:
      GraphInputError: naming ``what`` and the ids missing from the node set.
    """
    nodes = self.node_sets[node_set]
    return graph_ids.lookup(nodes.ids, ids, what, node_set, nodes.table)


def load(schema: tfgnn.GraphSchema, data_dir: str, *, graph_schema: tfgnn.GraphSchema,
         seed_node_set: Optional[str] = None, seed_tables: Optional[Mapping[str, str]] = None,
         seed_time_dtype: Optional[np.dtype] = None, memory_bytes: int, who: str = "GnnTrainer"
         ) -> tuple[InMemoryGraph, dict[str, np.ndarray], dict[str, np.ndarray]]:
  """Loads and validates every node and edge table of ``schema``, and the seed tables.

  One step: the memory check (:func:`check_fits`), then the tables and seed
  tables through the graph core's reader (:mod:`~gnn_trainer_component.graph.tables`).

  Args:
    schema: A unigraph GraphSchema: each set names its table in
      ``metadata.filename``, relative to ``data_dir``.
    data_dir: The GraphSchema artifact's folder.
    graph_schema: ``schema`` without table metadata (the graph's schema:
      :attr:`InMemoryGraph.schema`).
    seed_node_set: The node set of the seeds (with ``seed_tables``).
    seed_tables: Split -> seed table (relative to ``data_dir``).
    seed_time_dtype: Read each seed's time (the seed tables' ``time`` column)
      as this dtype; None: no times.
    memory_bytes: The memory of the machine (or container).
    who: The component named in errors.

  Returns:
    The graph and, per split of ``seed_tables``, its seeds' node indices and
    (``seed_time_dtype``) their times.

  Raises:
    GraphInputError: naming the table, row and ids or feature at fault.
    GraphTooLargeError: the tables would not fit in ``memory_bytes``, or memory
      ran out while loading them.
  """
  check_fits(schema, data_dir, memory_bytes, who=who)
  if schema.context.features:
    raise GraphInputError(
        f"{who}: the graph schema declares context features {sorted(schema.context.features)}; "
        "a graph held in memory has none (sampled subgraphs get no context). Remove them "
        "or train on pre-sampled examples (GraphSampler).")
  node_tables, edge_tables = tables.read_graph_tables(schema, data_dir, who)
  seeds = {split: tables.read_seeds(data_dir, filename, node_tables[seed_node_set],
                                    seed_node_set, split, who)
           for split, filename in (seed_tables or {}).items()}
  times = ({split: tables.read_seed_times(data_dir, filename, split, seed_time_dtype, who)
            for split, filename in (seed_tables or {}).items()}
           if seed_time_dtype is not None else {})
  edge_sets = {}
  for name, table in edge_tables.items():
    try:
      csr, indptr = table.by_source(len(node_tables[schema.edge_sets[name].source].ids))
    except MemoryError:
      raise tables.out_of_memory(who, f"ordering edge set {name!r} by source") from None
    edge_sets[name] = EdgeSet(source=csr.source, target=csr.target, indptr=indptr,
                              features=csr.features, table=csr.filename)
  graph = InMemoryGraph(
      schema=graph_schema, edge_sets=edge_sets,
      node_sets={name: NodeSet(ids=t.ids, features=t.features, table=t.filename)
                 for name, t in node_tables.items()})
  logging.info("%s: graph in memory from %s (%s)", who, data_dir, graph.summary)
  return graph, seeds, times


def load_for(schema: tfgnn.GraphSchema, schema_dir: str, plan: sampling.SamplingPlan,
             seed_tables: Mapping[str, str], *, seed_times: bool, who: str
             ) -> tuple[InMemoryGraph, dict[str, np.ndarray], dict[str, np.ndarray]]:
  """The graph a request asks for: the one load of GnnTrainer, GraphInferrer and GraphEvaluator.

  :func:`load` of every table of ``schema`` and of ``seed_tables`` (seeds of
  ``plan``'s seed node set), within this machine's memory
  (:func:`gnn_trainer_component.process.memory_bytes`).

  Args:
    schema: The GraphSchema artifact's schema (tables in ``metadata.filename``).
    schema_dir: Its folder.
    plan: The checked sampling plan of the request (its seed node set and time rules).
    seed_tables: Split -> seed table (relative to ``schema_dir``); may be empty.
    seed_times: Read each seed's time (the seed tables' ``time`` column), as
      ``plan``'s time features are typed; without it, no times.
    who: The component named in errors.

  Raises:
    As :func:`load`.
  """
  return load(schema, schema_dir, graph_schema=sampling.output_graph_schema(schema),
              seed_node_set=plan.seed_node_set, seed_tables=seed_tables,
              seed_time_dtype=sampling.seed_time_dtype(schema, plan) if seed_times else None,
              memory_bytes=process.memory_bytes(), who=who)


def _tables(schema: tfgnn.GraphSchema) -> list[tuple[str, str]]:
  """``(set type, table)`` of every set with a table (``tfgnn.NODES``, ``tfgnn.EDGES``)."""
  return [(set_type, piece.metadata.filename) for set_type, _, piece in tfgnn.iter_sets(schema)
          if piece.metadata.HasField("filename")]


def _parquet_id_bytes(path: str) -> int:
  """Memory the ids of a Parquet node table file take (:data:`PARQUET_ID_BYTES`), from its footer.

  0 if the footer does not read or names no id column: the reader then names the fault.
  """
  try:
    with parquet_format.open_parquet(path) as parquet:
      metadata, schema = parquet.metadata, parquet.schema_arrow
  except (pa.ArrowException, OSError, tf.errors.OpError):
    return 0
  keys = table_formats.NODE_KEYS
  column = next((c for c in keys + tuple("#" + k for k in keys) if c in schema.names), None)
  if column is None:
    return 0
  if pa.types.is_integer(schema.field(column).type):
    return metadata.num_rows * PARQUET_ID_BYTES["int"]
  at = schema.get_field_index(column)
  text = sum(metadata.row_group(g).column(at).total_uncompressed_size
             for g in range(metadata.num_row_groups))
  return metadata.num_rows * PARQUET_ID_BYTES["bytes"] + text


def load_estimate(schema: tfgnn.GraphSchema, data_dir: str, *, who: str = "GnnTrainer"
                  ) -> tuple[int, int]:
  """(bytes of the tables on disk, estimated peak bytes while loading them).

  The peak: :data:`LOAD_PEAK_PER_TABLE_BYTE` of each table on disk, and
  :data:`PARQUET_ID_BYTES` per id of each Parquet node table.
  """
  on_disk = peak = 0
  for set_type, filename in _tables(schema):
    fmt = table_formats.table_format(filename, who)
    files = table_formats.resolve_table(data_dir, filename, who)
    size = sum(tf.io.gfile.stat(f).length for f in files)
    on_disk += size
    peak += size * LOAD_PEAK_PER_TABLE_BYTE[fmt]
    if fmt == "parquet" and set_type == tfgnn.NODES:
      peak += sum(_parquet_id_bytes(f) for f in files)
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
        f"{memory_bytes / 2**30:,.1f} GiB. {too_large_hint(who)}")
