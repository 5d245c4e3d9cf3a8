r"""Scale (issue 54 part 6b): a generated Parquet graph through one LocalDagRunner pipeline.

  PYTHONPATH=. .venv/bin/python -m benchmarks.scale --num-nodes 10000000 --num-edges 100000000
  # the smoke test's size, end to end in about 30 s:
  PYTHONPATH=. .venv/bin/python -m benchmarks.scale --num-nodes 100000 --num-edges 1000000 \
      --train-seeds 10000

1. **Graph**: the power-law graph of ``benchmarks.power_law_graph`` (seed 0)
   written as Parquet tables (``--format parquet``: int64 ids, column-wise,
   ``--shards`` files per table, one row group per shard per million edges; the
   schema names them with globs, ``nodes-*-of-00008.parquet``), generated in a
   child process into ``--work-dir/graph`` and reused when its sizes match
   (``generate_s`` is then the first generation's time, ``generate_reused``
   true). The seed fraction is chosen so that there are at least
   ``--train-seeds`` training and ``--eval-seeds`` evaluation seeds (as
   ``benchmarks.in_memory`` does); the first ``--train-seeds`` / ``--eval-seeds``
   of them are written as ``seeds-train-<n>.parquet`` / ``seeds-eval-<n>.parquet``.
2. **Pipeline**, in a fresh child process (so the generation's memory does not
   count), on LocalDagRunner with a new SQLite ML Metadata store per run:
   ``Importer`` (the folder as a ``GraphSchema``) -> ``GnnTrainer`` with the
   graph in memory (``graph_schema``, ``seeds``, ``sampling_config``
   ``{"seed_node_set": "user", "hops": [{"follows": 10}, {"follows": 5}]}``,
   ``graph_mode: "sampled"``, one epoch over the training seeds, batch 128,
   validation on the evaluation seeds; the user module of
   ``benchmarks.in_memory``, ``module_path="benchmarks.in_memory"``) ->
   ``GraphInferrer`` over every node (``inference_config`` ``mode``:
   ``--inference-mode``, ``sampled`` or ``full_graph``; signature ``embeddings``).
3. **Lineage**, read back from ML Metadata: the Embeddings artifact's producer is
   the GraphInferrer execution, whose inputs are the Model and the GraphSchema;
   the Model's producer is the GnnTrainer execution, whose input is the same
   GraphSchema (the imported folder). Any mismatch fails the run.

Measured (the JSON keys):

* ``load_s``: GnnTrainer's loading of the tables (read and check the Parquet
  tables, ids to indices, CSR by source, seeds). Neither the Model's properties
  nor the executor's log record it, so it is the time between two of the
  executor's log lines: the last one before loading (the strategy's,
  ``GnnTrainer: the default strategy, 1 replica(s) in sync on ...``; between
  the two the executor parses its config and imports the user module, a few
  ms; ``load_start_log`` says which line it was) and ``GnnTrainer: graph in
  memory from ...``, logged once the node, edge and seed tables are read and
  the edges ordered by source. ``load_s_to_graph_mode`` runs on to the
  ``GnnTrainer graph_mode:`` line (the sampler built, the mode chosen).
* ``train_s``: from the ``GnnTrainer phase: train`` line to ``GnnTrainer phase:
  export`` (model build, tracing, the epoch, validation), as
  ``benchmarks.speed`` times it; ``trainer_s``: the GnnTrainer execution (MLMD
  create to last update: loading, training, export, parity check).
* ``inference_s``: the Embeddings artifact's ``inference_seconds`` property
  (GraphInferrer's own timing, loading the tables again included);
  ``inferrer_s``: its execution in MLMD.
* ``peak_rss_gb``: the larger of the pipeline process's ``ru_maxrss`` and its
  children's (``peak_rss_self_gb``, ``peak_rss_children_gb``: the ``uname`` and
  ``lscpu`` TFX's import runs, whose ``ru_maxrss`` counts the pages they shared
  with this process when forked, about 0.45 GB), in GB (1e9 bytes);
  ``rss_gb_at``: its current RSS when GnnTrainer had loaded the graph, when it
  was done, when GraphInferrer had loaded it, and at the end (the two
  executors run one after the other in this one process).
* ``pipeline_s``: ``LocalDagRunner().run(...)``, start to end.
* ``generate_s``: the graph's generation (child process wall time, tables written).
* the graph: ``num_nodes``, ``num_edges``, ``max_degree``, ``median_degree``,
  ``tables_mb`` (on disk), ``train_seeds``, ``eval_seeds``; the
  ``embeddings_rows`` of ``embeddings.parquet``, the Model's ``graph_mode`` and
  eval accuracy.

The targets (issue 54) are printed beside (``targets``, ``met``): load ≤ 180 s,
peak RSS ≤ 16 GB, pipeline ≤ 45 min. Prints one JSON object (the last line of
stdout; a table on stderr) and writes it to ``--output``. The executors' log
lines are kept in ``<run dir>/pipeline.log``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import time
from typing import Any, Optional, Sequence

from benchmarks import report

#: Graph and sampling: the ``benchmarks.in_memory`` benchmark's.
SAMPLING_CONFIG = {"seed_node_set": "user", "hops": [{"follows": 10}, {"follows": 5}]}
BATCH_SIZE = 128
MODULE_PATH = "benchmarks.in_memory"
PIPELINE_NAME = "gnn-scale"
INFERENCE_MODES = ("sampled", "full_graph")
#: Targets of issue 54 (part 6b).
TARGETS = {"load_s": 180.0, "peak_rss_gb": 16.0, "pipeline_s": 45 * 60.0}
#: Keys every result has (the smoke test checks them).
RESULT_KEYS = ("load_s", "train_s", "inference_s", "peak_rss_gb", "pipeline_s", "generate_s",
               "num_nodes", "num_edges", "embeddings_rows", "lineage", "targets", "met")
#: The line logged once the tables and seeds are in memory (``in_memory/store.py``);
#: loading starts after the GnnTrainer line before it.
LOAD_END_LOG = "GnnTrainer: graph in memory from"
GRAPH_MODE_LOG = "GnnTrainer graph_mode:"
PHASE_PREFIX = "GnnTrainer phase: "

EMBEDDINGS_TYPE = "gnn_trainer_component.Embeddings"
GRAPH_SCHEMA_TYPE = "gnn_trainer_component.GraphSchema"


def _gb(kib: float) -> float:
  return round(kib * 1024 / 1e9, 3)


def default_eval_seeds(train_seeds: int) -> int:
  """A tenth of the training seeds, between 100 and 10,000."""
  return max(100, min(10_000, train_seeds // 10))


# The graph.

def generate_graph(work_dir: str, *, num_nodes: int, num_edges: int, train_seeds: int,
                   eval_seeds: int, shards: int) -> dict[str, Any]:
  """The Parquet graph in ``work_dir/graph``: generated in a child process, or reused.

  Returns:
    ``power_law_graph.generate``'s summary plus ``dir``, ``reused`` and
    ``seed_tables`` (split -> a table of exactly the asked number of seeds).
  """
  from benchmarks import in_memory  # pylint: disable=g-import-not-at-top  (no TF imported)
  summary = in_memory.generate_graph(
      work_dir, num_nodes, num_edges,
      in_memory.seed_fraction(num_nodes, train_seeds, eval_seeds), format="parquet",
      shards=shards)
  graph_dir = summary["dir"]
  summary["seed_tables"] = {
      "train": _seed_table(graph_dir, summary["seed_tables"]["train"], "train", train_seeds),
      "eval": _seed_table(graph_dir, summary["seed_tables"]["eval"], "eval", eval_seeds)}
  return summary


def _seed_table(graph_dir: str, source: str, split: str, n: int) -> str:
  """A seed table of the first ``n`` ids of ``source`` (written once), column-wise."""
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top
  name = f"seeds-{split}-{n}.parquet"
  path = os.path.join(graph_dir, name)
  if not os.path.exists(path):
    ids = pq.read_table(os.path.join(graph_dir, source), columns=["id"])
    if ids.num_rows < n:
      raise ValueError(f"{source} holds {ids.num_rows} seeds, fewer than the {n} asked for.")
    pq.write_table(ids.slice(0, n), path + ".tmp")
    os.replace(path + ".tmp", path)
  return name


def tables_bytes(graph_dir: str) -> dict[str, int]:
  """Bytes on disk of the node and edge tables."""
  out = {"nodes": 0, "edges": 0}
  for name in os.listdir(graph_dir):
    for kind in out:
      if name.startswith(f"{kind}-") and name.endswith(".parquet"):
        out[kind] += os.path.getsize(os.path.join(graph_dir, name))
  return out


# The pipeline (in the child process).

def _rss_gb() -> float:
  """This process's current resident memory in GB (``/proc/self/statm``; 0 where unknown)."""
  try:
    with open("/proc/self/statm") as f:
      return round(int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e9, 3)
  except (OSError, ValueError, IndexError):
    return 0.0


class _LogLines(logging.Handler):
  """Keeps the executors' INFO lines (absl -> Python logging): time, message, current RSS."""

  def __init__(self, path: str):
    super().__init__(level=logging.INFO)
    self.lines: list[tuple[float, str]] = []
    self.rss: list[float] = []
    self._file = open(path, "w", encoding="utf-8")  # pylint: disable=consider-using-with

  def emit(self, record: logging.LogRecord) -> None:
    try:
      message = record.getMessage()
    except Exception:  # pylint: disable=broad-except
      return
    if message.startswith(("GnnTrainer", "GraphInferrer")):
      rss = _rss_gb()
      self.lines.append((record.created, message))
      self.rss.append(rss)
      self._file.write(f"{record.created:.3f} rss={rss:.3f}GB {message[:2000]}\n")
      self._file.flush()

  def rss_at(self, prefix: str) -> Optional[float]:
    """The current RSS when the first line starting with ``prefix`` was logged."""
    found = (r for (_, m), r in zip(self.lines, self.rss, strict=True) if m.startswith(prefix))
    return next(found, None)

  def close(self) -> None:
    self._file.close()
    super().close()


def load_seconds(lines: Sequence[tuple[float, str]]) -> dict[str, Optional[float]]:
  """GnnTrainer's table loading, from the times of its log lines (see the module doc)."""
  end = next((t for t, m in lines if m.startswith(LOAD_END_LOG)), None)
  mode = next((t for t, m in lines if m.startswith(GRAPH_MODE_LOG)), None)
  if end is None:
    return {"load_s": None, "load_s_to_graph_mode": None, "load_start_log": None}
  trainer = [(t, m) for t, m in lines if m.startswith("GnnTrainer")]
  at = next(i for i, (_, m) in enumerate(trainer) if m.startswith(LOAD_END_LOG))
  before = trainer[:at]
  if not before:
    return {"load_s": None, "load_s_to_graph_mode": None, "load_start_log": None}
  start, message = before[-1]
  return {"load_s": round(end - start, 1),
          "load_s_to_graph_mode": None if mode is None else round(mode - start, 1),
          "load_start_log": message[:120]}


def phase_seconds(lines: Sequence[tuple[float, str]], first: str, second: str
                  ) -> Optional[float]:
  times = {}
  for t, m in lines:
    if m.startswith(PHASE_PREFIX):
      times.setdefault(m[len(PHASE_PREFIX):].strip(), t)
  if first in times and second in times:
    return round(times[second] - times[first], 1)
  return None


class LineageError(RuntimeError):
  pass


def check_lineage(metadata: str, graph_dir: str) -> dict[str, Any]:
  """Embeddings <- GraphInferrer <- (Model, GraphSchema); Model <- GnnTrainer <- GraphSchema.

  Raises:
    LineageError: a link is missing or points elsewhere.
  """
  from pipelines.runtime import mlmd_utils  # pylint: disable=g-import-not-at-top
  store = mlmd_utils.store(metadata)
  embeddings = mlmd_utils.latest_artifact(metadata, EMBEDDINGS_TYPE, PIPELINE_NAME)
  model = mlmd_utils.latest_artifact(metadata, "Model", PIPELINE_NAME)
  inferrer, inferrer_type = mlmd_utils.producer(store, embeddings.id)
  trainer, trainer_type = mlmd_utils.producer(store, model.id)
  inferrer_inputs = mlmd_utils.execution_inputs(store, inferrer.id)
  trainer_inputs = mlmd_utils.execution_inputs(store, trainer.id)

  def one(inputs, type_name, who):
    found = inputs.get(type_name, [])
    if len(found) != 1:
      raise LineageError(f"{who} has {len(found)} {type_name} inputs (inputs: {sorted(inputs)})")
    return found[0]

  problems = []
  if not inferrer_type.endswith("GraphInferrer"):
    problems.append(f"Embeddings produced by {inferrer_type}, not GraphInferrer")
  if not trainer_type.endswith("GnnTrainer"):
    problems.append(f"Model produced by {trainer_type}, not GnnTrainer")
  if set(inferrer_inputs) != {"Model", GRAPH_SCHEMA_TYPE}:
    problems.append(f"GraphInferrer's inputs are {sorted(inferrer_inputs)}")
  if set(trainer_inputs) != {GRAPH_SCHEMA_TYPE}:
    problems.append(f"GnnTrainer's inputs are {sorted(trainer_inputs)}")
  inferred_model = one(inferrer_inputs, "Model", "GraphInferrer")
  inferred_graph = one(inferrer_inputs, GRAPH_SCHEMA_TYPE, "GraphInferrer")
  trained_graph = one(trainer_inputs, GRAPH_SCHEMA_TYPE, "GnnTrainer")
  if inferred_model.id != model.id:
    problems.append(f"GraphInferrer read Model {inferred_model.id}, not {model.id}")
  if inferred_graph.id != trained_graph.id:
    problems.append(f"GraphInferrer read GraphSchema {inferred_graph.id}, GnnTrainer "
                    f"{trained_graph.id}")
  if os.path.normpath(trained_graph.uri) != os.path.normpath(graph_dir):
    problems.append(f"the GraphSchema is {trained_graph.uri}, not {graph_dir}")
  if problems:
    raise LineageError("; ".join(problems))

  def seconds(execution) -> float:
    return round((execution.last_update_time_since_epoch
                  - execution.create_time_since_epoch) / 1e3, 1)

  return {
      "ok": True,
      "embeddings": {"id": embeddings.id, "uri": embeddings.uri, "producer": inferrer_type,
                     "execution": inferrer.id},
      "graph_inferrer_inputs": {"Model": model.id, GRAPH_SCHEMA_TYPE: inferred_graph.id},
      "model": {"id": model.id, "uri": model.uri, "producer": trainer_type,
                "execution": trainer.id},
      "gnn_trainer_inputs": {GRAPH_SCHEMA_TYPE: trained_graph.id},
      "graph_schema_uri": trained_graph.uri,
      "trainer_s": seconds(trainer), "inferrer_s": seconds(inferrer),
      "embeddings_properties": mlmd_utils.custom_properties(embeddings),
      "model_properties": mlmd_utils.custom_properties(model),
  }


def build_pipeline(job: dict[str, Any]):
  """Importer -> GnnTrainer (graph in memory) -> GraphInferrer, as a TFX pipeline."""
  # pylint: disable=g-import-not-at-top
  from tfx import v1 as tfx
  from gnn_trainer_component import GnnTrainer, GraphInferrer, GraphSchema
  from pipelines.runtime import mlmd_connection
  # pylint: enable=g-import-not-at-top
  tables = tfx.dsl.Importer(source_uri=job["graph_dir"],
                            artifact_type=GraphSchema).with_id("graph_tables")
  trainer = GnnTrainer(
      graph_schema=tables.outputs["result"], seeds=job["seed_tables"],
      sampling_config=SAMPLING_CONFIG, module_path=MODULE_PATH,
      train_args=tfx.proto.TrainArgs(splits=["train"]),
      eval_args=tfx.proto.EvalArgs(splits=["eval"]),
      custom_config={"global_batch_size": BATCH_SIZE, "epochs": 1, "seed": 0,
                     "graph_mode": "sampled"})
  inferrer = GraphInferrer(
      model=trainer.outputs["model"], graph_schema=tables.outputs["result"],
      sampling_config=SAMPLING_CONFIG,
      inference_config={"mode": job["inference_mode"], "signatures": ["embeddings"]})
  return tfx.dsl.Pipeline(
      pipeline_name=PIPELINE_NAME, pipeline_root=os.path.join(job["run_dir"], "pipeline_root"),
      components=[tables, trainer, inferrer],
      metadata_connection_config=mlmd_connection.pipeline_connection_config(job["metadata"]))


def run_pipeline(job: dict[str, Any]) -> dict[str, Any]:
  """Runs the pipeline in this process; its measures (see the module doc)."""
  import gnn_trainer_component  # pylint: disable=g-import-not-at-top
  gnn_trainer_component.setup_process()  # first: Keras 2, before TensorFlow
  # pylint: disable=g-import-not-at-top
  from absl import logging as absl_logging
  import pyarrow.parquet as pq
  from tfx import v1 as tfx
  # pylint: enable=g-import-not-at-top
  absl_logging.set_verbosity(absl_logging.INFO)
  lines = _LogLines(os.path.join(job["run_dir"], "pipeline.log"))
  logging.getLogger().addHandler(lines)
  try:
    pipeline = build_pipeline(job)
    start = time.perf_counter()
    tfx.orchestration.LocalDagRunner().run(pipeline)
    pipeline_s = time.perf_counter() - start
  finally:
    logging.getLogger().removeHandler(lines)
    lines.close()
  rss_timeline = {  # current RSS (not the peak) at these lines: is memory given back?
      "trainer_loaded": lines.rss_at(LOAD_END_LOG),
      "trainer_done": lines.rss_at(PHASE_PREFIX + "done"),
      "inferrer_loaded": lines.rss_at("GraphInferrer: graph in memory"),
      "inferrer_done": _rss_gb()}
  peak_self = _gb(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
  peak_children = _gb(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
  lineage = check_lineage(job["metadata"], job["graph_dir"])
  embeddings_props = lineage.pop("embeddings_properties")
  model_props = lineage.pop("model_properties")
  rows = pq.ParquetFile(os.path.join(lineage["embeddings"]["uri"],
                                     "embeddings.parquet")).metadata.num_rows
  return {
      **load_seconds(lines.lines),
      "train_s": phase_seconds(lines.lines, "train", "export"),
      "trainer_s": lineage.pop("trainer_s"),
      "inference_s": embeddings_props.get("inference_seconds"),
      "inferrer_s": lineage.pop("inferrer_s"),
      "pipeline_s": round(pipeline_s, 1),
      "peak_rss_gb": max(peak_self, peak_children),
      "peak_rss_self_gb": peak_self, "peak_rss_children_gb": peak_children,
      "rss_gb_at": rss_timeline,
      "embeddings_rows": rows, "embeddings_num_nodes": embeddings_props.get("num_nodes"),
      "inference_mode": embeddings_props.get("mode"),
      "graph_mode": model_props.get("graph_mode"),
      "train_steps": model_props.get("train_steps"),
      "eval_accuracy": model_props.get("eval_sparse_categorical_accuracy"),
      "lineage": lineage,
  }


# The benchmark.

def _table(result: dict[str, Any]) -> str:
  rows = [("load_s", "GnnTrainer's table loading"), ("train_s", "training, one epoch"),
          ("inference_s", "GraphInferrer"), ("pipeline_s", "the whole pipeline"),
          ("peak_rss_gb", "peak RSS"), ("generate_s", "graph generation")]
  out = []
  for key, what in rows:
    target = TARGETS.get(key)
    met = result["met"].get(key)
    out.append(f"{what:28s} {key:12s} {result.get(key)!s:>10s}"
               + (f"   target <= {target:g}: {'met' if met else 'NOT met'}"
                  if target is not None else ""))
  return "\n".join(out)


def main(argv: Optional[Sequence[str]] = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--num-nodes", type=int, default=10_000_000)
  p.add_argument("--num-edges", type=int, default=100_000_000)
  p.add_argument("--train-seeds", type=int, default=1_000_000,
                 help="Training seeds: one epoch over them.")
  p.add_argument("--eval-seeds", type=int, default=None,
                 help="Validation seeds (default: a tenth of --train-seeds, 100 to 10,000).")
  p.add_argument("--inference-mode", choices=INFERENCE_MODES, default="sampled",
                 help="GraphInferrer's inference_config mode.")
  p.add_argument("--shards", type=int, default=8, help="Parquet files per table.")
  p.add_argument("--work-dir", default=os.path.join("/tmp", "gnn-scale"),
                 help="The graph (reused when its sizes match) and each run's folder.")
  p.add_argument("--output", default=None, help="Also write the JSON here.")
  p.add_argument("--run-pipeline", default=None, help=argparse.SUPPRESS)  # the child
  args = p.parse_args(argv)

  if args.run_pipeline:  # the pipeline's own process
    with open(args.run_pipeline) as f:
      job = json.load(f)
    result = run_pipeline(job)
    with open(job["result"], "w") as f:
      json.dump(result, f)
    return 0

  eval_seeds = args.eval_seeds or default_eval_seeds(args.train_seeds)
  os.makedirs(args.work_dir, exist_ok=True)
  graph = generate_graph(args.work_dir, num_nodes=args.num_nodes, num_edges=args.num_edges,
                         train_seeds=args.train_seeds, eval_seeds=eval_seeds,
                         shards=args.shards)
  run_dir = os.path.join(args.work_dir, "runs", time.strftime("%Y%m%d-%H%M%S"))
  os.makedirs(run_dir)
  job = {"graph_dir": graph["dir"], "seed_tables": graph["seed_tables"],
         "inference_mode": args.inference_mode, "run_dir": run_dir,
         "metadata": os.path.join(run_dir, "metadata.sqlite"),
         "result": os.path.join(run_dir, "result.json")}
  job_path = os.path.join(run_dir, "job.json")
  with open(job_path, "w") as f:
    json.dump(job, f)
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1")
  with open(os.path.join(run_dir, "pipeline.stderr"), "w") as err:
    done = subprocess.run([sys.executable, "-m", "benchmarks.scale", "--run-pipeline", job_path],
                          cwd=report.REPO_ROOT, env=env, stdout=err, stderr=err, check=False)
  if done.returncode != 0:
    with open(os.path.join(run_dir, "pipeline.stderr")) as f:
      tail = f.read()[-4000:]
    print(tail, file=sys.stderr)
    raise SystemExit(f"the pipeline process exited {done.returncode}; its output: "
                     f"{os.path.join(run_dir, 'pipeline.stderr')}")
  with open(job["result"]) as f:
    measured = json.load(f)

  sizes = tables_bytes(graph["dir"])
  result = {
      "benchmark": "scale", **measured,
      "generate_s": graph.get("generate_s"), "generate_reused": graph["reused"],
      "num_nodes": graph["num_nodes"], "num_edges": graph["num_edges"],
      "max_degree": graph["max_degree"], "median_degree": graph["median_degree"],
      "tables_mb": {k: round(v / 1e6, 1) for k, v in sizes.items()},
      "shards": args.shards, "train_seeds": args.train_seeds, "eval_seeds": eval_seeds,
      "sampling_config": SAMPLING_CONFIG, "batch_size": BATCH_SIZE, "module_path": MODULE_PATH,
      "targets": TARGETS,
      "met": {k: measured.get(k) is not None and measured[k] <= v for k, v in TARGETS.items()},
      "run_dir": run_dir, "metadata": job["metadata"], "graph_dir": graph["dir"],
      "machine": _machine(), "source": _source_version(),
  }
  if result["embeddings_rows"] != graph["num_nodes"]:
    raise SystemExit(f"embeddings.parquet has {result['embeddings_rows']} rows for "
                     f"{graph['num_nodes']} nodes")
  print(_table(result), file=sys.stderr)
  report.print_result(result, args.output)
  return 0


def _machine() -> dict[str, Any]:
  return {"cpu_count": os.cpu_count(),
          "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1),
          "python": sys.version.split()[0]}


def _source_version() -> dict[str, Any]:
  from benchmarks import in_memory  # pylint: disable=g-import-not-at-top
  return in_memory.source_version()


if __name__ == "__main__":
  sys.exit(main())
