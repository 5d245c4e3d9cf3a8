"""The Beam samplers' own engine: a sampling plan run as joins, every strategy, any runner.

GraphSampler, LinkSampler and GraphInferrer's Beam engine run on it. A subgraph is
grown from its roots one sampling op at a time: the frontier ``(node id,
visit)`` meets the node's out-edges (:func:`adjacency`), each visit's
candidates are chosen by the op's strategy (:func:`gnn_trainer_component.graph.choice.choose`,
seeded by seed, example, op and node, so a rerun gives the same examples), and
their targets become the next frontier. A node reached twice by one op's inputs
in one subgraph is expanded once (with ``time_respecting``, bounded by the
latest of its bounds), as in the in-memory engine.

Node features reach the examples one of two ways (:func:`node_features`):

* **broadcast** (node tables up to :data:`BROADCAST_MAX_BYTES` on disk): the
  examples are grouped by ids only and look their nodes' features up in a
  side input. A node's features are then held once per worker, not once per
  example that samples it: on Cora with 3 training negatives, Beam's in-memory
  DirectRunner peaked at 16.2 GiB with the join below and at 2.4 GiB with
  the side input (``benchmarks/link_sampler_memory.py``).
* **join** (larger tables): the sampled nodes meet their rows in a
  ``CoGroupByKey`` and travel with the example key to the final grouping, so
  no worker holds a whole table; the shuffle then carries each node's
  features once per example, which a distributed runner spills to disk.

Each example is then assembled from its root, nodes and edges
(:class:`Assemble`, :func:`subgraph_example`), every node and edge set of the
schema in it, a time-aware op's edges checked to be before their seed's time.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, NamedTuple, Optional, Sequence

import apache_beam as beam
import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component import graph_schema
from gnn_trainer_component.graph import choice
from gnn_trainer_component.graph import encoding
from gnn_trainer_component.graph import errors
from gnn_trainer_component.graph import links
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph import table_formats
from gnn_trainer_component.graph.errors import GraphInputError

#: Node tables up to this size on disk (all sampled node sets together) are
#: broadcast to the workers as a side input instead of joined per example.
BROADCAST_MAX_BYTES = 256 * 2**20
#: The engine, as errors name it.
ENGINE = "the Beam samplers' own engine"


class Visit(NamedTuple):
  """One subgraph's visit of a frontier node.

  Attributes:
    key: The example key.
    root: What the example grows from (passed through: the link pair, ...).
    seed_time: The seed's time (0.0 for a timeless plan).
    reached: The bound a later ``time_respecting`` op puts on the node
      (:func:`choice.reached_bound`).
  """
  key: bytes
  root: Any
  seed_time: float
  reached: float


#: ``(edge set, node, target node, root) -> bool``: an edge a subgraph must not sample.
Exclude = Callable[[str, bytes, bytes, Any], bool]


def adjacency(edges: beam.PCollection, name: str,
              keep: Optional[Callable[[tuple], bool]] = None) -> beam.PCollection:
  """``(source id, [(target id, serialized tf.Example), ...])`` per node, by target id.

  ``keep`` filters the ``(source, target, tf.Example)`` edges first. The edges travel
  serialized (bytes cross a shuffle at the cost of a copy, a proto is serialized and parsed
  again at each one) and are parsed where their features are read.
  """
  if keep is not None:
    edges = edges | f"Keep/{name}" >> beam.Filter(keep)
  return (edges
          | f"BySource/{name}" >> beam.Map(lambda e: (e[0], (e[1], e[2].SerializeToString())))
          | f"Group/{name}" >> beam.GroupByKey()
          | f"Sort/{name}" >> beam.MapTuple(
              lambda src, outs: (src, sorted(outs, key=lambda o: o[0]))))


def scalar(example: tf.train.Example, name: str, kind: str) -> float:
  """The one value of an edge's scalar number feature ``name`` (``kind``: its list)."""
  return float(getattr(example.features.feature[name], kind).value[0])


class SampleOp(beam.DoFn):
  """One sampling op at one node, for every subgraph whose frontier holds it."""

  def __init__(self, op: sampling.SamplingOp, label: str, seed: int,
               kinds: Mapping[str, str], exclude: Optional[Exclude] = None):
    """``label``: the op's name in the rng's seed; ``kinds``: feature -> list kind."""
    self._op, self._label, self._seed = op, label, seed
    self._kinds, self._exclude = dict(kinds), exclude

  def _values(self, feature: str, examples: Sequence[tf.train.Example]
              ) -> Optional[np.ndarray]:
    if not feature:
      return None
    return np.array([scalar(ex, feature, self._kinds[feature]) for ex in examples], np.float64)

  def process(self, element):
    node, grouped = element
    adjacent = list(grouped["adjacency"])
    outs = adjacent[0] if adjacent else []
    visits: dict[bytes, Visit] = {}
    for visit in grouped["frontier"]:
      seen = visits.get(visit.key)
      if seen is None or visit.reached > seen.reached:
        visits[visit.key] = visit
    op = self._op
    parsed = ([tf.train.Example.FromString(ex) for _, ex in outs] if op.weight or op.time
              else ())
    weights, times = self._values(op.weight, parsed), self._values(op.time, parsed)
    for key, visit in sorted(visits.items()):
      kept = np.arange(len(outs))
      if self._exclude is not None:
        kept = np.array([i for i, (tgt, _) in enumerate(outs)
                         if not self._exclude(op.edge_set, node, tgt, visit.root)], np.int64)
      bound = choice.hop_bound(op, visit.seed_time, visit.reached)
      picked = kept[choice.choose(
          op, links.split_rng(self._seed, key, self._label, node), len(kept),
          weights=None if weights is None else weights[kept],
          times=None if times is None else times[kept], bound=bound)].tolist()
      for i in picked:
        reached = choice.reached_bound(op, visit.seed_time, bound,
                                       times[i] if times is not None else None)
        yield outs[i][0], visit._replace(reached=reached)
      if picked:  # one element per visit, not per edge: a shuffle's cost is per element
        yield beam.pvalue.TaggedOutput("edges", (key, (op.edge_set, op.target, node,
                                                       [outs[i] for i in picked])))


def _kinds(schema: tfgnn.GraphSchema, op: sampling.SamplingOp) -> dict[str, str]:
  features = schema.edge_sets[op.edge_set].features
  return {f: graph_schema.example_kind(features[f].dtype) for f in (op.weight, op.time) if f}


class Sampled(NamedTuple):
  """What the hops reached, as ``(example key, ...)`` PCollections.

  Attributes:
    nodes: Node set -> ``(node, visit)`` PCollections of every node reached,
      the roots included.
    roots: Node set -> the roots' ``(node, visit)`` PCollections.
    edges: ``(key, (edge set, target node set, source, [(target,
      serialized tf.Example), ...]))`` PCollections: each element holds the
      edges one op drew at one node for one subgraph, whose targets are the
      nodes it reached there.
  """
  nodes: dict[str, list[beam.PCollection]]
  roots: dict[str, list[beam.PCollection]]
  edges: list[beam.PCollection]


def sample_hops(schema: tfgnn.GraphSchema, adjacent: Mapping[str, beam.PCollection],
                roots: Mapping[str, tuple[sampling.SamplingPlan, beam.PCollection]], *,
                seed: int, exclude: Optional[Exclude] = None) -> Sampled:
  """Runs each plan from its roots.

  Args:
    schema: The graph schema.
    adjacent: Edge set -> :func:`adjacency`.
    roots: Prefix of the Beam labels (and the rng's op names) -> (plan, its
      roots ``(node id, Visit)``, in the plan's seed node set).
    seed: The sampling seed.
    exclude: Edges no subgraph samples (tested in the link's edge sets).

  Returns:
    The nodes (the roots included) and the edges (:class:`Sampled`).
  """
  out = Sampled({}, {}, [])
  for prefix, (plan, frontier0) in sorted(roots.items()):
    frontiers = {plan.seed_op: frontier0}
    out.nodes.setdefault(plan.seed_node_set, []).append(frontier0)
    out.roots.setdefault(plan.seed_node_set, []).append(frontier0)
    for op in plan.ops:
      label = f"{prefix}:{op.name}" if prefix else op.name
      frontier = [frontiers[name] for name in op.inputs] | f"Inputs/{label}" >> beam.Flatten()
      sampled = ({"frontier": frontier, "adjacency": adjacent[op.edge_set]}
                 | f"Join/{label}" >> beam.CoGroupByKey()
                 | f"Sample/{label}" >> beam.ParDo(SampleOp(
                     op, label, seed, _kinds(schema, op), exclude)).with_outputs(
                         "edges", main="next"))
      frontiers[op.name] = sampled.next
      out.nodes.setdefault(op.target, []).append(sampled.next)
      out.edges.append(sampled.edges)
  return out


def _attach_features(nodes: beam.PCollection, table: beam.PCollection, name: str,
                     who: str) -> beam.PCollection:
  """``(example key, (node set, node id, tf.Example))`` for each sampled node."""

  def emit(element):
    node_id, grouped = element
    features = list(grouped["table"])
    for key in grouped["examples"]:
      if not features:
        raise missing_node(node_id, name, who)
      yield key, (name, node_id, features[0])

  return ({"examples": nodes, "table": table}
          | f"JoinFeatures/{name}" >> beam.CoGroupByKey()
          | f"AttachFeatures/{name}" >> beam.FlatMap(emit))


def missing_node(node_id: bytes, name: str, who: str) -> GraphInputError:
  return GraphInputError(
      f"{who}: node {node_id!r} of node set {name!r} was sampled but is not in its node table.")


def node_features(graph_nodes: Mapping[str, beam.PCollection], sampled: Sampled,
                  broadcast: bool, who: str) -> tuple[beam.PCollection, dict[str, Any]]:
  """``(key, (node set, node id, tf.Example or None))`` of sampled nodes, side inputs.

  ``broadcast``: the roots only, with ``None``; every node's features stay in the
  ``features`` side input, and :class:`Assemble` takes the other nodes from the edges
  that reached them. Else every sampled node, its features joined to each (node,
  example) once.
  """
  parts = []
  reached = sampled.roots if broadcast else sampled.nodes
  for name, lists in sorted(reached.items()):
    nodes = (lists | f"AllNodes/{name}" >> beam.Flatten()
             | f"NodeKeys/{name}" >> beam.MapTuple(lambda node, visit: (node, visit.key)))
    if broadcast:  # Assemble drops repeats, no shuffle needed
      parts.append(nodes | f"ByExample/{name}" >> beam.MapTuple(
          lambda node, key, name=name: (key, (name, node, None))))
    else:
      parts.append(_attach_features(nodes | f"DistinctNodes/{name}" >> beam.Distinct(),
                                    graph_nodes[name], name, who))
  side_inputs = {}
  if broadcast:
    keyed = [graph_nodes[name] | f"KeyTable/{name}" >> beam.MapTuple(
        lambda node, ex, name=name: ((name, node), ex)) for name in sorted(sampled.nodes)]
    side_inputs["features"] = beam.pvalue.AsDict(keyed | "AllTables" >> beam.Flatten())
  return parts | "FlattenNodes" >> beam.Flatten(), side_inputs


def should_broadcast(schema: tfgnn.GraphSchema, data_dir: str, node_sets: Iterable[str],
                     who: str) -> bool:
  """Whether the tables of ``node_sets`` fit in :data:`BROADCAST_MAX_BYTES` on disk."""
  total = 0
  for name in node_sets:
    filename = schema.node_sets[name].metadata.filename
    for path in table_formats.resolve_table(data_dir, filename, who):
      total += tf.io.gfile.stat(path).length
  return total <= BROADCAST_MAX_BYTES


# ----------------------------------------------------------------------------
# Example assembly.


def _features(features: Mapping[str, Any], items: Sequence[Any], what: str,
              who: str) -> dict[str, np.ndarray]:
  """Each schema feature's values over ``items`` (tf.Examples), concatenated in item order."""
  out = {}
  for name, feature_pb in features.items():
    kind = graph_schema.example_kind(feature_pb.dtype)
    width = int(np.prod([d.size for d in feature_pb.shape.dim])) if feature_pb.shape.dim else 1
    values = []
    for item_id, item in items:
      item_values = (getattr(item.features.feature[name], kind).value
                     if name in item.features.feature else ())
      if width > 0 and len(item_values) != width:
        raise GraphInputError(
            f"{who}: {what} {item_id!r}: feature {name!r} has {len(item_values)} "
            f"values, the graph schema says {width}.")
      values.extend(item_values)
    array = encoding.values_array(values, feature_pb.dtype)
    out[name] = array.reshape(len(items), -1) if items else array  # a row per item
  return out


def subgraph_example(schema: tfgnn.GraphSchema,
                     nodes: Mapping[str, Sequence[tuple[bytes, Any]]],
                     edges: Mapping[str, Iterable[tuple[bytes, bytes, Any]]], *, who: str
                     ) -> tuple[tf.train.Example, dict[str, dict[bytes, int]]]:
  """The tf.Example of one subgraph (GraphTensor encoding), and each node's index in it.

  Args:
    schema: Input graph schema (its features are written; every set of it is
      in the example, empty where nothing was sampled).
    nodes: Node set -> ``(id, tf.Example)`` of its sampled nodes, in example order.
    edges: Edge set -> ``(source id, target id, tf.Example)`` of the sampled
      edges (duplicates count once; written sorted by their ends' indices).
    who: The component named in errors.
  """
  example = tf.train.Example()
  index: dict[str, dict[bytes, int]] = {}
  for set_name in schema.node_sets:
    items = list(nodes.get(set_name, ()))
    index[set_name] = {node_id: i for i, (node_id, _) in enumerate(items)}
    if len(index[set_name]) != len(items):
      raise ValueError(f"duplicate nodes in node set {set_name!r}")
    encoding.write_nodes([example], set_name, np.array([len(items)]),
                         _features(schema.node_sets[set_name].features, items,
                                   f"node {set_name!r}", who))
  for set_name, edge_set in schema.edge_sets.items():
    unique = {}
    for src, tgt, ex in edges.get(set_name, ()):
      unique.setdefault((src, tgt), ex)
    ordered = sorted((((index[edge_set.source][s], index[edge_set.target][t]), (s, t), ex)
                      for (s, t), ex in unique.items()), key=lambda row: row[0])
    encoding.write_edges(
        [example], set_name, np.array([len(ordered)]),
        np.array([i for (i, _), _, _ in ordered], np.int64),
        np.array([j for (_, j), _, _ in ordered], np.int64),
        _features(edge_set.features, [(f"{s!r}->{t!r}", ex) for _, (s, t), ex in ordered],
                  f"edge {set_name!r}", who))
  return example, index


def ordered_nodes(ids: Iterable[bytes], first: Sequence[bytes]) -> list[bytes]:
  """Node ids in example order: ``first`` (the roots, in order), then the rest sorted."""
  first = list(dict.fromkeys(first))
  return first + sorted(set(ids) - set(first))


#: A node id as errors show it (the in-memory engine's way: decoded, not ``b'...'``).
node_id = errors.shown_id


def check_times(plan: sampling.SamplingPlan, edges: Mapping[str, Iterable[tuple]],
                seed_time: float, kinds: Mapping[tuple[str, str], str], root: str,
                who: str, *, schema: Optional[tfgnn.GraphSchema] = None,
                by_set: Optional[Mapping[str, Mapping[bytes, Any]]] = None,
                node_time: str = "") -> None:
  """Raises GraphInputError naming an edge after its seed (:meth:`~SamplingPlan.time_rules`).

  With ``node_time`` (and the ``schema``, the sampled nodes ``by_set``): also
  an end of those edges that appears after the seed's time, in the node sets
  that have the feature (as the in-memory ``kernel.node_leaks``).
  """
  for edge_set, (feature, inclusive) in sorted(plan.time_rules().items()):
    for src, tgt, ex in edges.get(edge_set, ()):
      t = scalar(ex, feature, kinds[(edge_set, feature)])
      if not choice.before(t, seed_time, inclusive):
        raise GraphInputError(
            f"{who}: time leak: the subgraph of {root} (time {seed_time:g}) holds edge "
            f"{node_id(src)!r} -> {node_id(tgt)!r} of edge set {edge_set!r} at time {t:g}, "
            "not before the seed's. The sampler broke its time rule: report it, with the "
            "sampling config.")
    if not node_time:
      continue
    for end, node_set in enumerate((schema.edge_sets[edge_set].source,
                                    schema.edge_sets[edge_set].target)):
      feature_spec = schema.node_sets[node_set].features.get(node_time)
      if feature_spec is None:
        continue
      kind = graph_schema.example_kind(feature_spec.dtype)
      for edge in edges.get(edge_set, ()):
        appears = scalar(by_set[node_set][edge[end]], node_time, kind)
        if not choice.before(appears, seed_time, inclusive=True):
          raise GraphInputError(
              f"{who}: time leak: the subgraph of {root} (time {seed_time:g}) holds node "
              f"{node_id(edge[end])!r} of node set {node_set!r}, which appears at time "
              f"{appears:g} ({node_time!r}), after the seed's time. An edge before the "
              f"seed's time reaches it: no edge may be earlier than its ends' {node_time!r} "
              "(fix the tables).")


def time_kinds(schema: tfgnn.GraphSchema, plan: sampling.SamplingPlan
               ) -> dict[tuple[str, str], str]:
  """``(edge set, time feature) -> list kind`` of the plan's time-aware ops."""
  return {(op.edge_set, op.time): _kinds(schema, op)[op.time] for op in plan.ops if op.time}


class Assemble(beam.DoFn):
  """One example from its grouped root, nodes and edges.

  Node features come with the nodes (join) or from the ``features`` side input
  keyed by ``(node set, node id)`` (broadcast: the roots come with ``None``, the
  other nodes are the targets of the edges drawn). Edges are parsed here, once.
  ``build(root, nodes by set, edges by set) -> serialized example``.
  """

  def __init__(self, build: Callable[[Any, dict, dict], bytes], who: str):
    self._build, self._who = build, who

  def process(self, element, features=None):
    key, grouped = element
    root, = grouped["root"]
    by_set: dict[str, dict[bytes, Any]] = {}
    for set_name, node_id, ex in grouped["nodes"]:
      by_set.setdefault(set_name, {})[node_id] = ex
    edges: dict[str, list] = {}
    for edge_set, target_set, src, drawn in grouped["edges"]:
      reached = by_set.setdefault(target_set, {})
      for tgt, ex in drawn:
        edges.setdefault(edge_set, []).append((src, tgt, tf.train.Example.FromString(ex)))
        reached.setdefault(tgt, None)
    for set_name, nodes in by_set.items():
      for node_id, ex in nodes.items():
        if ex is None:
          ex = None if features is None else features.get((set_name, node_id))
          if ex is None:
            raise missing_node(node_id, set_name, self._who)
          nodes[node_id] = ex
    yield key, self._build(root, by_set, edges)


def assemble(roots: beam.PCollection, sampled: Sampled, graph_nodes: Mapping[str, Any],
             build: Callable[[Any, dict, dict], bytes], *, broadcast: bool, who: str
             ) -> beam.PCollection:
  """``(key, serialized example)``: each ``(key, root)`` with its sampled nodes and edges."""
  nodes, side_inputs = node_features(graph_nodes, sampled, broadcast, who)
  return ({"root": roots, "nodes": nodes,
           "edges": sampled.edges | "FlattenEdges" >> beam.Flatten()}
          | "GroupExamples" >> beam.CoGroupByKey()
          | "Assemble" >> beam.ParDo(Assemble(build, who), **side_inputs))
