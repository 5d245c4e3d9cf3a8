"""Subgraphs around seeds on Beam, with the Beam samplers' own engine.

GraphSampler and GraphInferrer's Beam engine both sample here, LinkSampler on the
same engine (:mod:`sampling`): every strategy, the seed first in its node set,
every set of the schema in every example, each subgraph of a time-aware plan
checked for an edge at or after its seed's time.

TF-GNN 1.0.3's Beam sampler (``tensorflow_gnn.experimental.sampler.beam``) ran
the uniform plans before: it runs only those, builds and saves a sampling program
per run, lost stage outputs on Beam's DirectRunner, is at its final release, and
measured several times slower than this engine on the same plans
(benchmarks/README.md, "One Beam engine for every plan").
"""

from __future__ import annotations

import os

import apache_beam as beam
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn.data import unigraph

from gnn_trainer_component.beam import sampling as beam_sampling
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph import table_formats

#: The own engine's sampling seed (a rerun samples the same subgraphs).
OWN_SEED = 0


class _Build:
  """``((seed id, seed time), nodes by set, edges by set) -> tf.Example`` of one subgraph."""

  def __init__(self, schema: tfgnn.GraphSchema, plan: sampling.SamplingPlan, who: str):
    self._schema, self._plan, self._who = schema, plan, who
    self._kinds = beam_sampling.time_kinds(schema, plan)

  def __call__(self, root, by_set, edges) -> tf.train.Example:
    seed, seed_time = root
    if self._plan.timed:
      beam_sampling.check_times(self._plan, edges, seed_time, self._kinds,
                                f"seed {beam_sampling.node_id(seed)!r}", self._who)
    first = {self._plan.seed_node_set: [seed]}
    nodes = {name: [(i, ids[i]) for i in beam_sampling.ordered_nodes(ids, first.get(name, ()))]
             for name, ids in by_set.items()}
    example, _ = beam_sampling.subgraph_example(self._schema, nodes, edges, who=self._who)
    return example


def own_examples(root: beam.Pipeline, *, schema: tfgnn.GraphSchema, data_dir: str,
                 plan: sampling.SamplingPlan, roots: beam.PCollection, broadcast: bool,
                 who: str) -> beam.PCollection:
  """``(key, tf.Example)``: the subgraph around each ``(key, (seed id, seed time))`` root.

  The own engine (:mod:`beam_sampling`): any strategy; the seed is node 0 of
  its node set; every set of ``schema`` is in every example; a time-aware
  plan's examples are checked for an edge at or after the seed's time.
  ``broadcast``: node features from a side input (small tables), else joined.
  """
  graph = unigraph.read_graph(schema, data_dir, root)
  adjacent = {name: beam_sampling.adjacency(pcoll, name)
              for name, pcoll in graph["edges"].items()}
  frontier = roots | "Roots" >> beam.MapTuple(
      lambda key, r: (r[0], beam_sampling.Visit(key, r, r[1], r[1])))
  sampled = beam_sampling.sample_hops(schema, adjacent, {"": (plan, frontier)}, seed=OWN_SEED)
  return beam_sampling.assemble(roots, sampled, graph["nodes"], _Build(schema, plan, who),
                                broadcast=broadcast, who=who)


def read_node_ids(root: beam.Pipeline, data_dir: str, filename: str, name: str, who: str
                  ) -> beam.PCollection:
  """The ids of a node table (relative to ``data_dir``; sharded names resolved)."""
  files = table_formats.resolve_table(data_dir, filename, who)
  path = files[0] if len(files) == 1 else filename
  if not os.path.isabs(path):
    path = os.path.join(data_dir, path)
  return unigraph.read_node_set(root, path, name) | f"Ids/{name}" >> beam.Keys()
