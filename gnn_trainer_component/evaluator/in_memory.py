"""GraphEvaluator's in-memory engine: the graph loaded once, the held-out nodes predicted.

The model, its baselines and a baseline model predict the same nodes.

Each test node's subgraph is sampled as GraphSampler samples it (the same
sampling config, seeded by ``sampling_seed`` and the batch) and encoded as
its tf.Example; the export's ``serving_default`` runs on batches of them: the
model is evaluated on what it serves (GraphInferrer's loop,
:func:`~gnn_trainer_component.in_memory.embed.embed_nodes`). The labels, the
degrees and the slice features come from the node tables; the baselines
(:mod:`baselines`) are fit on the training seeds' labels.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Mapping, Optional

from absl import logging
import numpy as np
import pandas as pd

from gnn_trainer_component import graph_schema as graph_schema_lib
from gnn_trainer_component.evaluator import baselines as baselines_lib
from gnn_trainer_component.evaluator import config as config_lib
from gnn_trainer_component.evaluator.blessing import EvaluationInputError
from gnn_trainer_component.graph import ids as graph_ids
from gnn_trainer_component.graph import readout
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.in_memory import dataset as dataset_lib
from gnn_trainer_component.in_memory import embed
from gnn_trainer_component.in_memory import kernel
from gnn_trainer_component.in_memory import store as store_lib
from gnn_trainer_component.model import export as export_lib
from gnn_trainer_component.model import loading

WHO = "GraphEvaluator"
SERVING = export_lib.SERVING_SIGNATURE


@dataclasses.dataclass(frozen=True)
class Predictions:
  """What an engine hands to the metrics: the test nodes (or pairs), labels and predictions.

  ``by_predictor``: probabilities ``[n, classes]`` for classification, values
  ``[n]`` for regression, pair scores ``[n]`` for link prediction, per
  predictor. Link prediction: a row is a pair, ``ids`` are its sources' ids
  and ``target_ids`` its targets', ``labels`` 1 for an edge and 0 for a
  negative, ``degrees`` and ``slice_features`` the source's, and ``ranks``
  each edge's filtered rank per predictor that ranks (NaN for negatives).
  """
  node_set: str
  ids: np.ndarray
  labels: np.ndarray
  degrees: np.ndarray
  slice_features: Mapping[str, np.ndarray]
  by_predictor: Mapping[str, np.ndarray]  # "model", each baseline, "baseline_model"
  num_classes: int
  seconds: float
  target_ids: Optional[np.ndarray] = None
  ranks: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
  # {baseline: {setting: value}}, e.g. {"item_knn": {"neighbours": 50, "chosen_on": "eval"}}
  baseline_settings: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)


def node_column(nodes: store_lib.NodeSet, name: str, node_set: str, what: str) -> np.ndarray:
  """A scalar feature of every node of ``node_set``, flat.

  Raises:
    EvaluationInputError: no such feature, or more than one value per node
      (``what``: the eval_config key that names it).
  """
  values = nodes.features.get(name)
  if values is None:
    raise EvaluationInputError(
        f"{WHO}: eval_config {what} {name!r} is not a feature of node set {node_set!r} (table "
        f"{nodes.table}; its features: {sorted(nodes.features)}).")
  if values.ndim > 1 and int(np.prod(values.shape[1:])) != 1:
    raise EvaluationInputError(
        f"{WHO}: feature {name!r} of node set {node_set!r} (table {nodes.table}) has shape "
        f"{list(values.shape[1:])} per node; eval_config {what} must be one value per node.")
  return values.reshape(len(values))


def _labels(cfg: config_lib.EvalConfig, nodes: store_lib.NodeSet, node_set: str) -> np.ndarray:
  labels = node_column(nodes, cfg.label, node_set, "label")
  if cfg.task == config_lib.CLASSIFICATION and not np.issubdtype(labels.dtype, np.integer):
    raise EvaluationInputError(
        f"{WHO}: label {cfg.label!r} of node set {node_set!r} (table {nodes.table}) is "
        f"{labels.dtype}; a classification label is an int64 class id. Use task 'regression' "
        "for a numeric target.")
  if cfg.task == config_lib.REGRESSION:
    labels = labels.astype(np.float64)
  return labels


def _check_classes(labels: np.ndarray, rows: np.ndarray, ids: pd.Index, num_classes: int,
                   what: str, cfg: config_lib.EvalConfig, table: str) -> None:
  bad = np.flatnonzero((labels[rows] < 0) | (labels[rows] >= num_classes))
  if len(bad):
    row = rows[bad[0]]
    raise EvaluationInputError(
        f"{WHO}: node {graph_ids.id_bytes(ids, [row])[0]!r} of the {what} seeds has label "
        f"{cfg.label!r} = {labels[row]} in {table}, outside the model's {num_classes} classes "
        f"[0, {num_classes - 1}] ({len(bad)} such {what} nodes).")


class Structure:
  """The whole graph as one symmetric adjacency over every node of every node set.

  Node ``i`` of node set ``n`` is row ``offsets[n] + i``; each edge of every
  edge set links its two ends, in both directions.
  """

  def __init__(self, graph: store_lib.InMemoryGraph):
    self.offsets, total = {}, 0
    for name, nodes in graph.node_sets.items():
      self.offsets[name], total = total, total + nodes.size
    sources, targets = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for name, edges in graph.edge_sets.items():
      spec = graph.schema.edge_sets[name]
      sources.append(edges.source + self.offsets[spec.source])
      targets.append(edges.target + self.offsets[spec.target])
    self.adjacency = baselines_lib.adjacency(total, np.concatenate(sources),
                                             np.concatenate(targets))

  def degrees(self, node_set: str, rows: np.ndarray) -> np.ndarray:
    """Each node's distinct neighbours: over every edge set, either direction, itself excluded."""
    nodes = rows + self.offsets[node_set]
    block = self.adjacency[nodes].tocoo()
    others = block.col != nodes[block.row]
    return np.bincount(block.row[others], minlength=len(rows)).astype(np.int64)

  def propagated(self, node_set: str, train_rows: np.ndarray, train_labels: np.ndarray,
                 test_rows: np.ndarray, num_classes: int) -> np.ndarray:
    """Label propagation's probabilities of ``test_rows`` over the whole graph."""
    offset = self.offsets[node_set]
    probs = baselines_lib.label_propagation(self.adjacency, train_rows + offset, train_labels,
                                            num_classes)
    return probs[test_rows + offset]


def _output(signatures: loading.Signatures, cfg: config_lib.EvalConfig,
            model_dir: str) -> str:
  outputs = sorted(signatures.functions[SERVING].structured_outputs)
  if cfg.output:
    if cfg.output not in outputs:
      raise EvaluationInputError(
          f"{WHO}: eval_config output {cfg.output!r} is not an output of serving_default of the "
          f"model at {model_dir} (its outputs: {outputs}).")
    return cfg.output
  if len(outputs) != 1:
    raise EvaluationInputError(
        f"{WHO}: serving_default of the model at {model_dir} has outputs {outputs}; name the "
        'one to evaluate in eval_config, e.g. "output": ' f"{outputs[0]!r}.")
  return outputs[0]


def as_predictions(values: np.ndarray, task: str, where: str) -> np.ndarray:
  """Logits -> probabilities (softmax; one logit: sigmoid) or values ``[n]``.

  ``task``: a node task or an edge task (read as its node task's).

  Raises:
    EvaluationInputError: a regression output of more than one value per row.
  """
  values = values.reshape(len(values), -1).astype(np.float64)
  if config_lib.kind(task) == config_lib.REGRESSION:
    if values.shape[1] != 1:
      raise EvaluationInputError(
          f"{WHO}: {where} gives {values.shape[1]} values per row; task {task!r} needs one.")
    return values[:, 0]
  if values.shape[1] == 1:
    p = 1.0 / (1.0 + np.exp(-values[:, 0]))
    return np.stack([1.0 - p, p], axis=1)
  values = values - values.max(axis=1, keepdims=True)
  exp = np.exp(values)
  return exp / exp.sum(axis=1, keepdims=True)


def _predict(signatures: loading.Signatures, sampler: dataset_lib.SubgraphSampler,
             rows: np.ndarray, cfg: config_lib.EvalConfig, model_dir: str) -> np.ndarray:
  output = _output(signatures, cfg, model_dir)
  where = f"output {output!r} of serving_default of the model at {model_dir}"
  batches = []
  for _, outputs in embed.embed_nodes(sampler, rows, lambda e: signatures.run(e, f"({where}) "),
                                      batch_size=cfg.batch_size, seed=cfg.sampling_seed,
                                      as_end=None):
    batches.append(outputs[output])
  return as_predictions(np.concatenate(batches), cfg.task, where)


def _check_node_model(model_dir: str, trained: Optional[Any], cfg: config_lib.EvalConfig) -> None:
  """Refuses a link-prediction model (its graph schema has pair readouts) for a node task."""
  if trained is not None and readout.READOUT_SOURCE in trained.edge_sets:
    raise EvaluationInputError(
        f"{WHO}: the model at {model_dir} scores pairs of nodes (link prediction); eval_config "
        f"task {cfg.task!r} evaluates a model of a node label.")


def _signatures(model_dir: str, schema: Any, node_set: str,
                cfg: config_lib.EvalConfig) -> loading.Signatures:
  _check_node_model(model_dir, loading.trained_schema(model_dir), cfg)
  return loading.load(model_dir, (SERVING,), schema, node_set, WHO)


def predict(schema_dir: str, model_dir: str, cfg: config_lib.EvalConfig, *,
            baseline_model_dir: Optional[str] = None, sampling_spec: Optional[str] = None,
            sampling_config: Optional[Mapping[str, Any]] = None) -> Predictions:
  """The test nodes' labels and the predictions of the model, its baselines and a baseline model.

  Raises:
    EvaluationInputError, GraphInputError: naming the model, table, row, id or feature.
  """
  start = time.monotonic()
  schema = graph_schema_lib.read_artifact_schema(schema_dir)
  plan = sampling.plan_from_params(schema, sampling_spec, sampling_config, who=WHO)
  model = _signatures(model_dir, schema, plan.seed_node_set, cfg)
  kernel.check_plan(plan, WHO, seed_times=True,
                    how="a 'time' column in the test and train seed tables")
  node_set = plan.seed_node_set
  baseline = _signatures(baseline_model_dir, schema, node_set, cfg) if baseline_model_dir else None
  graph, seeds, times = store_lib.load_for(
      schema, schema_dir, plan, {"test": cfg.test_seeds, "train": cfg.train_seeds},
      seed_times=True, who=WHO)
  nodes = graph.node_sets[node_set]
  test, train = seeds["test"], seeds["train"]
  ids = nodes.ids
  shared = np.intersect1d(test, train)
  if len(shared):
    raise EvaluationInputError(
        f"{WHO}: {len(shared)} test seeds ({cfg.test_seeds}) are also train seeds "
        f"({cfg.train_seeds}), e.g. node {graph_ids.id_bytes(ids, shared[:1])[0]!r}: evaluate on "
        "held-out nodes.")
  labels = _labels(cfg, nodes, node_set)
  features = {f: node_column(nodes, f, node_set, "slice_features")[test]
              for f in cfg.slice_features}
  sampler, rows = dataset_lib.SubgraphSampler(graph, plan), test
  if times:  # each test seed as of its time
    sampler = dataset_lib.TimedSubgraphSampler(sampler, test, times["test"])
    rows = np.arange(len(test), dtype=np.int64)
  by_predictor = {"model": _predict(model, sampler, rows, cfg, model_dir)}
  if baseline is not None:
    by_predictor["baseline_model"] = _predict(baseline, sampler, rows, cfg, baseline_model_dir)
  num_classes = by_predictor["model"].shape[1] if cfg.task == config_lib.CLASSIFICATION else 0
  if num_classes:
    for what, rows in (("test", test), ("train", train)):
      _check_classes(labels, rows, ids, num_classes, what, cfg, nodes.table)
    if "baseline_model" in by_predictor and by_predictor["baseline_model"].shape[1] != num_classes:
      raise EvaluationInputError(
          f"{WHO}: the baseline model at {baseline_model_dir} predicts "
          f"{by_predictor['baseline_model'].shape[1]} classes, the model {num_classes}.")
  structure = Structure(graph)
  by_predictor.update(baselines_lib.predict(
      cfg.task, train_labels=labels[train], num_classes=num_classes, num_test=len(test),
      propagated=lambda: structure.propagated(node_set, train, labels[train], test, num_classes)))
  logging.info("%s: %d test nodes of %r predicted by %s", WHO, len(test), node_set,
               sorted(by_predictor))
  return Predictions(node_set=node_set, ids=graph_ids.id_bytes(ids, test), labels=labels[test],
                     degrees=structure.degrees(node_set, test), slice_features=features,
                     by_predictor=by_predictor, num_classes=num_classes,
                     seconds=time.monotonic() - start)
