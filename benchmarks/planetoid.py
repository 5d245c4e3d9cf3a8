"""Benchmark: the Planetoid pipeline N times with different training seeds.

  TF_USE_LEGACY_KERAS=1 python -m benchmarks.planetoid --dataset cora \
      --data-dir ../shared/data/planetoid --module module_files/planetoid_gcn.py \
      --seeds 5 --output cora_gcn.json

Prints one JSON object: per-seed test accuracies, mean, std, the zero-parameter baselines'
test accuracies on the same papers (GraphEvaluator's: majority class, label propagation),
how many runs were blessed, wall time. Sampling and statistics run once (TFX caching);
GnnTrainer and GraphEvaluator run per seed.
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
from pipelines.planetoid import pipeline as planetoid_pipeline
from pipelines.planetoid import run_local


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--dataset", choices=["cora", "citeseer", "pubmed"], default="cora")
  parser.add_argument("--data-dir", required=True)
  parser.add_argument("--module", required=True, help="GnnTrainer module file.")
  parser.add_argument("--seeds", type=int, default=5, help="Number of training seeds.")
  parser.add_argument("--first-seed", type=int, default=0)
  parser.add_argument("--epochs", type=int, default=run_local.DEFAULT_CUSTOM_CONFIG["epochs"])
  parser.add_argument("--fan-outs", default=",".join(
      str(f) for f in planetoid_pipeline.DEFAULT_FAN_OUTS))
  parser.add_argument("--mode", choices=planetoid_pipeline.MODES,
                      default=planetoid_pipeline.IN_MEMORY,
                      help="in_memory: GnnTrainer samples the tables in memory every epoch; "
                           "sampled: GraphSampler's examples (Beam).")
  parser.add_argument("--work-dir", default=None, help="Default: a fresh temp dir.")
  parser.add_argument("--output", default=None, help="Also write the JSON here.")
  args = parser.parse_args(argv)
  work_dir = os.path.abspath(args.work_dir or tempfile.mkdtemp(prefix="planetoid_bench_"))
  fan_outs = [int(f) for f in args.fan_outs.split(",")]
  start = time.time()
  runs = []
  for seed in range(args.first_seed, args.first_seed + args.seeds):
    runs.append(run_local.run_once(
        dataset=args.dataset, data_dir=os.path.abspath(args.data_dir),
        module_file=os.path.abspath(args.module), output_dir=work_dir, seed=seed,
        fan_outs=fan_outs, custom_config={"epochs": args.epochs}, mode=args.mode))
  accs = np.array([r["test_accuracy"] for r in runs])
  result = {
      "dataset": args.dataset, "mode": args.mode, "module": os.path.basename(args.module),
      "fan_outs": fan_outs, "epochs": args.epochs,
      "seeds": [r["seed"] for r in runs],
      "test_accuracy": [round(float(a), 4) for a in accs],
      "mean": round(float(accs.mean()), 4), "std": round(float(accs.std()), 4),
      "baselines": {name: round(float(value), 4) for name, value in runs[0]["baselines"].items()},
      "blessed": sum(bool(r["blessed"]) for r in runs),
      "seconds_per_run": [r["seconds"] for r in runs],
      "wall_seconds": round(time.time() - start, 1), "work_dir": work_dir,
  }
  report.print_result(result, args.output)
  return 0


if __name__ == "__main__":
  sys.exit(main())
