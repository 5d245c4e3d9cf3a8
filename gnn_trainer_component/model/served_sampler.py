"""The sampler inside a served model: the training's sampling plan run with TensorFlow ops.

A model that serves node ids (:mod:`node_serving`) holds a snapshot of the
graph and samples each requested node's subgraph itself, as GnnTrainer's
in-memory sampler samples it (``in_memory/kernel.py``): the same plan (the graph
core's :class:`~gnn_trainer_component.graph.sampling.SamplingPlan`), the same
subgraph per seed (its nodes the distinct nodes the ops reached, the seed
first; its edges the distinct sampled (source, target) pairs, in the same
order), the same strategies:

* ``uniform``: up to ``k`` out-edges, uniformly without replacement (Floyd's
  algorithm, ``k`` steps per node whatever its degree);
* ``top_k``: the ``k`` heaviest (ties to the smallest target id);
* ``uniform_before`` / ``latest``: among the edges before the request's time
  (``as_of``, default: every edge), uniformly or the most recent (ties to the
  largest target id).

:data:`STRATEGIES` is what it runs; :func:`check_plan` refuses the others at
export, by name, through the graph core's one engine check.

The snapshot (:class:`Snapshot`: ids, features, CSR per edge set, the
strategies' edge orders) is held in variables and a ``MutableHashTable``, which
a SavedModel stores in its checkpoint, never as graph constants (a SavedModel's
graph is limited to 2 GB). Its random draws are a hash of (request seed, seed
node, node, op, step): a row's subgraph depends on its own seed and id, never on
the other rows of the request. Everything here is plain TensorFlow: a served
model loads and runs without TF-GNN.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component import process
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph.errors import GraphInputError

#: The engine, as errors name it.
ENGINE = "the served sampler (serve_by_node_id)"
#: The strategies it runs.
STRATEGIES = frozenset({sampling.UNIFORM, sampling.TOP_K, sampling.UNIFORM_BEFORE,
                        sampling.LATEST})
#: Index of a node that is not in the snapshot.
UNKNOWN = -1


@dataclasses.dataclass(frozen=True)
class TimeOrder:
  """An edge set's edges by (source, time): a node's edges before a bound are a prefix.

  Attributes:
    order: Edge positions (CSR order) sorted by (source, time), ties as the
      in-memory sampler breaks them; node ``u``'s run is ``order[indptr[u]:indptr[u + 1]]``.
    keys: ``source * (len(times) + 1) + rank of the time in times``, in ``order``
      (ascending).
    times: The distinct times, ascending.
  """
  order: np.ndarray
  keys: np.ndarray
  times: np.ndarray


@dataclasses.dataclass(frozen=True)
class Snapshot:
  """The graph a served model samples: plain arrays, indexed as the in-memory graph.

  Attributes:
    node_ids: Node set -> its ids in table order (int64, or bytes as objects).
    node_features: Node set -> feature -> values (row ``i``: node ``i``).
    indptr: Edge set -> CSR row pointers by source (``[num sources + 1]``).
    targets: Edge set -> the target of each edge, in CSR order.
    edge_features: Edge set -> feature -> values, in CSR order.
    weight_orders: ``(edge set, weight feature)`` -> edge positions with each
      run sorted by weight, heaviest first (``top_k``).
    time_orders: ``(edge set, time feature)`` -> its :class:`TimeOrder`.
  """
  node_ids: Mapping[str, np.ndarray]
  node_features: Mapping[str, Mapping[str, np.ndarray]]
  indptr: Mapping[str, np.ndarray]
  targets: Mapping[str, np.ndarray]
  edge_features: Mapping[str, Mapping[str, np.ndarray]]
  weight_orders: Mapping[tuple[str, str], np.ndarray] = dataclasses.field(default_factory=dict)
  time_orders: Mapping[tuple[str, str], TimeOrder] = dataclasses.field(default_factory=dict)

  @property
  def nbytes(self) -> int:
    """Bytes of its arrays (ids counted at their length)."""
    arrays = [a for features in (*self.node_features.values(), *self.edge_features.values())
              for a in features.values()]
    arrays += [*self.indptr.values(), *self.targets.values(), *self.weight_orders.values()]
    arrays += [a for t in self.time_orders.values() for a in (t.order, t.keys, t.times)]
    ids = sum(len(i) * 8 if i.dtype != object else sum(map(len, i)) + 8 * len(i)
              for i in self.node_ids.values())
    return int(sum(np.asarray(a).nbytes for a in arrays) + ids)


def check_plan(plan: sampling.SamplingPlan, who: str) -> None:
  """Refuses a plan the served sampler does not run (GraphInputError naming the op)."""
  sampling.check_engine(plan, ENGINE, who, runs=STRATEGIES)
  if plan.roots:
    raise GraphInputError(
        f"{who}: serve_by_node_id serves one seed node per request row; the sampling plan "
        f"has {len(plan.roots)} roots per subgraph (link prediction pairs).")
  for op in plan.ops:
    if op.time_respecting:
      raise GraphInputError(
          f"{who}: sampling op {op.name!r} (edge set {op.edge_set!r}) is time_respecting, "
          f"which {ENGINE} does not run: it bounds every hop by the request's as_of time. "
          "Drop time_respecting, or serve with GraphInferrer.")


def _variable(values: np.ndarray, name: str) -> tf.Variable:
  values = np.asarray(values)
  dtype = tf.string if values.dtype == object else None
  return tf.Variable(values, dtype=dtype, trainable=False, name=process.variable_name(name))


def _id_table(ids: np.ndarray, name: str) -> tf.lookup.experimental.MutableHashTable:
  """Id -> node index, saved in the checkpoint (not in the graph)."""
  key_dtype = tf.string if ids.dtype == object else tf.int64
  table = tf.lookup.experimental.MutableHashTable(key_dtype, tf.int64, UNKNOWN,
                                                  name=f"ids_{name}")
  table.insert(tf.constant(ids, dtype=key_dtype), tf.range(len(ids), dtype=tf.int64))
  return table


def _u64(x: tf.Tensor) -> tf.Tensor:
  return tf.bitcast(tf.cast(x, tf.int64), tf.uint64)


def _mix(x: tf.Tensor) -> tf.Tensor:
  """SplitMix64's finalizer: a bijection of uint64 whose output bits look random."""
  x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, tf.constant(30, tf.uint64)))
  x = x * tf.constant(0xBF58476D1CE4E5B9, tf.uint64)
  x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, tf.constant(27, tf.uint64)))
  x = x * tf.constant(0x94D049BB133111EB, tf.uint64)
  return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, tf.constant(31, tf.uint64)))


def hash_uniform(*keys: tf.Tensor) -> tf.Tensor:
  """A float64 in [0, 1) per element: a hash of the (broadcast) int keys."""
  h = tf.constant(0x9E3779B97F4A7C15, tf.uint64)
  for key in keys:
    h = _mix(tf.bitwise.bitwise_xor(h, _u64(key)) + tf.constant(0x9E3779B97F4A7C15, tf.uint64))
  return tf.cast(tf.bitwise.right_shift(h, tf.constant(11, tf.uint64)), tf.float64) * 2.0**-53


def run_offsets(counts: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """``(row, offset in its run)`` of each item of runs of ``counts`` items (int64)."""
  rows = tf.repeat(tf.range(tf.size(counts, out_type=tf.int64)), counts)
  offsets = tf.range(tf.reduce_sum(counts)) - tf.gather(tf.cumsum(counts, exclusive=True), rows)
  return rows, offsets


def choose_uniform(degrees: tf.Tensor, k: int, keys: tuple[tf.Tensor, ...]
                   ) -> tuple[tf.Tensor, tf.Tensor]:
  """Up to ``k`` distinct offsets in ``[0, degrees[row])`` per row, uniformly.

  Rows of degree within ``k`` take every offset; the others run Floyd's
  algorithm (``k`` steps, each drawing from ``hash_uniform(*keys, step)``, with
  ``keys`` per row).
  """
  small = tf.where(degrees <= k)[:, 0]
  rows, offsets = run_offsets(tf.gather(degrees, small))
  rows = tf.gather(small, rows)
  big = tf.where(degrees > k)[:, 0]
  d = tf.gather(degrees, big)
  big_keys = tuple(tf.gather(key, big) for key in keys)
  columns = tf.range(k, dtype=tf.int64)[tf.newaxis, :]

  def step(j, chosen):
    top = d - k + j
    u = hash_uniform(*big_keys, tf.fill(tf.shape(d), j))
    pick = tf.minimum(tf.cast(u * tf.cast(top + 1, tf.float64), tf.int64), top)
    taken = tf.reduce_any(tf.equal(chosen, pick[:, tf.newaxis]), axis=1)
    value = tf.where(taken, top, pick)
    updated = tf.where(tf.equal(columns, j), value[:, tf.newaxis], chosen)
    updated.set_shape(chosen.shape)
    return j + 1, updated

  _, chosen = tf.while_loop(
      lambda j, _: tf.logical_and(j < k, tf.size(big) > 0), step,
      (tf.constant(0, tf.int64), tf.fill(tf.stack([tf.size(big), k]), tf.constant(-1, tf.int64))))
  return (tf.concat([rows, tf.repeat(big, k)], 0),
          tf.concat([offsets, tf.reshape(chosen, [-1])], 0))


@dataclasses.dataclass(frozen=True)
class NewNodes:
  """Nodes a request adds to a plan's seed node set: new node ``i`` is node ``N + i``.

  ``N`` is the node set's size in the snapshot. A new node's out-edges are the
  request's, to nodes of the snapshot; no edge of the snapshot reaches it.

  Attributes:
    count: How many (int64 scalar).
    edges: Edge set -> ``(indptr [count + 1], target node indices)``: each new
      node's out-edges (edge sets without features only).
  """
  count: tf.Tensor
  edges: Mapping[str, tuple[tf.Tensor, tf.Tensor]]


@dataclasses.dataclass(frozen=True)
class Sampled:
  """One subgraph per request row, as the in-memory kernel's ``Subgraphs`` (tensors).

  Attributes:
    nodes: Node set -> (sizes [B], node indices in the snapshot).
    edges: Edge set -> (sizes [B], source and target indices local to their
      subgraph's node set, edge positions in CSR order).
  """
  nodes: Mapping[str, tuple[tf.Tensor, tf.Tensor]]
  edges: Mapping[str, tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]]


def _vectors(tensors: tuple[tf.Tensor, ...]) -> tuple[tf.Tensor, ...]:
  """``tensors``, each with the static shape ``[None]`` (TF-GNN's pieces check the rank)."""
  for t in tensors:
    t.set_shape([None])
  return tensors


def _largest(sizes: tf.Tensor) -> tf.Tensor:
  return tf.reduce_max(tf.concat([sizes, tf.zeros([1], sizes.dtype)], 0))


class _NodeIndex:
  """The distinct nodes of one node set per subgraph, the root first (the kernel's order)."""

  def __init__(self, num_nodes: int, num_graphs: tf.Tensor, groups: tf.Tensor,
               nodes: tf.Tensor, roots: Optional[tf.Tensor]):
    self._width = 0 if roots is None else 1
    self._stride = num_nodes + self._width
    self._roots = roots
    keys = tf.sort(self._keys(groups, nodes))
    self.keys, _ = tf.unique(keys)
    self.groups = self.keys // self._stride
    self.sizes = tf.math.unsorted_segment_sum(tf.ones_like(self.groups), self.groups,
                                              num_graphs)
    self._offsets = tf.cumsum(self.sizes, exclusive=True)

  def _keys(self, groups: tf.Tensor, nodes: tf.Tensor) -> tf.Tensor:
    local = nodes + self._width
    if self._roots is not None:
      local = tf.where(tf.equal(nodes, tf.gather(self._roots, groups)), tf.zeros_like(local),
                       local)
    return groups * self._stride + local

  def global_nodes(self) -> tf.Tensor:
    local = self.keys % self._stride
    if self._roots is None:
      return local
    return tf.where(tf.equal(local, 0), tf.gather(self._roots, self.groups), local - 1)

  def local(self, groups: tf.Tensor, nodes: tf.Tensor) -> tf.Tensor:
    return (tf.searchsorted(self.keys, self._keys(groups, nodes), out_type=tf.int64)
            - tf.gather(self._offsets, groups))


class ServedSampler(tf.Module):
  """A :class:`Snapshot` in variables, and the plans that sample it (:meth:`sample`).

  Args:
    snapshot: The graph.
    plans: The training's sampling plans by name (each checked by :func:`check_plan`):
      one for a node model, one per end of a pair for a link model.
    schema: The graph schema: each edge set's two node sets (sets the
      snapshot does not hold, such as the readout's, are not sampled).
  """

  def __init__(self, snapshot: Snapshot, plans: Mapping[str, sampling.SamplingPlan],
               schema: tfgnn.GraphSchema):
    super().__init__(name="served_sampler")
    self._plans = dict(plans)
    self._ends = {name: (schema.edge_sets[name].source, schema.edge_sets[name].target)
                  for name in snapshot.indptr}
    self._num_nodes = {name: len(ids) for name, ids in snapshot.node_ids.items()}
    with tf.init_scope(), tf.device("/cpu:0"):
      self.ids = {name: _id_table(np.asarray(ids), name)
                  for name, ids in snapshot.node_ids.items()}
      self.node_features = {
          name: {f: _variable(v, f"nodes_{name}_{f}") for f, v in features.items()}
          for name, features in snapshot.node_features.items()}
      self.edge_features = {
          name: {f: _variable(v, f"edges_{name}_{f}") for f, v in features.items()}
          for name, features in snapshot.edge_features.items()}
      self.indptr = {name: _variable(np.asarray(v, np.int64), f"indptr_{name}")
                     for name, v in snapshot.indptr.items()}
      self.targets = {name: _variable(np.asarray(v, np.int64), f"targets_{name}")
                      for name, v in snapshot.targets.items()}
      self.by_weight = {self._key(*key): _variable(np.asarray(v, np.int64), f"top_{key[0]}")
                        for key, v in snapshot.weight_orders.items()}
      self.by_time = {
          self._key(*key): {"order": _variable(np.asarray(t.order, np.int64), "order"),
                            "keys": _variable(np.asarray(t.keys, np.int64), "keys"),
                            "times": _variable(np.asarray(t.times, np.float64), "times")}
          for key, t in snapshot.time_orders.items()}

  @staticmethod
  def _key(edge_set: str, feature: str) -> str:
    return f"{edge_set}:{feature}"

  def lookup(self, node_set: str, ids: tf.Tensor) -> tf.Tensor:
    """Node indices of ``ids`` in ``node_set`` (:data:`UNKNOWN` where absent)."""
    index = self.ids[node_set].lookup(ids)
    index.set_shape(ids.shape)  # the table's lookup loses it
    return index

  def _choose(self, index: int, op: sampling.SamplingOp, nodes: tf.Tensor, start: tf.Tensor,
              degrees: tf.Tensor, bounds: tf.Tensor, keys: tuple[tf.Tensor, ...]):
    """``(rows, edge positions)``: the op's strategy over the candidates' CSR runs."""
    salt = tf.fill(tf.shape(nodes), tf.constant(index, tf.int64))
    if op.strategy == sampling.UNIFORM:
      rows, offsets = choose_uniform(degrees, op.size, keys + (nodes, salt))
      return rows, tf.gather(start, rows) + offsets
    if op.strategy == sampling.TOP_K:
      rows, offsets = run_offsets(tf.minimum(degrees, op.size))
      return rows, tf.gather(self.by_weight[self._key(op.edge_set, op.weight)],
                             tf.gather(start, rows) + offsets)
    by_time = self.by_time[self._key(op.edge_set, op.time)]
    side = "right" if op.time_inclusive else "left"
    rank = tf.searchsorted(by_time["times"], bounds, side=side, out_type=tf.int64)
    stride = tf.size(by_time["times"], out_type=tf.int64) + 1
    count = tf.searchsorted(by_time["keys"], nodes * stride + rank, out_type=tf.int64) - start
    if op.strategy == sampling.UNIFORM_BEFORE:
      rows, offsets = choose_uniform(count, op.size, keys + (nodes, salt))
    else:
      take = tf.minimum(count, op.size)
      rows, offsets = run_offsets(take)
      offsets += tf.gather(count - take, rows)
    return rows, tf.gather(by_time["order"], tf.gather(start, rows) + offsets)

  def num_nodes(self, node_set: str) -> int:
    """The node set's size in the snapshot."""
    return self._num_nodes[node_set]

  def _known(self, index: int, op: sampling.SamplingOp, nodes: tf.Tensor,
             bounds: tf.Tensor, keys: tuple[tf.Tensor, ...]) -> tuple[tf.Tensor, ...]:
    """``(rows, edge positions, targets)`` the op samples around nodes of the snapshot."""
    indptr = self.indptr[op.edge_set]
    start = tf.gather(indptr, nodes)
    rows, positions = self._choose(index, op, nodes, start,
                                   tf.gather(indptr, nodes + 1) - start, bounds, keys)
    return rows, positions, tf.gather(self.targets[op.edge_set], positions)

  def _expand(self, index: int, op: sampling.SamplingOp, nodes: tf.Tensor, bounds: tf.Tensor,
              keys: tuple[tf.Tensor, ...], new: Optional[NewNodes]) -> tuple[tf.Tensor, ...]:
    """:meth:`_known`, and a new node's own out-edges: up to the fan-out, uniformly.

    A new node's edge ``j`` (of the request's) has position ``E + j``, ``E`` the
    snapshot's edges of the set.
    """
    if new is None:
      return self._known(index, op, nodes, bounds, keys)
    size = self._num_nodes[op.source]
    old, fresh = tf.where(nodes < size)[:, 0], tf.where(nodes >= size)[:, 0]
    rows, positions, targets = self._known(index, op, tf.gather(nodes, old),
                                           tf.gather(bounds, old),
                                           tuple(tf.gather(k, old) for k in keys))
    rows = tf.gather(old, rows)
    if op.edge_set not in new.edges:
      return rows, positions, targets
    indptr, new_targets = new.edges[op.edge_set]
    local = tf.gather(nodes, fresh) - size
    start = tf.gather(indptr, local)
    new_rows, offsets = choose_uniform(
        tf.gather(indptr, local + 1) - start, op.size,
        tuple(tf.gather(k, fresh) for k in keys) + (
            tf.gather(nodes, fresh), tf.fill(tf.shape(fresh), tf.constant(index, tf.int64))))
    edge = tf.gather(start, new_rows) + offsets
    return (tf.concat([rows, tf.gather(fresh, new_rows)], 0),
            tf.concat([positions, tf.size(self.targets[op.edge_set], out_type=tf.int64) + edge],
                      0),
            tf.concat([targets, tf.gather(new_targets, edge)], 0))

  def sample(self, plan_name: str, roots: tf.Tensor, seeds: tf.Tensor, bounds: tf.Tensor,
             new: Optional[NewNodes] = None) -> Sampled:
    """One subgraph per row around ``roots`` (node indices of the plan's seed node set).

    Args:
      plan_name: Which of the plans samples.
      roots: int64 ``[B]``.
      seeds: int64 ``[B]``: each row's random seed.
      bounds: float64 ``[B]``: each row's time; time-aware ops sample before it.
      new: Nodes the request adds to the seed node set (roots may be among them).
    """
    plan = self._plans[plan_name]
    sizes: dict[str, Any] = dict(self._num_nodes)
    if new is not None:
      sizes[plan.seed_node_set] = sizes[plan.seed_node_set] + new.count
    num_graphs = tf.size(roots, out_type=tf.int64)
    groups = tf.range(num_graphs)
    reached = {plan.seed_op: (groups, roots)}
    sampled: dict[str, list[tuple[tf.Tensor, ...]]] = {name: [] for name in self._ends}
    for index, op in enumerate(plan.ops):
      stride = sizes[op.source]
      keys, _ = tf.unique(tf.sort(tf.concat(
          [reached[i][0] * stride + reached[i][1] for i in op.inputs], 0)))
      g, nodes = keys // stride, keys % stride
      rows, positions, targets = self._expand(
          index, op, nodes, tf.gather(bounds, g), (tf.gather(seeds, g), tf.gather(roots, g)),
          new if op.source == plan.seed_node_set else None)
      g = tf.gather(g, rows)
      sampled[op.edge_set].append((g, tf.gather(nodes, rows), targets, positions))
      reached[op.name] = (g, targets)
    return self._assemble(plan.seed_node_set, roots, num_graphs, sampled, sizes)

  def _assemble(self, seed_set: str, roots: tf.Tensor, num_graphs: tf.Tensor,
                sampled: Mapping[str, list[tuple[tf.Tensor, ...]]],
                sizes: Mapping[str, Any]) -> Sampled:
    """The distinct nodes and edges of each subgraph, as the kernel orders them."""
    empty = tf.zeros([0], tf.int64)
    ends: dict[str, list[tuple[tf.Tensor, tf.Tensor]]] = {n: [] for n in self._num_nodes}
    ends[seed_set].append((tf.range(num_graphs), roots))
    edges = {name: tuple(tf.concat([p[i] for p in parts], 0) if parts else empty
                         for i in range(4))
             for name, parts in sampled.items()}
    for name, (g, src, tgt, _) in edges.items():
      ends[self._ends[name][0]].append((g, src))
      ends[self._ends[name][1]].append((g, tgt))
    index = {name: _NodeIndex(
        sizes[name], num_graphs,
        tf.concat([g for g, _ in pairs], 0) if pairs else empty,
        tf.concat([n for _, n in pairs], 0) if pairs else empty,
        roots if name == seed_set else None) for name, pairs in ends.items()}
    out_edges = {}
    for name, (g, src, tgt, positions) in edges.items():
      source, target = index[self._ends[name][0]], index[self._ends[name][1]]
      lsrc, ltgt = source.local(g, src), target.local(g, tgt)
      width_s = _largest(source.sizes) + 1
      width_t = _largest(target.sizes) + 1
      keys = (g * width_s + lsrc) * width_t + ltgt
      order = tf.argsort(keys, stable=True)
      ordered = tf.gather(keys, order)
      first = tf.boolean_mask(order, tf.concat(
          [tf.ones([tf.minimum(tf.size(ordered), 1)], tf.bool), ordered[1:] != ordered[:-1]], 0))
      g = tf.gather(g, first)
      sizes = tf.math.unsorted_segment_sum(tf.ones_like(g), g, num_graphs)
      out_edges[name] = (sizes, tf.gather(lsrc, first), tf.gather(ltgt, first),
                         tf.gather(positions, first))
    return Sampled(
        nodes={name: _vectors((ix.sizes, ix.global_nodes())) for name, ix in index.items()},
        edges={name: _vectors(pieces) for name, pieces in out_edges.items()})
