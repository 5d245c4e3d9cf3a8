r"""Benchmark: GraphStatisticsGen's work on a large graph, in one fresh process.

  TF_USE_LEGACY_KERAS=1 PYTHONPATH=. .venv/bin/python -m benchmarks.graph_statistics \
      --num-nodes 1000000 --num-edges 10000000 [--format parquet] [--graph-dir DIR] \
      [--engine beam] [--output benchmarks/results/graph-statistics-1m.json]

Writes the power-law graph of ``benchmarks/power_law_graph.py`` (or reads ``--graph-dir``,
written by it before), then runs in a child process what GraphStatisticsGen's executor runs:
the tables read with their faults counted, the graph statistics (degrees both ways, dangling
ends, duplicates, multi-edges, seeds, labels, label purity of the ``score`` feature), TFDV's
statistics of each table, ``graph_statistics.json`` and ``report.png`` written. Prints one
JSON line: ``seconds`` (the work, after the imports), ``import_seconds``, ``peak_rss_gb``
(the child's own peak; on Beam, the driver's, its workers not counted), the graph's size
and what it found.
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

from benchmarks import power_law_graph
from benchmarks import report


def _child(graph_dir: str, seeds: dict, engine: str) -> dict:
  """GraphStatisticsGen's work on ``graph_dir``, timed, in this (fresh) process."""
  start = time.perf_counter()
  import gnn_trainer_component  # pylint: disable=g-import-not-at-top
  gnn_trainer_component.setup_process()
  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component.statistics_gen import config
  from gnn_trainer_component.statistics_gen import executor
  from gnn_trainer_component.statistics_gen import report as report_png
  imported = time.perf_counter()
  import apache_beam as beam
  spec = config.parse({"seed_node_set": "user", "label": "label"}, seeds).spec
  make_pipeline = ((lambda: beam.Pipeline(argv=["--direct_num_workers=0",
                                                 "--direct_running_mode=multi_processing"]))
                   if engine == config.BEAM else None)
  stats, features = executor.compute(graph_dir, spec, make_pipeline=make_pipeline)
  with tempfile.TemporaryDirectory() as out:
    with open(os.path.join(out, "graph_statistics.json"), "w", encoding="utf-8") as f:
      json.dump(stats, f)
    for split, feature_stats in features.items():
      with open(os.path.join(out, f"{split}.pb"), "wb") as f:
        f.write(feature_stats.SerializeToString())
    report_png.write(stats, os.path.join(out, "report.png"))
  done = time.perf_counter()
  follows = stats["edge_sets"]["follows"]
  return {"seconds": round(done - imported, 2), "import_seconds": round(imported - start, 2),
          "peak_rss_gb": round(report.peak_rss_bytes() / 2**30, 3),
          "found": {"nodes": stats["node_sets"]["user"]["nodes"], "edges": follows["edges"],
                    "self_loops": follows["self_loops"], "multi_edges": follows["multi_edges"],
                    "max_out_degree": follows["out_degree"]["max"],
                    "isolated": stats["node_sets"]["user"]["isolated"],
                    "homophily": round(follows["homophily"]["share"], 4),
                    "score_label_purity": stats["label"]["label_purity"]["score"]}}


def main(argv: Optional[Sequence[str]] = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--num-nodes", type=int, default=1_000_000)
  p.add_argument("--num-edges", type=int, default=10_000_000)
  p.add_argument("--format", choices=power_law_graph.FORMATS, default="csv")
  p.add_argument("--engine", choices=("in_memory", "beam"), default="in_memory",
                 help="GraphStatisticsGen's engine (beam: DirectRunner, one worker per core; "
                      "CSV tables)")
  p.add_argument("--graph-dir", default=None,
                 help="A graph power_law_graph wrote (default: write one to a temp folder).")
  p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  p.add_argument("--output", default=None)
  args = p.parse_args(argv)
  seeds = {split: f"seeds-{split}.{args.format}" for split in ("train", "eval")}
  if args.child:
    print(json.dumps(_child(args.graph_dir, seeds, args.engine)))
    return 0
  with tempfile.TemporaryDirectory() as tmp:
    graph_dir, graph = args.graph_dir, {}
    if graph_dir is None:
      graph_dir = os.path.join(tmp, "graph")
      graph = power_law_graph.generate(graph_dir, num_nodes=args.num_nodes,
                                       num_edges=args.num_edges, fmt=args.format)
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.graph_statistics", "--child", "--graph-dir",
         graph_dir, "--format", args.format, "--engine", args.engine],
        cwd=report.REPO_ROOT, capture_output=True,
        text=True, check=True, env=dict(os.environ, PYTHONPATH=report.REPO_ROOT))
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  result.update(format=args.format, engine=args.engine, cpus=os.cpu_count(),
                graph={k: graph[k] for k in ("num_nodes", "num_edges", "max_degree",
                                             "median_degree") if k in graph})
  report.print_result(result, args.output)
  return 0


if __name__ == "__main__":
  sys.exit(main())
