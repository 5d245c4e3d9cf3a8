"""The in-memory engine's store: a graph's tables held once in memory, ids -> indices, CSR.

The tables are read and checked by the graph core's one reader
(:mod:`gnn_trainer_component.graph.tables`, the same verdict GraphSampler and
LinkSampler give). Every feature the graph schema declares becomes one numpy
array (``[num_items, *shape]``); node ids become contiguous row indices (table
order); each edge set gets a CSR adjacency by source node. Memory is about the
tables' size: one copy of each feature, however many subgraphs are sampled
from it. This is the place a memory-mapped or remote store would plug in.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn.data import unigraph

from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph import tables
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.graph.errors import GraphTooLargeError

#: Peak memory while loading, per byte of table on disk, by format, with a 2x
#: margin: measured 1.30 GB peak (0.6 GB before loading) for the 177 MB of CSV
#: tables of the 10M-edge graph, read a chunk at a time (benchmarks/README.md,
#: "In-memory graph"): node ids become Python bytes, edge ids only a chunk at a
#: time. TFRecord features parse to about their size.
LOAD_PEAK_PER_TABLE_BYTE = {"csv": 8, "tfrecord": 4}


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
  """One edge set in CSR order by source.

  The out-edges of node ``u`` are ``indptr[u]:indptr[u + 1]``.
  """
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
    nodes = self.node_sets[node_set]
    return tables.lookup(nodes.ids, ids, what, node_set, nodes.table)


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
  node_tables, edge_tables = tables.read_graph_tables(schema, data_dir, who)
  node_sets = {name: NodeSet(ids=t.ids, features=t.features, table=t.filename)
               for name, t in node_tables.items()}
  edge_sets = {name: _csr(t, node_sets[schema.edge_sets[name].source].size)
               for name, t in edge_tables.items()}
  return InMemoryGraph(schema=sampling.output_graph_schema(schema), node_sets=node_sets,
                       edge_sets=edge_sets)


def _csr(table: tables.EdgeTable, num_sources: int) -> EdgeSet:
  """An edge table in CSR order by source (stable: table order within a source)."""
  order = np.argsort(table.source, kind="stable")
  counts = np.bincount(table.source, minlength=num_sources)
  indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
  return EdgeSet(source=table.source[order], target=table.target[order], indptr=indptr,
                 features={k: v[order] for k, v in table.features.items()},
                 table=table.filename)


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
  """Node indices of a split's seed table (:func:`tables.read_seeds`)."""
  nodes = graph.node_sets[node_set]
  return tables.read_seeds(data_dir, filename, tables.NodeTable(nodes.table, nodes.ids, {}),
                           node_set, split, who)


def log_summary(graph: InMemoryGraph) -> str:
  """One line: sizes per set and the bytes held."""
  parts = [f"{n}: {s.size} nodes" for n, s in graph.node_sets.items()]
  parts += [f"{n}: {s.size} edges" for n, s in graph.edge_sets.items()]
  return f"{', '.join(parts)}; {graph.nbytes / 2**20:.1f} MiB of arrays"

