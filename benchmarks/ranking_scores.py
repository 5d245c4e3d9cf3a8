"""Benchmark: scoring every candidate for each ranked query, pair by pair or by a matrix product.

  python -m benchmarks.ranking_scores [--sources 20000] [--targets 5000] [--dim 32]
      [--queries 49879] [--rounds 3] [--output benchmarks/results/ranking-scores.json]

GnnTrainer's retrieval ranking (``retrieval_splits``, and each epoch's ``val_retrieval_*``)
scores each held-out ``(source, target)`` against every node of the target node set with the
link task's edge scorer (:func:`gnn_trainer_component.in_memory.retrieval.task_scorer`). The
default sizes are ``benchmarks.recommendation``'s graph (20k users, 5k items, the test split's
49,879 ratings; the shipped module's 32 units). Random embeddings and a trained-shape
``HadamardProductLinkPrediction``; the same queries and known edges for both variants, run
alternately in one process, ``--rounds`` times each:

* ``pairwise``: every (source, candidate) pair of a batch through the task's
  ``_compute_edge_scores`` in a ``tf.function`` (the only path before; still the path of a
  scorer that is no weighted product);
* ``product``: the task's scorer found to be a weighted product of the ends on random pairs,
  each batch of sources scored by one matrix product.

Prints seconds (median), the filtered MRR of each (equal up to float rounding), and the
largest difference of their ranks.
"""

from __future__ import annotations

import argparse
from typing import Optional, Sequence

import numpy as np

from benchmarks import report


def run(args: argparse.Namespace) -> dict:
  """Both variants on one random problem, alternately; seconds, MRR and rank differences."""
  # pylint: disable=g-import-not-at-top
  import gnn_trainer_component
  gnn_trainer_component.setup_process()
  import tensorflow as tf
  from tensorflow_gnn import runner
  from gnn_trainer_component.graph import negatives as negatives_lib
  from gnn_trainer_component.graph import ranking
  from gnn_trainer_component.in_memory import retrieval
  rng = np.random.default_rng(args.seed)
  sources = rng.normal(size=(args.sources, args.dim)).astype(np.float32)
  targets = rng.normal(size=(args.targets, args.dim)).astype(np.float32)
  edges = np.unique(np.c_[rng.integers(0, args.sources, 25 * args.sources),
                          rng.integers(0, args.targets, 25 * args.sources)], axis=0)
  queries = edges[rng.choice(len(edges), min(args.queries, len(edges)), replace=False)]
  known = negatives_lib.EdgeKeys(edges[:, 0], edges[:, 1], args.targets, False)
  task = runner.HadamardProductLinkPrediction()
  task._compute_edge_scores(tf.constant(sources[:1]), tf.constant(targets[:1]))  # builds it

  def ranks(pairwise: bool) -> np.ndarray:
    scorer = retrieval.task_scorer(task, sources, targets, pairwise=pairwise)
    return ranking.filtered_ranks(scorer, queries, known, args.targets,
                                  num_sources=args.sources, one_node_set=False)

  seconds, medians, ranked = report.alternate(
      {"pairwise": lambda: ranks(True), "product": lambda: ranks(False)}, args.rounds)
  return {
      "config": vars(args), "queries": len(queries), "seconds": seconds,
      "median_seconds": medians,
      "pairwise_over_product": round(medians["pairwise"] / medians["product"], 1),
      "mrr": {v: float(np.mean(1.0 / r)) for v, r in ranked.items()},
      "max_rank_difference": float(np.max(np.abs(ranked["pairwise"] - ranked["product"]))),
      "peak_rss_mb": round(report.peak_rss_bytes() / 2**20)}


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--sources", type=int, default=20000)
  parser.add_argument("--targets", type=int, default=5000)
  parser.add_argument("--dim", type=int, default=32)
  parser.add_argument("--queries", type=int, default=49879)
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--output", default=None)
  args = parser.parse_args(argv)
  report.print_result(run(args), args.output)
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
