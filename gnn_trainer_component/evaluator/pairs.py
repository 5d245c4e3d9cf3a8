"""GraphEvaluator's link-prediction engine: a held-out split's pairs, scored and ranked.

The graph is loaded and split as GnnTrainer splits it for the same
``link_config`` (the graph core's seeded rules: the same held-out edges, the
same fixed negatives, the same message-passing graph without the held-out
edges). Then, on one held-out split:

* every pair (its edges, then its negatives) is scored by the model
  (:mod:`link_model`): AUC and average precision;
* each edge is a query ranked against every node of the target node set, the
  other known edges filtered (OGB's full ranking), or with
  ``negatives_per_query`` against that many negative targets drawn for it (as
  ogbl-citation2), by the graph core's protocol
  (:class:`~gnn_trainer_component.graph.ranking.Ranking`,
  :func:`~gnn_trainer_component.graph.negatives.query_negatives`): MRR and
  hits@K, where the model ranks (:mod:`link_model`);
* the baselines (:func:`baselines.link_baselines`) score and rank the same
  pairs and queries; ``item_knn`` and ``user_knn`` choose their neighbours on
  another held-out split's queries (at most :data:`VALIDATION_QUERIES`), ranked
  the same way.

With ``edge_label`` in ``link_config`` (``edge_regression`` /
``edge_classification``) every pair is an edge labelled with its value: the
model's output for each of the split's edges (:func:`link_model.outputs_of`)
is its prediction, beside :func:`baselines.edge_baselines` fit on the message
split's edges.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Mapping, Optional

from absl import logging
import numpy as np

from gnn_trainer_component.evaluator import baselines as baselines_lib
from gnn_trainer_component.evaluator import config as config_lib
from gnn_trainer_component.evaluator import link_model
from gnn_trainer_component.evaluator.blessing import EvaluationInputError
from gnn_trainer_component.evaluator.in_memory import Predictions
from gnn_trainer_component.evaluator.in_memory import as_predictions
from gnn_trainer_component.evaluator.in_memory import Structure
from gnn_trainer_component.evaluator.in_memory import node_column
from gnn_trainer_component.evaluator.in_memory import WHO
from gnn_trainer_component.graph import ids as graph_ids
from gnn_trainer_component.graph import negatives as negatives_lib
from gnn_trainer_component.graph import ranking
from gnn_trainer_component.in_memory import adapters
from gnn_trainer_component.in_memory import link_pairs


#: The most queries of the validation split the kNN baselines choose their neighbours on.
VALIDATION_QUERIES = 5000


def _ranking(splits: link_pairs.LinkSplits, cfg: config_lib.EvalConfig) -> ranking.Ranking:
  """The split's edges as queries, and what each is ranked among (``negatives_per_query``)."""
  source_set, target_set = splits.end_node_sets
  graph = splits.message_graph
  queries = splits.positives[cfg.split]
  times = splits.positive_times[cfg.split] if splits.link.time else None
  negatives = None
  if cfg.negatives_per_query:
    negatives = negatives_lib.query_negatives(
        queries, cfg.negatives_per_query, splits.edge_keys,
        graph.node_sets[target_set].size, one_node_set=source_set == target_set,
        seed=cfg.sampling_seed,
        appeared=(times, splits.node_times[1]) if splits.node_times is not None else None,
        what="eval_config negatives_per_query", who=WHO)
  return ranking.Ranking(queries=queries, known=splits.edge_keys,
                         num_candidates=graph.node_sets[target_set].size,
                         num_sources=graph.node_sets[source_set].size,
                         one_node_set=source_set == target_set, negatives=negatives,
                         times=times)


def predict(schema_dir: str, model_dir: str, cfg: config_lib.EvalConfig, *,
            link_config: Mapping[str, Any], baseline_model_dir: Optional[str] = None
            ) -> Predictions:
  """The held-out split's pairs, their labels, and every predictor's scores and edge ranks.

  Raises:
    EvaluationInputError, GraphInputError: naming the split, model, table or id.
  """
  start = time.monotonic()
  splits = adapters.load(schema_dir, link_config=link_config, splits=[], who=WHO)
  held_out = splits.link.held_out_splits
  if cfg.split not in held_out:
    raise EvaluationInputError(
        f"{WHO}: eval_config split {cfg.split!r} is not a held-out split of link_config (held "
        f"out of the message-passing graph: {list(held_out)}).")
  _check_task(splits, cfg)
  if cfg.task in config_lib.EDGE_TASKS:
    return _edge_predictions(splits, model_dir, cfg, baseline_model_dir, start)
  task = _ranking(splits, cfg)
  negatives = splits.negatives[cfg.split]
  pairs = np.concatenate([task.queries, negatives])
  labels = np.r_[np.ones(len(task.queries)), np.zeros(len(negatives))].astype(np.int64)
  pair_times = (None if task.times is None else
                np.r_[task.times, splits.negative_times.get(cfg.split, np.zeros(0))])
  sampler = splits.pair_sampler([cfg.split], training=False)
  by_predictor, ranks = {}, {}
  models = {"model": model_dir}
  if baseline_model_dir:
    models["baseline_model"] = baseline_model_dir
  for name, directory in models.items():
    by_predictor[name], ranks[name] = link_model.score(directory, splits, sampler, task, cfg)
  others = [s for s in held_out if s != cfg.split]  # where kNN baselines choose neighbours

  def validation() -> tuple[str, ranking.Ranking]:
    return others[0], _ranking(splits, dataclasses.replace(cfg, split=others[0])).sample(
        VALIDATION_QUERIES, cfg.sampling_seed)

  scores, baseline_ranks, settings = baselines_lib.link_baselines(
      splits, pairs, pair_times, task, cfg,
      validation if others and cfg.knn_neighbours is None else None)
  by_predictor.update(scores)
  ranks.update(baseline_ranks)
  ranks = {name: np.r_[r, np.full(len(negatives), np.nan)]  # a negative pair has no rank
           for name, r in ranks.items() if r is not None}
  graph = splits.message_graph
  source_set, target_set = splits.end_node_sets
  sources = graph.node_sets[source_set]
  features = {f: node_column(sources, f, source_set, "slice_features")[pairs[:, 0]]
              for f in cfg.slice_features}
  logging.info("%s: %d pairs of split %r of %r scored by %s", WHO, len(pairs), cfg.split,
               splits.link.edge_set, sorted(by_predictor))
  return Predictions(
      node_set=splits.link.edge_set, ids=graph_ids.id_bytes(sources.ids, pairs[:, 0]),
      target_ids=graph_ids.id_bytes(graph.node_sets[target_set].ids, pairs[:, 1]),
      labels=labels, degrees=Structure(graph).degrees(source_set, pairs[:, 0]),
      slice_features=features, by_predictor=by_predictor, num_classes=0,
      seconds=time.monotonic() - start, ranks=ranks, baseline_settings=settings)


def _check_task(splits: link_pairs.LinkSplits, cfg: config_lib.EvalConfig) -> None:
  """Refuses a task that does not match ``link_config`` (``edge_label`` or not)."""
  label = splits.link.edge_label
  if label and cfg.task == config_lib.LINK_PREDICTION:
    raise EvaluationInputError(
        f"{WHO}: link_config has edge_label {label!r}: every pair is an edge, labelled with its "
        f"{label!r}, and none is a negative to rank it against. Set eval_config task "
        "'edge_regression' (a value) or 'edge_classification' (a class).")
  if not label and cfg.task in config_lib.EDGE_TASKS:
    raise EvaluationInputError(
        f"{WHO}: eval_config task {cfg.task!r} evaluates the edge feature link_config's "
        f"edge_label names, and link_config has none: add \"edge_label\": <the edge feature> "
        "(as the model was trained), or set task 'link_prediction'.")


def _class_labels(values: np.ndarray, split: str, label: str, num_classes: int) -> np.ndarray:
  """An edge classification's labels, checked to be classes ``0 .. num_classes - 1``.

  Raises:
    EvaluationInputError: naming the edge label, the split and a value that is no class.
  """
  bad = values[(values != np.round(values)) | (values < 0) | (values >= num_classes)]
  if len(bad):
    raise EvaluationInputError(
        f"{WHO}: edge_label {label!r} of split {split!r} has value {bad[0]:g}, which is no "
        f"class of the model's {num_classes} (0 .. {num_classes - 1}); {len(bad)} such "
        "edge(s). Evaluate a regression as eval_config task 'edge_regression'.")
  return values.astype(np.int64)


def _edge_predictions(splits: link_pairs.LinkSplits, model_dir: str,
                      cfg: config_lib.EvalConfig, baseline_model_dir: Optional[str],
                      start: float) -> Predictions:
  """The split's edges, their labels, and every predictor's prediction of them."""
  link = splits.link
  pairs, values = splits.positives[cfg.split], splits.values[cfg.split]
  sampler = splits.pair_sampler([cfg.split], training=False)
  models = {"model": model_dir, **({"baseline_model": baseline_model_dir}
                                   if baseline_model_dir else {})}
  by_predictor = {name: as_predictions(link_model.outputs_of(d, splits, sampler, cfg), cfg.task,
                                       f"serving_default of the model at {d}")
                  for name, d in models.items()}
  train_values = splits.values[link.message_split]
  num_classes, labels = 0, values
  if cfg.task == config_lib.EDGE_CLASSIFICATION:
    num_classes = by_predictor["model"].shape[1]
    labels = _class_labels(values, cfg.split, link.edge_label, num_classes)
    train_values = _class_labels(train_values, link.message_split, link.edge_label, num_classes)
  graph = splits.message_graph
  source_set, target_set = splits.end_node_sets
  sources, targets = graph.node_sets[source_set], graph.node_sets[target_set]
  by_predictor.update(baselines_lib.edge_baselines(
      cfg.task, splits.positives[link.message_split], train_values, pairs, sources.size,
      targets.size, num_classes))
  features = {f: node_column(sources, f, source_set, "slice_features")[pairs[:, 0]]
              for f in cfg.slice_features}
  logging.info("%s: %d edges of split %r of %r (edge_label %r) predicted by %s", WHO,
               len(pairs), cfg.split, link.edge_set, link.edge_label, sorted(by_predictor))
  return Predictions(
      node_set=link.edge_set, ids=graph_ids.id_bytes(sources.ids, pairs[:, 0]),
      target_ids=graph_ids.id_bytes(targets.ids, pairs[:, 1]), labels=labels,
      degrees=Structure(graph).degrees(source_set, pairs[:, 0]), slice_features=features,
      by_predictor=by_predictor, num_classes=num_classes, seconds=time.monotonic() - start)
