"""The in-memory engine's kernel: a sampling plan run over the store, a batch of seeds at a time.

The plan is the graph core's (:class:`gnn_trainer_component.graph.sampling.SamplingPlan`);
:func:`sample` runs it over an :class:`~gnn_trainer_component.in_memory.store.InMemoryGraph`.
The semantics are GraphSampler's (TF-GNN's sampler, ``SamplingSpec``): the
seed op seeds one rooted subgraph per seed node; each sampling op, in spec
order, takes the nodes its input ops reached (per subgraph), and samples for
each of them up to ``sample_size`` of its out-edges in the op's edge set,
uniformly without replacement (all of them when the degree is within the
fan-out). A subgraph's nodes are the distinct nodes its ops reached (the seed
is node 0 of its node set), its edges the distinct (source, target) pairs
sampled, as TF-GNN's ``build_graph_tensor`` removes parallel edges. A node
reached twice by one op's inputs is expanded once.

Everything is numpy over flat arrays: ``(subgraph, node)`` pairs are int64
keys, deduplicated with ``np.unique``; uniform sampling without replacement is
Floyd's algorithm run for all high-degree nodes at once (``k`` steps of
``O(k)`` vector compares, ``k`` the fan-out). Edges are chosen per op by its
strategy (:data:`CHOOSERS`: the seam a weighted or time-aware strategy plugs
into); :func:`check_plan` refuses a plan with a strategy the kernel does not run.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence

import numpy as np

from gnn_trainer_component.graph import sampling
from gnn_trainer_component.in_memory import store as store_lib


@dataclasses.dataclass(frozen=True)
class Subgraphs:
  """A batch of sampled subgraphs as flat arrays.

  Subgraph ``b``'s items are the ``sizes[b]`` next ones.

  Attributes:
    nodes: Node set -> (sizes [B], node indices in the graph).
    edges: Edge set -> (sizes [B], source and target indices local to their
      subgraph's node set, edge positions in the graph's CSR order).
  """
  nodes: Mapping[str, tuple[np.ndarray, np.ndarray]]
  edges: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


def choose_edges(rng: np.random.Generator, degrees: np.ndarray, k: int
                 ) -> tuple[np.ndarray, np.ndarray]:
  """Up to ``k`` distinct out-edge offsets per row, uniformly without replacement.

  Args:
    rng: The random generator.
    degrees: Out-degree of each row's node.
    k: The fan-out.

  Returns:
    (row of each chosen edge, its offset in ``[0, degrees[row])``); rows with
    a degree within ``k`` get all their edges.
  """
  small = np.flatnonzero(degrees <= k)
  counts = degrees[small]
  small_rows = np.repeat(small, counts)
  small_offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
  big = np.flatnonzero(degrees > k)
  if not len(big):
    return small_rows, small_offsets
  d = degrees[big]
  chosen = np.empty((len(big), k), dtype=np.int64)
  for j in range(k):  # Floyd: a uniform k-subset of [0, d), k steps.
    top = d - k + j
    pick = (rng.random(len(big)) * (top + 1)).astype(np.int64)
    if j:
      pick = np.where((chosen[:, :j] == pick[:, None]).any(axis=1), top, pick)
    chosen[:, j] = pick
  return (np.concatenate([small_rows, np.repeat(big, k)]),
          np.concatenate([small_offsets, chosen.ravel()]))


#: Strategy -> how it chooses up to ``k`` out-edges per row: ``(rng, degrees, k) ->
#: (rows, offsets)``.
CHOOSERS = {sampling.UNIFORM: choose_edges}
#: The engine, as errors name it.
ENGINE = "the in-memory sampler"


def check_plan(plan: sampling.SamplingPlan, who: str) -> None:
  """Refuses a plan with a strategy the in-memory kernel does not run (GraphInputError)."""
  sampling.check_engine(plan, ENGINE, who, runs=CHOOSERS)


def _unique_pairs(groups: np.ndarray, items: np.ndarray, num_items: int
                  ) -> tuple[np.ndarray, np.ndarray]:
  key = np.unique(groups * num_items + items)
  return key // num_items, key % num_items


@dataclasses.dataclass(frozen=True)
class Exclusion:
  """Edges kept out of their own subgraph.

  Subgraph ``b`` never samples ``pairs[b]`` of ``edge_set`` (nor ``(v, u)``
  of it, if ``undirected``), nor ``(v, u)`` of ``reverse_edge_set``.
  """
  edge_set: str
  pairs: np.ndarray
  undirected: bool
  reverse_edge_set: Optional[str] = None

  @property
  def edge_sets(self) -> tuple[str, ...]:
    return (self.edge_set,) + ((self.reverse_edge_set,) if self.reverse_edge_set else ())

  def keep(self, edge_set: str, groups: np.ndarray, src: np.ndarray,
           tgt: np.ndarray) -> np.ndarray:
    u, v = self.pairs[groups, 0], self.pairs[groups, 1]
    hit = np.zeros(len(groups), bool)
    if edge_set == self.edge_set:
      hit |= (src == u) & (tgt == v)
    if edge_set == self.reverse_edge_set or (edge_set == self.edge_set and self.undirected):
      hit |= (src == v) & (tgt == u)
    return ~hit


def sample(graph: store_lib.InMemoryGraph, plan: sampling.SamplingPlan, seeds: np.ndarray,
           rng: np.random.Generator, exclude: Optional[Exclusion] = None) -> Subgraphs:
  """Samples one rooted subgraph per row of ``seeds``.

  Args:
    graph: The graph.
    plan: The sampling ops.
    seeds: Node indices: ``[B]`` (one root per subgraph) or ``[B, k]`` (k
      roots, e.g. a link's two ends), each root in the node set of its seed op
      (:meth:`~gnn_trainer_component.graph.sampling.SamplingPlan.root_ops`);
      the roots come first in their subgraph's node set, in that order.
    rng: The random generator.
    exclude: Edges a subgraph must not sample.
  """
  seeds = np.asarray(seeds, dtype=np.int64)
  roots = seeds.reshape(len(seeds), -1)
  num_graphs, width = roots.shape
  graph_of_root = np.arange(num_graphs, dtype=np.int64)
  reached: dict[str, tuple[np.ndarray, np.ndarray]] = {}
  for j, (seed_op, _) in enumerate(plan.root_ops(width)):
    groups, nodes = reached.get(seed_op, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
    reached[seed_op] = (np.r_[groups, graph_of_root], np.r_[nodes, roots[:, j]])
  sampled: dict[str, list[tuple[np.ndarray, ...]]] = {name: [] for name in graph.edge_sets}
  for op in plan.ops:
    edge_set = graph.edge_sets[op.edge_set]
    groups, nodes = _unique_pairs(
        np.concatenate([reached[i][0] for i in op.inputs]),
        np.concatenate([reached[i][1] for i in op.inputs]),
        graph.node_sets[op.source].size)
    start = edge_set.indptr[nodes]
    rows, offsets = CHOOSERS[op.strategy](rng, edge_set.indptr[nodes + 1] - start,
                                          op.size)
    positions = start[rows] + offsets
    groups, sources, targets = groups[rows], nodes[rows], edge_set.target[positions]
    if exclude is not None and op.edge_set in exclude.edge_sets:
      keep = exclude.keep(op.edge_set, groups, sources, targets)
      groups, sources, targets, positions = (
          groups[keep], sources[keep], targets[keep], positions[keep])
    sampled[op.edge_set].append((groups, sources, targets, positions))
    reached[op.name] = (groups, targets)
  return _assemble(graph, plan, roots, sampled)


def _concat(parts: Sequence[tuple[np.ndarray, ...]], width: int) -> tuple[np.ndarray, ...]:
  if not parts:
    return tuple(np.zeros(0, dtype=np.int64) for _ in range(width))
  return tuple(np.concatenate([p[i] for p in parts]) for i in range(width))


class _NodeIndex:
  """The distinct nodes of one node set per subgraph, the roots first (in order)."""

  def __init__(self, num_nodes: int, num_graphs: int, groups: np.ndarray, nodes: np.ndarray,
               roots: Optional[np.ndarray]):
    self._width = roots.shape[1] if roots is not None else 0
    self._stride = num_nodes + self._width
    self._roots = roots
    self.keys = np.unique(self._keys(groups, nodes))
    self.groups = self.keys // self._stride
    self.sizes = np.bincount(self.groups, minlength=num_graphs).astype(np.int64)
    self._offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)

  def _keys(self, groups: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    local = nodes + self._width
    for j in reversed(range(self._width)):  # root j sorts j-th in its subgraph
      local = np.where(nodes == self._roots[groups, j], j, local)
    return groups * self._stride + local

  def global_nodes(self) -> np.ndarray:
    local = self.keys % self._stride
    out = local - self._width
    for j in range(self._width):
      out = np.where(local == j, self._roots[self.groups, j], out)
    return out

  def local(self, groups: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    return np.searchsorted(self.keys, self._keys(groups, nodes)) - self._offsets[groups]


def _assemble(graph: store_lib.InMemoryGraph, plan: sampling.SamplingPlan, roots: np.ndarray,
              sampled: Mapping[str, list[tuple[np.ndarray, ...]]]) -> Subgraphs:
  num_graphs, width = roots.shape
  ends: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {n: [] for n in graph.node_sets}
  columns: dict[str, list[int]] = {n: [] for n in graph.node_sets}
  for j, (_, node_set) in enumerate(plan.root_ops(width)):
    columns[node_set].append(j)
    ends[node_set].append((np.arange(num_graphs, dtype=np.int64), roots[:, j]))
  edges = {name: _concat(parts, 4) for name, parts in sampled.items()}
  for name, (groups, src, tgt, _) in edges.items():
    schema_edge_set = graph.schema.edge_sets[name]
    ends[schema_edge_set.source].append((groups, src))
    ends[schema_edge_set.target].append((groups, tgt))
  index = {
      name: _NodeIndex(graph.node_sets[name].size, num_graphs, *_concat(pairs, 2),
                       roots[:, columns[name]] if columns[name] else None)
      for name, pairs in ends.items()}
  nodes = {name: (ix.sizes, ix.global_nodes()) for name, ix in index.items()}
  out_edges = {}
  for name, (groups, src, tgt, positions) in edges.items():
    schema_edge_set = graph.schema.edge_sets[name]
    lsrc = index[schema_edge_set.source].local(groups, src)
    ltgt = index[schema_edge_set.target].local(groups, tgt)
    width_s = int(index[schema_edge_set.source].sizes.max(initial=0)) + 1
    width_t = int(index[schema_edge_set.target].sizes.max(initial=0)) + 1
    _, first = np.unique((groups * width_s + lsrc) * width_t + ltgt, return_index=True)
    sizes = np.bincount(groups[first], minlength=num_graphs).astype(np.int64)
    out_edges[name] = (sizes, lsrc[first], ltgt[first], positions[first])
  return Subgraphs(nodes=nodes, edges=out_edges)
