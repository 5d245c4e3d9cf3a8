"""Benchmark: recommendation in memory (user -> item links; ratings' stars) beside baselines.

  python -m benchmarks.recommendation [--users 20000] [--items 5000] [--ratings-per-user 25]
      [--epochs 2] [--batch-size 512] [--negative-sampling uniform popularity]
      [--module-files module_files/recommendation_ranking.py module_files/recommendation.py]
      [--stars-module-file module_files/recommendation_stars.py] [--rating-only]
      [--output benchmarks/results/recommendation.json]

Each variant (each of ``--module-files`` with each ``--negative-sampling``, in the order
given) runs the documented command,
``python -m pipelines.recommendation``, in its own process on the same generated rating
graph (``pipelines/recommendation/data.py``): tables -> GnnTrainer in memory -> Model, the
test ratings ranked against every item. Prints one JSON object: per variant ``auc`` / ``ap``
(validation, sampled negatives), the test split's ``mrr`` and ``hits@20`` and the
most-popular-item ranking's (``baseline_mrr``, ``baseline_hits@20``) on the same queries,
GraphEvaluator's item-kNN and user-kNN (``item_knn_mrr``, ...), the lowest bound of the
model's MRR gain over a baseline (``gain_ci_low``) and its verdict (``blessed``),
``seconds`` (the whole command: tables written, pipeline run) and ``peak_rss_gib`` (the
largest resident set of the command's processes); then ``bayes_ceiling``: the MRR and
Hits@20 of the generator's own law (:func:`bayes_ceiling`), which no model beats in expectation.
``rating``: the same command with ``--stars`` (each rating's stars predicted, edge regression,
``--stars-module-file``; the same users, items and ratings): GraphEvaluator's test RMSE and MAE
of the model (``rating_rmse``, ``rating_mae``) and of its baselines (``bias_rmse``: the
training ratings' mean plus user and item biases; ``mean_rmse``), ``rating_over_bias``, and
the command's time and peak memory; with the module's ``edge_features`` (each rating's own
``completion``) and, as ``rating_ends_only``, without them (both ends only).
``--rating-only`` runs those two alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from benchmarks import report


def bayes_ceiling(args: argparse.Namespace, seed: int = 0) -> dict[str, float]:
  """MRR and Hits@20 of the generator's own law on a random 80/10/10 split of its ratings.

  The best ranking any model can give in expectation: every candidate scored by its
  probability under the generator's law (``data.law``) given the user's true favourite
  genre. Filtered as GraphEvaluator's ranking (the user's other
  ratings are no candidates), ties counted half.
  """
  from pipelines.recommendation import data  # pylint: disable=g-import-not-at-top
  genre, popularity, taste, pairs = data.ratings(args.users, args.items, args.ratings_per_user,
                                                 seed)
  law = data.law(genre, popularity)
  test = pairs[np.random.default_rng(seed).permutation(len(pairs))[int(0.9 * len(pairs)):]]
  rated = pd.Series(pairs[:, 1]).groupby(pairs[:, 0]).apply(np.asarray)
  ranks = np.empty(len(test))
  for q, (user, item) in enumerate(test):
    scores = law[taste[user]]
    others = rated[user][rated[user] != item]
    above = (scores > scores[item]).sum() - (scores[others] > scores[item]).sum()
    ties = (scores == scores[item]).sum() - 1 - (scores[others] == scores[item]).sum()
    ranks[q] = 1 + above + ties / 2
  return {"mrr": float(np.mean(1 / ranks)), "hits@20": float(np.mean(ranks <= 20))}


#: Runs a command and writes the largest resident set (KiB) of its processes to a file.
_MEASURED = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[2:]).returncode; "
             "open(sys.argv[1], 'w').write(str(resource.getrusage("
             "resource.RUSAGE_CHILDREN).ru_maxrss)); sys.exit(code)")


def run_command(args: argparse.Namespace, out: str, *extra: str) -> tuple[dict, float, float]:
  """``python -m pipelines.recommendation`` on the benchmark's graph with ``extra`` arguments.

  Returns:
    ``(its printed JSON, seconds, the peak resident set of its processes in GiB)``.
  """
  command = [sys.executable, "-m", "pipelines.recommendation", "--output-dir", out,
             "--users", str(args.users), "--items", str(args.items),
             "--ratings-per-user", str(args.ratings_per_user), "--epochs", str(args.epochs),
             "--batch-size", str(args.batch_size), *extra]
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
  start = time.perf_counter()
  with open(os.path.join(out + ".log"), "w") as log:
    proc = subprocess.run([sys.executable, "-c", _MEASURED, out + ".peak", *command],
                          cwd=report.REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=log,
                          text=True, check=False)
  seconds = time.perf_counter() - start
  if proc.returncode:
    raise RuntimeError(f"{' '.join(command)} failed ({proc.returncode}); see {out}.log")
  with open(out + ".peak") as f:
    peak = int(f.read()) / 2**20
  return json.loads(proc.stdout.strip().splitlines()[-1]), seconds, peak


def run_rating(args: argparse.Namespace, out: str, edge_features: bool = True) -> dict:
  """The command with ``--stars``: the test ratings' RMSE, the model's and its baselines'.

  ``edge_features`` False: without the module's ``edge_features`` (both ends only).
  """
  extra = []
  if not edge_features:
    with open(out + ".link.json", "w") as f:
      json.dump({"edge_features": []}, f)
    extra = ["--link-config", out + ".link.json"]
  props, seconds, peak = run_command(args, out, "--stars", "--module-file",
                                     os.path.join(report.REPO_ROOT, args.stars_module_file),
                                     *extra)
  verdict = props["evaluation"]
  return {"module": os.path.basename(args.stars_module_file), "edge_features": edge_features,
          "rating_rmse": verdict["model_rmse"], "rating_mae": verdict["model_mae"],
          "bias_rmse": verdict["bias_rmse"], "bias_mae": verdict["bias_mae"],
          "mean_rmse": verdict["mean_rmse"],
          "rating_over_bias": verdict["model_rmse"] / verdict["bias_rmse"],
          "eval_rmse": props["eval_rmse"], "blessed": verdict["blessed"],
          "seconds": round(seconds, 1), "peak_rss_gib": round(peak, 2)}


def run_variant(args: argparse.Namespace, module_file: str, negative_sampling: str,
                out: str) -> dict:
  """One run of the documented command; its printed metrics, time and peak memory."""
  props, seconds, peak = run_command(args, out, "--negative-sampling", negative_sampling,
                                     "--module-file", module_file)
  verdict = props["evaluation"]
  knn = {f"{b}_{m}": verdict[f"{b}_{m}"] for b in ("item_knn", "user_knn")
         for m in ("mrr", "hits@20")}
  return {
      "module": os.path.basename(module_file), "negative_sampling": negative_sampling,
      "auc": props["eval_auc"], "ap": props["eval_average_precision"],
      "mrr": props["retrieval_mrr"], "hits@20": props["retrieval_hits@20"],
      "baseline_mrr": props["retrieval_popularity_mrr"],
      "baseline_hits@20": props["retrieval_popularity_hits@20"],
      "mrr_over_baseline": props["retrieval_mrr"] / props["retrieval_popularity_mrr"],
      "hits@20_over_baseline": (props["retrieval_hits@20"]
                                / props["retrieval_popularity_hits@20"]),
      **knn, "mrr_over_item_knn": verdict["model_mrr"] / verdict["item_knn_mrr"],
      "hits@20_over_item_knn": verdict["model_hits@20"] / verdict["item_knn_hits@20"],
      # The lowest bound of the model's MRR gain over a baseline (95 % paired bootstrap).
      "gain_ci_low": min(v for k, v in verdict.items() if k.startswith("mrr_gain_low_vs_")),
      "blessed": verdict["blessed"],
      "queries": props["retrieval_queries"], "seconds": round(seconds, 1),
      "peak_rss_gib": round(peak, 2)}


def main(argv: Optional[Sequence[str]] = None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--users", type=int, default=20000)
  parser.add_argument("--items", type=int, default=5000)
  parser.add_argument("--ratings-per-user", type=float, default=25)
  parser.add_argument("--epochs", type=int, default=2)
  parser.add_argument("--batch-size", type=int, default=512)
  parser.add_argument("--negative-sampling", nargs="+", default=["uniform"],
                      choices=("uniform", "popularity"))
  parser.add_argument("--module-files", nargs="+", default=[
      os.path.join("module_files", name)
      for name in ("recommendation_ranking.py", "recommendation.py")])
  parser.add_argument("--stars-module-file",
                      default=os.path.join("module_files", "recommendation_stars.py"))
  parser.add_argument("--rating-only", action="store_true",
                      help="run the rating variants only (no ranking variant)")
  parser.add_argument("--output", default=None)
  args = parser.parse_args(argv)
  with tempfile.TemporaryDirectory(prefix="recommendation-") as tmp:
    variants = [] if args.rating_only else [
        run_variant(args, os.path.join(report.REPO_ROOT, module), name,
                    os.path.join(tmp, f"{i}-{name}"))
        for i, module in enumerate(args.module_files) for name in args.negative_sampling]
    rating = run_rating(args, os.path.join(tmp, "stars"))
    ends_only = run_rating(args, os.path.join(tmp, "stars-ends"), edge_features=False)
  result = {"graph": {"users": args.users, "items": args.items,
                      "ratings_per_user": args.ratings_per_user},
            "training": {"epochs": args.epochs, "global_batch_size": args.batch_size},
            "variants": variants,
            # The generator's own law: no model ranks better in expectation.
            "bayes_ceiling": bayes_ceiling(args), "rating": rating,
            "rating_ends_only": ends_only}
  report.print_result(result, args.output)
  return result


if __name__ == "__main__":
  main()
