"""Benchmark: GnnTuner on Planetoid GCN, against the module's default configuration.

  PYTHONPATH=. .venv/bin/python -m benchmarks.tuner --dataset cora \
      --data-dir ../shared/data/planetoid --trials 12 --algorithm random \
      --output benchmarks/results/tuner-cora.json

Runs the Planetoid pipeline twice in one work dir (sampling and statistics
cached): once with the module's defaults (``planetoid_gcn.py``'s ``HPARAMS``:
the paper's setting), once with GnnTuner searching ``hyperparameter_space``
(which holds clearly bad values: lr 1e-5, dropout 0.9) and GnnTrainer fed its
``best_hyperparameters``. Same training seed everywhere. Prints one JSON
object: every trial, best / worst / default validation accuracy, the
validation accuracy GnnTrainer reached with the best values (reproduction),
and the test accuracy of both models.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

# First: Keras 2 for TF-GNN, before TensorFlow is imported.
import gnn_trainer_component  # pylint: disable=g-bad-import-order
gnn_trainer_component.setup_process()

# pylint: disable=g-import-not-at-top,wrong-import-position
from benchmarks.report import print_result
from pipelines.runtime import mlmd_utils
from pipelines.planetoid import pipeline as planetoid_pipeline
from pipelines.planetoid import run_local

ACCURACY = "val_sparse_categorical_accuracy"


def _eval_accuracy(output_dir: str, model_uri: str) -> float:
  store = mlmd_utils.store(os.path.join(output_dir, "metadata.sqlite"))
  [model] = [a for a in store.get_artifacts_by_type("Model") if a.uri == model_uri]
  return float(mlmd_utils.custom_properties(model)["eval_sparse_categorical_accuracy"])


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--dataset", choices=["cora", "citeseer", "pubmed"], default="cora")
  parser.add_argument("--data-dir", required=True)
  parser.add_argument("--trials", type=int, default=12)
  parser.add_argument("--algorithm", choices=["random", "bayesian"], default="random")
  parser.add_argument("--search-seed", type=int, default=0, help="The search algorithm's seed.")
  parser.add_argument("--seed", type=int, default=0, help="Training seed (every run).")
  parser.add_argument("--epochs", type=int, default=run_local.DEFAULT_CUSTOM_CONFIG["epochs"])
  parser.add_argument("--work-dir", default=None, help="Default: a fresh temp dir.")
  parser.add_argument("--output", default=None, help="Also write the JSON here.")
  args = parser.parse_args(argv)
  work_dir = os.path.abspath(args.work_dir or tempfile.mkdtemp(prefix="tuner_bench_"))
  common = dict(dataset=args.dataset, data_dir=os.path.abspath(args.data_dir),
                module_file=planetoid_pipeline.GCN_MODULE, output_dir=work_dir,
                seed=args.seed, custom_config={"epochs": args.epochs})
  start = time.time()
  default = run_local.run_once(**common)
  default_s = time.time() - start
  tuning = {"algorithm": args.algorithm, "max_trials": args.trials, "seed": args.search_seed,
            "objective": f"max:{ACCURACY}"}
  tuned = run_local.run_once(**common, tuning_config=tuning)
  tuned_s = time.time() - start - default_s
  rows = json.load(open(os.path.join(tuned["tuner_results_uri"], "tuner_results.json")))
  best_values = json.load(open(os.path.join(
      tuned["best_hyperparameters_uri"], "best_hyperparameters.txt")))["values"]
  scores = [r["score"] for r in rows if r["status"] == "COMPLETED"]
  best_val = max(scores)
  tuned_val = _eval_accuracy(work_dir, tuned["model_uri"])
  result = {
      "dataset": args.dataset, "module": "planetoid_gcn.py", "epochs": args.epochs,
      "tuning_config": tuning, "training_seed": args.seed,
      "trials": [{k: r.get(k) for k in ("trial_id", "status", "score", "learning_rate",
                                        "dropout", "l2", "units", "wall_seconds", "error")}
                 for r in rows],
      "best_val_accuracy": round(best_val, 4), "worst_val_accuracy": round(min(scores), 4),
      "best_values": best_values,
      "default_val_accuracy": round(_eval_accuracy(work_dir, default["model_uri"]), 4),
      "trainer_with_best_val_accuracy": round(tuned_val, 4),
      "reproduction_gap_points": round(100 * abs(tuned_val - best_val), 2),
      "default_test_accuracy": round(default["test_accuracy"], 4),
      "tuned_test_accuracy": round(tuned["test_accuracy"], 4),
      "default_pipeline_seconds": round(default_s, 1),
      "tuned_pipeline_seconds": round(tuned_s, 1),
      "trial_seconds_median": sorted(r["wall_seconds"] for r in rows)[len(rows) // 2],
      "work_dir": work_dir,
  }
  print_result(result, args.output)
  return 0


if __name__ == "__main__":
  sys.exit(main())
