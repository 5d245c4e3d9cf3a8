"""Sampling strategies side by side: seeds/s of the in-memory kernel for each, on one graph.

  PYTHONPATH=. .venv/bin/python -m benchmarks.strategies [--num-edges 10000000]

The power-law graph of ``benchmarks.in_memory`` (1M nodes / 10M edges by default), loaded
once through the store; every edge gets a weight (uniform in (0, 1]) and a time (uniform
integer in [0, 10^6)), every seed a time from the same range. Each strategy samples 2 hops
(fan-outs 10, 5) around batches of 128 seeds with :func:`kernel.sample` (numpy, the part a
strategy changes; the tf.data and GraphTensor work around it is the same for all), variants
interleaved batch set by batch set, ``--repeats`` times; medians and each strategy's ratio to
``uniform`` in one JSON object (also written to ``--output``). The indexes the weighted and
time-aware strategies sort by are built once per edge set before the first batch, timed apart
(``index_build_s``).

``--in-graph`` also times each strategy where the trainer samples: the in-memory sampler's
merged-batch dataset (``SubgraphSampler.dataset``, the numpy kernel in a ``tf.data`` map,
batched and merged as ``runner.run`` does), consumed in-graph (``Dataset.reduce``, as a Keras
train step pulls its batch), the same seeds and times, strategies interleaved:
``in_graph_seeds_per_s`` and ``in_graph_ratio_to_uniform``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
from typing import Optional, Sequence

import numpy as np

from benchmarks import in_memory as in_memory_bench
from benchmarks import report

BATCH_SIZE = 128
FAN_OUTS = (10, 5)
TIME_RANGE = 10**6
#: Issue targets: a strategy's seeds/s over uniform's.
TARGETS = {"uniform_before": 0.7, "latest": 0.7, "weighted": 0.5}


def plans(edge_set: str, node_set: str) -> dict:
  """Strategy -> a 2-hop plan of it (the same strategy at both hops)."""
  from gnn_trainer_component.graph import sampling  # pylint: disable=g-import-not-at-top
  keys = {"uniform": {}, "weighted": {"weight": "w"}, "top_k": {"weight": "w"},
          "uniform_before": {"time": "t"}, "latest": {"time": "t"}}
  out = {}
  for strategy, extra in keys.items():
    ops, inputs = [], ("seed",)
    for hop, size in enumerate(FAN_OUTS, 1):
      ops.append(sampling.SamplingOp(
          name=f"hop{hop}", inputs=inputs, edge_set=edge_set, source=node_set,
          target=node_set, size=size, strategy=strategy, **extra))
      inputs = (f"hop{hop}",)
    out[strategy] = sampling.SamplingPlan(seed_node_set=node_set, seed_op="seed",
                                          ops=tuple(ops))
  return out


def in_graph_seconds(graph, plan, seeds: np.ndarray, times: np.ndarray) -> float:
  """Seconds for the trainer's input pipeline to sample ``seeds`` with ``plan``, in-graph."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component.in_memory import dataset as dataset_lib  # pylint: disable=g-import-not-at-top
  sampler = dataset_lib.SubgraphSampler(graph, plan)
  rows = seeds
  if plan.timed:  # row i is seed i at its time
    sampler = dataset_lib.TimedSubgraphSampler(sampler, seeds, times, check_leakage=False)
    rows = np.arange(len(seeds))
  ds = in_memory_bench._trainer_pipeline(  # pylint: disable=protected-access
      sampler.dataset(rows, batch_size=BATCH_SIZE, shuffle=False, fresh=True, seed=0,
                      merged=True).prefetch(tf.data.AUTOTUNE), 1).prefetch(tf.data.AUTOTUNE)
  return in_memory_bench._reduce_seconds(ds, warmup=5)  # pylint: disable=protected-access


def with_features(graph, edge_set: str, weights: np.ndarray, times: np.ndarray):
  """``graph`` with a weight ``w`` and a time ``t`` on every edge of ``edge_set`` (and in its
  schema, which the sampled GraphTensors follow)."""
  schema = type(graph.schema)()
  schema.CopyFrom(graph.schema)
  features = schema.edge_sets[edge_set].features
  features["w"].dtype = 1  # DT_FLOAT
  features["t"].dtype = 9  # DT_INT64
  edges = dataclasses.replace(graph.edge_sets[edge_set], features={"w": weights, "t": times})
  return dataclasses.replace(graph, schema=schema,
                             edge_sets={**graph.edge_sets, edge_set: edges})


def main(argv: Optional[Sequence[str]] = None) -> int:
  import gnn_trainer_component  # pylint: disable=g-import-not-at-top
  gnn_trainer_component.setup_process()
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--work-dir", help="The generated graph goes here; default a temp dir.")
  p.add_argument("--num-nodes", type=int, default=1_000_000)
  p.add_argument("--num-edges", type=int, default=10_000_000)
  p.add_argument("--batches", type=int, default=100, help="Batches per strategy per repeat.")
  p.add_argument("--repeats", type=int, default=5)
  p.add_argument("--in-graph", action="store_true",
                 help="Also time each strategy in the trainer's tf.data pipeline, in-graph.")
  p.add_argument("--output", default=os.path.join(report.REPO_ROOT, "benchmarks", "results",
                                                  "strategies.json"))
  args = p.parse_args(argv)
  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component import process
  from gnn_trainer_component.graph import sampling
  from gnn_trainer_component.in_memory import choosers
  from gnn_trainer_component.in_memory import kernel
  from gnn_trainer_component.in_memory import store as store_lib
  from gnn_trainer_component import graph_schema as graph_schema_lib
  # pylint: enable=g-import-not-at-top
  work_dir = args.work_dir or tempfile.mkdtemp(prefix="strategies-")
  summary = in_memory_bench.generate_graph(work_dir, args.num_nodes, args.num_edges, 0.01)
  schema = graph_schema_lib.read_artifact_schema(summary["dir"])
  start = time.perf_counter()
  graph, _, _ = store_lib.load(schema, summary["dir"],
                            graph_schema=sampling.output_graph_schema(schema),
                            seed_node_set=None, seed_tables={},
                            memory_bytes=process.memory_bytes(), who="benchmark")
  load_s = time.perf_counter() - start
  rng = np.random.default_rng(0)
  size = graph.edge_sets["follows"].size
  graph = with_features(graph, "follows", (1.0 - rng.random(size)).astype(np.float32),
                        rng.integers(0, TIME_RANGE, size))
  edges = graph.edge_sets["follows"]
  by_strategy = plans("follows", "user")
  index_s = {}
  for name, strategy in (("time", "latest"), ("weight", "top_k")):
    start = time.perf_counter()
    choosers.prepare(graph, by_strategy[strategy])  # once per edge set and feature
    index_s[name] = round(time.perf_counter() - start, 2)
  num = graph.node_sets["user"].size
  rates = {s: [] for s in by_strategy}
  in_graph = {s: [] for s in by_strategy}
  for repeat in range(args.repeats):
    seeds = rng.integers(0, num, (args.batches, BATCH_SIZE))
    times = rng.integers(0, TIME_RANGE, (args.batches, BATCH_SIZE))
    order = list(by_strategy) if repeat % 2 == 0 else list(reversed(by_strategy))
    for strategy in order:
      plan = by_strategy[strategy]
      sample_rng = np.random.default_rng(repeat)
      start = time.perf_counter()
      for b in range(args.batches):
        kernel.sample(graph, plan, seeds[b], sample_rng, times=times[b] if plan.timed else None)
      rates[strategy].append(args.batches * BATCH_SIZE / (time.perf_counter() - start))
      if args.in_graph:
        in_graph[strategy].append(seeds.size / in_graph_seconds(
            graph, plan, seeds.ravel(), times.ravel()))
  medians = {s: statistics.median(r) for s, r in rates.items()}
  ratios = {s: medians[s] / medians["uniform"] for s in medians}
  extra = {}
  if args.in_graph:
    in_graph_medians = {s: statistics.median(r) for s, r in in_graph.items()}
    extra = {"in_graph_seeds_per_s": {s: round(v) for s, v in in_graph_medians.items()},
             "in_graph_ratio_to_uniform": {
                 s: round(v / in_graph_medians["uniform"], 3)
                 for s, v in in_graph_medians.items()}}
  report.print_result({
      "benchmark": "strategies", "num_nodes": num, "num_edges": int(edges.size),
      "batch_size": BATCH_SIZE, "fan_outs": list(FAN_OUTS), "repeats": args.repeats,
      "batches": args.batches, "load_s": round(load_s, 1),
      "index_build_s": index_s,
      "seeds_per_s": {s: round(v) for s, v in medians.items()},
      "ratio_to_uniform": {s: round(v, 3) for s, v in ratios.items()},
      "targets": {s: {"ratio": t, "met": ratios[s] >= t} for s, t in TARGETS.items()},
      **extra,
      "source": in_memory_bench.source_version()}, args.output)
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
