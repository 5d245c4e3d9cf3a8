"""GraphEvaluator's link-prediction engine: a held-out split's pairs, scored and ranked.

The graph is loaded and split as GnnTrainer splits it for the same
``link_config`` (the graph core's seeded rules: the same held-out edges, the
same fixed negatives, the same message-passing graph without the held-out
edges). Then, on one held-out split:

* every pair (its edges, then its negatives) is encoded as LinkSampler's
  example and scored by the export's ``serving_default``: AUC and average
  precision;
* each edge is ranked against every node of the target node set, the other
  known edges filtered (:func:`~gnn_trainer_component.in_memory.retrieval.filtered_ranks`,
  OGB's full ranking), or with ``negatives_per_query`` against that many
  negative targets drawn for it (:func:`query_negatives`, as ogbl-citation2):
  MRR and hits@K. The model ranks when its score of a pair
  is a weighted product of its ends' embeddings, ``sum_i w_i s_i t_i + b``
  (TF-GNN's ``DotProductLinkPrediction``: ``w = 1``, ``b = 0``;
  ``HadamardProductLinkPrediction``: its ``Dense(1)`` on ``s * t``). ``w`` and
  ``b`` are found from the pairs themselves (the ``embeddings`` signature
  against ``serving_default``, least squares) and must reproduce every pair's
  score; its candidates are embedded as GraphInferrer embeds them;
* the baselines (:mod:`baselines`) score and rank the same pairs.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, Mapping, Optional

from absl import logging
import numpy as np
import tensorflow as tf

from gnn_trainer_component.evaluator import baselines as baselines_lib
from gnn_trainer_component.evaluator import config as config_lib
from gnn_trainer_component.evaluator.blessing import EvaluationInputError
from gnn_trainer_component.evaluator.in_memory import Predictions
from gnn_trainer_component.evaluator.in_memory import Structure
from gnn_trainer_component.evaluator.in_memory import node_column
from gnn_trainer_component.evaluator.in_memory import WHO
from gnn_trainer_component.graph import ids as graph_ids
from gnn_trainer_component.graph import negatives as negatives_lib
from gnn_trainer_component.graph import readout
from gnn_trainer_component.in_memory import adapters
from gnn_trainer_component.in_memory import link_pairs
from gnn_trainer_component.in_memory import retrieval
from gnn_trainer_component.model import embeddings as embeddings_lib
from gnn_trainer_component.model import export as export_lib
from gnn_trainer_component.model import loading

SIGNATURES = (export_lib.SERVING_SIGNATURE, embeddings_lib.SIGNATURE)
_SOURCE, _TARGET = (f"{end}_{embeddings_lib.EMBEDDING}" for end in ("source", "target"))


def _signatures(model_dir: str, splits: link_pairs.LinkSplits) -> loading.Signatures:
  """The export's pair scores and ends' embeddings, by their own output names."""
  trained = loading.trained_schema(model_dir)
  if trained is not None and readout.READOUT_SOURCE not in trained.edge_sets:
    raise EvaluationInputError(
        f"{WHO}: the model at {model_dir} was not trained on pairs (its graph schema has no "
        f"{readout.READOUT_SOURCE!r} readout); eval_config task 'link_prediction' evaluates a "
        "link-prediction model.")
  loading.check_features(model_dir, trained, splits.message_graph.schema, WHO)
  functions, _ = loading.load_functions(model_dir, SIGNATURES, WHO)
  columns = {(n, key): f"{n}:{key}" for n, f in functions.items() for key in f.structured_outputs}
  return loading.Signatures(functions, columns, WHO)


def _pick(outputs: Mapping[str, np.ndarray], cfg: config_lib.EvalConfig, model_dir: str
          ) -> tuple[str, Optional[str]]:
  """The pair score's column, and the prefix of the ends' embeddings (None: no embeddings)."""
  scores = sorted(k.split(":", 1)[1] for k in outputs if k.startswith("serving_default:"))
  output = cfg.output or (scores[0] if len(scores) == 1 else "")
  if output not in scores:
    raise EvaluationInputError(
        f"{WHO}: serving_default of the model at {model_dir} has outputs {scores}; name the "
        f"pair score to evaluate in eval_config 'output' (one of them).")
  for prefix in (f"{output}/", ""):
    if f"{embeddings_lib.SIGNATURE}:{prefix}{_SOURCE}" in outputs:
      return output, prefix
  return output, None


def _score_pairs(signatures: loading.Signatures, sampler: link_pairs.LinkSubgraphSampler,
                 cfg: config_lib.EvalConfig) -> dict[str, np.ndarray]:
  """Every output of both signatures on every pair's example, in row order."""
  parts: dict[str, list[np.ndarray]] = {}
  for examples in sampler.batches(np.arange(sampler.num_rows), batch_size=cfg.batch_size,
                                  seed=cfg.sampling_seed):
    serialized = tf.constant([e.SerializeToString() for e in examples])
    for name, value in signatures.run(serialized).items():
      parts.setdefault(name, []).append(value)
  return {name: np.concatenate(values) for name, values in parts.items()}


def product_weights(source: np.ndarray, target: np.ndarray, score: np.ndarray
                    ) -> Optional[tuple[np.ndarray, float]]:
  """``(w, b)`` with ``score = sum_i w_i source_i target_i + b`` for every pair, or None.

  None when no such ``w``, ``b`` reproduce the scores (to 1e-3 of their scale), or the
  pairs are too few to tell.
  """
  features = source.reshape(len(source), -1) * target.reshape(len(target), -1)
  if len(score) <= features.shape[1] + 1:
    return None
  design = np.c_[features, np.ones(len(score))].astype(np.float64)
  coef, *_ = np.linalg.lstsq(design, score.astype(np.float64), rcond=None)
  scale = max(1.0, float(np.abs(score).max()))
  if np.abs(design @ coef - score).max() > 1e-3 * scale:
    return None
  return coef[:-1], float(coef[-1])


def _model_ranks(signatures: loading.Signatures, outputs: Mapping[str, np.ndarray],
                 picked: tuple[str, Optional[str]], score: np.ndarray,
                 splits: link_pairs.LinkSplits, queries: np.ndarray, cfg: config_lib.EvalConfig,
                 model_dir: str, negatives: Optional[np.ndarray],
                 query_times: Optional[np.ndarray]) -> Optional[np.ndarray]:
  """The rank of each edge by the model (see the module doc), or None where it has none."""
  output, prefix = picked
  if splits.link.time:
    if negatives is None:
      logging.info("%s: link_config splits by time: ranking a query against every node would "
                   "embed each node as of the query's time; give eval_config "
                   "negatives_per_query for MRR / hits@K.", WHO)
      return None
    return timed_ranks(_pair_scorer(signatures, splits, cfg, output), queries, negatives,
                       query_times, positive_scores=score[:len(queries)])
  if prefix is None:
    return None
  key = f"{embeddings_lib.SIGNATURE}:{prefix}"
  found = product_weights(outputs[key + _SOURCE], outputs[key + _TARGET], score)
  if found is None:
    logging.info("%s: the model at %s does not score a pair by a weighted product of its "
                 "ends' embeddings: no MRR / hits@K for it.", WHO, model_dir)
    return None
  weights, bias = found
  embed = signatures.functions[embeddings_lib.SIGNATURE]
  ends = retrieval.end_embeddings(
      splits, lambda e: {k: v.numpy() for k, v in embed(examples=e).items()},
      batch_size=cfg.batch_size, seed=cfg.sampling_seed)
  sources = ends["source"][prefix + _SOURCE].reshape(-1, len(weights)) * weights
  targets = ends["target"][prefix + _TARGET].reshape(-1, len(weights))
  return _ranks(lambda rows: sources[rows] @ targets.T + bias, splits, queries, negatives)


#: ``(pairs [N, 2], times [N]) -> scores [N]``: a predictor's score of each pair at its time.
PairScorer = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _pair_scorer(signatures: loading.Signatures, splits: link_pairs.LinkSplits,
                 cfg: config_lib.EvalConfig, output: str) -> PairScorer:
  """The model's score of pairs, each on its subgraph as of its time (``serving_default``)."""

  def score(pairs: np.ndarray, times: np.ndarray) -> np.ndarray:
    sampler = link_pairs.LinkSubgraphSampler(splits, pairs, np.zeros(len(pairs)), 0,
                                             times=np.asarray(times, np.float64))
    return _score_pairs(signatures, sampler, cfg)[f"serving_default:{output}"].reshape(-1)
  return score


def timed_ranks(score: PairScorer, queries: np.ndarray, negatives: np.ndarray,
                times: np.ndarray, positive_scores: Optional[np.ndarray] = None) -> np.ndarray:
  """Each query's target ranked among its negatives, every pair scored at the query's time.

  ``positive_scores``: the queries' own scores, if already known. Ties count half.
  """
  q, k = negatives.shape
  positive = score(queries, times) if positive_scores is None else positive_scores
  against = score(np.stack([np.repeat(queries[:, 0], k), negatives.reshape(-1)], axis=1),
                  np.repeat(times, k)).reshape(q, k)
  positive = np.asarray(positive, np.float64)[:, None]
  return 1.0 + (against > positive).sum(1) + 0.5 * (against == positive).sum(1)


def query_negatives(queries: np.ndarray, count: int, known: negatives_lib.EdgeKeys,
                    num_targets: int, *, one_node_set: bool, seed: int,
                    appeared: Optional[tuple[np.ndarray, np.ndarray]] = None) -> np.ndarray:
  """``[Q, count]`` distinct negative targets per query: seeded, no ``known`` edge, not its source.

  Each is a negative by the graph core's rule
  (:func:`~gnn_trainer_component.graph.negatives.is_negative`, as every engine's).
  ``appeared``: ``node_time``: (each query's time, each target's time): a
  query's negatives are among the targets there at its time.

  Raises:
    EvaluationInputError: a source with fewer than ``count`` such targets.
  """
  rng = np.random.default_rng(seed)
  out = np.empty((len(queries), count), np.int64)
  for i, source in enumerate(queries[:, 0]):

    def allowed(candidates, source=source, i=i):  # the graph core's rule of negatives
      return candidates[negatives_lib.is_negative(
          np.full(len(candidates), source), candidates, known, one_node_set=one_node_set,
          born=None if appeared is None else appeared[1],
          at=None if appeared is None else appeared[0][i])]

    drawn = np.unique(allowed(rng.integers(0, num_targets, 2 * count + 8)))
    if len(drawn) < count:  # few non-edges: draw from all of them
      drawn = allowed(np.arange(num_targets))
      if len(drawn) < count:
        raise EvaluationInputError(
            f"{WHO}: eval_config negatives_per_query {count}: source node index {source} has "
            f"{len(drawn)} non-edges among the {num_targets} candidate targets"
            + ("" if appeared is None else
               f" that had appeared by its query's time {appeared[0][i]:g} (node_time)") + ".")
    out[i] = rng.choice(drawn, count, replace=False)
  return out


def _ranks(score_rows, splits: link_pairs.LinkSplits, queries: np.ndarray,
           negatives: Optional[np.ndarray] = None) -> np.ndarray:
  """Each query's rank: among every target, filtered, or among its ``negatives``."""
  if negatives is not None:
    return sampled_ranks(score_rows, queries, negatives)
  source_set, target_set = splits.end_node_sets
  graph = splits.message_graph
  return retrieval.filtered_ranks(
      score_rows, queries, splits.edge_keys, graph.node_sets[target_set].size,
      num_sources=graph.node_sets[source_set].size, one_node_set=source_set == target_set)


def sampled_ranks(score_rows, queries: np.ndarray, negatives: np.ndarray,
                  chunk: int = 1024) -> np.ndarray:
  """Each query's target ranked among its own negatives (ties counted half)."""
  ranks = np.empty(len(queries), np.float64)
  for start in range(0, len(queries), chunk):
    q, neg = queries[start:start + chunk], negatives[start:start + chunk]
    scores = np.asarray(score_rows(q[:, 0]), dtype=np.float64)
    rows = np.arange(len(q))
    positive = scores[rows, q[:, 1]][:, None]
    against = scores[rows[:, None], neg]
    ranks[start:start + len(q)] = 1.0 + (against > positive).sum(1) + 0.5 * (
        against == positive).sum(1)
  return ranks


def _baselines(splits: link_pairs.LinkSplits, pairs: np.ndarray, queries: np.ndarray,
               negatives: Optional[np.ndarray], pair_times: Optional[np.ndarray] = None,
               query_times: Optional[np.ndarray] = None
               ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
  """Each baseline's pair scores and edge ranks (a time split: as of each pair's time)."""
  if splits.link.time:
    scorers = timed_baselines(splits)
    scores = {name: fn(pairs, pair_times) for name, fn in scorers.items()}
    ranks = ({} if negatives is None else
             {name: timed_ranks(fn, queries, negatives, query_times)
              for name, fn in scorers.items()})
    return scores, ranks
  degree = retrieval.popularity(splits)
  scores = {baselines_lib.POPULARITY: degree[pairs[:, 1]]}
  ranks = {baselines_lib.POPULARITY: _ranks(
      lambda rows: np.broadcast_to(degree, (len(rows), len(degree))), splits, queries,
      negatives)}
  source_set, target_set = splits.end_node_sets
  if source_set == target_set:
    graph = splits.message_graph
    within = _within(splits)
    neighbours = baselines_lib.NeighbourScores(
        graph.node_sets[source_set].size,
        np.concatenate([graph.edge_sets[n].source for n in within]),
        np.concatenate([graph.edge_sets[n].target for n in within]))
    for name in (baselines_lib.COMMON_NEIGHBOURS, baselines_lib.ADAMIC_ADAR):
      scores[name] = neighbours.pairs(name, pairs)
      ranks[name] = _ranks(lambda rows, n=name: neighbours.rows(n, rows), splits, queries,
                           negatives)
  return scores, ranks


def _within(splits: link_pairs.LinkSplits) -> list[str]:
  """The edge sets within the (one) node set of the pairs."""
  node_set = splits.end_node_sets[0]
  return [n for n, e in splits.message_graph.schema.edge_sets.items()
          if e.source == node_set and e.target == node_set]


def timed_baselines(splits: link_pairs.LinkSplits) -> dict[str, PairScorer]:
  """The baselines of a time split, each reading only the edges before a pair's time.

  ``popularity`` counts the predicted edge set's distinct edges (every split's
  positives, as the graph core counts popularity); ``common_neighbours`` and
  ``adamic_adar`` (one node set) the edge sets within it that have a time: the
  link's and those the hops read by time.
  """
  link, graph = splits.link, splits.message_graph
  rules = splits.plan.time_rules()
  inclusive = rules.get(link.edge_set, ("", False))[1]
  source_set, target_set = splits.end_node_sets
  names = sorted(splits.positives)
  out: dict[str, PairScorer] = {baselines_lib.POPULARITY: baselines_lib.TimedPopularity(
      np.concatenate([splits.positives[s] for s in names]),
      np.concatenate([splits.positive_times[s] for s in names]),
      graph.node_sets[target_set].size, link.undirected, inclusive).pairs}
  if source_set == target_set:
    timed = {**{n: f for n, (f, _) in rules.items()}, link.edge_set: link.time}
    within = [n for n in _within(splits) if n in timed]
    neighbours = baselines_lib.TimedNeighbourScores(
        graph.node_sets[source_set].size,
        np.concatenate([graph.edge_sets[n].source for n in within]),
        np.concatenate([graph.edge_sets[n].target for n in within]),
        np.concatenate([np.asarray(graph.edge_sets[n].features[timed[n]], np.float64)
                        for n in within]), inclusive)
    for name in (baselines_lib.COMMON_NEIGHBOURS, baselines_lib.ADAMIC_ADAR):
      out[name] = functools.partial(neighbours.pairs, name)
  return out


def _run_model(model_dir: str, splits, sampler, cfg, queries, negatives, pairs_with_ranks,
               query_times):
  signatures = _signatures(model_dir, splits)
  outputs = _score_pairs(signatures, sampler, cfg)
  picked = _pick(outputs, cfg, model_dir)
  score = outputs[f"serving_default:{picked[0]}"].reshape(sampler.num_rows)
  ranks = _model_ranks(signatures, outputs, picked, score, splits, queries, cfg, model_dir,
                       negatives, query_times)
  return score, None if ranks is None else pairs_with_ranks(ranks)


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
  positives, negatives = splits.positives[cfg.split], splits.negatives[cfg.split]
  pairs = np.concatenate([positives, negatives])
  labels = np.r_[np.ones(len(positives)), np.zeros(len(negatives))].astype(np.int64)
  sampler = splits.pair_sampler([cfg.split], training=False)
  source_set, target_set = splits.end_node_sets
  negatives_per_query = (query_negatives(
      positives, cfg.negatives_per_query, splits.edge_keys,
      splits.message_graph.node_sets[target_set].size, one_node_set=source_set == target_set,
      seed=cfg.sampling_seed,
      appeared=(splits.positive_times[cfg.split], splits.node_times[1])
      if splits.node_times is not None else None) if cfg.negatives_per_query else None)

  def with_negatives(ranks: np.ndarray) -> np.ndarray:
    return np.r_[ranks, np.full(len(negatives), np.nan)]

  query_times = pair_times = None
  if splits.link.time:
    query_times = splits.positive_times[cfg.split]
    pair_times = np.r_[query_times, splits.negative_times.get(cfg.split, np.zeros(0))]

  by_predictor, ranks = {}, {}
  models = {"model": model_dir}
  if baseline_model_dir:
    models["baseline_model"] = baseline_model_dir
  for name, directory in models.items():
    by_predictor[name], got = _run_model(directory, splits, sampler, cfg, positives,
                                         negatives_per_query, with_negatives, query_times)
    if got is not None:
      ranks[name] = got
  scores, baseline_ranks = _baselines(splits, pairs, positives, negatives_per_query,
                                      pair_times, query_times)
  by_predictor.update(scores)
  ranks.update({name: with_negatives(r) for name, r in baseline_ranks.items()})
  graph = splits.message_graph
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
      seconds=time.monotonic() - start, ranks=ranks)
