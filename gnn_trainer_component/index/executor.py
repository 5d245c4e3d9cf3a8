"""EmbeddingIndex executor: Embeddings -> the index (a SavedModel), its evaluation, a blessing.

Everything is built and measured before anything is written; the SavedModel is written to a
staging folder and renamed into ``Format-Serving`` (what the stock Pusher pushes), so a
failed run publishes no half-written index.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List

from absl import logging
import tensorflow as tf
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.utils import path_utils

from gnn_trainer_component import outputs
from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.index import build as build_lib
from gnn_trainer_component.index import config as config_lib
from gnn_trainer_component.index import gate
from gnn_trainer_component.index import serving

#: The evaluation's file in the ModelEvaluation folder.
EVALUATION_FILE = "evaluation.json"


class Executor(base_executor.BaseExecutor):
  """Builds a nearest-neighbour index over the embeddings, gates it, and blesses it or not."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    """Writes the index, its evaluation and the blessing.

    Args:
      input_dict: ``embeddings``: GraphInferrer's ``Embeddings`` of one node set.
      output_dict: ``index``: ``Model`` (``Format-Serving``: the SavedModel of
        :mod:`serving`); ``evaluation``: ``ModelEvaluation`` (``evaluation.json``);
        ``blessing``: ``ModelBlessing``.
      exec_properties: ``index_config`` (JSON, see :mod:`config`).

    Raises:
      config_lib.IndexConfigError, build_lib.IndexInputError: on bad input; nothing is
        published.
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    cfg = config_lib.parse(exec_properties[spec_lib.INDEX_CONFIG_KEY])
    embeddings = artifact_utils.get_single_instance(input_dict[spec_lib.EMBEDDINGS_KEY])
    vectors = build_lib.read(embeddings.uri, cfg)
    done = gate.release(vectors, cfg)
    properties = {**done.metrics, "blessed": int(done.verdict.blessed)}
    node_set = embeddings.get_custom_property("node_set") if embeddings.has_custom_property(
        "node_set") else None
    if node_set:
      properties["node_set"] = node_set
    index = artifact_utils.get_single_instance(output_dict[spec_lib.INDEX_KEY])
    serving_dir = path_utils.serving_model_path(index.uri)
    staging = f"{serving_dir}.staging"
    outputs.rmtree(staging)
    serving.save(done.module, staging)
    tf.io.gfile.rename(staging, serving_dir, overwrite=True)
    outputs.set_properties(index, properties)
    evaluation = artifact_utils.get_single_instance(output_dict[spec_lib.EVALUATION_KEY])
    outputs.write_atomically(os.path.join(evaluation.uri, EVALUATION_FILE), json.dumps({
        "metrics": done.metrics, "checks": list(done.verdict.checks),
        "blessed": done.verdict.blessed, "message": done.verdict.message,
        "index_config": json.loads(config_lib.dumps(cfg))}, indent=2).encode("utf-8"))
    outputs.set_properties(evaluation, properties)
    blessing = artifact_utils.get_single_instance(output_dict[spec_lib.BLESSING_KEY])
    outputs.bless(blessing, done.verdict.blessed, done.verdict.message, index, None)
    logging.info("EmbeddingIndex: %d vectors of %s (%s, nprobe %d): recall@%d %.4f, p99 %.2f ms;"
                 " %s -> %s", done.metrics["num_vectors"], embeddings.uri, done.metrics["kind"],
                 done.metrics["nprobe"], cfg.k, done.metrics[f"recall@{cfg.k}"],
                 done.metrics["p99_ms"], done.verdict.message, index.uri)
