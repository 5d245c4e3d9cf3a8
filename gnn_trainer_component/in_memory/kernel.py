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
keys, deduplicated with ``np.unique``. Edges are chosen per op by its strategy
(:data:`choosers.CHOOSERS`, the seam a new strategy plugs into). A time-aware
op's bound is the seed's time (``times``, one per subgraph), or with
``time_respecting`` the time of the edge that reached the node (a node reached
by several such edges keeps the latest). :func:`leaks` checks sampled subgraphs
for edges later than their seed's time; :func:`check_plan` refuses a plan with
a strategy the kernel does not run, or a time-aware plan where the caller has
no seed times.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, NamedTuple, Optional, Sequence

import numpy as np

from gnn_trainer_component.graph import choice
from gnn_trainer_component.graph import csr
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph import errors
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.in_memory import choosers
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


#: The engine, as errors name it.
ENGINE = "the in-memory sampler"
#: The strategies it runs.
STRATEGIES = frozenset(choosers.CHOOSERS)


def check_plan(plan: sampling.SamplingPlan, who: str, *, seed_times: bool = False,
               how: str = "a 'time' column in the seed tables") -> None:
  """Refuses a plan the in-memory kernel cannot run for this caller (GraphInputError).

  ``seed_times``: the caller gives each subgraph its seed's time; without it a
  time-aware op is refused, naming it and ``how`` the caller takes times.
  """
  sampling.check_engine(plan, ENGINE, who, runs=choosers.CHOOSERS)
  sampling.check_seed_times(plan, who, seed_times=seed_times, how=how)


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

  def own_edges(self, edge_set: str, src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    """Which edges ``(src[i], tgt[i])`` of ``edge_set`` are the own edge of any pair."""
    u, v = self.pairs[:, 0], self.pairs[:, 1]
    size = int(max(src.max(initial=0), tgt.max(initial=0), self.pairs.max(initial=0))) + 1
    wanted = []
    if edge_set == self.edge_set:
      wanted.append(u * size + v)
    if edge_set == self.reverse_edge_set or (edge_set == self.edge_set and self.undirected):
      wanted.append(v * size + u)
    if not wanted:
      return np.zeros(len(src), bool)
    return np.isin(src.astype(np.int64) * size + tgt, np.concatenate(wanted))


class _Reached(NamedTuple):
  """The (subgraph, node) pairs an op reached, their bounds and where they are among the ends."""
  groups: np.ndarray
  nodes: np.ndarray
  bounds: np.ndarray
  at: np.ndarray  # each pair's number in its node set's :class:`_Ends`


class _Ends:
  """Each node set's (subgraph, node) pairs in the order they were reached, numbered.

  The roots, then each op's targets: every node of a subgraph is among them
  (an edge's source was reached before it was expanded), so a subgraph's
  nodes are their distinct pairs, and an edge's ends are found by number.
  """

  def __init__(self, node_sets):
    self.parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {n: [] for n in node_sets}
    self._count = dict.fromkeys(node_sets, 0)

  def add(self, node_set: str, groups: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Appends the pairs; their numbers."""
    start = self._count[node_set]
    self.parts[node_set].append((groups, nodes))
    self._count[node_set] = start + len(nodes)
    return np.arange(start, start + len(nodes), dtype=np.int64)


def _expand(inputs: Sequence[_Reached], time_respecting: bool, num_nodes: int
            ) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray], np.ndarray]:
  """The distinct (subgraph, node) pairs the inputs reached, and the number of one of each.

  With ``time_respecting``, each pair keeps the latest of its bounds.
  """
  groups, nodes, at = (np.concatenate([getattr(r, f) for r in inputs])
                       for f in ("groups", "nodes", "at"))
  key, first, *inverse = np.unique(groups * num_nodes + nodes, return_index=True,
                                   return_inverse=time_respecting)
  latest = None
  if time_respecting:
    latest = np.full(len(key), -np.inf)
    np.maximum.at(latest, inverse[0].reshape(-1), np.concatenate([r.bounds for r in inputs]))
  return key // num_nodes, key % num_nodes, latest, at[first]


def sample(graph: store_lib.InMemoryGraph, plan: sampling.SamplingPlan, seeds: np.ndarray,
           rng: np.random.Generator, exclude: Optional[Exclusion] = None,
           times: Optional[np.ndarray] = None) -> Subgraphs:
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
    times: ``[B]`` each subgraph's seed time: the bound of time-aware ops
      (required by them).
  """
  choosers.prepare(graph, plan)  # built once, by the first call
  seeds = np.asarray(seeds, dtype=np.int64)
  roots = seeds.reshape(len(seeds), -1)
  num_graphs, width = roots.shape
  if times is not None:
    times = np.asarray(times, dtype=np.float64).reshape(num_graphs)
  elif plan.timed:
    raise ValueError("a time-aware plan needs the seeds' times")
  graph_of_root = np.arange(num_graphs, dtype=np.int64)
  ends = _Ends(graph.node_sets)
  reached: dict[str, _Reached] = {}
  for j, (seed_op, node_set) in enumerate(plan.root_ops(width)):
    now = _Reached(graph_of_root, roots[:, j],
                   times if times is not None else np.zeros(num_graphs),
                   ends.add(node_set, graph_of_root, roots[:, j]))
    before = reached.get(seed_op)
    reached[seed_op] = now if before is None else _Reached(*map(np.concatenate,
                                                                zip(before, now, strict=True)))
  sampled: dict[str, list[tuple[np.ndarray, ...]]] = {name: [] for name in graph.edge_sets}
  for op in plan.ops:
    edge_set = graph.edge_sets[op.edge_set]
    groups, nodes, bounds, at = _expand([reached[i] for i in op.inputs], op.time_respecting,
                                        graph.node_sets[op.source].size)
    if op.time and not op.time_respecting:
      bounds = times[groups]
    start = edge_set.indptr[nodes]
    candidates = choosers.Candidates(edge_set, nodes, start, edge_set.indptr[nodes + 1] - start,
                                     bounds)
    rows, positions = choosers.CHOOSERS[op.strategy](candidates, op, rng)
    if exclude is not None and op.edge_set in exclude.edge_sets:
      rows, positions = _exclude(candidates, groups, op, rng, exclude, rows, positions)
    groups, targets = groups[rows], edge_set.target[positions]
    target_at = ends.add(op.target, groups, targets)
    sampled[op.edge_set].append((groups, at[rows], target_at, positions))
    reached[op.name] = _Reached(groups, targets, _reached_bounds(
        plan, op, edge_set, positions, rows, bounds, times, groups), target_at)
  return _assemble(graph, plan, roots, ends, sampled)


def sample_deduplicated(graph: store_lib.InMemoryGraph, plan: sampling.SamplingPlan,
                        seeds: np.ndarray, rng: np.random.Generator
                        ) -> tuple[Subgraphs, np.ndarray]:
  """A batch's subgraphs as one graph whose nodes the seeds share, as DGL's blocks do.

  A node is kept once per op that reached it (its role; the roots' role is
  their seed op), whichever seeds reached it: each op draws the out-edges of
  each distinct node its inputs reached once for the whole batch, by the op's
  strategy, and every role of that node in the op's inputs gets the same
  edges. So each seed's tree of sampled edges follows :func:`sample`'s law (a
  node's draw does not depend on which seed reached it, nor on how many), but a
  node is shared where subgraphs overlap, so the batch holds fewer nodes and
  edges. A node that ops expand in two roles (say a seed that is also another
  seed's neighbour) is two nodes, so the edges drawn for it in one role do not
  reach the seeds that reached it in the other. A node reached only as a leaf
  (by ops no op expands) is the node of the same id in another role where
  there is one (as within one subgraph): messages toward the seeds read a leaf's
  input state only. Untimed plans only (a time-aware op's bound is its seed's).

  Args:
    graph: The graph.
    plan: The sampling ops (not time-aware).
    seeds: ``[B]`` or ``[B, k]`` root node indices, as :func:`sample` takes.
    rng: The random generator.

  Returns:
    One subgraph (each ``sizes`` of length 1; each node set's nodes by role
    in op order, the roots' first, then by node index) and ``[B, k]``: each
    root's index in its node set.
  """
  if plan.timed:
    raise ValueError("deduplicated batches need a plan without time-aware ops")
  choosers.prepare(graph, plan)
  roots = np.asarray(seeds, dtype=np.int64).reshape(len(seeds), -1)
  ends, roles = _Ends(graph.node_sets), {}
  reached: dict[str, list[_Reached]] = {}
  root_at = np.zeros(roots.shape, np.int64)
  for j, (seed_op, node_set) in enumerate(plan.root_ops(roots.shape[1])):
    role = np.full(len(roots), roles.setdefault(seed_op, len(roles)), np.int64)
    root_at[:, j] = ends.add(node_set, role, roots[:, j])
    reached.setdefault(seed_op, []).append(_Reached(role, roots[:, j], None, root_at[:, j]))
  sampled: dict[str, list[tuple[np.ndarray, ...]]] = {name: [] for name in graph.edge_sets}
  for op in plan.ops:
    edge_set = graph.edge_sets[op.edge_set]
    groups, nodes, _, at = _expand([r for i in op.inputs for r in reached[i]], False,
                                   graph.node_sets[op.source].size)
    distinct, pairs = _shared_sources(groups, nodes, at)
    start = edge_set.indptr[distinct]
    rows, positions = choosers.CHOOSERS[op.strategy](
        choosers.Candidates(edge_set, distinct, start, edge_set.indptr[distinct + 1] - start),
        op, rng)
    targets = edge_set.target[positions]
    role = np.full(len(targets), roles.setdefault(op.name, len(roles)), np.int64)
    target_at = ends.add(op.target, role, targets)
    # Each chosen edge, once for every role of its source node among the inputs.
    indptr, numbers = pairs
    if indptr is None:
      edge, source_at = np.arange(len(rows)), numbers[rows]
    else:
      edge, offset = csr.run_offsets(np.diff(indptr)[rows])
      source_at = numbers[indptr[rows][edge] + offset]
    sampled[op.edge_set].append((source_at, target_at[edge], positions[edge]))
    reached.setdefault(op.name, []).append(_Reached(role, targets, None, target_at))
  expanded = {roles[i] for op in plan.ops for i in op.inputs}
  return _assemble_one(graph, ends, sampled, root_at, plan.root_ops(roots.shape[1]),
                       expanded=np.isin(np.arange(len(roles)), list(expanded)))


def _shared_sources(groups: np.ndarray, nodes: np.ndarray, at: np.ndarray
                    ) -> tuple[np.ndarray, tuple[Optional[np.ndarray], np.ndarray]]:
  """The distinct nodes among :func:`_expand`'s distinct (role, node) pairs, and their pairs.

  Each node is drawn once. Returns the nodes and ``(indptr, numbers)``: node
  ``i``'s pairs are those numbered ``numbers[indptr[i]:indptr[i + 1]]``; with
  one role, ``indptr`` is None and node ``i``'s one pair is ``numbers[i]``.
  """
  if groups.min(initial=0) == groups.max(initial=0):  # one role: the pairs, sorted by node
    return nodes, (None, at)
  distinct, row_of = np.unique(nodes, return_inverse=True)
  indptr, order = csr.by_row(row_of.reshape(-1), len(distinct))
  return distinct, (indptr, at[order])


def _assemble_one(graph: store_lib.InMemoryGraph, ends: _Ends,
                  sampled: Mapping[str, list[tuple[np.ndarray, ...]]], root_at: np.ndarray,
                  root_ops: Sequence[tuple[str, str]], expanded: np.ndarray
                  ) -> tuple[Subgraphs, np.ndarray]:
  """:func:`sample_deduplicated`'s one graph: distinct (role, node) pairs, distinct edges.

  ``expanded``: which roles ops expand; a pair of any other role (a leaf) takes
  the key of the first expanded role of its node, if any (else a role after all).
  """
  inverse, nodes = {}, {}
  for name, pairs in ends.parts.items():
    groups, found = _concat(pairs, 2)
    size = graph.node_sets[name].size
    keys = groups * size + found
    leaf = ~expanded[groups]
    if leaf.any():
      inner = np.unique(keys[~leaf])  # by role, then node: a node's first role first
      known, first = np.unique(inner % size, return_index=True)
      at = np.minimum(np.searchsorted(known, found[leaf]), max(len(known) - 1, 0))
      hit = known[at] == found[leaf] if len(known) else np.zeros(leaf.sum(), bool)
      keys[leaf] = np.where(hit, inner[first[at]] if len(known) else 0,
                            len(expanded) * size + found[leaf])
    keys, inverse[name] = np.unique(keys, return_inverse=True)
    inverse[name] = inverse[name].reshape(-1)
    nodes[name] = (np.array([len(keys)], np.int64), keys % size)
  edges = {}
  for name, parts in sampled.items():
    source_at, target_at, positions = _concat(parts, 3)
    schema_edge_set = graph.schema.edge_sets[name]
    source = inverse[schema_edge_set.source][source_at]
    target = inverse[schema_edge_set.target][target_at]
    width = len(nodes[schema_edge_set.target][1]) + 1
    _, first = np.unique(source * width + target, return_index=True)
    edges[name] = (np.array([len(first)], np.int64), source[first], target[first],
                   positions[first])
  positions = np.stack([inverse[node_set][root_at[:, j]]
                        for j, (_, node_set) in enumerate(root_ops)], axis=1)
  return Subgraphs(nodes=nodes, edges=edges), positions.reshape(root_at.shape)


def _exclude(c: choosers.Candidates, groups: np.ndarray, op: sampling.SamplingOp,
             rng: np.random.Generator, exclude: Exclusion, rows: np.ndarray,
             positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """The choice without the excluded edges, as if they were not in the graph.

  A row that chose ``m`` excluded edges chooses ``m`` more among its edges
  neither chosen nor excluded, by the op's rule: drawn one after another
  without replacement (``uniform``, ``weighted``, ``uniform_before``), the next
  ones so drawn are what a choice that never saw the excluded edges holds;
  ranked (``top_k``, ``latest``), the next in rank. ``uniform`` and
  ``weighted`` choose for all rows at once (:func:`choosers.keyed` over the free
  edges: a row loses its own edge with probability ``k / degree``, so the edges
  enumerated number about ``k`` per pair end); the other strategies one
  row at a time by :func:`~gnn_trainer_component.graph.choice.choose` (the
  Beam engine's rule).
  """
  target = c.edge_set.target
  keep = exclude.keep(op.edge_set, groups[rows], c.nodes[rows], target[positions])
  if keep.all():
    return rows, positions
  lost, count = np.unique(rows[~keep], return_counts=True)
  rows, positions = rows[keep], positions[keep]
  # A row that took every edge it has (its degree within the fan-out) has none to add.
  short = c.degrees[lost] - np.bincount(rows, minlength=len(c.nodes))[lost] - count > 0
  lost, count = lost[short], count[short]
  stride = len(target) + 1
  in_lost = np.isin(rows, lost)
  taken = rows[in_lost] * stride + positions[in_lost]
  # Every edge of the rows short of edges, less the chosen and the excluded ones.
  run_rows, offsets = csr.run_offsets(c.degrees[lost])
  slot_rows, free = lost[run_rows], c.start[lost][run_rows] + offsets
  ok = (exclude.keep(op.edge_set, groups[slot_rows], c.nodes[slot_rows], target[free])
        & ~np.isin(slot_rows * stride + free, taken))
  free, run_rows = free[ok], run_rows[ok]
  if op.strategy in (sampling.UNIFORM, sampling.WEIGHTED):
    more, chosen = choosers.keyed(c.edge_set, run_rows, free, count, op.weight, rng)
    return np.r_[rows, lost[more]], np.r_[positions, chosen]
  picked_rows, picked = [rows], [positions]
  ties = c.edge_set.indexes.get(("ties",))
  ends = csr.indptr(run_rows, len(lost))
  for j, (r, m) in enumerate(zip(lost, count, strict=True)):
    mine = free[ends[j]:ends[j + 1]]  # row r's free edges
    if ties is not None:  # top_k / latest: ties by target id, as everywhere
      mine = mine[np.argsort(ties[mine], kind="stable")]
    weights, times = (None if not name else np.asarray(c.edge_set.features[name][mine],
                                                         np.float64)
                      for name in (op.weight, op.time))
    chosen = mine[choice.choose(
        dataclasses.replace(op, size=int(m)), rng, len(mine), weights=weights, times=times,
        bound=None if c.bounds is None else c.bounds[r])]
    picked_rows.append(np.full(len(chosen), r))
    picked.append(chosen)
  return np.concatenate(picked_rows), np.concatenate(picked)


def _reached_bounds(plan, op, edge_set, positions, rows, bounds, times, groups) -> np.ndarray:
  """The bound a ``time_respecting`` op later puts on the nodes ``op`` reached.

  The time of the edge that reached it (time-aware ops), else its parent's
  bound (or the seed's time).
  """
  if not any(o.time_respecting for o in plan.ops):
    return np.zeros(len(positions))
  if op.time:
    return np.asarray(edge_set.features[op.time][positions], dtype=np.float64)
  if bounds is not None:
    return bounds[rows]
  return times[groups] if times is not None else np.zeros(len(positions))


def leaks(graph: store_lib.InMemoryGraph, plan: sampling.SamplingPlan, sub: Subgraphs,
          times: np.ndarray) -> list[tuple[int, str, int, float, float]]:
  """Edges later than their subgraph's seed time, in the plan's ``time_rules()`` edge sets.

  An edge at the seed's time leaks unless an op reading its edge set is
  ``time_inclusive``.

  Returns:
    ``(subgraph, edge set, edge position, edge time, seed time)`` of each leak.
  """
  rules = plan.time_rules()
  out = []
  for name, (feature, inclusive) in sorted(rules.items()):
    sizes, _, _, positions = sub.edges[name]
    groups = np.repeat(np.arange(len(sizes)), sizes)
    edge_times = np.asarray(graph.edge_sets[name].features[feature][positions], np.float64)
    seed_times = np.asarray(times, np.float64)[groups]
    bad = np.flatnonzero(~choice.before(edge_times, seed_times, inclusive))
    out += [(int(groups[i]), name, int(positions[i]), float(edge_times[i]),
             float(seed_times[i])) for i in bad]
  return out


def node_leaks(graph: store_lib.InMemoryGraph, plan: sampling.SamplingPlan, sub: Subgraphs,
               times: np.ndarray, node_time: str) -> list[tuple[int, str, int, float, float]]:
  """Nodes that appear (``node_time``) after their subgraph's seed time.

  Checked: the ends of the edges :func:`leaks` checks, in the node sets that
  have the feature ``node_time`` (a node appearing at the seed's time is known).

  Returns:
    ``(subgraph, node set, node index, node time, seed time)`` of each leak.
  """
  out = []
  for name in sorted(plan.time_rules()):
    sizes, _, _, positions = sub.edges[name]
    groups = np.repeat(np.arange(len(sizes)), sizes)
    edge_set, schema = graph.edge_sets[name], graph.schema.edge_sets[name]
    for node_set, nodes in ((schema.source, edge_set.source[positions]),
                            (schema.target, edge_set.target[positions])):
      appears = graph.node_sets[node_set].features.get(node_time) if node_time else None
      if appears is None:
        continue
      node_times = np.asarray(appears[nodes], np.float64).reshape(len(nodes), -1)[:, 0]
      seed_times = np.asarray(times, np.float64)[groups]
      bad = np.flatnonzero(~choice.before(node_times, seed_times, inclusive=True))
      out += [(int(groups[i]), node_set, int(nodes[i]), float(node_times[i]),
               float(seed_times[i])) for i in bad]
  return sorted(set(out))


def check_leaks(graph: store_lib.InMemoryGraph, plan: sampling.SamplingPlan, sub: Subgraphs,
                roots: np.ndarray, times: np.ndarray, who: str = "GnnTrainer", *,
                node_time: str = "") -> None:
  """Raises GraphInputError naming the first edge of ``sub`` after its seed's time (:func:`leaks`).

  ``roots``: each subgraph's seed node (its first root). ``node_time``: also
  the first node that appears after its seed's time (:func:`node_leaks`).
  """
  def node_id(node_set, index):
    return errors.shown_id(graph.node_sets[node_set].ids[int(index)])

  def seed_of(group):
    return node_id(plan.seed_node_set, np.asarray(roots).reshape(len(times), -1)[group, 0])

  found = leaks(graph, plan, sub, times)
  if found:
    group, name, position, edge_time, seed_time = found[0]
    edge_set, schema = graph.edge_sets[name], graph.schema.edge_sets[name]
    raise GraphInputError(
        f"{who}: time leak: the subgraph of seed {seed_of(group)!r} "
        f"(time {seed_time:g}) holds edge {node_id(schema.source, edge_set.source[position])!r}"
        f" -> {node_id(schema.target, edge_set.target[position])!r} of edge set {name!r} "
        f"(table {edge_set.table}) at time {edge_time:g}, not before the seed's; {len(found)} "
        "such edge(s) in this batch. The sampler broke its time rule: report it, with the "
        "sampling config.")
  found = node_leaks(graph, plan, sub, times, node_time)
  if found:
    group, node_set, node, node_time_value, seed_time = found[0]
    raise GraphInputError(
        f"{who}: time leak: the subgraph of seed {seed_of(group)!r} (time {seed_time:g}) "
        f"holds node {node_id(node_set, node)!r} of node set {node_set!r} (table "
        f"{graph.node_sets[node_set].table}), which appears at time {node_time_value:g} "
        f"({node_time!r}), after the seed's time; {len(found)} such node(s) in this batch. "
        "An edge before the seed's time reaches it: no edge may be earlier than its ends' "
        f"{node_time!r} (fix the tables).")


def _concat(parts: Sequence[tuple[np.ndarray, ...]], width: int) -> tuple[np.ndarray, ...]:
  if not parts:
    return tuple(np.zeros(0, dtype=np.int64) for _ in range(width))
  return tuple(np.concatenate([p[i] for p in parts]) for i in range(width))


class _NodeIndex:
  """The distinct nodes of one node set per subgraph, the roots first (in order).

  Built from the node set's :class:`_Ends`: :meth:`local` finds a pair by its number.
  """

  def __init__(self, num_nodes: int, num_graphs: int, groups: np.ndarray, nodes: np.ndarray,
               roots: Optional[np.ndarray]):
    self._width = roots.shape[1] if roots is not None else 0
    self._stride = num_nodes + self._width
    self._roots = roots
    self.keys, inverse = np.unique(self._keys(groups, nodes), return_inverse=True)
    self._inverse = inverse.reshape(-1)
    self.groups = self.keys // self._stride
    starts = csr.indptr(self.groups, num_graphs)  # the keys are sorted: by subgraph
    self.sizes, self._offsets = np.diff(starts), starts[:-1]

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

  def local(self, at: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The subgraph-local index of the pairs numbered ``at`` (of subgraphs ``groups``)."""
    return self._inverse[at] - self._offsets[groups]


def _assemble(graph: store_lib.InMemoryGraph, plan: sampling.SamplingPlan, roots: np.ndarray,
              ends: _Ends, sampled: Mapping[str, list[tuple[np.ndarray, ...]]]) -> Subgraphs:
  num_graphs, width = roots.shape
  columns: dict[str, list[int]] = {n: [] for n in graph.node_sets}
  for j, (_, node_set) in enumerate(plan.root_ops(width)):
    columns[node_set].append(j)
  index = {
      name: _NodeIndex(graph.node_sets[name].size, num_graphs, *_concat(pairs, 2),
                       roots[:, columns[name]] if columns[name] else None)
      for name, pairs in ends.parts.items()}
  nodes = {name: (ix.sizes, ix.global_nodes()) for name, ix in index.items()}
  out_edges = {}
  for name, parts in sampled.items():
    groups, source_at, target_at, positions = _concat(parts, 4)
    schema_edge_set = graph.schema.edge_sets[name]
    lsrc = index[schema_edge_set.source].local(source_at, groups)
    ltgt = index[schema_edge_set.target].local(target_at, groups)
    width_s = int(index[schema_edge_set.source].sizes.max(initial=0)) + 1
    width_t = int(index[schema_edge_set.target].sizes.max(initial=0)) + 1
    _, first = np.unique((groups * width_s + lsrc) * width_t + ltgt, return_index=True)
    sizes = np.bincount(groups[first], minlength=num_graphs).astype(np.int64)
    out_edges[name] = (sizes, lsrc[first], ltgt[first], positions[first])
  return Subgraphs(nodes=nodes, edges=out_edges)
