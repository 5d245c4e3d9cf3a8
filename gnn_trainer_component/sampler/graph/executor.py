"""GraphSampler executor: the Beam samplers' own engine inside a TFX BaseBeamExecutor.

Inputs are validated before any Beam work by the graph core's one table
reader (:mod:`gnn_trainer_component.graph.tables`); the pipeline
(:mod:`pipeline`) writes into a staging folder whose files are moved into the
split folders only once every split is complete, so a failed execution
publishes no examples (:mod:`gnn_trainer_component.sampler.staging`). The
pipeline runs with Beam's data-plane race fixed and its known failures
explained (:mod:`gnn_trainer_component.beam.errors`).
"""

from __future__ import annotations

import time
from typing import Any, Dict, List

from absl import logging
from tfx import types
from tfx.dsl.components.base import base_beam_executor

from gnn_trainer_component.beam import errors as beam_errors
from gnn_trainer_component.beam import sampling as beam_sampling
from gnn_trainer_component.graph import params as graph_params
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph import tables
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.sampler import staging
from gnn_trainer_component.sampler.graph import pipeline as graph_pipeline

_WHO = "GraphSampler"


class Executor(base_beam_executor.BaseBeamExecutor):
  """Samples subgraphs around the seeds of every split on Beam."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    """Samples one subgraph tf.Example per seed of each split.

    Args:
      input_dict: ``graph_schema``: one ``GraphSchema`` artifact whose folder
        holds ``graph_schema.pbtxt`` and the node, edge and seed tables it names.
      output_dict: ``examples``: one ``Examples`` artifact, gets a split folder
        per seeds split and ``num_seeds_<split>``; ``output_graph_schema``: one
        ``GraphSchema`` artifact, gets the schema that parses them.
      exec_properties: ``seeds`` (JSON ``{split: seed table}``), exactly one of
        ``sampling_spec`` (text SamplingSpec) or ``sampling_config`` (JSON hop
        config), ``num_shards`` (files per split, 0: the runner decides).

    Raises:
      GraphInputError: on invalid inputs (nothing published).
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    run = staging.resolve_artifacts(input_dict, output_dict, exec_properties)
    graph = graph_params.read(exec_properties, _WHO)
    seeds = graph.seeds or {}
    plan = sampling.plan_from_params(run.schema, graph.sampling_spec, graph.sampling_config,
                                     who=_WHO)
    node_sets, edge_sets = sampling.unreached_sets(plan, run.schema)
    if node_sets or edge_sets:
      logging.warning("%s: no hop samples node sets %s / edge sets %s of the graph schema: every "
                      "subgraph holds them empty (add hops that sample them to use them).",
                      _WHO, node_sets, edge_sets)
    if not seeds:
      raise GraphInputError(f"{_WHO}: no splits given (seeds is empty).")
    start = time.monotonic()
    _, _, counts = tables.check_graph(run.schema, run.schema_dir, plan.seed_node_set, seeds,
                                      _WHO)
    logging.info("%s: inputs valid in %.1f s; seeds per split: %s", _WHO,
                 time.monotonic() - start, counts)
    dtype = sampling.seed_time_dtype(run.schema, plan)
    seed_times = None if dtype is None else {
        split: (tables.read_ids(run.schema_dir, filename, _WHO),
                tables.read_seed_times(run.schema_dir, filename, split, dtype, _WHO))
        for split, filename in seeds.items()}
    broadcast = beam_sampling.should_broadcast(run.schema, run.schema_dir, run.schema.node_sets,
                                               _WHO)
    logging.info("%s: sampling with %s (strategies %s)", _WHO, beam_sampling.ENGINE,
                 sorted({op.strategy for op in plan.ops}))
    with staging.staged_splits(run.examples, sorted(seeds), _WHO) as staged:
      pipeline = self._make_beam_pipeline()
      graph_pipeline.build_sampling_pipeline(
          pipeline, schema=run.schema, data_dir=run.schema_dir, plan=plan, seeds=seeds,
          seed_times=seed_times, staging=staged, num_shards=run.num_shards, broadcast=broadcast)
      beam_errors.run_pipeline(pipeline, self._beam_pipeline_args, _WHO)
    staging.finish(run, sampling.output_graph_schema(run.schema),
                   {f"num_seeds_{split}": n for split, n in counts.items()}, _WHO)

