"""GraphInferrer: a trained model over every node of a graph held in memory.

Example::

  inferrer = GraphInferrer(
      model=trainer.outputs["model"],
      graph_schema=graph_tables.outputs["result"],   # the tables GraphSampler reads
      sampling_config={"seed_node_set": "paper", "hops": [{"cites": 10}, {"cites": 5}]},
      inference_config={"signatures": ["embeddings", "serving_default"]})
  # inferrer.outputs["embeddings"]: <uri>/embeddings.parquet, one row per node.

A model of pairs (trained with ``link_config``: link prediction, an edge's value
or class) predicts for pairs instead::

  inferrer = GraphInferrer(
      model=trainer.outputs["model"], graph_schema=graph_tables.outputs["result"],
      link_config=LINK_CONFIG,     # the training's: the edge set and each end's hops
      pairs="to_score.csv")        # source,target ids; default: every edge of the edge set
  # <uri>/embeddings.parquet: source, target and serving_default's outputs per pair.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from tfx import types
from tfx import v1 as tfx
from tfx.dsl.components.base import base_beam_component
from tfx.dsl.components.base import executor_spec
from tfx.utils import json_utils

from gnn_trainer_component import artifacts
from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.inferrer import config as config_lib
from gnn_trainer_component.inferrer import executor
from gnn_trainer_component.inferrer import pairs as pairs_engine


class GraphInferrer(base_beam_component.BaseBeamComponent):
  """Predictions and/or embeddings for every node of a node set, keyed by node id.

  Around each node, the subgraph GraphSampler would sample from the graph's
  tables (the ``GraphSchema`` folder GraphSampler reads) is encoded as its
  tf.Example and the Model's export signatures (``embeddings`` by default;
  ``serving_default`` for predictions) run on batches of them. Two engines
  (``inference_config["engine"]``): ``"in_memory"`` loads the tables into this
  process once and samples with numpy; ``"beam"`` samples with TF-GNN's Beam
  sampler, as GraphSampler does, and runs the model on the Beam workers (any
  runner: ``with_beam_pipeline_args``), for graphs beyond one machine.

  Outputs:
    embeddings: ``Embeddings``: ``embeddings.parquet`` with column ``id`` and
      one float32 column per signature output (``embedding``, ``logits``,
      ...); in node table order in memory, unordered on Beam; custom
      properties ``node_set``, ``num_nodes``, ``columns``, ``engine`` (and
      ``blessed`` with a ``model_blessing``).
  """

  SPEC_CLASS = spec_lib.GraphInferrerSpec
  EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)

  def __init__(self,
               model: tfx.dsl.Channel,
               graph_schema: tfx.dsl.Channel,
               sampling_config: Optional[Mapping[str, Any]] = None,
               sampling_spec: Optional[str] = None,
               nodes: Optional[str] = None,
               inference_config: Optional[Mapping[str, Any]] = None,
               model_blessing: Optional[tfx.dsl.Channel] = None,
               link_config: Optional[Mapping[str, Any]] = None,
               pairs: Optional[str] = None):
    """Constructs a GraphInferrer.

    Args:
      model: A GnnTrainer ``Model``.
      graph_schema: ``GraphSchema`` folder with ``graph_schema.pbtxt`` and the
        node/edge tables it names (GraphSampler's input), with the node sets
        and features the model was trained on.
      sampling_config: GraphSampler's ``{"seed_node_set": ..., "hops":
        [{edge_set: fan_out}, ...]}`` (use the training's); its seed node set
        is the node set inferred. Or:
      sampling_spec: a text-format SamplingSpec.
      nodes: Optional node table (relative to the folder; only ``id`` is
        read): infer these nodes only. Default: every node of the node set.
      inference_config: ``{"signatures": [...], "batch_size": int,
        "sampling_seed": int, "engine": "in_memory" | "beam"}`` (see
        ``gnn_trainer_component.inferrer.config``).
      model_blessing: Optional ``ModelBlessing`` (e.g. the Evaluator's
        ``blessing``), as the stock BulkInferrer takes it: a model that is not
        blessed is not run; the Embeddings artifact then holds no table and
        says why in its properties (``blessed`` 0, ``skipped``).
      link_config: Instead of a sampling config, for a model of pairs: the
        training's ``link_config``; every pair's subgraph is sampled around
        both ends, without the pair's own edge, and ``serving_default`` runs by
        default (``gnn_trainer_component.inferrer.pairs``).
      pairs: With ``link_config``: a table (relative to the folder; columns
        ``source``, ``target``, and one per ``edge_features`` name) of the
        pairs to infer. Default: every edge of ``link_config``'s edge set.

    Raises:
      ValueError: on invalid parameters, at pipeline-definition time.
    """
    if [bool(sampling_spec), bool(sampling_config), bool(link_config)].count(True) != 1:
      raise ValueError("GraphInferrer needs exactly one of 'sampling_spec' or "
                       "'sampling_config' (use the one the model was trained with), or "
                       "'link_config' for a model of pairs.")
    if (pairs and not link_config) or (nodes and link_config):
      raise ValueError("GraphInferrer takes 'pairs' with 'link_config' (a model of pairs), "
                       "and 'nodes' with a sampling config (a model of nodes).")
    inference_config = dict(inference_config or {})
    if link_config:  # a pair's prediction by default
      inference_config.setdefault("signatures", ["serving_default"])
    cfg = config_lib.parse(inference_config or None)
    if link_config:
      pairs_engine.check_request(cfg)
    spec = spec_lib.GraphInferrerSpec(
        model=model, model_blessing=model_blessing, graph_schema=graph_schema,
        sampling_config=json_utils.dumps(dict(sampling_config)) if sampling_config else None,
        sampling_spec=sampling_spec, nodes=nodes,
        link_config=json_utils.dumps(dict(link_config)) if link_config else None, pairs=pairs,
        inference_config=config_lib.dumps(cfg),
        embeddings=types.Channel(type=artifacts.Embeddings))
    super().__init__(spec=spec)


__all__ = ["GraphInferrer"]
