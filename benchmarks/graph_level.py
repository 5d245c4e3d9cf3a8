"""Benchmark: graph-level cycle counting, GNN vs a features-only baseline, through GnnTrainer.

  python -m benchmarks.graph_level --seeds 3 --output graph_level.json

Generates ``pipelines.cycles.data`` graphs (default 2,000 / 500 / 500 per
split) once per seed, then runs the pipeline (ImportExampleGen -> GnnTrainer,
``module_files/graph_cycles.py``) for each variant, interleaved per seed:

* ``gnn_classification``: 2 rounds of message passing, 4 classes;
* ``baseline_classification``: no message passing (the pooled atom kinds);
* ``gnn_regression`` / ``baseline_regression``: the count as a number (MSE).

The test split is scored through each exported model with requests that hold
no label. Prints one JSON object: per variant the per-seed test accuracy (or
MAE) and its mean, and the wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

# First: Keras 2 for TF-GNN, before TensorFlow is imported.
import gnn_trainer_component  # pylint: disable=g-bad-import-order
gnn_trainer_component.setup_process()

# pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np

from benchmarks import report
from pipelines.cycles import data
from pipelines.cycles import pipeline

#: variant -> module hparams.
VARIANTS = {
    "gnn_classification": {"task": "classification"},
    "baseline_classification": {"task": "classification", "layers": 0},
    "gnn_regression": {"task": "regression"},
    "baseline_regression": {"task": "regression", "layers": 0},
}
#: The test metric reported per variant.
METRIC = {"classification": "accuracy", "regression": "mae"}


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--seeds", type=int, default=3)
  parser.add_argument("--train", type=int, default=2000, help="Training graphs.")
  parser.add_argument("--eval", type=int, default=500, help="Validation and test graphs, each.")
  parser.add_argument("--epochs", type=int, default=20)
  parser.add_argument("--work-dir", default=None, help="Default: a fresh temp dir.")
  parser.add_argument("--output", default=None, help="Also write the JSON here.")
  args = parser.parse_args(argv)
  work_dir = os.path.abspath(args.work_dir or tempfile.mkdtemp(prefix="graph_level_bench_"))
  start = time.time()
  scores = {name: [] for name in VARIANTS}
  seconds = {name: [] for name in VARIANTS}
  for seed in range(args.seeds):
    seed_dir = os.path.join(work_dir, f"seed{seed}")
    written = data.write_data(os.path.join(seed_dir, "data"), seed=seed, sizes={
        "train": args.train, "eval": args.eval, "test": args.eval})
    for name, hparams in VARIANTS.items():
      run_start = time.time()
      run = pipeline.run_and_evaluate(
          pipeline_name=f"cycles-{name}", work_dir=seed_dir, data_dirs=written,
          metadata=os.path.join(seed_dir, "metadata.sqlite"),
          custom_config={"global_batch_size": 32, "epochs": args.epochs, "seed": seed,
                         "summarize_every_n_steps": "never",
                         "restore_best_weights": True, "hparams": hparams})
      scores[name].append(round(run["test"][METRIC[hparams["task"]]], 4))
      seconds[name].append(round(time.time() - run_start, 1))
  result = {
      "graphs": {"train": args.train, "eval": args.eval, "test": args.eval},
      "epochs": args.epochs, "seeds": args.seeds,
      "variants": {name: {"metric": f"test_{METRIC[hparams['task']]}",
                          "per_seed": scores[name],
                          "mean": round(float(np.mean(scores[name])), 4),
                          "seconds_per_run": seconds[name]}
                   for name, hparams in VARIANTS.items()},
      "chance_accuracy": 1 / data.NUM_CLASSES,
      "wall_seconds": round(time.time() - start, 1), "work_dir": work_dir,
  }
  report.print_result(result, args.output)
  return 0


if __name__ == "__main__":
  sys.exit(main())
