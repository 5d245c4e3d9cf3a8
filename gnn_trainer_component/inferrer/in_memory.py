"""GraphInferrer's in-memory engine: the graph loaded once, a subgraph around every node.

For each node of the node set (or of a ``nodes`` table) the engine samples the
subgraph GraphSampler would (the same sampling config; seeded by
``sampling_seed`` and the batch), encodes it as GraphSampler's tf.Example, and
runs the export's signatures on batches of them: the model sees exactly what
its ``serving_default`` serves (:func:`embed.embed_nodes`, the loop GnnTrainer's
retrieval evaluation runs too).

A link-prediction model (its ``embeddings`` signature returns
``source_embedding`` / ``target_embedding``) reads its ends through structured
readout; each node's subgraph gets the readout of a pair with the node at its
end (:class:`~gnn_trainer_component.graph.readout.NodeAsEnd`: (node, node)
within one node set), and the column ``embedding`` is that node's state.
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Optional

from absl import logging
import numpy as np

from gnn_trainer_component.graph import ids as graph_ids
from gnn_trainer_component.in_memory import dataset as dataset_lib
from gnn_trainer_component.in_memory import embed
from gnn_trainer_component.in_memory import kernel
from gnn_trainer_component.in_memory import store as store_lib
from gnn_trainer_component.inferrer import config as config_lib
from gnn_trainer_component.inferrer import signatures as signatures_lib
from gnn_trainer_component.model import embeddings_table as table
from gnn_trainer_component.inferrer.signatures import InferenceInputError
from gnn_trainer_component.inferrer.signatures import WHO
from gnn_trainer_component.model import loading


def infer(schema_dir: str, model_dir: str, path: str, *, cfg: config_lib.InferenceConfig,
          sampling_spec: Optional[str] = None,
          sampling_config: Optional[Mapping[str, Any]] = None,
          nodes: Optional[str] = None) -> signatures_lib.Result:
  """Writes the signatures' outputs for every node into ``path`` (Parquet, see :mod:`table`).

  Args:
    schema_dir: The graph's GraphSchema folder (tables named in the schema).
    model_dir: The exported SavedModel (``Format-Serving``).
    path: The Parquet file to write.
    cfg: The inference config.
    sampling_spec: Text-format SamplingSpec, or
    sampling_config: GraphSampler's ``{"seed_node_set": ..., "hops": [...]}``.
      Its seed node set is the node set inferred.
    nodes: A node table (relative to ``schema_dir``; only ``id`` is read) of the
      nodes to infer; None: every node of the node set.

  Raises:
    InferenceInputError, GraphInputError: naming the model, table, row or id.
  """
  start = time.monotonic()
  schema, plan, signatures = signatures_lib.prepare(schema_dir, model_dir, cfg, sampling_spec,
                                                    sampling_config)
  signatures_lib.check_as_of(plan, cfg)
  kernel.check_plan(plan, WHO, seed_times=cfg.as_of is not None)
  node_set = plan.seed_node_set
  graph, seeds, _ = store_lib.load_for(schema, schema_dir, plan,
                                       {"nodes": nodes} if nodes else {}, seed_times=False,
                                       who=WHO)
  rows = seeds["nodes"] if nodes else np.arange(graph.node_sets[node_set].size, dtype=np.int64)
  ids = np.asarray(graph.node_sets[node_set].ids)  # int64 or bytes objects
  logging.info("%s: %d nodes of %r to infer", WHO, len(rows), node_set)
  sampler, sampled, node_ids = dataset_lib.SubgraphSampler(graph, plan), rows, ids
  if plan.timed:  # every node as of one time: the sampler's rows are (node, as_of) pairs
    sampler = dataset_lib.TimedSubgraphSampler(sampler, rows, np.full(len(rows), cfg.as_of))
    sampled, node_ids = np.arange(len(rows), dtype=np.int64), ids[rows]
  writer = table.Writer(path, table.id_type(ids[rows]))
  try:
    where = f"of the model at {model_dir} (node set {node_set!r} of {schema_dir}) "

    def run(examples):
      try:
        return signatures.run(examples, where)
      except InferenceInputError as e:
        raise InferenceInputError(
            f"{e} {loading.missing_features(model_dir, schema)}".rstrip()) from e.__cause__

    for batch, (batch_rows, outputs) in enumerate(embed.embed_nodes(
        sampler, sampled, run, batch_size=cfg.batch_size, seed=cfg.sampling_seed,
        as_end=signatures.as_end)):
      writer.write(graph_ids.id_bytes(node_ids, batch_rows), outputs)
      if (batch + 1) % 100 == 0:
        logging.info("%s: %d of %d nodes in %.0f s", WHO, writer.rows, len(rows),
                     time.monotonic() - start)
  finally:
    writer.close()
  return signatures_lib.Result(node_set=node_set, rows=writer.rows, columns=writer.columns,
                               seconds=time.monotonic() - start)
