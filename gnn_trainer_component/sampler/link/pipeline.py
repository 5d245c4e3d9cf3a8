"""The Beam pipeline of LinkSampler: k-hop subgraphs around both ends of each pair.

Each end's hops run on the Beam samplers' own engine
(:mod:`gnn_trainer_component.beam.sampling`: every strategy, node
features broadcast or joined), from the pair's two ends, never sampling the
pair's own edge; each example is then assembled from its pair, nodes and edges
(:func:`subgraphs.build_example`). With ``time_split`` a pair is a query at its
time: its time-aware hops sample only edges before it, and each example is
checked for an edge that is not.

Everything is keyed, so it runs on any Beam runner; only the supervised pairs
and held-out edge keys (ids, no features) are built in the launching process.
"""

from __future__ import annotations

import functools
from typing import Mapping, Sequence

import apache_beam as beam
import tensorflow_gnn as tfgnn
from tensorflow_gnn.data import unigraph

from gnn_trainer_component.beam import sampling as beam_sampling
from gnn_trainer_component.graph import link_config as link_config_lib
from gnn_trainer_component.graph import links
from gnn_trainer_component.sampler import staging as staging_lib
from gnn_trainer_component.sampler.link import subgraphs

_WHO = "LinkSampler"


def _keep(name: str, link: link_config_lib.LinkConfig, held_out: frozenset):
  """The filter keeping the held-out edges out of the link's edge set and its reverse."""
  if name == link.edge_set:
    return lambda e: links.edge_key(e[0], e[1], link.undirected) not in held_out
  if name == link.reverse_edge_set:
    return lambda e: links.edge_key(e[1], e[0], link.undirected) not in held_out
  return None


class _Build:
  """``(root, nodes by set, edges by set) -> serialized example`` of one pair."""

  def __init__(self, schema: tfgnn.GraphSchema, link: link_config_lib.LinkConfig,
               plans: Sequence):
    self._schema, self._link, self._plans = schema, link, plans
    self._kinds = {k: v for plan in plans
                   for k, v in beam_sampling.time_kinds(schema, plan).items()}

  def __call__(self, root, by_set, edges) -> bytes:
    pair, label, time, features = root
    if self._link.time:
      for plan in self._plans:
        beam_sampling.check_times(plan, edges, time, self._kinds,
                                  f"pair {beam_sampling.node_id(pair[0])!r} -> "
                                  f"{beam_sampling.node_id(pair[1])!r}", _WHO,
                                  schema=self._schema, by_set=by_set,
                                  node_time=self._link.node_time)
    link_edge_set = self._schema.edge_sets[self._link.edge_set]
    nodes = {name: [(i, by_set[name][i])
                    for i in subgraphs.ordered_nodes(name, by_set[name], link_edge_set, pair)]
             for name in by_set}
    return subgraphs.build_example(self._schema, self._link, pair, label, nodes, edges,
                                   features).SerializeToString()


def build_link_pipeline(root: beam.Pipeline, *, schema: tfgnn.GraphSchema, data_dir: str,
                        link: link_config_lib.LinkConfig,
                        rows: Mapping[str, Sequence[subgraphs.Row]],
                        held_out: frozenset, staging: staging_lib.Staging, num_shards: int,
                        broadcast_features: bool) -> None:
  """Adds the sampling and writing of every split to the Beam pipeline ``root``.

  Args:
    root: The Beam pipeline.
    schema: Input graph schema with table file names in ``metadata.filename``.
    data_dir: Folder table names are relative to.
    link: The checked config.
    rows: Split -> :data:`subgraphs.Row` (key, pair, label, time, features).
    held_out: Keys (:func:`links.edge_key`) of edges kept out of message passing.
    staging: Where the examples go (its split folders).
    num_shards: Output shards per split (0: the runner decides).
    broadcast_features: Look node features up in a side input instead of
      joining them per example (:mod:`beam_sampling`; :func:`should_broadcast`).
  """
  graph = unigraph.read_graph(schema, data_dir, root)
  adjacent = {name: beam_sampling.adjacency(pcoll, name, _keep(name, link, held_out))
              for name, pcoll in graph["edges"].items()}
  pairs = (root
           | "Pairs" >> beam.Create([(key, (tuple(pair), label, time, features))
                                     for split in sorted(rows)
                                     for key, pair, label, time, features in rows[split]],
                                    reshuffle=False))
  plans = link_config_lib.end_plans(schema, link, who=_WHO)
  roots = {}
  for end, side in enumerate(("source", "target")):
    roots[side] = (plans[side], pairs | f"Seeds/{side}" >> beam.MapTuple(
        lambda key, r, end=end: (r[0][end], beam_sampling.Visit(key, r, r[2], r[2]))))
  sampled = beam_sampling.sample_hops(
      schema, adjacent, roots, seed=link.seed,
      exclude=functools.partial(subgraphs.excluded, link.edge_set, link.reverse_edge_set,
                                link.undirected))
  examples = beam_sampling.assemble(pairs, sampled, graph["nodes"],
                                    _Build(schema, link, list(plans.values())),
                                    broadcast=broadcast_features, who=_WHO)
  staging_lib.write_splits(examples, split_of=subgraphs.split_of, staging=staging,
                           num_shards=num_shards, who=_WHO)


def sampled_node_sets(schema: tfgnn.GraphSchema, link: link_config_lib.LinkConfig) -> list[str]:
  """Node sets whose nodes the examples hold: both ends' sets and every hop's targets."""
  link_edge_set = schema.edge_sets[link.edge_set]
  names = {link_edge_set.source, link_edge_set.target}
  for plan in link_config_lib.end_plans(schema, link, who=_WHO).values():
    names.update(op.target for op in plan.ops)
  return sorted(names)


def should_broadcast(schema: tfgnn.GraphSchema, data_dir: str,
                     link: link_config_lib.LinkConfig) -> bool:
  """Whether the sampled node sets' tables fit in :data:`beam_sampling.BROADCAST_MAX_BYTES`."""
  return beam_sampling.should_broadcast(schema, data_dir, sampled_node_sets(schema, link), _WHO)
