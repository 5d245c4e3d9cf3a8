"""Planetoid pipelines: tables -> GraphSampler (or LinkSampler) -> GnnTrainer.

Every pipeline starts with the graph's validation (``pipelines/validation.py``):
GraphStatisticsGen -> GraphValidator, the rest under ``tfx.dsl.Cond`` on its verdict.

Node classification: tables -> GraphSampler -> StatisticsGen/SchemaGen ->
(GnnTuner ->) GnnTrainer (or tables -> GnnTrainer holding the graph in
memory) -> GraphEvaluator (``evaluation``: e.g. :func:`eval_config`, test
accuracy beside the majority class and label propagation, and the blessing). A
multi-task model's test metrics are also computed outside the pipeline
(:func:`evaluate_multitask_model`). Link prediction (GAE setting): tables -> LinkSampler ->
GnnTrainer; :func:`evaluate_link_model` scores the test pairs with the exported
SavedModel (without their labels) for ROC AUC and average precision.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf
from tfx import v1 as tfx

from gnn_trainer_component import GnnTrainer
from gnn_trainer_component import GnnTuner
from gnn_trainer_component import GraphEvaluator
from gnn_trainer_component import GraphInferrer
from gnn_trainer_component import GraphSchema
from gnn_trainer_component import GraphSampler
from gnn_trainer_component import LinkSampler
from pipelines import REPO_ROOT
from pipelines import serving
# SAMPLED: named here too, as the modes are (pipeline.SAMPLED).
from pipelines.planetoid import (  # pylint: disable=unused-import
    DEFAULT_FAN_OUTS, GCN_MODULE, IN_MEMORY, MODES, SAMPLED)
from pipelines.runtime import mlmd_connection
from pipelines.validation import validate_graph

GAT_MODULE = os.path.join(REPO_ROOT, "module_files", "planetoid_gat.py")
LINK_MODULE = os.path.join(REPO_ROOT, "module_files", "planetoid_link_prediction.py")
#: GAE's edge split (Kipf & Welling, 2016): 85 / 5 / 10 %.
LINK_SPLITS = {"train": 0.85, "eval": 0.05, "test": 0.10}


def sampling_config(fan_outs: Sequence[int]) -> dict[str, Any]:
  """GraphSampler's sampling_config: k-hop subgraphs around each seed paper."""
  return {"seed_node_set": "paper", "hops": [{"cites": int(f)} for f in fan_outs]}


def create_pipeline(*, pipeline_name: str, pipeline_root: str, tables_dir: str,
                    metadata: mlmd_connection.Metadata, seeds: Mapping[str, str],
                    module_file: str = GCN_MODULE,
                    fan_outs: Sequence[int] = DEFAULT_FAN_OUTS,
                    custom_config: Optional[Mapping[str, Any]] = None,
                    train_steps: Optional[int] = None,
                    with_statistics: bool = True,
                    beam_pipeline_args: Optional[Sequence[str]] = None,
                    tuning_config: Optional[Mapping[str, Any]] = None,
                    enable_cache: bool = True,
                    mode: str = IN_MEMORY,
                    graph_inference: bool = False,
                    evaluation: Optional[Mapping[str, Any]] = None) -> tfx.dsl.Pipeline:
  """Builds the Planetoid pipeline.

  Args:
    pipeline_name: Name in MLMD.
    pipeline_root: Root of all artifacts.
    tables_dir: Folder from ``planetoid.write_planetoid_tables`` (graph schema,
      tables, seed files).
    metadata: Where MLMD lives: a SQLite file, or a ``ConnectionConfig``
      (e.g. a MySQL/MariaDB server: ``pipelines.runtime.mlmd_connection.prepare``).
    seeds: Split -> seed file (relative to tables_dir).
    module_file: GnnTrainer user module.
    fan_outs: Per-hop sample sizes of the ``cites`` edge set.
    custom_config: GnnTrainer custom_config.
    train_steps: GnnTrainer train_args.num_steps (None: epochs over the split).
    with_statistics: Include StatisticsGen and SchemaGen.
    beam_pipeline_args: Beam args for GraphSampler/StatisticsGen.
    tuning_config: If set, a GnnTuner with GnnTrainer's inputs, module and
      config searches the module's ``hyperparameter_space`` and feeds its
      ``best_hyperparameters`` to GnnTrainer.
    enable_cache: TFX caching (sampling/statistics are reused across seeds).
    mode: :data:`IN_MEMORY`: GnnTrainer holds the tables in memory and samples
      around the seeds every epoch (no GraphSampler, no statistics);
      :data:`SAMPLED`: GraphSampler's examples.
    graph_inference: Add a GraphInferrer: embeddings and logits of every paper,
      sampled from the tables with the training's fan-outs.
    evaluation: Add a GraphEvaluator with this ``eval_config`` (e.g.
      :func:`eval_config`: the topic of the test papers beside the majority
      class and label propagation, blessed when the model beats both).
  """
  if mode not in MODES:
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}.")
  tables = tfx.dsl.Importer(source_uri=tables_dir,
                            artifact_type=GraphSchema).with_id("graph_tables")
  # The graph's statistics and anomalies first; the rest runs on a valid graph only.
  validation, graph_is_valid = validate_graph(
      tables, seeds=dict(seeds), statistics_config={"seed_node_set": "paper", "label": "label"})
  with tfx.dsl.Cond(graph_is_valid):
    components = _node_components(
        tables, mode=mode, seeds=seeds, fan_outs=fan_outs, module_file=module_file,
        custom_config=custom_config, train_steps=train_steps, with_statistics=with_statistics,
        tuning_config=tuning_config, graph_inference=graph_inference, evaluation=evaluation)
  return _pipeline([tables, *validation, *components], pipeline_name=pipeline_name,
                   pipeline_root=pipeline_root, metadata=metadata, enable_cache=enable_cache,
                   beam_pipeline_args=beam_pipeline_args)


def _node_components(tables, *, mode: str, seeds: Mapping[str, str], fan_outs: Sequence[int],
                     module_file: str, custom_config: Optional[Mapping[str, Any]],
                     train_steps: Optional[int], with_statistics: bool,
                     tuning_config: Optional[Mapping[str, Any]], graph_inference: bool,
                     evaluation: Optional[Mapping[str, Any]]) -> list:
  """(GraphSampler, StatisticsGen, SchemaGen,) (GnnTuner,) GnnTrainer, and what follows it."""
  inference = _inference(graph_inference, tables, sampling_config(fan_outs), SIGNATURES)
  evaluator = (dict(graph_schema=tables.outputs["result"], sampling_config=sampling_config(
      fan_outs), eval_config=dict(evaluation)) if evaluation else None)
  common = dict(module_file=module_file,
                train_args=tfx.proto.TrainArgs(splits=["train"], num_steps=train_steps),
                eval_args=tfx.proto.EvalArgs(splits=["eval"]),
                custom_config=dict(custom_config or {}))
  if mode == IN_MEMORY:
    training = dict(graph_schema=tables.outputs["result"], seeds=dict(seeds),
                    sampling_config=sampling_config(fan_outs), **common)
    return _training_components([], training, tuning_config, inference=inference,
                                evaluator=evaluator)
  sampler = GraphSampler(
      graph_schema=tables.outputs["result"], seeds=dict(seeds),
      sampling_config=sampling_config(fan_outs))
  components = [sampler]
  schema = None
  if with_statistics:
    statistics_gen = tfx.components.StatisticsGen(examples=sampler.outputs["examples"])
    schema_gen = tfx.components.SchemaGen(
        statistics=statistics_gen.outputs["statistics"], infer_feature_shape=False)
    components += [statistics_gen, schema_gen]
    schema = schema_gen.outputs["schema"]
  training = dict(examples=sampler.outputs["examples"],
                  graph_schema=sampler.outputs["output_graph_schema"], schema=schema, **common)
  return _training_components(components, training, tuning_config, inference=inference,
                              evaluator=evaluator)


def eval_config(seeds: Mapping[str, str], task: str = "classification", label: str = "label",
                output: str = "") -> dict[str, Any]:
  """GraphEvaluator's eval_config: a label of the test papers; baselines fit on train's.

  ``output``: the serving output read (a multi-task model's task name).
  """
  return {"task": task, "label": label, "test_seeds": seeds["test"],
          "train_seeds": seeds["train"], **({"output": output} if output else {})}


#: What GraphInferrer writes for every paper: the embedding and the class logits.
SIGNATURES = ("embeddings", "serving_default")


def _inference(enabled: bool, tables, sampling: Mapping[str, Any],
               signatures: Sequence[str]) -> Optional[dict[str, Any]]:
  """GraphInferrer's arguments besides the model, or None."""
  if not enabled:
    return None
  return dict(graph_schema=tables.outputs["result"], sampling_config=dict(sampling),
              inference_config={"signatures": list(signatures)})


def _training_components(components: list, training: Mapping[str, Any],
                         tuning_config: Optional[Mapping[str, Any]], *,
                         inference: Optional[Mapping[str, Any]] = None,
                         evaluator: Optional[Mapping[str, Any]] = None) -> list:
  """``components``, then (GnnTuner and) GnnTrainer with ``training``'s inputs (and a
  GraphInferrer with ``inference``'s, a GraphEvaluator with ``evaluator``'s)."""
  tuner = None
  if tuning_config is not None:
    tuner = GnnTuner(tuning_config=dict(tuning_config), **training)
    components.append(tuner)
  trainer = GnnTrainer(
      hyperparameters=tuner.outputs["best_hyperparameters"] if tuner else None, **training)
  components.append(trainer)
  if inference:
    components.append(GraphInferrer(model=trainer.outputs["model"], **inference))
  if evaluator:
    components.append(GraphEvaluator(model=trainer.outputs["model"], **evaluator))
  return components


def _pipeline(components: list, *, pipeline_name: str, pipeline_root: str,
              metadata: mlmd_connection.Metadata, enable_cache: bool,
              beam_pipeline_args: Optional[Sequence[str]]) -> tfx.dsl.Pipeline:
  return tfx.dsl.Pipeline(
      pipeline_name=pipeline_name, pipeline_root=pipeline_root, components=components,
      enable_cache=enable_cache, beam_pipeline_args=list(beam_pipeline_args or []),
      metadata_connection_config=mlmd_connection.pipeline_connection_config(metadata))


def write_sampled_split(tables_dir: str, seeds: Mapping[str, str], split: str,
                        fan_outs: Sequence[int], output_dir: str) -> str:
  """Samples the subgraphs of a split's seeds from the tables in memory, as GraphSampler would.

  Writes them as ``<output_dir>/Split-<split>/data.tfrecord.gz`` (an Examples
  folder), seeded and with :func:`sampling_config`'s fan-outs, for evaluating
  a model trained in memory.

  Returns:
    ``output_dir``.
  """
  from gnn_trainer_component.in_memory import adapters  # pylint: disable=g-import-not-at-top
  graph = adapters.load(tables_dir, seeds=dict(seeds),
                                sampling_config=sampling_config(fan_outs), splits=[split])
  return _write_split(graph, split, output_dir)


def write_link_split(tables_dir: str, link: Mapping[str, Any], split: str,
                     output_dir: str) -> str:
  """As :func:`write_sampled_split`, the pairs of a held-out link split (LinkSampler's format)."""
  from gnn_trainer_component.in_memory import adapters  # pylint: disable=g-import-not-at-top
  return _write_split(adapters.load(tables_dir, link_config=dict(link), splits=[split]),
                      split, output_dir)


def _write_split(graph, split: str, output_dir: str) -> str:
  path = os.path.join(output_dir, f"Split-{split}", "data.tfrecord.gz")
  tf.io.gfile.makedirs(os.path.dirname(path))
  with tf.io.TFRecordWriter(path, options="GZIP") as writer:
    for record in graph.serialized_examples([split], graph.num_examples([split])):
      writer.write(record)
  return output_dir


def link_config(fan_outs: Sequence[int], seed: int = 0,
                negatives_per_positive: Any = 1) -> dict[str, Any]:
  """LinkSampler's link_config for citations: GAE's split, undirected, seeded."""
  return {"edge_set": "cites", "splits": dict(LINK_SPLITS),
          "negatives_per_positive": negatives_per_positive,
          "hops": [{"cites": int(f)} for f in fan_outs], "undirected": True, "seed": seed}


def create_link_pipeline(*, pipeline_name: str, pipeline_root: str, tables_dir: str,
                         metadata: mlmd_connection.Metadata, link: Mapping[str, Any],
                         module_file: str = LINK_MODULE,
                         custom_config: Optional[Mapping[str, Any]] = None,
                         train_steps: Optional[int] = None,
                         beam_pipeline_args: Optional[Sequence[str]] = None,
                         bulk_infer_split: Optional[str] = None,
                         enable_cache: bool = True,
                         mode: str = IN_MEMORY,
                         graph_inference: bool = False,
                         evaluation_split: Optional[str] = None,
                         negatives_per_query: int = 0) -> tfx.dsl.Pipeline:
  """Builds the Planetoid link-prediction pipeline (tables -> (LinkSampler ->) GnnTrainer).

  With ``bulk_infer_split``, a stock BulkInferrer scores that split's pairs with
  the trained model (``PredictionLog`` records in its ``inference_result``).

  Args:
    pipeline_name: Name in MLMD.
    pipeline_root: Root of all artifacts.
    tables_dir: Folder from ``planetoid.write_planetoid_tables``.
    metadata: Where MLMD lives: a SQLite file, or a ``ConnectionConfig``
      (e.g. a MySQL/MariaDB server: ``pipelines.runtime.mlmd_connection.prepare``).
    link: LinkSampler's link_config (see :func:`link_config`).
    module_file: GnnTrainer user module.
    custom_config: GnnTrainer custom_config.
    train_steps: GnnTrainer train_args.num_steps (None: epochs over the split).
    beam_pipeline_args: Beam args for LinkSampler.
    bulk_infer_split: A split for BulkInferrer (needs LinkSampler's examples:
      :data:`SAMPLED` mode), or None.
    enable_cache: TFX caching.
    mode: :data:`IN_MEMORY`: GnnTrainer holds the tables in memory, with
      ``link`` as its link_config (negatives drawn every epoch); :data:`SAMPLED`:
      LinkSampler's examples.
    graph_inference: Add a GraphInferrer: the embedding of every paper (its
      state as an end of a pair), sampled with the link config's hops.
    evaluation_split: Add a GraphEvaluator of this held-out split of ``link``:
      AUC, AP, MRR and hits@K beside popularity, common neighbours and
      Adamic-Adar on the same pairs, and the blessing.
    negatives_per_query: The evaluation ranks each edge among this many
      negatives drawn for it (0: among every paper).
  """
  if mode not in MODES:
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}.")
  if bulk_infer_split and mode != SAMPLED:
    raise ValueError("bulk_infer_split scores LinkSampler's examples: use mode='sampled'.")
  tables = tfx.dsl.Importer(source_uri=tables_dir,
                            artifact_type=GraphSchema).with_id("graph_tables")
  validation, graph_is_valid = validate_graph(tables)
  with tfx.dsl.Cond(graph_is_valid):
    components = _link_components(
        tables, link=link, mode=mode, module_file=module_file, custom_config=custom_config,
        train_steps=train_steps, bulk_infer_split=bulk_infer_split,
        graph_inference=graph_inference, evaluation_split=evaluation_split,
        negatives_per_query=negatives_per_query)
  return _pipeline([tables, *validation, *components], pipeline_name=pipeline_name,
                   pipeline_root=pipeline_root, metadata=metadata, enable_cache=enable_cache,
                   beam_pipeline_args=beam_pipeline_args)


def _link_components(tables, *, link: Mapping[str, Any], mode: str, module_file: str,
                     custom_config: Optional[Mapping[str, Any]], train_steps: Optional[int],
                     bulk_infer_split: Optional[str], graph_inference: bool,
                     evaluation_split: Optional[str], negatives_per_query: int) -> list:
  """(LinkSampler,) GnnTrainer, and BulkInferrer, GraphInferrer, GraphEvaluator as asked."""
  common = dict(module_file=module_file,
                train_args=tfx.proto.TrainArgs(splits=["train"], num_steps=train_steps),
                eval_args=tfx.proto.EvalArgs(splits=["eval"]),
                custom_config=dict(custom_config or {}))
  if mode == IN_MEMORY:
    trainer = GnnTrainer(graph_schema=tables.outputs["result"], link_config=dict(link), **common)
    components = [trainer]
  else:
    sampler = LinkSampler(graph_schema=tables.outputs["result"], link_config=dict(link))
    trainer = GnnTrainer(examples=sampler.outputs["examples"],
                         graph_schema=sampler.outputs["output_graph_schema"], **common)
    components = [sampler, trainer]
  if bulk_infer_split:
    components.append(tfx.components.BulkInferrer(
        examples=sampler.outputs["examples"], model=trainer.outputs["model"],
        data_spec=tfx.proto.DataSpec(example_splits=[bulk_infer_split]),
        model_spec=tfx.proto.ModelSpec()))
  inference = _inference(graph_inference, tables,
                         {"seed_node_set": "paper", "hops": list(link["hops"])}, ["embeddings"])
  if inference:
    components.append(GraphInferrer(model=trainer.outputs["model"], **inference))
  if evaluation_split:
    components.append(GraphEvaluator(
        model=trainer.outputs["model"], graph_schema=tables.outputs["result"],
        link_config=dict(link),
        # The training's seed: the neighbourhoods GnnTrainer's own ranking sampled.
        eval_config={"task": "link_prediction", "split": evaluation_split,
                     "sampling_seed": int((custom_config or {}).get("seed") or 0),
                     **({"negatives_per_query": negatives_per_query}
                        if negatives_per_query else {})}))
  return components


def without_link_labels(serialized: bytes) -> tuple[bytes, float]:
  """A link example as a serving request (its ``_readout`` label removed) and the label."""
  example = tf.train.Example.FromString(serialized)
  label = example.features.feature.pop("nodes/_readout.label").float_list.value[0]
  return example.SerializeToString(), label


def evaluate_link_model(saved_model_dir: str, examples_uri: str, split: str = "test",
                        batch_size: int = 256) -> dict:
  """ROC AUC and average precision of an exported link model on an Examples split.

  The requests are the split's examples without their labels (serving needs
  none); the labels are compared outside the model with scikit-learn.

  Returns:
    ``{"auc", "average_precision", "hits@10", "hits@50", "num_examples",
    "num_positives"}`` (Hits@K: :func:`hits_at_k`).
  """
  from sklearn import metrics  # pylint: disable=g-import-not-at-top
  labels, scores = [], []
  for batch_labels, outputs in serving.serve_split(
      saved_model_dir, examples_uri, split, batch_size=batch_size,
      split_request=without_link_labels):
    labels.extend(batch_labels)
    scores.extend(np.reshape(serving.single_output(outputs), [-1]).tolist())
  return {"auc": float(metrics.roc_auc_score(labels, scores)),
          "average_precision": float(metrics.average_precision_score(labels, scores)),
          **{f"hits@{k}": hits_at_k(labels, scores, k) for k in HITS_AT},
          "num_examples": len(labels), "num_positives": int(sum(labels))}


#: The K of the Hits@K that :func:`evaluate_link_model` reports.
HITS_AT = (10, 50)


def hits_at_k(labels: Sequence[float], scores: Sequence[float], k: int) -> float:
  """Share of positive pairs scored above the ``k``-th best negative (OGB's ``Hits@K``).

  As ``ogbl-collab`` / ``ogbl-ddi`` rank each positive against all negatives
  of the split: 1.0 when there are fewer than ``k`` negatives; ties count as
  misses.
  """
  labels, scores = np.asarray(labels), np.asarray(scores, dtype=np.float64)
  negatives = scores[labels == 0]
  positives = scores[labels == 1]
  if len(positives) == 0:
    raise ValueError("hits_at_k: no positive pair to rank.")
  if len(negatives) < k:
    return 1.0
  kth = np.sort(negatives)[-k]
  return float((positives > kth).mean())


def evaluate_saved_model(saved_model_dir: str, examples_uri: str, split: str = "test",
                         batch_size: int = 100) -> dict:
  """Root-node accuracy of an exported GnnTrainer model on an Examples split.

  Args:
    saved_model_dir: ``<model uri>/Format-Serving``.
    examples_uri: Examples artifact uri (GraphSampler output).
    split: Split name.
    batch_size: Serving batch size.

  Returns:
    ``{"accuracy": float, "num_examples": int}``; the label is the root
    (node 0) ``nodes/paper.label`` of each example, taken out of the request
    and compared outside the model.
  """
  correct = total = 0
  for labels, outputs in serving.serve_split(
      saved_model_dir, examples_uri, split, batch_size=batch_size,
      split_request=lambda r: _root_labels(r, "label")):
    correct += int((np.argmax(outputs["logits"], axis=-1) == np.array(labels)).sum())
    total += len(labels)
  return {"accuracy": correct / total, "num_examples": total}


def _root_labels(serialized: bytes, name: str) -> tuple[bytes, Any]:
  request, labels = without_node_labels(serialized)
  return request, labels[name]


def without_node_labels(serialized: bytes, names=("label", "citations")) -> tuple[bytes, dict]:
  """A root-node example as a serving request (no ``paper`` label features) and the root's labels."""
  example = tf.train.Example.FromString(serialized)
  labels = {}
  features = example.features.feature
  for name in names:
    key = f"nodes/paper.{name}"
    if key in features:  # (a proto map's pop() would add a missing key first)
      feature = features.pop(key)
      labels[name] = (feature.int64_list.value or feature.float_list.value)[0]
  return example.SerializeToString(), labels


def evaluate_multitask_model(saved_model_dir: str, examples_uri: str, split: str = "test",
                             batch_size: int = 100) -> dict:
  """Scores both outputs of a ``planetoid_multitask.py`` model on a split.

  The requests hold no label features; the root's ``label`` and
  ``citations`` are compared outside the model.

  Returns:
    ``{"accuracy": of output "topic", "citations_mae": of output "citations",
    "citations_mae_of_mean": predicting the split's mean citations (a
    baseline), "num_examples"}``.
  """
  topics, citations, logits, predicted = [], [], [], []
  for labels, outputs in serving.serve_split(saved_model_dir, examples_uri, split,
                                             batch_size=batch_size,
                                             split_request=without_node_labels):
    topics.extend(l["label"] for l in labels)
    citations.extend(l["citations"] for l in labels)
    logits.append(outputs["topic"])
    predicted.extend(np.reshape(outputs["citations"], [-1]).tolist())
  accuracy = float((np.concatenate(logits).argmax(axis=1) == np.array(topics)).mean())
  citations = np.array(citations)
  return {"accuracy": accuracy, "num_examples": len(topics),
          "citations_mae": float(np.abs(np.array(predicted) - citations).mean()),
          "citations_mae_of_mean": float(np.abs(citations.mean() - citations).mean())}
