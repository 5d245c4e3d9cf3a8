"""Benchmark: LinkSampler's memory and time with node features broadcast vs joined.

  python -m benchmarks.link_sampler_memory --data-dir ../shared/data/planetoid \
      --repeats 1 --output link_sampler_memory.json

Runs LinkSampler's executor (Beam's in-process DirectRunner, as in a
LocalDagRunner pipeline) on Cora's citation tables with the link benchmark's
config (fan-outs 10,5, ``--train-negatives`` per training positive), once per
mode and repeat, modes interleaved, each run in a fresh process: ``broadcast``
(node features looked up in a side input, the default for tables up to
``beam_sampling.BROADCAST_MAX_BYTES``) and ``join`` (features joined per
example, the path for larger tables). Reports each mode's median wall time and
peak RSS, their ratios, and whether both wrote the same examples. Prints one
JSON object.
"""

from __future__ import annotations

import argparse
import glob
import json
import multiprocessing
import os
import resource
import statistics
import sys
import tempfile
import time

# First: Keras 2 for TF-GNN, before TensorFlow is imported.
import gnn_trainer_component  # pylint: disable=g-bad-import-order
gnn_trainer_component.setup_process()

# pylint: disable=g-import-not-at-top,wrong-import-position
from benchmarks import link_prediction
from benchmarks import report
from pipelines.planetoid import pipeline as planetoid_pipeline
from pipelines.planetoid import run_local

MODES = ("broadcast", "join")


def _sample_once(mode: str, tables_dir: str, out_dir: str, train_negatives: float) -> dict:
  """One LinkSampler execution in this (fresh) process; its wall time and peak RSS."""
  from tfx.dsl.components.base import base_beam_executor
  from tfx.types import standard_artifacts
  from gnn_trainer_component import artifacts
  from gnn_trainer_component.sampler.link import executor as link_executor
  from gnn_trainer_component.beam import sampling as beam_sampling
  if mode == "join":
    beam_sampling.BROADCAST_MAX_BYTES = 0
  schema_in = artifacts.GraphSchema()
  schema_in.uri = tables_dir
  examples = standard_artifacts.Examples()
  examples.uri = os.path.join(out_dir, "examples")
  schema_out = artifacts.GraphSchema()
  schema_out.uri = os.path.join(out_dir, "graph_schema")
  os.makedirs(examples.uri)
  config = planetoid_pipeline.link_config(
      link_prediction.DEFAULT_FAN_OUTS, seed=0,
      negatives_per_positive={"train": train_negatives, "eval": 1, "test": 1})
  ctx = base_beam_executor.BaseBeamExecutor.Context(
      beam_pipeline_args=[], tmp_dir=os.path.join(out_dir, "tmp"), unique_id="1")
  start = time.time()
  link_executor.Executor(ctx).Do(
      {"graph_schema": [schema_in]},
      {"examples": [examples], "output_graph_schema": [schema_out]},
      {"link_config": json.dumps(config), "num_shards": 0})
  return {"mode": mode, "seconds": round(time.time() - start, 1),
          "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
          "examples_uri": examples.uri}


def _canonical_examples(examples_uri: str) -> list[bytes]:
  """Every split's examples, deterministically serialized and sorted."""
  import tensorflow as tf
  out = []
  for split_dir in sorted(glob.glob(os.path.join(examples_uri, "Split-*"))):
    files = sorted(glob.glob(os.path.join(split_dir, "*.gz")))
    out.extend(sorted(
        tf.train.Example.FromString(r).SerializeToString(deterministic=True)
        for r in tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator()))
  return out


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--data-dir", required=True)
  parser.add_argument("--repeats", type=int, default=1)
  parser.add_argument("--train-negatives", type=float,
                      default=link_prediction.DEFAULT_TRAIN_NEGATIVES)
  parser.add_argument("--work-dir", default=None, help="Default: a fresh temp dir.")
  parser.add_argument("--output", default=None, help="Also write the JSON here.")
  args = parser.parse_args(argv)
  work_dir = os.path.abspath(args.work_dir or tempfile.mkdtemp(prefix="link_sampler_mem_"))
  tables = run_local.prepare_tables("cora", os.path.abspath(args.data_dir), work_dir)
  start = time.time()
  runs = []
  for repeat in range(args.repeats):
    for mode in MODES:  # interleaved
      with multiprocessing.get_context("spawn").Pool(1) as pool:
        runs.append(pool.apply(_sample_once, (
            mode, tables["dir"], os.path.join(work_dir, f"{mode}-{repeat}"),
            args.train_negatives)))
  same = _canonical_examples(runs[0]["examples_uri"]) == _canonical_examples(
      runs[1]["examples_uri"])
  median = {mode: {key: statistics.median(r[key] for r in runs if r["mode"] == mode)
                   for key in ("seconds", "peak_rss_gib")} for mode in MODES}
  result = {
      "dataset": "cora", "fan_outs": list(link_prediction.DEFAULT_FAN_OUTS),
      "train_negatives": args.train_negatives, "repeats": args.repeats,
      "median": median,
      "join_over_broadcast": {key: round(median["join"][key] / median["broadcast"][key], 2)
                              for key in ("seconds", "peak_rss_gib")},
      "same_examples": same,
      "runs": [{k: v for k, v in r.items() if k != "examples_uri"} for r in runs],
      "wall_seconds": round(time.time() - start, 1), "work_dir": work_dir,
  }
  report.print_result(result, args.output)
  return 0 if same else 1


if __name__ == "__main__":
  sys.exit(main())
