"""GraphInferrer over pairs: a model of pairs (``link_config``) run on every pair of an edge table.

With ``link_config`` (the training's) instead of a sampling config, GraphInferrer
predicts for pairs rather than nodes: each edge of ``link_config``'s edge set,
or each row of a ``pairs`` table (``source``, ``target``: ids of the edge
set's two node sets). The graph is the whole graph (no split: every edge is in
it), and each pair's subgraph is sampled around both ends by the link's hops,
without the pair's own edge (in either direction where ``undirected``, and its
copy in the reverse edge set), as in training: a pair's own rating is never
its input. The subgraphs are encoded as LinkSampler's examples and the
export's signatures run on batches of them (``serving_default`` by default:
the pair's prediction, e.g. its stars; ``embeddings``: both ends' states).
The table has columns ``source``, ``target`` and one per output, in the pairs'
order. A model with ``edge_features`` reads each pair's own values of them:
its edge's, or the ``pairs`` table's columns of those names.
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Optional

from absl import logging
import numpy as np
import tensorflow_gnn as tfgnn

from gnn_trainer_component import graph_schema as graph_schema_lib
from gnn_trainer_component.graph import ids as graph_ids
from gnn_trainer_component.graph import negatives as negatives_lib
from gnn_trainer_component.graph import plan as graph_plan
from gnn_trainer_component.graph import tables
from gnn_trainer_component.in_memory import embed
from gnn_trainer_component.in_memory import kernel
from gnn_trainer_component.in_memory import link_pairs
from gnn_trainer_component.in_memory import store as store_lib
from gnn_trainer_component.inferrer import config as config_lib
from gnn_trainer_component.inferrer import signatures as signatures_lib
from gnn_trainer_component.model import embeddings_table as table
from gnn_trainer_component.inferrer.signatures import InferenceInputError
from gnn_trainer_component.inferrer.signatures import WHO
from gnn_trainer_component.model import loading


def check_request(cfg: config_lib.InferenceConfig) -> None:
  """Refuses what inference over pairs does not run: the Beam engine, the whole-graph mode.

  Raises:
    InferenceInputError: naming the key.
  """
  if cfg.engine != config_lib.IN_MEMORY or cfg.mode != config_lib.SAMPLED:
    raise InferenceInputError(
        f"{WHO}: with link_config (inference over pairs) the graph is held in memory and a "
        f"subgraph sampled around each pair: inference_config engine {cfg.engine!r} and mode "
        f"{cfg.mode!r} are for nodes. Leave them out (engine 'in_memory', mode 'sampled').")


def _signatures(model_dir: str, schema: Any, cfg: config_lib.InferenceConfig
                ) -> loading.Signatures:
  """The export's signatures on pairs' examples; each output a column named by its key."""
  loading.check_pair_model(model_dir, schema, WHO, "GraphInferrer with link_config")
  functions, loaded = loading.load_functions(model_dir, cfg.signatures, WHO)
  columns, seen = {}, {}
  for name, function in functions.items():
    for key in sorted(function.structured_outputs):
      if key in table.PAIR_COLUMNS or key in seen:
        raise InferenceInputError(
            f"{WHO}: output {key!r} of signature {name!r} and "
            f"{seen.get(key, f'the {key} column')} would both be column {key!r}; run the "
            "signatures in separate GraphInferrers.")
      seen[key] = f"output {key!r} of signature {name!r}"
      columns[(name, key)] = key
  return loading.Signatures(functions, columns, WHO, saved_model=loaded)


def _pairs(graph: store_lib.InMemoryGraph, link: Any, schema: Any, schema_dir: str,
           pairs: Optional[str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
  """``([N, 2] node indices, their edge_features)``: the link edge set's edges, or a table's rows.

  The ``pairs`` table holds a column per ``edge_features`` name (each pair's
  own values of them) beside ``source`` and ``target``.

  Raises:
    GraphInputError: an id of the table not in its end's node set, or a
      missing or bad feature column (naming the table and row).
  """
  edge_set = schema.edge_sets[link.edge_set]
  if pairs is None:
    edges = graph.edge_sets[link.edge_set]
    return (np.stack([edges.source, edges.target], axis=1).astype(np.int64),
            {name: edges.features[name] for name in link.edge_features})
  piece = tfgnn.proto.EdgeSet(source=edge_set.source, target=edge_set.target)
  piece.metadata.filename = pairs
  for name in link.edge_features:
    piece.features[name].CopyFrom(edge_set.features[name])
  ends = {name: tables.NodeTable(graph.node_sets[name].table, graph.node_sets[name].ids, {})
          for name in (edge_set.source, edge_set.target)}
  read = tables.read_edge_table(f"{link.edge_set} (pairs)", piece, schema_dir, ends, WHO)
  return np.stack([read.source, read.target], axis=1).astype(np.int64), dict(read.features)


def infer(schema_dir: str, model_dir: str, path: str, *, cfg: config_lib.InferenceConfig,
          link_config: Mapping[str, Any], pairs: Optional[str] = None) -> signatures_lib.Result:
  """Writes the signatures' outputs for every pair into ``path`` (Parquet, see :mod:`table`).

  Args:
    schema_dir: The graph's GraphSchema folder (tables named in the schema).
    model_dir: The exported SavedModel of a model of pairs (``Format-Serving``).
    path: The Parquet file to write.
    cfg: The inference config (``as_of``: with time-aware hops, every pair as of then).
    link_config: The training's ``link_config`` (its edge set and each end's hops).
    pairs: A table of pairs (``source``, ``target`` columns; relative to
      ``schema_dir``); None: every edge of ``link_config``'s edge set.

  Raises:
    InferenceInputError, GraphInputError: naming the model, table, row or id.
  """
  start = time.monotonic()
  check_request(cfg)
  schema = graph_schema_lib.read_artifact_schema(schema_dir)
  plan = graph_plan.plan(schema, seeds=None, sampling_spec=None, sampling_config=None,
                         link_config=link_config, splits=[], engine=kernel.ENGINE,
                         runs=kernel.STRATEGIES, who=WHO)
  signatures_lib.check_as_of(plan.sampling, cfg)
  signatures = _signatures(model_dir, schema, cfg)
  graph, _, _ = store_lib.load_for(schema, schema_dir, plan.sampling, {}, seed_times=False,
                                   who=WHO)
  rows, features = _pairs(graph, plan.link, schema, schema_dir, pairs)
  if not len(rows):
    what = f"the pairs table {pairs!r}" if pairs else f"edge set {plan.link.edge_set!r}"
    raise InferenceInputError(f"{WHO}: no pair to infer: {what} is empty.")
  edge_set = schema.edge_sets[plan.link.edge_set]
  ends = [graph.node_sets[n].ids for n in (edge_set.source, edge_set.target)]
  whole = link_pairs.LinkSplits(
      link=plan.link, schema=plan.output_schema, message_graph=graph, plan=plan.sampling,
      end_plans=plan.end_plans, positives={}, negatives={},
      edge_keys=negatives_lib.EdgeKeys(np.zeros(0), np.zeros(0), 1, plan.link.undirected))
  sampler = link_pairs.LinkSubgraphSampler(
      whole, rows, np.zeros(len(rows)), 0,
      times=None if cfg.as_of is None else np.full(len(rows), cfg.as_of), features=features)
  logging.info("%s: %d pairs of %r to infer", WHO, len(rows), plan.link.edge_set)
  writer = table.Writer(path, table.id_type(np.r_[graph_ids.id_bytes(ends[0], rows[:, 0]),
                                                  graph_ids.id_bytes(ends[1], rows[:, 1])]),
                        id_columns=table.PAIR_COLUMNS)
  where = f"of the model at {model_dir} (pairs of {plan.link.edge_set!r} of {schema_dir}) "
  try:
    for batch, outputs in embed.embed_nodes(
        sampler, np.arange(len(rows)), lambda examples: signatures.run(examples, where),
        batch_size=cfg.batch_size, seed=cfg.sampling_seed, as_end=None):
      writer.write((graph_ids.id_bytes(ends[0], rows[batch, 0]),
                    graph_ids.id_bytes(ends[1], rows[batch, 1])), outputs)
  finally:
    writer.close()
  return signatures_lib.Result(node_set=plan.link.edge_set, rows=writer.rows,
                               columns=writer.columns, seconds=time.monotonic() - start)
