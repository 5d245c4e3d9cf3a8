"""LinkSampler executor: edge splits and negatives here, subgraph sampling in Beam.

The launching process reads the ids of the tables (checking them as
GraphSampler does), splits the distinct edges of ``link_config["edge_set"]``
by a seeded permutation, samples the negatives, and hands the supervised pairs
and the held-out edge keys to the Beam pipeline (:mod:`link_pipeline`), which
samples around both ends of each pair and writes ``Split-<name>`` GZIP
TFRecords. Nothing is published unless every split was written.
"""

from __future__ import annotations

from typing import Any, Dict, List

from absl import logging
from tfx import types
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils

from gnn_trainer_component import graph_schema
from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.sampler import beam_data_plane
from gnn_trainer_component.sampler import executor as sampler_executor
from gnn_trainer_component.sampler import graph_tables
from gnn_trainer_component.sampler import link_pipeline
from gnn_trainer_component.sampler import links


class Executor(base_beam_executor.BaseBeamExecutor):
  """Samples link-prediction subgraphs for every split of an edge set."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    """Runs the sampler.

    Args:
      input_dict: ``graph_schema``: GraphSchema artifact whose folder holds
        ``graph_schema.pbtxt`` and the tables it names.
      output_dict: ``examples`` (Examples) and ``output_graph_schema``.
      exec_properties: ``link_config`` (JSON), ``num_shards``.

    Raises:
      graph_tables.GraphInputError: on invalid inputs (nothing published).
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    schema_dir = artifact_utils.get_single_uri(input_dict[spec_lib.GRAPH_SCHEMA_KEY])
    schema = graph_schema.read_artifact_schema(schema_dir)
    link = links.parse_link_config(schema, graph_tables.loads_json(
        exec_properties.get(spec_lib.LINK_CONFIG_KEY), spec_lib.LINK_CONFIG_KEY))
    out_schema_pb = links.output_graph_schema(schema, link)
    num_shards = int(exec_properties.get(spec_lib.NUM_SHARDS_KEY) or 0)

    node_ids, edges = graph_tables.validate_tables(schema, schema_dir, keep_edges=link.edge_set,
                                                   who="LinkSampler")
    positives = links.split_links(edges, link)
    edge_set = schema.edge_sets[link.edge_set]
    negatives = links.sample_negatives(
        positives, {links.edge_key(u, v, link.undirected) for u, v in edges},
        sorted(node_ids[edge_set.source]), sorted(node_ids[edge_set.target]), link)
    rows = links.supervision(positives, negatives, link)
    counts = links.counts(rows)
    logging.info("LinkSampler: inputs valid; %d edges of %r; pairs per split: %s", len(edges),
                 link.edge_set, counts)

    examples = artifact_utils.get_single_instance(output_dict[spec_lib.EXAMPLES_KEY])
    broadcast = link_pipeline.should_broadcast(schema, schema_dir, link)
    logging.info("LinkSampler: node features %s", "broadcast to the workers (small tables)"
                 if broadcast else "joined per example (tables above %d bytes)"
                 % link_pipeline.BROADCAST_MAX_BYTES)
    with sampler_executor.staged_splits(examples, sorted(rows), "LinkSampler") as staging:
      beam_data_plane.lock_writes_against_periodic_flush()
      pipeline = self._make_beam_pipeline()
      link_pipeline.build_link_pipeline(
          pipeline, schema=schema, data_dir=schema_dir, link=link, rows=rows,
          held_out=frozenset(links.held_out_keys(positives, link)), staging_dir=staging,
          num_shards=num_shards, broadcast_features=broadcast)
      pipeline.run().wait_until_finish()
    for split, n in counts.items():
      examples.set_int_custom_property(f"num_positives_{split}", n["positives"])
      examples.set_int_custom_property(f"num_negatives_{split}", n["negatives"])

    out_schema = artifact_utils.get_single_instance(output_dict[spec_lib.OUTPUT_GRAPH_SCHEMA_KEY])
    graph_schema.write_artifact_schema(out_schema_pb, out_schema.uri)
    logging.info("LinkSampler: wrote splits %s to %s", sorted(rows), examples.uri)
