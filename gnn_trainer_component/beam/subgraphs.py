"""Subgraphs around seeds on Beam: TF-GNN's Beam sampler for uniform plans, else the own engine.

GraphSampler and GraphInferrer's Beam engine both sample here. A plan TF-GNN's
sampler does not run (a strategy other than ``uniform``, a time-aware one with
seeds' times) runs on the own engine (:func:`own_examples`, :mod:`sampling`):
the same examples' layout, the seed first in its node set, every set of the
schema in every example, each subgraph checked for an edge at or after its
seed's time.

For the uniform plans, :func:`sample` reuses the building blocks of
``tensorflow_gnn.experimental.sampler.beam`` (``sampler.get_sampling_model``,
``sampler.create_program``, ``unigraph_utils.ReadAndConvertUnigraph``,
``executor_lib.execute``) and works around the 1.0.3 traps:

* its sampling-model artifacts folder must not exist: the caller gives a fresh
  one (:func:`save_sampling_program` refuses an existing one);
* it samples uniformly whatever strategy the spec names: :func:`uses_tfgnn`
  sends the other plans to the own engine;
* it leaves out of each example the node and edge sets its sampling does not
  reach: the caller adds them, empty (``encoding.fill_empty_sets``), so the
  examples hold every set of the published schema, as the in-memory engine's do.
"""

from __future__ import annotations

import os

from absl import logging
import apache_beam as beam
import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn.data import unigraph
from tensorflow_gnn.experimental import sampler as exp_sampler
from tensorflow_gnn.experimental.sampler import eval_dag
from tensorflow_gnn.experimental.sampler.beam import executor_lib
from tensorflow_gnn.experimental.sampler.beam import sampler as beam_sampler
from tensorflow_gnn.experimental.sampler.beam import unigraph_utils
import tensorflow_gnn.sampler as tfgnn_sampler

from gnn_trainer_component import process
from gnn_trainer_component.beam import sampling as beam_sampling
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph import table_formats

#: The engine as errors name it.
ENGINE = "TF-GNN 1.0.3's Beam sampler"


def uses_tfgnn(plan: sampling.SamplingPlan) -> bool:
  """Whether TF-GNN's Beam sampler runs ``plan`` (else :func:`own_examples` does)."""
  return all(op.strategy in sampling.ENGINE_STRATEGIES for op in plan.ops)


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


def seed_values(node_id: bytes) -> list:
  """Seed input of the sampling program for one node (batch of 1, ragged)."""
  return [[np.array([node_id], dtype=np.object_), np.array([1], dtype=np.int64)]]


def _sampling_model(schema: tfgnn.GraphSchema, spec: tfgnn_sampler.SamplingSpec):
  """TF-GNN's sampling model, built without AutoGraph where its layers allow it.

  Building the model calls each layer once on symbolic inputs, and AutoGraph would first
  transpile the code it reaches (some 2,700 functions for two hops, most of the time this
  step takes), though that code branches and loops on Python values only. A layer that puts
  a tensor in a Python condition raises TypeError unconverted; then the model is built
  again with AutoGraph, as TF-GNN builds it.
  """
  try:
    return tf.autograph.experimental.do_not_convert(beam_sampler.get_sampling_model)(
        schema, spec)
  except TypeError as e:
    logging.info("%s: the sampling model needs AutoGraph (%s); building it converted",
                 ENGINE, e)
    tf.keras.backend.clear_session()
    return beam_sampler.get_sampling_model(schema, spec)


def save_sampling_program(schema: tfgnn.GraphSchema, spec: tfgnn_sampler.SamplingSpec,
                           artifacts_path: str):
  """Builds TF-GNN's sampling program, saving its models under ``artifacts_path``.

  Returns:
    The program proto and the mapping of its layers to the graph's pieces.
  """
  # TF-GNN's executor looks up the program's layers by Keras' default names
  # ("sink", ...). Keras uniquifies names per process ("sink_1" on the second
  # sampler built in a LocalDagRunner / test process), so start from fresh names.
  tf.keras.backend.clear_session()
  model, layers_mapping = _sampling_model(schema, spec)
  program_pb, sampler_artifacts = exp_sampler.create_program(model)
  if tf.io.gfile.exists(artifacts_path):  # the TF-GNN sampler's own trap
    raise ValueError(f"{artifacts_path} already exists.")
  tf.io.gfile.makedirs(artifacts_path)
  for stage in sampler_artifacts.models.values():
    _trace_serving_unconverted(stage)
  beam_sampler.save_artifacts(sampler_artifacts, artifacts_path)
  return program_pb, layers_mapping


def _trace_serving_unconverted(stage: tf.keras.Model) -> None:
  """Traces a stage model's serving function (what TF-GNN saves) without AutoGraph.

  Saving traces it, and AutoGraph would first transpile everything it reaches, most of the
  time saving the program's stage models takes (:func:`process.trace_unconverted`). A
  function that needs AutoGraph is left to be traced as TF-GNN made it.
  """
  serving = getattr(stage, eval_dag._SERVING_ATTR)  # noqa: SLF001 (TF-GNN 1.0.3 is final)
  plain = process.trace_unconverted(serving.python_function, serving.input_signature,
                                    "A TF-GNN sampling stage")
  if plain is not None:
    setattr(stage, eval_dag._SERVING_ATTR, plain)  # noqa: SLF001


def read_node_ids(root: beam.Pipeline, data_dir: str, filename: str, name: str, who: str
                  ) -> beam.PCollection:
  """The ids of a node table (relative to ``data_dir``; sharded names resolved)."""
  files = table_formats.resolve_table(data_dir, filename, who)
  path = files[0] if len(files) == 1 else filename
  if not os.path.isabs(path):
    path = os.path.join(data_dir, path)
  return unigraph.read_node_set(root, path, name) | f"Ids/{name}" >> beam.Keys()


def sample(root: beam.Pipeline, *, schema: tfgnn.GraphSchema, data_dir: str,
           spec: tfgnn_sampler.SamplingSpec, seeds: beam.PCollection, artifacts_path: str
           ) -> beam.PCollection:
  """``(key, tf.Example)``: the subgraph around each ``(key, seed_values(node id))`` seed.

  ``artifacts_path`` (must not exist) gets the sampling models.
  """
  program_pb, layers_mapping = save_sampling_program(schema, spec, artifacts_path)
  feeds = dict(root | "ReadGraph" >> unigraph_utils.ReadAndConvertUnigraph(schema, data_dir))
  feeds.update({layer: feeds[piece] for layer, piece in layers_mapping.items()})
  return executor_lib.execute(program_pb, {"Input": seeds}, feeds=feeds,
                              artifacts_path=artifacts_path)
