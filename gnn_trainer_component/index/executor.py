"""EmbeddingIndex executor: Embeddings -> the index (a SavedModel), its evaluation, a blessing.

Also the Vertex AI Vector Search folder. Everything is read, checked, built and measured
before anything is written; the SavedModel is written to a staging folder and renamed into
``Format-Serving`` (what the stock Pusher pushes), so a failed run publishes no
half-written index. Embeddings that GraphInferrer skipped (its model was not blessed) give
an empty index, not blessed, as the stock BulkInferrer skips.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

from absl import logging
import tensorflow as tf
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.utils import path_utils

from gnn_trainer_component import outputs
from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.index import build as build_lib
from gnn_trainer_component.index import churn as churn_lib
from gnn_trainer_component.index import config as config_lib
from gnn_trainer_component.index import gate
from gnn_trainer_component.index import report
from gnn_trainer_component.index import serving
from gnn_trainer_component.index import vertex

#: The evaluation's file in the ModelEvaluation folder.
EVALUATION_FILE = "evaluation.json"


def _property(artifact: types.Artifact, name: str, default: Any = None) -> Any:
  return artifact.get_custom_property(name) if artifact.has_custom_property(name) else default


def one_model_embeddings(given: List[types.Artifact]) -> types.Artifact:
  """The one Embeddings artifact given; refuses several (vectors of unrelated spaces).

  Raises:
    build_lib.IndexInputError: none, or more than one, naming each and its model.
  """
  if len(given) != 1:
    which = "; ".join(f"{a.uri} (model {_property(a, 'model_uri', 'unknown')})"
                      for a in given) or "none"
    raise build_lib.IndexInputError(
        f"{build_lib.WHO}: one Embeddings artifact is indexed, got {len(given)}: {which}. "
        "Vectors of two models live in unrelated spaces and cannot share an index: give "
        "one GraphInferrer's embeddings.")
  return given[0]


def lineage(embeddings: types.Artifact) -> Dict[str, Any]:
  """The node set and model of the embeddings (GraphInferrer's properties), as recorded."""
  return {name: _property(embeddings, name) for name in ("node_set", "model_id", "model_uri")
          if _property(embeddings, name) not in (None, "")}


def last_release(given: Optional[List[types.Artifact]], dim: int,
                 uri: str) -> Optional[churn_lib.LastRelease]:
  """The last blessed index (``baseline_index``), checked against this release's dimension."""
  if not given:
    return None
  baseline = artifact_utils.get_single_instance(given)
  last = churn_lib.read_release(path_utils.serving_model_path(baseline.uri), baseline.uri,
                                int(_property(baseline, "model_id", 0) or 0))
  churn_lib.check_dimension(last, dim, uri)
  return last


class Executor(base_executor.BaseExecutor):
  """Builds a nearest-neighbour index over the embeddings, gates it, and blesses it or not."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    """Writes the index, its evaluation, the blessing and the Vector Search folder.

    Args:
      input_dict: ``embeddings``: GraphInferrer's ``Embeddings`` of one node set;
        ``baseline_index`` (optional): the last blessed index; ``graph_schema``
        (optional): the graph, for ``restricts``.
      output_dict: ``index``: ``Model`` (``Format-Serving``: the SavedModel of
        :mod:`serving`); ``evaluation``: ``ModelEvaluation`` (``evaluation.json``,
        ``report.png``); ``blessing``: ``ModelBlessing``; ``vertex_ai``:
        ``VectorSearchBatch``.
      exec_properties: ``index_config`` (JSON, see :mod:`config`).

    Raises:
      config_lib.IndexConfigError, build_lib.IndexInputError, GraphInputError: on bad
        input; nothing is published.
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    cfg = config_lib.parse(exec_properties[spec_lib.INDEX_CONFIG_KEY])
    embeddings = one_model_embeddings(input_dict[spec_lib.EMBEDDINGS_KEY])
    out = {key: artifact_utils.get_single_instance(output_dict[key]) for key in (
        spec_lib.INDEX_KEY, spec_lib.EVALUATION_KEY, spec_lib.BLESSING_KEY,
        spec_lib.VERTEX_AI_KEY)}
    if _property(embeddings, "skipped"):
      why = f"the embeddings were not computed: {_property(embeddings, 'skipped')}"
      logging.warning("%s: %s; no index is built.", build_lib.WHO, why)
      for artifact in out.values():
        outputs.set_properties(artifact, {"skipped": why})
      outputs.bless(out[spec_lib.BLESSING_KEY], False, f"Not blessed: {why}",
                    out[spec_lib.INDEX_KEY], None)
      return
    vectors = build_lib.read(embeddings.uri, cfg)
    last = last_release(input_dict.get(spec_lib.BASELINE_INDEX_KEY),
                        vectors.matrix.shape[1], embeddings.uri)
    source = lineage(embeddings)
    restricts = None
    if cfg.restricts:
      schema = input_dict.get(spec_lib.GRAPH_SCHEMA_KEY)
      if not schema:
        raise build_lib.IndexInputError(
            f"{build_lib.WHO}: index_config restricts {list(cfg.restricts)} are node "
            "features, and no graph_schema is given to read them from.")
      restricts = vertex.restrict_columns(artifact_utils.get_single_uri(schema),
                                          source.get("node_set"), vectors.ids, cfg.restricts)
    done = gate.release(vectors, cfg, last)
    properties = {**done.metrics, **source, "blessed": int(done.verdict.blessed)}
    if last is not None:
      properties.update(baseline_index_uri=last.uri, baseline_model_id=last.model_id)
    _write_vertex(out[spec_lib.VERTEX_AI_KEY], cfg, vectors, done, restricts, source)
    _write_index(out[spec_lib.INDEX_KEY], done, properties)
    _write_evaluation(out[spec_lib.EVALUATION_KEY], cfg, done, properties)
    outputs.bless(out[spec_lib.BLESSING_KEY], done.verdict.blessed, done.verdict.message,
                  out[spec_lib.INDEX_KEY], None)
    logging.info("EmbeddingIndex: %d vectors of %s (%s, nprobe %d): recall@%d %.4f, p99 %.2f ms;"
                 " %s -> %s", done.metrics["num_vectors"], embeddings.uri, done.metrics["kind"],
                 done.metrics["nprobe"], cfg.k, done.metrics[f"recall@{cfg.k}"],
                 done.metrics["p99_ms"], done.verdict.message, out[spec_lib.INDEX_KEY].uri)


def _write_vertex(artifact: types.Artifact, cfg: config_lib.IndexConfig,
                  vectors: build_lib.Vectors, done: gate.Release,
                  restricts: Optional[Dict[str, Any]], source: Dict[str, Any]) -> None:
  """The Vector Search folder (``vertex_ai`` false: none, said in the properties)."""
  if not cfg.vertex_ai:
    outputs.set_properties(artifact, {"skipped": "index_config vertex_ai is false"})
    return
  removed = done.churn.removed if done.churn is not None else []
  written = vertex.write(artifact.uri, vectors.ids, vectors.matrix, removed=removed,
                         rows_per_file=cfg.rows_per_file, restricts=restricts)
  outputs.set_properties(artifact, {**written, **source, "format": vertex.FORMAT,
                                    "dim": int(vectors.matrix.shape[1]), "metric": cfg.metric,
                                    "blessed": int(done.verdict.blessed)})


def _write_index(index: types.Artifact, done: gate.Release, properties: Dict[str, Any]) -> None:
  """The SavedModel, staged then renamed into ``Format-Serving``."""
  serving_dir = path_utils.serving_model_path(index.uri)
  staging = f"{serving_dir}.staging"
  outputs.rmtree(staging)
  serving.save(done.module, staging)
  tf.io.gfile.rename(staging, serving_dir, overwrite=True)
  outputs.set_properties(index, properties)


def _write_evaluation(evaluation: types.Artifact, cfg: config_lib.IndexConfig,
                      done: gate.Release, properties: Dict[str, Any]) -> None:
  """``evaluation.json`` and ``report.png``."""
  outputs.write_atomically(os.path.join(evaluation.uri, EVALUATION_FILE), json.dumps({
      "metrics": done.metrics, "checks": list(done.verdict.checks),
      "blessed": done.verdict.blessed, "message": done.verdict.message,
      "curve": done.curve, "lineage": {k: properties[k] for k in (
          "node_set", "model_id", "model_uri", "baseline_index_uri", "baseline_model_id")
          if k in properties},
      "index_config": json.loads(config_lib.dumps(cfg))}, indent=2).encode("utf-8"))
  title = (f"index of {properties.get('node_set', 'the embeddings')!r} "
           f"({done.metrics['num_vectors']} vectors, {done.metrics['kind']})")
  report.write(done, cfg, title, os.path.join(evaluation.uri, report.REPORT_FILE))
  outputs.set_properties(evaluation, properties)
