"""GraphEvaluator's link-prediction model: its score of each pair and its rank of each query.

Every pair (a held-out split's edges, then its negatives) is encoded as
LinkSampler's example and scored by the export's ``serving_default``: AUC and
average precision. The model ranks when its score of a pair is a weighted
product of its ends' embeddings, ``sum_i w_i s_i t_i + b`` (TF-GNN's
``DotProductLinkPrediction``: ``w = 1``, ``b = 0``;
``HadamardProductLinkPrediction``: its ``Dense(1)`` on ``s * t``). ``w`` and
``b`` are found from the pairs themselves (the ``embeddings`` signature
against ``serving_default``, least squares) and must reproduce every pair's
score; its candidates are embedded as GraphInferrer embeds them, and ranked by
the graph core's protocol (:class:`~gnn_trainer_component.graph.ranking.Ranking`).
A split by time ranks each query among its negatives, every pair scored on its
subgraph as of the query's time.
"""

from __future__ import annotations

from typing import Mapping, Optional

from absl import logging
import numpy as np
import tensorflow as tf

from gnn_trainer_component.evaluator import config as config_lib
from gnn_trainer_component.evaluator.blessing import EvaluationInputError
from gnn_trainer_component.evaluator.in_memory import WHO
from gnn_trainer_component.graph import ranking
from gnn_trainer_component.in_memory import link_pairs
from gnn_trainer_component.in_memory import retrieval
from gnn_trainer_component.model import embeddings as embeddings_lib
from gnn_trainer_component.model import export as export_lib
from gnn_trainer_component.model import loading

SIGNATURES = (export_lib.SERVING_SIGNATURE, embeddings_lib.SIGNATURE)
_SOURCE, _TARGET = (f"{end}_{embeddings_lib.EMBEDDING}" for end in ("source", "target"))


def score(model_dir: str, splits: link_pairs.LinkSplits,
          sampler: link_pairs.LinkSubgraphSampler, task: ranking.Ranking,
          cfg: config_lib.EvalConfig) -> tuple[np.ndarray, Optional[np.ndarray]]:
  """A model's score of every pair of ``sampler`` and its rank of each query (None: no ranks).

  Raises:
    EvaluationInputError: a model that is no link-prediction model of this
      graph, or whose pair score ``eval_config`` does not name.
  """
  signatures = _signatures(model_dir, splits)
  outputs = _score_pairs(signatures, sampler, cfg)
  picked = _pick(outputs, cfg, model_dir)
  scores = outputs[f"serving_default:{picked[0]}"].reshape(sampler.num_rows)
  return scores, _model_ranks(signatures, outputs, picked, scores, splits, task, cfg, model_dir)


def outputs_of(model_dir: str, splits: link_pairs.LinkSplits,
               sampler: link_pairs.LinkSubgraphSampler, cfg: config_lib.EvalConfig
               ) -> np.ndarray:
  """The model's output for every pair of ``sampler``, ``[pairs, units]`` (an edge's label).

  Raises:
    EvaluationInputError: a model not trained on pairs of this graph, or
      whose output ``eval_config`` does not name.
  """
  outputs = _score_pairs(_signatures(model_dir, splits), sampler, cfg)
  output, _ = _pick(outputs, cfg, model_dir)
  return outputs[f"serving_default:{output}"].reshape(sampler.num_rows, -1)


def _signatures(model_dir: str, splits: link_pairs.LinkSplits) -> loading.Signatures:
  """The export's pair scores and ends' embeddings, by their own output names."""
  try:
    loading.check_pair_model(model_dir, splits.message_graph.schema, WHO,
                             "eval_config task 'link_prediction', 'edge_regression' or "
                             "'edge_classification'")
  except loading.InferenceInputError as e:
    raise EvaluationInputError(str(e)) from e
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


def _model_ranks(signatures: loading.Signatures, outputs: Mapping[str, np.ndarray],
                 picked: tuple[str, Optional[str]], score: np.ndarray,
                 splits: link_pairs.LinkSplits, task: ranking.Ranking,
                 cfg: config_lib.EvalConfig, model_dir: str) -> Optional[np.ndarray]:
  """The rank of each edge by the model (see the module doc), or None where it has none."""
  output, prefix = picked
  if splits.link.time:
    if task.negatives is None:
      logging.info("%s: link_config splits by time: ranking a query against every node would "
                   "embed each node as of the query's time; give eval_config "
                   "negatives_per_query for MRR / hits@K.", WHO)
      return None
    scorer = _pair_scorer(signatures, splits, cfg, output)
    return task.timed_ranks(scorer, positive_scores=score[:len(task.queries)])
  if prefix is None:
    return None
  key = f"{embeddings_lib.SIGNATURE}:{prefix}"
  found = ranking.product_weights(outputs[key + _SOURCE], outputs[key + _TARGET], score)
  if found is None:
    logging.info("%s: the model at %s does not score a pair by a weighted product of its "
                 "ends' embeddings: no MRR / hits@K for it.", WHO, model_dir)
    return None
  weights, bias = found
  embed = signatures.functions[embeddings_lib.SIGNATURE]
  ends = retrieval.end_embeddings(
      splits, lambda e: {k: v.numpy() for k, v in embed(examples=e).items()},
      batch_size=cfg.batch_size, seed=cfg.sampling_seed)
  return task.ranks(ranking.product_rows(ends["source"][prefix + _SOURCE],
                                         ends["target"][prefix + _TARGET], weights, bias))


def _pair_scorer(signatures: loading.Signatures, splits: link_pairs.LinkSplits,
                 cfg: config_lib.EvalConfig, output: str) -> ranking.PairScorer:
  """The model's score of pairs, each on its subgraph as of its time (``serving_default``)."""

  def score(pairs: np.ndarray, times: np.ndarray) -> np.ndarray:
    sampler = link_pairs.LinkSubgraphSampler(splits, pairs, np.zeros(len(pairs)), 0,
                                             times=np.asarray(times, np.float64))
    return _score_pairs(signatures, sampler, cfg)[f"serving_default:{output}"].reshape(-1)
  return score
