"""LinkSampler executor: edge splits and negatives here, subgraph sampling in Beam.

The launching process reads the ids of the tables (checking them as
GraphSampler does), splits the distinct edges of ``link_config["edge_set"]``
by a seeded permutation, samples the negatives (the graph core's
:mod:`gnn_trainer_component.graph.links`, as GnnTrainer in memory), and hands the
supervised pairs and the held-out edge keys to the Beam pipeline
(:mod:`pipeline`), which samples around both ends of each pair and writes a
split folder of GZIP TFRecords per split. As in GraphSampler, the files are
staged and published only once every split was written
(:mod:`gnn_trainer_component.sampler.staging`), and the pipeline runs with
Beam's data-plane race fixed and its known failures explained
(:mod:`gnn_trainer_component.beam.errors`).
"""

from __future__ import annotations

from typing import Any, Dict, List

from absl import logging
from tfx import types
from tfx.dsl.components.base import base_beam_executor

from gnn_trainer_component.beam import errors as beam_errors
from gnn_trainer_component.beam import sampling as beam_sampling
from gnn_trainer_component.graph import link_config as link_config_lib
from gnn_trainer_component.graph import links
from gnn_trainer_component.graph import params as graph_params
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph import tables
from gnn_trainer_component.sampler import staging
from gnn_trainer_component.sampler.link import pipeline as link_pipeline
from gnn_trainer_component.sampler.link import subgraphs

_WHO = "LinkSampler"


class Executor(base_beam_executor.BaseBeamExecutor):
  """Samples link-prediction subgraphs for every split of an edge set."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    """Samples one link-prediction tf.Example per supervised pair of each split.

    Args:
      input_dict: ``graph_schema``: one ``GraphSchema`` artifact whose folder
        holds ``graph_schema.pbtxt`` and the node and edge tables it names.
      output_dict: ``examples``: one ``Examples`` artifact, gets a split folder
        per ``link_config`` split and ``num_positives_<split>``,
        ``num_negatives_<split>``; ``output_graph_schema``: one ``GraphSchema``
        artifact, gets the schema that parses them (with the readout sets).
      exec_properties: ``link_config`` (JSON, see ``LinkSampler``),
        ``num_shards`` (files per split, 0: the runner decides).

    Raises:
      GraphInputError: on invalid inputs (nothing published).
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    run = staging.resolve_artifacts(input_dict, output_dict, exec_properties)
    rules = link_config_lib.plan_links(
        run.schema, graph_params.read(exec_properties, _WHO).link_config,
        engine=beam_sampling.ENGINE, runs=sampling.ALL_STRATEGIES, who=_WHO)
    link = rules.link
    edge_set = run.schema.edge_sets[link.edge_set]
    keep = {link.edge_set: tuple(f for f in (link.time, link.edge_label) if f)
            + link.edge_features}
    if link.node_time:
      keep.update({n: (link.node_time,) for n in (edge_set.source, edge_set.target)})
    nodes, edges, _ = tables.check_graph(run.schema, run.schema_dir, None, {}, _WHO, keep=keep)
    ids = (nodes[edge_set.source].ids, nodes[edge_set.target].ids)
    e = edges[link.edge_set]
    pairs = links.supervise(link, *ids, e.source, e.target,
                            one_node_set=edge_set.source == edge_set.target,
                            negatives_for=link.splits, who=_WHO,
                            times=e.features[link.time] if link.time else None,
                            node_times=tuple(nodes[n].features[link.node_time]
                                             for n in (edge_set.source, edge_set.target))
                            if link.node_time else None, table=e.filename,
                            columns=e.features)
    rows = subgraphs.supervision(
        {s: links.id_pairs(p, *ids) for s, p in pairs.positives.items()},
        {s: links.id_pairs(p, *ids) for s, p in pairs.negatives.items()}, link,
        times=pairs.times, negative_times=pairs.negative_times, values=pairs.values,
        features=pairs.features)
    counts = subgraphs.counts(pairs.positives, pairs.negatives)
    logging.info("%s: inputs valid; %d edges of %r; pairs per split: %s", _WHO,
                 len(edges[link.edge_set].source), link.edge_set, counts)
    broadcast = link_pipeline.should_broadcast(run.schema, run.schema_dir, link)
    logging.info("%s: node features %s", _WHO, "broadcast to the workers (small tables)"
                 if broadcast else
                 f"joined per example (tables above {beam_sampling.BROADCAST_MAX_BYTES} bytes)")
    with staging.staged_splits(run.examples, sorted(rows), _WHO) as staged:
      pipeline = self._make_beam_pipeline()
      link_pipeline.build_link_pipeline(
          pipeline, schema=run.schema, data_dir=run.schema_dir, link=link, rows=rows,
          held_out=frozenset(links.edge_key(u, v, link.undirected)
                             for u, v in links.id_pairs(pairs.held_out_pairs, *ids)),
          staging=staged,
          num_shards=run.num_shards, broadcast_features=broadcast)
      beam_errors.run_pipeline(pipeline, self._beam_pipeline_args, _WHO)
    staging.finish(run, rules.schema, {
        f"num_{kind}_{split}": n[kind] for split, n in counts.items()
        for kind in ("positives", "negatives")}, _WHO)
