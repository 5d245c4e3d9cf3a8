"""The scale benchmark (benchmarks/scale.py) runs end to end, at the smoke size.

``python -m benchmarks.scale --num-nodes 100000 --num-edges 1000000 --train-seeds 10000``
as a user runs it (a subprocess): the generated Parquet graph -> Importer ->
GnnTrainer (graph in memory) -> GraphInferrer on LocalDagRunner. Checked here:
the JSON line's keys, the Embeddings table's rows (every node), and the
lineage, read again from the run's ML Metadata store. Also: the Parquet tables
``power_law_graph`` writes hold the same graph as its CSV tables. About 30 s
on 2 busy cores.
"""

import glob
import json
import math
import os
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipelines.runtime import mlmd_utils
from tests import helpers
from tests.helpers import REPO_ROOT

pytestmark = pytest.mark.slow

NUM_NODES, NUM_EDGES, TRAIN_SEEDS = 100_000, 1_000_000, 10_000
#: A safety net only: the run takes about 30 s.
TIMEOUT_S = 600


@pytest.fixture(scope="module")
def result(tmp_path_factory):
  work = tmp_path_factory.mktemp("scale")
  output = work / "scale.json"
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.run(
      [sys.executable, "-m", "benchmarks.scale", "--num-nodes", str(NUM_NODES),
       "--num-edges", str(NUM_EDGES), "--train-seeds", str(TRAIN_SEEDS),
       "--work-dir", str(work), "--output", str(output)],
      cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
  assert proc.returncode == 0, (f"benchmarks.scale exited {proc.returncode}\n"
                                f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-5000:]}")
  line = json.loads(proc.stdout.strip().splitlines()[-1])
  with open(output) as f:
    assert json.load(f) == line
  return line


def test_reports_every_measure_and_the_targets(result):
  from benchmarks import scale  # pylint: disable=g-import-not-at-top
  assert set(scale.RESULT_KEYS) <= set(result)
  for key in ("load_s", "train_s", "inference_s", "peak_rss_gb", "pipeline_s", "generate_s"):
    assert isinstance(result[key], (int, float)) and math.isfinite(result[key]), key
    assert result[key] > 0, key
  assert result["load_start_log"].startswith("GnnTrainer")
  assert result["pipeline_s"] > result["inference_s"] and result["pipeline_s"] > result["train_s"]
  assert result["targets"] == scale.TARGETS and set(result["met"]) == set(scale.TARGETS)
  assert (result["num_nodes"], result["num_edges"]) == (NUM_NODES, NUM_EDGES)
  assert (result["train_seeds"], result["eval_seeds"]) == (TRAIN_SEEDS, 1000)
  assert result["graph_mode"] == "sampled" and result["inference_mode"] == "sampled"
  assert result["train_steps"] == math.ceil(TRAIN_SEEDS / scale.BATCH_SIZE)


def test_the_graph_is_parquet_named_by_globs(result):
  graph_dir = result["graph_dir"]
  with open(os.path.join(graph_dir, "graph_schema.pbtxt")) as f:
    schema = f.read()
  assert 'filename: "nodes-*-of-00008.parquet"' in schema
  assert 'filename: "edges-*-of-00008.parquet"' in schema
  edges = sorted(glob.glob(os.path.join(graph_dir, "edges-*-of-00008.parquet")))
  assert len(edges) == 8
  assert sum(pq.ParquetFile(p).metadata.num_rows for p in edges) == NUM_EDGES
  assert str(pq.read_schema(edges[0]).field("source").type) == "int64"


def test_every_node_is_embedded_and_the_lineage_is_recorded(result):
  metadata = result["metadata"]
  store = mlmd_utils.store(metadata)
  embeddings = mlmd_utils.latest_artifact(metadata, "gnn_trainer_component.Embeddings",
                                          "gnn-scale")
  table = pq.read_table(os.path.join(embeddings.uri, "embeddings.parquet"), columns=["id"])
  assert table.num_rows == NUM_NODES == result["embeddings_rows"]
  assert len(set(table.column("id").to_pylist())) == NUM_NODES
  assert mlmd_utils.custom_properties(embeddings)["num_nodes"] == NUM_NODES
  # Embeddings <- GraphInferrer <- Model + GraphSchema
  inferrer, inferrer_type = helpers.producer(store, embeddings.id)
  assert inferrer_type.endswith("GraphInferrer")
  inputs = helpers.execution_inputs(store, inferrer.id)
  assert set(inputs) == {"Model", "gnn_trainer_component.GraphSchema"}
  # Model <- GnnTrainer <- GraphSchema (the same imported folder)
  trainer, trainer_type = helpers.producer(store, inputs["Model"].id)
  assert trainer_type.endswith("GnnTrainer")
  trainer_inputs = helpers.execution_inputs(store, trainer.id)
  assert set(trainer_inputs) == {"gnn_trainer_component.GraphSchema"}
  schema = trainer_inputs["gnn_trainer_component.GraphSchema"]
  assert schema.id == inputs["gnn_trainer_component.GraphSchema"].id
  assert os.path.normpath(schema.uri) == os.path.normpath(result["graph_dir"])
  assert mlmd_utils.custom_properties(inputs["Model"])["graph_mode"] == "sampled"
  assert result["lineage"]["ok"] and result["lineage"]["model"]["id"] == inputs["Model"].id


def test_load_seconds_come_from_the_executor_log_lines():
  from benchmarks import scale  # pylint: disable=g-import-not-at-top
  lines = [(10.0, "GnnTrainer devices: ..."), (11.0, "GnnTrainer: the default strategy, 1 ..."),
           (11.5, "GraphInferrer: unrelated"), (50.25, "GnnTrainer: graph in memory from /g"),
           (51.0, "GnnTrainer graph_mode: sampled"), (52.0, "GnnTrainer phase: train"),
           (90.0, "GnnTrainer phase: export")]
  got = scale.load_seconds(lines)
  assert got["load_s"] == 39.2 and got["load_s_to_graph_mode"] == 40.0
  assert got["load_start_log"].startswith("GnnTrainer: the default strategy")
  assert scale.phase_seconds(lines, "train", "export") == 38.0
  assert scale.load_seconds(lines[:2])["load_s"] is None


@pytest.mark.parametrize("num_nodes,train,evaluation", [
    (10_000_000, 1_000_000, 10_000), (10_000_000, 999_999, 10_000), (100_000, 10_000, 1_000),
    (1_000_000, 100_000, 10_000), (1_000, 90, 10)])
def test_the_seed_fraction_never_gives_fewer_seeds_than_asked(num_nodes, train, evaluation):
  from benchmarks import in_memory  # pylint: disable=g-import-not-at-top
  fraction = in_memory.seed_fraction(num_nodes, train, evaluation)
  seeds = max(2, int(num_nodes * fraction))  # as power_law_graph splits them
  assert int(seeds * 0.9) >= train and seeds - int(seeds * 0.9) >= evaluation
  assert fraction == float(f"{fraction:.6g}")  # the graph cache's key, six digits


def test_parquet_tables_hold_the_csv_tables_graph(tmp_path):
  """Same draws, rows and order; ids ``u<n>`` in CSV are the int64 ``n`` in Parquet."""
  from benchmarks import power_law_graph  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component.graph import ids as graph_ids  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component.in_memory import adapters  # pylint: disable=g-import-not-at-top
  loaded = {}
  for fmt in ("csv", "parquet"):
    out = str(tmp_path / fmt)
    summary = power_law_graph.generate(out, num_nodes=3000, num_edges=40_000, shards=3,
                                       chunk=7_000, seed=4, fmt=fmt)
    loaded[fmt] = (summary, adapters.load(
        out, seeds=summary["seed_tables"], splits=["train", "eval"],
        sampling_config={"seed_node_set": "user", "hops": [{"follows": 4}]}))
  (csv_summary, csv), (pq_summary, parquet) = loaded["csv"], loaded["parquet"]
  assert pq_summary.pop("format") == "parquet"
  for summary in (csv_summary, pq_summary):
    for key in ("seconds", "bytes", "graph_schema", "seed_tables"):
      summary.pop(key)
  assert csv_summary == pq_summary
  a, b = csv.sampler.graph, parquet.sampler.graph
  # Parquet's int64 ids are the CSV's ids without their "u".
  assert b.node_sets["user"].ids.dtype == np.int64
  assert [i[1:] for i in a.node_sets["user"].ids] == list(
      graph_ids.id_bytes(b.node_sets["user"].ids))
  np.testing.assert_array_equal(a.node_sets["user"].features["label"],
                                b.node_sets["user"].features["label"])
  np.testing.assert_allclose(a.node_sets["user"].features["score"],  # CSV: 5 decimals
                             b.node_sets["user"].features["score"], atol=1e-5)
  for name in ("indptr", "target"):
    np.testing.assert_array_equal(getattr(a.edge_sets["follows"], name),
                                  getattr(b.edge_sets["follows"], name))
  for split in ("train", "eval"):
    np.testing.assert_array_equal(csv.seeds[split], parquet.seeds[split])
