"""A graph cut into blocks: a chunk of one node set's nodes with every edge incident to them.

Layer-wise inference over the whole graph (as PyG's and DGL's layer-wise
``inference`` and GraphStorm do) updates the nodes of one chunk at a time: a
message-passing layer's new state of a node reads its own state, its incident
edges and the states at their other ends, all of which a :class:`Block` holds,
so the chunk's new states equal the whole graph's while memory is bounded by
the chunk's edges. :meth:`Blocks.chunks` cuts a node set into consecutive rows
whose incident edges stay within a budget (a node with more edges is a chunk
of its own).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np


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
    else:
      self.order = np.argsort(ends, kind="stable").astype(
          np.int32 if ends.size < 2**31 else np.int64)
    self.indptr = np.zeros(num_nodes + 1, np.int64)
    np.cumsum(np.bincount(ends, minlength=num_nodes), out=self.indptr[1:])

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
    self._by = {(name, end): _Index(rows, self.sizes[node_set])
                for name, (src_set, tgt_set, src, tgt) in self._edges.items()
                for end, node_set, rows in (("source", src_set, src), ("target", tgt_set, tgt))}

  def degrees(self, node_set: str) -> np.ndarray:
    """Each node's incident edges, over every edge set that ends at ``node_set``."""
    out = np.zeros(self.sizes[node_set], np.int64)
    for name, (src_set, tgt_set, _, _) in self._edges.items():
      for end, end_set in (("source", src_set), ("target", tgt_set)):
        if end_set == node_set:
          out += np.diff(self._by[(name, end)].indptr)
    return out

  def chunks(self, node_set: str, max_edges: int) -> list[tuple[int, int]]:
    """Consecutive row ranges ``[first, stop)`` of ``node_set``, each within ``max_edges``.

    A node with more incident edges than ``max_edges`` is a range of its own.
    """
    total = np.zeros(self.sizes[node_set] + 1, np.int64)
    np.cumsum(self.degrees(node_set), out=total[1:])
    out, first, size = [], 0, self.sizes[node_set]
    while first < size:
      stop = int(np.searchsorted(total, total[first] + max_edges, side="right")) - 1
      stop = min(max(stop, first + 1), size)
      out.append((first, stop))
      first = stop
    return out

  def _incident(self, name: str, node_set: str, first: int, stop: int) -> np.ndarray:
    """Rows of the edges of ``name`` with an end in ``node_set``'s rows ``[first, stop)``."""
    src_set, tgt_set, _, tgt = self._edges[name]
    parts = []
    if tgt_set == node_set:
      parts.append(self._by[(name, "target")].edges(first, stop))
    if src_set == node_set:
      out = self._by[(name, "source")].edges(first, stop)
      if tgt_set == node_set:  # already taken by their target
        out = out[(tgt[out] < first) | (tgt[out] >= stop)]
      parts.append(out)
    return np.concatenate(parts) if parts else np.zeros([0], np.int64)

  def block(self, node_set: str, first: int, stop: int, *, with_edges: bool = True) -> Block:
    """Rows ``[first, stop)`` of ``node_set`` with their incident edges and those edges' ends.

    ``with_edges`` False: the chunk's nodes alone (for layers that read nothing
    but a node's own features).
    """
    chunk = np.arange(first, stop, dtype=np.int64)
    edge_rows = {name: (self._incident(name, node_set, first, stop) if with_edges
                        else np.zeros([0], np.int64)) for name in self._edges}
    members = {name: [chunk] if name == node_set else [] for name in self.sizes}
    for name, rows in edge_rows.items():
      src_set, tgt_set, src, tgt = self._edges[name]
      members[src_set].append(src[rows])
      members[tgt_set].append(tgt[rows])
    nodes = {name: np.unique(np.concatenate(parts)) if parts else np.zeros([0], np.int64)
             for name, parts in members.items()}
    edges = {}
    for name, rows in edge_rows.items():
      src_set, tgt_set, src, tgt = self._edges[name]
      edges[name] = (rows, np.searchsorted(nodes[src_set], src[rows]),
                     np.searchsorted(nodes[tgt_set], tgt[rows]))
    return Block(nodes=nodes, edges=edges, rows=np.searchsorted(nodes[node_set], chunk))
