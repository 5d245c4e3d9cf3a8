"""Training throughput of GnnTrainer on 1, 2 and 3 local workers (MultiWorkerMirroredStrategy).

Each run is a fresh process that runs the GnnTrainer executor on the same
generated demo graph (``pipelines.demo.data``, split into as many training files
as the most workers, so every worker reads its own files), with the same global
batch; ``local_workers`` > 1 runs it as a local job (``distributed.local_cluster``).
Variants are interleaved (the order rotates per repeat); medians are reported.

Measured per run: the job's wall time (process start to published model) and the
steady-state training speed, the median of Keras' per-step time over the epochs
after the first (tracing), from the chief's log. On a machine with fewer cores
than workers this measures the overhead of the collectives, not a speed-up.

  PYTHONPATH=. .venv/bin/python -m benchmarks.multi_worker --workers 1 2 3 --repeats 3
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

_STEP_RE = re.compile(r"^\s*\d+/\d+ - \S+ - .* - (\d+(?:\.\d+)?)(ms|s|us)/step\s*$", re.M)
_UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


def _write_data(work_dir: str, num_nodes: int, files: int) -> dict:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from pipelines.demo import data as demo_data  # pylint: disable=g-import-not-at-top
  data = demo_data.write_demo_data(os.path.join(work_dir, "demo"), num_nodes=num_nodes)
  examples = os.path.join(work_dir, "examples")
  for split, parts in (("train", files), ("eval", 1)):
    records = [r.numpy() for r in tf.data.TFRecordDataset(
        sorted(glob.glob(os.path.join(data["examples"], split, "*"))))]
    os.makedirs(os.path.join(examples, f"Split-{split}"), exist_ok=True)
    for i in range(parts):
      path = os.path.join(examples, f"Split-{split}", f"data_tfrecord-{i:05d}-of-{parts:05d}.gz")
      with tf.io.TFRecordWriter(path, options="GZIP") as w:
        for r in records[i::parts]:
          w.write(r)
  return {"examples": examples, "graph_schema": data["graph_schema"],
          "train_records": sum(1 for _ in tf.data.TFRecordDataset(
              glob.glob(os.path.join(examples, "Split-train", "*")), "GZIP"))}


def _run_child(spec: dict) -> None:
  """In a fresh process: the GnnTrainer executor on ``spec``'s artifacts."""
  import gnn_trainer_component  # pylint: disable=g-import-not-at-top
  gnn_trainer_component.setup_process()  # first: Keras 2, before TensorFlow
  from tfx.types import artifact_utils, standard_artifacts  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component import GraphSchema  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component.trainer import component, config  # pylint: disable=g-import-not-at-top
  examples = standard_artifacts.Examples()
  examples.uri = spec["examples"]
  examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
  schema = GraphSchema()
  schema.uri = spec["graph_schema"]
  model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
  model.uri, model_run.uri = spec["model"], spec["model_run"]
  props = {"module_file": spec["module_file"],
           "train_args": json.dumps({"splits": ["train"], "num_steps": spec["train_steps"]}),
           "eval_args": json.dumps({"splits": ["eval"], "num_steps": 0}),
           "custom_config": json.dumps(spec["custom_config"])}
  executor = component.executor_class(config.make_trainer_config(
      props["train_args"], props["eval_args"], props["custom_config"]))
  executor().Do({"examples": [examples], "graph_schema": [schema]},
                {"model": [model], "model_run": [model_run]}, props)


def _step_seconds(log_text: str) -> list[float]:
  return [float(v) * _UNIT[u] for v, u in _STEP_RE.findall(log_text)]


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--num-nodes", type=int, default=3000)
  parser.add_argument("--global-batch-size", type=int, default=48)  # splits over 1, 2, 3
  parser.add_argument("--epochs", type=int, default=4)
  parser.add_argument("--steps-per-epoch", type=int, default=40)
  parser.add_argument("--work-dir", default=None)
  parser.add_argument("--output", default=None, help="Also write the JSON result here.")
  parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    _run_child(json.loads(args.child))
    return 0

  work_dir = args.work_dir or tempfile.mkdtemp(prefix="bench-multi-worker-")
  data = _write_data(work_dir, args.num_nodes, max(args.workers))
  repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  runs = {w: [] for w in args.workers}
  for rep in range(args.repeats):
    order = args.workers[rep % len(args.workers):] + args.workers[:rep % len(args.workers)]
    for workers in order:
      out = os.path.join(work_dir, f"w{workers}-r{rep}")
      spec = dict(data, model=os.path.join(out, "model"), model_run=os.path.join(out, "run"),
                  module_file=os.path.join(repo, "module_files", "demo_node_classification.py"),
                  train_steps=args.epochs * args.steps_per_epoch,
                  custom_config={"global_batch_size": args.global_batch_size,
                                 "epochs": args.epochs, "summarize_every_n_steps": "never",
                                 "seed": rep, "local_workers": workers})
      os.makedirs(out, exist_ok=True)
      log_path = os.path.join(out, "job.log")
      start = time.perf_counter()
      with open(log_path, "w") as log:
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.multi_worker", "--child", json.dumps(spec)],
            stdout=log, stderr=subprocess.STDOUT, cwd=repo, check=False,
            env=dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2"))
      wall = time.perf_counter() - start
      if proc.returncode:
        raise SystemExit(f"{workers} worker(s) failed; see {log_path}")
      chief_log = (os.path.join(spec["model_run"], "cluster", "chief-0.log")
                   if workers > 1 else log_path)
      per_step = _step_seconds(open(chief_log).read())[1:]  # after the first (tracing) epoch
      runs[workers].append({"wall_s": round(wall, 1),
                            "step_s": round(statistics.median(per_step), 5)})
      print(f"repeat {rep}: {workers} worker(s): {runs[workers][-1]}", file=sys.stderr)

  table = {}
  for workers, rs in runs.items():
    step_s = statistics.median(r["step_s"] for r in rs)
    table[str(workers)] = {
        "runs": rs, "median_wall_s": statistics.median(r["wall_s"] for r in rs),
        "median_step_ms": round(step_s * 1e3, 2),
        "examples_per_s": round(args.global_batch_size / step_s, 1)}
  base = table[str(args.workers[0])]["examples_per_s"]
  for row in table.values():
    row["throughput_vs_first"] = round(row["examples_per_s"] / base, 3)
  result = {"benchmark": "multi_worker", "cores": os.cpu_count(),
            "num_nodes": args.num_nodes, "train_records": data["train_records"],
            "global_batch_size": args.global_batch_size, "epochs": args.epochs,
            "steps_per_epoch": args.steps_per_epoch, "repeats": args.repeats,
            "workers": table}
  line = json.dumps(result)
  if args.output:
    with open(args.output, "w") as f:
      f.write(json.dumps(result, indent=1) + "\n")
  print(line)
  return 0


if __name__ == "__main__":
  sys.exit(main())
