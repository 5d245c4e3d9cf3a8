"""Benchmark: GraphEvaluator's item-kNN / user-kNN, the neighbours kept for each count tried.

  python -m benchmarks.knn_selection [--users 20000] [--items 5000] [--ratings-per-user 25]
      [--rounds 3] [--output benchmarks/results/knn-selection.json]

GraphEvaluator's kNN baselines (``evaluator/interactions.py``) compute each user's and each
item's ``max(NEIGHBOUR_CHOICES)`` most similar others once, then, choosing the count on the
validation split, keep the best ``k`` of them for every ``k`` of ``NEIGHBOUR_CHOICES``
(``KnnScores.use``). On ``benchmarks.recommendation``'s rating graph
(``pipelines/recommendation/data.py``, the same defaults), alternately, ``--rounds`` times:

* ``dense_blocks``: each ``k`` selected from the precomputed neighbours made dense a block
  of rows at a time (2^20 cells: for 20k users, 400M cells per ``k``), as before;
* ``ranked``: each row's stored neighbours sorted once (``_RankedRows``, its sort counted in
  every round), then the first ``k`` kept for each ``k``.

Prints the seconds of the precomputation and of the selections (medians), whether both keep
the same weights, and this process's peak memory.
"""

from __future__ import annotations

import argparse
import time
from typing import Optional, Sequence

from benchmarks import report


def run(args: argparse.Namespace) -> dict:
  """The precomputation once, then both selections for every count, alternately."""
  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component.evaluator import interactions
  from pipelines.recommendation import data
  pairs = data.ratings(args.users, args.items, args.ratings_per_user, args.seed).pairs
  start = time.perf_counter()
  knn = interactions.KnnScores(args.users, args.items, pairs[:, 0], pairs[:, 1],
                               most=max(interactions.NEIGHBOUR_CHOICES))
  precompute = time.perf_counter() - start
  similar = {name: ranked.top(max(interactions.NEIGHBOUR_CHOICES))
             for name, ranked in knn._similar.items()}  # the precomputed neighbours

  def dense_blocks(matrix):
    return [interactions._blockwise_top_k(matrix.shape, lambda a, b: matrix[a:b].toarray(), k)
            for k in interactions.NEIGHBOUR_CHOICES]

  def ranked(matrix):
    rows = interactions._RankedRows(matrix)
    return [rows.top(k) for k in interactions.NEIGHBOUR_CHOICES]

  seconds, medians, kept = report.alternate(
      {way: lambda select=select: [w for matrix in similar.values() for w in select(matrix)]
       for way, select in (("dense_blocks", dense_blocks), ("ranked", ranked))}, args.rounds)
  same = all((a != b).nnz == 0 for a, b in zip(kept["dense_blocks"], kept["ranked"],
                                               strict=True))
  return {"config": vars(args), "ratings": len(pairs),
          "precompute_seconds": round(precompute, 2),
          "selections": 2 * len(interactions.NEIGHBOUR_CHOICES), "seconds": seconds,
          "median_seconds": medians,
          "dense_over_ranked": round(medians["dense_blocks"] / medians["ranked"], 1),
          "same_weights": same, "peak_rss_mb": round(report.peak_rss_bytes() / 2**20)}


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--users", type=int, default=20000)
  parser.add_argument("--items", type=int, default=5000)
  parser.add_argument("--ratings-per-user", type=float, default=25)
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--output", default=None)
  args = parser.parse_args(argv)
  report.print_result(run(args), args.output)
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
