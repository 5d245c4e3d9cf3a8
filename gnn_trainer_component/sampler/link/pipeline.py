"""The Beam pipeline of LinkSampler: k-hop subgraphs around both ends of each pair.

Sampling is a chain of joins, one per sampling op and endpoint: the frontier
``(node id, (example key, pair))`` meets the node's outgoing edges in the
message-passing graph, up to ``fan_out`` of them are picked (seeded by seed,
example, op and node, so a rerun gives the same examples), and their targets
become the next frontier. Each example is then assembled from its pair, nodes
and edges (:func:`subgraphs.build_example`).

Node features reach the examples one of two ways:

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

Everything is keyed, so both run on any Beam runner; only the supervised
pairs and held-out edge keys (ids, no features) are built in the launching
process.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import apache_beam as beam
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn.data import unigraph

from gnn_trainer_component.graph import links
from gnn_trainer_component.graph import tables
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.sampler import staging as staging_lib
from gnn_trainer_component.sampler.link import subgraphs

#: Node tables up to this size on disk (all sampled node sets together) are
#: broadcast to the workers as a side input instead of joined per example.
BROADCAST_MAX_BYTES = 256 * 2**20


def _adjacency(edges: beam.PCollection, name: str, link: links.LinkConfig,
               held_out: frozenset) -> beam.PCollection:
  """``(source id, [(target id, tf.Example), ...])`` of the message-passing graph.

  The held-out edges are kept out of the predicted edge set, and out of its
  reverse edge set as ``(target, source)``.
  """
  undirected = link.undirected

  def keep(edge):
    src, tgt, _ = edge
    return links.edge_key(src, tgt, undirected) not in held_out

  def keep_reversed(edge):
    src, tgt, _ = edge
    return links.edge_key(tgt, src, undirected) not in held_out

  if name == link.edge_set:
    edges = edges | f"HoldOut/{name}" >> beam.Filter(keep)
  elif name == link.reverse_edge_set:
    edges = edges | f"HoldOut/{name}" >> beam.Filter(keep_reversed)
  return (edges
          | f"BySource/{name}" >> beam.Map(lambda e: (e[0], (e[1], e[2])))
          | f"Group/{name}" >> beam.GroupByKey()
          | f"Sort/{name}" >> beam.MapTuple(
              lambda src, outs: (src, sorted(outs, key=lambda o: o[0]))))


class _SampleOp(beam.DoFn):
  """One sampling op at one node, for every example whose frontier holds it."""

  def __init__(self, op_name: str, edge_set: str, fan_out: int, link: links.LinkConfig):
    self._op_name = op_name
    self._edge_set = edge_set
    self._fan_out = fan_out
    self._link_edge_set = link.edge_set
    self._reverse_edge_set = link.reverse_edge_set
    self._undirected = link.undirected
    self._seed = link.seed

  def process(self, element):
    node, grouped = element
    adjacency = [outs for outs in grouped["adjacency"]]
    outs = adjacency[0] if adjacency else []
    for key, pair in grouped["frontier"]:
      candidates = outs
      if self._edge_set == self._link_edge_set:
        candidates = [o for o in outs
                      if not subgraphs.is_supervised_edge(node, o[0], pair, self._undirected)]
      elif self._edge_set == self._reverse_edge_set:
        candidates = [o for o in outs
                      if not subgraphs.is_supervised_edge(o[0], node, pair, self._undirected)]
      for tgt, edge_ex in subgraphs.sample_neighbours(
          candidates, self._fan_out, seed=self._seed, example=key, op_name=self._op_name,
          node=node):
        yield beam.pvalue.TaggedOutput("edges", (key, (self._edge_set, node, tgt, edge_ex)))
        yield (tgt, (key, pair))


def _attach_features(nodes: beam.PCollection, table: beam.PCollection, name: str
                     ) -> beam.PCollection:
  """``(example key, (node set, node id, tf.Example))`` for each sampled node."""

  def emit(element):
    node_id, grouped = element
    features = list(grouped["table"])
    for key in grouped["examples"]:
      if not features:
        raise _missing_node(node_id, name)
      yield key, (name, node_id, features[0])

  return ({"examples": nodes, "table": table}
          | f"JoinFeatures/{name}" >> beam.CoGroupByKey()
          | f"AttachFeatures/{name}" >> beam.FlatMap(emit))


def _missing_node(node_id: bytes, name: str) -> GraphInputError:
  return GraphInputError(
      f"LinkSampler: node {node_id!r} of node set {name!r} was sampled but is not in "
      "its node table.")


class _Assemble(beam.DoFn):
  """One example from its grouped pair, nodes and edges.

  Node features come with the nodes (join) or, when a node carries ``None``,
  from the ``features`` side input keyed by ``(node set, node id)`` (broadcast).
  """

  def __init__(self, schema: tfgnn.GraphSchema, link: links.LinkConfig):
    self._schema = schema
    self._link = link

  def process(self, element, features=None):
    key, grouped = element
    (pair, label), = grouped["pair"]
    by_set: dict[str, dict[bytes, Any]] = {}
    for set_name, node_id, ex in grouped["nodes"]:
      if ex is None:
        ex = features.get((set_name, node_id))
        if ex is None:
          raise _missing_node(node_id, set_name)
      by_set.setdefault(set_name, {})[node_id] = ex
    link_edge_set = self._schema.edge_sets[self._link.edge_set]
    nodes = {name: [(i, by_set[name][i])
                    for i in subgraphs.ordered_nodes(name, by_set[name], link_edge_set, pair)]
             for name in by_set}
    edges: dict[str, list] = {}
    for set_name, src, tgt, ex in grouped["edges"]:
      edges.setdefault(set_name, []).append((src, tgt, ex))
    yield key, subgraphs.build_example(self._schema, self._link, pair, label, nodes,
                                   edges).SerializeToString()


def build_link_pipeline(root: beam.Pipeline, *, schema: tfgnn.GraphSchema, data_dir: str,
                        link: links.LinkConfig,
                        rows: Mapping[str, Sequence[tuple[bytes, links.Pair, float]]],
                        held_out: frozenset, staging: staging_lib.Staging, num_shards: int,
                        broadcast_features: bool) -> None:
  """Adds the sampling and writing of every split to the Beam pipeline ``root``.

  Args:
    root: The Beam pipeline.
    schema: Input graph schema with table file names in ``metadata.filename``.
    data_dir: Folder table names are relative to.
    link: The checked config.
    rows: Split -> ``(example key, (source id, target id), label)``.
    held_out: Keys (:func:`links.edge_key`) of edges kept out of message passing.
    staging: Where the examples go (its split folders).
    num_shards: Output shards per split (0: the runner decides).
    broadcast_features: Look node features up in a side input instead of
      joining them per example (see the module docstring;
      :func:`should_broadcast`).
  """
  graph = unigraph.read_graph(schema, data_dir, root)
  adjacency = {name: _adjacency(pcoll, name, link, held_out)
               for name, pcoll in graph["edges"].items()}
  pairs = (root
           | "Pairs" >> beam.Create([(key, (tuple(pair), label))
                                     for split in sorted(rows) for key, pair, label in rows[split]],
                                    reshuffle=False))
  link_edge_set = schema.edge_sets[link.edge_set]
  endpoint_set = {"source": link_edge_set.source, "target": link_edge_set.target}
  frontiers: dict[str, beam.PCollection] = {}
  node_lists: dict[str, list[beam.PCollection]] = {}
  edge_lists = []
  for side, plan in sorted(links.end_plans(schema, link, who="LinkSampler").items()):
    end = 0 if side == "source" else 1
    seed_op = f"{side}:{plan.seed_op}"
    frontiers[seed_op] = pairs | f"Seeds/{side}" >> beam.MapTuple(
        lambda key, pl, end=end: (pl[0][end], (key, pl[0])))
    node_lists.setdefault(endpoint_set[side], []).append(frontiers[seed_op])
    for op in plan.ops:
      op_name = f"{side}:{op.name}"
      inputs = [frontiers[f"{side}:{name}"] for name in op.inputs]
      frontier = (inputs | f"Inputs/{op_name}" >> beam.Flatten()
                  | f"Distinct/{op_name}" >> beam.Distinct())
      sampled = ({"frontier": frontier, "adjacency": adjacency[op.edge_set]}
                 | f"Join/{op_name}" >> beam.CoGroupByKey()
                 | f"Sample/{op_name}" >> beam.ParDo(_SampleOp(
                     op_name, op.edge_set, op.size, link)).with_outputs(
                         "edges", main="next"))
      frontiers[op_name] = sampled.next
      node_lists.setdefault(op.target, []).append(sampled.next)
      edge_lists.append(sampled.edges)

  node_features = []
  for name, lists in sorted(node_lists.items()):
    nodes = (lists | f"AllNodes/{name}" >> beam.Flatten()
             | f"NodeKeys/{name}" >> beam.MapTuple(lambda node, kp: (node, kp[0])))
    if broadcast_features:  # _Assemble drops repeats, no shuffle needed
      node_features.append(nodes | f"ByExample/{name}" >> beam.MapTuple(
          lambda node, key, name=name: (key, (name, node, None))))
    else:  # each (node, example) joins its features once
      node_features.append(_attach_features(
          nodes | f"DistinctNodes/{name}" >> beam.Distinct(), graph["nodes"][name], name))
  side_inputs = {}
  if broadcast_features:
    tables = [graph["nodes"][name] | f"KeyTable/{name}" >> beam.MapTuple(
        lambda node, ex, name=name: ((name, node), ex)) for name in sorted(node_lists)]
    side_inputs["features"] = beam.pvalue.AsDict(tables | "AllTables" >> beam.Flatten())
  examples = ({"pair": pairs,
               "nodes": node_features | "FlattenNodes" >> beam.Flatten(),
               "edges": edge_lists | "FlattenEdges" >> beam.Flatten()}
              | "GroupExamples" >> beam.CoGroupByKey()
              | "Assemble" >> beam.ParDo(_Assemble(schema, link), **side_inputs))
  staging_lib.write_splits(examples, split_of=subgraphs.split_of, staging=staging,
                           num_shards=num_shards, who="LinkSampler")


def sampled_node_sets(schema: tfgnn.GraphSchema, link: links.LinkConfig) -> list[str]:
  """Node sets whose nodes the examples hold: both ends' sets and every hop's targets."""
  link_edge_set = schema.edge_sets[link.edge_set]
  names = {link_edge_set.source, link_edge_set.target}
  for plan in links.end_plans(schema, link, who="LinkSampler").values():
    names.update(op.target for op in plan.ops)
  return sorted(names)


def should_broadcast(schema: tfgnn.GraphSchema, data_dir: str, link: links.LinkConfig) -> bool:
  """Whether the sampled node sets' tables fit in :data:`BROADCAST_MAX_BYTES` on disk."""
  total = 0
  for name in sampled_node_sets(schema, link):
    for path in tables.resolve_table(data_dir, schema.node_sets[name].metadata.filename,
                                     "LinkSampler"):
      total += tf.io.gfile.stat(path).length
  return total <= BROADCAST_MAX_BYTES
