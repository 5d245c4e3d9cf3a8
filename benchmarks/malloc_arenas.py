"""Memory: glibc's malloc arenas capped at the cores (``setup_process``) against glibc's default.

  PYTHONPATH=. .venv/bin/python -m benchmarks.malloc_arenas \\
      --data-dir ../shared/data/planetoid --workloads link,w1_full,recommendation,in_memory \\
      --rounds 1 --output benchmarks/results/malloc-arenas.json

Each workload is another benchmark's command, run in a fresh process twice per round, the
variants alternating: ``default`` with ``MALLOC_ARENA_MAX`` set to glibc's own default for this
machine (8 per core: every process before ``gnn_trainer_component.setup_process`` capped it)
and ``capped`` without the variable (``setup_process`` caps the arenas at the cores, at least
2, for the process and its children). Per workload and variant: the benchmark's own peak
RSS, time and quality figures, medians over the rounds, and every round's.

Workloads (:data:`WORKLOADS`):

* ``link``: ``benchmarks.link_prediction``, Cora in memory, one seed (60 epochs): the whole
  pipeline's process (GnnTrainer, GraphEvaluator) and the export scoring the test pairs.
* ``w1_full``: ``benchmarks.speed --workload W1-full --variants gnntrainer_full_graph``: the
  GnnTrainer executor's own process on Cora's whole graph (``executor_peak_rss_mb``) and the
  larger of it and the process serving the export (``peak_rss_mb``).
* ``recommendation``: the documented command, ``python -m pipelines.recommendation``, on
  ``benchmarks.recommendation``'s graph (20k users, 5k items, 500k ratings; 2 epochs of 512
  pairs): tables -> GnnTrainer in memory -> GraphEvaluator -> index -> pushers, then the pushed
  model and index asked in fresh processes.

Every run also reports ``tree_peak_rss_gib`` (the largest resident set of the command's
process and the processes it waited for, ``wait4``) and ``wall_s``.
* ``in_memory``: ``benchmarks.in_memory`` on a 200k-node / 2M-edge power-law graph, the
  GnnTrainer variant: sampling and training rates and the process's peak.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Optional, Sequence

from benchmarks import report

VARIANTS = ("default", "capped")


def _link(r: dict) -> dict:
  return {"peak_rss_gib": r["peak_rss_gib_per_run"][0], "seconds": r["seconds_per_run"][0],
          "auc": r["auc_mean"], "ap": r["ap_mean"], "retrieval_mrr": r["retrieval_mrr_mean"]}


def _w1_full(r: dict) -> dict:
  m = r["workloads"]["W1-full"]["gnntrainer_full_graph"]
  return {"peak_rss_mb": m["peak_rss_mb"], "executor_peak_rss_mb": m["peak_rss_after_train_mb"],
          "train_s": m["train_s"], "test_accuracy": m["test_accuracy"]}


def _recommendation(r: dict) -> dict:
  return {k: r[k] for k in ("eval_auc", "retrieval_mrr", "retrieval_popularity_mrr")}


def _in_memory(r: dict) -> dict:
  return {k: r[k] for k in ("peak_rss_gb", "peak_rss_with_training_gb", "train_examples_per_s",
                            "sampling_seeds_per_s_in_graph", "floor_examples_per_s")}


#: name -> (the command's arguments after ``python -m``, its figures from its JSON).
WORKLOADS: dict[str, tuple[Callable[[str, str], list[str]], Callable[[dict], dict]]] = {
    "link": (lambda work, data: ["benchmarks.link_prediction", "--data-dir", data, "--seeds",
                                 "1", "--work-dir", work], _link),
    "w1_full": (lambda work, data: ["benchmarks.speed", "--workload", "W1-full", "--variants",
                                    "gnntrainer_full_graph", "--repetitions", "1",
                                    "--work-dir", work, "--output",
                                    os.path.join(work, "speed.json")], _w1_full),
    "recommendation": (lambda work, data: [
        "pipelines.recommendation", "--output-dir", work, "--users", "20000", "--items", "5000",
        "--ratings-per-user", "25", "--epochs", "2", "--batch-size", "512"], _recommendation),
    "in_memory": (lambda work, data: [
        "benchmarks.in_memory", "--num-nodes", "200000", "--num-edges", "2000000",
        "--train-seeds", "20000", "--eval-seeds", "2000", "--sampling-seeds", "10000",
        "--variants", "gnntrainer", "--work-dir", work,
        "--output", os.path.join(work, "in_memory.json")], _in_memory),
}


def glibc_default_arenas() -> int:
  """glibc's own limit when ``MALLOC_ARENA_MAX`` is unset: 8 per core (64-bit)."""
  return 8 * (os.cpu_count() or 1)


def run(workload: str, variant: str, work_dir: str, data_dir: str) -> dict:
  """One run of ``workload`` in a fresh process; its figures."""
  command, figures = WORKLOADS[workload]
  env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
  if variant == "default":
    env["MALLOC_ARENA_MAX"] = str(glibc_default_arenas())
  env.update(TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2",
             PYTHONPATH=os.pathsep.join(filter(None, [report.REPO_ROOT, env.get("PYTHONPATH")])))
  start = time.perf_counter()
  with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
    proc = subprocess.Popen([sys.executable, "-m", *command(work_dir, data_dir)],
                            cwd=report.REPO_ROOT, env=env, stdout=out, stderr=err, text=True)
    _, status, usage = os.wait4(proc.pid, 0)  # its rusage: the tree's peak resident set
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall_s = time.perf_counter() - start
    out.seek(0)
    err.seek(0)
    if proc.returncode:
      raise RuntimeError(f"{workload} ({variant}) failed:\n{err.read()[-3000:]}")
    printed = json.loads(out.read().strip().splitlines()[-1])
  return {**figures(printed), "tree_peak_rss_gib": round(usage.ru_maxrss / 2**20, 2),
          "wall_s": round(wall_s, 1)}


def _medians(runs: list[dict]) -> dict:
  return {k: round(statistics.median(r[k] for r in runs), 4) for k in runs[0]}


def main(argv: Optional[Sequence[str]] = None) -> dict[str, Any]:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--data-dir", default=os.path.join(report.REPO_ROOT, "..", "shared",
                                                         "data", "planetoid"))
  parser.add_argument("--workloads", default=",".join(WORKLOADS))
  parser.add_argument("--rounds", type=int, default=1)
  parser.add_argument("--work-dir", default=None, help="Default: a fresh temp dir.")
  parser.add_argument("--output", default=None)
  args = parser.parse_args(argv)
  work_dir = os.path.abspath(args.work_dir or tempfile.mkdtemp(prefix="malloc_arenas_"))
  data_dir = os.path.abspath(args.data_dir)
  result: dict[str, Any] = {"cores": os.cpu_count(), "load_average_start": os.getloadavg(),
                            "glibc_default_arenas": glibc_default_arenas(), "workloads": {}}
  for workload in args.workloads.split(","):
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for i in range(args.rounds):
      for variant in VARIANTS:
        runs[variant].append(run(workload, variant,
                                 os.path.join(work_dir, f"{workload}-{variant}-{i}"), data_dir))
        print(workload, variant, i, json.dumps(runs[variant][-1]), file=sys.stderr, flush=True)
    result["workloads"][workload] = {v: {"median": _medians(r), "rounds": r}
                                     for v, r in runs.items()}
  result["load_average_end"] = os.getloadavg()
  report.print_result(result, args.output, indent=1)
  return result


if __name__ == "__main__":
  main()
