"""A graph cut into blocks: a chunk of one node set's nodes with every edge incident to them.

Layer-wise inference over the whole graph (as PyG's and DGL's layer-wise
``inference`` and GraphStorm do) updates the nodes of one chunk at a time: a
message-passing layer's new state of a node reads its own state, its incident
edges and the states at their other ends, all of which a :class:`Block` holds,
so the chunk's new states equal the whole graph's while memory is bounded by
the chunk's edges. :meth:`Blocks.chunks` cuts a node set into consecutive rows
whose incident edges stay within a budget (a node with more edges is a chunk
of its own). A layer whose nodes pool only the edges they are the target of
(or the source) needs only those: ``ends`` says which ends of an edge attach
it to a chunk.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np

from gnn_trainer_component.graph import csr

SOURCE, TARGET = "source", "target"
#: An edge belongs to the blocks of both its ends' chunks.
BOTH = (SOURCE, TARGET)


@dataclasses.dataclass(frozen=True)
class Block:
  """Part of a graph, renumbered.

  Attributes:
    nodes: Per node set, the graph's rows in the block (sorted; local index =
      position).
    edges: Per edge set, ``(edge rows, local source, local target)``.
    rows: Positions of the chunk's nodes in ``nodes[node_set]``, in chunk order.
  """
  nodes: Mapping[str, np.ndarray]
  edges: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
  rows: np.ndarray


class _Index:
  """One end of an edge set grouped by node: ``order[indptr[u]:indptr[u + 1]]`` are u's edges."""

  def __init__(self, ends: np.ndarray, num_nodes: int):
    if ends.size and np.all(ends[:-1] <= ends[1:]):
      self.order = None  # already grouped (the store's CSR by source)
      self.indptr = csr.indptr(ends, num_nodes)
    else:
      self.indptr, order = csr.by_row(ends, num_nodes)
      self.order = order.astype(np.int32 if ends.size < 2**31 else np.int64)  # half the bytes

  def edges(self, first: int, stop: int) -> np.ndarray:
    lo, hi = self.indptr[first], self.indptr[stop]
    return np.arange(lo, hi) if self.order is None else self.order[lo:hi].astype(np.int64)


class Blocks:
  """Blocks of a graph given by its sizes and edge ends (node rows)."""

  def __init__(self, sizes: Mapping[str, int],
               edges: Mapping[str, tuple[str, str, np.ndarray, np.ndarray]]):
    """Indexes each edge set by source and by target.

    Args:
      sizes: Nodes per node set.
      edges: Per edge set, ``(source node set, target node set, source rows,
        target rows)``.
    """
    self.sizes = dict(sizes)
    self._edges = dict(edges)
    #: Each node's position in the block being built (valid for the block's nodes only).
    self._position = {name: np.zeros(size, np.int64) for name, size in self.sizes.items()}
    self._by = {}  # (edge set, end) -> _Index, built when first asked for

  def _index(self, name: str, end: str) -> _Index:
    if (name, end) not in self._by:
      src_set, tgt_set, src, tgt = self._edges[name]
      node_set, rows = (src_set, src) if end == SOURCE else (tgt_set, tgt)
      self._by[(name, end)] = _Index(rows, self.sizes[node_set])
    return self._by[(name, end)]

  def _attached(self, name: str, node_set: str, ends: Sequence[str]) -> list[str]:
    """The ends of edge set ``name`` at ``node_set`` that attach its edges to a chunk."""
    src_set, tgt_set, _, _ = self._edges[name]
    return [end for end, end_set in ((SOURCE, src_set), (TARGET, tgt_set))
            if end in ends and end_set == node_set]

  def degrees(self, node_set: str, ends: Sequence[str] = BOTH) -> np.ndarray:
    """Each node's edges attached by ``ends``, over every edge set that ends at ``node_set``."""
    out = np.zeros(self.sizes[node_set], np.int64)
    for name in self._edges:
      for end in self._attached(name, node_set, ends):
        out += np.diff(self._index(name, end).indptr)
    return out

  def chunks(self, node_set: str, max_edges: int, ends: Sequence[str] = BOTH
             ) -> list[tuple[int, int]]:
    """Consecutive row ranges ``[first, stop)`` of ``node_set``, each within ``max_edges``.

    A node with more edges (attached by ``ends``) than ``max_edges`` is a range of its own.
    """
    total = np.zeros(self.sizes[node_set] + 1, np.int64)
    np.cumsum(self.degrees(node_set, ends), out=total[1:])
    out, first, size = [], 0, self.sizes[node_set]
    while first < size:
      stop = int(np.searchsorted(total, total[first] + max_edges, side="right")) - 1
      stop = min(max(stop, first + 1), size)
      out.append((first, stop))
      first = stop
    return out

  def _incident(self, name: str, node_set: str, first: int, stop: int,
                ends: Sequence[str], scan: bool) -> np.ndarray:
    """Rows of the edges of ``name`` with an end of ``ends`` in ``node_set``'s ``[first, stop)``."""
    attached = self._attached(name, node_set, ends)
    _, _, src, tgt = self._edges[name]
    if scan:
      parts = [np.flatnonzero(((src if end == SOURCE else tgt) >= first) &
                              ((src if end == SOURCE else tgt) < stop)) for end in attached]
    else:
      parts = [self._index(name, end).edges(first, stop) for end in attached]
    if len(parts) == 2:  # an edge within the chunk: taken by its target already
      tgt = self._edges[name][3][parts[0]]
      parts[0] = parts[0][(tgt < first) | (tgt >= stop)]
    return np.concatenate(parts) if parts else np.zeros([0], np.int64)

  def block(self, node_set: str, first: int, stop: int, *, ends: Sequence[str] = BOTH,
            scan: bool = False) -> Block:
    """Rows ``[first, stop)`` of ``node_set`` with their edges and those edges' other ends.

    Args:
      node_set: The chunk's node set.
      first: Its first row.
      stop: The row after its last.
      ends: Which ends of an edge attach it to the chunk (empty: the chunk's
        nodes alone, for layers that read nothing but a node's own features).
      scan: Find the edges by scanning every edge's ends instead of indexing
        the edge set by them (one block of a few nodes: no index to sort).
    """
    edge_rows = {name: self._incident(name, node_set, first, stop, ends, scan)
                 for name in self._edges}
    # Marks instead of sorting: a chunk's neighbourhood can span much of the graph.
    marks = {name: np.zeros(size, bool) for name, size in self.sizes.items()}
    marks[node_set][first:stop] = True
    for name, rows in edge_rows.items():
      src_set, tgt_set, src, tgt = self._edges[name]
      marks[src_set][src[rows]] = True
      marks[tgt_set][tgt[rows]] = True
    nodes = {name: np.flatnonzero(mark) for name, mark in marks.items()}
    for name, rows in nodes.items():
      self._position[name][rows] = np.arange(len(rows))
    edges = {}
    for name, rows in edge_rows.items():
      src_set, tgt_set, src, tgt = self._edges[name]
      edges[name] = (rows, self._position[src_set][src[rows]],
                     self._position[tgt_set][tgt[rows]])
    return Block(nodes=nodes, edges=edges, rows=self._position[node_set][first:stop].copy())
