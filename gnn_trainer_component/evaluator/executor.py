"""GraphEvaluator executor: Model (+ baseline) + tables -> ModelEvaluation, ModelBlessing.

Everything is computed before anything is written; the blessing is set as
TFX's Evaluator sets it (``blessed`` 1/0, a ``BLESSED`` or ``NOT_BLESSED``
file, ``current_model`` / ``current_model_id``, ``baseline_model`` /
``baseline_model_id``), so the stock Pusher, BulkInferrer and
``LatestBlessedModelStrategy`` read it unchanged.
"""

from __future__ import annotations

from typing import Any, Dict, List

from absl import logging
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.utils import path_utils

from gnn_trainer_component import outputs
from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.evaluator import config as config_lib
from gnn_trainer_component.evaluator import evaluation as evaluation_lib
from gnn_trainer_component.evaluator import in_memory
from gnn_trainer_component.evaluator import pairs
from gnn_trainer_component.graph import params as graph_params


class Executor(base_executor.BaseExecutor):
  """Evaluates a GnnTrainer export on held-out nodes against baselines, and blesses it or not."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    """Writes the evaluation and the blessing.

    Args:
      input_dict: ``model``: a GnnTrainer ``Model``; ``baseline_model``
        (optional): another, for change thresholds; ``graph_schema``: the
        ``GraphSchema`` folder of the graph's tables and seed tables.
      output_dict: ``evaluation``: ``ModelEvaluation`` (``evaluation.json``,
        ``predictions.parquet``, ``report.png``); ``blessing``: ``ModelBlessing``.
      exec_properties: ``eval_config`` (JSON, see :mod:`config`), and the
        training's ``sampling_config`` or ``sampling_spec`` (node tasks) or
        ``link_config`` (link prediction).

    Raises:
      config_lib.EvalConfigError, EvaluationInputError, GraphInputError: on bad
        input; nothing is published.
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    cfg = config_lib.parse(exec_properties[spec_lib.EVAL_CONFIG_KEY])
    graph = graph_params.read(exec_properties, in_memory.WHO)
    model = artifact_utils.get_single_instance(input_dict[spec_lib.MODEL_KEY])
    baseline = (artifact_utils.get_single_instance(input_dict[spec_lib.BASELINE_MODEL_KEY])
                if input_dict.get(spec_lib.BASELINE_MODEL_KEY) else None)
    schema_dir = artifact_utils.get_single_uri(input_dict[spec_lib.GRAPH_SCHEMA_KEY])
    model_dir = path_utils.serving_model_path(model.uri)
    baseline_dir = path_utils.serving_model_path(baseline.uri) if baseline else None
    if cfg.task in config_lib.PAIR_TASKS:
      predictions = pairs.predict(schema_dir, model_dir, cfg, baseline_model_dir=baseline_dir,
                                  link_config=graph.link_config)
    else:
      predictions = in_memory.predict(
          schema_dir, model_dir, cfg, baseline_model_dir=baseline_dir,
          sampling_spec=graph.sampling_spec, sampling_config=graph.sampling_config)
    evaluation = evaluation_lib.evaluate(predictions, cfg)
    out = artifact_utils.get_single_instance(output_dict[spec_lib.EVALUATION_KEY])
    evaluation_lib.write(evaluation, predictions, out.uri)
    outputs.set_properties(out, evaluation.properties())
    blessing = artifact_utils.get_single_instance(output_dict[spec_lib.BLESSING_KEY])
    outputs.bless(blessing, evaluation.verdict.blessed, evaluation.verdict.message, model,
                  baseline)
    logging.info("GraphEvaluator: %d test rows of %r in %.1f s; %s -> %s", len(predictions.ids),
                 predictions.node_set, predictions.seconds, evaluation.verdict.message, out.uri)
