"""Retrieval evaluation of a link-prediction model: every held-out edge ranked against all targets.

Sampled-negative AUC / AP say how well the model tells one edge from one
random pair. A retrieval system asks another question: given a source node,
is its true target near the top when *every* node of the target node set is a
candidate? This module answers it as OGB's full-ranking link benchmarks do:

1. every node of the predicted edge set's source and target node sets gets
   its embedding from the trained model (the subgraph sampled around it on
   the message-passing graph with its end's hops, read as its end of a pair,
   :class:`readout.NodeAsEnd`: what the ``embeddings`` signature and
   GraphInferrer give);
2. for each held-out positive ``(u, v)`` of the evaluated splits, the task's
   own edge scorer (TF-GNN's ``_compute_edge_scores``: the dot product, or the
   trained Hadamard layer) scores ``(u, w)`` for every node ``w`` of the target
   node set;
3. filtered ranking (:func:`gnn_trainer_component.graph.ranking.filtered_ranks`):
   the candidates are every such ``w`` except ``u`` itself (one node set) and
   the nodes ``u`` has an edge to in the whole edge set (every split; both
   directions when ``undirected``), ``v`` excepted. The rank of ``v`` counts
   ties half (OGB's mean of optimistic and pessimistic rank);
4. ``mrr`` = mean of 1 / rank, ``hits@K`` = share of ranks <= K;
5. the same for a zero-parameter baseline on the same queries and candidates:
   every candidate scored by its popularity in the message-passing graph
   (:func:`popularity`: the most popular targets first), so the metrics say
   whether the GNN beats it.

Exact and brute force (one matrix of scores per batch of sources, a matrix product where the
task scores a pair by a weighted product of its ends): for graphs that fit in memory, as the
rest of :mod:`gnn_trainer_component.in_memory`.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

from absl import logging
import numpy as np
import tensorflow as tf

from gnn_trainer_component.graph import negatives as negatives_lib
from gnn_trainer_component.graph import ranking
from gnn_trainer_component.graph import readout
from gnn_trainer_component.in_memory import dataset as dataset_lib
from gnn_trainer_component.in_memory import embed as embed_lib
from gnn_trainer_component.in_memory import link_pairs
from gnn_trainer_component.model import embeddings as embeddings_lib

#: Prefix of the metric names (Model properties ``retrieval_mrr``, ...).
PREFIX = "retrieval_"
#: After :data:`PREFIX`: the metrics of the most-popular-target baseline.
POPULARITY = "popularity_"
#: Without ``retrieval_splits`` set, the evaluation runs when it takes at most
#: this many scores (queries x nodes; Cora's 527 test edges: 1.4 M).
DEFAULT_MAX_SCORES = 10**9


def metrics(ranks: np.ndarray, hits_at: Sequence[int] = ranking.HITS_AT) -> dict[str, float]:
  """``{"mrr", "hits@K"..., "queries"}`` of filtered ranks (:func:`ranking.rank_metrics`)."""
  if not len(ranks):
    raise ValueError("retrieval metrics: no held-out edge to rank.")
  return {**ranking.rank_metrics(ranks, hits_at), "queries": float(len(ranks))}


def end_embeddings(splits: link_pairs.LinkSplits, embed: Callable[[tf.Tensor], Mapping[str, Any]],
                   *, batch_size: int = 512, seed: int = 0,
                   sources: Optional[np.ndarray] = None) -> dict[str, dict[str, np.ndarray]]:
  """Every node's embeddings as each end of a pair: ``embed`` on its subgraph alone.

  A node is read as its end of a pair (:class:`readout.NodeAsEnd`: (node, node)
  within one node set) on its own end's hops in the message-passing graph:
  what the ``embeddings`` signature and GraphInferrer give.

  Args:
    splits: The graph in memory.
    embed: Serialized LinkSampler-format tf.Examples -> named outputs (the
      embeddings model).
    batch_size: Nodes per call.
    seed: Sampling seed (each batch its own stream of it).
    sources: Sorted node indices of the source node set to embed as sources
      (None: all of them).

  Returns:
    ``"source"`` / ``"target"`` -> output name -> ``[nodes of that end's node
    set, ...]`` array, in node index order (``"source"``: ``sources``' rows).
  """
  graph = splits.message_graph
  out: dict[str, dict[str, np.ndarray]] = {}
  for end, node_set in zip(("source", "target"), splits.end_node_sets, strict=True):
    if (end == "target" and splits.link.same_hops and len(set(splits.end_node_sets)) == 1
        and sources is None):
      out[end] = out["source"]  # one node set, the same hops: the same subgraphs
      continue
    rows = (sources if end == "source" and sources is not None
            else np.arange(graph.node_sets[node_set].size, dtype=np.int64))
    as_end = readout.node_as_end(splits.schema, graph.schema, node_set, who="GnnTrainer")
    parts: dict[str, list[np.ndarray]] = {}
    for _, got in embed_lib.embed_nodes(
        dataset_lib.SubgraphSampler(graph, splits.end_plans[end]),
        np.asarray(rows, np.int64), embed,
        batch_size=batch_size, seed=seed, as_end=as_end):
      for name, value in got.items():
        parts.setdefault(name, []).append(value)
    out[end] = {name: np.concatenate(values) for name, values in parts.items()}
  return out


#: Pairs the task's scorer is probed on per embedding value (:func:`task_scorer`).
PROBES_PER_WEIGHT = 4


def task_scorer(task: Any, embeddings: np.ndarray,
                target_embeddings: Optional[np.ndarray] = None, *, seed: int = 0,
                pairwise: bool = False) -> ranking.ScoreRows:
  """The scores of the trained link ``task`` for ``(source, every target node)``.

  ``target_embeddings``: the candidates' (default: ``embeddings``, one node set).

  TF-GNN's link tasks score a pair by a weighted product of its ends' embeddings (the dot
  product, or the trained Hadamard layer): when the task's scorer reproduces one on random
  pairs drawn with ``seed`` (:func:`ranking.product_weights`), a batch of sources is scored
  against every target by one matrix product (:func:`ranking.product_rows`); any other
  scorer (and every scorer with ``pairwise``) runs on every (source, target) pair of the batch.
  """
  targets = embeddings if target_embeddings is None else target_embeddings
  product = None if pairwise else _as_product(task, embeddings, targets, seed)
  if product is not None:
    return ranking.product_rows(embeddings, targets, *product)
  nodes, candidates = tf.constant(embeddings, tf.float32), tf.constant(targets, tf.float32)
  num_targets = tf.shape(candidates)[0]

  @tf.function(input_signature=[tf.TensorSpec([None], tf.int64)])
  def rows(sources):
    count = tf.shape(sources)[0]
    source = tf.repeat(tf.gather(nodes, sources), num_targets, axis=0)
    target = tf.tile(candidates, [count, 1])
    # TF-GNN has no public API for the edge scores.
    scores = task._compute_edge_scores(source, target)
    return tf.reshape(scores, [count, num_targets])

  return lambda sources: rows(tf.constant(sources, tf.int64)).numpy()


def _as_product(task: Any, sources: np.ndarray, targets: np.ndarray, seed: int
                ) -> Optional[tuple[np.ndarray, float]]:
  """``(w, b)`` of the task's scorer on random pairs of these ends, or None (see above)."""
  width = int(np.prod(sources.shape[1:], dtype=np.int64))
  if (width != int(np.prod(targets.shape[1:], dtype=np.int64))
      or not len(sources) or not len(targets)):
    return None
  rng = np.random.default_rng(seed)
  count = PROBES_PER_WEIGHT * (width + 1)
  source = sources[rng.integers(0, len(sources), count)]
  target = targets[rng.integers(0, len(targets), count)]
  # TF-GNN has no public API for the edge scores.
  scores = np.asarray(task._compute_edge_scores(tf.constant(source, tf.float32),
                                                tf.constant(target, tf.float32)))
  if scores.size != count:  # more than one score per pair
    return None
  return ranking.product_weights(source, target, scores.reshape(count))


def popularity(splits: link_pairs.LinkSplits) -> np.ndarray:
  """Each target node's popularity in the message-passing graph, as the popularity negatives'.

  :func:`negatives.popularity` of the message split's positives: its degree among the
  distinct edges (no self loops) not held out, both ends counted when ``undirected``.
  """
  size = splits.message_graph.node_sets[splits.end_node_sets[1]].size
  return negatives_lib.popularity(splits.positives[splits.link.message_split], size,
                                  splits.link.undirected)


def link_tasks(tasks: Mapping[str, Any]) -> list[str]:
  """The tasks retrieval can score: TF-GNN link-prediction tasks (and subclasses)."""
  return [name for name, task in tasks.items() if embeddings_lib.rule(task) == "link"]


def _candidates(splits: link_pairs.LinkSplits) -> dict[str, Any]:
  """:func:`ranking.filtered_ranks`' candidate arguments: every node of the target node set."""
  source_set, target_set = splits.end_node_sets
  graph = splits.message_graph
  return dict(num_candidates=graph.node_sets[target_set].size,
              num_sources=graph.node_sets[source_set].size,
              one_node_set=source_set == target_set)


def _task_scorers(tasks: Mapping[str, Any], embedded: Mapping[str, Mapping[str, np.ndarray]], *,
                  single_task: bool, sources: Optional[np.ndarray] = None
                  ) -> dict[str, ranking.ScoreRows]:
  """``"[<task>/]retrieval_"`` -> the link task's scorer on :func:`end_embeddings`' output.

  ``sources``: the sorted source nodes ``embedded`` holds (None: all, in index order).
  """
  scorers = {}
  for name in link_tasks(tasks):
    prefix = "" if single_task else f"{name}/"
    score = task_scorer(
        tasks[name], embedded["source"][f"{prefix}source_{embeddings_lib.EMBEDDING}"],
        embedded["target"][f"{prefix}target_{embeddings_lib.EMBEDDING}"])
    scorers[f"{prefix}{PREFIX}"] = (
        score if sources is None
        else lambda nodes, score=score: score(np.searchsorted(sources, nodes)))
  return scorers


def validation(splits: link_pairs.LinkSplits, split_names: Sequence[str], embed: Callable,
               tasks: Mapping[str, Any], *, single_task: bool, max_queries: int, seed: int
               ) -> dict[str, float]:
  """The ranking of :func:`evaluate` on a sample of held-out positives: one epoch's check.

  At most ``max_queries`` positives of the splits (drawn without replacement with ``seed``, the
  same every epoch) are ranked against every node of the target node set, filtered as
  :func:`evaluate` ranks; only their sources and the targets are embedded, so it is cheap
  enough to run after every epoch (``restore_best_weights_by: "max:val_retrieval_mrr"``).

  Returns:
    ``{"retrieval_mrr": ..., "retrieval_hits@K": ..., "retrieval_queries": ...}``, names
    prefixed ``<task>/`` with several tasks; no baseline.
  """
  queries = np.concatenate([splits.positives[name] for name in split_names])
  if len(queries) > max_queries:
    queries = queries[np.sort(np.random.default_rng(seed).choice(
        len(queries), max_queries, replace=False))]
  sources = np.unique(queries[:, 0])
  embedded = end_embeddings(splits, embed, seed=seed, sources=sources)
  candidates, out = _candidates(splits), {}
  for prefix, scorer in _task_scorers(tasks, embedded, single_task=single_task,
                                      sources=sources).items():
    ranks = ranking.filtered_ranks(scorer, queries, splits.edge_keys, **candidates)
    out.update({f"{prefix}{key}": value for key, value in metrics(ranks).items()})
  return out


def evaluate(splits: link_pairs.LinkSplits, split_names: Sequence[str], embed: Callable,
             tasks: Mapping[str, Any], *, single_task: bool, seed: int = 0
             ) -> dict[str, float]:
  """Retrieval metrics of every link task, and of the popularity baseline, split by split.

  Args:
    splits: The graph and its link splits, in memory.
    split_names: Held-out splits whose positives are ranked, each on its own.
    embed: The trained embeddings model (serialized examples -> outputs named
      as the ``embeddings`` signature's).
    tasks: The module's tasks; the link tasks among them are evaluated.
    single_task: The outputs have no ``<task>/`` prefix.
    seed: Sampling seed of the nodes' subgraphs.

  Returns:
    ``{"retrieval_mrr": ..., "retrieval_hits@20": ..., "retrieval_queries": ...}``
    (names prefixed ``<task>/`` with several tasks), and the same of the
    baseline that ranks the candidates by :func:`popularity`,
    ``"retrieval_popularity_mrr"``, ... (once, unprefixed). With several
    splits, each split's metrics carry its name: ``retrieval_test_mrr``,
    ``retrieval_popularity_test_mrr``, ...
  """
  embedded = end_embeddings(splits, embed, seed=seed)
  candidates = _candidates(splits)
  target_set = splits.end_node_sets[1]
  scorers = _task_scorers(tasks, embedded, single_task=single_task)
  degree = popularity(splits)
  scorers[f"{PREFIX}{POPULARITY}"] = lambda sources: np.broadcast_to(
      degree, (len(sources), len(degree)))
  out = {}
  for split in split_names:
    infix = f"{split}_" if len(split_names) > 1 else ""
    for prefix, scorer in scorers.items():
      ranks = ranking.filtered_ranks(scorer, splits.positives[split], splits.edge_keys,
                                     **candidates)
      for key, value in metrics(ranks).items():
        if key != "queries" or POPULARITY not in prefix:
          out[f"{prefix}{infix}{key}"] = value
  logging.info("GnnTrainer: retrieval over all %d nodes of %r, the edges of splits %s: %s",
               candidates["num_candidates"], target_set, list(split_names), out)
  return out
