"""Temporal link prediction: a split by time beside a random split, on a graph that drifts.

  PYTHONPATH=. .venv/bin/python -m benchmarks.temporal [--nodes 1000] [--echo-rate 0.1]
      [--output FILE]

The graph (generated, seeded): ``--nodes`` papers in ``--communities`` communities, which
merge two by two at time ``DRIFT``; citations (both directions, times in [0, 100)) stay
inside the community of their time but for a few, and each is followed, 1 to 3 time steps
later, by citations of ``CLOSURE`` of the cited paper's earlier neighbours (triadic closure).
After ``DRIFT`` half of a paper's citations cross its first community; only the recent
citations show the merge. The papers' features (``feat``, ``DIM`` values) are random,
N(0, 1): they tell nothing of the communities; their ``time`` (when they appear) is 0.

The plant, echo papers (``--echo-rate``; 0: none, the graph above alone): after a citation
(u, v) at time t, with that chance, a new paper appears 1 to 3 steps later (its ``time``;
none at 100 or later) and cites, all at its time, u, v and up to ``ECHO_CONTEXT`` of each
end's neighbours before t; its features are random too (ids from ``--nodes`` on). A random
split surrounds each held-out pair with what came after it: the echo papers that follow
(u, v) are common neighbours of its ends, and a held-out citation of an echo paper keeps
the paper's other citations, made at the same time, in view; no held-out pair has an end
without citations. As of its time a pair sees none of that: (u, v) has no echo yet, and an
echo paper has no citation (its citations come with it).

Two GnnTrainer runs in memory, through LocalDagRunner, with the Planetoid link module
(Hadamard scorer), fan-outs 10 / 5, the same epochs and batch:

* **time split** (``link_config["time_split"]``: train before ``EVAL_FROM``, eval until
  ``TEST_FROM``, test after; negatives among the papers there at the pair's time, by their
  ``time``, ``node_time``): time-aware hops (``--strategy``, ``latest`` by default: the most
  recent citations before the pair's time); each pair sees only what came before it.
  GraphEvaluator scores the test pairs as of their times, and ranks each among
  ``--negatives`` negatives drawn for it, every candidate as of the query's time: ``auc``,
  ``mrr``, ``hits@50``, beside the baselines read as of each pair's time.
* **random split** (85 / 5 / 10 % of the citations before ``TEST_FROM``, on the papers there
  before it, uniform hops): its own test metrics (``offline``: what a random split reports,
  each held-out pair surrounded by the citations before and after it), and the same model
  scored on the time split's test pairs, the future it never saw, each as of its time
  (``future``), as a served model meets them. ``offline`` minus ``future`` is what the random
  split hides.

``leakage_violations``: edges at or after their pair's time in the time split's test
subgraphs (the in-memory kernel, every pair sampled; 0 is the rule), beside the count in the
same pairs' uniform subgraphs. ``seeds_per_s``: test pairs sampled per second by the kernel
with the time-aware plan (2 hops, batches of 128, median of ``--repeats``), beside uniform's.
One JSON object, also written to ``--output``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from typing import Any, Optional, Sequence

# First: Keras 2 for TF-GNN, before TensorFlow is imported.
import gnn_trainer_component  # pylint: disable=g-bad-import-order
gnn_trainer_component.setup_process()

# pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np
from tfx import v1 as tfx

from benchmarks import report
from pipelines.planetoid import pipeline as planetoid_pipeline
from pipelines.runtime import mlmd_utils

#: After citing v, a paper cites this many of v's earlier neighbours, 1-3 time steps later.
CLOSURE = 2
#: An echo paper cites the pair and up to this many earlier neighbours of each end.
ECHO_CONTEXT = 2
#: Communities change at this time; the time split's eval and test start later.
DRIFT, EVAL_FROM, TEST_FROM = 60, 85, 92
FAN_OUTS = (10, 5)
DIM = 16
CUSTOM_CONFIG = {"global_batch_size": 256, "summarize_every_n_steps": "never",
                 "restore_best_weights": True, "restore_best_weights_by": "max:val_auc"}


def graph(*, nodes: int, communities: int, degree: int, seed: int, echo_rate: float = 0.0
          ) -> tuple[np.ndarray, np.ndarray, dict[tuple[int, int], int]]:
  """``(feat, born, citations)`` (see the module doc).

  Each paper's features and the time it appears (0, or an echo paper's time; echo papers
  after the ``nodes`` others), and every citation ``(u, v) -> time`` (``u < v``).
  """
  rng = np.random.default_rng(seed)
  before = rng.integers(communities, size=nodes)
  after = before // 2
  feat = rng.normal(0, 1.0, (nodes, DIM)).astype(np.float32)
  edges: dict[tuple[int, int], int] = {}
  while len(edges) < degree * nodes // 2:
    t = int(rng.integers(0, 100))
    member = before if t < DRIFT else after
    u, v = (int(x) for x in rng.integers(nodes, size=2))
    if u != v and (member[u] == member[v] or rng.random() < 0.01):
      edges.setdefault((min(u, v), max(u, v)), t)
  # Triadic closure: soon after citing v, u cites CLOSURE of v's earlier neighbours.
  neighbours: dict[int, list[tuple[int, int]]] = {}
  for (u, v), t in edges.items():
    neighbours.setdefault(u, []).append((t, v))
    neighbours.setdefault(v, []).append((t, u))
  for (a, b), t in sorted(edges.items()):
    for u, v in ((a, b), (b, a)):
      earlier = [w for s, w in neighbours.get(v, ()) if s < t and w != u]
      for w in rng.permutation(earlier)[:CLOSURE].tolist() if earlier else ():
        later = min(99, t + int(rng.integers(1, 4)))
        key = (min(u, w), max(u, w))
        if key not in edges:
          edges[key] = later
  # Echoes (their own generator: echo_rate 0 leaves the graph above as it was).
  echo_rng = np.random.default_rng([seed, 1])
  near: dict[int, list[tuple[int, int]]] = {}
  for (u, v), t in edges.items():
    near.setdefault(u, []).append((t, v))
    near.setdefault(v, []).append((t, u))
  echoes: list[tuple[int, list[int]]] = []
  for (u, v), t in sorted(edges.items()):
    if echo_rng.random() < echo_rate:
      later = t + int(echo_rng.integers(1, 4))
      if later >= 100:
        continue
      refs = [u, v]
      for a, b in ((u, v), (v, u)):
        earlier = sorted(w for s, w in near[a] if s < t and w != b)
        refs += echo_rng.permutation(earlier)[:ECHO_CONTEXT].tolist() if earlier else []
      echoes.append((later, sorted(set(refs))))
  for i, (later, refs) in enumerate(echoes):
    for w in refs:
      edges[(w, nodes + i)] = later
  echo_feat = echo_rng.normal(0, 1.0, (len(echoes), DIM)).astype(np.float32)
  born = np.r_[np.zeros(nodes, np.int64), [later for later, _ in echoes]].astype(np.int64)
  return np.concatenate([feat, echo_feat]), born, edges


def write_tables(d: str, *, nodes: int, communities: int, degree: int, seed: int,
                 until: float = float("inf"), echo_rate: float = 0.0) -> None:
  """The drifting citation graph as Planetoid-like tables (see the module doc).

  ``until``: only the papers and citations before this time (the same graph otherwise).
  """
  import tensorflow as tf
  feat, born, edges = graph(nodes=nodes, communities=communities, degree=degree, seed=seed,
                            echo_rate=echo_rate)
  os.makedirs(d, exist_ok=True)
  with open(os.path.join(d, "graph_schema.pbtxt"), "w") as f:
    f.write(f"""
node_sets {{ key: "paper" value {{
  features {{ key: "feat" value {{ dtype: DT_FLOAT shape {{ dim {{ size: {DIM} }} }} }} }}
  features {{ key: "time" value {{ dtype: DT_INT64 }} }}
  metadata {{ filename: "papers.tfrecord" }} }} }}
edge_sets {{ key: "cites" value {{ source: "paper" target: "paper"
  features {{ key: "time" value {{ dtype: DT_INT64 }} }}
  metadata {{ filename: "cites.tfrecord" }} }} }}
""")
  with tf.io.TFRecordWriter(os.path.join(d, "papers.tfrecord")) as w:
    for i in np.flatnonzero(born < until).tolist():
      ex = tf.train.Example()
      ex.features.feature["#id"].bytes_list.value.append(str(i).encode())
      ex.features.feature["feat"].float_list.value.extend(feat[i].tolist())
      ex.features.feature["time"].int64_list.value.append(int(born[i]))
      w.write(ex.SerializeToString())
  with tf.io.TFRecordWriter(os.path.join(d, "cites.tfrecord")) as w:
    for (u, v), t in sorted(edges.items()):
      if t >= until:
        continue
      for a, b in ((u, v), (v, u)):
        ex = tf.train.Example()
        ex.features.feature["#source"].bytes_list.value.append(str(a).encode())
        ex.features.feature["#target"].bytes_list.value.append(str(b).encode())
        ex.features.feature["time"].int64_list.value.append(t)
        w.write(ex.SerializeToString())


def link_configs(seed: int, strategy: str) -> dict[str, dict[str, Any]]:
  """``"time"`` and ``"random"``: the two runs' link_config."""
  common = {"edge_set": "cites", "undirected": True, "seed": seed,
            "negatives_per_positive": {"train": 3, "eval": 1, "test": 1}}
  return {
      "time": {**common, "time_split": {"time": "time", "node_time": "time", "from": {
          "train": None, "eval": EVAL_FROM, "test": TEST_FROM}},
               "hops": [{"cites": {"fanout": f, "strategy": strategy, "time": "time"}}
                        for f in FAN_OUTS]},
      "random": {**common, "splits": {"train": 0.85, "eval": 0.05, "test": 0.10},
                 "hops": [{"cites": f} for f in FAN_OUTS]}}


def _train(name: str, tables: str, work_dir: str, link: dict, *, epochs: int, seed: int,
           negatives: int, hparams: dict) -> dict[str, Any]:
  """One pipeline run (GnnTrainer in memory, GraphEvaluator on test); its model and metrics."""
  from gnn_trainer_component.evaluator import evaluation as evaluation_lib
  metadata = os.path.join(work_dir, f"{name}.sqlite")
  start = time.monotonic()
  tfx.orchestration.LocalDagRunner().run(planetoid_pipeline.create_link_pipeline(
      pipeline_name=f"temporal-{name}", pipeline_root=os.path.join(work_dir, name),
      tables_dir=tables, metadata=metadata, link=link, evaluation_split="test",
      negatives_per_query=negatives,
      custom_config={**CUSTOM_CONFIG, "epochs": epochs, "seed": seed, "hparams": hparams}))
  model = mlmd_utils.latest_artifact(metadata, "Model", f"temporal-{name}")
  evaluation = evaluation_lib.read(mlmd_utils.latest_artifact(
      metadata, "ModelEvaluation", f"temporal-{name}").uri)
  return {"model_dir": os.path.join(model.uri, "Format-Serving"),
          "seconds": round(time.monotonic() - start, 1),
          "metrics": {p: m["all"] for p, m in evaluation["metrics"].items()}}


def _future(tables: str, model_dir: str, link: dict, negatives: int, seed: int) -> dict:
  """A model's metrics on the time split's test pairs, each as of its time."""
  from gnn_trainer_component.evaluator import config as config_lib
  from gnn_trainer_component.evaluator import evaluation as evaluation_lib
  from gnn_trainer_component.evaluator import pairs
  cfg = config_lib.parse({"task": "link_prediction", "split": "test",
                          "negatives_per_query": negatives, "sampling_seed": seed})
  predictions = pairs.predict(tables, model_dir, cfg, link_config=link)
  return {p: m["all"] for p, m in evaluation_lib.evaluate(predictions, cfg).metrics.items()}


def _sampling(tables: str, links: dict, repeats: int) -> dict[str, Any]:
  """Leaks in the test subgraphs, and pairs/s, time-aware (the time split) and uniform."""
  from gnn_trainer_component.graph import sampling
  from gnn_trainer_component.in_memory import adapters
  from gnn_trainer_component.in_memory import kernel
  splits = adapters.load(tables, link_config=links["time"], splits=[], who="benchmark")
  pairs = np.concatenate([splits.positives["test"], splits.negatives["test"]])
  times = np.r_[splits.positive_times["test"], splits.negative_times["test"]]
  uniform = sampling.SamplingPlan(
      seed_node_set=splits.plan.seed_node_set, seed_op=splits.plan.seed_op,
      roots=splits.plan.roots, ops=tuple(sampling.SamplingOp(
          name=op.name, inputs=op.inputs, edge_set=op.edge_set, source=op.source,
          target=op.target, size=op.size) for op in splits.plan.ops))
  out: dict[str, Any] = {}
  for name, plan, with_times in (("time_aware", splits.plan, True), ("uniform", uniform, False)):
    rng = np.random.default_rng(0)
    sub = kernel.sample(splits.message_graph, plan, pairs, rng,
                        times=times if with_times else None)
    out[f"leakage_violations_{name}"] = len(kernel.leaks(splits.message_graph, splits.plan,
                                                         sub, times))
    rates = []
    for _ in range(repeats):
      start = time.perf_counter()
      for i in range(0, len(pairs), 128):
        kernel.sample(splits.message_graph, plan, pairs[i:i + 128], rng,
                      times=times[i:i + 128] if with_times else None)
      rates.append(len(pairs) / (time.perf_counter() - start))
    out[f"seeds_per_s_{name}"] = round(statistics.median(rates), 1)
  out["test_pairs"] = len(pairs)
  return out


def _round(metrics: dict, names: Sequence[str] = ("auc", "average_precision", "mrr",
                                                  "hits@50")) -> dict:
  return {k: round(float(metrics[k]), 4) for k in names if k in metrics}


def main(argv: Optional[Sequence[str]] = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--nodes", type=int, default=1000, help="Papers, echo papers aside.")
  p.add_argument("--communities", type=int, default=10)
  p.add_argument("--strategy", choices=["latest", "uniform_before"], default="latest",
                 help="The time split's hops.")
  p.add_argument("--degree", type=int, default=10, help="Mean citations per paper.")
  p.add_argument("--echo-rate", type=float, default=0.1,
                 help="Chance that a citation gets an echo paper (0: none).")
  p.add_argument("--epochs", type=int, default=20)
  p.add_argument("--negatives", type=int, default=100,
                 help="Negatives ranked against each test edge (MRR, hits@50).")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--hparams", default="{}",
                 help="JSON object of link module hparams, e.g. '{\"mark_ends\": true}'.")
  p.add_argument("--repeats", type=int, default=5)
  p.add_argument("--work-dir", help="Default: a fresh temp dir.")
  p.add_argument("--output", help="Also write the JSON here.")
  args = p.parse_args(argv)
  work_dir = os.path.abspath(args.work_dir or tempfile.mkdtemp(prefix="temporal_bench_"))
  tables = os.path.join(work_dir, "tables")
  write_tables(tables, nodes=args.nodes, communities=args.communities, degree=args.degree,
               seed=args.seed, echo_rate=args.echo_rate)
  past = os.path.join(work_dir, "tables_past")
  write_tables(past, nodes=args.nodes, communities=args.communities, degree=args.degree,
               seed=args.seed, until=TEST_FROM, echo_rate=args.echo_rate)
  links = link_configs(args.seed, args.strategy)
  runs = {name: _train(name, tables if name == "time" else past, work_dir, link,
                       epochs=args.epochs, seed=args.seed, negatives=args.negatives,
                       hparams=json.loads(args.hparams))
          for name, link in links.items()}
  timed = runs["time"]["metrics"]
  future = _future(tables, runs["random"]["model_dir"], links["time"], args.negatives,
                   args.seed)
  result = {
      "benchmark": "temporal", **_round(timed["model"]),
      **_sampling(tables, links, args.repeats),
      "baselines_as_of_time": {name: _round(m) for name, m in timed.items() if name != "model"},
      "random_split": {"offline": _round(runs["random"]["metrics"]["model"]),
                       "future": _round(future["model"])},
      "train_seconds": {name: run["seconds"] for name, run in runs.items()},
      "config": {"nodes": args.nodes, "communities": args.communities, "degree": args.degree,
                 "echo_rate": args.echo_rate, "strategy": args.strategy,
                 "hparams": json.loads(args.hparams),
                 "epochs": args.epochs, "negatives": args.negatives, "seed": args.seed,
                 "drift": DRIFT, "eval_from": EVAL_FROM, "test_from": TEST_FROM,
                 "fan_outs": list(FAN_OUTS)}}
  result["seeds_per_s"] = result["seeds_per_s_time_aware"]
  result["leakage_violations"] = result["leakage_violations_time_aware"]
  report.print_result(result, args.output)
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
