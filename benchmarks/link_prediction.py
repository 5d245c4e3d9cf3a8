"""Benchmark: Planetoid link prediction (GAE setting) through LinkSampler + GnnTrainer.

  python -m benchmarks.link_prediction --dataset cora \
      --data-dir ../shared/data/planetoid --seeds 5 --output cora_links.json

Each seed is its own edge split (85 / 5 / 10 %, one sampled non-edge per
positive for validation and test as in GAE, ``--train-negatives`` (3) per
training positive), sampling and training seed, as GAE reports means over
random splits; the epoch with the best validation ROC AUC is exported. The
test pairs are scored by the exported SavedModel without their labels. Prints
one JSON object: ``auc_mean``, ``ap_mean``, ``hits@K_mean`` (each positive
against all the split's sampled negatives), per-seed values, wall time. In
memory (``--mode in_memory``, the default), GnnTrainer also ranks every test
edge against all nodes (``retrieval_splits: ["test"]``): OGB-style filtered
full-ranking ``retrieval_mrr_mean`` and ``retrieval_hits@K_mean`` (K = 20, 50,
100), read from the Model's properties. The pipeline's GraphEvaluator scores
the test split again beside zero-parameter baselines (popularity, common
neighbours, Adamic-Adar): ``graph_evaluator`` holds each predictor's AUC, AP
(and, where it ranks, MRR and hits@K), averaged over the seeds, and how many
runs it blessed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from typing import Any, Mapping, Optional, Sequence

# First: Keras 2 for TF-GNN, before TensorFlow is imported.
import gnn_trainer_component  # pylint: disable=g-bad-import-order
gnn_trainer_component.setup_process()

# pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np
from tfx import v1 as tfx

from benchmarks import report
from pipelines.runtime import mlmd_utils
from pipelines.planetoid import pipeline as planetoid_pipeline
from pipelines.planetoid import run_local

#: GnnTrainer settings: batches of 256 pairs, 60 epochs, the weights of the
#: epoch with the best validation ROC AUC exported; the module's defaults
#: (Adam lr 0.01 as GAE, dropout 0.5, Hadamard decoder).
DEFAULT_CUSTOM_CONFIG = {"global_batch_size": 256, "epochs": 60,
                         "summarize_every_n_steps": "never", "restore_best_weights": True,
                         "restore_best_weights_by": "max:val_auc"}
#: Sampled non-edges per training positive (validation and test: 1, as GAE).
DEFAULT_TRAIN_NEGATIVES = 3
DEFAULT_FAN_OUTS = (10, 5)
#: Prefix of the Model properties of the full-ranking evaluation.
RETRIEVAL = "retrieval_"


def run_once(*, dataset: str, data_dir: str, output_dir: str, seed: int,
             fan_outs: Sequence[int] = DEFAULT_FAN_OUTS,
             train_negatives: float = DEFAULT_TRAIN_NEGATIVES,
             custom_config: Optional[Mapping[str, Any]] = None,
             module_file: str = planetoid_pipeline.LINK_MODULE,
             mode: str = planetoid_pipeline.IN_MEMORY) -> dict:
  """One pipeline run (its own split and sampling for ``seed``) and its test scores."""
  start = time.time()
  tables = run_local.prepare_tables(dataset, data_dir, output_dir)
  config = {**DEFAULT_CUSTOM_CONFIG, **(custom_config or {}), "seed": seed}
  if mode == planetoid_pipeline.IN_MEMORY:
    config["retrieval_splits"] = ["test"]
  name = f"planetoid-{dataset}-links"
  metadata_path = os.path.join(output_dir, "metadata.sqlite")
  link = planetoid_pipeline.link_config(
      fan_outs, seed=seed, negatives_per_positive={"train": train_negatives, "eval": 1, "test": 1})
  tfx.orchestration.LocalDagRunner().run(planetoid_pipeline.create_link_pipeline(
      pipeline_name=name, pipeline_root=os.path.join(output_dir, "pipeline_root"),
      tables_dir=tables["dir"], metadata=metadata_path, link=link, module_file=module_file,
      custom_config=config, mode=mode, evaluation_split="test"))
  model = mlmd_utils.latest_artifact(metadata_path, "Model", name)
  if mode == planetoid_pipeline.IN_MEMORY:  # the same held-out pairs LinkSampler writes
    examples_uri = planetoid_pipeline.write_link_split(
        tables["dir"], link, "test", os.path.join(output_dir, f"in_memory_test_{seed}"))
  else:
    examples_uri = mlmd_utils.latest_artifact(metadata_path, "Examples", name).uri
  scores = planetoid_pipeline.evaluate_link_model(
      os.path.join(model.uri, "Format-Serving"), examples_uri, "test")
  retrieval = {k: v for k, v in mlmd_utils.custom_properties(model).items()
               if k.startswith(RETRIEVAL) and k != f"{RETRIEVAL}splits"}
  from gnn_trainer_component.evaluator import evaluation as evaluation_lib
  evaluation = evaluation_lib.read(
      mlmd_utils.latest_artifact(metadata_path, "ModelEvaluation", name).uri)
  return {"seed": seed, **scores, **retrieval, "model_uri": model.uri,
          "evaluation": {p: {k: v for k, v in m["all"].items() if k != "num_nodes"}
                         for p, m in evaluation["metrics"].items()},
          "blessed": evaluation["blessed"], "seconds": round(time.time() - start, 1)}


def _run_and_measure(**kwargs) -> dict:
  """:func:`run_once` and the peak RSS of this process (GiB)."""
  result = run_once(**kwargs)
  result["peak_rss_gib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
  return result


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--dataset", choices=["cora", "citeseer", "pubmed"], default="cora")
  parser.add_argument("--data-dir", required=True)
  parser.add_argument("--seeds", type=int, default=5)
  parser.add_argument("--first-seed", type=int, default=0)
  parser.add_argument("--epochs", type=int, default=DEFAULT_CUSTOM_CONFIG["epochs"])
  parser.add_argument("--fan-outs", default=",".join(str(f) for f in DEFAULT_FAN_OUTS))
  parser.add_argument("--scorer", choices=["dot", "hadamard"], default="hadamard")
  parser.add_argument("--train-negatives", type=float, default=DEFAULT_TRAIN_NEGATIVES,
                      help="Negatives per positive in the training split (validation and "
                           "test: 1, as GAE).")
  parser.add_argument("--select-by", default=DEFAULT_CUSTOM_CONFIG["restore_best_weights_by"],
                      help="GnnTrainer restore_best_weights_by, e.g. val_loss.")
  parser.add_argument("--hparams", default="{}",
                      help="JSON object of module hparams, e.g. '{\"mark_ends\": true}'.")
  parser.add_argument("--mode", choices=planetoid_pipeline.MODES,
                      default=planetoid_pipeline.IN_MEMORY,
                      help="in_memory: GnnTrainer holds the graph and draws negatives every "
                           "epoch; sampled: LinkSampler's examples (Beam).")
  parser.add_argument("--graph-mode", choices=["auto", "sampled", "full_graph"], default="auto",
                      help="GnnTrainer graph_mode in memory: full_graph trains on the whole "
                           "message-passing graph, each step read out at its pairs.")
  parser.add_argument("--batch-size", type=int, default=DEFAULT_CUSTOM_CONFIG["global_batch_size"],
                      help="GnnTrainer global_batch_size: pairs per step.")
  parser.add_argument("--work-dir", default=None, help="Default: a fresh temp dir.")
  parser.add_argument("--output", default=None, help="Also write the JSON here.")
  args = parser.parse_args(argv)
  work_dir = os.path.abspath(args.work_dir or tempfile.mkdtemp(prefix="link_bench_"))
  fan_outs = [int(f) for f in args.fan_outs.split(",")]
  hparams = json.loads(args.hparams)
  start = time.time()
  # One fresh process per seed: in one process, memory grows with each
  # LocalDagRunner run (Beam's in-process runner) until the OOM killer stops it.
  runs = []
  for seed in range(args.first_seed, args.first_seed + args.seeds):
    with multiprocessing.get_context("spawn").Pool(1) as pool:
      runs.append(pool.apply(_run_and_measure, kwds=dict(
          dataset=args.dataset, data_dir=os.path.abspath(args.data_dir),
          output_dir=work_dir, seed=seed, fan_outs=fan_outs,
          train_negatives=args.train_negatives, mode=args.mode,
          custom_config={"epochs": args.epochs, "restore_best_weights_by": args.select_by,
                         "graph_mode": args.graph_mode, "global_batch_size": args.batch_size,
                         "hparams": {"scorer": args.scorer, **hparams}})))
  auc = np.array([r["auc"] for r in runs])
  ap = np.array([r["average_precision"] for r in runs])
  result = {
      "dataset": args.dataset, "mode": args.mode, "graph_mode": args.graph_mode,
      "batch_size": args.batch_size,
      "scorer": args.scorer, "fan_outs": fan_outs,
      "train_negatives": args.train_negatives, "select_by": args.select_by, "hparams": hparams,
      "epochs": args.epochs, "seeds": [r["seed"] for r in runs],
      "auc": [round(float(a), 4) for a in auc], "ap": [round(float(a), 4) for a in ap],
      "auc_mean": round(float(auc.mean()), 4), "auc_std": round(float(auc.std()), 4),
      "ap_mean": round(float(ap.mean()), 4), "ap_std": round(float(ap.std()), 4),
      **{f"hits@{k}_mean": round(float(np.mean([r[f"hits@{k}"] for r in runs])), 4)
         for k in planetoid_pipeline.HITS_AT},
      **{f"hits@{k}": [round(r[f"hits@{k}"], 4) for r in runs]
         for k in planetoid_pipeline.HITS_AT},
      **{f"{k}_mean": round(float(np.mean([r[k] for r in runs])), 4)
         for k in sorted(runs[0]) if k.startswith(RETRIEVAL) and k != f"{RETRIEVAL}queries"},
      **{k: [round(r[k], 4) for r in runs]
         for k in sorted(runs[0]) if k.startswith(RETRIEVAL) and k != f"{RETRIEVAL}queries"},
      "graph_evaluator": {
          predictor: {metric: round(float(np.mean([r["evaluation"][predictor][metric]
                                                     for r in runs])), 4)
                      for metric in metrics}
          for predictor, metrics in runs[0]["evaluation"].items()},
      "blessed": sum(bool(r["blessed"]) for r in runs),
      "num_test_pairs": [r["num_examples"] for r in runs],
      "seconds_per_run": [r["seconds"] for r in runs],
      "peak_rss_gib_per_run": [r["peak_rss_gib"] for r in runs],
      "wall_seconds": round(time.time() - start, 1), "work_dir": work_dir,
  }
  report.print_result(result, args.output)
  return 0


if __name__ == "__main__":
  sys.exit(main())
