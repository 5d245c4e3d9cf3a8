"""GraphInferrer executor: Model + graph tables -> an Embeddings table.

The table is published whole or not at all.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List

from absl import logging
import tensorflow as tf
from tfx import types
from tfx.components.util import model_utils
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils
from tfx.utils import path_utils

from gnn_trainer_component import outputs
from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.graph import params as graph_params
from gnn_trainer_component.inferrer import beam as beam_engine
from gnn_trainer_component.inferrer import config as config_lib
from gnn_trainer_component.inferrer import full
from gnn_trainer_component.inferrer import in_memory
from gnn_trainer_component.inferrer import pairs as pairs_engine
from gnn_trainer_component.inferrer import signatures as signatures_lib
from gnn_trainer_component.model import embeddings_table as table

#: Inside the output folder while the table is written; renamed into place when complete.
STAGING_FILE = ".staging-" + table.FILE


class Executor(base_beam_executor.BaseBeamExecutor):
  """Runs a GnnTrainer export over every node of a node set (in memory, or on Beam)."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    """Writes ``embeddings.parquet`` into the ``embeddings`` artifact.

    Args:
      input_dict: ``model``: a GnnTrainer ``Model``; ``graph_schema``: the
        ``GraphSchema`` folder of the graph's tables (GraphSampler's input);
        ``model_blessing`` (optional): as the stock BulkInferrer, a model that
        is not blessed is not run (logged; the artifact's properties say why).
      output_dict: ``embeddings``: one ``Embeddings`` artifact; gets the table
        and the properties ``node_set``, ``num_nodes``, ``columns``, ``model_uri`` and
        ``model_id`` (the lineage of every vector).
      exec_properties: ``sampling_spec`` or ``sampling_config`` (GraphSampler's),
        ``nodes`` (optional node table), or ``link_config`` (a model of pairs)
        with ``pairs`` (optional table of pairs: :mod:`pairs`), and
        ``inference_config`` (JSON, see :mod:`config`).

    Raises:
      config_lib.InferenceConfigError, signatures_lib.InferenceInputError,
      GraphInputError: on bad input; nothing is published.
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    cfg = config_lib.parse(exec_properties.get(spec_lib.INFERENCE_CONFIG_KEY))
    out = artifact_utils.get_single_instance(output_dict[spec_lib.EMBEDDINGS_KEY])
    if input_dict.get(spec_lib.MODEL_BLESSING_KEY):
      blessing = artifact_utils.get_single_instance(input_dict[spec_lib.MODEL_BLESSING_KEY])
      blessed = model_utils.is_model_blessed(blessing)
      outputs.set_properties(out, {"blessed": int(blessed)})
      if not blessed:
        why = f"the model was not blessed ({blessing.uri}); no inference was run"
        logging.warning("GraphInferrer: %s.", why)
        outputs.set_properties(out, {"skipped": why, "num_nodes": 0})
        return
    else:
      logging.info("GraphInferrer: no model_blessing given; the model is run as exported.")
    model = artifact_utils.get_single_instance(input_dict[spec_lib.MODEL_KEY])
    model_dir = path_utils.serving_model_path(model.uri)
    schema_dir = artifact_utils.get_single_uri(input_dict[spec_lib.GRAPH_SCHEMA_KEY])
    tf.io.gfile.makedirs(out.uri)
    staging = os.path.join(out.uri, STAGING_FILE)
    graph = graph_params.read(exec_properties, signatures_lib.WHO)
    args = dict(cfg=cfg, sampling_spec=graph.sampling_spec,
                sampling_config=graph.sampling_config,
                nodes=exec_properties.get(spec_lib.NODES_KEY) or None)
    try:
      if graph.link_config:
        result = pairs_engine.infer(schema_dir, model_dir, staging, cfg=cfg,
                                    link_config=graph.link_config,
                                    pairs=exec_properties.get(spec_lib.PAIRS_KEY) or None)
      elif cfg.engine == config_lib.BEAM:
        result = beam_engine.infer(self._make_beam_pipeline, self._beam_pipeline_args,
                                   schema_dir, model_dir, staging, **args)
      elif cfg.mode == config_lib.FULL_GRAPH:
        result = full.infer(schema_dir, model_dir, staging, **args)
      else:
        result = in_memory.infer(schema_dir, model_dir, staging, **args)
      tf.io.gfile.rename(staging, os.path.join(out.uri, table.FILE), overwrite=True)
    finally:
      if tf.io.gfile.exists(staging):
        tf.io.gfile.remove(staging)
    outputs.set_properties(out, {
        "node_set": result.node_set, "num_nodes": result.rows,
        "columns": ",".join(result.columns), "engine": cfg.engine, "mode": cfg.mode,
        "inference_seconds": round(result.seconds, 1), "model_uri": model.uri,
        "model_id": model.id})
    logging.info("GraphInferrer: %d nodes of %r in %.1f s -> %s (columns %s)", result.rows,
                 result.node_set, result.seconds, out.uri, result.columns)
