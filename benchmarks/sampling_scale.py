"""GraphSampler at scale: wall time and peak memory per process, 10 % -> 100 % of a large graph.

  PYTHONPATH=. .venv/bin/python -m benchmarks.sampling_scale --work-dir /tmp/sampling \\
      --num-nodes 1000000 --num-edges 10000000 --fractions 0.1 1.0 --workers 2 \\
      --output benchmarks/results/sampling-scale-DATE.json

For each fraction f, a power-law graph of ``f * num_nodes`` nodes and ``f *
num_edges`` edges (``benchmarks.power_law_graph``, seeds 1 % of the nodes) is
sampled by the GraphSampler executor (the samplers' own Beam engine; TF-GNN's
Beam sampler before, benchmarks/README.md, "GraphSampler at scale"), 2 hops, fan-outs
``--fan-outs`` on Beam's DirectRunner in multi-process mode
(``--direct_running_mode=multi_processing --direct_num_workers=W``), each run in
a fresh process. Measured per run, from outside: wall time; the executor's own
phases from its log (table validation in the launcher process, the Beam
pipeline); peak RSS of every process of the tree (sampled every 0.2 s with
psutil): the launcher (TFX executor, validation, pipeline construction) and each
Beam worker. After each run (outside the timing) the output is checked against
the tables: examples written per split (one per seed) and each root's first hop
(all distinct out-neighbours when it has at most the first fan-out of edges;
see ``_check_output``). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional, Sequence

import psutil

from benchmarks import power_law_graph
from benchmarks import report

_PHASES = {"validate_s": re.compile(r"GraphSampler: inputs valid in ([\d.]+) s"),
           "beam_s": re.compile(r"GraphSampler: Beam pipeline ran in ([\d.]+) s")}


def _child(config_path: str) -> None:
  """Runs the GraphSampler executor once, as TFX would (fresh process)."""
  # pylint: disable=g-import-not-at-top
  import gnn_trainer_component
  gnn_trainer_component.setup_process()  # first: Keras 2, before TensorFlow
  from absl import logging
  from tfx.dsl.components.base import base_beam_executor
  from tfx.types import standard_artifacts
  from gnn_trainer_component import artifacts
  from gnn_trainer_component.sampler.graph import executor as sampler_executor
  logging.set_verbosity(logging.INFO)
  with open(config_path) as f:
    cfg = json.load(f)
  schema_in = artifacts.GraphSchema()
  schema_in.uri = cfg["graph_dir"]
  examples = standard_artifacts.Examples()
  examples.uri = os.path.join(cfg["out_dir"], "examples")
  schema_out = artifacts.GraphSchema()
  schema_out.uri = os.path.join(cfg["out_dir"], "graph_schema")
  context = base_beam_executor.BaseBeamExecutor.Context(
      beam_pipeline_args=cfg["beam_pipeline_args"], tmp_dir=cfg["out_dir"], unique_id="1")
  sampler_executor.Executor(context).Do(
      {"graph_schema": [schema_in]},
      {"examples": [examples], "output_graph_schema": [schema_out]},
      {"seeds": json.dumps(cfg["seeds"]), "num_shards": 0,
       "sampling_config": json.dumps({"seed_node_set": "user",
                                      "hops": [{"follows": f} for f in cfg["fan_outs"]]})})
  print("EXAMPLES " + json.dumps({s: examples.get_int_custom_property(f"num_seeds_{s}")
                                  for s in cfg["seeds"]}))
  print("CHECK " + json.dumps(_check_output(cfg, examples.uri)), flush=True)


def _check_output(cfg: dict, examples_uri: str) -> dict:
  """Examples per split and each root's first hop, against the tables.

  Examples carry features, not ids: a root (node 0) is identified by its float
  ``score`` when no other seed has the same one. The first hop of a root with at
  most ``fan_outs[0]`` out-edges must hold all its distinct out-neighbours
  (exact); of a larger one, between 1 and ``fan_outs[0]`` (plus ``fan_outs[1]``
  if it has a self loop: its second hop samples the root again).
  """
  import collections  # pylint: disable=g-import-not-at-top
  import glob  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component.graph import tables  # pylint: disable=g-import-not-at-top
  start = time.time()
  graph_dir = cfg["graph_dir"]
  seeds = {split: [i.decode() for i in tables.read_ids(graph_dir, table, "benchmark")]
           for split, table in cfg["seeds"].items()}
  wanted = {s for ids in seeds.values() for s in ids}
  by_score = collections.defaultdict(list)
  for path in sorted(glob.glob(os.path.join(graph_dir, "nodes-*.csv"))):
    with open(path) as f:
      next(f)
      for line in f:
        node_id, score, _ = line.split(",")
        if node_id in wanted:
          by_score[float(np.float32(score))].append(node_id)  # as the examples hold it
  edges, neighbours = collections.Counter(), collections.defaultdict(set)
  for path in sorted(glob.glob(os.path.join(graph_dir, "edges-*.csv"))):
    with open(path) as f:
      next(f)
      for line in f:
        source, target = line.rstrip("\n").split(",")
        if source in wanted:
          edges[source] += 1
          neighbours[source].add(target)
  first, second = cfg["fan_outs"][0], cfg["fan_outs"][1] if len(cfg["fan_outs"]) > 1 else 0
  out = {}
  for split, ids in seeds.items():
    files = glob.glob(os.path.join(examples_uri, f"Split-{split}", "*.gz"))
    count = collections.Counter()
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator():
      feature = tf.train.Example.FromString(record).features.feature
      count["examples"] += 1
      candidates = by_score.get(feature["nodes/user.score"].float_list.value[0], [])
      if len(candidates) != 1:
        count["roots_not_identified"] += 1
        continue
      root = candidates[0]
      sources = feature["edges/follows.#source"].int64_list.value
      targets = feature["edges/follows.#target"].int64_list.value
      hop = len({t for s_, t in zip(sources, targets) if s_ == 0})
      if edges[root] <= first:
        count["exact_checked"] += 1
        count["exact_mismatch"] += hop != len(neighbours[root])
      else:
        count["bounds_checked"] += 1
        top = first + (second if root in neighbours[root] else 0)
        count["out_of_bounds"] += not 1 <= hop <= top
    out[split] = {"seeds": len(ids), "examples": 0, "roots_not_identified": 0,
                  "exact_checked": 0, "exact_mismatch": 0, "bounds_checked": 0,
                  "out_of_bounds": 0, **count}
  out["seconds"] = round(time.time() - start, 1)
  return out


class _PeakRss(threading.Thread):
  """Samples the RSS of a process and all its descendants; keeps each pid's peak."""

  def __init__(self, pid: int, interval: float = 0.2):
    super().__init__(daemon=True)
    self.root, self.interval = pid, interval
    self.peaks: dict[int, tuple[float, str]] = {}
    self.max_total = 0.0
    self._done = threading.Event()

  def run(self) -> None:
    try:
      root = psutil.Process(self.root)
    except psutil.NoSuchProcess:
      return
    while not self._done.is_set():
      total = 0.0
      try:
        procs = [root] + root.children(recursive=True)
      except psutil.NoSuchProcess:
        break
      for p in procs:
        try:
          rss = p.memory_info().rss / 2**20
          if p.pid not in self.peaks:
            self.peaks[p.pid] = (rss, " ".join(p.cmdline())[:160])
          elif rss > self.peaks[p.pid][0]:
            self.peaks[p.pid] = (rss, self.peaks[p.pid][1])
          total += rss
        except psutil.Error:
          continue
      self.max_total = max(self.max_total, total)
      time.sleep(self.interval)

  def stop(self) -> None:
    self._done.set()
    self.join()


def _run_once(graph: dict, graph_dir: str, work_dir: str, workers: int,
              fan_outs: Sequence[int]) -> dict:
  out_dir = tempfile.mkdtemp(prefix="run-", dir=work_dir)
  cfg = {"graph_dir": graph_dir, "out_dir": out_dir, "seeds": graph["seed_tables"],
         "fan_outs": list(fan_outs),
         "beam_pipeline_args": ["--direct_running_mode=multi_processing",
                                f"--direct_num_workers={workers}"]}
  cfg_path = os.path.join(out_dir, "config.json")
  with open(cfg_path, "w") as f:
    json.dump(cfg, f)
  log_path = os.path.join(out_dir, "run.log")
  start = time.time()
  with open(log_path, "w") as log:
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.sampling_scale", "--child", cfg_path],
                            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
    sampler = _PeakRss(proc.pid)
    sampler.start()
    code = proc.wait()
    sampler.stop()
  wall = time.time() - start
  text = open(log_path, errors="replace").read()
  if code != 0:
    raise RuntimeError(f"GraphSampler run failed ({code}); log {log_path} ends:\n{text[-3000:]}")
  phases = {k: float(m.group(1)) for k, r in _PHASES.items() for m in [r.search(text)] if m}
  examples = json.loads(re.search(r"^EXAMPLES (.*)$", text, re.M).group(1))
  check = json.loads(re.search(r"^CHECK (.*)$", text, re.M).group(1))
  launcher = sampler.peaks.get(proc.pid, (0.0, ""))[0]
  others = sorted(((rss, cmd) for pid, (rss, cmd) in sampler.peaks.items() if pid != proc.pid),
                  reverse=True)
  beam_workers = [rss for rss, cmd in others if "python" in cmd]
  # Wall time of the sampling run: the output check after it is not counted.
  return {"wall_s": round(wall - check["seconds"], 1), **phases, "examples": examples,
          "check": check,
          "peak_rss_mb": {"launcher": round(launcher),
                          "beam_workers": [round(r) for r in beam_workers],
                          "sum_of_tree_max": round(sampler.max_total)},
          "processes": len(sampler.peaks), "log": log_path}


def main(argv: Optional[Sequence[str]] = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--work-dir", help="Graphs and runs go here (required).")
  p.add_argument("--num-nodes", type=int, default=1_000_000)
  p.add_argument("--num-edges", type=int, default=10_000_000)
  p.add_argument("--fractions", type=float, nargs="+", default=[0.1, 1.0])
  p.add_argument("--workers", type=int, default=2, help="--direct_num_workers.")
  p.add_argument("--fan-outs", type=int, nargs="+", default=[10, 5])
  p.add_argument("--repeats", type=int, default=1)
  p.add_argument("--output", help="Also write the JSON here.")
  p.add_argument("--child", help=argparse.SUPPRESS)
  args = p.parse_args(argv)
  if args.child:
    _child(args.child)
    return 0
  if not args.work_dir:
    p.error("--work-dir is required")
  os.makedirs(args.work_dir, exist_ok=True)
  graphs = {}
  for fraction in args.fractions:
    graph_dir = os.path.join(args.work_dir, f"graph-{fraction:g}")
    graphs[fraction] = (power_law_graph.generate(
        graph_dir, num_nodes=int(args.num_nodes * fraction),
        num_edges=int(args.num_edges * fraction)), graph_dir)
  runs = {f: [] for f in args.fractions}
  for rep in range(args.repeats):  # fractions interleaved, order rotating per repeat
    order = args.fractions[rep % len(args.fractions):] + args.fractions[:rep % len(args.fractions)]
    for fraction in order:
      graph, graph_dir = graphs[fraction]
      try:
        runs[fraction].append(_run_once(graph, graph_dir, args.work_dir, args.workers,
                                        args.fan_outs))
      except RuntimeError as e:  # recorded, not lost: the other runs still count
        runs[fraction].append({"error": str(e)[-1500:]})
      print(f"fraction {fraction}: {runs[fraction][-1]}", file=sys.stderr, flush=True)
  result = {
      "command": " ".join(["python -m benchmarks.sampling_scale"] + list(argv or sys.argv[1:])),
      "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(),
      "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
      "workers": args.workers, "fan_outs": args.fan_outs,
      "fractions": {str(f): {"graph": {k: graphs[f][0][k] for k in (
          "num_nodes", "num_edges", "max_degree", "median_degree", "seeds", "bytes")},
                             "generate_s": graphs[f][0]["seconds"], "runs": runs[f]}
                    for f in args.fractions}}
  report.print_result(result, args.output, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
