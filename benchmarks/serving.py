"""Serving by node id (issue 69): latency of ``serve_node_ids`` in a fresh TensorFlow-only process.

  PYTHONPATH=. .venv/bin/python -m benchmarks.serving \\
      --num-nodes 1000000 --num-edges 10000000

The in-memory benchmark's power-law graph (``benchmarks.in_memory.generate_graph``:
node set ``user``, edge set ``follows``) and model (``benchmarks.in_memory``'s
``model_fn`` and ``task``), trained for ``--train-steps`` steps on the graph in memory
with the sampling config ``hops [{"follows": 10}, {"follows": 5}]`` and
``custom_config["serve_by_node_id"]``, exported by GnnTrainer's
``training.train_and_export`` (``export_s``: the whole call; ``export_mb``: the
SavedModel's bytes on disk; ``tables_mb``: the graph's arrays and ids as the
in-memory store holds them). Then, in a fresh process where TF-GNN and this
package cannot be imported:

* ``load_s``: ``tf.saved_model.load`` of the export;
* ``p50_ms_1`` / ``p99_ms_1``: ``serve_node_ids`` with one random node id a
  request, ``--requests`` requests after ``--warmup`` (one call at a time, as an
  online service calls); ``p50_ms_64`` / ``p99_ms_64``: 64 random ids a request;
* ``rss_gb``: the serving process's peak RSS.

Top-K: the generated rating graph of ``pipelines/recommendation/data.py``
(``--topk-users`` users, ``--topk-items`` items, ``--ratings-per-user``) and
``module_files/recommendation.py`` (its ``LINK_CONFIG``: hops 10/5 from each end,
dot-product scores), trained ``--train-steps`` steps on link pairs in memory with
``serve_by_node_id`` (every item's embedding computed at export: ``topk_export_s``
is the training and export). In a fresh TensorFlow-only process, ``recommend``
with one user id a request, ``k`` 20 among every item, linked items excluded:
``topk_p50_ms`` / ``topk_p99_ms`` over ``--requests`` requests.

Targets: p50 for one id <= 10 ms, p99 <= 20 ms, 64 ids <= 60 ms p50, top-K p99 <=
50 ms, the export <= 1.5x the tables' in-memory size, loading <= 30 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional, Sequence

from benchmarks import in_memory as in_memory_bench
from benchmarks import report

SAMPLING_CONFIG = in_memory_bench.SAMPLING_CONFIG
TARGETS = {"p50_ms_1": 10.0, "p99_ms_1": 20.0, "p50_ms_64": 60.0, "topk_p99_ms": 50.0,
           "export_over_tables": 1.5, "load_s": 30.0}

#: Runs in the fresh process: argv model_dir, ids file (npy), requests, warmup.
SERVE = r'''
import json, resource, sys, time
import numpy as np
class Refuse:
  def find_spec(self, name, path=None, target=None):
    if name.split(".")[0] in ("tensorflow_gnn", "gnn_trainer_component"):
      raise ImportError(name + " is not installed where the model is served")
sys.meta_path.insert(0, Refuse())
import tensorflow as tf
model_dir, ids_path, requests, warmup = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ids = np.load(ids_path, allow_pickle=True)
start = time.perf_counter()
model = tf.saved_model.load(model_dir)
load_s = time.perf_counter() - start
serve = model.signatures["serve_node_ids"]
rng = np.random.default_rng(0)
out = {"load_s": round(load_s, 2)}
for size in (1, 64):
  batches = [tf.constant(ids[rng.integers(0, len(ids), size)].astype(bytes))
             for _ in range(requests + warmup)]
  times = []
  for i, batch in enumerate(batches):
    t = time.perf_counter()
    result = serve(node_ids=batch)
    result["status"].numpy()
    if i >= warmup:
      times.append(1000 * (time.perf_counter() - t))
  out[f"p50_ms_{size}"] = round(float(np.percentile(times, 50)), 2)
  out[f"p99_ms_{size}"] = round(float(np.percentile(times, 99)), 2)
  out[f"served_{size}"] = int((result["status"].numpy() == 0).sum())
out["rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9, 3)
print(json.dumps(out))
'''


#: ``recommend`` in the fresh process: argv model_dir, users file (npy), requests, warmup.
SERVE_TOPK = SERVE.split("start = time.perf_counter()")[0] + r'''
model = tf.saved_model.load(model_dir)
recommend = model.signatures["recommend"]
rng = np.random.default_rng(0)
times = []
for i in range(requests + warmup):
  t = time.perf_counter()
  got = recommend(node_ids=tf.constant([ids[rng.integers(0, len(ids))]]),
                  k=tf.constant([20], tf.int64), exclude_linked=tf.constant([True]))
  got["status"].numpy()
  if i >= warmup:
    times.append(1000 * (time.perf_counter() - t))
print(json.dumps({"topk_p50_ms": round(float(np.percentile(times, 50)), 2),
                  "topk_p99_ms": round(float(np.percentile(times, 99)), 2),
                  "topk_served": int(got["status"].numpy()[0] == 0)}))
'''


def export_recommender(work_dir: str, users: int, items: int, ratings_per_user: float,
                       train_steps: int) -> dict[str, Any]:
  """The rating graph, a link model trained in memory with serve_by_node_id, exported."""
  # pylint: disable=g-import-not-at-top
  import numpy as np
  import tensorflow as tf
  from gnn_trainer_component.in_memory import adapters
  from gnn_trainer_component.trainer import config as config_lib
  from gnn_trainer_component.trainer import inputs as inputs_lib
  from gnn_trainer_component.trainer import module_contract
  from gnn_trainer_component.trainer import training
  from module_files import recommendation as module
  from pipelines.recommendation import data
  # pylint: enable=g-import-not-at-top
  tables = os.path.join(work_dir, f"ratings-{users}-{items}")
  if not os.path.exists(os.path.join(tables, "rated_by.csv")):
    data.write_tables(tables, num_users=users, num_items=items,
                      ratings_per_user=ratings_per_user)
  splits = adapters.load(tables, link_config=module.LINK_CONFIG, splits=["train", "eval"])
  user_module = module_contract.load_user_module(None, "module_files.recommendation")
  cfg = config_lib.make_trainer_config(
      {"splits": ["train"], "num_steps": train_steps}, {"splits": ["eval"], "num_steps": 2},
      {"global_batch_size": 256, "epochs": 1, "seed": 0, "serve_by_node_id": True,
       "parity_check_examples": 0, "retrieval_splits": []})
  data_source = adapters.LinkData(train_splits=("train",), eval_splits=("eval",),
                                  source=splits, tasks=user_module.tasks)
  run_dir = os.path.join(work_dir, f"topk-{int(time.time())}")
  inputs = inputs_lib.TrainingInputs(
      cfg=cfg, user_module=user_module, data=data_source,
      model_run_dir=os.path.join(run_dir, "model_run"),
      staging_dir=os.path.join(run_dir, "staging"), resume_dir=os.path.join(run_dir, "backup"),
      served_graph=data_source.served_graph())
  start = time.perf_counter()
  training.train_and_export(inputs, tf.distribute.get_strategy())
  users_path = os.path.join(run_dir, "users.npy")
  np.save(users_path, np.asarray(splits.message_graph.node_sets["user"].ids), allow_pickle=True)
  return {"topk_export_s": round(time.perf_counter() - start, 1),
          "topk_export_mb": _folder_mb(inputs.staging_dir),
          "topk_graph": {"users": users, "items": items,
                         "ratings": int(splits.message_graph.edge_sets["rated"].size)},
          "model_dir": inputs.staging_dir, "users_path": users_path}


def _folder_mb(path: str) -> float:
  total = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path)
              for f in files)
  return round(total / 2**20, 1)


def export(graph: dict, run_dir: str, train_steps: int) -> dict[str, Any]:
  """Trains ``train_steps`` steps on the graph in memory and exports with serve_by_node_id."""
  # pylint: disable=g-import-not-at-top
  import numpy as np
  import tensorflow as tf
  from gnn_trainer_component.graph import ids as graph_ids
  from gnn_trainer_component.in_memory import adapters
  from gnn_trainer_component.trainer import config as config_lib
  from gnn_trainer_component.trainer import inputs as inputs_lib
  from gnn_trainer_component.trainer import module_contract
  from gnn_trainer_component.trainer import training
  # pylint: enable=g-import-not-at-top
  start = time.perf_counter()
  splits = adapters.load(graph["dir"], seeds=graph["seed_tables"],
                         sampling_config=SAMPLING_CONFIG, splits=["train", "eval"])
  load_s = time.perf_counter() - start
  cfg = config_lib.make_trainer_config(
      {"splits": ["train"], "num_steps": train_steps}, {"splits": ["eval"], "num_steps": 2},
      {"global_batch_size": in_memory_bench.BATCH_SIZE, "epochs": 1, "seed": 0,
       "serve_by_node_id": True, "parity_check_examples": 0})
  data = adapters.SampledData(train_splits=("train",), eval_splits=("eval",), source=splits)
  inputs = inputs_lib.TrainingInputs(
      cfg=cfg, user_module=module_contract.load_user_module(None, "benchmarks.in_memory"),
      data=data, model_run_dir=os.path.join(run_dir, "model_run"),
      staging_dir=os.path.join(run_dir, "staging"), resume_dir=os.path.join(run_dir, "backup"),
      served_graph=data.served_graph())
  start = time.perf_counter()
  training.train_and_export(inputs, tf.distribute.get_strategy())
  export_s = time.perf_counter() - start
  graph_arrays = splits.sampler.graph
  ids = graph_ids.id_bytes(graph_arrays.node_sets["user"].ids)
  ids_path = os.path.join(run_dir, "ids.npy")
  np.save(ids_path, ids, allow_pickle=True)
  tables_bytes = graph_arrays.nbytes + sum(len(i) + 8 for i in ids)
  return {"load_tables_s": round(load_s, 1), "export_s": round(export_s, 1),
          "export_mb": _folder_mb(inputs.staging_dir),
          "tables_mb": round(tables_bytes / 2**20, 1),
          "snapshot_mb": round(inputs.served_graph.snapshot.nbytes / 2**20, 1),
          "model_dir": inputs.staging_dir, "ids_path": ids_path}


def serve(model_dir: str, ids_path: str, requests: int, warmup: int,
          script: str = SERVE) -> dict[str, Any]:
  """``script`` (:data:`SERVE`, :data:`SERVE_TOPK`) in a fresh process; its JSON line."""
  done = subprocess.run(
      [sys.executable, "-c", script, model_dir, ids_path, str(requests), str(warmup)],
      check=True, capture_output=True, text=True, cwd="/",
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: Optional[Sequence[str]] = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--work-dir", help="The graph and the export go here; default a temp dir.")
  p.add_argument("--num-nodes", type=int, default=1_000_000)
  p.add_argument("--num-edges", type=int, default=10_000_000)
  p.add_argument("--train-steps", type=int, default=20)
  p.add_argument("--requests", type=int, default=500)
  p.add_argument("--warmup", type=int, default=20)
  p.add_argument("--topk-users", type=int, default=20_000)
  p.add_argument("--topk-items", type=int, default=100_000)
  p.add_argument("--ratings-per-user", type=float, default=10)
  p.add_argument("--output", default=os.path.join(report.REPO_ROOT, "benchmarks", "results",
                                                  "serving.json"))
  args = p.parse_args(argv)
  work_dir = args.work_dir or tempfile.mkdtemp(prefix="serving-bench-")
  graph = in_memory_bench.generate_graph(
      work_dir, args.num_nodes, args.num_edges,
      in_memory_bench.seed_fraction(args.num_nodes, 10_000, 1_000))
  run_dir = os.path.join(work_dir, f"run-{int(time.time())}")
  exported = export(graph, run_dir, args.train_steps)
  served = serve(exported.pop("model_dir"), exported.pop("ids_path"), args.requests,
                 args.warmup)
  recommender = export_recommender(work_dir, args.topk_users, args.topk_items,
                                   args.ratings_per_user, args.train_steps)
  served.update(serve(recommender.pop("model_dir"), recommender.pop("users_path"),
                      args.requests, args.warmup, SERVE_TOPK))
  result = {
      "command": " ".join(["python -m benchmarks.serving"] + list(argv or sys.argv[1:])),
      "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(),
      "source": in_memory_bench.source_version(),
      "graph": {k: graph.get(k) for k in ("num_nodes", "num_edges", "max_degree",
                                          "median_degree")},
      "sampling_config": SAMPLING_CONFIG, **exported, **recommender, **served,
      "export_over_tables": round(exported["export_mb"] / exported["tables_mb"], 2)}
  result["targets"] = {
      key: {"target": f"<= {target:g}", "value": result.get(key),
            "met": result.get(key) is not None and result[key] <= target}
      for key, target in TARGETS.items()}
  report.print_result(result, args.output)
  return 0


if __name__ == "__main__":
  sys.exit(main())
