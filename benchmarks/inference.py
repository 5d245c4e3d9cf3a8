"""Whole-graph inference (issue 38): every node of a 1M-node graph through GraphInferrer's engine.

  PYTHONPATH=. .venv/bin/python -m benchmarks.inference \\
      --num-nodes 1000000 --num-edges 10000000 --engine in_memory

The power-law graph of ``benchmarks.power_law_graph`` (seed 0, generated in a
child process into ``--work-dir/graph`` or reused, as ``benchmarks.in_memory``
does), a model trained on it by GnnTrainer's own training path (the user module
of ``benchmarks.in_memory``: score -> Dense(32), two rounds of mean SimpleConv,
root-node 10-class classification; one epoch over ``--train-seeds`` seeds, in
memory, exported with its ``embeddings`` signature), then, in a fresh child
process, ``gnn_trainer_component.inferrer.in_memory.infer`` over every node
with the training's sampling config (fan-outs 10, 5): load the tables, sample
around each node, encode GraphSampler's tf.Example, run the ``embeddings``
signature, write the Parquet table.

``--mode full_graph`` runs ``gnn_trainer_component.inferrer.full.infer``
instead (GraphInferrer's ``inference_config`` ``mode: "full_graph"``): the same
tables loaded, then the model once over the whole graph, every node read out
(exact full-neighbourhood states); ``--mode sampled,full_graph`` runs both
children on the same model, one after the other, and prints one JSON line per
mode; ``--jit-compile`` sets mode full_graph's ``jit_compile`` (default
``null``: XLA where the model's ops compile; ``false`` for the pass without
XLA); ``--chunk-edges`` sets its ``chunk_edges`` (above it, layer by layer over
chunks of nodes; a comma list runs one child per value, ``--repeats`` times,
interleaved, e.g. ``--chunk-edges 2000000,1000000000`` against the one pass).

``--engine beam`` runs ``gnn_trainer_component.inferrer.beam.infer`` instead:
GraphSampler's Beam engine on Beam's DirectRunner with two worker processes
(:data:`BEAM_ARGS`), the model on the workers; ``--nodes N`` infers the first N
nodes only (a node table written next to the graph's), as Beam's DirectRunner
needs hours for every node of a large graph on one machine.

Measured in that child: ``seconds`` (wall time of ``infer``, loading and
validation included); ``load_s`` (of that, loading the tables; mode full_graph); ``peak_rss_gb`` (``ru_maxrss`` of the child: the graph,
the model and the batches in flight; for Beam the launcher's) and
``peak_rss_children_gb`` (the largest finished child process: Beam's workers). Prints one JSON object
(the last line, keys ``nodes``, ``seconds``, ``peak_rss_gb`` and more) and
writes it to ``--output``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Optional, Sequence

from benchmarks import in_memory as in_memory_bench
from benchmarks import report

ENGINES = ("in_memory", "beam")
#: The Beam engine's runner here: Beam's DirectRunner with a worker process per core.
BEAM_ARGS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
#: ``--jit-compile`` -> inference_config ``jit_compile``.
_JIT = {"null": None, "true": True, "false": False}


def _train(graph: dict, work_dir: str, train_seeds: int) -> str:
  """A model trained one epoch on the graph in memory; returns its SavedModel folder."""
  # pylint: disable=g-import-not-at-top
  import dataclasses
  import tensorflow as tf
  from gnn_trainer_component.in_memory import adapters
  from gnn_trainer_component.trainer import config as config_lib
  from gnn_trainer_component.trainer import inputs as inputs_lib
  from gnn_trainer_component.trainer import module_contract
  from gnn_trainer_component.trainer import training
  # pylint: enable=g-import-not-at-top
  splits = adapters.load(graph["dir"], seeds=graph["seed_tables"],
                         sampling_config=in_memory_bench.SAMPLING_CONFIG,
                         splits=["train", "eval"])
  num_train = min(train_seeds, len(splits.seeds["train"]))
  num_eval = min(2_000, len(splits.seeds["eval"]))
  splits = dataclasses.replace(splits, seeds={"train": splits.seeds["train"][:num_train],
                                              "eval": splits.seeds["eval"][:num_eval]})
  cfg = config_lib.make_trainer_config(
      {"splits": ["train"]}, {"splits": ["eval"]},
      {"global_batch_size": in_memory_bench.BATCH_SIZE, "epochs": 1, "seed": 0})
  run_dir = tempfile.mkdtemp(prefix="train-", dir=work_dir)
  inputs = inputs_lib.TrainingInputs(
      cfg=cfg, user_module=module_contract.load_user_module(None, "benchmarks.in_memory"),
      data=adapters.SampledData(train_splits=("train",), eval_splits=("eval",), source=splits),
      model_run_dir=os.path.join(run_dir, "model_run"),
      staging_dir=os.path.join(run_dir, "model"), resume_dir=os.path.join(run_dir, "backup"))
  training.train_and_export(inputs, tf.distribute.get_strategy())
  return inputs.staging_dir


def _nodes_table(graph_dir: str, num_nodes: int, limit: Optional[int]) -> Optional[str]:
  """A node table of the first ``limit`` nodes in the graph's folder (None: every node)."""
  if not limit or limit >= num_nodes:
    return None
  import pandas as pd  # pylint: disable=g-import-not-at-top
  name = f"nodes-first-{limit}.csv"
  ids = []
  for path in sorted(os.listdir(graph_dir)):
    if path.startswith("nodes-") and path.endswith(".csv") and "first" not in path:
      ids.extend(pd.read_csv(os.path.join(graph_dir, path), usecols=["id"], dtype=str)["id"])
      if len(ids) >= limit:
        break
  pd.DataFrame({"id": ids[:limit]}).to_csv(os.path.join(graph_dir, name), index=False)
  return name


def _child(args) -> dict:
  """Runs the engine in this (fresh) process; its own timings and peak RSS."""
  # pylint: disable=g-import-not-at-top
  import apache_beam as beam
  from apache_beam.options.pipeline_options import PipelineOptions
  from gnn_trainer_component.inferrer import beam as beam_engine
  from gnn_trainer_component.inferrer import config as config_lib
  from gnn_trainer_component.inferrer import full
  from gnn_trainer_component.inferrer import in_memory
  # pylint: enable=g-import-not-at-top
  cfg = config_lib.InferenceConfig(batch_size=args.batch_size, engine=args.engine,
                                   mode=args.mode, jit_compile=_JIT[args.jit_compile],
                                   chunk_edges=int(args.chunk_edges))
  kwargs = dict(cfg=cfg, sampling_config=in_memory_bench.SAMPLING_CONFIG,
                nodes=args.nodes_table or None)
  start = time.perf_counter()
  if args.engine == "beam":
    result = beam_engine.infer(lambda: beam.Pipeline(options=PipelineOptions(BEAM_ARGS)),
                               BEAM_ARGS, args.graph_dir, args.model_dir, args.table, **kwargs)
  elif args.mode == config_lib.FULL_GRAPH:
    result = full.infer(args.graph_dir, args.model_dir, args.table, **kwargs)
  else:
    result = in_memory.infer(args.graph_dir, args.model_dir, args.table, **kwargs)
  seconds = time.perf_counter() - start
  return {"nodes": result.rows, "seconds": round(seconds, 1),
          "load_s": None if result.load_seconds is None else round(result.load_seconds, 1),
          "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9,
                               3),
          "peak_rss_children_gb": round(
              resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e9, 3),
          "nodes_per_s": round(result.rows / seconds, 1), "columns": result.columns,
          "table_mb": round(os.path.getsize(args.table) / 1e6, 1)}


def main(argv: Optional[Sequence[str]] = None) -> int:
  import gnn_trainer_component  # pylint: disable=g-import-not-at-top
  gnn_trainer_component.setup_process()  # first: Keras 2, before TensorFlow
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--work-dir", help="Graph, model and table go here; default a temp dir.")
  p.add_argument("--num-nodes", type=int, default=1_000_000)
  p.add_argument("--num-edges", type=int, default=10_000_000)
  p.add_argument("--engine", choices=ENGINES, default="in_memory")
  p.add_argument("--mode", default="sampled",
                 help="sampled, full_graph, or both (sampled,full_graph): one child per mode, "
                      "same model.")
  p.add_argument("--batch-size", type=int, default=512, help="inference_config batch_size")
  p.add_argument("--jit-compile", choices=sorted(_JIT), default="null",
                 help="inference_config jit_compile (mode full_graph): null = XLA where it "
                      "compiles.")
  p.add_argument("--chunk-edges", default="2000000",
                 help="inference_config chunk_edges (mode full_graph); a comma list: one child "
                      "per value.")
  p.add_argument("--repeats", type=int, default=1, help="Children per mode and chunk_edges.")
  p.add_argument("--model-from", help="Reuse this SavedModel folder instead of training.")
  p.add_argument("--train-seeds", type=int, default=10_000)
  p.add_argument("--nodes", type=int, help="Infer the first N nodes only (default: every node).")
  p.add_argument("--output", default=None)
  # The child process (internal).
  p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  p.add_argument("--graph-dir", help=argparse.SUPPRESS)
  p.add_argument("--model-dir", help=argparse.SUPPRESS)
  p.add_argument("--table", help=argparse.SUPPRESS)
  p.add_argument("--nodes-table", help=argparse.SUPPRESS)
  args = p.parse_args(argv)
  if args.child:
    print(json.dumps(_child(args)))
    return 0

  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
  absl_logging.set_verbosity(absl_logging.WARNING)
  work_dir = args.work_dir or tempfile.mkdtemp(prefix="inference-")
  os.makedirs(work_dir, exist_ok=True)
  fraction = in_memory_bench.seed_fraction(args.num_nodes, args.train_seeds, 2_000)
  graph = in_memory_bench.generate_graph(work_dir, args.num_nodes, args.num_edges, fraction)
  start = time.perf_counter()
  model_dir = args.model_from or _train(graph, work_dir, args.train_seeds)
  train_s = time.perf_counter() - start
  print(f"trained in {train_s:.0f} s: {model_dir}", file=sys.stderr, flush=True)
  nodes_table = _nodes_table(graph["dir"], args.num_nodes, args.nodes)
  runs = [(mode, chunk) for _ in range(args.repeats) for mode in args.mode.split(",")
          for chunk in (args.chunk_edges.split(",") if mode == "full_graph" else ["0"])]
  for i, (mode, chunk) in enumerate(runs):
    table = os.path.join(work_dir, f"embeddings-{args.engine}-{mode}-{chunk}.parquet")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.inference", "--child", "--graph-dir", graph["dir"],
         "--model-dir", model_dir, "--table", table, "--batch-size", str(args.batch_size),
         "--engine", args.engine, "--mode", mode, "--nodes-table", nodes_table or "",
         "--jit-compile", args.jit_compile if mode == "full_graph" else "null",
         "--chunk-edges", chunk if mode == "full_graph" else "2000000"],
        cwd=report.REPO_ROOT, check=True, capture_output=True, text=True,
        env=dict(os.environ, TF_USE_LEGACY_KERAS="1"))
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    _report(args, argv, graph, train_s, mode, dict(measured, chunk_edges=int(chunk) or None),
            f"-{mode}-{chunk}-{i}" if len(runs) > 1 else "")
  return 0


def _report(args, argv, graph: dict, train_s: float, mode: str, measured: dict,
            suffix: str) -> None:
  """Prints (and writes to ``--output``, ``suffix`` before .json) one run."""
  output = args.output
  if output and suffix:
    output = output.replace(".json", f"{suffix}.json")
  result = {
      "command": " ".join(["python -m benchmarks.inference"] + list(argv or sys.argv[1:])),
      "date": time.strftime("%Y-%m-%d"), "engine": args.engine, "mode": mode,
      "cpus": os.cpu_count(),
      "graph": {k: graph.get(k) for k in ("num_nodes", "num_edges", "max_degree",
                                          "median_degree")},
      "sampling_config": in_memory_bench.SAMPLING_CONFIG, "batch_size": args.batch_size,
      "jit_compile": _JIT[args.jit_compile] if mode == "full_graph" else None,
      "beam_pipeline_args": BEAM_ARGS if args.engine == "beam" else None,
      "train_s": round(train_s, 1), "source": in_memory_bench.source_version(),
      **measured}
  report.print_result(result, output)


if __name__ == "__main__":
  sys.exit(main())
