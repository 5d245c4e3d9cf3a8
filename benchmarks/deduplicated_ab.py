"""Deduplicated training batches against per-seed ones on Cora, in one run (issue 73, item 1).

  PYTHONPATH=. python -m benchmarks.deduplicated_ab --data-dir ../shared/data/planetoid

Cora's tables (public split) sampled in memory with the Planetoid pipeline's fan-outs
(``--fan-outs``, default 200, 200: every neighbour of every node) and its GCN module
(``module_files/planetoid_gcn.py``: messages toward the seeds), 140 training seeds per step
(one step an epoch), ``--epochs`` epochs through GnnTrainer's ``train_and_export`` (no
export; validation every ``--validation-freq`` epochs, default once at the end), with
``deduplicate_batches`` ``"always"`` and ``"never"`` alternating for ``--rounds`` rounds
(the same seed: the same initial weights). Reported per variant: examples/s and ms per step
after the first step (``benchmarks.in_memory.train_once``), validation accuracy and loss,
medians and every run; beside them the batches' nodes and edges both ways and the numpy
kernel's ms per batch (``kernel.sample`` / ``kernel.sample_deduplicated``, 50 batches,
alternating). Prints one JSON object and writes it to ``--output``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Optional, Sequence

import numpy as np

from benchmarks import in_memory
from benchmarks import report

VARIANTS = ("always", "never")


def batch_sizes(graph, batch_size: int, batches: int = 50) -> dict[str, Any]:
  """Each variant's nodes and edges per batch, and the kernel's ms per batch (alternating)."""
  from gnn_trainer_component.in_memory import kernel  # pylint: disable=g-import-not-at-top
  sampler, seeds = graph.sampler, graph.seeds["train"]
  rng = np.random.default_rng(0)
  rows = [rng.choice(seeds, size=min(batch_size, len(seeds)), replace=False)
          for _ in range(batches)]
  samplers = {"never": lambda r, i: kernel.sample(sampler.graph, sampler.plan, r,
                                                  np.random.default_rng(i)),
              "always": lambda r, i: kernel.sample_deduplicated(
                  sampler.graph, sampler.plan, r, np.random.default_rng(i))[0]}
  seconds = {v: 0.0 for v in VARIANTS}
  sizes = {v: [0, 0] for v in VARIANTS}
  for i, r in enumerate(rows):
    for variant in VARIANTS:
      start = time.perf_counter()
      sub = samplers[variant](r, i)
      seconds[variant] += time.perf_counter() - start
      sizes[variant][0] += sum(int(s.sum()) for s, _ in sub.nodes.values())
      sizes[variant][1] += sum(int(s.sum()) for s, *_ in sub.edges.values())
  out = {}
  for variant in VARIANTS:
    out[f"{variant}_nodes_per_batch"] = round(sizes[variant][0] / batches, 1)
    out[f"{variant}_edges_per_batch"] = round(sizes[variant][1] / batches, 1)
    out[f"{variant}_kernel_ms_per_batch"] = round(1000 * seconds[variant] / batches, 3)
  return out


def main(argv: Optional[Sequence[str]] = None) -> int:
  import gnn_trainer_component  # pylint: disable=g-import-not-at-top
  gnn_trainer_component.setup_process()  # first: Keras 2, before TensorFlow
  # pylint: disable=g-import-not-at-top
  import dataclasses
  from gnn_trainer_component.in_memory import adapters
  from pipelines.planetoid import data as planetoid
  from pipelines.planetoid import pipeline as planetoid_pipeline
  # pylint: enable=g-import-not-at-top
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--data-dir", required=True, help="Planetoid's ind.cora.* files.")
  p.add_argument("--fan-outs", default="200,200")
  p.add_argument("--epochs", type=int, default=200)
  p.add_argument("--rounds", type=int, default=3)
  p.add_argument("--validation-freq", type=int, default=200,
                 help="Validate every N epochs (default: once, after the last).")
  p.add_argument("--work-dir", default=None, help="Default: a fresh temp dir.")
  p.add_argument("--output", default=os.path.join(report.REPO_ROOT, "benchmarks", "results",
                                                  "deduplicated_ab.json"))
  args = p.parse_args(argv)
  work_dir = os.path.abspath(args.work_dir or tempfile.mkdtemp(prefix="dedup_ab_"))
  fan_outs = [int(f) for f in args.fan_outs.split(",")]
  tables = planetoid.write_planetoid_tables(os.path.abspath(args.data_dir), "cora",
                                            os.path.join(work_dir, "tables"))
  graph = adapters.load(tables["dir"], seeds=tables["seeds"], sampling_spec=None,
                        sampling_config=planetoid_pipeline.sampling_config(fan_outs),
                        splits=["train", "eval"])
  num_train = len(graph.seeds["train"])
  module = (os.path.join(report.REPO_ROOT, "module_files", "planetoid_gcn.py"), None,
            {"num_classes": tables["num_classes"]})
  sizes = batch_sizes(graph, num_train)
  print(f"batches: {sizes}", file=sys.stderr, flush=True)
  runs = {v: [] for v in VARIANTS}
  calls = in_memory._counting(graph.sampler)  # pylint: disable=protected-access
  for round_ in range(args.rounds):
    for variant in VARIANTS:
      run_dir = tempfile.mkdtemp(prefix=f"run-{variant}-{round_}-", dir=work_dir)
      try:
        run = in_memory.train_once(
            dataclasses.replace(graph, deduplicate=variant), num_train, run_dir, calls,
            module=module, batch_size=num_train, epochs=args.epochs,
            config={"validation_freq": args.validation_freq})
      finally:
        shutil.rmtree(run_dir, ignore_errors=True)
      runs[variant].append(run)
      print(f"{variant} {round_}: {run}", file=sys.stderr, flush=True)

  def median(variant, key):
    return round(statistics.median(r[key] for r in runs[variant]), 4)

  result = {
      "command": " ".join(["python -m benchmarks.deduplicated_ab"] + list(argv or sys.argv[1:])),
      "date": time.strftime("%Y-%m-%d"), "dataset": "cora", "fan_outs": fan_outs,
      "batch_size": num_train,
      "epochs": args.epochs, "validation_freq": args.validation_freq, "rounds": args.rounds,
      **sizes,
      **{f"{v}_{key}": median(v, key) for v in VARIANTS
         for key in ("examples_per_s", "ms_per_step", "val_accuracy", "val_loss")},
      "runs": runs,
  }
  result["always_over_never_examples_per_s"] = round(
      result["always_examples_per_s"] / result["never_examples_per_s"], 3)
  report.print_result(result, args.output)
  return 0


if __name__ == "__main__":
  sys.exit(main())
