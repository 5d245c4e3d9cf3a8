"""GraphEvaluator: evaluate a graph model on held-out nodes against baselines, and bless it.

Example::

  evaluator = GraphEvaluator(
      model=trainer.outputs["model"],
      graph_schema=tables.outputs["result"],   # the tables and seed tables
      sampling_config={"seed_node_set": "paper", "hops": [{"cites": 10}, {"cites": 5}]},
      eval_config={"task": "classification", "label": "label",
                   "test_seeds": "seeds-test.csv", "train_seeds": "seeds-train.csv"})
  pusher = tfx.components.Pusher(model=trainer.outputs["model"],
                                 model_blessing=evaluator.outputs["blessing"], ...)
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Union

from tfx import types
from tfx import v1 as tfx
from tfx.dsl.components.base import base_component
from tfx.dsl.components.base import executor_spec
from tfx.utils import json_utils

from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.evaluator import config as config_lib
from gnn_trainer_component.evaluator import executor


class GraphEvaluator(base_component.BaseComponent):
  """Evaluates a Model on held-out nodes beside zero-parameter baselines; blesses it or not.

  The held-out nodes' subgraphs are sampled from the graph's tables as
  GraphSampler samples them (the training's sampling config) and the model's
  ``serving_default`` predicts them; the same nodes are predicted by the
  baselines (majority class and label propagation; the mean for regression),
  fit on the training seeds' labels, and by ``baseline_model`` when given.
  Metrics are computed on all nodes and per slice (log2 degree buckets, node
  features); the blessing requires every rule of ``eval_config["thresholds"]``
  (by default: beat every baseline on the main metric).

  Outputs:
    evaluation: ``ModelEvaluation``: ``evaluation.json`` (metrics per
      predictor and slice, each rule's check), ``predictions.parquet``,
      ``report.png``; custom properties: the metrics on all nodes (the
      baselines' prefixed by their name), ``blessed``.
    blessing: ``ModelBlessing``, as the stock Evaluator's (``blessed``,
      ``blessing_message`` naming the rules that failed), for Pusher,
      BulkInferrer, GraphInferrer and ``LatestBlessedModelStrategy``.
  """

  SPEC_CLASS = spec_lib.GraphEvaluatorSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(self,
               model: tfx.dsl.Channel,
               graph_schema: tfx.dsl.Channel,
               eval_config: Union[Mapping[str, Any], str],
               sampling_config: Optional[Mapping[str, Any]] = None,
               sampling_spec: Optional[str] = None,
               baseline_model: Optional[tfx.dsl.Channel] = None,
               link_config: Optional[Mapping[str, Any]] = None):
    """Constructs a GraphEvaluator.

    Args:
      model: A GnnTrainer ``Model``.
      graph_schema: ``GraphSchema`` folder with ``graph_schema.pbtxt``, the
        node/edge tables it names and the seed tables ``eval_config`` names.
      eval_config: What to evaluate and the thresholds (a dict or its JSON; see
        ``gnn_trainer_component.evaluator.config``), e.g. ``{"task":
        "classification", "label": "label", "test_seeds": "seeds-test.csv",
        "train_seeds": "seeds-train.csv"}``.
      sampling_config: GraphSampler's ``{"seed_node_set": ..., "hops": [...]}``
        (the training's); its seed node set holds the label. Or:
      sampling_spec: a text-format SamplingSpec.
      baseline_model: Optional ``Model`` to compare with (e.g. the latest
        blessed one, through a ``LatestBlessedModelStrategy`` resolver), for
        ``max_loss_vs_baseline_model`` thresholds.
      link_config: Link prediction (``eval_config`` task ``"link_prediction"``),
        instead of the sampling parameters: the training's ``link_config``
        (GnnTrainer's or LinkSampler's), which the held-out split and its
        negatives are drawn by again.

    Raises:
      ValueError: on invalid parameters, at pipeline-definition time.
    """
    cfg = config_lib.parse(eval_config)
    if cfg.task in config_lib.PAIR_TASKS:
      if not link_config or sampling_spec or sampling_config:
        raise ValueError(f"GraphEvaluator with eval_config task {cfg.task!r} needs "
                         "'link_config' (the training's) and no sampling parameters.")
    elif bool(sampling_spec) == bool(sampling_config) or link_config:
      raise ValueError("GraphEvaluator needs exactly one of 'sampling_spec' or "
                       "'sampling_config' (use the one the model was trained with); "
                       "'link_config' is for eval_config tasks "
                       f"{', '.join(repr(t) for t in config_lib.PAIR_TASKS)}.")
    spec = spec_lib.GraphEvaluatorSpec(
        model=model, baseline_model=baseline_model, graph_schema=graph_schema,
        eval_config=config_lib.dumps(cfg),
        sampling_config=json_utils.dumps(dict(sampling_config)) if sampling_config else None,
        sampling_spec=sampling_spec,
        link_config=json_utils.dumps(dict(link_config)) if link_config else None,
        evaluation=types.Channel(type=tfx.types.standard_artifacts.ModelEvaluation),
        blessing=types.Channel(type=tfx.types.standard_artifacts.ModelBlessing))
    super().__init__(spec=spec)


__all__ = ["GraphEvaluator"]
